#include "model/llama_model.h"

#include <cstring>
#include <string>

#include "kernels/ops.h"
#include "quant/quant.h"

namespace trellis {
namespace {

Result<const GgufTensor*> find_tensor(const GgufFile& file, const std::string& name,
                                      std::vector<int64_t> shape) {
  const GgufTensor* t = file.find_tensor(name);
  if (t == nullptr) return Error{file.name() + ": missing tensor '" + name + "'"};
  // Trailing dimensions of 1 are equivalent to absent ones.
  std::vector<int64_t> actual = t->shape;
  while (actual.size() > shape.size() && actual.back() == 1) actual.pop_back();
  if (actual != shape) {
    auto str = [](const std::vector<int64_t>& s) {
      std::string out = "[";
      for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
      return out + "]";
    };
    return Error{file.name() + ": tensor '" + name + "' has shape " + str(t->shape) +
                 ", expected " + str(shape)};
  }
  return t;
}

Result<WeightView> bind_matrix(const GgufFile& file, const std::string& name, int64_t n_in,
                               int64_t n_out) {
  Result<const GgufTensor*> t = find_tensor(file, name, {n_in, n_out});
  if (!t.ok()) return t.error();
  if (!matmul_supports((*t)->type)) {
    return Error{file.name() + ": tensor '" + name + "' has type " +
                 std::string(dtype_name((*t)->type)) + ", which matmul does not support"};
  }
  return WeightView{(*t)->type, (*t)->data, n_in, n_out};
}

Result<std::vector<float>> bind_vector(const GgufFile& file, const std::string& name, int64_t n) {
  Result<const GgufTensor*> t = find_tensor(file, name, {n});
  if (!t.ok()) return t.error();
  if (!can_dequantize((*t)->type)) {
    return Error{file.name() + ": tensor '" + name + "' has unsupported type " +
                 std::string(dtype_name((*t)->type))};
  }
  std::vector<float> values(static_cast<size_t>(n));
  dequantize_row((*t)->type, (*t)->data, values.data(), n);
  return values;
}

#define TRELLIS_ASSIGN(target, expr)                                         \
  do {                                                                       \
    auto trellis_assign_result_ = (expr);                                    \
    if (!trellis_assign_result_.ok()) return trellis_assign_result_.error(); \
    target = std::move(trellis_assign_result_).value();                      \
  } while (0)

}  // namespace

LlamaWorkspace::LlamaWorkspace(const LlamaHParams& hp, int32_t max_rows) : max_rows_(max_rows) {
  const auto rows = static_cast<size_t>(max_rows);
  x.resize(rows * static_cast<size_t>(hp.n_embd));
  xn.resize(x.size());
  q.resize(x.size());
  attn.resize(x.size());
  proj.resize(x.size());
  out_xn.resize(x.size());
  k.resize(rows * static_cast<size_t>(hp.n_embd_kv()));
  v.resize(k.size());
  gate.resize(rows * static_cast<size_t>(hp.n_ff));
  up.resize(gate.size());
  attention_rows.resize(rows);
}

Result<std::unique_ptr<LlamaModel>> LlamaModel::load(const GgufFile& file) {
  Result<LlamaHParams> hp = read_llama_hparams(file);
  if (!hp.ok()) return hp.error();
  auto model = std::unique_ptr<LlamaModel>(new LlamaModel());
  model->hp_ = *hp;
  const int64_t n_embd = hp->n_embd;
  const int64_t n_embd_kv = hp->n_embd_kv();
  TRELLIS_ASSIGN(model->token_embd_, bind_matrix(file, "token_embd.weight", n_embd, hp->n_vocab));
  if (!can_dequantize(model->token_embd_.type))
    return Error{file.name() + ": token_embd.weight type cannot be read"};
  for (int64_t il = 0; il < hp->n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    LlamaLayer layer;
    TRELLIS_ASSIGN(layer.attn_norm, bind_vector(file, p + "attn_norm.weight", n_embd));
    TRELLIS_ASSIGN(layer.wq, bind_matrix(file, p + "attn_q.weight", n_embd, n_embd));
    TRELLIS_ASSIGN(layer.wk, bind_matrix(file, p + "attn_k.weight", n_embd, n_embd_kv));
    TRELLIS_ASSIGN(layer.wv, bind_matrix(file, p + "attn_v.weight", n_embd, n_embd_kv));
    TRELLIS_ASSIGN(layer.wo, bind_matrix(file, p + "attn_output.weight", n_embd, n_embd));
    TRELLIS_ASSIGN(layer.ffn_norm, bind_vector(file, p + "ffn_norm.weight", n_embd));
    TRELLIS_ASSIGN(layer.w_gate, bind_matrix(file, p + "ffn_gate.weight", n_embd, hp->n_ff));
    TRELLIS_ASSIGN(layer.w_up, bind_matrix(file, p + "ffn_up.weight", n_embd, hp->n_ff));
    TRELLIS_ASSIGN(layer.w_down, bind_matrix(file, p + "ffn_down.weight", hp->n_ff, n_embd));
    model->layers_.push_back(std::move(layer));
  }
  TRELLIS_ASSIGN(model->output_norm_, bind_vector(file, "output_norm.weight", n_embd));
  if (file.find_tensor("output.weight") != nullptr) {
    TRELLIS_ASSIGN(model->output_, bind_matrix(file, "output.weight", n_embd, hp->n_vocab));
  } else {
    model->output_ = model->token_embd_;  // tied embeddings
  }
  return model;
}

KvLayout LlamaModel::kv_layout(int32_t block_size, KvType type) const {
  return KvLayout{hp_.n_layer, hp_.n_head_kv, hp_.head_dim(), block_size, type};
}

Status LlamaModel::validate_batch(const ForwardBatch& batch, const KvStorage& kv,
                                  const LlamaWorkspace& ws) const {
  if (batch.n_rows() > ws.max_rows()) {
    return Error{"batch of " + std::to_string(batch.n_rows()) + " tokens exceeds the workspace (" +
                 std::to_string(ws.max_rows()) + ")"};
  }
  const int32_t block_size = kv.layout().block_size;
  for (const BatchSequence& seq : batch.sequences) {
    for (int32_t block : seq.block_table) {
      if (block < 0 || block >= kv.n_blocks())
        return Error{"block id " + std::to_string(block) + " is invalid"};
    }
    for (int32_t r = seq.row_begin; r < seq.row_end; ++r) {
      const TokenId token = batch.tokens[static_cast<size_t>(r)];
      const int32_t pos = batch.positions[static_cast<size_t>(r)];
      if (token < 0 || token >= hp_.n_vocab)
        return Error{"token id " + std::to_string(token) + " is outside the vocab"};
      if (pos < 0 || static_cast<size_t>(pos / block_size) >= seq.block_table.size()) {
        return Error{"position " + std::to_string(pos) + " is not covered by the block table"};
      }
    }
  }
  for (int32_t row : batch.output_rows) {
    if (row < 0 || row >= batch.n_rows())
      return Error{"output row " + std::to_string(row) + " is invalid"};
  }
  return {};
}

void LlamaModel::embed(const ForwardBatch& batch, LlamaWorkspace& ws) const {
  const int64_t n_embd = hp_.n_embd;
  const uint64_t stride = *row_bytes(token_embd_.type, n_embd);
  for (int32_t r = 0; r < batch.n_rows(); ++r) {
    const auto* row = static_cast<const uint8_t*>(token_embd_.data) +
                      static_cast<uint64_t>(batch.tokens[static_cast<size_t>(r)]) * stride;
    dequantize_row(token_embd_.type, row, ws.x.data() + r * n_embd, n_embd);
  }
}

void LlamaModel::attention_block(const LlamaLayer& layer, int64_t il, const ForwardBatch& batch,
                                 KvStorage& kv, LlamaWorkspace& ws, ThreadPool& pool) const {
  const int32_t n_rows = batch.n_rows();
  const int64_t n_embd = hp_.n_embd;
  const int64_t n_embd_kv = hp_.n_embd_kv();
  const float eps = static_cast<float>(hp_.rms_norm_eps);
  for (int32_t r = 0; r < n_rows; ++r) {
    rms_norm_row(ws.x.data() + r * n_embd, layer.attn_norm.data(), n_embd, eps,
                 ws.xn.data() + r * n_embd);
  }
  matmul(layer.wq, ws.xn.data(), n_rows, ws.q.data(), pool, ws.matmul_scratch);
  matmul(layer.wk, ws.xn.data(), n_rows, ws.k.data(), pool, ws.matmul_scratch);
  matmul(layer.wv, ws.xn.data(), n_rows, ws.v.data(), pool, ws.matmul_scratch);
  const auto base = static_cast<float>(hp_.rope_freq_base);
  const auto scale = static_cast<float>(hp_.rope_freq_scale);
  for (int32_t r = 0; r < n_rows; ++r) {
    const AttentionRow& row = ws.attention_rows[static_cast<size_t>(r)];
    rope_row(ws.q.data() + r * n_embd, hp_.n_head, hp_.head_dim(), hp_.n_rot, row.position, base,
             scale, RopeStyle::ADJACENT);
    rope_row(ws.k.data() + r * n_embd_kv, hp_.n_head_kv, hp_.head_dim(), hp_.n_rot, row.position,
             base, scale, RopeStyle::ADJACENT);
    kv_write(kv, il, row, ws.k.data() + r * n_embd_kv, ws.v.data() + r * n_embd_kv);
  }
  paged_attention(kv, il, ws.attention_rows.data(), n_rows, hp_.n_head, ws.q.data(), ws.attn.data(),
                  pool, ws.attention_scratch);
  matmul(layer.wo, ws.attn.data(), n_rows, ws.proj.data(), pool, ws.matmul_scratch);
  add_row(ws.x.data(), ws.proj.data(), n_rows * n_embd);
}

void LlamaModel::ffn_block(const LlamaLayer& layer, int32_t n_rows, LlamaWorkspace& ws,
                           ThreadPool& pool) const {
  const int64_t n_embd = hp_.n_embd;
  const float eps = static_cast<float>(hp_.rms_norm_eps);
  for (int32_t r = 0; r < n_rows; ++r) {
    rms_norm_row(ws.x.data() + r * n_embd, layer.ffn_norm.data(), n_embd, eps,
                 ws.xn.data() + r * n_embd);
  }
  matmul(layer.w_gate, ws.xn.data(), n_rows, ws.gate.data(), pool, ws.matmul_scratch);
  matmul(layer.w_up, ws.xn.data(), n_rows, ws.up.data(), pool, ws.matmul_scratch);
  silu_mul_row(ws.gate.data(), ws.up.data(), n_rows * hp_.n_ff);
  matmul(layer.w_down, ws.gate.data(), n_rows, ws.proj.data(), pool, ws.matmul_scratch);
  add_row(ws.x.data(), ws.proj.data(), n_rows * n_embd);
}

void LlamaModel::forward(const ForwardBatch& batch, KvStorage& kv, LlamaWorkspace& ws,
                         ThreadPool& pool, float* logits) const {
  const int32_t n_rows = batch.n_rows();
  for (const BatchSequence& seq : batch.sequences) {
    for (int32_t r = seq.row_begin; r < seq.row_end; ++r) {
      ws.attention_rows[static_cast<size_t>(r)] =
          AttentionRow{batch.positions[static_cast<size_t>(r)], seq.block_table.data()};
    }
  }
  embed(batch, ws);
  for (size_t il = 0; il < layers_.size(); ++il) {
    attention_block(layers_[il], static_cast<int64_t>(il), batch, kv, ws, pool);
    ffn_block(layers_[il], n_rows, ws, pool);
  }
  // Only the rows asked for go through the final norm and the (large) output matrix.
  const int64_t n_embd = hp_.n_embd;
  const auto n_out = static_cast<int64_t>(batch.output_rows.size());
  const float eps = static_cast<float>(hp_.rms_norm_eps);
  for (int64_t i = 0; i < n_out; ++i) {
    const int32_t r = batch.output_rows[static_cast<size_t>(i)];
    rms_norm_row(ws.x.data() + r * n_embd, output_norm_.data(), n_embd, eps,
                 ws.out_xn.data() + i * n_embd);
  }
  if (n_out > 0) matmul(output_, ws.out_xn.data(), n_out, logits, pool, ws.matmul_scratch);
}

}  // namespace trellis
