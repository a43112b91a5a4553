// Sampler::sample() does not allocate after construction, whatever the parameters. Global operator
// new is replaced in this binary only, to count allocations.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "sample/rng.h"
#include "sample/sampler.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace trellis {
namespace {

TEST(SamplerAllocTest, SampleDoesNotAllocate) {
  const int32_t vocab = 5000;
  std::vector<float> logits(vocab);
  Rng rng(1);
  for (float& x : logits) x = static_cast<float>(rng.next_double() * 10.0);
  std::vector<TokenId> history;
  for (int i = 0; i < 300; ++i) history.push_back(static_cast<TokenId>(rng.next_u64() % vocab));

  std::vector<SamplingParams> all(5);
  all[0].temperature = 0.0f;
  all[0].repetition_penalty = 1.1f;
  all[1].top_k = 40;
  all[2].top_p = 0.9f;  // large nucleus: several sorting chunks
  all[3].min_p = 0.05f;
  all[3].frequency_penalty = 0.5f;
  all[3].penalty_last_n = -1;
  all[4].top_k = 100;
  all[4].top_p = 0.95f;
  all[4].min_p = 0.01f;
  all[4].presence_penalty = 0.5f;
  for (const SamplingParams& params : all) {
    Result<trellis::Sampler> sampler = Sampler::create(params, vocab);
    ASSERT_TRUE(sampler.ok());
    const long before = g_allocations.load();
    for (int i = 0; i < 20; ++i) (void)sampler->sample(logits, history);
    EXPECT_EQ(g_allocations.load() - before, 0);
  }
}

}  // namespace
}  // namespace trellis
