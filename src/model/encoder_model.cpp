#include "model/encoder_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/ops.h"
#include "model/input_check.h"
#include "model/tensor_binding.h"
#include "quant/quant.h"

namespace trellis {
namespace {

// Rows per claim of the row-wise steps (norms, RoPE, attention).
constexpr int64_t kEncoderRowGranule = 8;

std::string layer_name(int64_t il, const char* suffix) {
  return "blk." + std::to_string(il) + "." + suffix;
}

// Binds `name` into `out` when the file has it; leaves `out` empty otherwise.
Status bind_optional_vector(const GgufFile& file, const std::string& name, int64_t n,
                            std::vector<float>& out) {
  if (file.find_tensor(name) == nullptr) return {};
  TRELLIS_ASSIGN(out, bind_vector(file, name, n));
  return {};
}

}  // namespace

EncoderWorkspace::EncoderWorkspace(const EncoderHParams& hp, int32_t max_rows, int n_threads)
    : max_rows_(max_rows) {
  const auto rows = static_cast<size_t>(max_rows);
  const auto n_embd = static_cast<size_t>(hp.n_embd);
  const auto n_ff = static_cast<size_t>(hp.n_ff);
  x.resize(rows * n_embd);
  q.resize(rows * n_embd);
  k.resize(rows * n_embd);
  v.resize(rows * n_embd);
  attn.resize(rows * n_embd);
  proj.resize(rows * n_embd);
  up.resize(rows * n_ff);
  if (hp.family->gated_ffn) gate.resize(rows * n_ff);
  qkv.resize(rows * 3 * n_embd);  // files may fuse the projections in any family
  for (int t = 0; t < std::max(n_threads, 1); ++t) {
    attention.push_back(std::make_unique<EncoderAttentionScratch>(
        std::min<int64_t>(max_rows, hp.n_ctx_train), hp.head_dim()));
  }
  head.resize(n_embd);
}

Result<std::unique_ptr<EncoderModel>> EncoderModel::load(const GgufFile& file) {
  Result<EncoderHParams> hp = read_encoder_hparams(file);
  if (!hp.ok()) return hp.error();
  auto model = std::unique_ptr<EncoderModel>(new EncoderModel());
  model->hp_ = *hp;
  Status bound = model->bind(file);
  if (!bound.ok()) {
    return Error{bound.error().message + " (required by the " + std::string(hp->family->name) +
                 " architecture)"};
  }
  std::vector<WeightView*> matrices;
  for (Layer& layer : model->layers_) {
    for (WeightView* w : {&layer.wq, &layer.wk, &layer.wv, &layer.wqkv, &layer.wo, &layer.w_up,
                          &layer.w_gate, &layer.w_down}) {
      if (w->n_out > 0) matrices.push_back(w);
    }
  }
  model->packed_ = pack_matmul_weights(file, matrices);
  return model;
}

Status EncoderModel::bind(const GgufFile& file) {
  const int64_t n_embd = hp_.n_embd;
  TRELLIS_ASSIGN(token_embd_, bind_matrix(file, "token_embd.weight", n_embd, hp_.n_vocab));
  if (!can_dequantize(token_embd_.type)) {
    return Error{file.name() + ": token_embd.weight has a type that cannot be read"};
  }
  if (hp_.n_token_types > 0 && file.find_tensor("token_types.weight") != nullptr) {
    Result<std::vector<float>> types =
        bind_values(file, "token_types.weight", {n_embd, hp_.n_token_types});
    if (!types.ok()) return types.error();
    token_type0_.assign(types->begin(), types->begin() + n_embd);
  }
  if (hp_.family->absolute_positions) {
    TRELLIS_ASSIGN(position_embd_,
                   bind_matrix(file, "position_embd.weight", n_embd, hp_.n_ctx_train));
    if (!can_dequantize(position_embd_.type)) {
      return Error{file.name() + ": position_embd.weight has a type that cannot be read"};
    }
  }
  TRELLIS_ASSIGN(embd_norm_, bind_vector(file, "token_embd_norm.weight", n_embd));
  TRELLIS_ASSIGN(embd_norm_b_, bind_vector(file, "token_embd_norm.bias", n_embd));
  // Layer by layer: a file claiming more layers than it holds fails at the first missing one,
  // before anything the size of its claim is allocated.
  for (int64_t il = 0; il < hp_.n_layer; ++il) {
    Layer layer;
    TRELLIS_TRY(bind_layer(file, il, layer));
    layers_.push_back(std::move(layer));
  }
  if (hp_.pooling == Pooling::RANK) {
    if (file.find_tensor("cls.weight") != nullptr) {
      TRELLIS_ASSIGN(cls_, bind_matrix(file, "cls.weight", n_embd, n_embd));
      TRELLIS_TRY(bind_optional_vector(file, "cls.bias", n_embd, cls_b_));
    }
    TRELLIS_ASSIGN(cls_out_, bind_matrix(file, "cls.output.weight", n_embd, hp_.n_cls_out));
    TRELLIS_TRY(bind_optional_vector(file, "cls.output.bias", hp_.n_cls_out, cls_out_b_));
  }
  return {};
}

Status EncoderModel::bind_layer(const GgufFile& file, int64_t il, Layer& layer) const {
  const int64_t n_embd = hp_.n_embd;
  const int64_t n_ff = hp_.n_ff;
  auto name = [il](const char* suffix) { return layer_name(il, suffix); };
  if (file.find_tensor(name("attn_qkv.weight")) != nullptr) {
    TRELLIS_ASSIGN(layer.wqkv, bind_matrix(file, name("attn_qkv.weight"), n_embd, 3 * n_embd));
    TRELLIS_TRY(bind_optional_vector(file, name("attn_qkv.bias"), 3 * n_embd, layer.bqkv));
  } else {
    TRELLIS_ASSIGN(layer.wq, bind_matrix(file, name("attn_q.weight"), n_embd, n_embd));
    TRELLIS_ASSIGN(layer.wk, bind_matrix(file, name("attn_k.weight"), n_embd, n_embd));
    TRELLIS_ASSIGN(layer.wv, bind_matrix(file, name("attn_v.weight"), n_embd, n_embd));
    TRELLIS_TRY(bind_optional_vector(file, name("attn_q.bias"), n_embd, layer.bq));
    TRELLIS_TRY(bind_optional_vector(file, name("attn_k.bias"), n_embd, layer.bk));
    TRELLIS_TRY(bind_optional_vector(file, name("attn_v.bias"), n_embd, layer.bv));
  }
  TRELLIS_ASSIGN(layer.wo, bind_matrix(file, name("attn_output.weight"), n_embd, n_embd));
  TRELLIS_TRY(bind_optional_vector(file, name("attn_output.bias"), n_embd, layer.bo));
  TRELLIS_ASSIGN(layer.attn_norm, bind_vector(file, name("attn_output_norm.weight"), n_embd));
  TRELLIS_ASSIGN(layer.attn_norm_b, bind_vector(file, name("attn_output_norm.bias"), n_embd));
  TRELLIS_ASSIGN(layer.w_up, bind_matrix(file, name("ffn_up.weight"), n_embd, n_ff));
  if (hp_.family->gated_ffn) {
    TRELLIS_ASSIGN(layer.w_gate, bind_matrix(file, name("ffn_gate.weight"), n_embd, n_ff));
  }
  TRELLIS_ASSIGN(layer.w_down, bind_matrix(file, name("ffn_down.weight"), n_ff, n_embd));
  TRELLIS_TRY(bind_optional_vector(file, name("ffn_up.bias"), n_ff, layer.b_up));
  TRELLIS_TRY(bind_optional_vector(file, name("ffn_down.bias"), n_embd, layer.b_down));
  TRELLIS_ASSIGN(layer.out_norm, bind_vector(file, name("layer_output_norm.weight"), n_embd));
  TRELLIS_ASSIGN(layer.out_norm_b, bind_vector(file, name("layer_output_norm.bias"), n_embd));
  return {};
}

int64_t EncoderModel::n_out() const {
  return hp_.pooling == Pooling::RANK ? hp_.n_cls_out : hp_.n_embd;
}

Status EncoderModel::validate_input(std::span<const TokenId> input) const {
  return check_input_tokens(input, hp_.n_ctx_train, hp_.n_vocab);
}

Status EncoderModel::validate(std::span<const std::span<const TokenId>> inputs,
                              const EncoderWorkspace& ws) const {
  int64_t n_rows = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Status valid = validate_input(inputs[i]);
    if (!valid.ok()) return Error{"input " + std::to_string(i) + " " + valid.error().message};
    n_rows += static_cast<int64_t>(inputs[i].size());
  }
  if (n_rows > ws.max_rows()) {
    return Error{"a batch of " + std::to_string(n_rows) + " tokens exceeds the workspace (" +
                 std::to_string(ws.max_rows()) + ")"};
  }
  return {};
}

void EncoderModel::encode(std::span<const std::span<const TokenId>> inputs, EncoderWorkspace& ws,
                          ThreadPool& pool, float* out) const {
  std::vector<Span> spans;
  spans.reserve(inputs.size());
  int32_t n_rows = 0;
  for (std::span<const TokenId> input : inputs) {
    spans.push_back({n_rows, n_rows + static_cast<int32_t>(input.size())});
    n_rows = spans.back().end;
  }
  embed(inputs, ws, pool);
  for (const Layer& layer : layers_) {
    attention(layer, spans, ws, pool);
    add_and_norm(layer.attn_norm, layer.attn_norm_b, n_rows, ws, pool);
    ffn(layer, n_rows, ws, pool);
    add_and_norm(layer.out_norm, layer.out_norm_b, n_rows, ws, pool);
  }
  for (size_t i = 0; i < spans.size(); ++i) pool_rows(spans[i], ws, pool, out + i * n_out());
}

void EncoderModel::embed(std::span<const std::span<const TokenId>> inputs, EncoderWorkspace& ws,
                         ThreadPool& pool) const {
  const int64_t n_embd = hp_.n_embd;
  const uint64_t token_stride = *row_bytes(token_embd_.type, n_embd);
  std::vector<float> position_row(static_cast<size_t>(n_embd));
  int32_t row = 0;
  for (std::span<const TokenId> input : inputs) {
    for (size_t pos = 0; pos < input.size(); ++pos, ++row) {
      float* x = ws.x.data() + row * n_embd;
      dequantize_row(token_embd_.type,
                     static_cast<const uint8_t*>(token_embd_.data) +
                         static_cast<uint64_t>(input[pos]) * token_stride,
                     x, n_embd);
      if (!token_type0_.empty()) add_row(x, token_type0_.data(), n_embd);
      if (position_embd_.n_out > 0) {
        const uint64_t stride = *row_bytes(position_embd_.type, n_embd);
        dequantize_row(position_embd_.type,
                       static_cast<const uint8_t*>(position_embd_.data) + pos * stride,
                       position_row.data(), n_embd);
        add_row(x, position_row.data(), n_embd);
      }
    }
  }
  pool.parallel_for(row, kEncoderRowGranule, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* x = ws.x.data() + r * n_embd;
      layer_norm_row(x, embd_norm_.data(), embd_norm_b_.data(), n_embd,
                     static_cast<float>(hp_.norm_eps), x);
    }
  });
}

void EncoderModel::attention(const Layer& layer, std::span<const Span> spans, EncoderWorkspace& ws,
                             ThreadPool& pool) const {
  const int64_t n_embd = hp_.n_embd;
  const int32_t n_rows = spans.back().end;
  const float* x = ws.x.data();
  if (layer.wqkv.n_out > 0) {
    matmul(layer.wqkv, x, n_rows, ws.qkv.data(), pool, ws.matmul_scratch);
    add_bias_rows(ws.qkv.data(), layer.bqkv, n_rows);
    for (int32_t r = 0; r < n_rows; ++r) {
      const float* row = ws.qkv.data() + r * 3 * n_embd;
      std::memcpy(ws.q.data() + r * n_embd, row, static_cast<size_t>(n_embd) * sizeof(float));
      std::memcpy(ws.k.data() + r * n_embd, row + n_embd,
                  static_cast<size_t>(n_embd) * sizeof(float));
      std::memcpy(ws.v.data() + r * n_embd, row + 2 * n_embd,
                  static_cast<size_t>(n_embd) * sizeof(float));
    }
  } else {
    const MatmulJob jobs[] = {
        {layer.wq, ws.q.data()}, {layer.wk, ws.k.data()}, {layer.wv, ws.v.data()}};
    matmul_many(jobs, x, n_rows, pool, ws.matmul_scratch);
    add_bias_rows(ws.q.data(), layer.bq, n_rows);
    add_bias_rows(ws.k.data(), layer.bk, n_rows);
    add_bias_rows(ws.v.data(), layer.bv, n_rows);
  }

  const int64_t head_dim = hp_.head_dim();
  const int64_t n_head = hp_.n_head;
  // Which input each row belongs to, for the rows' own positions and their keys' range.
  std::vector<int32_t> row_span(static_cast<size_t>(n_rows));
  for (size_t s = 0; s < spans.size(); ++s) {
    for (int32_t r = spans[s].begin; r < spans[s].end; ++r) row_span[r] = static_cast<int32_t>(s);
  }
  if (!hp_.family->absolute_positions) {
    RopeParams rope;
    rope.n_rot = hp_.n_rot;
    rope.freq_base = static_cast<float>(hp_.rope_freq_base);
    rope.style = RopeStyle::NEOX;
    pool.parallel_for(n_rows, kEncoderRowGranule, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const auto position = static_cast<int32_t>(r - spans[row_span[r]].begin);
        rope_row(ws.q.data() + r * n_embd, n_head, head_dim, position, rope);
        rope_row(ws.k.data() + r * n_embd, n_head, head_dim, position, rope);
      }
    });
  }

  const EncoderAttentionInput input{ws.q.data(),   ws.k.data(), ws.v.data(),
                                    ws.attn.data(), n_embd,      head_dim,
                                    1.0f / std::sqrt(static_cast<float>(head_dim))};
  const auto n_items = static_cast<int64_t>(spans.size()) * n_head;
  pool.parallel_chunks(n_items, 1, [&](int thread, int64_t begin, int64_t end) {
    EncoderAttentionScratch& scratch = *ws.attention[static_cast<size_t>(thread)];
    for (int64_t item = begin; item < end; ++item) {
      const Span span = spans[static_cast<size_t>(item / n_head)];
      encoder_attend_head(input, span.begin, span.end, item % n_head, scratch);
    }
  });
  matmul(layer.wo, ws.attn.data(), n_rows, ws.proj.data(), pool, ws.matmul_scratch);
  add_bias_rows(ws.proj.data(), layer.bo, n_rows);
}

void EncoderModel::ffn(const Layer& layer, int32_t n_rows, EncoderWorkspace& ws,
                       ThreadPool& pool) const {
  const int64_t n_ff = hp_.n_ff;
  if (hp_.family->gated_ffn) {
    const MatmulJob jobs[] = {{layer.w_gate, ws.gate.data()}, {layer.w_up, ws.up.data()}};
    matmul_many(jobs, ws.x.data(), n_rows, pool, ws.matmul_scratch);
    pool.parallel_for(n_rows, kEncoderRowGranule, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        silu_mul_row(ws.gate.data() + r * n_ff, ws.up.data() + r * n_ff, n_ff);
      }
    });
    matmul(layer.w_down, ws.gate.data(), n_rows, ws.proj.data(), pool, ws.matmul_scratch);
  } else {
    matmul(layer.w_up, ws.x.data(), n_rows, ws.up.data(), pool, ws.matmul_scratch);
    add_bias_rows(ws.up.data(), layer.b_up, n_rows);
    pool.parallel_for(n_rows, kEncoderRowGranule, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) gelu_tanh_row(ws.up.data() + r * n_ff, n_ff);
    });
    matmul(layer.w_down, ws.up.data(), n_rows, ws.proj.data(), pool, ws.matmul_scratch);
  }
  add_bias_rows(ws.proj.data(), layer.b_down, n_rows);
}

void EncoderModel::add_and_norm(const std::vector<float>& weight, const std::vector<float>& bias,
                                int32_t n_rows, EncoderWorkspace& ws, ThreadPool& pool) const {
  const int64_t n_embd = hp_.n_embd;
  pool.parallel_for(n_rows, kEncoderRowGranule, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* x = ws.x.data() + r * n_embd;
      add_row(x, ws.proj.data() + r * n_embd, n_embd);
      layer_norm_row(x, weight.data(), bias.data(), n_embd, static_cast<float>(hp_.norm_eps), x);
    }
  });
}

void EncoderModel::pool_rows(Span span, EncoderWorkspace& ws, ThreadPool& pool,
                             float* out) const {
  const int64_t n_embd = hp_.n_embd;
  const float* rows = ws.x.data();
  switch (hp_.pooling) {
    case Pooling::MEAN: {
      // Summed in double, row by row in order: the mean does not depend on the batch.
      std::vector<double> sum(static_cast<size_t>(n_embd), 0.0);
      for (int32_t r = span.begin; r < span.end; ++r) {
        for (int64_t i = 0; i < n_embd; ++i) sum[i] += rows[r * n_embd + i];
      }
      const double n = span.end - span.begin;
      for (int64_t i = 0; i < n_embd; ++i) out[i] = static_cast<float>(sum[i] / n);
      return;
    }
    case Pooling::NONE:  // refused at load
    case Pooling::CLS:
      std::memcpy(out, rows + span.begin * n_embd, static_cast<size_t>(n_embd) * sizeof(float));
      return;
    case Pooling::LAST:
      std::memcpy(out, rows + (span.end - 1) * n_embd, static_cast<size_t>(n_embd) * sizeof(float));
      return;
    case Pooling::RANK: {
      const float* first = rows + span.begin * n_embd;
      if (cls_.n_out > 0) {
        matmul(cls_, first, 1, ws.head.data(), pool, ws.matmul_scratch);
        add_bias_rows(ws.head.data(), cls_b_, 1);
        for (float& value : ws.head) value = std::tanh(value);
        first = ws.head.data();
      }
      matmul(cls_out_, first, 1, out, pool, ws.matmul_scratch);
      add_bias_rows(out, cls_out_b_, 1);
      return;
    }
  }
}

}  // namespace trellis
