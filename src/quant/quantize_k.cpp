// Quantization of the K types (and of q4_0, q4_1, q5_0, q5_1 with an importance matrix): round
// to nearest with a small
// search of the scales, each value's error weighted.
//
// Every super-block of 256 values is cut into runs (16 of 16 values for q2_K, q3_K and q6_K; 8
// sub-blocks of 32 for q4_K and q5_K), and quantized in three steps:
//
//   1. Fit each run on its own, in f32, to a grid of codes:
//        affine    (q2_K, q4_K, q5_K):  x ~= step * q - offset,  q in [0, qmax],  offset >= 0
//        symmetric (q3_K, q6_K):        x ~= step * q,           q in [-(qmax + 1), qmax]
//      The candidates are the plain grid (the run's range mapped onto the codes: the affine grid
//      spans [min(0, min x), max x], the symmetric one puts the value of largest magnitude on
//      the code -(qmax + 1)), and kCandidates grids slightly finer or coarser than it. For each
//      candidate the codes are rounded to nearest, then step (and offset) are refitted by
//      weighted least squares for those codes; the fit with the least weighted squared error over
//      the run wins (the first one on a tie, so a run that lies on the plain grid keeps it
//      exactly).
//   2. Quantize the run scales (and offsets) to the format's integer scales: the super-block
//      scale d (and dmin) puts the largest run scale on the largest integer scale, as f16; each
//      run's integer scale is round(step / d), clamped to the field's range.
//   3. Round every value to the nearest code on the final grid, with the stored scales, computed
//      the way dequantize_row computes them (d * sc, dmin * mn in f32).
//   Steps 2 and 3 are repeated for super-block scales slightly off the plain one (d, then dmin),
//   and the super-block with the least weighted error is kept: rounding the run scales to a few
//   bits costs less on some grids than on others.
//
// The weights are those llama.cpp's quantizers use (facts of their method; the search is ours):
// without an importance matrix, q4_K and q5_K weigh a value by sqrt(mean x^2 of its run) + |x|,
// q3_K and q6_K by x^2 (so large values, the outliers of real weights, keep their precision);
// with one (imp: the mean squared activation that meets each column), a value weighs
// imp * sqrt(sigma^2 + x^2), sigma^2 = 2 mean x^2 of the super-block (q6_K: imp alone; the blocks
// of 32: sigma^2 = mean x^2 of the row). q2_K weighs every value alike. See
// tests/unit/quant/quantize_k_test.cpp for the measured errors.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "quant/block_types.h"
#include "quant/codecs.h"
#include "quant/half.h"
#include "quant/rounding.h"

namespace trellis::quant_detail {
namespace {

// Candidate grids on each side of the plain one: code ranges qmax + t / 10, t = -10..10.
constexpr int kCandidates = 10;

int clamp_code(int q, int lo, int hi) {
  return std::min(hi, std::max(lo, q));
}

// ---- 1. Run fits -----------------------------------------------------------------------------

struct AffineFit {
  float step = 0.0f;    // >= 0
  float offset = 0.0f;  // >= 0: the grid starts at -offset
};

int affine_code(float x, AffineFit f, int qmax) {
  if (f.step == 0.0f) return 0;
  return clamp_code(round_half_away_from_zero((x + f.offset) / f.step), 0, qmax);
}

double affine_error(const float* x, const float* w, int n, AffineFit f, int qmax) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    const double e = static_cast<double>(f.step) * affine_code(x[i], f, qmax) - f.offset - x[i];
    sum += w[i] * e * e;
  }
  return sum;
}

// `w`: each value's weight (>= 0).
AffineFit fit_affine(const float* x, const float* w, int n, int qmax) {
  float lo = 0.0f, hi = x[0];
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (hi <= lo) return {0.0f, -lo};  // every value is lo (<= 0)
  AffineFit best{(hi - lo) / static_cast<float>(qmax), -lo};
  double best_error = affine_error(x, w, n, best, qmax);
  for (int t = -kCandidates; t <= kCandidates; ++t) {
    if (t == 0) continue;
    const float iscale = (static_cast<float>(qmax) + 0.1f * static_cast<float>(t)) / (hi - lo);
    // Weighted least squares of x ~= a q + b over the rounded codes, with b <= 0 (b = -offset).
    double sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      const int q = clamp_code(round_half_away_from_zero((x[i] - lo) * iscale), 0, qmax);
      const double wi = w[i];
      sw += wi;
      sq += wi * q;
      sqq += wi * q * q;
      sx += wi * x[i];
      sqx += wi * q * x[i];
    }
    const double det = sw * sqq - sq * sq;
    if (!(det > 0.0)) continue;  // a single code (or no weight): nothing to fit
    double a = (sw * sqx - sq * sx) / det;
    double b = (sqq * sx - sq * sqx) / det;
    if (b > 0.0) {
      b = 0.0;
      a = sqx / sqq;
    }
    if (!(a > 0.0)) continue;
    const AffineFit fit{static_cast<float>(a), static_cast<float>(-b)};
    const double error = affine_error(x, w, n, fit, qmax);
    if (error < best_error) {
      best = fit;
      best_error = error;
    }
  }
  return best;
}

int symmetric_code(float x, float step, int qmax) {
  if (step == 0.0f) return 0;
  return clamp_code(round_half_away_from_zero(x / step), -qmax - 1, qmax);
}

double symmetric_error(const float* x, const float* w, int n, float step, int qmax) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    const double e = static_cast<double>(step) * symmetric_code(x[i], step, qmax) - x[i];
    sum += w[i] * e * e;
  }
  return sum;
}

// The step of a symmetric grid. It may be negative: the plain grid puts the value of largest
// magnitude on the code -(qmax + 1), the longer side, so step = max / -(qmax + 1).
float fit_symmetric(const float* x, const float* w, int n, int qmax) {
  const float max = signed_absmax(x, n);
  if (max == 0.0f) return 0.0f;
  const float long_side = static_cast<float>(qmax + 1);
  float best = max / -long_side;
  double best_error = symmetric_error(x, w, n, best, qmax);
  for (int t = -kCandidates; t <= kCandidates; ++t) {
    if (t == 0) continue;
    const float iscale = -(long_side + 0.1f * static_cast<float>(t)) / max;
    double sqq = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      const int q = clamp_code(round_half_away_from_zero(x[i] * iscale), -qmax - 1, qmax);
      sqq += static_cast<double>(w[i]) * q * q;
      sqx += static_cast<double>(w[i]) * q * x[i];
    }
    if (!(sqq > 0.0)) continue;
    const auto step = static_cast<float>(sqx / sqq);
    const double error = symmetric_error(x, w, n, step, qmax);
    if (error < best_error) {
      best = step;
      best_error = error;
    }
  }
  return best;
}

// ---- 2 and 3. Super-blocks -------------------------------------------------------------------

// A super-block quantized to an affine format, before packing.
struct AffineSuperBlock {
  uint16_t d = 0, dmin = 0;  // f16
  uint8_t sc[16] = {}, mn[16] = {};
  uint8_t q[256] = {};
};

// Candidate super-block scales on each side of the plain one (the largest run scale on the
// largest integer scale): scale_max + t / 10, t = -kScaleCandidates..kScaleCandidates.
constexpr int kScaleCandidates = 4;

// Fills out's integer scales and codes for the stored super-block scales d and dmin (f16), from
// the runs' fits; returns the weighted squared error of the super-block so quantized.
double place_affine(const float* x, const float* w, const AffineFit* fits, int n_runs, int qmax,
                    int scale_max, uint16_t d16, uint16_t dmin16, AffineSuperBlock& out) {
  const int run = 256 / n_runs;
  out.d = d16;
  out.dmin = dmin16;
  const float d = f16_to_f32(d16), dmin = f16_to_f32(dmin16);
  double error = 0.0;
  for (int r = 0; r < n_runs; ++r) {
    const int sc = d > 0.0f ? round_half_away_from_zero(fits[r].step / d) : 0;
    const int mn = dmin > 0.0f ? round_half_away_from_zero(fits[r].offset / dmin) : 0;
    out.sc[r] = static_cast<uint8_t>(clamp_code(sc, 0, scale_max));
    out.mn[r] = static_cast<uint8_t>(clamp_code(mn, 0, scale_max));
    const AffineFit grid{d * static_cast<float>(out.sc[r]), dmin * static_cast<float>(out.mn[r])};
    for (int i = run * r; i < run * (r + 1); ++i) {
      out.q[i] = static_cast<uint8_t>(affine_code(x[i], grid, qmax));
      const double e = static_cast<double>(grid.step) * out.q[i] - grid.offset - x[i];
      error += w[i] * e * e;
    }
  }
  return error;
}

// n_runs runs of 256 / n_runs values; codes 0..qmax; integer scales and mins 0..scale_max. The
// plain super-block scales first, then nearby ones for d, then for dmin: the least weighted error
// of the whole super-block wins (the first on a tie).
AffineSuperBlock quantize_affine(const float* x, const float* w, int n_runs, int qmax,
                                 int scale_max) {
  const int run = 256 / n_runs;
  AffineFit fits[16];
  float max_step = 0.0f, max_offset = 0.0f;
  for (int r = 0; r < n_runs; ++r) {
    fits[r] = fit_affine(x + run * r, w + run * r, run, qmax);
    max_step = std::max(max_step, fits[r].step);
    max_offset = std::max(max_offset, fits[r].offset);
  }
  auto scale_for = [scale_max](float largest, int t) {
    return f32_to_f16(largest / (static_cast<float>(scale_max) + 0.1f * static_cast<float>(t)));
  };
  AffineSuperBlock best, trial;
  double best_error = place_affine(x, w, fits, n_runs, qmax, scale_max, scale_for(max_step, 0),
                                   scale_for(max_offset, 0), best);
  for (int which = 0; which < 2; ++which) {
    for (int t = -kScaleCandidates; t <= kScaleCandidates; ++t) {
      if (t == 0) continue;
      const uint16_t d = which == 0 ? scale_for(max_step, t) : best.d;
      const uint16_t dmin = which == 1 ? scale_for(max_offset, t) : best.dmin;
      const double error = place_affine(x, w, fits, n_runs, qmax, scale_max, d, dmin, trial);
      if (error < best_error) {
        best = trial;
        best_error = error;
      }
    }
  }
  return best;
}

// A super-block quantized to a symmetric format (16 runs of 16), before packing.
struct SymmetricSuperBlock {
  uint16_t d = 0;  // f16
  int8_t sc[16] = {};
  int8_t q[256] = {};
};

// As place_affine, for a symmetric super-block with the stored scale d (f16).
double place_symmetric(const float* x, const float* w, const float* steps, int qmax,
                       int scale_long, uint16_t d16, SymmetricSuperBlock& out) {
  out.d = d16;
  const float d = f16_to_f32(d16);
  double error = 0.0;
  for (int r = 0; r < 16; ++r) {
    const int sc = d != 0.0f ? round_half_away_from_zero(steps[r] / d) : 0;
    out.sc[r] = static_cast<int8_t>(clamp_code(sc, -scale_long, scale_long - 1));
    const float step = d * static_cast<float>(out.sc[r]);
    for (int i = 16 * r; i < 16 * r + 16; ++i) {
      out.q[i] = static_cast<int8_t>(symmetric_code(x[i], step, qmax));
      const double e = static_cast<double>(step) * out.q[i] - x[i];
      error += w[i] * e * e;
    }
  }
  return error;
}

// Codes -(qmax + 1)..qmax; integer scales -scale_long..scale_long - 1. The plain super-block
// scale (the run step of largest magnitude on the integer scale -scale_long) first, then nearby
// ones, as quantize_affine does.
SymmetricSuperBlock quantize_symmetric(const float* x, const float* w, int qmax, int scale_long) {
  float steps[16];
  for (int r = 0; r < 16; ++r) steps[r] = fit_symmetric(x + 16 * r, w + 16 * r, 16, qmax);
  const float largest = signed_absmax(steps, 16);
  auto scale_for = [largest, scale_long](int t) {
    return f32_to_f16(largest / -(static_cast<float>(scale_long) + 0.1f * static_cast<float>(t)));
  };
  SymmetricSuperBlock best, trial;
  double best_error = place_symmetric(x, w, steps, qmax, scale_long, scale_for(0), best);
  for (int t = -kScaleCandidates; t <= kScaleCandidates; ++t) {
    if (t == 0) continue;
    const double error = place_symmetric(x, w, steps, qmax, scale_long, scale_for(t), trial);
    if (error < best_error) {
      best = trial;
      best_error = error;
    }
  }
  return best;
}

// Packs 2-bit values v[0, 256) the q2_K / q3_K way: element 128 h + 32 k + l in bits 2k + 1:2k
// of qs[32 h + l].
void pack_2bit(const uint8_t* v, uint8_t* qs) {
  std::memset(qs, 0, 64);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    qs[32 * h + l] = static_cast<uint8_t>(qs[32 * h + l] | ((v[i] & 3) << (2 * k)));
  }
}

// Packs the low 4 bits of v[0, 256) the q4_K / q5_K way: sub-blocks 2c and 2c + 1 in the low and
// high nibbles of qs[32 c + l].
void pack_4bit_k(const uint8_t* v, uint8_t* qs) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * c + l] =
          static_cast<uint8_t>((v[64 * c + l] & 0x0f) | ((v[64 * c + 32 + l] & 0x0f) << 4));
    }
  }
}

void pack_scales_mins_k(const AffineSuperBlock& s, uint8_t* scales) {
  std::memset(scales, 0, kKScaleBytes);
  for (int j = 0; j < 8; ++j) pack_k_scale_min(scales, j, KScaleMin{s.sc[j], s.mn[j]});
}

// ---- Weights ---------------------------------------------------------------------------------

// How a format weighs its values without an importance matrix.
enum class Weighting {
  UNIFORM,        // q2_K
  MEAN_PLUS_ABS,  // q4_K, q5_K: sqrt(mean x^2 of the 32-value run) + |x|
  SQUARE,         // q3_K, q6_K: x^2
};

double mean_square(const float* x, int n) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum / n;
}

// The weights w[0, n) of a block's values. With `importance` (one value per element), each is
// importance * sqrt(sigma2 + x^2), or importance alone when `sigma2` < 0.
void block_weights(const float* x, int n, const float* importance, double sigma2,
                   Weighting fallback, float* w) {
  if (importance != nullptr) {
    for (int i = 0; i < n; ++i) {
      w[i] = sigma2 < 0.0 ? importance[i]
                          : importance[i] * static_cast<float>(std::sqrt(sigma2 + x[i] * x[i]));
    }
    return;
  }
  switch (fallback) {
    case Weighting::UNIFORM:
      std::fill(w, w + n, 1.0f);
      return;
    case Weighting::MEAN_PLUS_ABS:
      for (int run = 0; run < n; run += 32) {
        const auto mean = static_cast<float>(std::sqrt(mean_square(x + run, 32)));
        for (int i = run; i < run + 32; ++i) w[i] = mean + std::fabs(x[i]);
      }
      return;
    case Weighting::SQUARE:
      for (int i = 0; i < n; ++i) w[i] = x[i] * x[i];
      return;
  }
}

// A super-block's weights: with an importance matrix, sigma^2 is twice its mean square.
void superblock_weights(const float* x, const float* importance, Weighting fallback, float* w) {
  const double sigma2 = importance != nullptr ? 2.0 * mean_square(x, kQkK) : 0.0;
  block_weights(x, kQkK, importance, sigma2, fallback, w);
}

}  // namespace

void quantize_q2_k(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<block_q2_K*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQkK) {
    float w[kQkK];
    superblock_weights(src, nullptr, Weighting::UNIFORM, w);
    const AffineSuperBlock s = quantize_affine(src, w, 16, 3, 15);
    block_q2_K& out = blocks[b];
    for (int r = 0; r < 16; ++r) out.scales[r] = static_cast<uint8_t>(s.sc[r] | (s.mn[r] << 4));
    pack_2bit(s.q, out.qs);
    out.d = s.d;
    out.dmin = s.dmin;
  }
}

void quantize_q3_k_weighted(const float* src, void* dst, int64_t n_blocks,
                            const float* importance) {
  auto* blocks = static_cast<block_q3_K*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQkK) {
    float w[kQkK];
    superblock_weights(src, importance ? importance + b * kQkK : nullptr, Weighting::SQUARE, w);
    const SymmetricSuperBlock s = quantize_symmetric(src, w, 3, 32);
    block_q3_K& out = blocks[b];
    // Code q (-4..3) is stored as u = q + 4: low 2 bits in qs, bit 2 (set for q >= 0) in hmask.
    uint8_t u[256];
    for (int i = 0; i < 256; ++i) u[i] = static_cast<uint8_t>(s.q[i] + 4);
    pack_2bit(u, out.qs);
    std::memset(out.hmask, 0, sizeof(out.hmask));
    for (int i = 0; i < 256; ++i) {
      out.hmask[i % 32] = static_cast<uint8_t>(out.hmask[i % 32] | ((u[i] >> 2) << (i / 32)));
    }
    std::memset(out.scales, 0, sizeof(out.scales));
    for (int r = 0; r < 16; ++r) pack_q3_k_scale(out.scales, r, static_cast<uint8_t>(s.sc[r] + 32));
    out.d = s.d;
  }
}

// q4_K and q5_K: one affine super-block with codes 0..15 / 0..31; q5_K stores bit 4 of element
// 32 j + l as bit j of qh[l].
template <class Block>
void quantize_q45_k(const float* src, Block* blocks, int64_t n_blocks, const float* importance) {
  constexpr bool kFiveBit = std::is_same_v<Block, block_q5_K>;
  for (int64_t b = 0; b < n_blocks; ++b, src += kQkK) {
    float w[kQkK];
    superblock_weights(src, importance ? importance + b * kQkK : nullptr, Weighting::MEAN_PLUS_ABS,
                       w);
    const AffineSuperBlock s = quantize_affine(src, w, 8, kFiveBit ? 31 : 15, 63);
    Block& out = blocks[b];
    out.d = s.d;
    out.dmin = s.dmin;
    pack_scales_mins_k(s, out.scales);
    pack_4bit_k(s.q, out.qs);
    if constexpr (kFiveBit) {
      std::memset(out.qh, 0, sizeof(out.qh));
      for (int i = 0; i < 256; ++i) {
        out.qh[i % 32] = static_cast<uint8_t>(out.qh[i % 32] | ((s.q[i] >> 4) << (i / 32)));
      }
    }
  }
}

void quantize_q4_k_weighted(const float* src, void* dst, int64_t n_blocks,
                            const float* importance) {
  quantize_q45_k(src, static_cast<block_q4_K*>(dst), n_blocks, importance);
}

void quantize_q5_k_weighted(const float* src, void* dst, int64_t n_blocks,
                            const float* importance) {
  quantize_q45_k(src, static_cast<block_q5_K*>(dst), n_blocks, importance);
}

void quantize_q6_k_weighted(const float* src, void* dst, int64_t n_blocks,
                            const float* importance) {
  auto* blocks = static_cast<block_q6_K*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQkK) {
    float w[kQkK];
    if (importance != nullptr) {
      block_weights(src, kQkK, importance + b * kQkK, -1.0, Weighting::SQUARE, w);
    } else {
      superblock_weights(src, nullptr, Weighting::SQUARE, w);
    }
    const SymmetricSuperBlock s = quantize_symmetric(src, w, 31, 128);
    block_q6_K& out = blocks[b];
    // Code q (-32..31) is stored as u = q + 32. Element i = 128 h + 32 k + l: low 4 bits in
    // ql[64 h + 32 (k & 1) + l] (low nibble for k < 2, high for k >= 2), high 2 bits in bits
    // 2k + 1:2k of qh[32 h + l].
    std::memset(out.ql, 0, sizeof(out.ql));
    std::memset(out.qh, 0, sizeof(out.qh));
    for (int i = 0; i < 256; ++i) {
      const int u = s.q[i] + 32;
      const int h = i / 128, k = (i % 128) / 32, l = i % 32;
      uint8_t& low = out.ql[64 * h + 32 * (k & 1) + l];
      low = static_cast<uint8_t>(low | ((u & 0x0f) << (k < 2 ? 0 : 4)));
      uint8_t& high = out.qh[32 * h + l];
      high = static_cast<uint8_t>(high | ((u >> 4) << (2 * k)));
    }
    std::memcpy(out.scales, s.sc, sizeof(out.scales));
    out.d = s.d;
  }
}

void quantize_q3_k(const float* src, void* dst, int64_t n_blocks) {
  quantize_q3_k_weighted(src, dst, n_blocks, nullptr);
}

void quantize_q4_k(const float* src, void* dst, int64_t n_blocks) {
  quantize_q4_k_weighted(src, dst, n_blocks, nullptr);
}

void quantize_q5_k(const float* src, void* dst, int64_t n_blocks) {
  quantize_q5_k_weighted(src, dst, n_blocks, nullptr);
}

void quantize_q6_k(const float* src, void* dst, int64_t n_blocks) {
  quantize_q6_k_weighted(src, dst, n_blocks, nullptr);
}

// The blocks of 32 with an importance matrix: each block fitted on its own, symmetric for q4_0
// and q5_0 (codes -8..7 / -16..15, the value of largest magnitude on the lowest code as the plain
// grid), affine for q4_1 and q5_1 (codes 0..15 / 0..31 from the block's minimum when it is below
// 0); the scales stored as f16, each value rounded to the nearest code on the stored grid.
namespace {

template <class Block>
void quantize_symmetric_32(const float* src, Block* blocks, int64_t n_elems,
                           const float* importance, int qmax) {
  const double sigma2 = mean_square(src, static_cast<int>(n_elems));
  for (int64_t b = 0; b < n_elems / kQk; ++b) {
    const float* x = src + b * kQk;
    float w[kQk];
    block_weights(x, kQk, importance + b * kQk, sigma2, Weighting::UNIFORM, w);
    blocks[b].d = f32_to_f16(fit_symmetric(x, w, kQk, qmax));
    const float d = f16_to_f32(blocks[b].d);
    int q[kQk];
    for (int i = 0; i < kQk; ++i) q[i] = symmetric_code(x[i], d, qmax) + qmax + 1;
    if constexpr (std::is_same_v<Block, block_q5_0>) {
      store_five_bits(q, blocks[b].qs, blocks[b].qh);
    } else {
      store_nibbles(q, blocks[b].qs);
    }
  }
}

template <class Block>
void quantize_affine_32(const float* src, Block* blocks, int64_t n_elems, const float* importance,
                        int qmax) {
  const double sigma2 = mean_square(src, static_cast<int>(n_elems));
  for (int64_t b = 0; b < n_elems / kQk; ++b) {
    const float* x = src + b * kQk;
    float w[kQk];
    block_weights(x, kQk, importance + b * kQk, sigma2, Weighting::UNIFORM, w);
    const AffineFit fit = fit_affine(x, w, kQk, qmax);
    blocks[b].d = f32_to_f16(fit.step);
    blocks[b].m = f32_to_f16(-fit.offset);
    const AffineFit grid{f16_to_f32(blocks[b].d), -f16_to_f32(blocks[b].m)};
    int q[kQk];
    for (int i = 0; i < kQk; ++i) q[i] = affine_code(x[i], grid, qmax);
    if constexpr (std::is_same_v<Block, block_q5_1>) {
      store_five_bits(q, blocks[b].qs, blocks[b].qh);
    } else {
      store_nibbles(q, blocks[b].qs);
    }
  }
}

}  // namespace

void quantize_q4_0_weighted(const float* src, void* dst, int64_t n_elems,
                            const float* importance) {
  quantize_symmetric_32(src, static_cast<block_q4_0*>(dst), n_elems, importance, 7);
}

void quantize_q5_0_weighted(const float* src, void* dst, int64_t n_elems,
                            const float* importance) {
  quantize_symmetric_32(src, static_cast<block_q5_0*>(dst), n_elems, importance, 15);
}

void quantize_q4_1_weighted(const float* src, void* dst, int64_t n_elems,
                            const float* importance) {
  quantize_affine_32(src, static_cast<block_q4_1*>(dst), n_elems, importance, 15);
}

void quantize_q5_1_weighted(const float* src, void* dst, int64_t n_elems,
                            const float* importance) {
  quantize_affine_32(src, static_cast<block_q5_1*>(dst), n_elems, importance, 31);
}

}  // namespace trellis::quant_detail
