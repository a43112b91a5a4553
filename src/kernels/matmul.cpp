// The matmul dispatch point: picks the ISA variant, quantizes the activations once per token row
// into the scratch, and splits the output rows across the thread pool. Every variant follows the
// arithmetic contract of matmul_internal.h, so the split (by output rows only, each dot product
// on one thread) and the tiling never change a result's bits.
#include "kernels/matmul.h"

#include <cassert>
#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/weight_pack.h"

namespace trellis {
namespace kernels_detail {

ActFormat act_format(DType type) {
  switch (type) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
      return ActFormat::Q8_0;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return ActFormat::Q8_K;
    default:
      return ActFormat::F32;
  }
}

size_t act_row_bytes(ActFormat format, int64_t n_in) {
  const auto n = static_cast<size_t>(n_in);
  switch (format) {
    case ActFormat::Q8_0:
      return n / 32 * sizeof(ActQ8_0);
    case ActFormat::Q8_K:
      return n / 256 * sizeof(ActQ8_K);
    case ActFormat::F32:
      break;
  }
  return n * sizeof(float);
}

RowKernel table_kernel(const KernelTable& table, DType type) {
  switch (type) {
    case DType::F32:
      return table.f32;
    case DType::F16:
      return table.f16;
    case DType::BF16:
      return table.bf16;
    case DType::Q4_0:
      return table.q4_0;
    case DType::Q4_1:
      return table.q4_1;
    case DType::Q5_0:
      return table.q5_0;
    case DType::Q5_1:
      return table.q5_1;
    case DType::Q8_0:
      return table.q8_0;
    case DType::Q2_K:
      return table.q2_k;
    case DType::Q3_K:
      return table.q3_k;
    case DType::Q4_K:
      return table.q4_k;
    case DType::Q5_K:
      return table.q5_k;
    case DType::Q6_K:
      return table.q6_k;
    default:
      return nullptr;
  }
}

}  // namespace kernels_detail

namespace kd = kernels_detail;

namespace {

// Output rows are handed to threads in multiples of this (the largest row tile of any variant),
// so that a thread's range rarely ends in a partial tile; the packed layouts rely on it: a range
// starts at a 16-row group (kQ4_0X16Rows).
constexpr int64_t kRowGranule = 16;
static_assert(kRowGranule % kQ4_0X16Rows == 0);

}  // namespace

uint8_t* MatmulScratch::get(size_t bytes) {
  if (bytes_.size() < bytes) bytes_.resize(bytes);
  return bytes_.data();
}

bool matmul_supports(DType type) {
  return kd::table_kernel(kd::scalar_kernels(), type) != nullptr;
}

void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* out, ThreadPool& pool,
            MatmulScratch& scratch) {
  matmul(best_kernel_isa(), w, x, n_tokens, out, pool, scratch);
}

void matmul(KernelIsa isa, const WeightView& w, const float* x, int64_t n_tokens, float* out,
            ThreadPool& pool, MatmulScratch& scratch) {
  assert(matmul_supports(w.type));
  assert(kernel_isa_supported(isa));
  assert(n_tokens >= 0 && w.n_out >= 0 && w.n_in >= 0);
  if (n_tokens == 0 || w.n_out == 0) return;
  const kd::KernelTable& table = kd::isa_table(isa);
  const kd::KernelTable& scalar = kd::scalar_kernels();

  kd::MatmulArgs args{};
  args.type = w.type;
  args.w = static_cast<const uint8_t*>(w.data);
  args.w_row_bytes = static_cast<size_t>(row_bytes(w.type, w.n_in).value());
  args.n_in = w.n_in;
  args.n_tokens = n_tokens;
  args.out = out;
  args.n_out = w.n_out;

  const kd::ActFormat format = kd::act_format(w.type);
  args.act_row_bytes = kd::act_row_bytes(format, w.n_in);
  if (format == kd::ActFormat::F32) {
    args.act = reinterpret_cast<const uint8_t*>(x);
  } else {
    // Quantize each token row once, in parallel over tokens (rows are independent).
    uint8_t* act = scratch.get(args.act_row_bytes * static_cast<size_t>(n_tokens));
    kd::ActQuantizer quantize =
        format == kd::ActFormat::Q8_0
            ? (table.quantize_q8_0 ? table.quantize_q8_0 : scalar.quantize_q8_0)
            : (table.quantize_q8_k ? table.quantize_q8_k : scalar.quantize_q8_k);
    const size_t row_bytes_act = args.act_row_bytes;
    const int64_t n_in = w.n_in;
    pool.parallel_for(n_tokens, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        quantize(x + t * n_in, act + static_cast<size_t>(t) * row_bytes_act, n_in);
      }
    });
    args.act = act;
  }

  kd::RowKernel kernel = nullptr;
  if (w.layout == WeightLayout::Q4_0_X16) {
    kernel = table.q4_0_x16;
    assert(kernel != nullptr && "a packed matrix goes to the variant that packed it");
  } else {
    kernel = kd::table_kernel(table, w.type);
    if (kernel == nullptr) kernel = kd::table_kernel(scalar, w.type);
  }
  pool.parallel_for(w.n_out, kRowGranule,
                    [&](int64_t begin, int64_t end) { kernel(args, begin, end); });
}

}  // namespace trellis
