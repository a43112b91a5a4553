#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <span>
#include <string>

#include "kernels/ops.h"
#include "kernels/weight_pack.h"
#include "model/family_tensors.h"
#include "model/ffn_activation.h"
#include "model/tensor_binding.h"
#include "quant/quant.h"

namespace trellis {
namespace {

// Rows per claim of the row-wise steps (norms, RoPE, KV writes): a prefill's rows spread over the
// threads instead of leaving them idle, while a decode step's few rows stay on the caller.
constexpr int64_t kRowGranule = 16;

// The tensors of the family outside the layers: each required one is there, and each one there
// has the shape the table gives it (the layers' tensors are checked as they are bound).
Status check_global_tensors(const GgufFile& file, const Architecture& arch,
                            const ModelHParams& hp) {
  const FamilyTensors& family = family_tensors(arch);
  for (const std::vector<TensorSpec>* list : {&family.before_layers, &family.after_layers}) {
    for (const TensorSpec& spec : *list) {
      const std::string name(spec.name);
      if (spec.presence == Presence::OPTIONAL && file.find_tensor(name) == nullptr) continue;
      Result<const GgufTensor*> t = find_tensor(file, name, tensor_shape(spec, hp));
      if (!t.ok()) return t.error();
    }
  }
  return {};
}

}  // namespace

Workspace::Workspace(const ModelHParams& hp, int32_t max_rows) : max_rows_(max_rows) {
  const auto rows = static_cast<size_t>(max_rows);
  const auto n_embd = static_cast<size_t>(hp.n_embd);
  const auto n_q = static_cast<size_t>(hp.n_embd_q());
  const auto n_kv = static_cast<size_t>(hp.n_embd_kv());
  const auto n_ff = static_cast<size_t>(hp.n_ff);
  x.resize(rows * n_embd);
  xn.resize(rows * n_embd);
  proj.resize(rows * n_embd);
  out_xn.resize(rows * n_embd);
  q.resize(rows * n_q);
  attn.resize(rows * n_q);
  k.resize(rows * n_kv);
  v.resize(rows * n_kv);
  // The fused projections' outputs exist only for the families that have them.
  const Architecture* arch = find_architecture(hp.arch);
  if (arch != nullptr && arch->fused_qkv) qkv.resize(rows * (n_q + 2 * n_kv));
  attention_rows.resize(rows);
  if (arch != nullptr && arch->ffn_kind == FfnKind::MOE) {
    moe = MoeScratch(hp, max_rows);
  } else {
    gate.resize(rows * n_ff);
    up.resize(rows * (arch != nullptr && arch->fused_gate_up ? 2 : 1) * n_ff);
  }
}

Status Model::bind_layer(const GgufFile& file, int64_t il, LayerWeights& layer) const {
  for (const TensorSpec& spec : family_tensors(*arch_).layer) {
    const std::string name = layer_tensor_name(il, spec);
    if (spec.experts != nullptr) {
      TRELLIS_TRY(bind_experts(file, il, spec, layer.*spec.experts));
      continue;
    }
    if (spec.presence == Presence::OPTIONAL && file.find_tensor(name) == nullptr) continue;
    const std::vector<int64_t> shape = tensor_shape(spec, hp_);
    if (spec.matrix != nullptr) {
      TRELLIS_ASSIGN(layer.*spec.matrix, bind_matrix(file, name, shape[0], shape[1]));
    } else {
      TRELLIS_ASSIGN(layer.*spec.vector, bind_values(file, name, shape));
    }
  }
  return {};
}

Status Model::bind_experts(const GgufFile& file, int64_t il, const TensorSpec& spec,
                           ExpertWeights& out) const {
  const std::string name = layer_tensor_name(il, spec);
  const std::vector<int64_t> shape = tensor_shape(spec, hp_);  // n_in, n_out, n_expert
  out.experts.clear();
  // Mixtral's older files: blk.N.ffn_gate.E.weight etc., one [n_in] -> [n_out] tensor per expert.
  const std::string stem = name.substr(0, name.find("_exps.weight"));
  auto legacy_name = [&](int64_t e) { return stem + "." + std::to_string(e) + ".weight"; };
  if (file.find_tensor(name) == nullptr && file.find_tensor(legacy_name(0)) != nullptr) {
    for (int64_t e = 0; e < shape[2]; ++e) {
      Result<WeightView> w = bind_matrix(file, legacy_name(e), shape[0], shape[1]);
      if (!w.ok()) return w.error();
      out.experts.push_back(*w);
    }
    return {};
  }
  Result<const GgufTensor*> t = find_tensor(file, name, shape);
  if (!t.ok()) return t.error();
  if (!matmul_supports((*t)->type)) {
    return Error{file.name() + ": tensor '" + name + "' has type " +
                 std::string(dtype_name((*t)->type)) + ", which matmul does not support"};
  }
  const uint64_t expert_bytes = *row_bytes((*t)->type, shape[0]) * static_cast<uint64_t>(shape[1]);
  for (int64_t e = 0; e < shape[2]; ++e) {
    out.experts.push_back(WeightView{
        (*t)->type,
        static_cast<const uint8_t*>((*t)->data) + static_cast<uint64_t>(e) * expert_bytes, shape[0],
        shape[1]});
  }
  return {};
}

Status Model::bind_rope_factors(const GgufFile& file) {
  const int64_t n_pairs = hp_.n_rot / 2;
  auto bind_if_present = [&](const TensorSpec& spec, std::vector<float>& out) -> Status {
    const std::string name(spec.name);
    if (file.find_tensor(name) == nullptr) return {};
    Result<std::vector<float>> values = bind_vector(file, name, n_pairs);
    if (!values.ok()) return values.error();
    for (float f : *values) {
      if (!(f > 0 && f < 1e30f))  // a divisor: zero, negative or NaN would poison every angle
        return Error{file.name() + ": tensor '" + name + "' holds a factor that is not positive"};
    }
    out = std::move(values).value();
    return {};
  };
  switch (arch_->rope_factors) {
    case RopeFactors::NONE:
      return {};
    case RopeFactors::FREQS:
      TRELLIS_TRY(bind_if_present(kRopeFreqs, rope_short_));
      break;
    case RopeFactors::LONGROPE:
      TRELLIS_TRY(bind_if_present(kRopeFactorsShort, rope_short_));
      TRELLIS_TRY(bind_if_present(kRopeFactorsLong, rope_long_));
      break;
  }
  set_context_length(hp_.n_ctx_train);
  return {};
}

void Model::set_context_length(int64_t n_ctx) {
  use_rope_long_ = n_ctx > hp_.n_ctx_orig && !rope_long_.empty();
}

Result<std::unique_ptr<Model>> Model::load(const GgufFile& file) {
  Result<ModelHParams> hp = read_model_hparams(file);
  if (!hp.ok()) return hp.error();
  return load(file, LayerRange::all(hp->n_layer));
}

Result<std::unique_ptr<Model>> Model::load(const GgufFile& file, const LayerRange& range) {
  Result<ModelHParams> hp = read_model_hparams(file);
  if (!hp.ok()) return hp.error();
  if (range.begin < 0 || range.end > hp->n_layer || range.begin > range.end) {
    return Error{file.name() + ": layers [" + std::to_string(range.begin) + ", " +
                 std::to_string(range.end) + ") are not within the model's " +
                 std::to_string(hp->n_layer)};
  }
  auto model = std::unique_ptr<Model>(new Model());
  model->hp_ = *hp;
  model->range_ = range;
  model->arch_ = find_architecture(hp->arch);
  // Every error below names the first tensor the family needs that the file lacks or gets wrong.
  auto for_family = [&](const Error& e) {
    return Error{e.message + " (required by the " + hp->arch + " architecture)"};
  };
  Status globals = check_global_tensors(file, *model->arch_, *hp);
  if (!globals.ok()) return for_family(globals.error());
  const int64_t n_embd = hp->n_embd;
  Result<WeightView> embd = bind_matrix(file, std::string(kTokenEmbd.name), n_embd, hp->n_vocab);
  if (!embd.ok()) return for_family(embd.error());
  model->token_embd_ = *embd;
  if (!can_dequantize(model->token_embd_.type))
    return Error{file.name() + ": token_embd.weight type cannot be read"};
  Status factors = model->bind_rope_factors(file);
  if (!factors.ok()) return for_family(factors.error());
  for (int64_t il = range.begin; il < range.end; ++il) {
    LayerWeights layer;
    Status bound = model->bind_layer(file, il, layer);
    if (!bound.ok()) return for_family(bound.error());
    model->layers_.push_back(std::move(layer));
  }
  Result<std::vector<float>> norm = bind_vector(file, std::string(kOutputNorm.name), n_embd);
  if (!norm.ok()) return for_family(norm.error());
  model->output_norm_ = std::move(norm).value();
  if (file.find_tensor(kOutput.name) != nullptr) {
    Result<WeightView> output = bind_matrix(file, std::string(kOutput.name), n_embd, hp->n_vocab);
    if (!output.ok()) return for_family(output.error());
    model->output_ = *output;
  } else {
    model->output_ = model->token_embd_;  // tied embeddings
  }
  model->pack_weights(file);
  return model;
}

std::vector<WeightView*> Model::matmul_weights() {
  std::vector<WeightView*> views;
  for (LayerWeights& layer : layers_) {
    for (WeightView* w : {&layer.wq, &layer.wk, &layer.wv, &layer.wqkv, &layer.wo, &layer.w_gate,
                          &layer.w_up, &layer.w_down, &layer.router, &layer.w_gate_shexp,
                          &layer.w_up_shexp, &layer.w_down_shexp}) {
      if (w->n_out > 0) views.push_back(w);  // unbound views are left out
    }
    for (ExpertWeights* experts : {&layer.gate_exps, &layer.up_exps, &layer.down_exps}) {
      for (WeightView& w : experts->experts) views.push_back(&w);
    }
  }
  if (range_.last) views.push_back(&output_);  // an earlier stage never reads the head
  return views;
}

void Model::pack_weights(const GgufFile& file) {
  packed_ = pack_matmul_weights(file, matmul_weights());
}

KvLayout Model::kv_layout(int32_t block_size, KvTypes types) const {
  return KvLayout{range_.size(), hp_.n_head_kv, hp_.head_dim(), block_size, types};
}

Status Model::validate_batch(const ForwardBatch& batch, const KvStorage& kv,
                             const Workspace& ws) const {
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
      if (range_.first && (token < 0 || token >= hp_.n_vocab))
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

void Model::embed(const ForwardBatch& batch, Workspace& ws) const {
  const int64_t n_embd = hp_.n_embd;
  const uint64_t stride = *row_bytes(token_embd_.type, n_embd);
  // Gemma scales the looked-up embeddings (not the output matrix they may share) by sqrt(n_embd).
  const float scale = arch_->scale_embeddings ? std::sqrt(static_cast<float>(n_embd)) : 1.0f;
  for (int32_t r = 0; r < batch.n_rows(); ++r) {
    const auto* row = static_cast<const uint8_t*>(token_embd_.data) +
                      static_cast<uint64_t>(batch.tokens[static_cast<size_t>(r)]) * stride;
    float* x = ws.x.data() + r * n_embd;
    dequantize_row(token_embd_.type, row, x, n_embd);
    if (arch_->scale_embeddings) {
      for (int64_t i = 0; i < n_embd; ++i) x[i] *= scale;
    }
  }
}

namespace {

// out[r] (n_out values) = in[r][offset, offset + n_out), for n_rows rows of in_stride values.
void copy_columns(const float* in, int64_t in_stride, int64_t offset, int64_t n_out, int32_t n_rows,
                  float* out) {
  for (int32_t r = 0; r < n_rows; ++r)
    std::memcpy(out + r * n_out, in + r * in_stride + offset, static_cast<size_t>(n_out) * 4);
}

// RMSNorm of each head of each row, with one weight vector shared by all heads.
void norm_heads(float* rows, int64_t n_heads, int64_t head_dim, const std::vector<float>& weight,
                float eps, int32_t n_rows) {
  for (int64_t i = 0; i < int64_t{n_rows} * n_heads; ++i) {
    float* head = rows + i * head_dim;
    rms_norm_row(head, weight.data(), head_dim, eps, head);
  }
}

}  // namespace

void Model::project_qkv(const LayerWeights& layer, int32_t n_rows, Workspace& ws,
                        ThreadPool& pool) const {
  const int64_t n_q = hp_.n_embd_q();
  const int64_t n_kv = hp_.n_embd_kv();
  if (arch_->fused_qkv) {
    const int64_t n_qkv = n_q + 2 * n_kv;
    matmul(layer.wqkv, ws.xn.data(), n_rows, ws.qkv.data(), pool, ws.matmul_scratch);
    copy_columns(ws.qkv.data(), n_qkv, 0, n_q, n_rows, ws.q.data());
    copy_columns(ws.qkv.data(), n_qkv, n_q, n_kv, n_rows, ws.k.data());
    copy_columns(ws.qkv.data(), n_qkv, n_q + n_kv, n_kv, n_rows, ws.v.data());
  } else {
    const MatmulJob jobs[] = {
        {layer.wq, ws.q.data()}, {layer.wk, ws.k.data()}, {layer.wv, ws.v.data()}};
    matmul_many(jobs, ws.xn.data(), n_rows, pool, ws.matmul_scratch);
  }
  if (arch_->qkv_bias) {
    add_bias_rows(ws.q.data(), layer.bq, n_rows);
    add_bias_rows(ws.k.data(), layer.bk, n_rows);
    add_bias_rows(ws.v.data(), layer.bv, n_rows);
  }
  const auto eps = static_cast<float>(hp_.rms_norm_eps);
  switch (arch_->qk_norm) {
    case QkNorm::NONE:
      break;
    case QkNorm::PER_HEAD:
      norm_heads(ws.q.data(), hp_.n_head, hp_.head_dim(), layer.q_norm, eps, n_rows);
      norm_heads(ws.k.data(), hp_.n_head_kv, hp_.head_dim(), layer.k_norm, eps, n_rows);
      break;
    case QkNorm::WHOLE:  // one "head" of the whole width
      norm_heads(ws.q.data(), 1, n_q, layer.q_norm, eps, n_rows);
      norm_heads(ws.k.data(), 1, n_kv, layer.k_norm, eps, n_rows);
      break;
  }
}

void Model::rope(int64_t il, int64_t row_begin, int64_t row_end, Workspace& ws) const {
  // Local (sliding-window) layers have their own base, and no scaling unless the family scales
  // them as the global ones (Architecture::local_rope_scaled).
  const bool local = hp_.is_local_layer(il);
  const bool unscaled = local && !arch_->local_rope_scaled;
  const auto base = static_cast<float>(local ? hp_.rope_freq_base_swa : hp_.rope_freq_base);
  const auto scale = static_cast<float>(unscaled ? 1.0 : hp_.rope_freq_scale);
  const std::vector<float>& factors = use_rope_long_ ? rope_long_ : rope_short_;
  RopeParams params{hp_.n_rot,
                    base,
                    scale,
                    arch_->rope_style,
                    factors.empty() ? nullptr : factors.data(),
                    static_cast<float>(hp_.rope_attn_factor)};
  if (hp_.rope_yarn && !unscaled) {
    params.yarn = true;
    yarn_corr_dims(hp_.n_rot, hp_.n_ctx_orig, base, &params.corr_low, &params.corr_high);
  }
  const int64_t head_dim = hp_.head_dim();
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int32_t position = ws.attention_rows[static_cast<size_t>(r)].position;
    rope_row(ws.q.data() + r * hp_.n_embd_q(), hp_.n_head, head_dim, position, params);
    rope_row(ws.k.data() + r * hp_.n_embd_kv(), hp_.n_head_kv, head_dim, position, params);
  }
}

void Model::add_residual(const std::vector<float>& post_norm, int32_t n_rows, Workspace& ws,
                         ThreadPool& pool) const {
  const int64_t n_embd = hp_.n_embd;
  const auto eps = static_cast<float>(hp_.rms_norm_eps);
  pool.parallel_for(n_rows, kRowGranule, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = ws.proj.data() + r * n_embd;
      if (!post_norm.empty()) rms_norm_row(row, post_norm.data(), n_embd, eps, row);
      add_row(ws.x.data() + r * n_embd, row, n_embd);
    }
  });
}

void Model::norm_rows(const std::vector<float>& weight, int32_t n_rows, Workspace& ws,
                      ThreadPool& pool) const {
  const int64_t n_embd = hp_.n_embd;
  const auto eps = static_cast<float>(hp_.rms_norm_eps);
  pool.parallel_for(n_rows, kRowGranule, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      rms_norm_row(ws.x.data() + r * n_embd, weight.data(), n_embd, eps, ws.xn.data() + r * n_embd);
  });
}

void Model::scale_queries(int32_t n_rows, Workspace& ws) const {
  // The attention kernel divides by sqrt(head_dim); a model that wants another divisor gets its
  // queries pre-scaled by the ratio.
  if (hp_.query_scale_dim == 0 || hp_.query_scale_dim == hp_.head_dim()) return;
  const auto factor = static_cast<float>(
      std::sqrt(static_cast<double>(hp_.head_dim()) / static_cast<double>(hp_.query_scale_dim)));
  const int64_t n = n_rows * hp_.n_embd_q();
  for (int64_t i = 0; i < n; ++i) ws.q[static_cast<size_t>(i)] *= factor;
}

void Model::attention_block(const LayerWeights& layer, int64_t il, const ForwardBatch& batch,
                            KvStorage& kv, Workspace& ws, ThreadPool& pool) const {
  const int32_t n_rows = batch.n_rows();
  norm_rows(layer.attn_norm, n_rows, ws, pool);
  observe(il, MatmulInput::ATTENTION, ws.xn, n_rows, hp_.n_embd);
  project_qkv(layer, n_rows, ws, pool);
  // A local layer's query at position p sees (p - n_swa, p]; a global one sees [0, p].
  const bool local = hp_.is_local_layer(il);
  const int64_t kv_layer = il - range_.begin;  // the cache holds only this model's layers
  pool.parallel_for(n_rows, kRowGranule, [&](int64_t begin, int64_t end) {
    rope(il, begin, end, ws);
    for (int64_t r = begin; r < end; ++r) {
      AttentionRow& row = ws.attention_rows[static_cast<size_t>(r)];
      row.first_position = local ? std::max(0, row.position - hp_.n_swa + 1) : 0;
      kv_write(kv, kv_layer, row, ws.k.data() + r * hp_.n_embd_kv(),
               ws.v.data() + r * hp_.n_embd_kv());
    }
  });
  scale_queries(n_rows, ws);
  paged_attention(kv, kv_layer, ws.attention_rows.data(), n_rows, hp_.n_head, ws.q.data(),
                  ws.attn.data(), pool, ws.attention_scratch,
                  layer.attn_sinks.empty() ? nullptr : layer.attn_sinks.data());
  observe(il, MatmulInput::ATTENTION_OUTPUT, ws.attn, n_rows, hp_.n_embd_q());
  matmul(layer.wo, ws.attn.data(), n_rows, ws.proj.data(), pool, ws.matmul_scratch);
  if (arch_->output_bias) add_bias_rows(ws.proj.data(), layer.bo, n_rows);
  add_residual(layer.post_attn_norm, n_rows, ws, pool);
}

void Model::ffn_block(const LayerWeights& layer, int64_t il, int32_t n_rows, Workspace& ws,
                      ThreadPool& pool) const {
  const int64_t n_ff = hp_.n_ff;
  norm_rows(layer.ffn_norm, n_rows, ws, pool);
  if (arch_->ffn_kind == FfnKind::MOE) {
    moe_ffn(layer, *arch_, hp_, ws.xn.data(), n_rows, ws.proj.data(), ws.moe, pool,
            ws.matmul_scratch);
    add_residual(layer.post_ffn_norm, n_rows, ws, pool);
    return;
  }
  observe(il, MatmulInput::FFN, ws.xn, n_rows, hp_.n_embd);
  if (arch_->fused_gate_up) {  // ffn_up's rows: the gate's n_ff, then the up projection's n_ff
    matmul(layer.w_up, ws.xn.data(), n_rows, ws.up.data(), pool, ws.matmul_scratch);
    // Row r holds its gate at [2r, 2r + 1) and its up at [2r + 1, 2r + 2), in units of n_ff.
    // Gates go to their own buffer; ups move down to [r, r + 1) in increasing r, which only
    // overwrites what rows before r already moved.
    copy_columns(ws.up.data(), 2 * n_ff, 0, n_ff, n_rows, ws.gate.data());
    for (int32_t r = 0; r < n_rows; ++r) {
      std::memmove(ws.up.data() + r * n_ff, ws.up.data() + (2 * r + 1) * n_ff,
                   static_cast<size_t>(n_ff) * 4);
    }
  } else {
    const MatmulJob jobs[] = {{layer.w_gate, ws.gate.data()}, {layer.w_up, ws.up.data()}};
    matmul_many(jobs, ws.xn.data(), n_rows, pool, ws.matmul_scratch);
  }
  activate_ffn(arch_->ffn_activation, ws.gate.data(), ws.up.data(), n_rows * n_ff, pool);
  observe(il, MatmulInput::FFN_DOWN, ws.gate, n_rows, n_ff);
  matmul(layer.w_down, ws.gate.data(), n_rows, ws.proj.data(), pool, ws.matmul_scratch);
  add_residual(layer.post_ffn_norm, n_rows, ws, pool);
}

void Model::run_layers(const ForwardBatch& batch, KvStorage& kv, Workspace& ws,
                       ThreadPool& pool) const {
  const int32_t n_rows = batch.n_rows();
  for (const BatchSequence& seq : batch.sequences) {
    for (int32_t r = seq.row_begin; r < seq.row_end; ++r) {
      ws.attention_rows[static_cast<size_t>(r)] =
          AttentionRow{batch.positions[static_cast<size_t>(r)], seq.block_table.data()};
    }
  }
  if (range_.first) embed(batch, ws);
  for (size_t i = 0; i < layers_.size(); ++i) {
    attention_block(layers_[i], range_.begin + static_cast<int64_t>(i), batch, kv, ws, pool);
    ffn_block(layers_[i], range_.begin + static_cast<int64_t>(i), n_rows, ws, pool);
  }
}

void Model::norm_output_rows(const ForwardBatch& batch, Workspace& ws) const {
  const int64_t n_embd = hp_.n_embd;
  const float eps = static_cast<float>(hp_.rms_norm_eps);
  for (size_t i = 0; i < batch.output_rows.size(); ++i) {
    const int32_t r = batch.output_rows[i];
    rms_norm_row(ws.x.data() + r * n_embd, output_norm_.data(), n_embd, eps,
                 ws.out_xn.data() + static_cast<int64_t>(i) * n_embd);
  }
}

void Model::forward(const ForwardBatch& batch, KvStorage& kv, Workspace& ws, ThreadPool& pool,
                    float* logits) const {
  run_layers(batch, kv, ws, pool);
  if (!range_.last) return;
  // Only the rows asked for go through the final norm and the (large) output matrix.
  norm_output_rows(batch, ws);
  const auto n_out = static_cast<int64_t>(batch.output_rows.size());
  if (n_out > 0) matmul(output_, ws.out_xn.data(), n_out, logits, pool, ws.matmul_scratch);
}

void Model::forward_hidden(const ForwardBatch& batch, KvStorage& kv, Workspace& ws,
                           ThreadPool& pool, float* hidden) const {
  run_layers(batch, kv, ws, pool);
  if (batch.output_rows.empty()) return;  // a prefix computed for later rows
  norm_output_rows(batch, ws);
  std::memcpy(hidden, ws.out_xn.data(),
              batch.output_rows.size() * static_cast<size_t>(hp_.n_embd) * sizeof(float));
}

}  // namespace trellis
