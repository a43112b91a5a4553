#include "engine/model_runtime.h"

#include <algorithm>

#include "kv/block_pool.h"

namespace trellis {

Result<LoadedModel> load_model(const std::string& path, const ChooseLayers& choose) {
  LoadedModel loaded;
  Result<GgufFile> file = GgufFile::open(path);
  if (!file.ok()) return file.error();
  loaded.file = std::make_unique<GgufFile>(std::move(file).value());
  Result<LayerRange> range = LayerRange{};
  if (choose) {
    range = choose(*loaded.file);
    if (!range.ok()) return range.error();
  }
  Result<std::unique_ptr<Model>> model =
      choose ? Model::load(*loaded.file, *range) : Model::load(*loaded.file);
  if (!model.ok()) return model.error();
  loaded.model = std::move(model).value();
  Result<Vocab> vocab = load_vocab(*loaded.file);
  if (!vocab.ok()) return vocab.error();
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(vocab).value());
  if (!tokenizer.ok()) return tokenizer.error();
  loaded.tokenizer = std::move(tokenizer).value();
  if (loaded.tokenizer->vocab().size() != loaded.model->hparams().n_vocab) {
    return Error{path + ": the tokenizer has " + std::to_string(loaded.tokenizer->vocab().size()) +
                 " tokens but the model's vocab is " +
                 std::to_string(loaded.model->hparams().n_vocab)};
  }
  return loaded;
}

namespace {

// Window pages out of a byte budget: those wanted, up to half the budget and leaving the blocks
// one context (and a block), but at least one request's.
int32_t pages_for_budget(const KvLayout& layout, int32_t n_ctx, int64_t kv_bytes,
                         WindowPageNeed need) {
  const int64_t wanted = int64_t{need.pages_per_seq} * need.max_seqs;
  if (kv_bytes <= 0) return static_cast<int32_t>(wanted);
  const int64_t context_blocks = (int64_t{n_ctx} + layout.block_size - 1) / layout.block_size + 1;
  const int64_t spare = std::min(
      kv_bytes / 2, kv_bytes - context_blocks * static_cast<int64_t>(layout.bytes_per_block()));
  const int64_t affordable = spare / static_cast<int64_t>(layout.bytes_per_page());
  return static_cast<int32_t>(std::max<int64_t>(need.pages_per_seq, std::min(wanted, affordable)));
}

}  // namespace

Result<KvPoolSize> size_kv_pool(const KvLayout& layout, int32_t n_ctx, int64_t kv_bytes,
                                int64_t kv_tokens, WindowPageNeed pages) {
  const int32_t B = layout.block_size;
  const bool windowed = layout.n_windowed_layers() > 0 && pages.pages_per_seq > 0;
  const int32_t n_pages = windowed ? pages_for_budget(layout, n_ctx, kv_bytes, pages) : 0;
  const int64_t block_budget =
      kv_bytes - int64_t{n_pages} * static_cast<int64_t>(windowed ? layout.bytes_per_page() : 0);
  Result<int32_t> n_blocks =
      kv_bytes > 0
          ? (block_budget > 0
                 ? blocks_for_bytes(block_budget, static_cast<int64_t>(layout.bytes_per_block()))
                 : Result<int32_t>(Error{"the window pages take it all"}))
      : kv_tokens > 0 ? blocks_for_tokens(kv_tokens, B)
                      : blocks_for_tokens(4 * int64_t{n_ctx}, B);
  if (!n_blocks.ok()) return Error{"KV pool size: " + n_blocks.error().message};
  if (kv_bytes <= 0 && kv_tokens <= 0) *n_blocks = std::max(*n_blocks, (n_ctx + B - 1) / B + 1);
  if (*n_blocks < 2) {
    return Error{"the KV pool of " + std::to_string(*n_blocks) +
                 " block(s) is too small: it needs at least 2 blocks of " + std::to_string(B) +
                 " tokens"};
  }
  return KvPoolSize{*n_blocks, n_pages, std::min(n_ctx, (*n_blocks - 1) * B)};
}

Result<KvRuntime> create_kv_runtime(const Model& model, int32_t block_size, KvTypes kv_types,
                                    int32_t n_ctx, int64_t kv_bytes, int64_t kv_tokens,
                                    const PrefixCacheConfig& prefix_cache,
                                    const KvWindowing& windowing) {
  if (n_ctx <= 0) n_ctx = static_cast<int32_t>(model.hparams().n_ctx_train);
  KvLayout layout = model.kv_layout(block_size, kv_types);
  WindowPolicy window;
  const ModelHParams& hp = model.hparams();
  if (windowing.windows_only && hp.n_swa > 0 && hp.n_swa < n_ctx) {
    for (int64_t il = model.layer_range().begin; il < model.layer_range().end; ++il)
      layout.windowed.push_back(hp.is_local_layer(il) ? 1 : 0);
    window = WindowPolicy{nullptr, hp.n_swa, windowing.max_step_tokens};
  }
  // A pool's budget covers every layer, wherever they are held: the blocks are counted for the
  // whole model, and a pipeline stage stores its layers' share of each.
  return create_kv_runtime(layout, hp.n_layer, n_ctx, kv_bytes, kv_tokens, prefix_cache, window,
                           windowing.max_seqs);
}

Result<KvRuntime> create_kv_runtime(const KvLayout& layout, int64_t n_layer_total, int32_t n_ctx,
                                    int64_t kv_bytes, int64_t kv_tokens,
                                    const PrefixCacheConfig& prefix_cache, WindowPolicy window,
                                    int32_t max_seqs) {
  KvLayout whole = layout;
  whole.n_layer = n_layer_total;
  if (!layout.windowed.empty() && n_layer_total != layout.n_layer) whole.windowed.clear();
  const bool windowed = whole.n_windowed_layers() > 0 && window.n_swa > 0;
  if (!windowed) {
    whole.windowed.clear();
    window = {};
  }
  const WindowPageNeed need{windowed ? PrefixCache::page_quota(whole.block_size, window) : 0,
                            max_seqs};
  Result<KvPoolSize> size = size_kv_pool(whole, n_ctx, kv_bytes, kv_tokens, need);
  if (!size.ok()) return size.error();
  KvLayout stored = layout;
  if (!windowed) stored.windowed.clear();
  Result<KvStorage> kv = KvStorage::create(stored, size->n_blocks, size->n_pages);
  if (!kv.ok()) return kv.error();
  KvRuntime runtime;
  runtime.n_ctx = size->n_ctx;
  runtime.kv = std::make_unique<KvStorage>(std::move(kv).value());
  runtime.blocks = std::make_unique<BlockPool>(size->n_blocks);
  if (windowed) {
    runtime.pages = std::make_unique<WindowPages>(*runtime.kv, *runtime.blocks);
    window.pages = runtime.pages.get();
  }
  runtime.cache = std::make_unique<PrefixCache>(*runtime.blocks, *runtime.kv, prefix_cache, window);
  return runtime;
}

}  // namespace trellis
