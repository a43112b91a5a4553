// KvStorage's layout arithmetic for every KV type: row and token sizes, the offsets of keys and
// values (each in its own type), copy-on-write copies, and the refusal of heads that quantized
// blocks do not tile.
#include "kv/kv_storage.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

namespace trellis {
namespace {

KvLayout tinyllama_like(KvTypes types) {
  return KvLayout{22, 4, 64, 16, types};
}

TEST(KvStorage, RowSizesFollowTheTypes) {
  EXPECT_EQ(kv_row_bytes(KvType::F16, 64), 128u);
  EXPECT_EQ(kv_row_bytes(KvType::F32, 64), 256u);
  EXPECT_EQ(kv_row_bytes(KvType::Q8_0, 64), 68u);  // 2 blocks of 34 bytes
  EXPECT_EQ(kv_row_bytes(KvType::Q4_0, 64), 36u);  // 2 blocks of 18 bytes
  // 22 layers x 4 heads x (key row + value row).
  EXPECT_EQ(tinyllama_like(KvTypes::both(KvType::F16)).bytes_per_token(), 22u * 4 * 256);
  EXPECT_EQ(tinyllama_like(KvTypes{KvType::Q8_0, KvType::Q4_0}).bytes_per_token(),
            22u * 4 * (68 + 36));
}

TEST(KvStorage, QuantizedTypesHoldMoreTokensInTheSameBytes) {
  // The tokens a pool of given bytes holds scale as 1 / bytes_per_token.
  const double f16 = static_cast<double>(tinyllama_like(KvTypes{}).bytes_per_token());
  EXPECT_GE(
      f16 / static_cast<double>(tinyllama_like(KvTypes::both(KvType::Q8_0)).bytes_per_token()),
      1.8);
  EXPECT_GE(
      f16 / static_cast<double>(tinyllama_like(KvTypes::both(KvType::Q4_0)).bytes_per_token()),
      3.2);
}

TEST(KvStorage, KeysAndValuesOfEveryHeadLayerAndBlockAreDisjointRuns) {
  // Every (block, layer, K/V, head) run starts at its own offset, runs do not overlap, and
  // together they tile the storage exactly.
  const KvLayout layout{3, 2, 64, 4, KvTypes{KvType::Q4_0, KvType::Q8_0}};
  KvStorage kv = std::move(KvStorage::create(layout, 5).value());
  const uint8_t* base = kv.block_data(0);
  std::set<std::pair<size_t, size_t>> runs;  // [begin, end)
  for (int32_t b = 0; b < 5; ++b) {
    for (int64_t l = 0; l < 3; ++l) {
      for (int64_t h = 0; h < 2; ++h) {
        const auto k = static_cast<size_t>(kv.keys(b, l, h) - base);
        const auto v = static_cast<size_t>(kv.values(b, l, h) - base);
        runs.insert({k, k + 4 * layout.key_row_bytes()});
        runs.insert({v, v + 4 * layout.value_row_bytes()});
      }
    }
  }
  ASSERT_EQ(runs.size(), 5u * 3 * 2 * 2);
  size_t expected_begin = 0;
  for (const auto& [begin, end] : runs) {
    EXPECT_EQ(begin, expected_begin);
    expected_begin = end;
  }
  EXPECT_EQ(expected_begin, kv.bytes());
}

TEST(KvStorage, CopyBlockCopiesTheFirstSlotsOfEveryRun) {
  const KvLayout layout{2, 2, 32, 4, KvTypes{KvType::Q8_0, KvType::Q4_0}};
  KvStorage kv = std::move(KvStorage::create(layout, 2).value());
  for (size_t i = 0; i < layout.bytes_per_block(); ++i)
    kv.block_data(0)[i] = static_cast<uint8_t>(i * 7 + 1);
  kv.copy_block(0, 1, 3);
  for (int64_t l = 0; l < 2; ++l) {
    for (int64_t h = 0; h < 2; ++h) {
      EXPECT_EQ(std::memcmp(kv.keys(1, l, h), kv.keys(0, l, h), 3 * layout.key_row_bytes()), 0);
      EXPECT_EQ(std::memcmp(kv.values(1, l, h), kv.values(0, l, h), 3 * layout.value_row_bytes()),
                0);
      // Slot 3 stays as it was (zero).
      EXPECT_EQ(kv.keys(1, l, h)[3 * layout.key_row_bytes()], 0);
      EXPECT_EQ(kv.values(1, l, h)[3 * layout.value_row_bytes()], 0);
    }
  }
}

TEST(KvStorage, QuantizedTypesRefuseHeadsTheirBlocksDoNotTile) {
  Result<KvStorage> kv =
      KvStorage::create(KvLayout{2, 2, 48, 16, KvTypes{KvType::F16, KvType::Q4_0}}, 4);
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.error().message.find("q4_0"), std::string::npos) << kv.error().message;
  EXPECT_NE(kv.error().message.find("48"), std::string::npos) << kv.error().message;
  EXPECT_TRUE(KvStorage::create(KvLayout{2, 2, 48, 16, KvTypes{}}, 4).ok());
}

TEST(KvStorage, TypeNamesRoundTrip) {
  for (KvType type : {KvType::F16, KvType::F32, KvType::Q8_0, KvType::Q4_0}) {
    KvType parsed = KvType::F32;
    ASSERT_TRUE(parse_kv_type(kv_type_name(type), &parsed));
    EXPECT_EQ(parsed, type);
  }
  KvType unchanged = KvType::F16;
  EXPECT_FALSE(parse_kv_type("q4_1", &unchanged));
  EXPECT_EQ(kv_types_name(KvTypes::both(KvType::Q8_0)), "q8_0");
  EXPECT_EQ(kv_types_name(KvTypes{KvType::Q8_0, KvType::F16}), "K q8_0, V f16");
}

// Layers 0, 1 and 3 of 4 windowed: blocks hold layer 2, pages layers 0, 1, 3.
KvLayout windowed_layout() {
  KvLayout layout{4, 2, 32, 4, KvTypes{}};
  layout.windowed = {1, 1, 0, 1};
  return layout;
}

TEST(KvStorage, WindowedLayersLiveInPagesAndTheOthersInBlocks) {
  const KvLayout layout = windowed_layout();
  EXPECT_EQ(layout.n_windowed_layers(), 3);
  EXPECT_EQ(layout.bytes_per_block(), layout.bytes_per_token() / 4 * 4);  // 1 layer, 4 slots
  EXPECT_EQ(layout.bytes_per_page(), layout.bytes_per_token() / 4 * 3 * 4);
  EXPECT_FALSE(KvStorage::create(layout, 3).ok()) << "windowed layers without pages";
  KvStorage kv = std::move(KvStorage::create(layout, 3, 2).value());
  EXPECT_EQ(kv.bytes(), 3 * layout.bytes_per_block() + 2 * layout.bytes_per_page());
  EXPECT_EQ(kv.page_of(1), -1);
  kv.set_page(1, 1);
  kv.set_page(2, 0);
  // Layer 2 of block b is in block memory; the windowed layers of blocks 1 and 2 in their pages,
  // apart from each other and from the blocks.
  const uint8_t* block0 = kv.block_data(0);
  EXPECT_EQ(kv.keys(1, 2, 0), block0 + layout.bytes_per_block());
  std::set<const uint8_t*> starts;
  for (int32_t b : {1, 2})
    for (int64_t l : {0, 1, 3})
      for (int64_t h = 0; h < 2; ++h) {
        starts.insert(kv.keys(b, l, h));
        starts.insert(kv.values(b, l, h));
        const bool in_blocks =
            kv.keys(b, l, h) >= block0 && kv.keys(b, l, h) < block0 + 3 * layout.bytes_per_block();
        EXPECT_FALSE(in_blocks) << "block " << b << " layer " << l;
      }
  EXPECT_EQ(starts.size(), 2u * 3 * 2 * 2);
  // Page 0 comes first: block 2's first windowed layer starts it.
  EXPECT_LT(kv.keys(2, 0, 0), kv.keys(1, 0, 0));
  EXPECT_EQ(kv.keys(1, 0, 0) - kv.keys(2, 0, 0), static_cast<ptrdiff_t>(layout.bytes_per_page()));
}

TEST(KvStorage, CopyBlockCopiesTheWindowedLayersPageToPage) {
  const KvLayout layout = windowed_layout();
  KvStorage kv = std::move(KvStorage::create(layout, 2, 2).value());
  kv.set_page(0, 1);
  kv.set_page(1, 0);
  for (int64_t l = 0; l < 4; ++l) std::memset(kv.keys(0, l, 1), static_cast<int>(10 + l), 8);
  kv.copy_block(0, 1, 2);
  for (int64_t l = 0; l < 4; ++l) {
    EXPECT_EQ(kv.keys(1, l, 1)[7], 10 + l) << "layer " << l;
    EXPECT_EQ(kv.keys(1, l, 0)[0], 0) << "layer " << l;
  }
}

}  // namespace
}  // namespace trellis
