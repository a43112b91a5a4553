// The mixture-of-experts FFN sublayer (FfnKind::MOE): per token, a router scores every expert,
// the expert_used_count best run, and their outputs are summed weighted by their router
// probabilities, plus a gated shared expert where the family has one (qwen2moe):
//
//   p = softmax(Wrouter . h)                    over all n_expert experts
//   E = the k experts of highest p              (ties: the lower expert index first)
//   w_j = p_Ej [/ sum_j p_Ej]                   (renormalized where the family does so)
//   out = sum_j w_j * down_Ej(silu(gate_Ej . h) * (up_Ej . h))      in the order j = 0 .. k-1
//       [+ sigmoid(s . h) * down_s(silu(gate_s . h) * (up_s . h))]
//
// gpt-oss (ExpertGating::SOFTMAX_WEIGHT, expert biases, its clamped SwiGLU act):
//   z = Wrouter . h + b;  E = the k experts of highest z;  w = softmax(z_E0 .. z_Ek-1)
//   out = sum_j w_j * (down_Ej(act(gate_Ej . h + bg_Ej, up_Ej . h + bu_Ej)) + bd_Ej)
//
// Expert-grouped: a step routes all its tokens first, then runs each chosen expert once on all
// the rows that chose it (so an expert's weights are read once per step; the experts' products
// share one round of the thread pool, kernels/matmul.h matmul_gathered), and combines each
// token's k outputs in its own slot order. A row's result never depends on the other rows:
// matmul is batch-invariant and the combination follows the token's slots, not the grouping.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/matmul.h"
#include "model/architecture.h"
#include "model/layer_weights.h"
#include "model/model_hparams.h"

namespace trellis {

// The experts of one token and their weights, best first.
struct TokenRoute {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

// Routes one token from its router scores (n_expert of them) by hp.expert_gating: softmax, top k
// (ties resolved towards the lower index), the chosen weights renormalized where hp says so; or
// top k of the scores and a softmax over those. `experts` and `weights` receive
// hp.n_expert_used values each; `probs` is scratch of n_expert floats.
void route_token(const float* scores, const ModelHParams& hp, float* probs, int32_t* experts,
                 float* weights);

// Buffers of the sublayer for up to max_rows tokens, allocated once (empty for dense families).
class MoeScratch {
 public:
  MoeScratch() = default;
  MoeScratch(const ModelHParams& hp, int32_t max_rows);

  std::vector<float> scores;      // [rows][n_expert] router scores, then probabilities
  std::vector<int32_t> experts;   // [rows][k] chosen experts
  std::vector<float> weights;     // [rows][k] their weights
  std::vector<int32_t> slot_of;   // [rows * k]: row * k + j, sorted by expert ("expert order")
  std::vector<int32_t> token_of;  // [rows * k]: the row of each slot, in expert order
  std::vector<int32_t> position;  // [rows * k]: where slot (row, j) is in the expert order
  std::vector<int32_t> first;     // [n_expert + 1]: each expert's first slot in expert order
  std::vector<int32_t> next;      // [n_expert]: scratch of the grouping
  std::vector<GatheredMatmulJob> jobs;  // the experts' products of one step
  // [rows * k][n_ff_exp] in expert order, or the shared expert's [rows][n_ff_shexp]
  std::vector<float> gate, up;
  std::vector<float> expert_out;  // [rows * k][n_embd] in expert order
  std::vector<float> shared_out;  // [rows][n_embd] the shared expert's output
};

// out[r] (n_embd values) = the sublayer's output for the normed input h[r], r < n_rows.
// Preconditions: n_rows fits the scratch; the layer holds the MOE tensors of `arch`.
void moe_ffn(const LayerWeights& layer, const Architecture& arch, const ModelHParams& hp,
             const float* h, int32_t n_rows, float* out, MoeScratch& moe, ThreadPool& pool,
             MatmulScratch& matmul_scratch);

}  // namespace trellis
