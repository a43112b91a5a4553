#include "grammar/grammar_checks.h"

#include <functional>
#include <vector>

namespace trellis {

namespace {

// Whether every element of the alternative at `start` satisfies `holds`.
template <typename Predicate>
bool all_elements(const Grammar& grammar, uint32_t start, Predicate holds) {
  for (uint32_t i = start; grammar.elements[i].kind != ElementKind::END; ++i)
    if (!holds(grammar.elements[i])) return false;
  return true;
}

// Least fixpoint of "some alternative has only elements satisfying `base` or rules in the set".
std::vector<bool> rule_fixpoint(const Grammar& grammar,
                                const std::function<bool(const ByteSet&)>& byte_ok) {
  std::vector<bool> in_set(grammar.rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < grammar.rules.size(); ++r) {
      if (in_set[r]) continue;
      for (uint32_t start : grammar.rules[r].alternatives) {
        const bool ok = all_elements(grammar, start, [&](const GrammarElement& e) {
          return e.kind == ElementKind::BYTES ? byte_ok(grammar.byte_sets[e.value])
                                              : bool(in_set[e.value]);
        });
        if (ok) {
          in_set[r] = changed = true;
          break;
        }
      }
    }
  }
  return in_set;
}

}  // namespace

Status prune_unproductive(Grammar& grammar) {
  const std::vector<bool> productive =
      rule_fixpoint(grammar, [](const ByteSet& set) { return !set.empty(); });
  if (!productive[grammar.root])
    return Error{"the grammar matches no string (rule '" + grammar.rules[grammar.root].name +
                 "' can never be completed)"};
  for (GrammarRule& rule : grammar.rules) {
    std::vector<uint32_t> kept;
    for (uint32_t start : rule.alternatives) {
      const bool ok = all_elements(grammar, start, [&](const GrammarElement& e) {
        return e.kind == ElementKind::BYTES ? !grammar.byte_sets[e.value].empty()
                                            : bool(productive[e.value]);
      });
      if (ok) kept.push_back(start);
    }
    rule.alternatives = std::move(kept);
  }
  return {};
}

Status check_left_recursion(const Grammar& grammar) {
  const std::vector<bool> nullable = rule_fixpoint(grammar, [](const ByteSet&) { return false; });
  // leftmost[r]: rules that r can start with (only nullable elements before them).
  std::vector<std::vector<uint32_t>> leftmost(grammar.rules.size());
  for (size_t r = 0; r < grammar.rules.size(); ++r) {
    for (uint32_t start : grammar.rules[r].alternatives) {
      for (uint32_t i = start; grammar.elements[i].kind == ElementKind::RULE; ++i) {
        leftmost[r].push_back(grammar.elements[i].value);
        if (!nullable[grammar.elements[i].value]) break;
      }
    }
  }
  // Depth-first search for a cycle; 0 = unvisited, 1 = on the path, 2 = done. Iterative, so a
  // long chain of rules cannot overflow the stack.
  std::vector<uint8_t> mark(grammar.rules.size(), 0);
  for (uint32_t start = 0; start < grammar.rules.size(); ++start) {
    if (mark[start] != 0) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{start, 0}};
    mark[start] = 1;
    while (!path.empty()) {
      auto& [rule, next_edge] = path.back();
      if (next_edge == leftmost[rule].size()) {
        mark[rule] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t target = leftmost[rule][next_edge++];
      if (mark[target] == 1)
        return Error{"left recursion: rule '" + grammar.rules[target].name +
                     "' can reach itself without consuming input"};
      if (mark[target] == 0) {
        mark[target] = 1;
        path.push_back({target, 0});
      }
    }
  }
  return {};
}

}  // namespace trellis
