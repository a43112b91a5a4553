// Products of a GGUF weight matrix with f32 activations: the hot loop of the forward pass.
//
//   out[t][o] = sum_i W[o][i] * x[t][i]      t < n_tokens, o < n_out, i < n_in
//
// W is stored as GGUF lays it out: n_out rows of n_in values each (ne0 = n_in), in any supported
// type. Batch invariance: out[t][o] is bit-identical whatever n_tokens is, whatever the other rows
// of x hold, and whatever the thread count; only the ISA variant may change the bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/kernel_isa.h"
#include "tensor/dtype.h"

namespace trellis {

// How a matrix's bytes are laid out: GGUF rows, or a kernel variant's packed layout (made at load
// time by pack_weight, kernels/weight_pack.h, and read only by that variant).
enum class WeightLayout { ROWS, Q4_0_X16, FLOAT_X16 };

// Default-constructed: unbound (no rows).
struct WeightView {
  DType type = DType::F32;
  const void* data = nullptr;  // n_out rows of row_bytes(type, n_in) bytes, or the packed layout
  int64_t n_in = 0;            // row length: the reduction dimension
  int64_t n_out = 0;           // number of rows: output features
  WeightLayout layout = WeightLayout::ROWS;
};

// Scratch memory for quantized activations, reused across calls so the step loop does not
// allocate once it has seen its largest batch.
class MatmulScratch {
 public:
  uint8_t* get(size_t bytes);  // grows only when `bytes` exceeds what it holds

 private:
  std::vector<uint8_t> bytes_;
};

// Preconditions: matmul_supports(w.type); x holds n_tokens * n_in floats, out n_tokens * n_out.
bool matmul_supports(DType type);
void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* out, ThreadPool& pool,
            MatmulScratch& scratch);
// The same with an explicit variant (tests and benchmarks); precondition:
// kernel_isa_supported(isa), and a packed w was packed for isa (weight_packable(isa, ...)).
void matmul(KernelIsa isa, const WeightView& w, const float* x, int64_t n_tokens, float* out,
            ThreadPool& pool, MatmulScratch& scratch);

// Several products of the same x (the q, k and v projections; the gate and up ones): x is
// quantized once per activation format, and the rows of all the matrices are shared out among
// the threads in one go, so that small matrices do not each pay for a round of the pool. The
// results are those of one matmul per job. Preconditions: as matmul's for each job; every w has
// the same n_in; at most kMaxMatmulJobs jobs.
struct MatmulJob {
  WeightView w;
  float* out;  // n_tokens * w.n_out floats
};
inline constexpr size_t kMaxMatmulJobs = 4;
void matmul_many(std::span<const MatmulJob> jobs, const float* x, int64_t n_tokens,
                 ThreadPool& pool, MatmulScratch& scratch);
void matmul_many(KernelIsa isa, std::span<const MatmulJob> jobs, const float* x, int64_t n_tokens,
                 ThreadPool& pool, MatmulScratch& scratch);

// Products of many matrices, each with some rows of one activation matrix x (n_x_rows rows of
// n_in values): a mixture of experts' step, each expert with the tokens that chose it. x is
// quantized once per activation format, each job's rows are gathered from it (or taken as one
// run of consecutive rows), and the rows of all the matrices are shared out among the threads in
// one go. The results are those of one matmul per job on its rows of x (batch invariance holds:
// a row's result depends only on that row). Preconditions: as matmul's for each job; every w has
// the same n_in; a job's rows are within [0, n_x_rows).
struct GatheredMatmulJob {
  WeightView w;
  const int32_t* rows = nullptr;  // the n_tokens rows of x it takes; null: a run from row_begin
  int64_t row_begin = 0;
  int64_t n_tokens = 0;
  float* out = nullptr;  // n_tokens * w.n_out floats
};
void matmul_gathered(std::span<const GatheredMatmulJob> jobs, const float* x, int64_t n_x_rows,
                     ThreadPool& pool, MatmulScratch& scratch);
void matmul_gathered(KernelIsa isa, std::span<const GatheredMatmulJob> jobs, const float* x,
                     int64_t n_x_rows, ThreadPool& pool, MatmulScratch& scratch);

}  // namespace trellis
