#include "grammar/grammar_automaton.h"

#include <algorithm>

namespace trellis {

size_t GrammarAutomaton::VectorHash::operator()(const std::vector<uint32_t>& v) const {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
  for (uint32_t x : v) h = (h ^ x) * 0x100000001B3ull + (h >> 29);
  return static_cast<size_t>(h);
}

namespace {

// Partition refinement: two bytes share a class when every byte set has both or neither.
// Classes are numbered in order of their smallest byte. Returns the number of classes.
int byte_classes(const std::vector<ByteSet>& sets, std::array<uint8_t, 256>& class_of) {
  // signature[b]: which sets contain b, folded into 64 bits per round and refined set by set.
  std::array<uint32_t, 256> id{};  // current class of each byte
  int n = 1;
  for (const ByteSet& set : sets) {
    // Split every class by membership in `set`: (old class, member) -> new class.
    std::array<int32_t, 512> renumber;
    renumber.fill(-1);
    int next = 0;
    std::array<uint32_t, 256> refined{};
    for (int b = 0; b < 256; ++b) {
      const size_t key = id[b] * 2 + (set.contains(static_cast<uint8_t>(b)) ? 1 : 0);
      if (renumber[key] < 0) renumber[key] = next++;
      refined[b] = static_cast<uint32_t>(renumber[key]);
    }
    id = refined;
    n = next;
  }
  for (int b = 0; b < 256; ++b) class_of[b] = static_cast<uint8_t>(id[b]);
  return n;
}

}  // namespace

GrammarAutomaton::GrammarAutomaton(std::shared_ptr<const Grammar> grammar, int32_t max_states)
    : grammar_(std::move(grammar)), max_states_(std::max(max_states, 1)) {
  n_classes_ = byte_classes(grammar_->byte_sets, byte_class_);
  frames_.push_back({UINT32_MAX, 0});  // kRootFrame
  std::vector<uint32_t> tops;
  bool accepting = false;
  visited_.clear();
  for (uint32_t start : grammar_->rules[grammar_->root].alternatives)
    expand(start, kRootFrame, tops, accepting);
  intern_state(std::move(tops), accepting);
}

uint32_t GrammarAutomaton::intern_frame(uint32_t position, uint32_t parent) {
  const uint64_t key = uint64_t{position} << 32 | parent;
  auto [it, inserted] = frame_ids_.try_emplace(key, static_cast<uint32_t>(frames_.size()));
  if (inserted) frames_.push_back({position, parent});
  return it->second;
}

void GrammarAutomaton::expand(uint32_t position, uint32_t parent, std::vector<uint32_t>& tops,
                              bool& accepting) {
  const Grammar& g = *grammar_;
  work_.assign(1, {position, parent});
  while (!work_.empty()) {
    const auto [pos, frame] = work_.back();
    work_.pop_back();
    if (!visited_.insert(uint64_t{pos} << 32 | frame).second) continue;
    const GrammarElement& element = g.elements[pos];
    switch (element.kind) {
      case ElementKind::BYTES:
        tops.push_back(intern_frame(pos, frame));
        break;
      case ElementKind::END:
        if (frame == kRootFrame) {
          accepting = true;
        } else {
          work_.push_back({frames_[frame].position, frames_[frame].parent});
        }
        break;
      case ElementKind::RULE: {
        // In tail position the rule returns straight to our caller: no frame of its own.
        const uint32_t after = pos + 1;
        const uint32_t return_frame =
            g.elements[after].kind == ElementKind::END ? frame : intern_frame(after, frame);
        for (uint32_t start : g.rules[element.value].alternatives)
          work_.push_back({start, return_frame});
        break;
      }
    }
  }
}

GrammarAutomaton::StateId GrammarAutomaton::intern_state(std::vector<uint32_t> tops,
                                                         bool accepting) {
  std::sort(tops.begin(), tops.end());
  tops.erase(std::unique(tops.begin(), tops.end()), tops.end());
  std::vector<uint32_t> key = tops;
  key.push_back(accepting ? 1u : 0u);
  if (auto it = state_ids_.find(key); it != state_ids_.end()) return it->second;
  if (static_cast<int32_t>(states_.size()) >= max_states_ || tops.size() > kMaxStacksPerState) {
    overflowed_ = true;
    return kOverflow;
  }
  State state;
  for (uint32_t top : tops) {
    const ByteSet& set = grammar_->byte_sets[grammar_->elements[frames_[top].position].value];
    for (int w = 0; w < 4; ++w) state.allowed.words[w] |= set.words[w];
  }
  state.tops = std::move(tops);
  state.accepting = accepting;
  const StateId id = static_cast<StateId>(states_.size());
  states_.push_back(std::move(state));
  state_ids_.emplace(std::move(key), id);
  transitions_.resize(states_.size() * static_cast<size_t>(n_classes_), kUnknown);
  return id;
}

int32_t GrammarAutomaton::compute_transition(StateId state, uint8_t byte) {
  if (!states_[state].allowed.contains(byte)) return kReject;
  const std::vector<uint32_t> tops = states_[state].tops;  // intern_state may move states_
  std::vector<uint32_t> next_tops;
  bool accepting = false;
  visited_.clear();
  for (uint32_t top : tops) {
    const Frame frame = frames_[top];
    const GrammarElement& element = grammar_->elements[frame.position];
    if (grammar_->byte_sets[element.value].contains(byte))
      expand(frame.position + 1, frame.parent, next_tops, accepting);
    if (next_tops.size() > 4 * kMaxStacksPerState) break;  // overflows below; stop the work here
  }
  return intern_state(std::move(next_tops), accepting);
}

GrammarAutomaton::StateId GrammarAutomaton::advance(StateId state, std::string_view bytes) {
  for (char c : bytes) {
    state = advance(state, static_cast<uint8_t>(c));
    if (state < 0) return state;
  }
  return state;
}

bool grammar_accepts(std::shared_ptr<const Grammar> grammar, std::string_view text) {
  GrammarAutomaton automaton(std::move(grammar));
  const GrammarAutomaton::StateId state = automaton.advance(automaton.initial(), text);
  return state >= 0 && automaton.is_accepting(state);
}

}  // namespace trellis
