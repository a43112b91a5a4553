// Packed weights (kernels/weight_pack.h): a packed matrix (Q4_0 or float) gives, bit for bit,
// what its GGUF rows give to the same variant, for every tile shape (16-row groups and a partial
// last group; every token tile) and any thread count; a row's result is the same alone and in a
// batch; and only the variant that reads a layout is offered it.
#include "kernels/weight_pack.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "quant/half.h"
#include "quant/quant.h"

namespace trellis {
namespace {

using AlignedBytes = PackedBytes;

// Random Q4_0 rows: every code pattern, scales of either sign.
std::vector<uint8_t> random_q4_0(int64_t n_out, int64_t n_in, std::mt19937& rng) {
  const size_t row = static_cast<size_t>(row_bytes(DType::Q4_0, n_in).value());
  std::vector<uint8_t> bytes(row * static_cast<size_t>(n_out));
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  for (size_t b = 0; b < bytes.size() / 18; ++b) {
    const uint16_t h = f32_to_f16(scale(rng) * (byte(rng) < 64 ? -1.0f : 1.0f));
    std::memcpy(bytes.data() + b * 18, &h, 2);
  }
  return bytes;
}

std::vector<float> random_activations(int64_t n_tokens, int64_t n_in, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(n_tokens * n_in));
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (size_t i = 0; i < x.size(); i += 32) {
    const float scale = std::pow(10.0f, 3.0f * value(rng));
    const bool zero = value(rng) > 0.9f;
    for (size_t k = i; k < i + 32 && k < x.size(); ++k) x[k] = zero ? 0.0f : value(rng) * scale;
  }
  return x;
}

AlignedBytes pack(const WeightView& rows, WeightView& packed) {
  const size_t bytes = packed_weight_bytes(rows);
  AlignedBytes storage = allocate_packed_bytes(bytes);
  packed = pack_weight(KernelIsa::AVX512, rows, storage.get());
  return storage;
}

std::vector<float> run(const WeightView& w, const float* x, int64_t n_tokens, int n_threads) {
  ThreadPool pool(n_threads);
  MatmulScratch scratch;
  std::vector<float> out(static_cast<size_t>(n_tokens * w.n_out), -12345.0f);
  matmul(KernelIsa::AVX512, w, x, n_tokens, out.data(), pool, scratch);
  return out;
}

void expect_bits_equal(const std::vector<float>& got, const std::vector<float>& want,
                       const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
        << what << ": element " << i << ": " << got[i] << " vs " << want[i];
  }
}

TEST(WeightPack, OnlyAvx512PacksQ4_0AndFloats) {
  for (DType type : {DType::Q4_0, DType::F32, DType::F16, DType::BF16}) {
    const WeightView w{type, nullptr, 64, 32};
    EXPECT_TRUE(weight_packable(KernelIsa::AVX512, w)) << dtype_name(type);
    for (KernelIsa isa : {KernelIsa::SCALAR, KernelIsa::AVX2, KernelIsa::NEON})
      EXPECT_FALSE(weight_packable(isa, w)) << kernel_isa_name(isa);
  }
  for (DType type : {DType::Q4_1, DType::Q5_0, DType::Q8_0, DType::Q4_K})
    EXPECT_FALSE(weight_packable(KernelIsa::AVX512, WeightView{type, nullptr, 64, 32}));
  EXPECT_FALSE(weight_packable(KernelIsa::AVX512, WeightView{DType::F16, nullptr, 0, 32}));
  for (WeightLayout layout : {WeightLayout::Q4_0_X16, WeightLayout::FLOAT_X16}) {
    WeightView already{layout == WeightLayout::Q4_0_X16 ? DType::Q4_0 : DType::F16, nullptr, 64,
                       32};
    already.layout = layout;
    EXPECT_FALSE(weight_packable(KernelIsa::AVX512, already));
  }
  // 16-row groups, the last one padded; whole 64-byte lines.
  EXPECT_EQ(packed_weight_bytes(WeightView{DType::Q4_0, nullptr, 64, 17}), 2 * 2 * 288u);
  EXPECT_EQ(packed_weight_bytes(WeightView{DType::Q4_0, nullptr, 32, 16}) % 64, 0u);
  EXPECT_EQ(packed_weight_bytes(WeightView{DType::F16, nullptr, 64, 17}), 2 * 64 * 16 * 2u);
  EXPECT_EQ(packed_weight_bytes(WeightView{DType::F32, nullptr, 3, 5}), 3 * 16 * 4u);
}

// The layout itself, against block_q4_0: scales first, then dword r of vector k = qs[4k..4k+3]
// of row r (the last group repeating its last row).
TEST(WeightPack, Q4_0X16Layout) {
  std::mt19937 rng(5);
  const int64_t n_out = 19, n_in = 64;
  const auto w = random_q4_0(n_out, n_in, rng);
  WeightView packed;
  const AlignedBytes storage = pack(WeightView{DType::Q4_0, w.data(), n_in, n_out}, packed);
  EXPECT_EQ(packed.layout, WeightLayout::Q4_0_X16);
  EXPECT_EQ(packed.n_out, n_out);
  const auto* p = static_cast<const uint8_t*>(packed.data);
  for (int64_t g = 0; g < 2; ++g) {
    for (int64_t b = 0; b < 2; ++b) {
      const uint8_t* block = p + (g * 2 + b) * 288;
      for (int64_t r = 0; r < 16; ++r) {
        const int64_t row = std::min(g * 16 + r, n_out - 1);
        const uint8_t* src = w.data() + row * 36 + b * 18;
        EXPECT_EQ(std::memcmp(block + 2 * r, src, 2), 0);
        for (int k = 0; k < 4; ++k)
          EXPECT_EQ(std::memcmp(block + 32 + 64 * k + 4 * r, src + 2 + 4 * k, 4), 0);
      }
    }
  }
}

// Random float rows of `type` (values of either sign and a wide range of magnitudes).
std::vector<uint8_t> random_float_rows(DType type, int64_t n_out, int64_t n_in,
                                       std::mt19937& rng) {
  const size_t row = static_cast<size_t>(row_bytes(type, n_in).value());
  std::vector<uint8_t> bytes(row * static_cast<size_t>(n_out));
  const auto values = random_activations(n_out, n_in, rng);
  for (int64_t o = 0; o < n_out; ++o)
    quantize_row(type, values.data() + o * n_in, bytes.data() + o * row, n_in);
  return bytes;
}

// The float layout against the rows: column i of group g is the 16 rows' element i, in the
// type's own bytes (the last group repeating its last row).
TEST(WeightPack, FloatX16Layout) {
  std::mt19937 rng(6);
  const int64_t n_out = 19, n_in = 5;
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    const size_t element = type == DType::F32 ? 4 : 2;
    const auto w = random_float_rows(type, n_out, n_in, rng);
    WeightView packed;
    const AlignedBytes storage = pack(WeightView{type, w.data(), n_in, n_out}, packed);
    EXPECT_EQ(packed.layout, WeightLayout::FLOAT_X16);
    const auto* p = static_cast<const uint8_t*>(packed.data);
    for (int64_t g = 0; g < 2; ++g) {
      for (int64_t i = 0; i < n_in; ++i) {
        for (int64_t r = 0; r < 16; ++r) {
          const int64_t row = std::min(g * 16 + r, n_out - 1);
          EXPECT_EQ(std::memcmp(p + ((g * n_in + i) * 16 + r) * element,
                                w.data() + (row * n_in + i) * element, element),
                    0)
              << dtype_name(type) << " g=" << g << " i=" << i << " r=" << r;
        }
      }
    }
  }
}

// Float weights: every tile of the packed kernel (2 groups x 12 tokens and what is left of
// either) and of the rows kernel (tails of n_in past a multiple of 16) give the same bits.
TEST(WeightPack, PackedFloatMatchesRowsExactly) {
  if (!kernel_isa_supported(KernelIsa::AVX512)) GTEST_SKIP() << "no AVX-512 VNNI";
  struct Shape {
    int64_t n_out, n_in;
  };
  const Shape shapes[] = {{16, 16}, {5, 3}, {37, 40}, {64, 64}, {49, 77}, {96, 384}};
  std::mt19937 rng(78);
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    for (const Shape& s : shapes) {
      const auto w = random_float_rows(type, s.n_out, s.n_in, rng);
      const WeightView rows{type, w.data(), s.n_in, s.n_out};
      WeightView packed;
      const AlignedBytes storage = pack(rows, packed);
      for (int64_t n_tokens : {1, 2, 11, 12, 13, 25, 70}) {
        const auto x = random_activations(n_tokens, s.n_in, rng);
        const auto want = run(rows, x.data(), n_tokens, 1);
        for (int n_threads : {1, 2, 3}) {
          SCOPED_TRACE(::testing::Message()
                       << dtype_name(type) << " n_out=" << s.n_out << " n_in=" << s.n_in
                       << " n_tokens=" << n_tokens << " threads=" << n_threads);
          expect_bits_equal(run(packed, x.data(), n_tokens, n_threads), want, "packed vs rows");
        }
      }
    }
  }
}

// Every shape: n_out with and without a partial group, 1 to many blocks, token counts that reach
// each token tile (and the tokens left to one-token tiles), and an n_in past the one-token tile's
// precomputed sums (kMaxSumBlocks = 1024 blocks).
TEST(WeightPack, PackedMatchesRowsExactly) {
  if (!kernel_isa_supported(KernelIsa::AVX512)) GTEST_SKIP() << "no AVX-512 VNNI";
  struct Shape {
    int64_t n_out, n_blocks;
  };
  const Shape shapes[] = {{16, 1}, {5, 3}, {37, 4}, {64, 64}, {40, 16}, {17, 1025}};
  std::mt19937 rng(77);
  for (const Shape& s : shapes) {
    const int64_t n_in = 32 * s.n_blocks;
    const auto w = random_q4_0(s.n_out, n_in, rng);
    const WeightView rows{DType::Q4_0, w.data(), n_in, s.n_out};
    WeightView packed;
    const AlignedBytes storage = pack(rows, packed);
    for (int64_t n_tokens : {1, 2, 3, 4, 7, 8, 13, 32, 45}) {
      if (s.n_blocks > 64 && n_tokens > 8) continue;  // (the large n_in is for one-token tiles)
      const auto x = random_activations(n_tokens, n_in, rng);
      const auto want = run(rows, x.data(), n_tokens, 1);
      for (int n_threads : {1, 2, 3}) {
        SCOPED_TRACE(::testing::Message() << "n_out=" << s.n_out << " n_in=" << n_in
                                          << " n_tokens=" << n_tokens << " threads=" << n_threads);
        expect_bits_equal(run(packed, x.data(), n_tokens, n_threads), want, "packed vs rows");
      }
    }
  }
}

// Batch invariance on the packed layout: each token of a batch equals that token alone.
TEST(WeightPack, PackedBatchInvariant) {
  if (!kernel_isa_supported(KernelIsa::AVX512)) GTEST_SKIP() << "no AVX-512 VNNI";
  std::mt19937 rng(31);
  const int64_t n_out = 45, n_in = 96;
  const auto w = random_q4_0(n_out, n_in, rng);
  WeightView packed;
  const AlignedBytes storage = pack(WeightView{DType::Q4_0, w.data(), n_in, n_out}, packed);
  for (int64_t n_tokens : {2, 5, 11, 37}) {
    const auto x = random_activations(n_tokens, n_in, rng);
    for (int n_threads : {1, 2}) {
      const auto batch = run(packed, x.data(), n_tokens, n_threads);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const auto alone = run(packed, x.data() + t * n_in, 1, 1);
        const std::vector<float> row(batch.begin() + t * n_out, batch.begin() + (t + 1) * n_out);
        SCOPED_TRACE(::testing::Message()
                     << "n_tokens=" << n_tokens << " threads=" << n_threads << " t=" << t);
        expect_bits_equal(row, alone, "in a batch vs alone");
      }
    }
  }
}

}  // namespace
}  // namespace trellis
