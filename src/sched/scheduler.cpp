#include "sched/scheduler.h"

#include <algorithm>
#include <cassert>
#include <span>
#include <tuple>

namespace trellis {

Scheduler::Scheduler(PrefixCache& cache, SchedulerConfig config) : cache_(cache), config_(config) {
  assert(config.max_seqs >= 1 && config.max_batch_tokens >= config.max_seqs);
  // A step plans at most one chunk per running sequence: sized once, planning never allocates.
  const auto max_seqs = static_cast<size_t>(config.max_seqs);
  running_.reserve(max_seqs);
  preempted_this_step_.reserve(max_seqs);
  stalled_this_step_.reserve(max_seqs);
  plan_.chunks.reserve(max_seqs);
  plan_.admitted.reserve(max_seqs);
  plan_.preempted.reserve(max_seqs);
}

void Scheduler::enqueue(Sequence* seq) {
  seq->state = SequenceState::WAITING;
  waiting_.push_back(seq);
}

void Scheduler::wait_for_kv(Sequence* seq) {
  assert(seq->state == SequenceState::WAITING);
  seq->state = SequenceState::WAITING_FOR_KV;
}

void Scheduler::kv_ready(Sequence* seq) {
  assert(seq->state == SequenceState::WAITING_FOR_KV);
  seq->state = SequenceState::WAITING;
}

void Scheduler::add_running(Sequence* seq) {
  seq->admitted_once = true;
  start_running(seq);
}

void Scheduler::start_running(Sequence* seq) {
  seq->kv.reserve_table(seq->max_size);
  seq->state = SequenceState::RUNNING;
  running_.push_back(seq);
}

void Scheduler::remove(Sequence* seq) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) {
    release(seq);
    running_.erase(it);
  } else if (auto w = std::find(waiting_.begin(), waiting_.end(), seq); w != waiting_.end()) {
    waiting_.erase(w);
  }
  seq->state = SequenceState::FINISHED;
}

void Scheduler::release(Sequence* seq) {
  cache_.insert(seq->kv,
                std::span<const TokenId>(seq->tokens).first(static_cast<size_t>(seq->n_computed)),
                /*finished=*/true);
  seq->n_blocks_allocated += seq->kv.n_blocks_allocated();
  seq->n_blocks_acquired += seq->kv.n_blocks_acquired();
  seq->kv.reset();
}

void Scheduler::preempt(Sequence* seq) {
  release(seq);
  seq->n_computed = 0;
  seq->state = SequenceState::WAITING;
  ++seq->n_preemptions;
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  waiting_.push_back(seq);
  preempted_this_step_.push_back(seq);
}

void Scheduler::grow_running() {
  // Oldest first: the newest sequences give way when blocks run out. Preempting the newest
  // either frees room for seq (then retry) or is seq itself (then index i holds the next one).
  // Sequences in flight neither grow nor give way.
  size_t i = 0;
  while (i < running_.size()) {
    Sequence* seq = running_[i];
    if (seq->in_flight) {
      ++i;
      continue;
    }
    if (cache_.reserve(seq->kv, seq->size()).ok()) {
      grow_for_draft(seq);
      ++i;
      continue;
    }
    auto victim = std::find_if(running_.rbegin(), running_.rend(),
                               [](const Sequence* s) { return !s->in_flight; });
    if (*victim == seq && std::any_of(running_.begin(), running_.end(),
                                      [](const Sequence* s) { return s->in_flight; })) {
      stalled_this_step_.push_back(seq);  // the in-flight ones will finish or shrink first
      ++i;
      continue;
    }
    assert(running_.size() > 1 && "a lone sequence always fits the pool");
    preempt(*victim);
  }
}

void Scheduler::grow_for_draft(Sequence* seq) {
  if (seq->draft.empty()) return;
  if (seq->n_pending() != 1) {  // drafts follow a decode token only
    seq->draft.clear();
    return;
  }
  // Within the size the block table was reserved for (the context and max_tokens bound it).
  int32_t n_draft = static_cast<int32_t>(seq->draft.size());
  if (seq->max_size > 0) n_draft = std::min(n_draft, seq->max_size - seq->size());
  if (n_draft > 0 && !cache_.reserve(seq->kv, seq->size() + n_draft).ok())
    n_draft = seq->kv.capacity_tokens() - seq->size();  // what its last block still holds
  seq->draft.resize(static_cast<size_t>(std::max(0, n_draft)));
}

void Scheduler::add_drafts(StepPlan& plan, int32_t& budget) {
  for (ScheduledChunk& chunk : plan.chunks) {
    if (budget <= 0) return;
    const int32_t n = std::min(static_cast<int32_t>(chunk.seq->draft.size()), budget);
    if (n == 0 || chunk.n_tokens != 1) continue;
    chunk.n_tokens += n;
    chunk.n_draft = n;
    budget -= n;
  }
}

bool Scheduler::schedulable(const Sequence* seq) const {
  return !seq->in_flight && std::find(stalled_this_step_.begin(), stalled_this_step_.end(), seq) ==
                                stalled_this_step_.end();
}

void Scheduler::order_waiting() {
  if (config_.policy == SchedulePolicy::FCFS) {
    std::stable_sort(waiting_.begin(), waiting_.end(),
                     [](const Sequence* a, const Sequence* b) { return a->id < b->id; });
    return;
  }
  // LPM with aging. Key: (not aged, aged ? id : -cached length, id), smallest first.
  std::vector<WaitingKey>& keyed = waiting_keys_;
  keyed.clear();
  for (Sequence* seq : waiting_) {
    const bool aged = seq->n_steps_waiting >= config_.max_wait_steps;
    const int64_t second = aged ? static_cast<int64_t>(seq->id) : -int64_t{match(*seq).n_tokens};
    keyed.push_back({{!aged, second, seq->id}, seq});
  }
  std::sort(keyed.begin(), keyed.end(),
            [](const WaitingKey& a, const WaitingKey& b) { return a.key < b.key; });
  for (size_t i = 0; i < keyed.size(); ++i) waiting_[i] = keyed[i].seq;
}

PrefixMatch Scheduler::match(const Sequence& seq) const {
  if (seq.wants_prompt_logits) return PrefixMatch{};  // cached positions would have no logits
  return cache_.match(seq.cache_namespace, seq.tokens);
}

Sequence* Scheduler::next_admission() {
  if (waiting_.empty() || static_cast<int32_t>(running_.size()) >= config_.max_seqs) {
    return nullptr;
  }
  order_waiting();
  Sequence* first = waiting_.front();
  return first->state == SequenceState::WAITING ? first : nullptr;
}

bool Scheduler::idle_until_kv() {
  if (!running_.empty() || waiting_.empty()) return false;
  order_waiting();
  return waiting_.front()->state == SequenceState::WAITING_FOR_KV;
}

void Scheduler::admit_waiting(StepPlan& plan, int32_t& budget) {
  const bool can_admit =
      !waiting_.empty() && static_cast<int32_t>(running_.size()) < config_.max_seqs && budget > 0;
  if (!can_admit) return;  // nothing to order either: the order is only used to admit
  order_waiting();
  size_t i = 0;
  while (i < waiting_.size() && static_cast<int32_t>(running_.size()) < config_.max_seqs &&
         budget > 0) {
    Sequence* seq = waiting_[i];
    if (seq->state == SequenceState::WAITING_FOR_KV) break;  // it keeps its turn (sequence.h)
    // Just preempted for lack of blocks: readmitting it now would only thrash.
    if (std::find(preempted_this_step_.begin(), preempted_this_step_.end(), seq) !=
        preempted_this_step_.end()) {
      ++i;
      continue;
    }
    const PrefixMatch matched = match(*seq);
    Result<SequenceKv> kv = cache_.admit(seq->cache_namespace, matched, seq->size());
    if (!kv.ok()) break;  // no room now: keep the order, try again next step
    seq->kv = std::move(kv).value();
    seq->n_computed = matched.n_tokens;
    if (!seq->admitted_once) seq->n_cached_tokens = matched.n_tokens;
    seq->admitted_once = true;
    start_running(seq);
    waiting_.erase(waiting_.begin() + static_cast<ptrdiff_t>(i));
    plan.admitted.push_back(seq);
    const int32_t n = std::min(seq->n_pending(), budget);
    plan.chunks.push_back({seq, seq->n_computed, n});
    budget -= n;
  }
}

const StepPlan& Scheduler::plan() {
  ++n_steps_;
  preempted_this_step_.clear();
  stalled_this_step_.clear();
  StepPlan& plan = plan_;
  plan.chunks.clear();
  plan.admitted.clear();
  plan.preempted.clear();
  plan.n_tokens = 0;
  grow_running();
  int32_t budget = config_.max_batch_tokens;
  // Decode tokens first (one per sequence, for this step's group), so that prefill never stalls
  // them ...
  const auto n_running = static_cast<int32_t>(running_.size());
  int32_t group = (n_running + config_.decode_groups - 1) / config_.decode_groups;
  for (Sequence* seq : running_) {
    if (seq->n_pending() == 1 && budget > 0 && group > 0 && schedulable(seq)) {
      plan.chunks.push_back({seq, seq->n_computed, 1});
      --budget;
      --group;
    }
  }
  // ... and their drafts once every decode token has its row ...
  add_drafts(plan, budget);
  // ... then the rest of prompts being prefilled, oldest first, in chunks.
  for (Sequence* seq : running_) {
    if (seq->n_pending() > 1 && budget > 0 && schedulable(seq)) {
      const int32_t n = std::min(seq->n_pending(), budget);
      plan.chunks.push_back({seq, seq->n_computed, n});
      budget -= n;
    }
  }
  admit_waiting(plan, budget);
  for (Sequence* seq : waiting_) ++seq->n_steps_waiting;
  plan.preempted.assign(preempted_this_step_.begin(), preempted_this_step_.end());
  plan.n_tokens = config_.max_batch_tokens - budget;
  // Sliding-window layers: each chunk's window pages are held, the older ones let go.
  for (const ScheduledChunk& chunk : plan.chunks)
    cache_.prepare_window(chunk.seq->kv, chunk.begin, chunk.begin + chunk.n_tokens);
  return plan;
}

void Scheduler::complete(const StepPlan& plan) {
  for (const ScheduledChunk& chunk : plan.chunks) {
    Sequence* seq = chunk.seq;
    seq->n_computed += chunk.n_known();
    if (chunk.n_known() > 1) {  // a prefill chunk: share its whole blocks with later requests now
      cache_.insert(
          seq->kv,
          std::span<const TokenId>(seq->tokens).first(static_cast<size_t>(seq->n_computed)),
          /*finished=*/false);
    }
  }
}

}  // namespace trellis
