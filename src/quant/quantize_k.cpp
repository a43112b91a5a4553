// Quantization of the K types: round to nearest with a small search of the scales.
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
//      candidate the codes are rounded to nearest, then step (and offset) are refitted by least
//      squares for those codes; the fit with the least squared error over the run wins (the
//      first one on a tie, so a run that lies on the plain grid keeps it exactly).
//   2. Quantize the run scales (and offsets) to the format's integer scales: the super-block
//      scale d (and dmin) puts the largest run scale on the largest integer scale, as f16; each
//      run's integer scale is round(step / d), clamped to the field's range.
//   3. Round every value to the nearest code on the final grid, with the stored scales, computed
//      the way dequantize_row computes them (d * sc, dmin * mn in f32).
//
// This is the unweighted core of what llama.cpp's reference quantizers do; they also weight the
// error by |x| (and by an importance matrix when one is given), which matters on real weights
// with outliers. See tests/unit/quant/quantize_k_test.cpp for the measured errors.
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

double affine_error(const float* x, int n, AffineFit f, int qmax) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    const double e = static_cast<double>(f.step) * affine_code(x[i], f, qmax) - f.offset - x[i];
    sum += e * e;
  }
  return sum;
}

AffineFit fit_affine(const float* x, int n, int qmax) {
  float lo = 0.0f, hi = x[0];
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (hi <= lo) return {0.0f, -lo};  // every value is lo (<= 0)
  AffineFit best{(hi - lo) / static_cast<float>(qmax), -lo};
  double best_error = affine_error(x, n, best, qmax);
  for (int t = -kCandidates; t <= kCandidates; ++t) {
    if (t == 0) continue;
    const float iscale = (static_cast<float>(qmax) + 0.1f * static_cast<float>(t)) / (hi - lo);
    // Least squares of x ~= a q + b over the rounded codes, with b <= 0 (b = -offset).
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      const int q = clamp_code(round_half_away_from_zero((x[i] - lo) * iscale), 0, qmax);
      sq += q;
      sqq += static_cast<double>(q) * q;
      sx += x[i];
      sqx += static_cast<double>(q) * x[i];
    }
    const double det = n * sqq - sq * sq;
    if (det <= 0.0) continue;  // a single code: nothing to fit
    double a = (n * sqx - sq * sx) / det;
    double b = (sqq * sx - sq * sqx) / det;
    if (b > 0.0) {
      b = 0.0;
      a = sqx / sqq;
    }
    if (!(a > 0.0)) continue;
    const AffineFit fit{static_cast<float>(a), static_cast<float>(-b)};
    const double error = affine_error(x, n, fit, qmax);
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

double symmetric_error(const float* x, int n, float step, int qmax) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    const double e = static_cast<double>(step) * symmetric_code(x[i], step, qmax) - x[i];
    sum += e * e;
  }
  return sum;
}

// The step of a symmetric grid. It may be negative: the plain grid puts the value of largest
// magnitude on the code -(qmax + 1), the longer side, so step = max / -(qmax + 1).
float fit_symmetric(const float* x, int n, int qmax) {
  const float max = signed_absmax(x, n);
  if (max == 0.0f) return 0.0f;
  const float long_side = static_cast<float>(qmax + 1);
  float best = max / -long_side;
  double best_error = symmetric_error(x, n, best, qmax);
  for (int t = -kCandidates; t <= kCandidates; ++t) {
    if (t == 0) continue;
    const float iscale = -(long_side + 0.1f * static_cast<float>(t)) / max;
    double sqq = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      const int q = clamp_code(round_half_away_from_zero(x[i] * iscale), -qmax - 1, qmax);
      sqq += static_cast<double>(q) * q;
      sqx += static_cast<double>(q) * x[i];
    }
    if (sqq == 0.0) continue;
    const auto step = static_cast<float>(sqx / sqq);
    const double error = symmetric_error(x, n, step, qmax);
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

// n_runs runs of 256 / n_runs values; codes 0..qmax; integer scales and mins 0..scale_max.
AffineSuperBlock quantize_affine(const float* x, int n_runs, int qmax, int scale_max) {
  const int run = 256 / n_runs;
  AffineFit fits[16];
  float max_step = 0.0f, max_offset = 0.0f;
  for (int r = 0; r < n_runs; ++r) {
    fits[r] = fit_affine(x + run * r, run, qmax);
    max_step = std::max(max_step, fits[r].step);
    max_offset = std::max(max_offset, fits[r].offset);
  }
  AffineSuperBlock out;
  out.d = f32_to_f16(max_step / static_cast<float>(scale_max));
  out.dmin = f32_to_f16(max_offset / static_cast<float>(scale_max));
  const float d = f16_to_f32(out.d), dmin = f16_to_f32(out.dmin);
  for (int r = 0; r < n_runs; ++r) {
    const int sc = d > 0.0f ? round_half_away_from_zero(fits[r].step / d) : 0;
    const int mn = dmin > 0.0f ? round_half_away_from_zero(fits[r].offset / dmin) : 0;
    out.sc[r] = static_cast<uint8_t>(clamp_code(sc, 0, scale_max));
    out.mn[r] = static_cast<uint8_t>(clamp_code(mn, 0, scale_max));
    const AffineFit grid{d * static_cast<float>(out.sc[r]), dmin * static_cast<float>(out.mn[r])};
    for (int i = run * r; i < run * (r + 1); ++i) {
      out.q[i] = static_cast<uint8_t>(affine_code(x[i], grid, qmax));
    }
  }
  return out;
}

// A super-block quantized to a symmetric format (16 runs of 16), before packing.
struct SymmetricSuperBlock {
  uint16_t d = 0;  // f16
  int8_t sc[16] = {};
  int8_t q[256] = {};
};

// Codes -(qmax + 1)..qmax; integer scales -scale_long..scale_long - 1.
SymmetricSuperBlock quantize_symmetric(const float* x, int qmax, int scale_long) {
  float steps[16];
  for (int r = 0; r < 16; ++r) steps[r] = fit_symmetric(x + 16 * r, 16, qmax);
  SymmetricSuperBlock out;
  // The run step of largest magnitude lands on the integer scale -scale_long.
  out.d = f32_to_f16(signed_absmax(steps, 16) / -static_cast<float>(scale_long));
  const float d = f16_to_f32(out.d);
  for (int r = 0; r < 16; ++r) {
    const int sc = d != 0.0f ? round_half_away_from_zero(steps[r] / d) : 0;
    out.sc[r] = static_cast<int8_t>(clamp_code(sc, -scale_long, scale_long - 1));
    const float step = d * static_cast<float>(out.sc[r]);
    for (int i = 16 * r; i < 16 * r + 16; ++i) {
      out.q[i] = static_cast<int8_t>(symmetric_code(x[i], step, qmax));
    }
  }
  return out;
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

}  // namespace

void quantize_q2_k(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<block_q2_K*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQkK) {
    const AffineSuperBlock s = quantize_affine(src, 16, 3, 15);
    block_q2_K& out = blocks[b];
    for (int r = 0; r < 16; ++r) out.scales[r] = static_cast<uint8_t>(s.sc[r] | (s.mn[r] << 4));
    pack_2bit(s.q, out.qs);
    out.d = s.d;
    out.dmin = s.dmin;
  }
}

void quantize_q3_k(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<block_q3_K*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQkK) {
    const SymmetricSuperBlock s = quantize_symmetric(src, 3, 32);
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
void quantize_q45_k(const float* src, Block* blocks, int64_t n_blocks) {
  constexpr bool kFiveBit = std::is_same_v<Block, block_q5_K>;
  for (int64_t b = 0; b < n_blocks; ++b, src += kQkK) {
    const AffineSuperBlock s = quantize_affine(src, 8, kFiveBit ? 31 : 15, 63);
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

void quantize_q4_k(const float* src, void* dst, int64_t n_blocks) {
  quantize_q45_k(src, static_cast<block_q4_K*>(dst), n_blocks);
}

void quantize_q5_k(const float* src, void* dst, int64_t n_blocks) {
  quantize_q45_k(src, static_cast<block_q5_K*>(dst), n_blocks);
}

void quantize_q6_k(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<block_q6_K*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQkK) {
    const SymmetricSuperBlock s = quantize_symmetric(src, 31, 128);
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

}  // namespace trellis::quant_detail
