// Decides, step by step, which tokens of which sequences the next forward pass runs: the decode
// tokens of every running sequence, then prefill chunks, up to a token budget (continuous
// batching with chunked prefill). Admits waiting sequences in policy order while blocks and
// budget allow, and preempts the newest running sequence when a decode finds no block.
//
// Admission order:
//   LPM  (default) longest cached prefix first (matches stay inside each sequence's namespace),
//        ties by submission order; a sequence that has waited max_wait_steps steps goes before
//        every younger one, so nobody starves.
//   FCFS submission order.
// A preempted sequence goes back to the waiting queue keeping its age and its tokens; its
// computed KV is cached first, so readmission mostly matches it again.
//
// Memory: admission allocates blocks for a sequence's known tokens at once (PrefixCache::admit,
// evicting cache leaves); decoding grows one block at a time. When a running sequence cannot
// grow, cache leaves are evicted first, then the newest running sequence is preempted, never the
// last one: since the pool holds one context plus a block, a lone sequence always fits, so the
// scheduler cannot deadlock.
//
// Sequences in flight (see Sequence::in_flight) are left out of planning altogether; when a
// sequence cannot grow and only in-flight sequences could give way, it waits a step instead.
//
// Not thread-safe: one owner (the engine loop). Sequences are owned by the caller and must
// outlive their time in the scheduler.
#pragma once

#include <cstdint>
#include <tuple>
#include <vector>

#include "prefix/prefix_cache.h"
#include "sched/sequence.h"

namespace trellis {

enum class SchedulePolicy { LPM, FCFS };

struct SchedulerConfig {
  int32_t max_batch_tokens = 256;  // tokens per forward pass (decode tokens + prefill chunks)
  int32_t max_seqs = 16;           // running sequences
  SchedulePolicy policy = SchedulePolicy::LPM;
  int64_t max_wait_steps = 64;  // aging bound for LPM
  // Running sequences are decoded in this many turns: a step takes the decode tokens of at most
  // 1 / decode_groups of them, so that a pipeline of that many stages has a group in each stage
  // (the others are in flight). 1: every running sequence decodes every step.
  int32_t decode_groups = 1;
};

// Positions [begin, begin + n_tokens) of one sequence in the next forward pass: its tokens
// [begin, begin + n_tokens - n_draft), then the first n_draft tokens of its draft.
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int32_t begin = 0;
  int32_t n_tokens = 0;
  int32_t n_draft = 0;  // a decode chunk's guessed tokens, verified by its logit rows
  // The sequence's own tokens in the chunk.
  int32_t n_known() const { return n_tokens - n_draft; }
  // The chunk reaches the sequence's last token, whose logits sample the next one.
  bool wants_logits() const { return begin + n_known() == seq->size(); }
  // Rows whose logits the forward pass returns: the last n_logit_rows() of the chunk (all of them
  // when the sequence wants its prompt logits, else the last one and the draft's when
  // wants_logits()).
  int32_t n_logit_rows() const {
    if (seq->wants_prompt_logits) return n_tokens;
    return wants_logits() ? 1 + n_draft : 0;
  }
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;
  std::vector<Sequence*> admitted;   // newly admitted this step
  std::vector<Sequence*> preempted;  // sent back to waiting this step
  int32_t n_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  // Precondition: config.max_batch_tokens >= config.max_seqs >= 1.
  Scheduler(PrefixCache& cache, SchedulerConfig config);

  const SchedulerConfig& config() const { return config_; }

  // Queues a new sequence (state WAITING, no blocks).
  void enqueue(Sequence* seq);
  // A waiting sequence waits for KV being read for it (WAITING -> WAITING_FOR_KV), then has it
  // (back to WAITING); see sequence.h.
  void wait_for_kv(Sequence* seq);
  void kv_ready(Sequence* seq);
  // Adds a sequence that already holds its blocks (a fork of a running one) to the running set.
  void add_running(Sequence* seq);
  // Takes a sequence out of the scheduler (finished or cancelled; a sequence never added is
  // fine too). When it runs, its computed tokens are cached and its blocks released.
  void remove(Sequence* seq);

  // Plans the next step (admitting and preempting as needed). Empty when nothing can run.
  // The plan is the scheduler's own, reused step after step so that planning a step of running
  // sequences allocates nothing: it stays valid until the next plan().
  const StepPlan& plan();
  // Records that the planned chunks ran: advances each sequence's n_computed past its own tokens
  // (the owner advances it over the draft tokens it keeps).
  void complete(const StepPlan& plan);

  const std::vector<Sequence*>& running() const { return running_; }
  const std::vector<Sequence*>& waiting() const { return waiting_; }
  // The waiting sequence the next step would try to admit first (policy order), or null when
  // none can be admitted now (no free slot, nothing waiting, or the first waits for KV).
  Sequence* next_admission();
  // Nothing can run until KV being read arrives: nothing runs and the first waiting sequence in
  // policy order waits for KV.
  bool idle_until_kv();
  int64_t n_steps() const { return n_steps_; }

 private:
  // Makes room for the running sequences' next tokens; preempts the newest when needed.
  void grow_running();
  // Makes room for a decoding sequence's draft too, evicting cache leaves but preempting nobody:
  // the draft is shortened to the room there is.
  void grow_for_draft(Sequence* seq);
  // Extends this step's decode chunks by their sequences' drafts, within the budget.
  void add_drafts(StepPlan& plan, int32_t& budget);
  void admit_waiting(StepPlan& plan, int32_t& budget);
  // Sorts waiting_ by policy. LPM matches every waiting sequence against the cache, so it runs
  // only when a sequence can actually be admitted.
  void order_waiting();
  // Marks seq running with the blocks it holds, its block table sized for seq->max_size.
  void start_running(Sequence* seq);
  // The cached prefix that admitting seq would reuse (nothing when it wants its prompt logits).
  PrefixMatch match(const Sequence& seq) const;
  void preempt(Sequence* seq);
  // Neither in flight nor stalled this step.
  bool schedulable(const Sequence* seq) const;
  // Caches seq's computed tokens and releases its blocks, folding its block counters in.
  void release(Sequence* seq);

  PrefixCache& cache_;
  SchedulerConfig config_;
  std::vector<Sequence*> running_;  // admission order
  std::vector<Sequence*> waiting_;  // policy order after order_waiting()
  std::vector<Sequence*> preempted_this_step_;
  std::vector<Sequence*> stalled_this_step_;  // could not grow: no tokens this step
  // Reused step after step (their capacity is kept): the plan and LPM's sort keys.
  StepPlan plan_;
  struct WaitingKey {
    std::tuple<bool, int64_t, uint64_t> key;  // (not aged, aged ? id : -cached length, id)
    Sequence* seq;
  };
  std::vector<WaitingKey> waiting_keys_;
  int64_t n_steps_ = 0;
};

}  // namespace trellis
