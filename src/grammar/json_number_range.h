// Exact GBNF for bounded JSON integers and numbers: digit-range expressions that accept a
// number's text exactly when its value lies within the bounds (no leading zeros, so one text per
// integer part).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace trellis {

// A bound of a range; bounds are integers and their magnitude is at most kMaxNumberBound.
struct NumberBound {
  int64_t value = 0;
  bool exclusive = false;
};

inline constexpr int64_t kMaxNumberBound = 1'000'000'000'000'000'000;  // 1e18

// The decimal texts (no sign, no leading zero) of the integers in [lo, hi] (lo <= hi), and of the
// integers >= lo. Expressions without a top-level '|', safe to concatenate.
std::string uint_range_gbnf(uint64_t lo, uint64_t hi);
std::string uint_at_least_gbnf(uint64_t lo);

// JSON integers (no fraction, no exponent) in [lo, hi]; an absent bound leaves that side open.
// "" when no integer is in range.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

// JSON numbers without an exponent whose value lies between lo and hi (each inclusive or
// exclusive, absent for an open side): per integer part, the fraction it may have, e.g. for
// [0, 10] "10" may only carry zeros after the point. "" when no number is in range.
std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

}  // namespace trellis
