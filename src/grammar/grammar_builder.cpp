#include "grammar/grammar_builder.h"

#include <algorithm>

#include "grammar/grammar_checks.h"

namespace trellis {

uint32_t GrammarBuilder::rule(std::string_view name) {
  auto [it, inserted] =
      rule_ids_.try_emplace(std::string(name), static_cast<uint32_t>(rules_.size()));
  if (inserted) rules_.push_back({std::string(name), {}, false});
  return it->second;
}

Status GrammarBuilder::define(uint32_t rule_id, std::vector<Sequence> alternatives) {
  PendingRule& pending = rules_[rule_id];
  if (pending.defined) return Error{"rule '" + pending.name + "' is defined twice"};
  pending.defined = true;
  for (const Sequence& alternative : alternatives) n_elements_ += alternative.size() + 1;
  pending.alternatives = std::move(alternatives);
  return {};
}

uint32_t GrammarBuilder::helper_rule(std::string_view base, std::vector<Sequence> alternatives) {
  // GBNF names cannot contain '#', so a helper never collides with a user's rule.
  const uint32_t id = rule(std::string(base) + "#" + std::to_string(++n_helpers_));
  (void)define(id, std::move(alternatives));
  return id;
}

GrammarElement GrammarBuilder::byte_element(const ByteSet& set) {
  auto it = std::find(byte_sets_.begin(), byte_sets_.end(), set);
  // Grammars use a handful of distinct sets; a linear search keeps them in first-use order.
  if (it == byte_sets_.end()) it = byte_sets_.insert(byte_sets_.end(), set);
  return {ElementKind::BYTES, static_cast<uint32_t>(it - byte_sets_.begin())};
}

GrammarBuilder::Sequence GrammarBuilder::literal(std::string_view text) {
  Sequence sequence;
  for (char c : text) {
    ByteSet set;
    set.add(static_cast<uint8_t>(c));
    sequence.push_back(byte_element(set));
  }
  return sequence;
}

GrammarBuilder::Sequence GrammarBuilder::code_points(const CodePointRanges& ranges,
                                                     std::string_view base) {
  std::vector<Utf8Sequence> encodings;
  for (const auto& [first, last] : ranges) {
    std::vector<Utf8Sequence> part = utf8_sequences(first, last);
    encodings.insert(encodings.end(), part.begin(), part.end());
  }
  // Single-byte encodings share one set; longer ones are one alternative each.
  ByteSet ascii;
  std::vector<Sequence> alternatives;
  for (const Utf8Sequence& encoding : encodings) {
    if (encoding.size() == 1) {
      ascii.add_range(encoding[0].first, encoding[0].last);
      continue;
    }
    Sequence alternative;
    for (const ByteRange& range : encoding) {
      ByteSet set;
      set.add_range(range.first, range.last);
      alternative.push_back(byte_element(set));
    }
    alternatives.push_back(std::move(alternative));
  }
  if (alternatives.empty()) return {byte_element(ascii)};  // an empty set when nothing matches
  if (!ascii.empty()) alternatives.insert(alternatives.begin(), Sequence{byte_element(ascii)});
  return {{ElementKind::RULE, helper_rule(base, std::move(alternatives))}};
}

GrammarElement GrammarBuilder::as_single_element(Sequence item, std::string_view base) {
  if (item.size() == 1) return item[0];
  std::vector<Sequence> alternatives;
  alternatives.push_back(std::move(item));
  return {ElementKind::RULE, helper_rule(base, std::move(alternatives))};
}

Result<GrammarBuilder::Sequence> GrammarBuilder::repeat(Sequence item, int64_t min, int64_t max,
                                                        std::string_view base) {
  if (min < 0 || (max >= 0 && max < min))
    return Error{"repetition {" + std::to_string(min) + "," + std::to_string(max) + "} in rule '" +
                 std::string(base) + "' has min > max"};
  // Each repetition costs at least two elements; refuse before building a hostile count.
  const int64_t copies = std::max(min, max);
  if (copies > limits_.max_elements / 2 || n_elements_ + 2 * copies > limits_.max_elements)
    return Error{"repetition count " + std::to_string(copies) + " in rule '" + std::string(base) +
                 "' is past the grammar size limit (" + std::to_string(limits_.max_elements) +
                 " elements)"};
  if (item.empty()) return Sequence{};
  const GrammarElement unit = as_single_element(std::move(item), base);
  Sequence out(static_cast<size_t>(min), unit);
  n_elements_ += min;
  if (max < 0) {
    // star ::= unit star | ""   (right recursion in tail position: the matcher's stack stays flat)
    const uint32_t star = rule(std::string(base) + "#" + std::to_string(++n_helpers_));
    (void)define(star, {{unit, {ElementKind::RULE, star}}, {}});
    out.push_back({ElementKind::RULE, star});
    return out;
  }
  // optional_k ::= unit optional_(k-1) | ""   ...   optional_1 ::= unit | ""
  GrammarElement tail{ElementKind::END, 0};
  for (int64_t k = 1; k <= max - min; ++k) {
    Sequence first{unit};
    if (tail.kind == ElementKind::RULE) first.push_back(tail);
    tail = {ElementKind::RULE, helper_rule(base, {std::move(first), {}})};
  }
  if (tail.kind == ElementKind::RULE) out.push_back(tail);
  return out;
}

Status GrammarBuilder::check_limits() const {
  if (n_elements_ > limits_.max_elements)
    return Error{"the grammar is past its size limit (" + std::to_string(limits_.max_elements) +
                 " elements)"};
  return {};
}

Result<Grammar> GrammarBuilder::finish(std::string_view root_name) {
  TRELLIS_TRY(check_limits());
  auto root = rule_ids_.find(std::string(root_name));
  if (root == rule_ids_.end() || !rules_[root->second].defined)
    return Error{"the grammar has no '" + std::string(root_name) + "' rule"};
  for (const PendingRule& pending : rules_)
    if (!pending.defined) return Error{"rule '" + pending.name + "' is used but never defined"};

  Grammar grammar;
  grammar.byte_sets = byte_sets_;
  grammar.root = root->second;
  grammar.elements.reserve(static_cast<size_t>(n_elements_));
  for (PendingRule& pending : rules_) {
    GrammarRule& rule = grammar.rules.emplace_back();
    rule.name = std::move(pending.name);
    for (const Sequence& alternative : pending.alternatives) {
      rule.alternatives.push_back(static_cast<uint32_t>(grammar.elements.size()));
      grammar.elements.insert(grammar.elements.end(), alternative.begin(), alternative.end());
      grammar.elements.push_back({ElementKind::END, 0});
    }
  }
  rules_.clear();
  TRELLIS_TRY(prune_unproductive(grammar));
  TRELLIS_TRY(check_left_recursion(grammar));
  return grammar;
}

}  // namespace trellis
