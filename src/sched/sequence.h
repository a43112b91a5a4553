// The scheduler's view of one request: its tokens, how far their KV is computed, its blocks.
//
//   tokens:  | prompt ............................ | generated ...... |
//            [0, n_computed): KV written           [n_computed, size): still to run
//
// Prefill and decode are the same thing here: each step runs some of the tokens not yet
// computed; a step that reaches the last token produces logits, and sampling appends a token. A
// preempted sequence keeps its tokens, drops its blocks (after caching them) and is recomputed
// from the cache when readmitted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/token_id.h"
#include "prefix/prefix_cache.h"

namespace trellis {

// A sequence's life:
//
//   enqueue -> WAITING <-> WAITING_FOR_KV      (its prompt's KV is being read, from the disk tier)
//                 |  admit   ^ preempt
//                 v          |
//              RUNNING ------+ -> FINISHED      (or FINISHED from any state: cancelled, failed)
//
// A WAITING_FOR_KV sequence keeps its place in the admission order but cannot be admitted, and
// no sequence after it is admitted either: no later request takes its slot and evicts what is
// being read for it. Running sequences go on meanwhile.
enum class SequenceState { WAITING, WAITING_FOR_KV, RUNNING, FINISHED };

struct Sequence {
  uint64_t id = 0;  // submission order: FCFS order, and the newest is preempted first
  std::string cache_namespace;
  std::vector<TokenId> tokens;
  int32_t n_prompt = 0;
  // The most tokens the sequence can reach (prompt + max_tokens, within the context); 0: unknown.
  // Admission sizes the block table for it, so that decoding never grows the table's memory.
  int32_t max_size = 0;
  int32_t n_computed = 0;
  SequenceState state = SequenceState::WAITING;
  SequenceKv kv;                // empty unless RUNNING
  int64_t n_steps_waiting = 0;  // steps spent waiting since submission (aging); kept on preemption
  int32_t n_cached_tokens = 0;  // prompt tokens served by the cache at first admission
  int32_t n_blocks_allocated = 0;  // over all admissions, forks and growth
  int32_t n_blocks_acquired = 0;
  int32_t n_preemptions = 0;
  bool admitted_once = false;
  // Every prompt position's logits are wanted: the prompt is computed from position 0 (the prefix
  // cache is not matched) and every row of its chunks produces logits.
  bool wants_prompt_logits = false;
  // A step with this sequence's tokens was sent down a pipeline and its logits have not come back:
  // the scheduler leaves it out of the next steps (no tokens, no growth, no preemption) until then.
  bool in_flight = false;
  // Tokens guessed to follow `tokens` (speculative decoding), set by the owner before plan(): a
  // decode step then computes them after the last token, and the owner keeps those its logits
  // confirm. The scheduler shortens it to what the budget and the blocks allow.
  std::vector<TokenId> draft;

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  int32_t n_pending() const { return size() - n_computed; }
};

}  // namespace trellis
