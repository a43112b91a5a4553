// Block structs against the dtype table, and the 6-bit scale/min unpacking of the K formats.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "quant/block_types.h"
#include "quant/quant.h"
#include "tensor/dtype.h"

namespace trellis {
namespace {

TEST(QuantBlocks, SizesMatchTheDTypeTable) {
  EXPECT_EQ(static_cast<int64_t>(sizeof(block_q4_0)), dtype_info(DType::Q4_0).block_bytes);
  EXPECT_EQ(static_cast<int64_t>(sizeof(block_q4_1)), dtype_info(DType::Q4_1).block_bytes);
  EXPECT_EQ(static_cast<int64_t>(sizeof(block_q5_0)), dtype_info(DType::Q5_0).block_bytes);
  EXPECT_EQ(static_cast<int64_t>(sizeof(block_q5_1)), dtype_info(DType::Q5_1).block_bytes);
  EXPECT_EQ(static_cast<int64_t>(sizeof(block_q8_0)), dtype_info(DType::Q8_0).block_bytes);
  EXPECT_EQ(static_cast<int64_t>(sizeof(block_q2_K)), dtype_info(DType::Q2_K).block_bytes);
  EXPECT_EQ(static_cast<int64_t>(sizeof(block_q3_K)), dtype_info(DType::Q3_K).block_bytes);
  EXPECT_EQ(static_cast<int64_t>(sizeof(block_q4_K)), dtype_info(DType::Q4_K).block_bytes);
  EXPECT_EQ(static_cast<int64_t>(sizeof(block_q5_K)), dtype_info(DType::Q5_K).block_bytes);
  EXPECT_EQ(static_cast<int64_t>(sizeof(block_q6_K)), dtype_info(DType::Q6_K).block_bytes);
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0}) {
    EXPECT_EQ(dtype_info(t).block_elems, kQk) << dtype_name(t);
  }
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    EXPECT_EQ(dtype_info(t).block_elems, kQkK) << dtype_name(t);
  }
}

TEST(QuantBlocks, SupportedTypes) {
  for (DType t :
       {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
        DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    EXPECT_TRUE(can_dequantize(t)) << dtype_name(t);
    EXPECT_TRUE(can_quantize(t)) << dtype_name(t);
  }
  for (DType t : {DType::Q8_1, DType::Q8_K, DType::I8, DType::I32, DType::F64}) {
    EXPECT_FALSE(can_dequantize(t)) << dtype_name(t);
    EXPECT_FALSE(can_quantize(t)) << dtype_name(t);
  }
}

TEST(QuantBlocks, UnpacksKScalesAndMins) {
  // Bytes chosen by hand; the expected values are worked out bit by bit in the comments.
  const uint8_t scales[kKScaleBytes] = {
      0xc1, 0x02, 0x43, 0x3f,  // low 6 bits: sc[0..3]; top 2 bits: bits 5:4 of sc[4..7]
      0x45, 0x80, 0x3f, 0x09,  // low 6 bits: mn[0..3]; top 2 bits: bits 5:4 of mn[4..7]
      0x51, 0xa1, 0xf0, 0x7e,  // low nibble: bits 3:0 of sc[4..7]; high nibble: of mn[4..7]
  };
  struct Expected {
    int scale, min;
  };
  const Expected expected[8] = {
      {0xc1 & 63, 0x45 & 63},     // 1, 5
      {0x02, 0x80 & 63},          // 2, 0
      {0x43 & 63, 0x3f},          // 3, 63
      {0x3f, 0x09},               // 63, 9
      {3 * 16 + 1, 1 * 16 + 5},   // sc: 0xc1 >> 6 = 3, 0x51 & 15 = 1; mn: 0x45 >> 6 = 1, 0x51 >> 4
      {0 * 16 + 1, 2 * 16 + 10},  // sc: 0x02 >> 6 = 0, 0xa1 & 15; mn: 0x80 >> 6 = 2, 0xa1 >> 4
      {1 * 16 + 0, 0 * 16 + 15},  // sc: 0x43 >> 6 = 1, 0xf0 & 15; mn: 0x3f >> 6 = 0, 0xf0 >> 4
      {0 * 16 + 14, 0 * 16 + 7},  // sc: 0x3f >> 6 = 0, 0x7e & 15; mn: 0x09 >> 6 = 0, 0x7e >> 4
  };
  for (int j = 0; j < 8; ++j) {
    const KScaleMin got = unpack_k_scale_min(scales, j);
    EXPECT_EQ(got.scale, expected[j].scale) << "j = " << j;
    EXPECT_EQ(got.min, expected[j].min) << "j = " << j;
  }
}

TEST(QuantBlocks, KScalesReachEveryValue) {
  // Packing every (scale, min) value into every slot, as the layout comment describes, must
  // unpack to the same value: all 6 bits of each field are wired to the right place.
  for (int v = 0; v < 64; ++v) {
    for (int j = 0; j < 8; ++j) {
      uint8_t scales[kKScaleBytes] = {};
      const int w = 63 - v;  // a different value for the min, so crossed wires show
      if (j < 4) {
        scales[j] = static_cast<uint8_t>(v);
        scales[j + 4] = static_cast<uint8_t>(w);
      } else {
        scales[j - 4] = static_cast<uint8_t>((v >> 4) << 6);
        scales[j] = static_cast<uint8_t>((w >> 4) << 6);
        scales[j + 4] = static_cast<uint8_t>((v & 15) | ((w & 15) << 4));
      }
      const KScaleMin got = unpack_k_scale_min(scales, j);
      ASSERT_EQ(got.scale, v) << "j = " << j;
      ASSERT_EQ(got.min, w) << "j = " << j;
      for (int other = 0; other < 8; ++other) {  // and nothing leaks into other slots
        if (other == j) continue;
        const KScaleMin zero = unpack_k_scale_min(scales, other);
        ASSERT_EQ(zero.scale, 0) << "j = " << j << ", other = " << other;
        ASSERT_EQ(zero.min, 0) << "j = " << j << ", other = " << other;
      }
    }
  }
}

// pack_k_scale_min is the inverse of unpack_k_scale_min, slot by slot: packing every value into
// every slot of bytes already holding other values changes only that slot.
TEST(QuantBlocks, PacksKScalesAndMins) {
  for (int v = 0; v < 64; ++v) {
    for (int j = 0; j < 8; ++j) {
      uint8_t scales[kKScaleBytes];
      std::memset(scales, 0xa5, sizeof(scales));  // stray bits the packing must overwrite
      for (int k = 0; k < 8; ++k) {               // background: slot k holds (k + 7, 50 - k)
        pack_k_scale_min(scales, k,
                         KScaleMin{static_cast<uint8_t>(k + 7), static_cast<uint8_t>(50 - k)});
      }
      const KScaleMin value{static_cast<uint8_t>(v), static_cast<uint8_t>(63 - v)};
      pack_k_scale_min(scales, j, value);
      for (int k = 0; k < 8; ++k) {
        const KScaleMin got = unpack_k_scale_min(scales, k);
        ASSERT_EQ(got.scale, k == j ? v : k + 7) << "j = " << j << ", k = " << k;
        ASSERT_EQ(got.min, k == j ? 63 - v : 50 - k) << "j = " << j << ", k = " << k;
      }
    }
  }
}

// The q3_K scales: the hand-worked bytes of the dequantize test, and pack / unpack of every value
// in every slot without disturbing the others.
TEST(QuantBlocks, UnpacksAndPacksQ3KScales) {
  const uint8_t bytes[kKScaleBytes] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xba,
                                       0xdc, 0xfe, 0xe4, 0x1b, 0x00, 0xff};
  const int expected[16] = {0, 50, 4, 54, 24, 42, 12, 62, 33, 19, 5, 55, 57, 11, 13, 63};
  for (int k = 0; k < 16; ++k) EXPECT_EQ(unpack_q3_k_scale(bytes, k), expected[k]) << k;
  for (int v = 0; v < 64; ++v) {
    for (int j = 0; j < 16; ++j) {
      uint8_t scales[kKScaleBytes];
      std::memset(scales, 0x5a, sizeof(scales));
      for (int k = 0; k < 16; ++k) pack_q3_k_scale(scales, k, static_cast<uint8_t>(3 * k + 5));
      pack_q3_k_scale(scales, j, static_cast<uint8_t>(v));
      for (int k = 0; k < 16; ++k) {
        ASSERT_EQ(unpack_q3_k_scale(scales, k), k == j ? v : 3 * k + 5) << j << " " << k;
      }
    }
  }
}

}  // namespace
}  // namespace trellis
