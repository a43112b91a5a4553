// Matmul kernels: every ISA variant against the scalar reference (bit for bit: all variants
// follow the arithmetic contract in kernels/matmul_internal.h), batch invariance (a row's result
// does not depend on the batch or the thread count), and the scalar reference against a
// double-precision dequantize-then-dot with a stated error bound.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/matmul_internal.h"
#include "quant/half.h"
#include "quant/quant.h"

namespace trellis {
namespace {

namespace kd = kernels_detail;

const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                           DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                           DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::MXFP4};

std::vector<KernelIsa> supported_isas() {
  std::vector<KernelIsa> isas;
  for (KernelIsa isa : {KernelIsa::SCALAR, KernelIsa::AVX2, KernelIsa::AVX512, KernelIsa::NEON}) {
    if (kernel_isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

int64_t block_elems(DType type) {
  return dtype_info(type).block_elems;
}

size_t weight_row_bytes(DType type, int64_t n_in) {
  return static_cast<size_t>(row_bytes(type, n_in).value());
}

// Byte offsets of the f16 scale fields (d, m, dmin) of each block type.
std::vector<int> f16_field_offsets(DType type) {
  switch (type) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
      return {0};
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
      return {0, 2};
    case DType::Q2_K:
      return {80, 82};
    case DType::Q3_K:
      return {108};
    case DType::Q6_K:
      return {208};
    default:
      return {};
  }
}

// Random weights. Float types: values in [-1, 1] converted with quantize_row. Block types: random
// bytes (every code, scale and high bit pattern, including q8_0's -128), with the f16 scale
// fields replaced by moderate values of either sign.
std::vector<uint8_t> random_weights(DType type, int64_t n_out, int64_t n_in, std::mt19937& rng) {
  const size_t row = weight_row_bytes(type, n_in);
  std::vector<uint8_t> bytes(row * static_cast<size_t>(n_out));
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  if (type == DType::F32 || type == DType::F16 || type == DType::BF16) {
    std::vector<float> values(static_cast<size_t>(n_in));
    for (int64_t o = 0; o < n_out; ++o) {
      for (float& v : values) v = value(rng);
      quantize_row(type, values.data(), bytes.data() + row * static_cast<size_t>(o), n_in);
    }
    return bytes;
  }
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte(rng));
  const size_t block_bytes = static_cast<size_t>(dtype_info(type).block_bytes);
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  for (size_t b = 0; b < bytes.size() / block_bytes; ++b) {
    // mxfp4's E8M0 exponent: scales 2^-9 .. 2^-2, of the f16 scales' order.
    if (type == DType::MXFP4) bytes[b * block_bytes] = static_cast<uint8_t>(119 + byte(rng) % 8);
    for (int offset : f16_field_offsets(type)) {
      const float s = scale(rng) * (byte(rng) < 64 ? -1.0f : 1.0f);
      const uint16_t h = f32_to_f16(s);
      std::memcpy(bytes.data() + b * block_bytes + static_cast<size_t>(offset), &h, 2);
    }
  }
  return bytes;
}

std::vector<float> random_activations(int64_t n_tokens, int64_t n_in, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(n_tokens * n_in));
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::uniform_real_distribution<float> magnitude(-3.0f, 3.0f);
  // Blocks of 32 with scales over a few orders of magnitude; an all-zero block now and then.
  for (size_t i = 0; i < x.size(); i += 32) {
    const float scale = std::pow(10.0f, magnitude(rng));
    const bool zero = value(rng) > 0.9f;
    for (size_t k = i; k < i + 32 && k < x.size(); ++k) x[k] = zero ? 0.0f : value(rng) * scale;
  }
  return x;
}

std::vector<float> run_matmul(KernelIsa isa, DType type, const std::vector<uint8_t>& w,
                              int64_t n_out, int64_t n_in, const float* x, int64_t n_tokens,
                              int n_threads) {
  ThreadPool pool(n_threads);
  MatmulScratch scratch;
  std::vector<float> out(static_cast<size_t>(n_tokens * n_out), -12345.0f);
  matmul(isa, WeightView{type, w.data(), n_in, n_out}, x, n_tokens, out.data(), pool, scratch);
  return out;
}

// The product computed by a scalar table's kernel (reference_kernels(isa)), from activations
// quantized by the scalar quantizers.
std::vector<float> run_reference(KernelIsa isa, DType type, const std::vector<uint8_t>& w,
                                 int64_t n_out, int64_t n_in, const float* x, int64_t n_tokens) {
  const kd::KernelTable& table = kd::reference_kernels(isa);
  kd::MatmulArgs args{};
  args.type = type;
  args.w = w.data();
  args.w_row_bytes = weight_row_bytes(type, n_in);
  args.n_in = n_in;
  args.n_tokens = n_tokens;
  args.n_out = n_out;
  const kd::ActFormat format = kd::act_format(type);
  args.act_row_bytes = kd::act_row_bytes(format, n_in);
  std::vector<uint8_t> act;
  if (format == kd::ActFormat::F32) {
    args.act = reinterpret_cast<const uint8_t*>(x);
  } else {
    act.resize(args.act_row_bytes * static_cast<size_t>(n_tokens));
    const kd::ActQuantizer quantize = kd::table_quantizer(table, format);
    for (int64_t t = 0; t < n_tokens; ++t)
      quantize(x + t * n_in, act.data() + args.act_row_bytes * static_cast<size_t>(t), n_in);
    args.act = act.data();
  }
  std::vector<float> out(static_cast<size_t>(n_tokens * n_out), -12345.0f);
  args.out = out.data();
  kd::table_kernel(table, type)(args, 0, n_out);
  return out;
}

bool bits_equal(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

// Shapes (n_out, n_in in blocks, n_tokens) with n_out not a multiple of any tile, one block, many.
struct Shape {
  int64_t n_out;
  int64_t n_blocks;
  int64_t n_tokens;
};
std::vector<Shape> shapes_for(DType type) {
  if (block_elems(type) == 1) {
    // n_in = n_blocks for float types: include lengths that are not multiples of 8.
    return {{1, 1, 1}, {7, 37, 5}, {13, 8, 17}, {37, 300, 6}, {9, 1024, 3}};
  }
  // (37 rows x 21 tokens: two 16-row tiles and single rows, token tiles of 16, 4 and 1; 40 rows x
  // 1 token: the decode tiles, full and partial.)
  if (block_elems(type) == 32)
    return {{1, 1, 1},  {7, 1, 5},   {37, 3, 6},  {13, 8, 17},
            {9, 64, 3}, {37, 3, 21}, {64, 4, 40}, {40, 16, 1}};
  return {{1, 1, 1}, {7, 1, 5}, {37, 2, 6}, {13, 3, 17}, {9, 8, 3}, {40, 3, 1}};
}

class MatmulTypeTest : public ::testing::TestWithParam<DType> {};

// Every variant equals its scalar reference (reference_kernels) bit for bit, for 1 and 3 threads.
TEST_P(MatmulTypeTest, IsaVariantsMatchScalarExactly) {
  const DType type = GetParam();
  std::mt19937 rng(1234 + static_cast<int>(type));
  for (const Shape& shape : shapes_for(type)) {
    const int64_t n_in = shape.n_blocks * block_elems(type);
    const auto w = random_weights(type, shape.n_out, n_in, rng);
    const auto x = random_activations(shape.n_tokens, n_in, rng);
    for (KernelIsa isa : supported_isas()) {
      const auto expected =
          run_reference(isa, type, w, shape.n_out, n_in, x.data(), shape.n_tokens);
      for (int n_threads : {1, 3}) {
        const auto got =
            run_matmul(isa, type, w, shape.n_out, n_in, x.data(), shape.n_tokens, n_threads);
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_TRUE(bits_equal(got[i], expected[i]))
              << kernel_isa_name(isa) << " n_out=" << shape.n_out << " n_in=" << n_in
              << " n_tokens=" << shape.n_tokens << " threads=" << n_threads << " element " << i
              << ": " << got[i] << " vs scalar " << expected[i];
        }
      }
    }
  }
}

// Batch invariance: every token row of a 1..17-token batch, with 1, 2 and 3 threads, equals bit
// for bit the same row computed alone (n_tokens = 1, one thread), for every variant.
TEST_P(MatmulTypeTest, BatchInvariant) {
  const DType type = GetParam();
  std::mt19937 rng(99 + static_cast<int>(type));
  const int64_t n_in = (block_elems(type) == 1 ? 77 : 3 * block_elems(type));
  const int64_t n_out = 29;
  const auto w = random_weights(type, n_out, n_in, rng);
  for (KernelIsa isa : supported_isas()) {
    for (int trial = 0; trial < 3; ++trial) {
      const int64_t n_tokens = std::uniform_int_distribution<int64_t>(1, 17)(rng);
      const auto x = random_activations(n_tokens, n_in, rng);
      std::vector<std::vector<float>> alone;
      for (int64_t t = 0; t < n_tokens; ++t)
        alone.push_back(run_matmul(isa, type, w, n_out, n_in, x.data() + t * n_in, 1, 1));
      for (int n_threads : {1, 2, 3}) {
        const auto batch = run_matmul(isa, type, w, n_out, n_in, x.data(), n_tokens, n_threads);
        for (int64_t t = 0; t < n_tokens; ++t) {
          for (int64_t o = 0; o < n_out; ++o) {
            ASSERT_TRUE(bits_equal(batch[t * n_out + o], alone[t][o]))
                << kernel_isa_name(isa) << " n_tokens=" << n_tokens << " threads=" << n_threads
                << " t=" << t << " o=" << o;
          }
        }
      }
    }
  }
}

// Offsets (the m of q4_1 / q5_1, -dmin * mn of q2_K / q4_K / q5_K) of each weight: the row
// dequantized with every code set to 0. Zero for the other types.
std::vector<float> weight_offsets(DType type, const uint8_t* row, int64_t n_in) {
  std::vector<float> offsets(static_cast<size_t>(n_in), 0.0f);
  struct Range {
    int begin, end;
  };
  std::vector<Range> codes;
  if (type == DType::Q4_1) codes = {{4, 20}};
  if (type == DType::Q5_1) codes = {{4, 24}};
  if (type == DType::Q2_K) codes = {{16, 80}};
  if (type == DType::Q4_K) codes = {{16, 144}};
  if (type == DType::Q5_K) codes = {{16, 176}};
  if (codes.empty()) return offsets;
  const size_t block_bytes = static_cast<size_t>(dtype_info(type).block_bytes);
  std::vector<uint8_t> zeroed(row, row + weight_row_bytes(type, n_in));
  for (size_t b = 0; b < zeroed.size() / block_bytes; ++b)
    for (const Range& r : codes)
      std::memset(zeroed.data() + b * block_bytes + r.begin, 0,
                  static_cast<size_t>(r.end - r.begin));
  dequantize_row(type, zeroed.data(), offsets.data(), n_in);
  return offsets;
}

// The activations as the integer kernels see them: dequantized ActQ8_0 / ActQ8_K blocks, with
// each element's scale d (the quantization error of element i is at most d_i / 2).
void dequantized_activations(DType type, const float* x, int64_t n_in, std::vector<float>& xq,
                             std::vector<float>& d) {
  xq.assign(x, x + n_in);
  d.assign(static_cast<size_t>(n_in), 0.0f);
  const kd::ActFormat format = kd::act_format(type);
  if (format == kd::ActFormat::F32) return;
  std::vector<uint8_t> blocks(kd::act_row_bytes(format, n_in));
  if (format == kd::ActFormat::Q8_0) {
    kd::quantize_act_q8_0_scalar(x, blocks.data(), n_in);
    for (int64_t b = 0; b < n_in / 32; ++b) {
      kd::ActQ8_0 block;
      std::memcpy(&block, blocks.data() + b * sizeof(block), sizeof(block));
      for (int i = 0; i < 32; ++i) {
        xq[b * 32 + i] = block.d * block.qs[i];  // one rounding, covered by the bound below
        d[b * 32 + i] = block.d;
      }
    }
  } else {
    kd::quantize_act_q8_k_scalar(x, blocks.data(), n_in);
    for (int64_t b = 0; b < n_in / 256; ++b) {
      kd::ActQ8_K block;
      std::memcpy(&block, blocks.data() + b * sizeof(block), sizeof(block));
      for (int i = 0; i < 256; ++i) {
        xq[b * 256 + i] = block.d * block.qs[i];
        d[b * 256 + i] = block.d;
      }
    }
  }
}

// Checks the bound described below (ScalarMatchesDoubleReference) for every output of `out`.
void check_against_double(DType type, const std::vector<uint8_t>& w, const std::vector<float>& x,
                          int64_t n_in, int64_t n_out, int64_t n_tokens,
                          const std::vector<float>& out) {
  const int64_t lane_chain = block_elems(type) == 1    ? (n_in + 7) / 8
                             : block_elems(type) == 32 ? n_in / 32
                                                       : 2 * n_in / 256;
  const double u = std::ldexp(1.0, -24);
  const double gamma = 1.01 * static_cast<double>(lane_chain + 9) * u;
  std::vector<float> wf(static_cast<size_t>(n_in)), xq, d;
  for (int64_t o = 0; o < n_out; ++o) {
    const uint8_t* row = w.data() + weight_row_bytes(type, n_in) * static_cast<size_t>(o);
    dequantize_row(type, row, wf.data(), n_in);
    const auto offsets = weight_offsets(type, row, n_in);
    for (int64_t t = 0; t < n_tokens; ++t) {
      dequantized_activations(type, x.data() + t * n_in, n_in, xq, d);
      double exact_q = 0, exact_x = 0, magnitude = 0, quant_error = 0;
      for (int64_t i = 0; i < n_in; ++i) {
        exact_q += static_cast<double>(wf[i]) * xq[i];
        exact_x += static_cast<double>(wf[i]) * x[t * n_in + i];
        magnitude += (std::fabs(static_cast<double>(wf[i]) - offsets[i]) + std::fabs(offsets[i])) *
                     std::fabs(xq[i]);
        quant_error += std::fabs(wf[i]) * 0.5 * d[i];
      }
      const double got = out[t * n_out + o];
      const double bound_q = gamma * magnitude + 1e-30;
      EXPECT_LE(std::fabs(got - exact_q), bound_q)
          << "o=" << o << " t=" << t << " got " << got << " exact " << exact_q;
      EXPECT_LE(std::fabs(got - exact_x), bound_q + 1.01 * quant_error)
          << "o=" << o << " t=" << t << " got " << got << " exact " << exact_x;
    }
  }
}

// The scalar reference against a double-precision dot of the dequantized weights with
//   (a) the dequantized activation codes: only float rounding separates them. Each contract term
//       goes through at most 3 roundings before it is added (scale product, int->float, product)
//       and at most L + 4 additions after (L = the lane's chain length, 3 in hsum8, 1 for the _1
//       offsets), so |error| <= gamma_{L+8} * M with gamma_k = k u / (1 - k u), u = 2^-24, and
//       M = sum_i (|w_i - off_i| + |off_i|) |xq_i| bounding the sum of |terms| (off_i: the
//       weight's offset term, see weight_offsets). The test uses 1.01 * (L + 8) * u * M, plus
//       the rounding of xq_i = d * q in float (u * M).
//   (b) the original activations: add the activation quantization error, |x_i - xq_i| <= d_i / 2
//       per element, times |w_i|, i.e. the bound grows by sum_i |w_i| * d_i / 2 (times 1.01).
TEST_P(MatmulTypeTest, ScalarMatchesDoubleReference) {
  const DType type = GetParam();
  std::mt19937 rng(7 + static_cast<int>(type));
  const int64_t n_in = block_elems(type) == 1 ? 1000 : 16 * block_elems(type);
  const int64_t n_out = 11, n_tokens = 4;
  const auto w = random_weights(type, n_out, n_in, rng);
  const auto x = random_activations(n_tokens, n_in, rng);
  // Both scalar arithmetics: contract case 2 (scalar_kernels) and case 2b (the AVX512 reference).
  for (KernelIsa reference_isa : {KernelIsa::SCALAR, KernelIsa::AVX512}) {
    const auto out = run_reference(reference_isa, type, w, n_out, n_in, x.data(), n_tokens);
    check_against_double(type, w, x, n_in, n_out, n_tokens, out);
  }
}

// The SIMD activation quantizers write the same bytes as the scalar one.
TEST_P(MatmulTypeTest, ActivationQuantizersMatchScalar) {
  const DType type = GetParam();
  const kd::ActFormat format = kd::act_format(type);
  if (format == kd::ActFormat::F32) GTEST_SKIP() << "f32 activations are used as they are";
  std::mt19937 rng(5);
  const int64_t n_in = 8 * 256;
  auto x = random_activations(1, n_in, rng);
  // Values that land exactly on .5 after scaling (ties) and on the clamp.
  for (int i = 0; i < 32; ++i) x[i] = 0.5f * static_cast<float>(i - 16);
  x[40] = 127.0f;
  for (int i = 41; i < 64; ++i) x[i] = static_cast<float>(i) + 0.5f;
  const size_t bytes = kd::act_row_bytes(format, n_in);
  std::vector<uint8_t> expected(bytes), got(bytes);
  const kd::ActQuantizer scalar =
      format == kd::ActFormat::Q8_0 ? kd::quantize_act_q8_0_scalar : kd::quantize_act_q8_k_scalar;
  scalar(x.data(), expected.data(), n_in);
#if defined(__x86_64__)
  if (kernel_isa_supported(KernelIsa::AVX2)) {
    const auto& t = kd::avx2_kernels();
    kd::table_quantizer(t, format)(x.data(), got.data(), n_in);
    EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), bytes));
  }
#endif
#if defined(__aarch64__)
  {
    const auto& t = kd::neon_kernels();
    auto q = kd::table_quantizer(t, format);
    if (q) {
      q(x.data(), got.data(), n_in);
      EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), bytes));
    }
  }
#endif
}

std::string type_name(const ::testing::TestParamInfo<DType>& info) {
  return std::string(dtype_name(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulTypeTest, ::testing::ValuesIn(kAllTypes), type_name);

// A hand-computed product pins the layout: out[t][o] = sum_i W[o][i] x[t][i].
TEST(Matmul, SmallF32ProductByHand) {
  const float w[3 * 2] = {1, 2, 3, 4, 5, 6};  // W[o][i], n_out = 3, n_in = 2
  const float x[2 * 2] = {1, 1, 2, 0};        // x[t][i], n_tokens = 2
  ThreadPool pool(2);
  MatmulScratch scratch;
  for (KernelIsa isa : supported_isas()) {
    float out[2 * 3] = {};
    matmul(isa, WeightView{DType::F32, w, 2, 3}, x, 2, out, pool, scratch);
    const float expected[6] = {3, 7, 11, 2, 6, 10};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], expected[i]) << kernel_isa_name(isa) << " " << i;
  }
}

TEST(Matmul, SupportedTypesAndIsas) {
  for (DType type : kAllTypes) EXPECT_TRUE(matmul_supports(type)) << dtype_name(type);
  for (DType type : {DType::Q8_1, DType::Q8_K, DType::I8, DType::F64})
    EXPECT_FALSE(matmul_supports(type)) << dtype_name(type);
  EXPECT_TRUE(kernel_isa_supported(KernelIsa::SCALAR));
  EXPECT_TRUE(kernel_isa_supported(best_kernel_isa()));
  EXPECT_EQ(kernel_isa_name(KernelIsa::AVX2), "avx2");
  EXPECT_EQ(kernel_isa_name(KernelIsa::AVX512), "avx512");
#if defined(__x86_64__)
  EXPECT_FALSE(kernel_isa_supported(KernelIsa::NEON));
  // (Every CPU with AVX2 and FMA also has F16C.)
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  EXPECT_EQ(kernel_isa_supported(KernelIsa::AVX2), avx2);
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512vnni");
  EXPECT_EQ(kernel_isa_supported(KernelIsa::AVX512), avx512);
  if (avx2) {
    EXPECT_EQ(best_kernel_isa(), avx512 ? KernelIsa::AVX512 : KernelIsa::AVX2);
  }
#endif
}

TEST(Matmul, ZeroTokensWritesNothing) {
  std::mt19937 rng(3);
  const auto w = random_weights(DType::Q4_0, 4, 64, rng);
  ThreadPool pool(1);
  MatmulScratch scratch;
  float out = 42.0f;
  matmul(WeightView{DType::Q4_0, w.data(), 64, 4}, nullptr, 0, &out, pool, scratch);
  EXPECT_EQ(out, 42.0f);
}

// matmul_many gives each job what matmul gives it alone, bit for bit: jobs of different types
// (activations quantized to several formats), row counts off the 16-row granule, any thread count.
TEST(Matmul, ManyJobsMatchOneByOne) {
  std::mt19937 rng(11);
  const int64_t n_in = 512;
  const DType types[] = {DType::Q4_0, DType::Q6_K, DType::F16, DType::Q8_0};
  const int64_t n_outs[] = {37, 16, 5, 70};
  std::vector<std::vector<uint8_t>> weights;
  for (int j = 0; j < 4; ++j) weights.push_back(random_weights(types[j], n_outs[j], n_in, rng));
  for (KernelIsa isa : supported_isas()) {
    for (int64_t n_tokens : {1, 3, 9}) {
      const auto x = random_activations(n_tokens, n_in, rng);
      for (int n_threads : {1, 2, 3}) {
        std::vector<std::vector<float>> outs;
        std::vector<MatmulJob> jobs;
        for (int j = 0; j < 4; ++j) outs.emplace_back(static_cast<size_t>(n_tokens * n_outs[j]));
        for (int j = 0; j < 4; ++j)
          jobs.push_back(
              {WeightView{types[j], weights[j].data(), n_in, n_outs[j]}, outs[j].data()});
        ThreadPool pool(n_threads);
        MatmulScratch scratch;
        matmul_many(isa, jobs, x.data(), n_tokens, pool, scratch);
        for (int j = 0; j < 4; ++j) {
          const auto alone =
              run_matmul(isa, types[j], weights[j], n_outs[j], n_in, x.data(), n_tokens, 1);
          for (size_t i = 0; i < alone.size(); ++i) {
            ASSERT_TRUE(bits_equal(outs[j][i], alone[i]))
                << kernel_isa_name(isa) << " job " << j << " n_tokens=" << n_tokens
                << " threads=" << n_threads << " element " << i;
          }
        }
      }
    }
  }
}

TEST(MatmulScratch, GrowsOnlyWhenNeeded) {
  MatmulScratch scratch;
  uint8_t* a = scratch.get(100);
  EXPECT_EQ(scratch.get(50), a);
  EXPECT_EQ(scratch.get(100), a);
  EXPECT_NE(scratch.get(1000), nullptr);
}

}  // namespace
}  // namespace trellis
