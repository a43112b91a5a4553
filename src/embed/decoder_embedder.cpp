#include "embed/decoder_embedder.h"

#include <algorithm>
#include <cmath>

#include "model/input_check.h"
#include "model/tensor_binding.h"

namespace trellis {
namespace {

// The context served: the model's, up to this (the KV blocks are sized for a whole context).
constexpr int64_t kMaxContext = 8192;
// Inputs one run takes at most (each adds a partial block and a sequence to the batch).
constexpr size_t kMaxGroup = 64;

int32_t blocks_for(int64_t tokens, int32_t block_size) {
  return static_cast<int32_t>((tokens + block_size - 1) / block_size);
}

// The longest prefix that inputs [begin, end) share, short of each one's last token (which every
// input computes itself, for its output row).
int64_t common_prefix(std::span<const std::vector<TokenId>> inputs, size_t begin, size_t end) {
  int64_t n = static_cast<int64_t>(inputs[begin].size()) - 1;
  for (size_t i = begin + 1; i < end; ++i) {
    const std::vector<TokenId>& a = inputs[begin];
    const std::vector<TokenId>& b = inputs[i];
    n = std::min<int64_t>(n, static_cast<int64_t>(b.size()) - 1);
    int64_t k = 0;
    while (k < n && a[static_cast<size_t>(k)] == b[static_cast<size_t>(k)]) ++k;
    n = k;
  }
  return std::max<int64_t>(n, 0);
}

}  // namespace

Result<std::unique_ptr<Embedder>> DecoderEmbedder::open(std::unique_ptr<GgufFile> file,
                                                        std::unique_ptr<Tokenizer> tokenizer,
                                                        const EmbedderOptions& options) {
  Result<std::unique_ptr<Model>> model = Model::load(*file);
  if (!model.ok()) return model.error();
  const std::string arch(file_architecture((*model)->architecture()));
  Result<int64_t> code = file->get_int_or(arch + ".pooling_type", 0);
  if (!code.ok()) return code.error();
  const std::optional<Pooling> pooling = pooling_from_code(*code);
  if (!pooling || (*pooling != Pooling::LAST && *pooling != Pooling::RANK)) {
    return Error{file->name() + ": not an embedding model or reranker (" + arch +
                 ".pooling_type is " + std::to_string(*code) +
                 "; a decoder embeds with 3, last, or reranks with 4, rank): serve it to generate"};
  }
  auto embedder = std::unique_ptr<DecoderEmbedder>(new DecoderEmbedder(
      std::move(file), std::move(model).value(), std::move(tokenizer), options));
  embedder->pooling_ = *pooling;
  if (*pooling == Pooling::RANK) {
    const GgufTensor* cls = embedder->file_->find_tensor("cls.output.weight");
    if (cls == nullptr || cls->shape.size() < 2 || cls->shape[1] < 1) {
      return Error{embedder->file_->name() +
                   ": a reranker needs cls.output.weight (its yes/no classifier)"};
    }
    TRELLIS_ASSIGN(embedder->cls_out_,
                   bind_matrix(*embedder->file_, "cls.output.weight",
                               embedder->model_->hparams().n_embd, cls->shape[1]));
  }
  Result<std::string> prompt = embedder->file_->get_string_or("tokenizer.chat_template.rerank", "");
  if (!prompt.ok()) return prompt.error();
  embedder->rerank_prompt_ = *prompt;
  return std::unique_ptr<Embedder>(std::move(embedder));
}

DecoderEmbedder::DecoderEmbedder(std::unique_ptr<GgufFile> file, std::unique_ptr<Model> model,
                                 std::unique_ptr<Tokenizer> tokenizer,
                                 const EmbedderOptions& options)
    : file_(std::move(file)),
      model_(std::move(model)),
      tokenizer_(std::move(tokenizer)),
      n_ctx_(static_cast<int32_t>(std::min(model_->hparams().n_ctx_train, kMaxContext))),
      pool_(options.n_threads > 0 ? options.n_threads : ThreadPool::default_thread_count()) {
  const int32_t max_rows = std::max(options.max_batch_tokens, n_ctx_);
  ws_ = std::make_unique<Workspace>(model_->hparams(), max_rows);
  const KvLayout layout = model_->kv_layout(block_size_, KvTypes{});
  ws_->attention_scratch.reserve(pool_.size(), layout, model_->hparams().n_head, n_ctx_, max_rows);
  // A whole context of prefix, a workspace of suffixes, and each input's partial blocks.
  const int32_t n_blocks = blocks_for(n_ctx_, block_size_) + blocks_for(max_rows, block_size_) +
                           2 * static_cast<int32_t>(kMaxGroup) + 1;
  Result<KvStorage> kv = KvStorage::create(layout, n_blocks);
  if (kv.ok()) kv_ = std::make_unique<KvStorage>(std::move(kv).value());
  batch_.reserve(max_rows, static_cast<int32_t>(kMaxGroup));
}

int64_t DecoderEmbedder::n_out() const {
  return pooling_ == Pooling::RANK ? cls_out_.n_out : model_->hparams().n_embd;
}

Status DecoderEmbedder::check_input(std::span<const TokenId> input) const {
  return check_input_tokens(input, n_ctx_, model_->hparams().n_vocab);
}

Result<std::vector<std::vector<float>>> DecoderEmbedder::embed(
    std::span<const std::vector<TokenId>> inputs) {
  if (kv_ == nullptr) return Error{"no memory for the KV blocks of the embedding model"};
  for (size_t i = 0; i < inputs.size(); ++i) {
    Status valid = check_input(inputs[i]);
    if (!valid.ok()) return Error{"input " + std::to_string(i) + " " + valid.error().message};
  }
  std::vector<std::vector<float>> out(inputs.size());
  for (size_t begin = 0; begin < inputs.size();) {
    const size_t end = group_end(inputs, begin);
    run_group(inputs, begin, end, out);
    begin = end;
  }
  return out;
}

size_t DecoderEmbedder::group_end(std::span<const std::vector<TokenId>> inputs,
                                  size_t begin) const {
  size_t end = begin + 1;  // one input always fits: the workspace and the blocks hold a context
  while (end < inputs.size() && end - begin < kMaxGroup) {
    const int64_t prefix = common_prefix(inputs, begin, end + 1);
    int64_t rows = 0;
    int32_t blocks = blocks_for(prefix, block_size_);
    for (size_t i = begin; i <= end; ++i) {
      const auto n = static_cast<int64_t>(inputs[i].size());
      rows += n - prefix;
      blocks += blocks_for(n, block_size_) - static_cast<int32_t>(prefix / block_size_);
    }
    if (rows > ws_->max_rows() || blocks > kv_->n_blocks()) break;
    ++end;
  }
  return end;
}

void DecoderEmbedder::prefill(const TokenId* tokens, int32_t n, const std::vector<int32_t>& table) {
  for (int32_t done = 0; done < n;) {
    const int32_t chunk = std::min(n - done, ws_->max_rows());
    batch_.clear();
    batch_.add_sequence(tokens + done, chunk, done, table, 0);
    model_->forward_hidden(batch_, *kv_, *ws_, pool_, nullptr);
    done += chunk;
  }
}

void DecoderEmbedder::run_group(std::span<const std::vector<TokenId>> inputs, size_t begin,
                                size_t end, std::vector<std::vector<float>>& out) {
  const auto prefix = static_cast<int32_t>(end - begin > 1 ? common_prefix(inputs, begin, end) : 0);
  int32_t next_block = 0;
  auto take_blocks = [&](std::vector<int32_t>& table, int32_t n) {
    for (int32_t i = 0; i < n; ++i) table.push_back(next_block++);
  };
  // The prefix, once.
  std::vector<int32_t> prefix_table;
  take_blocks(prefix_table, blocks_for(prefix, block_size_));
  if (prefix > 0) prefill(inputs[begin].data(), prefix, prefix_table);
  n_shared_tokens_ += prefix;
  // Each input from there: the prefix's full blocks shared, its partial block copied.
  const int32_t full = prefix / block_size_;
  const int32_t partial_slots = prefix % block_size_;
  std::vector<std::vector<int32_t>> tables(end - begin);
  for (size_t i = begin; i < end; ++i) {
    std::vector<int32_t>& table = tables[i - begin];
    table.assign(prefix_table.begin(), prefix_table.begin() + full);
    const auto n = static_cast<int32_t>(inputs[i].size());
    take_blocks(table, blocks_for(n, block_size_) - full);
    if (partial_slots > 0) kv_->copy_block(prefix_table[full], table[full], partial_slots);
  }
  batch_.clear();
  for (size_t i = begin; i < end; ++i) {
    const auto n = static_cast<int32_t>(inputs[i].size());
    batch_.add_sequence(inputs[i].data() + prefix, n - prefix, prefix, tables[i - begin], 1);
  }
  const int64_t n_embd = model_->hparams().n_embd;
  std::vector<float> hidden(static_cast<size_t>(end - begin) * static_cast<size_t>(n_embd));
  model_->forward_hidden(batch_, *kv_, *ws_, pool_, hidden.data());
  for (size_t i = begin; i < end; ++i) out[i] = pool_hidden(hidden.data() + (i - begin) * n_embd);
}

std::vector<float> DecoderEmbedder::pool_hidden(const float* hidden) {
  const int64_t n_embd = model_->hparams().n_embd;
  if (pooling_ != Pooling::RANK) return std::vector<float>(hidden, hidden + n_embd);
  // The classifier's logits, then their softmax: the first is P(yes), the relevance.
  std::vector<float> scores(static_cast<size_t>(cls_out_.n_out));
  matmul(cls_out_, hidden, 1, scores.data(), pool_, ws_->matmul_scratch);
  const float top = *std::max_element(scores.begin(), scores.end());
  double sum = 0.0;
  for (float& s : scores) {
    s = std::exp(s - top);
    sum += s;
  }
  for (float& s : scores) s = static_cast<float>(s / sum);
  return scores;
}

}  // namespace trellis
