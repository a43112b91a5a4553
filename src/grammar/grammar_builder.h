// Builds a Grammar rule by rule (the GBNF parser's back end): rules by name, helper rules for
// groups, classes and repetitions, byte sets interned, and the checks of finish() that make the
// Grammar safe to run (no undefined rule, no left recursion, no unproductive alternative).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "grammar/grammar.h"
#include "grammar/grammar_limits.h"
#include "grammar/utf8_ranges.h"

namespace trellis {

class GrammarBuilder {
 public:
  using Sequence = std::vector<GrammarElement>;  // one alternative, without its END

  explicit GrammarBuilder(const GrammarLimits& limits) : limits_(limits) {}

  // The id of the rule named `name`, declared (not yet defined) on first use.
  uint32_t rule(std::string_view name);
  // Errors: the rule was defined before.
  Status define(uint32_t rule_id, std::vector<Sequence> alternatives);
  // A new rule named after `base` that nobody else can name, defined as `alternatives`.
  uint32_t helper_rule(std::string_view base, std::vector<Sequence> alternatives);

  // The bytes of `text` in order.
  Sequence literal(std::string_view text);
  // One code point of `ranges` (normalized; may be empty, which matches nothing).
  Sequence code_points(const CodePointRanges& ranges, std::string_view base);
  // `item` repeated between min and max times (max < 0: unbounded). Errors: past the limits.
  Result<Sequence> repeat(Sequence item, int64_t min, int64_t max, std::string_view base);

  // The Grammar rooted at `root_name`. Errors: an undefined rule, no root, left recursion, an
  // empty language, past the limits.
  Result<Grammar> finish(std::string_view root_name);

  // Elements added so far, for the limit checks of callers.
  int64_t n_elements() const { return n_elements_; }
  Status check_limits() const;

 private:
  struct PendingRule {
    std::string name;
    std::vector<Sequence> alternatives;
    bool defined = false;
  };

  GrammarElement byte_element(const ByteSet& set);
  GrammarElement as_single_element(Sequence item, std::string_view base);

  GrammarLimits limits_;
  std::vector<PendingRule> rules_;
  std::unordered_map<std::string, uint32_t> rule_ids_;
  std::vector<ByteSet> byte_sets_;
  int64_t n_elements_ = 0;
  int64_t n_helpers_ = 0;
};

}  // namespace trellis
