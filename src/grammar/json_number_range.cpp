#include "grammar/json_number_range.h"

#include <string_view>
#include <vector>

#include "grammar/gbnf_text.h"

namespace trellis {

namespace json_number_range_impl {
namespace {

std::string digit_literal(std::string_view digits) {
  return "\"" + std::string(digits) + "\"";
}

std::string digit_class(char lo, char hi) {
  if (lo == hi) return digit_literal(std::string_view(&lo, 1));
  return std::string("[") + lo + "-" + hi + "]";
}

// Exactly n digits, any.
std::string any_digits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return "[0-9]{" + std::to_string(n) + "}";
}

std::string concat(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

bool all_are(std::string_view digits, char c) {
  return digits.find_first_not_of(c) == std::string_view::npos;
}

// The digit strings of length |x| between x and y (x <= y, |x| == |y| >= 1), as an unambiguous
// expression. After the common prefix, the first differing digit splits the range into
//   x[i] followed by [x_rest, 99..9]   |   (x[i], y[i]) followed by anything   |
//   y[i] followed by [00..0, y_rest]
// where a rest that is already all zeros (all nines) lets its digit join the middle part.
std::string same_length_range(std::string_view x, std::string_view y) {
  size_t i = 0;
  while (i < x.size() && x[i] == y[i]) ++i;
  const std::string prefix = i > 0 ? digit_literal(x.substr(0, i)) : "";
  if (i == x.size()) return prefix;
  const size_t rest = x.size() - i - 1;
  const bool low_zeros = all_are(x.substr(i + 1), '0');
  const bool high_nines = all_are(y.substr(i + 1), '9');
  const char middle_lo = static_cast<char>(x[i] + (low_zeros ? 0 : 1));
  const char middle_hi = static_cast<char>(y[i] - (high_nines ? 0 : 1));
  std::vector<std::string> alternatives;
  if (!low_zeros)
    alternatives.push_back(concat(digit_literal(x.substr(i, 1)),
                                  same_length_range(x.substr(i + 1), std::string(rest, '9'))));
  if (middle_lo <= middle_hi)
    alternatives.push_back(concat(digit_class(middle_lo, middle_hi), any_digits(rest)));
  if (!high_nines)
    alternatives.push_back(concat(digit_literal(y.substr(i, 1)),
                                  same_length_range(std::string(rest, '0'), y.substr(i + 1))));
  return concat(prefix, gbnf_alternation(alternatives));
}

std::string power_of_ten(size_t zeros) {
  return "1" + std::string(zeros, '0');
}

uint64_t magnitude(int64_t value) {
  return value < 0 ? uint64_t(-(value + 1)) + 1 : uint64_t(value);
}

const char* const kAnyFraction = "( \".\" [0-9]+ )?";
const char* const kZeroFraction = "( \".\" \"0\"+ )?";
// The first non-zero digit is the [1-9], so each text has one parse.
const char* const kNonZeroFraction = "\".\" \"0\"* [1-9] [0-9]*";

// An upper bound of a magnitude: none (open), or m <= value (m < value when exclusive).
struct MagnitudeCap {
  bool open = true;
  uint64_t value = 0;
  bool exclusive = false;
};

// Non-negative numbers m (the magnitude of a value) with c <= m (c < m when c_exclusive) and
// under `cap`, by integer part.
std::vector<std::string> magnitude_alternatives(uint64_t c, bool c_exclusive, MagnitudeCap cap) {
  std::vector<std::string> alternatives;
  if (!cap.open && c > cap.value) return alternatives;
  if (!cap.open && c == cap.value) {
    if (!c_exclusive && !cap.exclusive)
      alternatives.push_back(concat(uint_range_gbnf(c, c), kZeroFraction));
    return alternatives;
  }
  uint64_t start = c;
  if (c_exclusive) {
    alternatives.push_back(concat(uint_range_gbnf(c, c), kNonZeroFraction));
    ++start;
  }
  if (cap.open) {
    alternatives.push_back(concat(uint_at_least_gbnf(start), kAnyFraction));
    return alternatives;
  }
  if (start + 1 <= cap.value)
    alternatives.push_back(concat(uint_range_gbnf(start, cap.value - 1), kAnyFraction));
  if (!cap.exclusive)
    alternatives.push_back(concat(uint_range_gbnf(cap.value, cap.value), kZeroFraction));
  return alternatives;
}

}  // namespace
}  // namespace json_number_range_impl

std::string uint_range_gbnf(uint64_t lo, uint64_t hi) {
  using namespace json_number_range_impl;
  const std::string lo_text = std::to_string(lo);
  const std::string hi_text = std::to_string(hi);
  std::vector<std::string> alternatives;
  for (size_t length = lo_text.size(); length <= hi_text.size(); ++length) {
    const std::string first = length == lo_text.size() ? lo_text : power_of_ten(length - 1);
    const std::string last = length == hi_text.size() ? hi_text : std::string(length, '9');
    alternatives.push_back(same_length_range(first, last));
  }
  return gbnf_alternation(alternatives);
}

std::string uint_at_least_gbnf(uint64_t lo) {
  using namespace json_number_range_impl;
  const std::string lo_text = std::to_string(lo);
  return gbnf_alternation({same_length_range(lo_text, std::string(lo_text.size(), '9')),
                           "[1-9] [0-9]{" + std::to_string(lo_text.size()) + ",}"});
}

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  using namespace json_number_range_impl;
  if (lo && hi && *lo > *hi) return "";
  std::vector<std::string> alternatives;
  if (!hi || *hi >= 0) {
    const uint64_t first = lo && *lo > 0 ? uint64_t(*lo) : 0;
    alternatives.push_back(hi ? uint_range_gbnf(first, uint64_t(*hi)) : uint_at_least_gbnf(first));
  }
  if (!lo || *lo < 0) {
    const uint64_t first = hi && *hi < 0 ? magnitude(*hi) : 1;
    alternatives.push_back(
        "\"-\" " + (lo ? uint_range_gbnf(first, magnitude(*lo)) : uint_at_least_gbnf(first)));
  }
  return gbnf_alternation(alternatives);
}

std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  using namespace json_number_range_impl;
  const NumberBound lo_bound = lo.value_or(NumberBound{});
  const NumberBound hi_bound = hi.value_or(NumberBound{});
  const bool has_lo = lo.has_value(), has_hi = hi.has_value();
  std::vector<std::string> alternatives;
  // Values >= 0, written without a sign.
  if (!has_hi || hi_bound.value > 0 || (hi_bound.value == 0 && !hi_bound.exclusive)) {
    const bool lo_applies = has_lo && lo_bound.value >= 0;
    MagnitudeCap cap;
    if (has_hi) cap = {false, uint64_t(hi_bound.value), hi_bound.exclusive};
    alternatives = magnitude_alternatives(lo_applies ? uint64_t(lo_bound.value) : 0,
                                          lo_applies && lo_bound.exclusive, cap);
  }
  // Values < 0: "-" and a magnitude above zero (zero itself is written as above).
  if (!has_lo || lo_bound.value < 0) {
    const bool hi_applies = has_hi && hi_bound.value < 0;
    MagnitudeCap cap;
    if (has_lo) cap = {false, magnitude(lo_bound.value), lo_bound.exclusive};
    std::vector<std::string> negative = magnitude_alternatives(
        hi_applies ? magnitude(hi_bound.value) : 0, hi_applies ? hi_bound.exclusive : true, cap);
    if (!negative.empty()) alternatives.push_back("\"-\" " + gbnf_alternation(negative));
  }
  if (alternatives.empty()) return "";
  return gbnf_alternation(alternatives);
}

}  // namespace trellis
