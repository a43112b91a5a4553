#include "model/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "model/ffn_activation.h"

namespace trellis {
namespace {

// Rows per claim when combining the experts' outputs.
constexpr int64_t kMoeRowGranule = 16;
// The smallest sum the renormalization divides by (the smallest normal f16, as llama.cpp clamps).
constexpr float kMinWeightSum = 6.103515625e-5f;

// Expert a before expert b in a token's ranking: higher probability, then lower index.
bool ranks_before(const float* probs, int32_t a, int32_t b) {
  return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
}

// probs = softmax(scores), the sum accumulated in double and its inverse applied as one factor.
void softmax(const float* scores, int64_t n, float* probs) {
  const float max = *std::max_element(scores, scores + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    probs[i] = std::exp(scores[i] - max);
    sum += probs[i];
  }
  const auto inverse = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) probs[i] *= inverse;
}

// sigmoid(z) as z's SiLU divided by z (llama.cpp's formulation of the shared expert's gate).
float shared_gate_value(const std::vector<float>& weights, const float* h) {
  float z = 0;
  for (size_t i = 0; i < weights.size(); ++i) z += weights[i] * h[i];
  const float silu = z / (1.0f + std::exp(-z));
  return silu / z;
}

// Adds expert e's bias (run e of `bias`, n values each) to the rows of expert order that e's
// tokens hold in `rows` (n values per row): the slots [first[e], first[e + 1]).
void add_expert_biases(const std::vector<float>& bias, int64_t n, const MoeScratch& moe,
                       int64_t n_expert, float* rows, ThreadPool& pool) {
  const int64_t n_slots = moe.first[static_cast<size_t>(n_expert)];
  pool.parallel_for(n_slots, kMoeRowGranule, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int32_t expert = moe.experts[static_cast<size_t>(moe.slot_of[static_cast<size_t>(p)])];
      add_row(rows + p * n, bias.data() + expert * n, n);
    }
  });
}

// Sorts the (row, slot) pairs of n_rows routed tokens by expert: slot_of lists them expert by
// expert (rows in increasing order within one), token_of their rows, position maps each back;
// first receives each expert's first index into slot_of (n_expert + 1 entries).
void group_by_expert(int64_t n_rows, int64_t k, int64_t n_expert, MoeScratch& moe) {
  const int32_t* experts = moe.experts.data();
  std::fill(moe.first.begin(), moe.first.end(), 0);
  for (int64_t s = 0; s < n_rows * k; ++s) ++moe.first[static_cast<size_t>(experts[s]) + 1];
  for (int64_t e = 0; e < n_expert; ++e) moe.first[e + 1] += moe.first[e];
  std::copy(moe.first.begin(), moe.first.end() - 1, moe.next.begin());
  for (int64_t s = 0; s < n_rows * k; ++s) {
    const int32_t p = moe.next[static_cast<size_t>(experts[s])]++;
    moe.slot_of[p] = static_cast<int32_t>(s);
    moe.token_of[p] = static_cast<int32_t>(s / k);
    moe.position[s] = p;
  }
}

// The shared expert of every row into moe.shared_out, scaled by its gate.
void shared_expert(const LayerWeights& layer, const ModelHParams& hp, const float* h,
                   int32_t n_rows, MoeScratch& moe, ThreadPool& pool, MatmulScratch& scratch) {
  const MatmulJob jobs[] = {{layer.w_gate_shexp, moe.gate.data()},
                            {layer.w_up_shexp, moe.up.data()}};
  matmul_many(jobs, h, n_rows, pool, scratch);
  activate_ffn(FfnActivation::SILU, moe.gate.data(), moe.up.data(), n_rows * hp.n_ff_shexp, pool);
  matmul(layer.w_down_shexp, moe.gate.data(), n_rows, moe.shared_out.data(), pool, scratch);
  const int64_t n_embd = hp.n_embd;
  for (int32_t r = 0; r < n_rows; ++r) {
    const float g = shared_gate_value(layer.shared_gate, h + r * n_embd);
    float* row = moe.shared_out.data() + r * n_embd;
    for (int64_t i = 0; i < n_embd; ++i) row[i] *= g;
  }
}

}  // namespace

void route_token(const float* scores, const ModelHParams& hp, float* probs, int32_t* experts,
                 float* weights) {
  const int64_t n = hp.n_expert;
  const int64_t k = hp.n_expert_used;
  const bool softmax_first = hp.expert_gating == ExpertGating::SOFTMAX;
  // SOFTMAX ranks by probability; SOFTMAX_WEIGHT by raw score (the same order but for ties that
  // rounding creates), then weighs the k chosen by a softmax of their scores.
  if (softmax_first) {
    softmax(scores, n, probs);
  } else {
    std::copy(scores, scores + n, probs);
  }
  // Insertion into the best-k list, best first; k is small (2-8).
  int64_t n_chosen = 0;
  for (int32_t e = 0; e < n; ++e) {
    if (n_chosen == k && !ranks_before(probs, e, experts[k - 1])) continue;
    int64_t at = std::min(n_chosen, k - 1);
    while (at > 0 && ranks_before(probs, e, experts[at - 1])) {
      experts[at] = experts[at - 1];
      --at;
    }
    experts[at] = e;
    n_chosen = std::min(n_chosen + 1, k);
  }
  float sum = 0;
  for (int64_t j = 0; j < k; ++j) {
    weights[j] = probs[experts[j]];
    sum += weights[j];
  }
  if (!softmax_first) {
    softmax(weights, k, weights);
    sum = 1;
  }
  if (hp.expert_weights_norm) {  // the sum clamped as llama.cpp does
    sum = std::max(sum, kMinWeightSum);
    for (int64_t j = 0; j < k; ++j) weights[j] /= sum;
  }
}

MoeScratch::MoeScratch(const ModelHParams& hp, int32_t max_rows) {
  const auto rows = static_cast<size_t>(max_rows);
  const auto k = static_cast<size_t>(hp.n_expert_used);
  const auto n_embd = static_cast<size_t>(hp.n_embd);
  scores.resize(rows * static_cast<size_t>(hp.n_expert));
  experts.resize(rows * k);
  weights.resize(rows * k);
  slot_of.resize(rows * k);
  token_of.resize(rows * k);
  position.resize(rows * k);
  first.resize(static_cast<size_t>(hp.n_expert) + 1);
  next.resize(static_cast<size_t>(hp.n_expert));
  jobs.reserve(2 * static_cast<size_t>(hp.n_expert));
  const size_t n_act = std::max(rows * k * static_cast<size_t>(hp.n_ff_exp),
                                rows * static_cast<size_t>(hp.n_ff_shexp));
  gate.resize(n_act);
  up.resize(n_act);
  expert_out.resize(rows * k * n_embd);
  if (hp.n_ff_shexp > 0) shared_out.resize(rows * n_embd);
}

void moe_ffn(const LayerWeights& layer, const Architecture& arch, const ModelHParams& hp,
             const float* h, int32_t n_rows, float* out, MoeScratch& moe, ThreadPool& pool,
             MatmulScratch& matmul_scratch) {
  const int64_t n_embd = hp.n_embd;
  const int64_t n_expert = hp.n_expert;
  const int64_t k = hp.n_expert_used;
  const int64_t n_ff = hp.n_ff_exp;
  matmul(layer.router, h, n_rows, moe.scores.data(), pool, matmul_scratch);
  if (arch.expert_biases) {
    for (int32_t r = 0; r < n_rows; ++r)
      add_row(moe.scores.data() + r * n_expert, layer.router_bias.data(), n_expert);
  }
  for (int32_t r = 0; r < n_rows; ++r) {
    float* scores = moe.scores.data() + r * n_expert;
    // The probabilities overwrite the scores (route_token reads each score before writing it).
    route_token(scores, hp, scores, moe.experts.data() + r * k, moe.weights.data() + r * k);
  }
  group_by_expert(n_rows, k, n_expert, moe);
  // Gate and up of every chosen expert on its tokens' rows of h, in one round ...
  moe.jobs.clear();
  for (int64_t e = 0; e < n_expert; ++e) {
    const int32_t begin = moe.first[static_cast<size_t>(e)];
    const int32_t m = moe.first[static_cast<size_t>(e) + 1] - begin;
    if (m == 0) continue;  // an expert no token chose: its weights are not read
    const int32_t* rows = moe.token_of.data() + begin;
    moe.jobs.push_back({layer.gate_exps.experts[static_cast<size_t>(e)], rows, 0, m,
                        moe.gate.data() + begin * n_ff});
    moe.jobs.push_back(
        {layer.up_exps.experts[static_cast<size_t>(e)], rows, 0, m, moe.up.data() + begin * n_ff});
  }
  matmul_gathered(moe.jobs, h, n_rows, pool, matmul_scratch);
  if (arch.expert_biases) {
    add_expert_biases(layer.gate_exps_bias, n_ff, moe, n_expert, moe.gate.data(), pool);
    add_expert_biases(layer.up_exps_bias, n_ff, moe, n_expert, moe.up.data(), pool);
  }
  activate_ffn(arch.ffn_activation, moe.gate.data(), moe.up.data(), n_rows * k * n_ff, pool);
  // ... then down, each expert on its run of activated rows.
  moe.jobs.clear();
  for (int64_t e = 0; e < n_expert; ++e) {
    const int32_t begin = moe.first[static_cast<size_t>(e)];
    const int32_t m = moe.first[static_cast<size_t>(e) + 1] - begin;
    if (m == 0) continue;
    moe.jobs.push_back({layer.down_exps.experts[static_cast<size_t>(e)], nullptr, begin, m,
                        moe.expert_out.data() + begin * n_embd});
  }
  matmul_gathered(moe.jobs, moe.gate.data(), n_rows * k, pool, matmul_scratch);
  // The down bias belongs to the expert's output, before the routing weight scales it.
  if (arch.expert_biases)
    add_expert_biases(layer.down_exps_bias, n_embd, moe, n_expert, moe.expert_out.data(), pool);
  if (arch.shared_expert) shared_expert(layer, hp, h, n_rows, moe, pool, matmul_scratch);
  // Each row's outputs in its own slot order: ((w0 y0 + w1 y1) + w2 y2) ..., each product
  // rounded before it is added, then the shared expert.
  pool.parallel_for(n_rows, kMoeRowGranule, [&](int64_t row_begin, int64_t row_end) {
    for (int64_t r = row_begin; r < row_end; ++r) {
      float* o = out + r * n_embd;
      for (int64_t j = 0; j < k; ++j) {
        const float w = moe.weights[static_cast<size_t>(r * k + j)];
        const float* y =
            moe.expert_out.data() + moe.position[static_cast<size_t>(r * k + j)] * n_embd;
        if (j == 0) {
          for (int64_t i = 0; i < n_embd; ++i) o[i] = y[i] * w;
        } else {
          for (int64_t i = 0; i < n_embd; ++i) o[i] += y[i] * w;
        }
      }
      if (arch.shared_expert) add_row(o, moe.shared_out.data() + r * n_embd, n_embd);
    }
  });
}

}  // namespace trellis
