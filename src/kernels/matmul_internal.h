// Internals shared by the matmul dispatch (matmul.cpp) and its ISA variants (generic/, x86/, arm/).
//
// THE ARITHMETIC CONTRACT. Every variant computes each output element with exactly the float
// operations below, in this order, so SCALAR, AVX2 and NEON agree bit for bit (AVX512 too, except
// for the types of cases 1b and 2b, where it agrees with its own scalar reference), and an
// element's bits do not depend on the tile, the batch or the thread that computes it. Sums of
// integers are exact (no overflow, bounds below), so their order is free; float operations are
// never fused (sources are compiled with -ffp-contract=off; SIMD code uses separate multiply and
// add).
//
// Eight float lanes a[0..8), all starting at +0, are reduced at the end by hsum8:
//     hsum8(a) = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7))
// (the natural AVX2 order: upper 128 bits onto the lower, then the upper 64, then the upper 32).
//
// 1. Float weights (F32, F16, BF16), f32 activations x:
//        for i = 0 .. n_in-1:   a[i % 8] = a[i % 8] + (w_i * x_i)          (w_i exact in f32)
//        out = hsum8(a)
//
// 1b. The AVX512 variant's float kernels (a departure of the same kind as 2b below): one
//    accumulator acc = +0 per output element, each product fused into it (one rounding), as the
//    weight rows are held one per lane of a 16-row tile:
//        for i = 0 .. n_in-1:   acc = fma(w_i, x_i, acc)
//        out = acc
//
// 2. 32-element blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) with activations quantized to ActQ8_0
//    (block b: scale dx, codes xq[32], and sx = dx * float(sum of xq)); the weight block has
//    scale dw, integer codes qw[32] (centred: q - 8, q - 16, or the int8 itself for the _0 types;
//    raw unsigned q for the _1 types) and, for the _1 types, the offset mw:
//        for each block b, in order:
//          s = dw * dx
//          for lane j = 0..7:  p_j = sum_{k<4} qw[4j + k] * xq[4j + k]    (exact int32)
//                              a[j] = a[j] + (s * float(p_j))
//          _1 types only:      m = m + (mw * sx)                            (m starts at +0)
//        out = hsum8(a)            (_0 types)
//        out = hsum8(a) + m        (_1 types)
//
// 2b. The AVX512 variant's Q4_0, Q5_0 and Q8_0 kernels (with 1b its only departures from this
//    contract; every other type follows case 2 or 3): one float accumulator acc = +0 per output
//    element, whole-block integer dots, as the weight rows are held one per lane of a 16-row tile:
//        for each block b, in order:
//          s = dw * dx
//          P = sum_{i<32} qw[i] * xq[i]                                        (exact int32)
//          acc = acc + (s * float(P))
//        out = acc
//    reference_kernels(KernelIsa::AVX512) holds its scalar reference.
//
// 3. 256-element super-blocks (Q2_K .. Q6_K) with activations quantized to ActQ8_K (scale dx,
//    codes xq[256], bsums[k] = sum of xq[16k, 16k + 16)); one float accumulator acc = +0:
//        for each super-block, in order:
//          Q4_K / Q5_K:  isum = sum_j sc_j * (sum_{i in sub-block j} q_i * xq_i)   (exact int32)
//                        msum = sum_j mn_j * (bsums[2j] + bsums[2j + 1])            (exact int32)
//                        acc = acc + ((dw * dx) * float(isum))
//                        acc = acc - ((dminw * dx) * float(msum))
//          Q2_K:         as Q4_K with runs of 16: sums over run k (0..15), msum with bsums[k]
//          Q6_K:         isum = sum_k sc_k * (sum_{i in run k} (q_i - 32) * xq_i)  (exact int32)
//                        acc = acc + ((dw * dx) * float(isum))
//          Q3_K:         as Q6_K with the signed codes q_i (-4..3) and scales s_k - 32
//        out = acc
//    Bounds: |isum| <= 8 * 63 * 32 * 31 * 127 < 2^26 (Q5_K), 16 * 128 * 16 * 32 * 127 < 2^27
//    (Q6_K); Q2_K and Q3_K are below 2^23.
//
// Activation quantization (identical in every variant; round(v) is round-half-to-even, which is
// what cvtps2dq and fcvtns do):
//     amax = max |x_i| over the block;  d = amax / 127;  id = d != 0 ? 1 / d : 0
//     q_i = clamp(round(x_i * id), -127, 127)
// Precondition: finite activations.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/kernel_isa.h"
#include "tensor/dtype.h"

namespace trellis {
struct AttentionRow;
class KvStorage;
struct KvLayout;
}  // namespace trellis

namespace trellis::kernels_detail {

// One block of 32 activations quantized to 8 bits.
struct ActQ8_0 {
  float d;  // scale: x ~= d * qs[i]
  float s;  // d * float(sum of qs): the offset term of the _1 weight types
  int8_t qs[32];
};
static_assert(sizeof(ActQ8_0) == 40);

// One block of 256 activations quantized to 8 bits, with sums per run of 16.
struct ActQ8_K {
  float d;
  int16_t bsums[16];  // bsums[k] = sum of qs[16k, 16k + 16)
  int8_t qs[256];
};
static_assert(sizeof(ActQ8_K) == 292);

// The activations a weight type's kernels read (the reference row of the type, in
// generic/matmul_generic.cpp, says which); F32: x itself.
enum class ActFormat { F32, Q8_0, Q8_K };
inline constexpr size_t kActFormatCount = 3;

struct ActFormatInfo {
  int64_t block_elems;  // equal to the block_elems of every weight type that reads the format
  size_t block_bytes;
};
inline constexpr std::array<ActFormatInfo, kActFormatCount> kActFormats = {{
    {1, sizeof(float)},      // F32
    {32, sizeof(ActQ8_0)},   // Q8_0
    {256, sizeof(ActQ8_K)},  // Q8_K
}};

constexpr const ActFormatInfo& act_format_info(ActFormat format) {
  return kActFormats[static_cast<size_t>(format)];
}
// Bytes of one token's activations in `format` (n_in a multiple of the block size).
size_t act_row_bytes(ActFormat format, int64_t n_in);

// Everything a row kernel needs. Output element (t, o) is out[t * n_out + o].
struct MatmulArgs {
  DType type;
  const uint8_t* w;    // n_out rows of w_row_bytes, or a packed layout (kernels/weight_pack.h)
  size_t w_row_bytes;  // of the GGUF rows, whatever the layout
  int64_t n_in;
  const uint8_t* act;  // n_tokens rows of act_row_bytes: f32 x, or ActQ8_0 / ActQ8_K blocks
  size_t act_row_bytes;
  int64_t n_tokens;
  float* out;
  int64_t n_out;
};

// Computes out[t][o] for all tokens and o in [row_begin, row_end).
using RowKernel = void (*)(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// Quantizes one row of n_in activations (n_in a multiple of the block size).
using ActQuantizer = void (*)(const float* x, void* out, int64_t n_in);

// Paged attention for one (query row, head) pair (see kernels/attention.h for the math); `scores`
// holds attend_group_scratch_floats(kv.layout(), 1, row) floats (the scores, and room to decode
// keys and values). `sink`: the head's sink logit, -infinity for none (the
// max starts from it and the denominator from exp(sink - max), so no sink changes no bit).
using AttendHeadKernel = void (*)(const KvStorage& kv, int64_t layer, int64_t kv_head,
                                  const AttentionRow& row, const float* q, float* out,
                                  float* scores, float sink);
// Paged attention for the n_q consecutive query heads of one row that read kv head `kv_head`
// (q and out: n_q x head_dim floats; sinks: their n_q sink logits, or null), each head with the
// bits of an AttendHeadKernel call of its own; `scratch` holds
// attend_group_scratch_floats(kv.layout(), n_q, row) floats.
using AttendGroupKernel = void (*)(const KvStorage& kv, int64_t layer, int64_t kv_head,
                                   const AttentionRow& row, const float* q, int64_t n_q, float* out,
                                   float* scratch, const float* sinks);
// One query of a tile: a query head of one row, over positions [first, last] (at most
// kAttentionSplitPositions of them) of the tile's block table; `sink` -infinity for none, `lse`
// as AttentionRow's (a piece of a split row).
struct TileQuery {
  const float* q;  // head_dim floats
  float* out;      // head_dim floats
  float* lse;
  float sink;
  int32_t first;
  int32_t last;
};
// Paged attention for queries that read kv head `kv_head` through one block table (the query
// heads of consecutive rows of one sequence, such as a prefill chunk's), each with the bits of an
// AttendHeadKernel call of its own for that head and range: the tile only shares the reading of
// the keys and values between them. `scratch` holds attend_tile_scratch_floats(kv.layout(),
// n_queries) floats.
using AttendTileKernel = void (*)(const KvStorage& kv, int64_t layer, int64_t kv_head,
                                  const int32_t* block_table, const TileQuery* queries,
                                  int64_t n_queries, float* scratch);
int64_t attend_tile_scratch_floats(const KvLayout& layout, int64_t n_queries);
// The scores and output sums of n_q heads, and one block of keys or values widened to f32.
int64_t attend_group_scratch_floats(const KvLayout& layout, int64_t n_q, const AttentionRow& row);

// A variant's matmul kernels, indexed by dtype_index(type); null: the variant has no kernel of
// its own for the type (it takes the scalar one), or nobody has (matmul_supports is false).
using RowKernels = std::array<RowKernel, kDTypeIdEnd>;

// One row of a variant's kernel list: adding a kernel is adding a row.
struct TypeKernel {
  DType type = DType::F32;
  RowKernel kernel = nullptr;
};

// The rows at their types' slots (a type listed twice does not compile).
template <size_t N>
constexpr RowKernels row_kernels(const TypeKernel (&rows)[N]) {
  const std::array<TypeKernel, kDTypeIdEnd> by_type = table_by_type(rows);
  RowKernels kernels{};
  for (size_t i = 0; i < kDTypeIdEnd; ++i) kernels[i] = by_type[i].kernel;
  return kernels;
}

// `base` with the rows' kernels in place: a variant built on another one.
// (Walks the rows rather than testing entries for null: a function's address compared with null
// is not a constant expression in every build, UndefinedBehaviorSanitizer's among them.)
template <size_t N>
constexpr RowKernels with_kernels(RowKernels base, const TypeKernel (&rows)[N]) {
  (void)table_by_type(rows);  // a type listed twice does not compile
  for (const TypeKernel& row : rows) base[dtype_index(row.type)] = row.kernel;
  return base;
}

// One ISA's kernels; a null entry falls back to the scalar one.
struct KernelTable {
  RowKernels matmul{};
  // Packed layouts (kernels/weight_pack.h), by weight type: only the variant that packs has
  // entries, and they have no scalar fallback (a packed matrix is never handed to another
  // variant).
  RowKernels packed{};
  // Indexed by ActFormat; the F32 entry stays null (x is read as it is).
  std::array<ActQuantizer, kActFormatCount> quantize_act{};
  // Attention, for head sizes that are multiples of attend_head_dim_multiple and at most
  // attend_max_head_dim (other sizes, or a null entry, take the scalar kernel).
  AttendHeadKernel attend_head = nullptr;
  // Optional: the heads of a GQA group at once (same bits as attend_head, same head sizes).
  AttendGroupKernel attend_group = nullptr;
  // Optional: tiles of queries (same bits as attend_head), for head sizes that are multiples of
  // attend_tile_dim_multiple, at most attend_max_head_dim.
  AttendTileKernel attend_tile = nullptr;
  int64_t attend_tile_dim_multiple = 1;
  int64_t attend_head_dim_multiple = 1;
  int64_t attend_max_head_dim = 0;
};

// The table's own kernel for `type`, and its quantizer of `format` (null: none). Out of line,
// like everything here that runs: a copy of an inline function made in a translation unit built
// for AVX-512 could be the one the linker keeps for every caller (see x86/avx2_util.h). The
// constexpr helpers above only ever run at compile time there.
RowKernel table_kernel(const KernelTable& table, DType type);
ActQuantizer table_quantizer(const KernelTable& table, ActFormat format);

// The activation format of a weight type's kernels (F32 for a type without kernels).
ActFormat act_format(DType type);

// The kernel table of a variant (the scalar table for a variant this build lacks).
const KernelTable& isa_table(KernelIsa isa);

const KernelTable& scalar_kernels();
#if defined(__x86_64__)
const KernelTable& avx2_kernels();  // defined in x86/, compiled with -mavx2 -mfma -mf16c
#endif
#if defined(__x86_64__)
// The AVX2 table with the AVX-512 kernels in place (x86/avx512/, compiled with AVX-512 F, BW, VL
// and VNNI on top of the AVX2 flags).
const KernelTable& avx512_kernels();
#endif
#if defined(__aarch64__)
const KernelTable& neon_kernels();
#endif

// The scalar table whose results a variant reproduces bit for bit: scalar_kernels(), except for
// AVX512, whose float kernels follow contract case 1b and its Q4_0, Q5_0 and Q8_0 ones case 2b.
const KernelTable& reference_kernels(KernelIsa isa);

// The scalar attention kernel (the reference for the SIMD ones).
void attend_head_scalar(const KvStorage& kv, int64_t layer, int64_t kv_head,
                        const AttentionRow& row, const float* q, float* out, float* scores,
                        float sink);

// The scalar activation quantizers (also the reference for the SIMD ones).
void quantize_act_q8_0_scalar(const float* x, void* out, int64_t n_in);
void quantize_act_q8_k_scalar(const float* x, void* out, int64_t n_in);

}  // namespace trellis::kernels_detail
