// `trellis bench kv-types` on the tiny test model: the baseline type against itself agrees
// exactly, a quantized type differs a little and takes fewer bytes per token, and bad options
// are refused.
#include "bench/kv_type_bench.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace trellis::bench {
namespace {

KvTypeBenchOptions tiny_options() {
  KvTypeBenchOptions options;
  options.model_path = testing::tiny_engine_model();
  options.engine.n_threads = 2;
  options.engine.block_size = 8;
  options.engine.n_ctx = 128;
  options.prompts = {"Once upon a time there was a cat.", "The dog ran to the park and back."};
  options.types = {KvTypes::both(KvType::F16), KvTypes::both(KvType::Q8_0),
                   KvTypes{KvType::F16, KvType::Q4_0}};
  options.n_gen = 12;
  options.pool_bytes = 1 << 20;
  return options;
}

TEST(KvTypeBenchTest, TheBaselineAgreesWithItselfAndQuantizedTypesDifferALittle) {
  Result<std::vector<KvTypeRow>> rows = run_kv_type_bench(tiny_options(), Observer{});
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), 3u);
  const KvTypeRow& same = (*rows)[0];
  EXPECT_EQ(same.max_abs_error, 0.0);
  EXPECT_EQ(same.n_top1_same, same.n_positions);
  EXPECT_EQ(same.n_greedy_agreed, same.n_greedy);
  EXPECT_EQ(same.n_greedy, 2 * 12);
  EXPECT_GT(same.n_positions, 2 * 8);  // every prompt position of both prompts
  for (size_t i = 1; i < 3; ++i) {
    const KvTypeRow& r = (*rows)[i];
    EXPECT_GT(r.max_abs_error, 0.0) << kv_types_name(r.types);
    EXPECT_GT(r.rms_error, 0.0) << kv_types_name(r.types);
    EXPECT_LE(r.rms_error, r.max_abs_error) << kv_types_name(r.types);
    EXPECT_LT(r.bytes_per_token, same.bytes_per_token) << kv_types_name(r.types);
    EXPECT_GT(r.pool_tokens, same.pool_tokens) << kv_types_name(r.types);
    EXPECT_EQ(r.n_positions, same.n_positions);
  }
  // 4 layers x 2 kv heads x (key row + value row) of 32-wide heads: f16 64 + 64 bytes, q8_0
  // 34 + 34, f16 keys and q4_0 values 64 + 18.
  EXPECT_EQ(same.bytes_per_token, 4u * 2 * 128);
  EXPECT_EQ((*rows)[1].bytes_per_token, 4u * 2 * 68);
  EXPECT_EQ((*rows)[2].bytes_per_token, 4u * 2 * 82);
}

TEST(KvTypeBenchTest, BadOptionsAreRefused) {
  KvTypeBenchOptions options = tiny_options();
  options.prompts.clear();
  EXPECT_FALSE(run_kv_type_bench(options, Observer{}).ok());
  options = tiny_options();
  options.n_gen = 0;
  EXPECT_FALSE(run_kv_type_bench(options, Observer{}).ok());
}

}  // namespace
}  // namespace trellis::bench
