// Scheduler: continuous batching with chunked prefill, admission order (LPM, FCFS, aging) and
// preemption, on small pools of 4-token blocks without a model: a "step" appends one token to
// every sequence whose chunk reached its end, as sampling would.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <random>

namespace trellis {
namespace {

using Tokens = std::vector<TokenId>;
constexpr int32_t B = 4;

Tokens range(TokenId first, int32_t n) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

struct Harness {
  BlockPool pool;
  KvStorage kv;
  PrefixCache cache;
  Scheduler scheduler;
  std::vector<std::unique_ptr<Sequence>> seqs;
  uint64_t next_id = 1;

  Harness(int32_t n_blocks, SchedulerConfig config)
      : pool(n_blocks),
        kv(std::move(KvStorage::create(KvLayout{1, 1, 1, B, KvTypes::both(KvType::F32)}, n_blocks).value())),
        cache(pool, kv, PrefixCacheConfig{}),
        scheduler(cache, config) {}

  Sequence* add(Tokens tokens, std::string ns = "") {
    auto seq = std::make_unique<Sequence>();
    seq->id = next_id++;
    seq->cache_namespace = std::move(ns);
    seq->n_prompt = static_cast<int32_t>(tokens.size());
    seq->tokens = std::move(tokens);
    scheduler.enqueue(seq.get());
    seqs.push_back(std::move(seq));
    return seqs.back().get();
  }

  // One step: plan, "run", append a token where logits came out. Returns the plan's chunks as
  // (sequence id, begin, n) for exact checks.
  std::vector<std::tuple<uint64_t, int32_t, int32_t>> step() {
    StepPlan plan = scheduler.plan();
    std::vector<std::tuple<uint64_t, int32_t, int32_t>> chunks;
    for (const ScheduledChunk& c : plan.chunks) {
      EXPECT_LE(c.begin + c.n_tokens, c.seq->kv.capacity_tokens());
      chunks.emplace_back(c.seq->id, c.begin, c.n_tokens);
    }
    EXPECT_LE(plan.n_tokens, scheduler.config().max_batch_tokens);
    scheduler.complete(plan);
    for (const ScheduledChunk& c : plan.chunks) {
      if (c.wants_logits()) c.seq->tokens.push_back(9000 + static_cast<TokenId>(c.seq->size()));
    }
    Status ok = cache.check_invariants();
    EXPECT_TRUE(ok.ok()) << (ok.ok() ? "" : ok.error().message);
    return chunks;
  }
};

using Chunks = std::vector<std::tuple<uint64_t, int32_t, int32_t>>;

// A sequence that wants its prompt logits is computed from position 0 although its prompt is
// cached, and every row of its chunks yields logits; the others reuse the cache as usual.
TEST(SchedulerTest, PromptLogitsSkipTheCacheAndWantEveryRow) {
  Harness h(20, SchedulerConfig{8, 4, SchedulePolicy::FCFS, 64});
  h.add(range(100, 9));
  h.step();
  h.step();  // the first sequence is prefilled and has decoded: its 8 first tokens are cached
  h.scheduler.remove(h.seqs[0].get());
  Sequence* plain = h.add(range(100, 9));
  Sequence* logits = h.add(range(100, 9));
  logits->wants_prompt_logits = true;
  StepPlan plan = h.scheduler.plan();
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].seq, plain);
  EXPECT_EQ(plan.chunks[0].begin, 8);  // the cache served [0, 8)
  EXPECT_EQ(plan.chunks[0].n_logit_rows(), 1);
  EXPECT_EQ(plan.chunks[1].seq, logits);
  EXPECT_EQ(plan.chunks[1].begin, 0);
  EXPECT_EQ(plan.chunks[1].n_tokens, 7);  // the budget's rest: no logits to sample from yet
  EXPECT_FALSE(plan.chunks[1].wants_logits());
  EXPECT_EQ(plan.chunks[1].n_logit_rows(), 7);
  EXPECT_EQ(logits->n_cached_tokens, 0);
  EXPECT_EQ(plain->n_cached_tokens, 8);
  h.scheduler.complete(plan);
}

TEST(SchedulerTest, ChunkedPrefillThenDecodeTokensFirst) {
  Harness h(20, SchedulerConfig{8, 4, SchedulePolicy::FCFS, 64});
  Sequence* a = h.add(range(100, 10));
  Sequence* b = h.add(range(200, 6));
  EXPECT_EQ(h.step(), (Chunks{{1, 0, 8}}));             // A's first chunk fills the budget
  EXPECT_EQ(h.step(), (Chunks{{1, 8, 2}, {2, 0, 6}}));  // A's rest, then B is admitted
  EXPECT_EQ(a->size(), 11);                             // both reached their ends: sampled
  EXPECT_EQ(b->size(), 7);
  EXPECT_EQ(h.step(), (Chunks{{1, 10, 1}, {2, 6, 1}}));  // decode steps, batched
  Sequence* c = h.add(range(300, 12));
  // Decode tokens go first; C's prefill gets what is left of the budget.
  EXPECT_EQ(h.step(), (Chunks{{1, 11, 1}, {2, 7, 1}, {3, 0, 6}}));
  EXPECT_EQ(h.step(), (Chunks{{1, 12, 1}, {2, 8, 1}, {3, 6, 6}}));
  EXPECT_EQ(c->size(), 13);
  h.scheduler.remove(a);
  h.scheduler.remove(b);
  h.scheduler.remove(c);
  EXPECT_EQ(h.pool.n_in_use(), 0);
}

TEST(SchedulerTest, MaxSeqsBoundsTheRunningSet) {
  Harness h(30, SchedulerConfig{64, 2, SchedulePolicy::FCFS, 64});
  h.add(range(100, 4));
  h.add(range(200, 4));
  h.add(range(300, 4));
  EXPECT_EQ(h.step(), (Chunks{{1, 0, 4}, {2, 0, 4}}));
  EXPECT_EQ(h.scheduler.waiting().size(), 1u);
  h.scheduler.remove(h.seqs[0].get());
  EXPECT_EQ(h.step(), (Chunks{{2, 4, 1}, {3, 0, 4}}));
}

// Caches `prefix` by running it to completion in its own sequence.
void warm(Harness& h, const Tokens& prefix) {
  Sequence* w = h.add(prefix);
  while (w->n_computed < static_cast<int32_t>(prefix.size())) h.step();
  h.scheduler.remove(w);
}

TEST(SchedulerTest, LpmAdmitsTheLongestCachedPrefixFirstFcfsBySubmission) {
  for (SchedulePolicy policy : {SchedulePolicy::LPM, SchedulePolicy::FCFS}) {
    Harness h(30, SchedulerConfig{64, 1, policy, 64});
    warm(h, range(500, 12));
    Tokens cached = range(500, 12);
    cached.push_back(7);
    Sequence* cold = h.add(range(100, 8));  // older, nothing cached
    Sequence* hot = h.add(cached);          // newer, 12 tokens cached
    h.step();
    const Sequence* first = policy == SchedulePolicy::LPM ? hot : cold;
    EXPECT_EQ(first->state, SequenceState::RUNNING) << static_cast<int>(policy);
    if (policy == SchedulePolicy::LPM) {
      EXPECT_EQ(hot->n_cached_tokens, 12);
    }
  }
}

TEST(SchedulerTest, AgingBoundsTheWaitUnderLpm) {
  Harness h(60, SchedulerConfig{64, 1, SchedulePolicy::LPM, 3});
  warm(h, range(500, 12));
  Tokens cached = range(500, 12);
  Sequence* cold = h.add(range(100, 8));
  // A stream of requests that hit the cache would starve `cold` without aging.
  int steps = 0;
  while (cold->state == SequenceState::WAITING && steps < 50) {
    Tokens t = cached;
    t.push_back(static_cast<TokenId>(1000 + steps));
    Sequence* hot = h.add(t);
    h.step();
    ++steps;
    for (const Sequence* s : h.scheduler.running()) {
      if (s != cold) h.scheduler.remove(const_cast<Sequence*>(s));
    }
    (void)hot;
  }
  EXPECT_EQ(cold->state, SequenceState::RUNNING);
  EXPECT_LE(steps, 5);  // admitted once it had waited max_wait_steps
}

TEST(SchedulerTest, PreemptsTheNewestWhenBlocksRunOut) {
  // 9 blocks, context of 8 blocks: two sequences of 14 tokens growing to 30 cannot both fit.
  Harness h(9, SchedulerConfig{64, 4, SchedulePolicy::FCFS, 64});
  Sequence* a = h.add(range(100, 14));
  Sequence* b = h.add(range(200, 14));
  int preemptions = 0;
  for (int step = 0; step < 200 && (a->size() < 30 || b->size() < 30); ++step) {
    StepPlan plan = h.scheduler.plan();
    preemptions += static_cast<int>(plan.preempted.size());
    for (Sequence* p : plan.preempted) EXPECT_EQ(p, b) << "the newest gives way";
    h.scheduler.complete(plan);
    for (const ScheduledChunk& c : plan.chunks) {
      if (c.wants_logits() && c.seq->size() < 30) c.seq->tokens.push_back(c.seq->size());
    }
    ASSERT_TRUE(h.cache.check_invariants().ok());
    if (a->size() == 30 && a->state == SequenceState::RUNNING && a->n_computed == a->size() - 1) {
      h.scheduler.remove(a);  // A is done: B can finish
    }
  }
  EXPECT_EQ(b->size(), 30);
  // Once: with B gone, A alone fits (8 blocks of 9).
  EXPECT_EQ(preemptions, 1);
  EXPECT_EQ(b->n_preemptions, 1);
  // B's tokens were cached when it was preempted, then evicted for A's growth (LRU): B was
  // recomputed from scratch, and A's growth never failed. Eviction takes whole leaves: B's leaf
  // of 4 blocks when A needs its sixth block, then A's leaf of 8 blocks (cached when it was
  // removed) when B, regrowing from nothing, needs its second.
  EXPECT_EQ(h.pool.n_evicted(), 4 + 8);
  h.scheduler.remove(b);
  h.cache.flush();
  EXPECT_EQ(h.pool.n_free(), h.pool.n_total());
}

TEST(SchedulerTest, RandomWorkloadsAlwaysFinishWithoutLeaks) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int32_t n_blocks = std::uniform_int_distribution<int32_t>(6, 16)(rng);
    const int32_t ctx = (n_blocks - 1) * B;
    SchedulerConfig config{std::uniform_int_distribution<int32_t>(4, 16)(rng),
                           std::uniform_int_distribution<int32_t>(1, 4)(rng),
                           trial % 2 ? SchedulePolicy::LPM : SchedulePolicy::FCFS, 5};
    Harness h(n_blocks, config);
    std::vector<int32_t> target;
    for (int i = 0; i < 12; ++i) {
      const int32_t len = std::uniform_int_distribution<int32_t>(1, ctx - 1)(rng);
      Tokens t = range(static_cast<TokenId>(100 * (i % 3)), len);  // shared prefixes
      t.back() = 7000 + i;
      h.add(t);
      target.push_back(std::uniform_int_distribution<int32_t>(len + 1, ctx)(rng));
    }
    int steps = 0;
    size_t done = 0;
    while (done < h.seqs.size() && steps < 5000) {
      StepPlan plan = h.scheduler.plan();
      h.scheduler.complete(plan);
      for (const ScheduledChunk& c : plan.chunks) {
        if (c.wants_logits()) c.seq->tokens.push_back(5);
      }
      for (size_t i = 0; i < h.seqs.size(); ++i) {
        Sequence* s = h.seqs[i].get();
        if (s->state == SequenceState::RUNNING && s->size() >= target[i] && s->n_pending() == 1) {
          h.scheduler.remove(s);
          ++done;
        }
      }
      ASSERT_TRUE(h.cache.check_invariants().ok());
      ++steps;
    }
    EXPECT_EQ(done, h.seqs.size()) << "trial " << trial << " stuck after " << steps << " steps";
    EXPECT_EQ(h.pool.n_in_use(), 0);
    h.cache.flush();
    EXPECT_EQ(h.pool.n_free(), h.pool.n_total());
  }
}

}  // namespace
}  // namespace trellis

namespace trellis {
namespace {

// With decode_groups 2 (a two-stage pipeline), a step decodes half the running sequences; the
// sequences in flight are left out (no tokens, no growth, never preempted) until they are back.
TEST(SchedulerTest, InFlightSequencesSitOutAndGroupsTakeTurns) {
  SchedulerConfig config{16, 4, SchedulePolicy::FCFS, 64};
  config.decode_groups = 2;
  Harness h(40, config);
  for (int i = 0; i < 4; ++i) h.add(range(100 * (i + 1), 3));
  h.step();  // all four prefilled (their first tokens appended)
  StepPlan first = h.scheduler.plan();
  ASSERT_EQ(first.chunks.size(), 2u);
  for (const ScheduledChunk& c : first.chunks) c.seq->in_flight = true;
  StepPlan second = h.scheduler.plan();
  ASSERT_EQ(second.chunks.size(), 2u);
  for (const ScheduledChunk& c : second.chunks) {
    EXPECT_FALSE(c.seq->in_flight);
    for (const ScheduledChunk& f : first.chunks) EXPECT_NE(c.seq, f.seq);
    c.seq->in_flight = true;
  }
  EXPECT_TRUE(h.scheduler.plan().empty());  // everyone is in flight
  for (const ScheduledChunk& c : first.chunks) c.seq->in_flight = false;
  h.scheduler.complete(first);
  StepPlan third = h.scheduler.plan();
  ASSERT_EQ(third.chunks.size(), 0u);  // the first group has no new token yet (not sampled)
}

// A sequence that cannot grow while only in-flight sequences could give way waits instead of
// preempting one of them.
TEST(SchedulerTest, InFlightSequencesAreNeverPreempted) {
  Harness h(2, SchedulerConfig{8, 2, SchedulePolicy::FCFS, 64});  // 2 blocks of 4 tokens
  Sequence* a = h.add(range(100, 4));
  Sequence* b = h.add(range(200, 4));
  h.step();  // both prefilled into a block each; the tokens appended need a block more each
  a->in_flight = true;  // `a` has a step in flight
  const StepPlan& waiting = h.scheduler.plan();
  EXPECT_TRUE(waiting.empty());  // b cannot grow and does not take a's blocks: it waits
  EXPECT_TRUE(waiting.preempted.empty());
  EXPECT_EQ(b->state, SequenceState::RUNNING);
  a->in_flight = false;  // a is back: now the newest (b) gives way as usual
  const StepPlan& after = h.scheduler.plan();
  ASSERT_EQ(after.preempted.size(), 1u);
  EXPECT_EQ(after.preempted[0], b);
  ASSERT_EQ(after.chunks.size(), 1u);
  EXPECT_EQ(after.chunks[0].seq, a);
}

// A sequence waiting for its KV (read back from the disk tier) keeps its turn: nothing after it
// in policy order is admitted until it has its KV, while running sequences go on.
TEST(SchedulerTest, ASequenceWaitingForKvKeepsItsTurn) {
  Harness h(40, SchedulerConfig{64, 4, SchedulePolicy::FCFS, 64});
  Sequence* running = h.add(range(100, 5));
  EXPECT_EQ(h.step(), (Chunks{{1, 0, 5}}));
  Sequence* loading = h.add(range(200, 6));
  Sequence* behind = h.add(range(300, 7));
  h.scheduler.wait_for_kv(loading);
  EXPECT_EQ(loading->state, SequenceState::WAITING_FOR_KV);
  EXPECT_EQ(h.scheduler.next_admission(), nullptr);
  EXPECT_FALSE(h.scheduler.idle_until_kv());  // one runs
  EXPECT_EQ(h.step(), (Chunks{{1, 5, 1}}));   // the running one decodes; no one is admitted
  EXPECT_EQ(behind->state, SequenceState::WAITING);
  h.scheduler.remove(running);
  EXPECT_TRUE(h.scheduler.idle_until_kv());
  EXPECT_TRUE(h.step().empty());
  h.scheduler.kv_ready(loading);
  EXPECT_FALSE(h.scheduler.idle_until_kv());
  EXPECT_EQ(h.scheduler.next_admission(), loading);
  EXPECT_EQ(h.step(), (Chunks{{2, 0, 6}, {3, 0, 7}}));
  EXPECT_EQ(loading->state, SequenceState::RUNNING);
  EXPECT_EQ(behind->state, SequenceState::RUNNING);
}

}  // namespace
}  // namespace trellis
