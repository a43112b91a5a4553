// regex_to_gbnf, choice_gbnf and gbnf_literal: the GBNF they write is compiled with parse_gbnf()
// and run with grammar_accepts(); regexes are checked against std::regex (ECMAScript) on many
// strings, so a wrong translation shows up as a disagreement.
#include "grammar/regex_grammar.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/grammar_automaton.h"
#include "grammar/regex_compiler.h"

namespace trellis {
namespace {

struct Compiled {
  std::string gbnf;
  std::shared_ptr<const Grammar> grammar;

  bool accepts(std::string_view text) const { return grammar_accepts(grammar, text); }
};

Compiled compile_gbnf(const std::string& gbnf) {
  Result<Grammar> grammar = parse_gbnf(gbnf);
  EXPECT_TRUE(grammar.ok()) << (grammar.ok() ? "" : grammar.error().message) << "\n" << gbnf;
  if (!grammar.ok()) return {gbnf, nullptr};
  return {gbnf, std::make_shared<const Grammar>(std::move(grammar).value())};
}

Compiled compile_regex_root(const std::string& pattern) {
  Result<std::string> gbnf = regex_to_gbnf(pattern, "root", GrammarLimits{});
  EXPECT_TRUE(gbnf.ok()) << pattern << ": " << (gbnf.ok() ? "" : gbnf.error().message);
  if (!gbnf.ok()) return {};
  return compile_gbnf(*gbnf);
}

std::string regex_error(const std::string& pattern, const GrammarLimits& limits = {}) {
  Result<std::string> gbnf = regex_to_gbnf(pattern, "root", limits);
  EXPECT_FALSE(gbnf.ok()) << pattern << " compiled to\n" << (gbnf.ok() ? *gbnf : "");
  return gbnf.ok() ? "" : gbnf.error().message;
}

// Every string over `alphabet` up to `max_length` characters.
std::vector<std::string> all_strings(const std::string& alphabet, size_t max_length) {
  std::vector<std::string> out = {""};
  size_t begin = 0;
  for (size_t length = 1; length <= max_length; ++length) {
    const size_t end = out.size();
    for (size_t i = begin; i < end; ++i)
      for (char c : alphabet) out.push_back(out[i] + c);
    begin = end;
  }
  return out;
}

// The grammar accepts exactly the strings std::regex_match accepts, over every short string of
// `alphabet` (plus random longer ones).
void expect_same_as_std_regex(const std::string& pattern, const std::string& alphabet,
                              size_t exhaustive_length = 4) {
  SCOPED_TRACE("pattern " + pattern);
  const Compiled compiled = compile_regex_root(pattern);
  ASSERT_TRUE(compiled.grammar);
  const std::regex reference(pattern, std::regex::ECMAScript);
  std::vector<std::string> texts = all_strings(alphabet, exhaustive_length);
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string text;
    const size_t length = rng() % 12;
    for (size_t j = 0; j < length; ++j) text += alphabet[rng() % alphabet.size()];
    texts.push_back(text);
  }
  int matches = 0;
  for (const std::string& text : texts) {
    const bool expected = std::regex_match(text, reference);
    matches += expected;
    EXPECT_EQ(compiled.accepts(text), expected) << "text '" << text << "'\n" << compiled.gbnf;
  }
  EXPECT_GT(matches, 0) << "the test strings never match: pick a better alphabet";
}

TEST(RegexGrammar, AgreesWithStdRegexOnLiteralsAndAlternation) {
  expect_same_as_std_regex("abc", "abcx");
  expect_same_as_std_regex("a|bc|", "abcx");
  expect_same_as_std_regex("(ab)*c?", "abc");
  expect_same_as_std_regex("x(?:y|zz)*", "xyz");
  expect_same_as_std_regex("(a|bc)+d{0,2}", "abcd");
  expect_same_as_std_regex("()a(|b)", "ab");
}

TEST(RegexGrammar, AgreesWithStdRegexOnQuantifiers) {
  expect_same_as_std_regex("a{2}", "ab", 5);
  expect_same_as_std_regex("a{2,}b", "ab", 6);
  expect_same_as_std_regex("(ab){1,2}c{0}", "abc", 6);
  expect_same_as_std_regex("a+?b*?c??", "abc", 5);
  expect_same_as_std_regex("[ab]{2,3}", "abc", 5);
}

TEST(RegexGrammar, AgreesWithStdRegexOnClassesAndShorthands) {
  expect_same_as_std_regex("[a-c]+", "abcd-");
  expect_same_as_std_regex("[^ab]+", "abc-\n");
  expect_same_as_std_regex("[\\w-]+", "a_Z9-. ");
  expect_same_as_std_regex("\\d+\\.\\d*", "01.a");
  expect_same_as_std_regex("\\s*a\\S", "a \t\nb");
  expect_same_as_std_regex("\\D\\W", "1a-_ ");
  expect_same_as_std_regex("[\\d\\s]x", "1 x\ta");
  expect_same_as_std_regex("a.b", "ab\n.");
  expect_same_as_std_regex("[.]\\[\\]\\^\\$", ".[]^$a", 5);
  expect_same_as_std_regex("[-a]+[b-]", "ab-c");
  expect_same_as_std_regex("\\x41\\u0042\\t", "AB\tC");
}

TEST(RegexGrammar, AnchorsAreNoOpsForAWholeMatch) {
  expect_same_as_std_regex("^ab$", "abc");
  expect_same_as_std_regex("^a|b$", "abc");
  const Compiled compiled = compile_regex_root("^(a|b)+$");
  EXPECT_TRUE(compiled.accepts("abba"));
  EXPECT_FALSE(compiled.accepts("abc"));
}

TEST(RegexGrammar, DotAndClassesCoverMultiByteCharacters) {
  const Compiled dot = compile_regex_root("a.c");
  EXPECT_TRUE(dot.accepts("abc"));
  EXPECT_TRUE(
      dot.accepts("a\xC3\xA9"
                  "c"));  // é
  EXPECT_TRUE(
      dot.accepts("a\xF0\x9F\x98\x80"
                  "c"));  // U+1F600
  EXPECT_FALSE(dot.accepts("a\nc"));
  EXPECT_FALSE(dot.accepts("ac"));

  const Compiled greek = compile_regex_root("[\xCE\xB1-\xCF\x89]+");  // [α-ω]+
  EXPECT_TRUE(greek.accepts("\xCE\xB2\xCE\xB3"));                     // βγ
  EXPECT_FALSE(greek.accepts("b"));

  const Compiled negated = compile_regex_root("[^a]");
  EXPECT_TRUE(negated.accepts("\xC3\xA9"));
  EXPECT_FALSE(negated.accepts("a"));

  const Compiled escaped = compile_regex_root("\\u00e9\\uD83D\\uDE00");
  EXPECT_TRUE(escaped.accepts("\xC3\xA9\xF0\x9F\x98\x80"));
}

TEST(RegexGrammar, LiteralBraceWhenNotAQuantifier) {
  const Compiled compiled = compile_regex_root("a{b}{,2}");
  EXPECT_TRUE(compiled.accepts("a{b}{,2}"));
  EXPECT_FALSE(compiled.accepts("ab"));
}

TEST(RegexGrammar, RefusesUnsupportedConstructsByNameAndOffset) {
  EXPECT_EQ(regex_error("ab(?=c)"), "regex: unsupported construct 'lookahead (?=' at offset 2");
  EXPECT_EQ(regex_error("(?!c)"), "regex: unsupported construct 'lookahead (?!' at offset 0");
  EXPECT_EQ(regex_error("x(?<=c)"), "regex: unsupported construct 'lookbehind (?<=' at offset 1");
  EXPECT_EQ(regex_error("(a)\\1"), "regex: unsupported construct 'backreference \\1' at offset 3");
  EXPECT_EQ(regex_error("\\bfoo"), "regex: unsupported construct 'word boundary \\b' at offset 0");
  EXPECT_EQ(regex_error("(?<name>a)"),
            "regex: unsupported construct 'named group (?<' at offset 0");
  EXPECT_EQ(regex_error("\\p{L}"),
            "regex: unsupported construct 'Unicode property class \\p' at offset 0");
  EXPECT_EQ(regex_error("a^b"),
            "regex: unsupported construct 'anchor ^ after the start' at offset 1");
  EXPECT_EQ(regex_error("a$b"),
            "regex: unsupported construct 'anchor $ before the end' at offset 1");
  EXPECT_EQ(regex_error("(?i)a"), "regex: unsupported construct 'group modifier (?i' at offset 0");
  EXPECT_EQ(regex_error("\\q"), "regex: unsupported construct 'escape \\q' at offset 0");
  EXPECT_EQ(regex_error("[^\\s\\S]"),
            "regex: unsupported construct 'class that matches nothing' at offset 0");
}

TEST(RegexGrammar, RefusesMalformedPatterns) {
  EXPECT_EQ(regex_error("*a"), "regex: nothing to repeat at offset 0");
  EXPECT_EQ(regex_error("a**"), "regex: nothing to repeat at offset 2");
  EXPECT_EQ(regex_error("(ab"), "regex: unterminated group at offset 0");
  EXPECT_EQ(regex_error("ab)"), "regex: unmatched ')' at offset 2");
  EXPECT_EQ(regex_error("[ab"), "regex: unterminated class at offset 0");
  EXPECT_EQ(regex_error("[b-a]"), "regex: class range out of order at offset 2");
  EXPECT_EQ(regex_error("a{3,2}"), "regex: quantifier {3,2} out of order at offset 1");
  EXPECT_EQ(regex_error("a\\"), "regex: trailing backslash at offset 1");
  EXPECT_EQ(regex_error("\\xZ1"), "regex: malformed hex escape at offset 0");
  EXPECT_EQ(regex_error("\\uD800"), "regex: unsupported construct 'lone surrogate' at offset 0");
}

TEST(RegexGrammar, RefusesPastTheLimits) {
  GrammarLimits limits;
  limits.max_elements = 1000;
  EXPECT_EQ(regex_error("a{2000}", limits),
            "regex: repetition count 2000 exceeds the grammar limits at offset 1");
  limits = GrammarLimits{};
  limits.max_gbnf_bytes = 64;
  EXPECT_NE(regex_error(std::string(100, 'a') + "|b", limits).find("exceeds 64 bytes"),
            std::string::npos);
  EXPECT_NE(regex_error(std::string(300, '(') + std::string(300, ')')).find("nested deeper"),
            std::string::npos);
}

TEST(RegexGrammar, HelperRulesAreNamedAfterTheRule) {
  // Two regexes in one grammar: their helper rules must not clash.
  Result<std::string> first = compile_regex("[^\"]+", "first", RegexTarget::JSON_STRING,
                                            RegexMatch::WHOLE, GrammarLimits{});
  Result<std::string> second = compile_regex("[^a]+", "second", RegexTarget::JSON_STRING,
                                             RegexMatch::WHOLE, GrammarLimits{});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(first->find("first-c1 ::="), std::string::npos) << *first;
  EXPECT_NE(second->find("second-c1 ::="), std::string::npos) << *second;
  const Compiled both = compile_gbnf("root ::= first \",\" second\n" + *first + *second);
  EXPECT_TRUE(both.accepts("ab,b\\\"c"));
  EXPECT_FALSE(both.accepts("a\"b,b"));
}

// JSON-string target with search semantics (JSON Schema's `pattern`): the pattern is matched
// against the decoded string, anywhere unless anchored.
TEST(RegexGrammar, JsonStringSearchAgreesWithStdRegexSearch) {
  const std::vector<std::string> patterns = {"ab",      "^a", "b$",   "^a|b$",  "^a.c$",
                                             "^[^a]*$", "\"", "\\\\", "^\\s+$", "^[\\n\\t\"]b?$"};
  const std::string alphabet = "abc\"\\\n\t ";
  for (const std::string& pattern : patterns) {
    SCOPED_TRACE("pattern " + pattern);
    Result<std::string> gbnf = compile_regex(pattern, "root", RegexTarget::JSON_STRING,
                                             RegexMatch::SEARCH, GrammarLimits{});
    ASSERT_TRUE(gbnf.ok()) << gbnf.error().message;
    const Compiled compiled = compile_gbnf(*gbnf);
    ASSERT_TRUE(compiled.grammar);
    const std::regex reference(pattern, std::regex::ECMAScript);
    for (const std::string& text : all_strings(alphabet, 3)) {
      const std::string encoded = nlohmann::json(text).dump();  // "..." with JSON escapes
      const std::string inner = encoded.substr(1, encoded.size() - 2);
      EXPECT_EQ(compiled.accepts(inner), std::regex_search(text, reference))
          << "text " << encoded << "\n"
          << *gbnf;
    }
  }
}

TEST(RegexGrammar, JsonStringControlCharactersUseEitherHexCase) {
  Result<std::string> gbnf = compile_regex("^\\x01[\\x02-\\x03]$", "root", RegexTarget::JSON_STRING,
                                           RegexMatch::SEARCH, GrammarLimits{});
  ASSERT_TRUE(gbnf.ok()) << gbnf.error().message;
  const Compiled compiled = compile_gbnf(*gbnf);
  EXPECT_TRUE(compiled.accepts("\\u0001\\u0003"));
  EXPECT_TRUE(compiled.accepts("\\u0001\\u0002"));
  EXPECT_FALSE(compiled.accepts("\x01\x02"));  // raw control characters are not JSON
  EXPECT_FALSE(compiled.accepts("\\u0001\\u0004"));
}

TEST(ChoiceGrammar, AcceptsExactlyTheChoices) {
  const std::vector<std::string> choices = {"yes", "no", "maybe \"so\"", "a\\b\nc", "yes", ""};
  const Compiled compiled = compile_gbnf(choice_gbnf(choices));
  for (const std::string& choice : choices) EXPECT_TRUE(compiled.accepts(choice)) << choice;
  EXPECT_FALSE(compiled.accepts("ye"));
  EXPECT_FALSE(compiled.accepts("yesno"));
  EXPECT_FALSE(compiled.accepts("maybe so"));
  EXPECT_FALSE(compiled.accepts(" no"));
}

TEST(GbnfLiteral, EscapesQuotesBackslashesAndControlBytes) {
  EXPECT_EQ(gbnf_literal("a\"b"), "\"a\\\"b\"");
  EXPECT_EQ(gbnf_literal("a\\b"), "\"a\\\\b\"");
  EXPECT_EQ(gbnf_literal("\x01\n\x7F"), "\"\\x01\\x0A\\x7F\"");
  EXPECT_EQ(gbnf_literal("\xC3\xA9"), "\"\xC3\xA9\"");
  EXPECT_EQ(gbnf_literal(""), "\"\"");
  const Compiled compiled = compile_gbnf("root ::= " + gbnf_literal("q\"\\\t\x01\xC3\xA9") + "\n");
  EXPECT_TRUE(compiled.accepts("q\"\\\t\x01\xC3\xA9"));
}

}  // namespace
}  // namespace trellis
