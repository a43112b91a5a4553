// RMSNorm, RoPE (both pair styles), SiLU and GELU-tanh against straightforward double-precision
// references written here, with stated tolerances in units of u = 2^-24 (the f32 unit
// roundoff), and their edge cases: zero and huge rows for RMSNorm, large positions and partial
// rotation for RoPE, large |x| for the activations.
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace trellis {
namespace {

constexpr double kU = 1.0 / (1 << 24);
constexpr double kPi = 3.14159265358979323846;

std::vector<float> random_row(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  return x;
}

// ---- RMSNorm ---------------------------------------------------------------------------------

std::vector<double> rms_norm_reference(const std::vector<float>& x, const std::vector<float>& w,
                                       double eps) {
  double sum_sq = 0;
  for (float v : x) sum_sq += static_cast<double>(v) * v;
  const double scale = 1.0 / std::sqrt(sum_sq / static_cast<double>(x.size()) + eps);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * scale * w[i];
  return out;
}

// The kernel sums squares in double (error ~n 2^-53, negligible), rounds the scale to f32, and
// rounds x * scale and then * weight: three roundings of at most u each, so 3u relative (3.01u
// leaves room for the double-precision part).
void expect_rms_norm_close(const std::vector<float>& x, const std::vector<float>& w, float eps) {
  std::vector<float> out(x.size());
  rms_norm_row(x.data(), w.data(), static_cast<int64_t>(x.size()), eps, out.data());
  const std::vector<double> ref = rms_norm_reference(x, w, eps);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_TRUE(std::isfinite(out[i])) << i;
    ASSERT_NEAR(out[i], ref[i], 3.01 * kU * std::fabs(ref[i]) + 1e-45)
        << "i " << i << " x " << x[i];
  }
}

TEST(RmsNorm, MatchesDoubleReference) {
  for (int64_t n : {1, 7, 64, 4096}) {
    const std::vector<float> x = random_row(n, -4.0f, 4.0f, static_cast<uint32_t>(n));
    const std::vector<float> w = random_row(n, -2.0f, 2.0f, static_cast<uint32_t>(n + 1));
    expect_rms_norm_close(x, w, 1e-5f);
    expect_rms_norm_close(x, w, 1e-6f);
  }
}

TEST(RmsNorm, ZeroRowGivesZerosThroughEps) {
  // sum of squares 0: the scale is 1 / sqrt(eps), finite, so the output is exactly 0.
  const std::vector<float> x(64, 0.0f);
  const std::vector<float> w = random_row(64, -2.0f, 2.0f, 1);
  std::vector<float> out(64, NAN);
  rms_norm_row(x.data(), w.data(), 64, 1e-6f, out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(RmsNorm, HugeAndTinyRowsDoNotOverflowOrUnderflow) {
  // Squares of 1e30 overflow f32 and squares of 1e-20 underflow it; the double sum keeps both.
  // The tiny row is dominated by eps: x / sqrt(eps) * w.
  const std::vector<float> w = random_row(32, 0.5f, 2.0f, 2);
  std::vector<float> huge = random_row(32, 1e29f, 1e30f, 3);
  huge[5] = -huge[5];
  expect_rms_norm_close(huge, w, 1e-5f);
  const std::vector<float> tiny = random_row(32, -1e-20f, 1e-20f, 4);
  expect_rms_norm_close(tiny, w, 1e-5f);
}

TEST(RmsNorm, OutputMayAliasInput) {
  std::vector<float> x = random_row(48, -1.0f, 1.0f, 5);
  const std::vector<float> w = random_row(48, -1.0f, 1.0f, 6);
  std::vector<float> separate(48);
  rms_norm_row(x.data(), w.data(), 48, 1e-5f, separate.data());
  rms_norm_row(x.data(), w.data(), 48, 1e-5f, x.data());
  EXPECT_EQ(x, separate);
}

// ---- RoPE ------------------------------------------------------------------------------------

// Element indices of pair i in a head, for either style.
std::pair<int64_t, int64_t> pair_of(RopeStyle style, int64_t i, int64_t n_rot) {
  if (style == RopeStyle::ADJACENT) return {2 * i, 2 * i + 1};
  return {i, i + n_rot / 2};
}

// The angles in double, straight from the definition.
std::vector<double> rope_reference(const std::vector<float>& x, int64_t n_heads, int64_t head_dim,
                                   int64_t n_rot, int32_t position, double base, double scale,
                                   RopeStyle style) {
  std::vector<double> out(x.begin(), x.end());
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < n_rot / 2; ++i) {
      const double theta = position * scale * std::pow(base, -2.0 * static_cast<double>(i) / n_rot);
      const auto [ia, ib] = pair_of(style, i, n_rot);
      const double a = x[static_cast<size_t>(h * head_dim + ia)];
      const double b = x[static_cast<size_t>(h * head_dim + ib)];
      out[static_cast<size_t>(h * head_dim + ia)] = a * std::cos(theta) - b * std::sin(theta);
      out[static_cast<size_t>(h * head_dim + ib)] = a * std::sin(theta) + b * std::cos(theta);
    }
  }
  return out;
}

// Tolerance for pair i. The kernel computes theta_0 = position * freq_scale (exact for the
// scales used here) and theta_i = theta_(i-1) * r with r = powf(base, -2 / n_rot) (within one
// ulp, 2u relative, of the true ratio), rounding each product: theta_i has a relative error of at
// most 2.5 i u, so an absolute error of at most theta_i (3i + 2) u. An angle error e moves the
// rotated pair by at most e |(a, b)|. cosf / sinf add an ulp each, and a * c - b * s two roundings:
// 4u
// (|a| + |b|) covers that. At position 10^6 the first pairs' angles are then only known to
// ~1e-1 rad, which is the inherent limit of an f32 angle there (its spacing is 0.06).
double rope_tolerance(double a, double b, double theta, int64_t i) {
  const double norm = std::hypot(a, b);
  return norm * theta * static_cast<double>(3 * i + 2) * kU +
         4 * kU * (std::fabs(a) + std::fabs(b)) + 1e-30;
}

void expect_rope_close(int64_t n_heads, int64_t head_dim, int64_t n_rot, int32_t position,
                       float base, float scale, RopeStyle style, uint32_t seed) {
  const std::vector<float> x = random_row(n_heads * head_dim, -2.0f, 2.0f, seed);
  std::vector<float> out = x;
  rope_row(out.data(), n_heads, head_dim, position, RopeParams{n_rot, base, scale, style});
  const std::vector<double> ref =
      rope_reference(x, n_heads, head_dim, n_rot, position, base, scale, style);
  const char* name = style == RopeStyle::ADJACENT ? "adjacent" : "neox";
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < n_rot / 2; ++i) {
      const auto [ia, ib] = pair_of(style, i, n_rot);
      const size_t a = static_cast<size_t>(h * head_dim + ia);
      const size_t b = static_cast<size_t>(h * head_dim + ib);
      const double theta = position * static_cast<double>(scale) *
                           std::pow(base, -2.0 * static_cast<double>(i) / n_rot);
      const double tol = rope_tolerance(x[a], x[b], theta, i);
      ASSERT_NEAR(out[a], ref[a], tol)
          << name << " pos " << position << " head " << h << " pair " << i;
      ASSERT_NEAR(out[b], ref[b], tol)
          << name << " pos " << position << " head " << h << " pair " << i;
    }
    // Beyond n_rot nothing moves.
    for (int64_t d = n_rot; d < head_dim; ++d) {
      const size_t k = static_cast<size_t>(h * head_dim + d);
      ASSERT_EQ(out[k], x[k]) << name << " head " << h << " d " << d;
    }
  }
}

TEST(Rope, BothStylesMatchDoubleReference) {
  for (RopeStyle style : {RopeStyle::ADJACENT, RopeStyle::NEOX}) {
    for (int32_t position : {0, 1, 2, 17, 511, 4095, 32767, 131071, 1000000}) {
      expect_rope_close(4, 64, 64, position, 10000.0f, 1.0f, style, 1);
      expect_rope_close(2, 128, 128, position, 1000000.0f, 1.0f, style, 2);  // Qwen2's base
      expect_rope_close(3, 64, 32, position, 10000.0f, 0.25f, style, 3);     // partial, scaled
    }
  }
}

TEST(Rope, PositionZeroIsTheIdentity) {
  for (RopeStyle style : {RopeStyle::ADJACENT, RopeStyle::NEOX}) {
    const std::vector<float> x = random_row(2 * 64, -2.0f, 2.0f, 9);
    std::vector<float> out = x;
    rope_row(out.data(), 2, 64, 0, RopeParams{64, 10000.0f, 1.0f, style});
    EXPECT_EQ(out, x);
  }
}

TEST(Rope, StylesPairDifferentElements) {
  // A head of 8 with only x[1] set, at a position where pair 0 turns by 1 rad (ratio r = 0.1
  // with base 10^4, n_rot 8): adjacent pairs rotate x[1] with x[0]; NEOX pairs x[1] with x[5]
  // (pair 1, angle 0.1 rad).
  std::vector<float> adjacent(8, 0.0f), neox(8, 0.0f);
  adjacent[1] = neox[1] = 1.0f;
  rope_row(adjacent.data(), 1, 8, 1, RopeParams{8, 10000.0f, 1.0f, RopeStyle::ADJACENT});
  rope_row(neox.data(), 1, 8, 1, RopeParams{8, 10000.0f, 1.0f, RopeStyle::NEOX});
  // (a, b) = (0, 1) -> (-sin t, cos t).
  EXPECT_NEAR(adjacent[0], -std::sin(1.0), 4 * kU);
  EXPECT_NEAR(adjacent[1], std::cos(1.0), 4 * kU);
  EXPECT_NEAR(neox[1], std::cos(0.1), 4 * kU);  // x[1] is the first of pair 1: a = 1, b = 0
  EXPECT_NEAR(neox[5], std::sin(0.1), 4 * kU);
  for (int d : {2, 3, 4, 5, 6, 7}) EXPECT_EQ(adjacent[static_cast<size_t>(d)], 0.0f) << d;
  for (int d : {0, 2, 3, 4, 6, 7}) EXPECT_EQ(neox[static_cast<size_t>(d)], 0.0f) << d;
}

TEST(Rope, FreqFactorsDivideTheAnglesAndAttnFactorScales) {
  // LongRoPE-style factors (one divisor a pair, growing with the pair) and a magnitude factor:
  // pair i turns by theta_i / f_i and both outputs are scaled by m.
  constexpr int64_t kHeadDim = 32;
  constexpr int32_t kPosition = 300;
  constexpr float kBase = 10000.0f;
  constexpr float kAttnFactor = 1.19f;
  std::vector<float> factors(kHeadDim / 2);
  for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 3.0f * static_cast<float>(i);
  for (RopeStyle style : {RopeStyle::ADJACENT, RopeStyle::NEOX}) {
    const std::vector<float> x = random_row(2 * kHeadDim, -2.0f, 2.0f, 11);
    std::vector<float> out = x;
    rope_row(out.data(), 2, kHeadDim, kPosition,
             RopeParams{kHeadDim, kBase, 1.0f, style, factors.data(), kAttnFactor});
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t i = 0; i < kHeadDim / 2; ++i) {
        const double theta = kPosition * std::pow(kBase, -2.0 * static_cast<double>(i) / kHeadDim) /
                             factors[static_cast<size_t>(i)];
        const auto [ia, ib] = pair_of(style, i, kHeadDim);
        const size_t a = static_cast<size_t>(h * kHeadDim + ia);
        const size_t b = static_cast<size_t>(h * kHeadDim + ib);
        const double want_a = kAttnFactor * (x[a] * std::cos(theta) - x[b] * std::sin(theta));
        const double want_b = kAttnFactor * (x[a] * std::sin(theta) + x[b] * std::cos(theta));
        const double tol = 2 * rope_tolerance(x[a], x[b], theta, i);
        EXPECT_NEAR(out[a], want_a, tol) << "head " << h << " pair " << i;
        EXPECT_NEAR(out[b], want_b, tol) << "head " << h << " pair " << i;
      }
    }
  }
}

// ---- Activations -----------------------------------------------------------------------------

double silu_reference(double z) {
  return z / (1.0 + std::exp(-z));
}

// The definition, except that for u < 0 the factor 1 + tanh(u), which cancels to 0 in double
// once u < -19, is taken from the identity 1 + tanh(u) = 2 / (1 + e^(-2u)).
double gelu_tanh_reference(double z) {
  const double u = std::sqrt(2.0 / kPi) * (z + 0.044715 * z * z * z);
  const double one_plus_tanh = u >= 0 ? 1.0 + std::tanh(u) : 2.0 / (1.0 + std::exp(-2.0 * u));
  return 0.5 * z * one_plus_tanh;
}

// Inputs: a dense sweep of [-12, 12], large magnitudes of either sign, and signed zeros.
std::vector<float> activation_inputs() {
  std::vector<float> z;
  for (int i = -1200; i <= 1200; ++i) z.push_back(static_cast<float>(i) / 100.0f);
  for (float big : {20.0f, 50.0f, 88.0f, 89.0f, 100.0f, 1e4f, 1e10f, 1e20f, 3e38f}) {
    z.push_back(big);
    z.push_back(-big);
  }
  z.push_back(0.0f);
  z.push_back(-0.0f);
  return z;
}

// The value an activation of z times up gives, through the row kernel.
std::vector<float> apply(void (*row)(float*, const float*, int64_t), const std::vector<float>& z,
                         float up) {
  std::vector<float> gate = z;
  const std::vector<float> ups(z.size(), up);
  row(gate.data(), ups.data(), static_cast<int64_t>(gate.size()));
  return gate;
}

TEST(Silu, MatchesDoubleReferenceIncludingLargeMagnitudes) {
  // z / (1 + e^-z): e^-z within 1.3 ulp (the kernel's polynomial, measured over every f32 in
  // [-87, 88.7]): 2.6u relative; 1 + e^-z, the division and the product by up round once each:
  // 5.6u relative, and 6u covers it. Where e^-z overflows f32 (z < -88.7) the
  // kernel returns -0 while the true value is below 89 e^-88.7 < 4e-37 in magnitude: that is
  // the absolute floor. Large positive z gives z exactly.
  const std::vector<float> z = activation_inputs();
  for (float up : {1.0f, -0.5f}) {  // |up| <= 1: z * up stays finite for every z here
    const std::vector<float> out = apply(silu_mul_row, z, up);
    for (size_t i = 0; i < z.size(); ++i) {
      const double ref = silu_reference(z[i]) * up;
      ASSERT_FALSE(std::isnan(out[i])) << z[i];
      ASSERT_NEAR(out[i], ref, 6 * kU * std::fabs(ref) + 4e-37 * std::fabs(up)) << "z " << z[i];
    }
  }
  EXPECT_EQ(apply(silu_mul_row, {1e20f}, 1.0f)[0], 1e20f);
  EXPECT_EQ(apply(silu_mul_row, {-1e20f}, 1.0f)[0], 0.0f);
}

TEST(SwigluOai, ClampsTheGateAboveAndTheUpBothWays) {
  // g * sigmoid(1.702 g) * (u + 1) with g = min(gate, 7), u = clamp(up, -7, 7): the same
  // roundings as SiLU's plus one for u + 1 and one for the product (8u), and the rounding of
  // a = 1.702 g, which e^-a turns into a relative error of |a| u. The reference takes 1.702 as
  // the f32 constant both llama.cpp and the kernel use.
  auto reference = [](double gate, double up) {
    const double g = std::min(gate, 7.0);
    const double u = std::clamp(up, -7.0, 7.0);
    return g / (1.0 + std::exp(-static_cast<double>(1.702f) * g)) * (u + 1.0);
  };
  const std::vector<float> gates = {-30.0f, -3.0f, -0.5f, 0.0f, 0.25f,
                                    2.0f,   6.9f,  7.0f,  9.5f, 1e6f};
  for (float up : {-12.0f, -7.0f, -1.0f, 0.0f, 0.5f, 6.0f, 7.5f, 1e9f}) {
    const std::vector<float> out = apply(swiglu_oai_row, gates, up);
    for (size_t i = 0; i < gates.size(); ++i) {
      const double ref = reference(gates[i], up);
      const double a = std::fabs(1.702 * std::min(gates[i], 7.0f));
      ASSERT_NEAR(out[i], ref, (a + 8) * kU * std::fabs(ref) + 1e-30) << gates[i] << " " << up;
    }
  }
  // Past the limits nothing grows: gate 1e6 acts as 7 and up 1e9 as 7.
  EXPECT_EQ(apply(swiglu_oai_row, {1e6f}, 1e9f)[0], apply(swiglu_oai_row, {7.0f}, 7.0f)[0]);
  EXPECT_EQ(apply(swiglu_oai_row, {2.0f}, -1.0f)[0], 0.0f);  // u + 1 = 0
}

TEST(GeluTanh, MatchesDoubleReferenceIncludingLargeMagnitudes) {
  // Through z / (1 + e^(-2u)): u = c (z + 0.044715 z^3) takes 5 roundings and two rounded
  // constants (no cancellation: both terms have z's sign), so it carries a relative error of at
  // most 7u and e^(-2u) a relative error of |2u| 7u + 2.6u; the rest is as for SiLU (3u). The
  // weight 1 / (1 + e^(-2u)) passes at most that relative error on, so the bound is
  // (14 |u| + 5.6) u relative, rounded up to (16 |u| + 6) u, with |u| from the exact value; for |z|
  // > 10 the result is z or -0 (the true value below 1e-40 in magnitude), and the same absolute
  // floor as SiLU applies.
  const std::vector<float> z = activation_inputs();
  for (float up : {1.0f, -0.5f}) {
    const std::vector<float> out = apply(gelu_tanh_mul_row, z, up);
    for (size_t i = 0; i < z.size(); ++i) {
      const double zd = z[i];
      const double ref = gelu_tanh_reference(zd) * up;
      const double arg =
          std::min(std::fabs(std::sqrt(2.0 / kPi) * (zd + 0.044715 * zd * zd * zd)), 100.0);
      const double tol = (16 * arg + 6) * kU * std::fabs(ref) + 4e-37 * std::fabs(up);
      ASSERT_FALSE(std::isnan(out[i])) << z[i];
      ASSERT_NEAR(out[i], ref, tol) << "z " << z[i];
    }
  }
  // The limits: z for large z, -0 for large negative z (no inf - inf, no 0 * inf).
  EXPECT_EQ(apply(gelu_tanh_mul_row, {1e20f}, 1.0f)[0], 1e20f);
  EXPECT_EQ(apply(gelu_tanh_mul_row, {3e38f}, 1.0f)[0], 3e38f);
  EXPECT_EQ(apply(gelu_tanh_mul_row, {-1e20f}, 1.0f)[0], 0.0f);
  EXPECT_EQ(apply(gelu_tanh_mul_row, {0.0f}, 1.0f)[0], 0.0f);
  // Known values of the tanh approximation (PyTorch's gelu(approximate="tanh")).
  EXPECT_NEAR(apply(gelu_tanh_mul_row, {1.0f}, 1.0f)[0], 0.8411919906082768, 4e-7);
  EXPECT_NEAR(apply(gelu_tanh_mul_row, {-1.0f}, 1.0f)[0], -0.15880800939172324, 4e-7);
}

}  // namespace
}  // namespace trellis
