// Paged attention: every ISA variant against the scalar reference on GQA head ratios, KV lengths
// that end inside a block, several sequences with scattered block tables, and every KV type (f16,
// f32, q8_0, q4_0, keys and values of different types); the scalar reference against a
// double-precision softmax written here; and thread invariance.
//
// Error bound of a variant against SCALAR (u = 2^-24, f32 unit roundoff). Both read the same K and
// V values (f16 widens to f32 exactly; a quantized element is its code times its block's scale, one
// f32 product in every variant), so they differ only in rounding:
//   - a score s_j = scale * sum_d q_d k_jd is computed by each with an error of at most
//     gamma_d * S_j, gamma_d = d u / (1 - d u), S_j = scale * sum_d |q_d k_jd|; so the two
//     differ by delta <= 2 gamma_d max_j S_j (plus 2u |s_j| for the final multiply by scale);
//   - shifting by the maximum and exponentiating (the same expf in both) turns score differences
//     of at most delta into relative weight differences of at most e^(2 delta) - 1 ~ 2 delta, plus
//     an ulp or so for expf and the subtraction; normalizing by the sum (n terms, each method
//     within gamma_n) adds 2 gamma_n; so each probability differs by at most ~(4 delta + 4
//     gamma_n + 6u) p_j relative;
//   - out = sum_j p_j v_j, a convex combination: its accumulation errs by gamma_n max|v| in each
//     method.
// Hence |out_variant - out_scalar| <= max|v| (8 gamma_d S + 8 gamma_n + 16u), taken per output
// row and head. The inputs are O(1), so this is about 1e-5 here; a wrong block, head or position
// gives errors of order max|v|.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/kv_codec.h"
#include "kernels/matmul_internal.h"
#include "kv/kv_storage.h"

namespace trellis {
namespace {

constexpr double kUnitRoundoff = 1.0 / (1 << 24);

std::vector<KernelIsa> supported_isas() {
  std::vector<KernelIsa> isas;
  for (KernelIsa isa : {KernelIsa::SCALAR, KernelIsa::AVX2, KernelIsa::AVX512, KernelIsa::NEON}) {
    if (kernel_isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

double gamma(double n) {
  return n * kUnitRoundoff / (1.0 - n * kUnitRoundoff);
}

struct Shape {
  int64_t n_head;
  int64_t n_kv_heads;
  int64_t head_dim;
  int32_t block_size;
  std::vector<int32_t> positions;  // one query row per entry: it attends to [0, position]
  int32_t window = 0;  // > 0: a sliding window, each row sees (position - window, position]
  bool sinks = false;  // a sink logit per query head (gpt-oss) joins each softmax's denominator
  // The rows read one sequence (one block table), as a prefill chunk's do, rather than one each.
  bool one_sequence = false;

  int32_t first_position(int32_t position) const {
    return window > 0 ? std::max(0, position - window + 1) : 0;
  }
};

// The KV types every test runs with: each type alone, and keys and values of different types.
std::vector<KvTypes> kv_types() {
  return {KvTypes::both(KvType::F16),  KvTypes::both(KvType::F32),  KvTypes::both(KvType::Q8_0),
          KvTypes::both(KvType::Q4_0), {KvType::Q8_0, KvType::F16}, {KvType::F16, KvType::Q4_0}};
}

// Whether a shape's heads can be stored in those types (quantized rows are blocks of 32).
bool fits(const Shape& s, const KvTypes& types) {
  return s.head_dim % kv_type_block_elements(types.key) == 0 &&
         s.head_dim % kv_type_block_elements(types.value) == 0;
}

std::string describe(const Shape& s, const KvTypes& types) {
  std::string out = "heads " + std::to_string(s.n_head) + "/" + std::to_string(s.n_kv_heads) +
                    " head_dim " + std::to_string(s.head_dim) + " block " +
                    std::to_string(s.block_size) + " " + kv_types_name(types) + " positions";
  for (int32_t p : s.positions) out += " " + std::to_string(p);
  if (s.window > 0) out += " window " + std::to_string(s.window);
  if (s.sinks) out += " sinks";
  if (s.one_sequence) out += " one sequence";
  return out;
}

// A KV cache holding random keys and values for every row's sequence, each sequence in its own
// blocks, handed out in a scrambled order so that block tables are not contiguous.
struct Fixture {
  Shape shape;
  KvStorage kv;
  std::vector<std::vector<int32_t>> tables;
  std::vector<AttentionRow> rows;
  std::vector<float> q;
  std::vector<float> sinks;             // n_head logits when shape.sinks
  static constexpr int64_t kLayer = 1;  // not layer 0: the layer offset must be honoured

  static Fixture make(const Shape& shape, KvTypes types, uint32_t seed) {
    // The sequences' lengths - 1: each row's own, or one for all of them.
    std::vector<int32_t> lasts = shape.positions;
    if (shape.one_sequence) lasts = {*std::max_element(lasts.begin(), lasts.end())};
    int32_t n_blocks = 0;
    for (int32_t p : lasts) n_blocks += p / shape.block_size + 1;
    KvLayout layout;
    layout.n_layer = 2;
    layout.n_kv_heads = shape.n_kv_heads;
    layout.head_dim = shape.head_dim;
    layout.block_size = shape.block_size;
    layout.types = types;
    Result<KvStorage> kv = KvStorage::create(layout, n_blocks);
    EXPECT_TRUE(kv.ok());
    Fixture f{shape, std::move(kv).value(), {}, {}, {}, {}};

    std::mt19937 rng(seed);
    std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
    for (int32_t i = 0; i < n_blocks; ++i) ids[static_cast<size_t>(i)] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    size_t next = 0;
    for (int32_t p : lasts) {
      std::vector<int32_t> table;
      for (int32_t b = 0; b <= p / shape.block_size; ++b) table.push_back(ids[next++]);
      f.tables.push_back(std::move(table));
    }
    // Values in [-1, 1], written through kv_write at every position of every sequence (both
    // layers, so reading the wrong layer shows).
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    const int64_t n_kv = shape.n_kv_heads * shape.head_dim;
    std::vector<float> k(static_cast<size_t>(n_kv)), v(static_cast<size_t>(n_kv));
    for (size_t s = 0; s < lasts.size(); ++s) {
      for (int32_t pos = 0; pos <= lasts[s]; ++pos) {
        for (int64_t layer = 0; layer < 2; ++layer) {
          for (float& x : k) x = value(rng);
          for (float& x : v) x = value(rng);
          kv_write(f.kv, layer, AttentionRow{pos, f.tables[s].data()}, k.data(), v.data());
        }
      }
    }
    for (size_t s = 0; s < shape.positions.size(); ++s)
      f.rows.push_back(AttentionRow{shape.positions[s], f.table_of(s).data(),
                                    shape.first_position(shape.positions[s])});
    // Queries up to 3 in size: scores spread over a few units, so softmax is neither flat nor
    // one-hot.
    std::uniform_real_distribution<float> query(-3.0f, 3.0f);
    f.q.resize(shape.positions.size() * static_cast<size_t>(shape.n_head * shape.head_dim));
    for (float& x : f.q) x = query(rng);
    // Sinks of the scores' order, so that they take a visible share of each softmax.
    if (shape.sinks) {
      std::uniform_real_distribution<float> sink(-2.0f, 4.0f);
      for (int64_t h = 0; h < shape.n_head; ++h) f.sinks.push_back(sink(rng));
    }
    return f;
  }

  // Where row r's head h element d lies in q and the outputs.
  size_t at(size_t r, int64_t h, int64_t d) const {
    return (r * static_cast<size_t>(shape.n_head) + static_cast<size_t>(h)) *
               static_cast<size_t>(shape.head_dim) +
           static_cast<size_t>(d);
  }

  const std::vector<int32_t>& table_of(size_t row) const {
    return tables[shape.one_sequence ? 0 : row];
  }

  // One K or V element as the kernels read it (decoded to f32).
  double element(bool values, size_t row, int64_t kv_head, int32_t pos, int64_t d) const {
    const int32_t block = table_of(row)[static_cast<size_t>(pos / shape.block_size)];
    const KvLayout& layout = kv.layout();
    const size_t row_bytes = values ? layout.value_row_bytes() : layout.key_row_bytes();
    const uint8_t* run =
        values ? kv.values(block, kLayer, kv_head) : kv.keys(block, kLayer, kv_head);
    std::vector<float> decoded(static_cast<size_t>(shape.head_dim));
    kv_decode_row(values ? layout.types.value : layout.types.key,
                  run + static_cast<size_t>(pos % shape.block_size) * row_bytes, decoded.data(),
                  shape.head_dim);
    return decoded[static_cast<size_t>(d)];
  }

  std::vector<float> run(KernelIsa isa, int n_threads) const {
    ThreadPool pool(n_threads);
    AttentionScratch scratch;
    std::vector<float> out(q.size(), NAN);
    paged_attention(isa, kv, kLayer, rows.data(), static_cast<int64_t>(rows.size()), shape.n_head,
                    q.data(), out.data(), pool, scratch, sink_logits());
    return out;
  }

  const float* sink_logits() const { return sinks.empty() ? nullptr : sinks.data(); }

  // The bound from the top of the file for one (row, head); also returns the double-precision
  // result in `exact`.
  double bound_and_exact(size_t r, int64_t h, std::vector<double>& exact) const {
    const int64_t d_model = shape.head_dim;
    const int64_t kv_head = h / (shape.n_head / shape.n_kv_heads);
    const float* qh = q.data() + at(r, h, 0);
    const int32_t first = rows[r].first_position;
    const int32_t n_pos = rows[r].position + 1;
    const double scale = 1.0 / std::sqrt(static_cast<double>(d_model));
    std::vector<double> scores(static_cast<size_t>(n_pos), -INFINITY);  // exp(-inf) = 0: hidden
    double max_abs_sum = 0, max_score = -INFINITY, max_v = 0;
    for (int32_t j = first; j < n_pos; ++j) {
      double dot = 0, abs_sum = 0;
      for (int64_t d = 0; d < d_model; ++d) {
        const double k = element(false, r, kv_head, j, d);
        dot += qh[d] * k;
        abs_sum += std::fabs(qh[d] * k);
        max_v = std::max(max_v, std::fabs(element(true, r, kv_head, j, d)));
      }
      scores[static_cast<size_t>(j)] = dot * scale;
      max_score = std::max(max_score, dot * scale);
      max_abs_sum = std::max(max_abs_sum, abs_sum * scale);
    }
    // A sink joins the maximum and the denominator, and weighs no value.
    const double sink = sinks.empty() ? -INFINITY : sinks[static_cast<size_t>(h)];
    max_score = std::max(max_score, sink);
    double sum = std::exp(sink - max_score);
    for (double& s : scores) sum += (s = std::exp(s - max_score));
    exact.assign(static_cast<size_t>(d_model), 0.0);
    for (int32_t j = first; j < n_pos; ++j) {
      for (int64_t d = 0; d < d_model; ++d)
        exact[static_cast<size_t>(d)] +=
            scores[static_cast<size_t>(j)] / sum * element(true, r, kv_head, j, d);
    }
    return max_v * (8 * gamma(static_cast<double>(d_model)) * max_abs_sum + 8 * gamma(n_pos) +
                    16 * kUnitRoundoff);
  }
};

// Positions first, first + 1, ..., first + n - 1: the rows of a prefill chunk.
std::vector<int32_t> consecutive(int32_t first, int32_t n) {
  std::vector<int32_t> positions;
  for (int32_t i = 0; i < n; ++i) positions.push_back(first + i);
  return positions;
}

std::vector<Shape> shapes() {
  return {
      // GQA ratios 1, 2, 4 and 8; KV lengths (position + 1) that end inside a block, on a block
      // boundary, and at one position; several sequences of different lengths in one call.
      {4, 4, 64, 16, {0, 15, 16, 40}},
      {8, 4, 64, 16, {33, 7}},
      {8, 2, 32, 32, {100, 31, 64}},
      {8, 1, 128, 8, {57}},
      // A head size that is a multiple of 8 but with one vector, and a long context.
      {2, 1, 8, 32, {300, 1}},
      // 24: a full 16-lane vector and a half one.
      {4, 2, 24, 16, {37, 2}},
      // 256: the largest head the AVX2 kernel holds in registers.
      {2, 2, 256, 16, {20, 47}},
      // Head sizes no SIMD kernel takes (not a multiple of 8, or too large): the scalar fallback.
      {4, 2, 12, 8, {29, 3}},
      {2, 1, 264, 16, {18}},
      // Sliding windows (Gemma's local layers): windows that start inside a block, on a block
      // boundary, and cover everything for the early positions.
      {4, 2, 64, 16, {40, 5, 100, 16}, 16},
      {8, 2, 256, 16, {47, 20}, 7},
      {4, 2, 12, 8, {29, 3}, 9},
      // Attention sinks: alone, with a window, a GQA group of 8, and the scalar fallback.
      {8, 2, 64, 16, {40, 0, 100}, 0, true},
      {4, 2, 64, 16, {40, 5, 100, 16}, 16, true},
      {8, 1, 128, 8, {57, 2}, 0, true},
      {4, 2, 12, 8, {29, 3}, 9, true},
      // Consecutive rows of one sequence, which the SIMD variants may compute as tiles: GQA
      // groups of 4, 1 and 8 (head sizes 64, 128, 256), blocks smaller than a tile's 16-position
      // steps, a window, sinks, and a row alone after them.
      {8, 2, 64, 16, consecutive(0, 12), 0, false, true},
      {2, 2, 128, 8, consecutive(25, 16), 0, true, true},
      {8, 1, 256, 32, consecutive(3, 6), 11, false, true},
  };
}

TEST(PagedAttention, AvailableVariantsHaveAnAttentionKernel) {
  // So that the comparisons below are not vacuous on a CPU that runs a SIMD variant.
  for (KernelIsa isa : supported_isas()) {
    if (isa == KernelIsa::AVX2 || isa == KernelIsa::AVX512) {
      const kernels_detail::KernelTable& table = kernels_detail::isa_table(isa);
      EXPECT_NE(table.attend_head, nullptr);
      EXPECT_EQ(table.attend_head_dim_multiple, 8);
      EXPECT_EQ(table.attend_max_head_dim, 256);
    }
  }
  EXPECT_EQ(kernels_detail::isa_table(KernelIsa::SCALAR).attend_head, nullptr)
      << "the scalar table falls back to attend_head_scalar";
}

TEST(PagedAttention, ScalarMatchesDoublePrecisionSoftmax) {
  for (const KvTypes& type : kv_types()) {
    for (const Shape& shape : shapes()) {
      if (!fits(shape, type)) continue;
      const Fixture f = Fixture::make(shape, type, 7);
      const std::vector<float> out = f.run(KernelIsa::SCALAR, 1);
      std::vector<double> exact;
      for (size_t r = 0; r < shape.positions.size(); ++r) {
        for (int64_t h = 0; h < shape.n_head; ++h) {
          // The scalar kernel against exact arithmetic: the same analysis with one method, so
          // half the bound applies; the full bound is used (it is still ~1e-5).
          const double bound = f.bound_and_exact(r, h, exact);
          for (int64_t d = 0; d < shape.head_dim; ++d) {
            const size_t i = f.at(r, h, d);
            ASSERT_NEAR(out[i], exact[static_cast<size_t>(d)], bound)
                << describe(shape, type) << " row " << r << " head " << h << " d " << d;
          }
        }
      }
    }
  }
}

TEST(PagedAttention, EveryVariantMatchesScalarWithinTheBound) {
  for (KernelIsa isa : supported_isas()) {
    for (const KvTypes& type : kv_types()) {
      for (const Shape& shape : shapes()) {
        if (!fits(shape, type)) continue;
        const Fixture f = Fixture::make(shape, type, 11);
        const std::vector<float> scalar = f.run(KernelIsa::SCALAR, 1);
        const std::vector<float> variant = f.run(isa, 1);
        const kernels_detail::KernelTable& table = kernels_detail::isa_table(isa);
        const bool has_kernel = table.attend_head != nullptr &&
                                shape.head_dim % table.attend_head_dim_multiple == 0 &&
                                shape.head_dim <= table.attend_max_head_dim;
        std::vector<double> exact;
        for (size_t r = 0; r < shape.positions.size(); ++r) {
          for (int64_t h = 0; h < shape.n_head; ++h) {
            const double bound = f.bound_and_exact(r, h, exact);
            for (int64_t d = 0; d < shape.head_dim; ++d) {
              const size_t i = f.at(r, h, d);
              if (has_kernel) {
                ASSERT_NEAR(variant[i], scalar[i], bound)
                    << kernel_isa_name(isa) << " " << describe(shape, type) << " row " << r
                    << " head " << h << " d " << d;
              } else {  // the scalar fallback: the same arithmetic
                ASSERT_EQ(variant[i], scalar[i])
                    << kernel_isa_name(isa) << " " << describe(shape, type) << " row " << r
                    << " head " << h << " d " << d;
              }
            }
          }
        }
      }
    }
  }
}

// Each row of f computed alone gives the bits it has in `batched` (f's rows computed together).
void expect_rows_alone_give_their_bits(KernelIsa isa, const Fixture& f,
                                       const std::vector<float>& batched) {
  const size_t row_floats = static_cast<size_t>(f.shape.n_head * f.shape.head_dim);
  for (size_t r = 0; r < f.rows.size(); ++r) {
    ThreadPool pool(2);
    AttentionScratch scratch;
    std::vector<float> alone(row_floats);
    paged_attention(isa, f.kv, Fixture::kLayer, &f.rows[r], 1, f.shape.n_head,
                    f.q.data() + r * row_floats, alone.data(), pool, scratch, f.sink_logits());
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batched.begin() + r * row_floats))
        << kernel_isa_name(isa) << " row " << r;
  }
}

TEST(PagedAttention, ResultsDoNotDependOnThreadsOrBatch) {
  for (KernelIsa isa : supported_isas()) {
    for (const KvTypes& type : kv_types()) {
      // Large enough to run on the pool (above the single-thread threshold).
      const Shape shape{8, 2, 64, 16, {200, 150, 99}, 0, true};
      const Fixture f = Fixture::make(shape, type, 5);
      const std::vector<float> one = f.run(isa, 1);
      for (int n_threads : {2, 3}) {
        EXPECT_EQ(f.run(isa, n_threads), one)
            << kernel_isa_name(isa) << " " << describe(shape, type) << " threads " << n_threads;
      }
      expect_rows_alone_give_their_bits(isa, f, one);
    }
  }
}

// Consecutive rows of one sequence (a prefill chunk, where the SIMD variants read keys and values
// once per tile of rows): every row gets the bits it has alone, whatever the threads, with rows
// of one piece and of two in one tile (positions across 1024), windows that start at different
// positions, sinks, every KV type; and each stays within the bound of the scalar kernel.
TEST(PagedAttention, ConsecutiveRowsOfOneSequenceGiveTheirBitsAlone) {
  static_assert(kAttentionSplitPositions == 1024, "the positions below straddle its multiples");
  const std::vector<Shape> chunks = {
      {32, 4, 64, 32, consecutive(1000, 40), 0, false, true},
      {16, 16, 64, 16, consecutive(3, 36), 0, true, true},
      {8, 2, 128, 32, consecutive(2040, 17), 1100, true, true},
      {4, 1, 256, 16, consecutive(500, 12), 0, false, true},
  };
  // f16, q4_0, and keys and values of different types (the others widen the same way).
  const std::vector<KvTypes> types = {
      KvTypes::both(KvType::F16), KvTypes::both(KvType::Q4_0), {KvType::Q8_0, KvType::F16}};
  for (KernelIsa isa : supported_isas()) {
    if (isa == KernelIsa::SCALAR) continue;  // no tiles: the other tests cover it
    for (const KvTypes& type : types) {
      for (const Shape& shape : chunks) {
        const Fixture f = Fixture::make(shape, type, 17);
        const std::vector<float> one = f.run(isa, 1);
        EXPECT_EQ(f.run(isa, 2), one) << kernel_isa_name(isa) << " " << describe(shape, type);
        expect_rows_alone_give_their_bits(isa, f, one);
        // Against the scalar kernel on a few rows and heads (the bound of the top of the file;
        // the exact reference is slow on the long rows, which the next test bounds).
        if (shape.positions.back() > 1100) continue;
        const std::vector<float> scalar = f.run(KernelIsa::SCALAR, 1);
        std::vector<double> exact;
        for (size_t r = 0; r < shape.positions.size(); r += 13) {
          for (int64_t h = 0; h < shape.n_head; h += 5) {
            const double bound = f.bound_and_exact(r, h, exact);
            for (int64_t d = 0; d < shape.head_dim; ++d) {
              const size_t i = f.at(r, h, d);
              ASSERT_NEAR(one[i], scalar[i], 2 * bound)
                  << kernel_isa_name(isa) << " " << describe(shape, type) << " row " << r
                  << " head " << h << " d " << d;
            }
          }
        }
      }
    }
  }
}

// Rows longer than kAttentionSplitPositions are computed in pieces and merged: still within the
// bound of exact arithmetic, with and without a window and sinks, and the same bits whatever the
// threads and whatever else is in the batch.
TEST(PagedAttention, LongRowsComputedInPiecesMatchExactArithmeticAndStayInvariant) {
  static_assert(kAttentionSplitPositions == 1024, "the positions below straddle its multiples");
  const std::vector<Shape> long_shapes = {
      {8, 2, 64, 16, {2500, 1030, 7}},               // 3 pieces, 2 pieces (one of 6), whole
      {4, 2, 64, 16, {2500, 1100, 40}, 1100, true},  // windows of 1100 from 1401: 2 pieces
  };
  for (KernelIsa isa : supported_isas()) {
    for (const KvTypes& type : {KvTypes::both(KvType::F16), KvTypes::both(KvType::Q4_0)}) {
      for (const Shape& shape : long_shapes) {
        const Fixture f = Fixture::make(shape, type, 13);
        const std::vector<float> one = f.run(isa, 1);
        std::vector<double> exact;
        for (size_t r = 0; r < shape.positions.size(); ++r) {
          for (int64_t h = 0; h < shape.n_head; h += 3) {
            const double bound = f.bound_and_exact(r, h, exact);
            for (int64_t d = 0; d < shape.head_dim; ++d) {
              const size_t i = f.at(r, h, d);
              ASSERT_NEAR(one[i], exact[static_cast<size_t>(d)], 2 * bound)
                  << kernel_isa_name(isa) << " " << describe(shape, type) << " row " << r
                  << " head " << h << " d " << d;
            }
          }
        }
        for (int n_threads : {2, 3})
          EXPECT_EQ(f.run(isa, n_threads), one) << kernel_isa_name(isa) << " threads " << n_threads;
        expect_rows_alone_give_their_bits(isa, f, one);
        // Pieces taken in turns of one row's room: the same bits again.
        ThreadPool pool(2);
        AttentionScratch small(3 * shape.n_head * (shape.head_dim + 1));
        std::vector<float> turns(f.q.size());
        paged_attention(isa, f.kv, Fixture::kLayer, f.rows.data(),
                        static_cast<int64_t>(f.rows.size()), shape.n_head, f.q.data(), turns.data(),
                        pool, small, f.sink_logits());
        EXPECT_EQ(turns, one) << kernel_isa_name(isa) << " in turns";
      }
    }
  }
}

TEST(PagedAttention, GroupKernelGivesEachHeadTheBitsOfTheHeadKernel) {
  // paged_attention hands a GQA group's heads to attend_group at once where the table has one;
  // each head must come out as attend_head computes it alone. The shapes add a group larger than
  // a call takes at once (20 heads on one kv head).
  std::vector<Shape> cases = shapes();
  cases.push_back({20, 1, 64, 16, {50, 3}});
  cases.push_back({20, 2, 24, 8, {41}, 9});
  cases.push_back({20, 2, 64, 8, {41}, 9});
  int checked = 0;
  for (KernelIsa isa : supported_isas()) {
    const kernels_detail::KernelTable& table = kernels_detail::isa_table(isa);
    if (table.attend_group == nullptr) continue;
    for (const KvTypes& type : kv_types()) {
      for (const Shape& shape : cases) {
        if (!fits(shape, type)) continue;
        if (shape.head_dim % table.attend_head_dim_multiple != 0 ||
            shape.head_dim > table.attend_max_head_dim) {
          continue;
        }
        const Fixture f = Fixture::make(shape, type, 13);
        const int64_t group = shape.n_head / shape.n_kv_heads;
        const auto head_floats = static_cast<size_t>(shape.head_dim);
        for (size_t r = 0; r < shape.positions.size(); ++r) {
          std::vector<float> scratch(static_cast<size_t>(
              kernels_detail::attend_group_scratch_floats(f.kv.layout(), group, f.rows[r])));
          for (int64_t g = 0; g < shape.n_kv_heads; ++g) {
            const size_t offset =
                (r * static_cast<size_t>(shape.n_head) + static_cast<size_t>(g * group)) *
                head_floats;
            std::vector<float> together(static_cast<size_t>(group) * head_floats, NAN);
            const float* sinks = f.sinks.empty() ? nullptr : f.sinks.data() + g * group;
            table.attend_group(f.kv, Fixture::kLayer, g, f.rows[r], f.q.data() + offset, group,
                               together.data(), scratch.data(), sinks);
            for (int64_t h = 0; h < group; ++h) {
              std::vector<float> alone(head_floats, NAN);
              table.attend_head(f.kv, Fixture::kLayer, g, f.rows[r],
                                f.q.data() + offset + static_cast<size_t>(h) * head_floats,
                                alone.data(), scratch.data(),
                                sinks != nullptr ? sinks[h] : -INFINITY);
              ASSERT_TRUE(std::equal(alone.begin(), alone.end(),
                                     together.begin() + static_cast<ptrdiff_t>(h) *
                                                            static_cast<ptrdiff_t>(head_floats)))
                  << kernel_isa_name(isa) << " " << describe(shape, type) << " row " << r
                  << " head " << g * group + h;
              ++checked;
            }
          }
        }
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no variant on this CPU has a group kernel";
}

TEST(PagedAttention, SinksOfMinusInfinityChangeNoBitAndAHighSinkSilencesTheHead) {
  // A sink of -infinity is the same as none (the kernels start their max and sum from it); a sink
  // far above every score takes almost all of the softmax, so the output nears zero.
  for (KernelIsa isa : supported_isas()) {
    const Shape shape{8, 2, 64, 16, {40, 5}, 0, true};
    Fixture f = Fixture::make(shape, KvTypes{}, 17);
    std::vector<float> sinks = f.sinks;
    f.sinks.clear();
    const std::vector<float> none = f.run(isa, 1);
    f.sinks.assign(static_cast<size_t>(shape.n_head), -INFINITY);
    EXPECT_EQ(f.run(isa, 1), none) << kernel_isa_name(isa);
    f.sinks = sinks;
    f.sinks[3] = 1e4f;  // head 3 of every row
    const std::vector<float> silenced = f.run(isa, 1);
    for (size_t r = 0; r < shape.positions.size(); ++r) {
      for (int64_t h = 0; h < shape.n_head; ++h) {
        const size_t at = (r * 8 + static_cast<size_t>(h)) * 64;
        const float largest =
            std::abs(*std::max_element(silenced.begin() + static_cast<ptrdiff_t>(at),
                                       silenced.begin() + static_cast<ptrdiff_t>(at + 64),
                                       [](float a, float b) { return std::abs(a) < std::abs(b); }));
        if (h == 3) {
          EXPECT_EQ(largest, 0.0f) << kernel_isa_name(isa) << " row " << r;
        } else {
          EXPECT_GT(largest, 1e-3f) << kernel_isa_name(isa) << " row " << r << " head " << h;
        }
      }
    }
  }
}

TEST(PagedAttention, OnePositionReturnsItsValueExactly) {
  // With one position the softmax weight is exactly 1 (e^0 / e^0), so every variant returns V[0]
  // bit for bit, whatever the query.
  for (KernelIsa isa : supported_isas()) {
    for (const KvTypes& type : kv_types()) {
      const Shape shape{4, 2, 64, 16, {0, 0}};
      const Fixture f = Fixture::make(shape, type, 3);
      const std::vector<float> out = f.run(isa, 1);
      for (size_t r = 0; r < 2; ++r) {
        for (int64_t h = 0; h < shape.n_head; ++h) {
          for (int64_t d = 0; d < shape.head_dim; ++d) {
            const size_t i = (r * 4 + static_cast<size_t>(h)) * 64 + static_cast<size_t>(d);
            ASSERT_EQ(out[i], static_cast<float>(f.element(true, r, h / 2, 0, d)))
                << kernel_isa_name(isa) << " row " << r << " head " << h;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace trellis
