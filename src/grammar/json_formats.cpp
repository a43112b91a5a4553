#include "grammar/json_formats.h"

namespace trellis {

namespace json_formats_impl {
namespace {

using Rules = std::vector<std::pair<std::string, std::string>>;

Rules date_rules() {
  // A year is a leap year when divisible by 4 and not by 100, or divisible by 400; on four
  // digits: the last two digits a non-zero multiple of 4, or 00 after a multiple of 4.
  return {
      {"format-date",
       "format-date-year \"-\" format-date-month-day | format-date-leap-year \"-02-29\""},
      {"format-date-year", "[0-9]{4}"},
      {"format-date-leap-year",
       "[0-9]{2} ( \"0\" [48] | [2468] [048] | [13579] [26] ) | ( [02468] [048] | [13579] [26] ) "
       "\"00\""},
      {"format-date-month-day",
       "( \"0\" [13578] | \"1\" [02] ) \"-\" ( format-date-day-28 | \"29\" | \"30\" | \"31\" ) | "
       "( \"0\" [469] | \"11\" ) \"-\" ( format-date-day-28 | \"29\" | \"30\" ) | "
       "\"02-\" format-date-day-28"},
      {"format-date-day-28", "\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]"},
  };
}

Rules time_rules() {
  return {
      {"format-time",
       "format-time-hour \":\" format-time-minute \":\" format-time-minute ( \".\" [0-9]+ )? "
       "( \"Z\" | [+\\-] format-time-hour \":\" format-time-minute )"},
      {"format-time-hour", "[01] [0-9] | \"2\" [0-3]"},
      {"format-time-minute", "[0-5] [0-9]"},
  };
}

Rules date_time_rules() {
  Rules rules = {{"format-date-time", "format-date \"T\" format-time"}};
  const Rules date = date_rules();
  const Rules time = time_rules();
  rules.insert(rules.end(), date.begin(), date.end());
  rules.insert(rules.end(), time.begin(), time.end());
  return rules;
}

Rules uuid_rules() {
  return {
      {"format-uuid",
       "format-uuid-hex{8} \"-\" format-uuid-hex{4} \"-\" format-uuid-hex{4} \"-\" "
       "format-uuid-hex{4} \"-\" format-uuid-hex{12}"},
      {"format-uuid-hex", "[0-9a-fA-F]"},
  };
}

Rules email_rules() {
  // atext of RFC 5322; none of these characters needs an escape in a JSON string.
  return {
      {"format-email",
       "format-email-atom ( \".\" format-email-atom )* \"@\" format-email-label "
       "( \".\" format-email-label )+"},
      {"format-email-atom", "[a-zA-Z0-9!#$%&'*+/=?\\^_`{|}~\\-]+"},
      {"format-email-label", "[a-zA-Z0-9] ( [a-zA-Z0-9\\-]{0,61} [a-zA-Z0-9] )?"},
  };
}

}  // namespace
}  // namespace json_formats_impl

std::string format_rule_name(std::string_view format) {
  return "format-" + std::string(format);
}

std::optional<std::vector<std::pair<std::string, std::string>>> json_format_rules(
    std::string_view format) {
  using namespace json_formats_impl;
  if (format == "date") return date_rules();
  if (format == "time") return time_rules();
  if (format == "date-time") return date_time_rules();
  if (format == "uuid") return uuid_rules();
  if (format == "email") return email_rules();
  return std::nullopt;
}

std::vector<std::string> json_format_rule_names() {
  std::vector<std::string> names;
  for (const char* format : {"date", "time", "date-time", "uuid", "email"}) {
    const auto rules = json_format_rules(format);
    for (const auto& rule : *rules) names.push_back(rule.first);
  }
  return names;
}

}  // namespace trellis
