// dequantize_row on hand-built blocks. Every block is written as raw little-endian bytes (so the
// byte layout is tested, not only the structs), and every expected value is computed in the test
// from the format definition with chosen scales: f16 0x3c00 = 1.0, 0x3800 = 0.5, 0x4000 = 2.0,
// 0xc000 = -2.0, 0xc400 = -4.0, 0x3400 = 0.25, 0x0001 = 2^-24.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "quant/quant.h"
#include "tensor/dtype.h"

namespace trellis {
namespace {

// Appends raw bytes; the vector's heap storage is suitably aligned for the row.
class ByteWriter {
 public:
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u16(uint16_t v) {  // little-endian, as GGUF stores it
    u8(static_cast<uint8_t>(v & 0xff));
    u8(static_cast<uint8_t>(v >> 8));
  }
  template <typename F>
  void repeat(int n, F byte_at) {
    for (int i = 0; i < n; ++i) u8(static_cast<uint8_t>(byte_at(i)));
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

std::vector<float> dequantize(DType type, const ByteWriter& w, int64_t n_elems) {
  EXPECT_EQ(static_cast<uint64_t>(w.bytes().size()), row_bytes(type, n_elems).value());
  std::vector<float> out(static_cast<size_t>(n_elems), NAN);
  dequantize_row(type, w.bytes().data(), out.data(), n_elems);
  return out;
}

TEST(QuantDequantize, F32IsACopy) {
  const std::vector<float> in = {1.5f, -0.0f, INFINITY, 3e-40f};
  std::vector<float> out(4);
  dequantize_row(DType::F32, in.data(), out.data(), 4);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(in[i]));
}

TEST(QuantDequantize, F16) {
  ByteWriter w;
  for (uint16_t h : {0x3c00, 0xb800, 0x7bff, 0x0001, 0x7c00, 0x8000, 0x4248}) w.u16(h);
  const auto out = dequantize(DType::F16, w, 7);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -0.5f);
  EXPECT_EQ(out[2], 65504.0f);
  EXPECT_EQ(out[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(out[4], INFINITY);
  EXPECT_EQ(out[5], 0.0f);
  EXPECT_TRUE(std::signbit(out[5]));
  EXPECT_EQ(out[6], 2.0f * (1.0f + 0x248 / 1024.0f));  // 3.140625
}

TEST(QuantDequantize, Bf16) {
  ByteWriter w;
  for (uint16_t h : {0x3f80, 0x4049, 0xff80, 0x7fc0, 0xbe00}) w.u16(h);
  const auto out = dequantize(DType::BF16, w, 5);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 2.0f * (1.0f + 0x49 / 128.0f));  // 3.140625
  EXPECT_EQ(out[2], -INFINITY);
  EXPECT_TRUE(std::isnan(out[3]));
  EXPECT_EQ(out[4], -0.125f);
}

TEST(QuantDequantize, Q4_0) {
  ByteWriter w;
  // Block 0: d = 0.5; qs[l] = l in the low nibble, 15 - l in the high nibble.
  w.u16(0x3800);
  w.repeat(16, [](int l) { return l | ((15 - l) << 4); });
  // Block 1: d = -2; every byte 0x8a: low nibble 10, high nibble 8.
  w.u16(0xc000);
  w.repeat(16, [](int) { return 0x8a; });
  const auto out = dequantize(DType::Q4_0, w, 64);
  for (int l = 0; l < 16; ++l) {
    EXPECT_EQ(out[l], (l - 8) * 0.5f) << l;              // low nibbles: elements 0..15
    EXPECT_EQ(out[16 + l], ((15 - l) - 8) * 0.5f) << l;  // high nibbles: elements 16..31
    EXPECT_EQ(out[32 + l], (10 - 8) * -2.0f) << l;
    EXPECT_EQ(out[48 + l], 0.0f) << l;
  }
  EXPECT_EQ(out[0], -4.0f);
  EXPECT_EQ(out[31], -4.0f);
  EXPECT_EQ(out[15], 3.5f);
  EXPECT_EQ(out[16], 3.5f);
}

TEST(QuantDequantize, Q4_1) {
  ByteWriter w;
  // Block 0: d = 1, m = -4; qs[l] = l | (15 - l) << 4.
  w.u16(0x3c00);
  w.u16(0xc400);
  w.repeat(16, [](int l) { return l | ((15 - l) << 4); });
  // Block 1: d = 0.25, m = 1; every byte 0x3c: low nibble 12, high nibble 3.
  w.u16(0x3400);
  w.u16(0x3c00);
  w.repeat(16, [](int) { return 0x3c; });
  const auto out = dequantize(DType::Q4_1, w, 64);
  for (int l = 0; l < 16; ++l) {
    EXPECT_EQ(out[l], l * 1.0f - 4.0f) << l;
    EXPECT_EQ(out[16 + l], (15 - l) * 1.0f - 4.0f) << l;
    EXPECT_EQ(out[32 + l], 12 * 0.25f + 1.0f) << l;  // 4
    EXPECT_EQ(out[48 + l], 3 * 0.25f + 1.0f) << l;   // 1.75
  }
}

TEST(QuantDequantize, Q5_0) {
  ByteWriter w;
  // d = 1; qh = bytes 01 80 00 f0, i.e. the uint32 0xf0008001: bits 0, 15, 28, 29, 30, 31.
  w.u16(0x3c00);
  for (uint8_t b : {0x01, 0x80, 0x00, 0xf0}) w.u8(b);
  w.repeat(16, [](int l) { return l | ((15 - l) << 4); });
  const auto out = dequantize(DType::Q5_0, w, 32);
  for (int l = 0; l < 16; ++l) {
    const int high_lo = (l == 0 || l == 15) ? 16 : 0;  // bits 0 and 15
    const int high_hi = (l >= 12) ? 16 : 0;            // bits 28..31 are elements 28..31
    EXPECT_EQ(out[l], ((l | high_lo) - 16) * 1.0f) << l;
    EXPECT_EQ(out[16 + l], (((15 - l) | high_hi) - 16) * 1.0f) << l;
  }
  EXPECT_EQ(out[0], 0.0f);    // 0 | 16
  EXPECT_EQ(out[1], -15.0f);  // 1
  EXPECT_EQ(out[15], 15.0f);  // 15 | 16
  EXPECT_EQ(out[16], -1.0f);  // 15
  EXPECT_EQ(out[28], 3.0f);   // 3 | 16
  EXPECT_EQ(out[31], 0.0f);   // 0 | 16
}

TEST(QuantDequantize, Q5_1) {
  ByteWriter w;
  // Block 0: d = 0.5, m = 2; qh = ff 00 00 00 (elements 0..7 get bit 4); every qs byte 0x5a.
  w.u16(0x3800);
  w.u16(0x4000);
  for (uint8_t b : {0xff, 0x00, 0x00, 0x00}) w.u8(b);
  w.repeat(16, [](int) { return 0x5a; });
  // Block 1: d = 1, m = -16; qh = 00 00 01 80 (bits 16 and 31: elements 16 and 31); qs 0x0f.
  w.u16(0x3c00);
  w.u16(0xcc00);  // -16
  for (uint8_t b : {0x00, 0x00, 0x01, 0x80}) w.u8(b);
  w.repeat(16, [](int) { return 0x0f; });
  const auto out = dequantize(DType::Q5_1, w, 64);
  for (int l = 0; l < 16; ++l) {
    EXPECT_EQ(out[l], (l < 8 ? 26 : 10) * 0.5f + 2.0f) << l;  // 15 or 7
    EXPECT_EQ(out[16 + l], 5 * 0.5f + 2.0f) << l;             // 4.5
    EXPECT_EQ(out[32 + l], 15 * 1.0f - 16.0f) << l;           // -1
  }
  EXPECT_EQ(out[48], 16 * 1.0f - 16.0f);  // high nibble 0 | bit 16
  for (int l = 1; l < 15; ++l) EXPECT_EQ(out[48 + l], -16.0f) << l;
  EXPECT_EQ(out[63], 0.0f);
}

TEST(QuantDequantize, Q8_0) {
  ByteWriter w;
  // Block 0: d = 0.5, qs[l] = l - 16 except qs[0] = -128 (0x80) and qs[31] = 127.
  w.u16(0x3800);
  w.repeat(32, [](int l) { return l == 0 ? 0x80 : l == 31 ? 0x7f : (l - 16) & 0xff; });
  // Block 1: a subnormal scale, d = 2^-24; qs all 2 except qs[5] = -3.
  w.u16(0x0001);
  w.repeat(32, [](int l) { return l == 5 ? 0xfd : 0x02; });
  const auto out = dequantize(DType::Q8_0, w, 64);
  EXPECT_EQ(out[0], -64.0f);
  EXPECT_EQ(out[31], 63.5f);
  for (int l = 1; l < 31; ++l) EXPECT_EQ(out[l], (l - 16) * 0.5f) << l;
  for (int l = 0; l < 32; ++l) {
    EXPECT_EQ(out[32 + l], (l == 5 ? -3 : 2) * std::ldexp(1.0f, -24)) << l;
  }
}

// mxfp4: E2M1 values 0, ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6 (code bit 3 the sign) times 2^(e - 127).
TEST(QuantDequantize, Mxfp4) {
  constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  auto e2m1 = [&](int code) { return (code & 8 ? -1.0f : 1.0f) * kE2M1[code & 7]; };
  ByteWriter w;
  // Block 0: e = 130 (x 8); element l < 16 has code l, element l + 16 code 15 - l.
  w.u8(130);
  w.repeat(16, [](int l) { return l | (15 - l) << 4; });
  // Block 1: e = 0, the smallest scale (2^-127, a subnormal); block 2: e = 255 (2^128: a number,
  // not NaN), both all code 1 (0.5) in the low nibbles and 9 (-0.5) in the high ones.
  for (int e : {0, 255}) {
    w.u8(static_cast<uint8_t>(e));
    w.repeat(16, [](int) { return 0x91; });
  }
  const auto out = dequantize(DType::MXFP4, w, 96);
  for (int l = 0; l < 16; ++l) {
    EXPECT_EQ(out[l], e2m1(l) * 8.0f) << l;
    EXPECT_EQ(out[l + 16], e2m1(15 - l) * 8.0f) << l;
  }
  for (int l = 0; l < 16; ++l) {
    EXPECT_EQ(out[32 + l], std::ldexp(0.5f, -127)) << l;
    EXPECT_EQ(out[48 + l], -std::ldexp(0.5f, -127)) << l;
    EXPECT_EQ(out[64 + l], std::ldexp(0.5f, 128)) << l;
    EXPECT_EQ(out[80 + l], -std::ldexp(0.5f, 128)) << l;
  }
}

// The 12 scale bytes of the K-format tests and what they unpack to (see quant_blocks_test).
constexpr uint8_t kScaleBytes[12] = {0xc1, 0x02, 0x43, 0x3f, 0x45, 0x80,
                                     0x3f, 0x09, 0x51, 0xa1, 0xf0, 0x7e};
constexpr int kSc[8] = {1, 2, 3, 63, 49, 1, 16, 14};
constexpr int kMn[8] = {5, 0, 63, 9, 21, 42, 15, 7};

// Low nibbles / high nibbles of qs[32c + l] in the K-format tests.
int k_low(int c, int l) {
  return (l + c) & 0xf;
}
int k_high(int c, int l) {
  return (3 * l + c) & 0xf;
}

void write_k_header_and_scales(ByteWriter& w) {
  w.u16(0x4000);  // d = 2
  w.u16(0x3800);  // dmin = 0.5
  for (uint8_t b : kScaleBytes) w.u8(b);
}

void write_k_qs(ByteWriter& w) {
  w.repeat(128, [](int i) { return k_low(i / 32, i % 32) | (k_high(i / 32, i % 32) << 4); });
}

TEST(QuantDequantize, Q4_K) {
  ByteWriter w;
  write_k_header_and_scales(w);
  write_k_qs(w);
  const auto out = dequantize(DType::Q4_K, w, 256);
  // Element e: chunk c = e / 64 owns qs[32c .. 32c + 32); its first 32 elements are the low
  // nibbles (sub-block 2c), the next 32 the high nibbles (sub-block 2c + 1).
  for (int e = 0; e < 256; ++e) {
    const int c = e / 64, high = (e % 64) / 32, l = e % 32, j = 2 * c + high;
    const int q = high ? k_high(c, l) : k_low(c, l);
    EXPECT_EQ(out[e], (2.0f * kSc[j]) * q - 0.5f * kMn[j]) << e;
  }
  EXPECT_EQ(out[0], 2.0f * 1 * 0 - 0.5f * 5);       // -2.5
  EXPECT_EQ(out[97], 2.0f * 63 * 4 - 0.5f * 9);     // c 1, high, l 1, j 3: q = 3 + 1; 499.5
  EXPECT_EQ(out[200], 2.0f * 16 * 11 - 0.5f * 15);  // c 3, low, l 8, j 6: q = 8 + 3; 344.5
  EXPECT_EQ(out[255], 2.0f * 14 * 0 - 0.5f * 7);    // c 3, high, l 31, j 7: q = 96 & 15 = 0
}

TEST(QuantDequantize, Q5_K) {
  ByteWriter w;
  write_k_header_and_scales(w);
  w.repeat(32, [](int l) { return (37 * l) & 0xff; });  // qh: bit j of qh[l] -> element 32 j + l
  write_k_qs(w);
  const auto out = dequantize(DType::Q5_K, w, 256);
  for (int e = 0; e < 256; ++e) {
    const int c = e / 64, high = (e % 64) / 32, l = e % 32, j = 2 * c + high;
    const int qh_l = (37 * l) & 0xff;
    const int q = (high ? k_high(c, l) : k_low(c, l)) | (((qh_l >> j) & 1) << 4);
    EXPECT_EQ(out[e], (2.0f * kSc[j]) * q - 0.5f * kMn[j]) << e;
  }
  // c 2, high, l 3, j 5: qh[3] = 111 = 0b01101111 has bit 5; q = (9 + 2) | 16 = 27.
  EXPECT_EQ(out[163], 2.0f * 1 * 27 - 0.5f * 42);  // 33
  // c 1, high, l 1, j 3: qh[1] = 37 = 0b00100101 lacks bit 3; q = 4 as in q4_K.
  EXPECT_EQ(out[97], 2.0f * 63 * 4 - 0.5f * 9);
}

TEST(QuantDequantize, Q6_K) {
  constexpr int8_t kScales[16] = {1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6, 7, -7, 127, -128};
  ByteWriter w;
  w.repeat(128, [](int i) { return i; });                  // ql
  w.repeat(64, [](int i) { return (11 * i) & 0xff; });     // qh
  for (int8_t s : kScales) w.u8(static_cast<uint8_t>(s));  // scales
  w.u16(0x3800);                                           // d = 0.5
  const auto out = dequantize(DType::Q6_K, w, 256);
  // Element e: half h = e / 128, quarter k = (e % 128) / 32, lane l = e % 32. Low 4 bits from
  // ql[64h + l + 32 (k & 1)] (low nibble for k < 2, else high), high 2 bits from
  // qh[32h + l] >> 2k; the scale is scales[e / 16].
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const int ql = (64 * h + l + 32 * (k & 1)) & 0xff;
    const int low = k < 2 ? ql & 0xf : ql >> 4;
    const int high = (((11 * (32 * h + l)) & 0xff) >> (2 * k)) & 3;
    EXPECT_EQ(out[e], (0.5f * kScales[e / 16]) * ((low | (high << 4)) - 32)) << e;
  }
  EXPECT_EQ(out[0], (0.5f * 1) * (0 - 32));  // ql[0] = 0, qh[0] = 0: -16
  // e 100: h 0, k 3, l 4: ql[36] = 0x24 -> 2; qh[4] = 44 = 0b00101100 >> 6 = 0; scale 4.
  EXPECT_EQ(out[100], (0.5f * 4) * (2 - 32));  // -60
  // e 255: h 1, k 3, l 31: ql[127] = 0x7f -> 7; qh[63] = 693 & 255 = 181 = 0b10110101 >> 6 = 2.
  EXPECT_EQ(out[255], (0.5f * -128) * ((7 | 32) - 32));  // -448
  // e 130: h 1, k 0, l 2: ql[66] = 0x42 -> 2; qh[34] = 374 & 255 = 118 = 0b01110110 & 3 = 2.
  EXPECT_EQ(out[130], (0.5f * 5) * ((2 | 32) - 32));  // 5
}

// 2-bit codes and run scales shared by the q2_K and q3_K tests.
int k_qs(int j) {  // qs[j], j = 0..63
  return (29 * j + 11) & 0xff;
}
// Element e = 128 h + 32 k + l: bits 2k + 1:2k of qs[32 h + l].
int low2_of(int e) {
  const int h = e / 128, k = (e % 128) / 32, l = e % 32;
  return (k_qs(32 * h + l) >> (2 * k)) & 3;
}

TEST(QuantDequantize, Q2_K) {
  ByteWriter w;
  // scales[r]: low nibble (7 r) & 15 is the scale, high nibble (5 r + 3) & 15 the min.
  w.repeat(16, [](int r) { return ((7 * r) & 0xf) | (((5 * r + 3) & 0xf) << 4); });
  w.repeat(64, k_qs);
  w.u16(0x4000);  // d = 2
  w.u16(0x3800);  // dmin = 0.5
  const auto out = dequantize(DType::Q2_K, w, 256);
  for (int e = 0; e < 256; ++e) {
    const int r = e / 16;
    EXPECT_EQ(out[e], (2.0f * ((7 * r) & 0xf)) * low2_of(e) - 0.5f * ((5 * r + 3) & 0xf)) << e;
  }
  // e 0: qs[0] = 11 = 0b00001011, bits 1:0 = 3; run 0: scale 0, min 3.
  EXPECT_EQ(out[0], 2.0f * 0 * 3 - 0.5f * 3);  // -1.5
  // e 47: h 0, k 1, l 15: qs[15] = 190 = 0b10111110, bits 3:2 = 3; run 2: scale 14, min 13.
  EXPECT_EQ(out[47], 2.0f * 14 * 3 - 0.5f * 13);  // 77.5
  // e 200: h 1, k 2, l 8: qs[40] = 147 = 0b10010011, bits 5:4 = 1; run 12: scale 4, min 15.
  EXPECT_EQ(out[200], 2.0f * 4 * 1 - 0.5f * 15);  // 0.5
  // e 255: h 1, k 3, l 31: qs[63] = 46 = 0b00101110, bits 7:6 = 0; run 15: scale 9, min 14.
  EXPECT_EQ(out[255], 2.0f * 9 * 0 - 0.5f * 14);  // -7
}

TEST(QuantDequantize, Q3_K) {
  // Scale bytes and the signed scales (stored 6-bit value - 32) they hold, worked out by hand:
  // low 4 bits of s[k] in byte k (k < 8) or the high nibble of byte k - 8; bits 5:4 in bits
  // 2 (k / 4) + 1 : 2 (k / 4) of byte 8 + k % 4 (0xe4 = 11 10 01 00, 0x1b = 00 01 10 11).
  constexpr uint8_t kBytes[12] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xba,
                                  0xdc, 0xfe, 0xe4, 0x1b, 0x00, 0xff};
  constexpr int kScale[16] = {0 - 32,  50 - 32, 4 - 32,  54 - 32, 24 - 32, 42 - 32,
                              12 - 32, 62 - 32, 33 - 32, 19 - 32, 5 - 32,  55 - 32,
                              57 - 32, 11 - 32, 13 - 32, 63 - 32};
  const auto hmask = [](int l) { return (37 * l + 5) & 0xff; };
  ByteWriter w;
  w.repeat(32, hmask);
  w.repeat(64, k_qs);
  for (uint8_t b : kBytes) w.u8(b);
  w.u16(0x3800);  // d = 0.5
  const auto out = dequantize(DType::Q3_K, w, 256);
  for (int e = 0; e < 256; ++e) {
    const int bit = (hmask(e % 32) >> (e / 32)) & 1;  // bit 4h + k of hmask[l]
    const int q = low2_of(e) - (bit ? 0 : 4);
    EXPECT_EQ(out[e], (0.5f * kScale[e / 16]) * q) << e;
  }
  // e 0: low 3; hmask[0] = 5 has bit 0: q = 3; scale -32.
  EXPECT_EQ(out[0], (0.5f * -32) * 3);  // -48
  // e 47: low 3; hmask[15] = 48 lacks bit 1: q = -1; scale (run 2) -28.
  EXPECT_EQ(out[47], (0.5f * -28) * -1);  // 14
  // e 200: low 1; hmask[8] = 45 = 0b00101101 lacks bit 6: q = -3; scale (run 12) 25.
  EXPECT_EQ(out[200], (0.5f * 25) * -3);  // -37.5
  // e 254: h 1, k 3, l 30: qs[62] = 17, bits 7:6 = 0; hmask[30] = 91 lacks bit 7: q = -4;
  // scale (run 15) 31.
  EXPECT_EQ(out[254], (0.5f * 31) * -4);  // -62
}

TEST(QuantDequantize, EmptyRowWritesNothing) {
  float sentinel = 7.0f;
  dequantize_row(DType::Q4_K, nullptr, &sentinel, 0);
  dequantize_row(DType::F32, nullptr, &sentinel, 0);
  EXPECT_EQ(sentinel, 7.0f);
}

}  // namespace
}  // namespace trellis
