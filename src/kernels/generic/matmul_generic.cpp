// The portable scalar matmul: a direct transcription of the arithmetic contract in
// matmul_internal.h, one dot product per output element. It is the reference that the SIMD
// variants reproduce bit for bit, and the fallback for types without a SIMD kernel.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/matmul_internal.h"
#include "quant/block_types.h"
#include "quant/half.h"

namespace trellis::kernels_detail {
namespace {

// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)), as in the contract.
float hsum8(const float* a) {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

template <class T>
T load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// ---- 1. Float weights ----------------------------------------------------------------------

struct LoadF32 {
  static float at(const uint8_t* row, int64_t i) { return load<float>(row + 4 * i); }
};
struct LoadF16 {
  static float at(const uint8_t* row, int64_t i) { return f16_to_f32(load<uint16_t>(row + 2 * i)); }
};
struct LoadBF16 {
  static float at(const uint8_t* row, int64_t i) {
    return bf16_to_f32(load<uint16_t>(row + 2 * i));
  }
};

template <class Load>
float dot_float(const uint8_t* w, const uint8_t* x, int64_t n_in) {
  float a[8] = {};
  for (int64_t i = 0; i < n_in; ++i) {
    const float product = Load::at(w, i) * load<float>(x + 4 * i);
    a[i % 8] = a[i % 8] + product;
  }
  return hsum8(a);
}

// Contract case 1b (the AVX512 variant's float kernels): one chain of fused multiply-adds.
template <class Load>
float dot_float_fused(const uint8_t* w, const uint8_t* x, int64_t n_in) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n_in; ++i) acc = std::fma(Load::at(w, i), load<float>(x + 4 * i), acc);
  return acc;
}

// ---- 2. 32-element blocks ------------------------------------------------------------------

// A decoded weight block: integer codes as the contract defines them, scale and offset.
struct Block32 {
  int8_t q[32];
  float d;
  float m;  // _1 types only
};

uint32_t load_qh(const uint8_t* qh) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
         static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

struct DecodeQ4_0 {
  static constexpr bool kHasMin = false;
  static constexpr size_t kBytes = sizeof(block_q4_0);
  static Block32 decode(const uint8_t* p) {
    const auto b = load<block_q4_0>(p);
    Block32 out{};
    for (int l = 0; l < 16; ++l) {
      out.q[l] = static_cast<int8_t>((b.qs[l] & 0x0f) - 8);
      out.q[l + 16] = static_cast<int8_t>((b.qs[l] >> 4) - 8);
    }
    out.d = f16_to_f32(b.d);
    return out;
  }
};

struct DecodeQ4_1 {
  static constexpr bool kHasMin = true;
  static constexpr size_t kBytes = sizeof(block_q4_1);
  static Block32 decode(const uint8_t* p) {
    const auto b = load<block_q4_1>(p);
    Block32 out{};
    for (int l = 0; l < 16; ++l) {
      out.q[l] = static_cast<int8_t>(b.qs[l] & 0x0f);
      out.q[l + 16] = static_cast<int8_t>(b.qs[l] >> 4);
    }
    out.d = f16_to_f32(b.d);
    out.m = f16_to_f32(b.m);
    return out;
  }
};

struct DecodeQ5_0 {
  static constexpr bool kHasMin = false;
  static constexpr size_t kBytes = sizeof(block_q5_0);
  static Block32 decode(const uint8_t* p) {
    const auto b = load<block_q5_0>(p);
    const uint32_t qh = load_qh(b.qh);
    Block32 out{};
    for (int l = 0; l < 16; ++l) {
      const int hi0 = static_cast<int>((qh >> l) & 1u) << 4;
      const int hi1 = static_cast<int>((qh >> (l + 16)) & 1u) << 4;
      out.q[l] = static_cast<int8_t>(((b.qs[l] & 0x0f) | hi0) - 16);
      out.q[l + 16] = static_cast<int8_t>(((b.qs[l] >> 4) | hi1) - 16);
    }
    out.d = f16_to_f32(b.d);
    return out;
  }
};

struct DecodeQ5_1 {
  static constexpr bool kHasMin = true;
  static constexpr size_t kBytes = sizeof(block_q5_1);
  static Block32 decode(const uint8_t* p) {
    const auto b = load<block_q5_1>(p);
    const uint32_t qh = load_qh(b.qh);
    Block32 out{};
    for (int l = 0; l < 16; ++l) {
      const int hi0 = static_cast<int>((qh >> l) & 1u) << 4;
      const int hi1 = static_cast<int>((qh >> (l + 16)) & 1u) << 4;
      out.q[l] = static_cast<int8_t>((b.qs[l] & 0x0f) | hi0);
      out.q[l + 16] = static_cast<int8_t>((b.qs[l] >> 4) | hi1);
    }
    out.d = f16_to_f32(b.d);
    out.m = f16_to_f32(b.m);
    return out;
  }
};

struct DecodeQ8_0 {
  static constexpr bool kHasMin = false;
  static constexpr size_t kBytes = sizeof(block_q8_0);
  static Block32 decode(const uint8_t* p) {
    const auto b = load<block_q8_0>(p);
    Block32 out{};
    std::memcpy(out.q, b.qs, 32);
    out.d = f16_to_f32(b.d);
    return out;
  }
};

struct DecodeMxfp4 {
  static constexpr bool kHasMin = false;
  static constexpr size_t kBytes = sizeof(block_mxfp4);
  static Block32 decode(const uint8_t* p) {
    const auto b = load<block_mxfp4>(p);
    Block32 out{};
    for (int l = 0; l < 16; ++l) {
      out.q[l] = kMxfp4Values[b.qs[l] & 0x0f];
      out.q[l + 16] = kMxfp4Values[b.qs[l] >> 4];
    }
    out.d = mxfp4_scale(b.e);
    return out;
  }
};

template <class Decode>
float dot_q32(const uint8_t* w, const uint8_t* x, int64_t n_in) {
  float a[8] = {};
  float m = 0.0f;
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const Block32 wb = Decode::decode(w + b * Decode::kBytes);
    const auto xb = load<ActQ8_0>(x + b * sizeof(ActQ8_0));
    const float s = wb.d * xb.d;
    for (int j = 0; j < 8; ++j) {
      int32_t p = 0;
      for (int k = 0; k < 4; ++k) p += wb.q[4 * j + k] * xb.qs[4 * j + k];
      a[j] = a[j] + s * static_cast<float>(p);
    }
    if constexpr (Decode::kHasMin) m = m + wb.m * xb.s;
  }
  if constexpr (Decode::kHasMin) {
    return hsum8(a) + m;
  } else {
    return hsum8(a);
  }
}

// Contract case 2b: whole-block integer dots, one float accumulator.
template <class Decode>
float dot_q32_block_sum(const uint8_t* w, const uint8_t* x, int64_t n_in) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const Block32 wb = Decode::decode(w + b * Decode::kBytes);
    const auto xb = load<ActQ8_0>(x + b * sizeof(ActQ8_0));
    const float s = wb.d * xb.d;
    int32_t p = 0;
    for (int i = 0; i < 32; ++i) p += wb.q[i] * xb.qs[i];
    acc = acc + s * static_cast<float>(p);
  }
  return acc;
}

// ---- 3. 256-element super-blocks ----------------------------------------------------------

// The exact integer sums of one weight super-block with one activation block: isum (the scaled
// code dots) and, for the types with a dmin, msum (the scaled activation sums it subtracts).
struct SuperSums {
  int32_t isum = 0;
  int32_t msum = 0;
};

// The float steps shared by every super-block type: per super-block acc += (d * dx) * isum, then,
// for the types with a dmin, acc -= (dmin * dx) * msum.
template <class Block, SuperSums (*kSums)(const Block&, const ActQ8_K&)>
float dot_k(const uint8_t* w, const uint8_t* x, int64_t n_in) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n_in / 256; ++b) {
    const auto wb = load<Block>(w + b * sizeof(Block));
    const auto xb = load<ActQ8_K>(x + b * sizeof(ActQ8_K));
    const SuperSums sums = kSums(wb, xb);
    acc = acc + (f16_to_f32(wb.d) * xb.d) * static_cast<float>(sums.isum);
    if constexpr (requires { wb.dmin; }) {
      acc = acc - (f16_to_f32(wb.dmin) * xb.d) * static_cast<float>(sums.msum);
    }
  }
  return acc;
}

// Sub-block j (0..7) of a q4_K / q5_K super-block holds elements [32j, 32j + 32); its codes are
// the low (j even) or high (j odd) nibbles of qs[32 (j / 2) + l], l = 0..31, and for q5_K bit j
// of qh[l] is bit 4.
template <class Block>
SuperSums sums_q45_k(const Block& wb, const ActQ8_K& xb) {
  constexpr bool kFiveBit = std::is_same_v<Block, block_q5_K>;
  SuperSums sums;
  for (int j = 0; j < 8; ++j) {
    const KScaleMin sm = unpack_k_scale_min(wb.scales, j);
    int32_t sub = 0;
    for (int l = 0; l < 32; ++l) {
      const uint8_t byte = wb.qs[32 * (j / 2) + l];
      int q = (j % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
      if constexpr (kFiveBit) q |= ((wb.qh[l] >> j) & 1) << 4;
      sub += q * xb.qs[32 * j + l];
    }
    sums.isum += sm.scale * sub;
    sums.msum += sm.min * (xb.bsums[2 * j] + xb.bsums[2 * j + 1]);
  }
  return sums;
}

// Element i = 128 h + 32 k + l (half h, quarter k, lane l): low 4 bits from ql[64h + 32(k & 1) + l]
// (low nibble for k < 2, high for k >= 2), high 2 bits (qh[32h + l] >> 2k) & 3, scale scales[i/16].
SuperSums sums_q6_k(const block_q6_K& wb, const ActQ8_K& xb) {
  SuperSums sums;
  for (int run = 0; run < 16; ++run) {
    int32_t sub = 0;
    for (int e = 0; e < 16; ++e) {
      const int i = 16 * run + e;
      const int h = i / 128, k = (i % 128) / 32, l = i % 32;
      const uint8_t low_byte = wb.ql[64 * h + 32 * (k & 1) + l];
      const int low = k < 2 ? (low_byte & 0x0f) : (low_byte >> 4);
      const int high = (wb.qh[32 * h + l] >> (2 * k)) & 3;
      sub += ((low | (high << 4)) - 32) * xb.qs[i];
    }
    sums.isum += wb.scales[run] * sub;
  }
  return sums;
}

// Element i = 128 h + 32 k + l (half h, quarter k, lane l) of a q2_K / q3_K super-block: low 2
// bits (qs[32h + l] >> 2k) & 3; run i / 16.
int low2_code(const uint8_t* qs, int i) {
  const int h = i / 128, k = (i % 128) / 32, l = i % 32;
  return (qs[32 * h + l] >> (2 * k)) & 3;
}

SuperSums sums_q2_k(const block_q2_K& wb, const ActQ8_K& xb) {
  SuperSums sums;
  for (int run = 0; run < 16; ++run) {
    int32_t sub = 0;
    for (int e = 0; e < 16; ++e) sub += low2_code(wb.qs, 16 * run + e) * xb.qs[16 * run + e];
    sums.isum += (wb.scales[run] & 0x0f) * sub;
    sums.msum += (wb.scales[run] >> 4) * xb.bsums[run];
  }
  return sums;
}

// q3_K: bit (4h + k) of hmask[l] clear subtracts 4 from the low 2 bits.
SuperSums sums_q3_k(const block_q3_K& wb, const ActQ8_K& xb) {
  SuperSums sums;
  for (int run = 0; run < 16; ++run) {
    int32_t sub = 0;
    for (int e = 0; e < 16; ++e) {
      const int i = 16 * run + e;
      const int bit = (wb.hmask[i % 32] >> (i / 32)) & 1;
      sub += (low2_code(wb.qs, i) - (bit ? 0 : 4)) * xb.qs[i];
    }
    sums.isum += (unpack_q3_k_scale(wb.scales, run) - 32) * sub;
  }
  return sums;
}

// ---- Row loops -----------------------------------------------------------------------------

template <float (*kDot)(const uint8_t*, const uint8_t*, int64_t)>
void rows(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  for (int64_t o = row_begin; o < row_end; ++o) {
    const uint8_t* w = a.w + static_cast<size_t>(o) * a.w_row_bytes;
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      a.out[t * a.n_out + o] = kDot(w, a.act + static_cast<size_t>(t) * a.act_row_bytes, a.n_in);
    }
  }
}

// ---- The reference rows ---------------------------------------------------------------------

// The kernels' row of a type: the activations its kernels read, and its scalar kernel (which
// every variant reproduces, and which a variant without a kernel of its own runs). A type
// without a row has no matmul (matmul_supports is false).
struct ReferenceRow {
  DType type = DType::F32;
  ActFormat act = ActFormat::F32;
  RowKernel kernel = nullptr;
};
constexpr ReferenceRow kReferenceRows[] = {
    {DType::F32, ActFormat::F32, rows<dot_float<LoadF32>>},
    {DType::F16, ActFormat::F32, rows<dot_float<LoadF16>>},
    {DType::BF16, ActFormat::F32, rows<dot_float<LoadBF16>>},
    {DType::Q4_0, ActFormat::Q8_0, rows<dot_q32<DecodeQ4_0>>},
    {DType::Q4_1, ActFormat::Q8_0, rows<dot_q32<DecodeQ4_1>>},
    {DType::Q5_0, ActFormat::Q8_0, rows<dot_q32<DecodeQ5_0>>},
    {DType::Q5_1, ActFormat::Q8_0, rows<dot_q32<DecodeQ5_1>>},
    {DType::Q8_0, ActFormat::Q8_0, rows<dot_q32<DecodeQ8_0>>},
    {DType::Q2_K, ActFormat::Q8_K, rows<dot_k<block_q2_K, sums_q2_k>>},
    {DType::Q3_K, ActFormat::Q8_K, rows<dot_k<block_q3_K, sums_q3_k>>},
    {DType::Q4_K, ActFormat::Q8_K, rows<dot_k<block_q4_K, sums_q45_k<block_q4_K>>>},
    {DType::Q5_K, ActFormat::Q8_K, rows<dot_k<block_q5_K, sums_q45_k<block_q5_K>>>},
    {DType::Q6_K, ActFormat::Q8_K, rows<dot_k<block_q6_K, sums_q6_k>>},
    {DType::MXFP4, ActFormat::Q8_0, rows<dot_q32<DecodeMxfp4>>},
};
constexpr auto kReference = table_by_type(kReferenceRows);

// Every row's activations come in blocks of the weight type's block size (a kernel reads one
// activation block per weight block). Whether each row has a kernel is checked by the tests
// (dtype_tables_test): a function's address compared with null is not a constant expression in
// every build, UndefinedBehaviorSanitizer's among them.
constexpr bool reference_rows_complete() {
  for (const ReferenceRow& row : kReferenceRows) {
    if (act_format_info(row.act).block_elems != dtype_info(row.type).block_elems) return false;
  }
  return true;
}
static_assert(reference_rows_complete(),
              "a reference row's activation format's block size is not the weight type's");

constexpr KernelTable make_table() {
  KernelTable table;
  for (const ReferenceRow& row : kReferenceRows) table.matmul[dtype_index(row.type)] = row.kernel;
  table.quantize_act[static_cast<size_t>(ActFormat::Q8_0)] = quantize_act_q8_0_scalar;
  table.quantize_act[static_cast<size_t>(ActFormat::Q8_K)] = quantize_act_q8_k_scalar;
  return table;
}

// The scalar reference of the AVX512 variant: its kernels of contract cases 1b and 2b in place.
constexpr TypeKernel kBlockSumKernels[] = {
    {DType::F32, rows<dot_float_fused<LoadF32>>},
    {DType::F16, rows<dot_float_fused<LoadF16>>},
    {DType::BF16, rows<dot_float_fused<LoadBF16>>},
    {DType::Q4_0, rows<dot_q32_block_sum<DecodeQ4_0>>},
    {DType::Q5_0, rows<dot_q32_block_sum<DecodeQ5_0>>},
    {DType::Q8_0, rows<dot_q32_block_sum<DecodeQ8_0>>},
};

constexpr KernelTable make_block_sum_table() {
  KernelTable table = make_table();
  table.matmul = with_kernels(table.matmul, kBlockSumKernels);
  return table;
}

}  // namespace

ActFormat act_format(DType type) {
  return kReference[dtype_index(type)].act;
}

const KernelTable& scalar_kernels() {
  static constexpr KernelTable kTable = make_table();
  return kTable;
}

const KernelTable& reference_kernels(KernelIsa isa) {
  static constexpr KernelTable kBlockSum = make_block_sum_table();
  return isa == KernelIsa::AVX512 ? kBlockSum : scalar_kernels();
}

}  // namespace trellis::kernels_detail
