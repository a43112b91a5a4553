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

Result<KvPoolSize> size_kv_pool(const KvLayout& layout, int32_t n_ctx, int64_t kv_bytes,
                                int64_t kv_tokens) {
  const int32_t B = layout.block_size;
  Result<int32_t> n_blocks =
      kv_bytes > 0    ? blocks_for_bytes(kv_bytes, static_cast<int64_t>(layout.bytes_per_block()))
      : kv_tokens > 0 ? blocks_for_tokens(kv_tokens, B)
                      : blocks_for_tokens(4 * int64_t{n_ctx}, B);
  if (!n_blocks.ok()) return Error{"KV pool size: " + n_blocks.error().message};
  if (kv_bytes <= 0 && kv_tokens <= 0) *n_blocks = std::max(*n_blocks, (n_ctx + B - 1) / B + 1);
  if (*n_blocks < 2) {
    return Error{"the KV pool of " + std::to_string(*n_blocks) +
                 " block(s) is too small: it needs at least 2 blocks of " + std::to_string(B) +
                 " tokens"};
  }
  return KvPoolSize{*n_blocks, std::min(n_ctx, (*n_blocks - 1) * B)};
}

Result<KvRuntime> create_kv_runtime(const Model& model, int32_t block_size, KvTypes kv_types,
                                    int32_t n_ctx, int64_t kv_bytes, int64_t kv_tokens,
                                    const PrefixCacheConfig& prefix_cache) {
  if (n_ctx <= 0) n_ctx = static_cast<int32_t>(model.hparams().n_ctx_train);
  // A pool's budget covers every layer, wherever they are held: the blocks are counted for the
  // whole model, and a pipeline stage stores its layers' share of each.
  return create_kv_runtime(model.kv_layout(block_size, kv_types), model.hparams().n_layer, n_ctx,
                           kv_bytes, kv_tokens, prefix_cache);
}

Result<KvRuntime> create_kv_runtime(const KvLayout& layout, int64_t n_layer_total, int32_t n_ctx,
                                    int64_t kv_bytes, int64_t kv_tokens,
                                    const PrefixCacheConfig& prefix_cache) {
  KvLayout whole = layout;
  whole.n_layer = n_layer_total;
  Result<KvPoolSize> size = size_kv_pool(whole, n_ctx, kv_bytes, kv_tokens);
  if (!size.ok()) return size.error();
  Result<KvStorage> kv = KvStorage::create(layout, size->n_blocks);
  if (!kv.ok()) return kv.error();
  KvRuntime runtime;
  runtime.n_ctx = size->n_ctx;
  runtime.kv = std::make_unique<KvStorage>(std::move(kv).value());
  runtime.blocks = std::make_unique<BlockPool>(size->n_blocks);
  runtime.cache = std::make_unique<PrefixCache>(*runtime.blocks, *runtime.kv, prefix_cache);
  return runtime;
}

}  // namespace trellis
