// The blocks of the GGUF quantized types, mirrored byte for byte (GGUF stores arrays of these
// back to back, little-endian, without padding). Field names follow the format definitions
// (ggml-common.h), and so do the type names: a kernel written against the format reads the same.
//
// Fields named d, m, dmin hold raw IEEE f16 bits (see half.h). Every block is 2-aligned and has
// an even size, so the blocks of a row that starts 2-aligned are all properly aligned; GGUF tensor
// data starts 32-aligned. Access blocks through pointers only when that holds.
//
// Element i of a block (i counted from 0) is stored as follows; "q" is the unsigned code.
//   q4_0: q = i < 16 ? qs[i] & 0xf : qs[i - 16] >> 4;                  x = (q - 8) * d
//   q4_1: q as q4_0;                                                   x = q * d + m
//   q5_0: q = (4-bit code as q4_0) | (bit i of qh, as a little-endian uint32) << 4;
//                                                                      x = (q - 16) * d
//   q5_1: q as q5_0;                                                   x = q * d + m
//   q8_0:                                                              x = qs[i] * d
//   q2_K: 256 values in two halves of 128 (h = i / 128); within a half, r = i % 128 falls in
//         quarter k = r / 32 at lane l = r % 32:  q = (qs[32h + l] >> 2k) & 3  (0..3).
//         scales[i / 16] holds a 4-bit scale (low nibble) and a 4-bit min (high nibble).
//                                   x = (d * (sc & 0xf)) * q - (dmin * (sc >> 4))
//   q3_K: the q2_K arrangement of 2-bit codes, plus bit (4h + k) of hmask[l] as a third bit
//         that is SET for the upper half of the range: q = low2 - (bit ? 0 : 4)  (-4..3).
//         A 6-bit scale s per run of 16 (unpack_q3_k_scale), stored with a bias of 32.
//                                   x = (d * (s - 32)) * q
//   q4_K: 256 values in 8 sub-blocks of 32, sub-block j = i / 32 with 6-bit scale sc[j] and
//         min mn[j] (see unpack_k_scale_min); sub-blocks 2c and 2c+1 share qs[32c, 32c+32):
//         q = j even ? qs[32c + i % 32] & 0xf : qs[32c + i % 32] >> 4   (c = i / 64)
//                                                     x = (d * sc[j]) * q - (dmin * mn[j])
//   q5_K: as q4_K, plus bit j of qh[i % 32] as bit 4 of q.
//   q6_K: 256 values in two halves of 128 (h = i / 128); within a half, r = i % 128 falls in
//         quarter k = r / 32 at lane l = r % 32. Low 4 bits: ql[64h + l + 32 (k & 1)], the low
//         nibble for k < 2 and the high nibble for k >= 2; high 2 bits: (qh[32h + l] >> 2k) & 3.
//         scales[i / 16] is a signed 8-bit scale of each run of 16.
//                                                     x = (d * scales[i / 16]) * (q - 32)
//   mxfp4 (OCP microscaling FP4, gpt-oss's experts): 32 values in 17 bytes, one E8M0 exponent e
//         then 16 bytes of 4-bit E2M1 codes, q = i < 16 ? qs[i] & 0xf : qs[i - 16] >> 4;
//         x = kMxfp4Values[q] * 2^(e - 128) (the values doubled, so the scale is halved; e = 255
//         is a number like any other). The one block that is 1-aligned with an odd size:
//         read it through memcpy.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace trellis {

// Elements per block of the 32-wide formats (q4_0 .. q8_0).
inline constexpr int kQk = 32;
// Elements per super-block of the K formats.
inline constexpr int kQkK = 256;
// Bytes of the packed 6-bit scales and mins of q4_K and q5_K.
inline constexpr int kKScaleBytes = 12;

struct block_q4_0 {
  uint16_t d;           // f16 scale
  uint8_t qs[kQk / 2];  // element i in the low nibble of qs[i], element i + 16 in the high one
};

struct block_q4_1 {
  uint16_t d;  // f16 scale
  uint16_t m;  // f16 offset (the block minimum)
  uint8_t qs[kQk / 2];
};

struct block_q5_0 {
  uint16_t d;           // f16 scale
  uint8_t qh[4];        // bit i (of the little-endian uint32) is bit 4 of element i
  uint8_t qs[kQk / 2];  // low 4 bits, packed as q4_0
};

struct block_q5_1 {
  uint16_t d;  // f16 scale
  uint16_t m;  // f16 offset (the block minimum)
  uint8_t qh[4];
  uint8_t qs[kQk / 2];
};

struct block_q8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQk];
};

// 2-bit codes of four quarters share a byte of qs (quarter k in bits 2k+1:2k):
//   qs byte  | 0 .. 31                          | 32 .. 63
//   bits 1:0 | elements   0 ..  31 (half 0, k 0) | elements 128 .. 159 (half 1, k 0)
//   bits 3:2 | elements  32 ..  63 (half 0, k 1) | elements 160 .. 191
//   bits 5:4 | elements  64 ..  95               | elements 192 .. 223
//   bits 7:6 | elements  96 .. 127               | elements 224 .. 255
struct block_q2_K {
  uint8_t scales[kQkK / 16];  // per run of 16: low nibble scale, high nibble min (0..15 each)
  uint8_t qs[kQkK / 4];       // 2-bit codes, see above
  uint16_t d;                 // f16 super-block scale of the 4-bit scales
  uint16_t dmin;              // f16 super-block scale of the 4-bit mins
};

struct block_q3_K {
  uint8_t hmask[kQkK / 8];       // bit (4h + k) of hmask[l]: third bit of element 128h + 32k + l
  uint8_t qs[kQkK / 4];          // low 2 bits, packed as q2_K
  uint8_t scales[kKScaleBytes];  // 16 scales of 6 bits (unpack_q3_k_scale)
  uint16_t d;                    // f16 super-block scale
};

struct block_q4_K {
  uint16_t d;                    // f16 super-block scale of the 6-bit sub-block scales
  uint16_t dmin;                 // f16 super-block scale of the 6-bit sub-block mins
  uint8_t scales[kKScaleBytes];  // 8 scales and 8 mins, 6 bits each (unpack_k_scale_min)
  uint8_t qs[kQkK / 2];          // 4-bit codes, see the table above
};

struct block_q5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQkK / 8];  // bit j of qh[l] is bit 4 of element 32 j + l
  uint8_t qs[kQkK / 2];  // low 4 bits, packed as q4_K
};

struct block_q6_K {
  uint8_t ql[kQkK / 2];      // low 4 bits
  uint8_t qh[kQkK / 4];      // high 2 bits
  int8_t scales[kQkK / 16];  // signed scale of each run of 16 elements
  uint16_t d;                // f16 super-block scale
};

struct block_mxfp4 {
  uint8_t e;            // E8M0 exponent
  uint8_t qs[kQk / 2];  // E2M1 codes, packed as q4_0
};

// The E2M1 values doubled (so that they are integers): 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their
// negatives (bit 3 the sign), times 2.
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// The scale of an mxfp4 block, 2^(e - 128), built from its bits (e < 2: the subnormals).
inline float mxfp4_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

static_assert(sizeof(block_mxfp4) == 17);
static_assert(sizeof(block_q4_0) == 18 && alignof(block_q4_0) == 2);
static_assert(sizeof(block_q4_1) == 20 && alignof(block_q4_1) == 2);
static_assert(sizeof(block_q5_0) == 22 && alignof(block_q5_0) == 2);
static_assert(sizeof(block_q5_1) == 24 && alignof(block_q5_1) == 2);
static_assert(sizeof(block_q8_0) == 34 && alignof(block_q8_0) == 2);
static_assert(sizeof(block_q2_K) == 84 && alignof(block_q2_K) == 2);
static_assert(sizeof(block_q3_K) == 110 && alignof(block_q3_K) == 2);
static_assert(offsetof(block_q2_K, qs) == 16 && offsetof(block_q2_K, d) == 80);
static_assert(offsetof(block_q3_K, scales) == 96 && offsetof(block_q3_K, d) == 108);
static_assert(sizeof(block_q4_K) == 144 && alignof(block_q4_K) == 2);
static_assert(sizeof(block_q5_K) == 176 && alignof(block_q5_K) == 2);
static_assert(sizeof(block_q6_K) == 210 && alignof(block_q6_K) == 2);
static_assert(offsetof(block_q5_0, qs) == 6 && offsetof(block_q5_1, qs) == 8);
static_assert(offsetof(block_q4_K, qs) == 16 && offsetof(block_q5_K, qs) == 48);
static_assert(offsetof(block_q6_K, scales) == 192 && offsetof(block_q6_K, d) == 208);

// The 6-bit scale and min of sub-block j (0..7) of a q4_K / q5_K super-block.
// The 12 bytes hold, for k = 0..3 (bit 7 on the left; hi2 = bits 5:4, lo4 = bits 3:0 of a
// 6-bit value):
//   byte k:      [ hi2(sc[k+4]) | sc[k] ]
//   byte 4 + k:  [ hi2(mn[k+4]) | mn[k] ]
//   byte 8 + k:  [ lo4(mn[k+4]) | lo4(sc[k+4]) ]
struct KScaleMin {
  uint8_t scale;  // 0..63
  uint8_t min;    // 0..63
};
inline KScaleMin unpack_k_scale_min(const uint8_t* scales, int j) {
  if (j < 4) {
    return {static_cast<uint8_t>(scales[j] & 0x3f), static_cast<uint8_t>(scales[j + 4] & 0x3f)};
  }
  return {static_cast<uint8_t>((scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4)),
          static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4))};
}

// Packs a 6-bit scale and min into sub-block j of the 12 bytes (the inverse of
// unpack_k_scale_min; only the bits of slot j change).
inline void pack_k_scale_min(uint8_t* scales, int j, KScaleMin v) {
  const auto sc = static_cast<uint8_t>(v.scale & 0x3f), mn = static_cast<uint8_t>(v.min & 0x3f);
  if (j < 4) {
    scales[j] = static_cast<uint8_t>((scales[j] & 0xc0) | sc);
    scales[j + 4] = static_cast<uint8_t>((scales[j + 4] & 0xc0) | mn);
    return;
  }
  scales[j - 4] = static_cast<uint8_t>((scales[j - 4] & 0x3f) | ((sc >> 4) << 6));
  scales[j] = static_cast<uint8_t>((scales[j] & 0x3f) | ((mn >> 4) << 6));
  scales[j + 4] = static_cast<uint8_t>((sc & 0x0f) | ((mn & 0x0f) << 4));
}

// The 6-bit scale (0..63, the stored value: the signed scale is this minus 32) of run k (0..15)
// of a q3_K super-block. The 12 bytes hold (bit 7 on the left; lo4 = bits 3:0, hi2 = bits 5:4):
//   byte k      (k = 0..7):  [ lo4(s[k+8]) | lo4(s[k]) ]
//   byte 8 + m  (m = 0..3):  [ hi2(s[m+12]) | hi2(s[m+8]) | hi2(s[m+4]) | hi2(s[m]) ]
inline uint8_t unpack_q3_k_scale(const uint8_t* scales, int k) {
  const int low = k < 8 ? (scales[k] & 0x0f) : (scales[k - 8] >> 4);
  const int high = (scales[8 + k % 4] >> (2 * (k / 4))) & 3;
  return static_cast<uint8_t>(low | (high << 4));
}

// Packs the 6-bit stored scale `s` of run k (the inverse of unpack_q3_k_scale; only the bits of
// run k change).
inline void pack_q3_k_scale(uint8_t* scales, int k, uint8_t s) {
  const int low_shift = k < 8 ? 0 : 4;
  uint8_t& low = scales[k % 8];
  low = static_cast<uint8_t>((low & ~(0x0f << low_shift)) | ((s & 0x0f) << low_shift));
  const int high_shift = 2 * (k / 4);
  uint8_t& high = scales[8 + k % 4];
  high = static_cast<uint8_t>((high & ~(3 << high_shift)) | (((s >> 4) & 3) << high_shift));
}

}  // namespace trellis
