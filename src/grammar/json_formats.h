// GBNF for the string formats of JSON Schema's `format` that the schema compiler supports: the
// characters between the quotes of the JSON string.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trellis {

// The rules for `format` ("date", "time", "date-time", "uuid", "email"), as (name, body) pairs
// whose first defines `format_rule_name(format)`; the others are helpers named after it. Nothing
// for another format.
//   date       RFC 3339 full-date: YYYY-MM-DD, with the days each month has (29 February only
//              in leap years)
//   time       RFC 3339 full-time: HH:MM:SS, an optional fraction, then Z or +HH:MM / -HH:MM
//              (seconds 00-59: a leap second is valid at 23:59 UTC only, so 60 is left out)
//   date-time  date "T" time
//   uuid       8-4-4-4-12 hex digits, either case
//   email      a dot-atom local part (RFC 5322 atext, no quoted strings) "@" a host name of two or
//              more labels (letters, digits, inner hyphens, 1-63 characters each)
std::optional<std::vector<std::pair<std::string, std::string>>> json_format_rules(
    std::string_view format);

std::string format_rule_name(std::string_view format);

// Every name json_format_rules() may define, so that other rules can keep clear of them.
std::vector<std::string> json_format_rule_names();

}  // namespace trellis
