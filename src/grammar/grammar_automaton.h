// Runs a Grammar over bytes as a pushdown automaton whose configurations are interned, so that a
// configuration seen before costs one table lookup per byte (a lazily built DFA over the stacks).
//
// A stack is a chain of frames (position in `elements`, parent frame), interned so that equal
// stacks are one id; its top frame always sits on a BYTES element. A state is a set of stacks (the
// grammar may be ambiguous) plus whether the input so far is a complete sentence of root. Rule
// references in tail position reuse the caller's frame, so `x*` loops do not grow the stack.
//
// Not thread-safe: one owner (the engine loop) advances it. States are never freed; the number of
// states is bounded by max_states and the stacks of one state by kMaxStacksPerState (a grammar so
// ambiguous that its parses multiply with the input reaches it); past either, advance() returns
// kOverflow.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace trellis {

class GrammarAutomaton {
 public:
  using StateId = int32_t;
  static constexpr StateId kReject = -1;    // the byte is not allowed here
  static constexpr StateId kOverflow = -3;  // past max_states or kMaxStacksPerState
  static constexpr size_t kMaxStacksPerState = 4096;

  explicit GrammarAutomaton(std::shared_ptr<const Grammar> grammar, int32_t max_states = 1 << 16);

  StateId initial() const { return 0; }
  // The state after `byte`; kReject or kOverflow otherwise. Amortized O(1) for a seen transition.
  StateId advance(StateId state, uint8_t byte) {
    const size_t slot = static_cast<size_t>(state) * n_classes_ + byte_class_[byte];
    if (transitions_[slot] == kUnknown) {
      const StateId next = compute_transition(state, byte);  // may grow transitions_
      transitions_[slot] = next;
    }
    return transitions_[slot];
  }
  // The transitions computed so far: [n_states * n_byte_classes()], a state or kReject /
  // kOverflow, or kUnknownTransition where advance() has not been asked yet; the column of a byte
  // is byte_class(byte). Invalidated by advance().
  static constexpr int32_t kUnknownTransition = -2;
  const int32_t* transition_table() const { return transitions_.data(); }
  // Bytes that every byte set of the grammar treats alike share a class, and so a transition: the
  // table has a column per class, not per byte (a JSON grammar has a few dozen), which keeps the
  // rows a mask walk reads in the first-level cache.
  uint8_t byte_class(uint8_t byte) const { return byte_class_[byte]; }
  int n_byte_classes() const { return n_classes_; }

  // The state after all of `bytes`, or kReject / kOverflow at the first byte that fails.
  StateId advance(StateId state, std::string_view bytes);

  // The input so far is a complete sentence of root.
  bool is_accepting(StateId state) const { return states_[state].accepting; }
  // No byte can follow (the sentence is complete and cannot go on).
  bool is_final(StateId state) const { return states_[state].tops.empty(); }
  // The bytes that may come next: the union of the top elements' byte sets.
  const ByteSet& allowed_bytes(StateId state) const { return states_[state].allowed; }

  // The state table filled up once: the constraint cannot be followed further.
  bool overflowed() const { return overflowed_; }
  int32_t n_states() const { return static_cast<int32_t>(states_.size()); }
  const Grammar& grammar() const { return *grammar_; }

 private:
  static constexpr int32_t kUnknown = kUnknownTransition;
  static constexpr uint32_t kRootFrame = 0;  // the empty stack: popping it completes root

  struct Frame {
    uint32_t position;  // into grammar_->elements
    uint32_t parent;    // frame id; kRootFrame at the bottom
  };
  struct State {
    std::vector<uint32_t> tops;  // sorted, unique frame ids, each on a BYTES element
    bool accepting = false;
    ByteSet allowed;
  };
  struct VectorHash {
    size_t operator()(const std::vector<uint32_t>& v) const;
  };

  int32_t compute_transition(StateId state, uint8_t byte);
  // Adds to `tops` the stacks reached by matching from `position` with return frame `parent`.
  // Follows rule references and completed rules from (position, parent) until every path sits on
  // a BYTES element (added to `tops`) or has completed root (`accepting`).
  void expand(uint32_t position, uint32_t parent, std::vector<uint32_t>& tops, bool& accepting);
  uint32_t intern_frame(uint32_t position, uint32_t parent);
  StateId intern_state(std::vector<uint32_t> tops, bool accepting);

  std::shared_ptr<const Grammar> grammar_;
  int32_t max_states_;
  bool overflowed_ = false;
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, uint32_t> frame_ids_;  // (position << 32 | parent) -> id
  std::vector<State> states_;
  std::unordered_map<std::vector<uint32_t>, StateId, VectorHash> state_ids_;  // tops+accept bit
  std::vector<int32_t> transitions_;  // [n_states * n_classes_]: next state, kReject, kUnknown
  std::array<uint8_t, 256> byte_class_{};
  int n_classes_ = 1;
  // Scratch of expand(): the (position, parent) pairs to visit and those visited in the current
  // transition (an ambiguous grammar reaches the same pair on several paths).
  std::vector<std::pair<uint32_t, uint32_t>> work_;
  std::unordered_set<uint64_t> visited_;
};

// Whether `text` is a complete sentence of the grammar's root: for tests and validation.
bool grammar_accepts(std::shared_ptr<const Grammar> grammar, std::string_view text);

}  // namespace trellis
