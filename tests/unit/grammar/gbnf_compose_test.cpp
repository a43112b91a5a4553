#include "grammar/gbnf_compose.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "grammar/gbnf.h"
#include "grammar/grammar_automaton.h"
#include "grammar/json_schema_grammar.h"

namespace trellis {
namespace {

std::shared_ptr<const Grammar> compile(const std::string& text) {
  Result<Grammar> grammar = parse_gbnf(text);
  EXPECT_TRUE(grammar.ok()) << (grammar.ok() ? "" : grammar.error().message) << "\n" << text;
  return grammar.ok() ? std::make_shared<const Grammar>(std::move(grammar).value()) : nullptr;
}

TEST(GbnfComposeTest, PrefixedSchemasCombineInOneGrammar) {
  JsonGrammarOptions options;
  const std::string a =
      json_schema_to_gbnf(
          nlohmann::ordered_json::parse(
              R"({"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false})"),
          options)
          .value();
  const std::string b =
      json_schema_to_gbnf(nlohmann::ordered_json::parse(
                              R"({"type":"array","items":{"type":"string"},"maxItems":2})"),
                          options)
          .value();
  const std::string gbnf = "root ::= \"a=\" a-root | \"b=\" b-root\n" + prefix_gbnf_rules(a, "a-") +
                           prefix_gbnf_rules(b, "b-");
  auto g = compile(gbnf);
  ASSERT_TRUE(g);
  EXPECT_TRUE(grammar_accepts(g, "a={\"x\":12}"));
  EXPECT_TRUE(grammar_accepts(g, "b=[\"p\",\"q\"]"));
  EXPECT_FALSE(grammar_accepts(g, "a=[\"p\"]"));
  EXPECT_FALSE(grammar_accepts(g, "b=[\"p\",\"q\",\"r\"]"));
  // Literals, classes and counts are not renamed.
  EXPECT_EQ(prefix_gbnf_rules("root ::= \"ws x\" [a-z]{2,3} ws # ws\nws ::= \" \"?", "p-"),
            "p-root ::= \"ws x\" [a-z]{2,3} p-ws # ws\np-ws ::= \" \"?");
}

TEST(GbnfComposeTest, TextWithoutAMarkerStopsShortOfIt) {
  auto g =
      compile("root ::= text \"<tool_call>\" [0-9]\n" + text_without_gbnf("<tool_call>", "text"));
  ASSERT_TRUE(g);
  EXPECT_TRUE(grammar_accepts(g, "<tool_call>7"));
  EXPECT_TRUE(grammar_accepts(g, "Sure <tool <tool_cal <<tool_call>1"));
  EXPECT_TRUE(grammar_accepts(g, "\xC3\xA9t\xC3\xA9 <tool_call>2"));
  EXPECT_FALSE(grammar_accepts(g, "a <tool_call>x<tool_call>3"));  // the marker twice
  EXPECT_FALSE(grammar_accepts(g, "no marker"));
  // Self-overlapping markers follow the failure function.
  auto aab = compile("root ::= text\n" + text_without_gbnf("aab", "text"));
  ASSERT_TRUE(aab);
  EXPECT_TRUE(grammar_accepts(aab, "aaaa ba aba"));
  EXPECT_FALSE(grammar_accepts(aab, "aaaab"));
  EXPECT_FALSE(grammar_accepts(aab, "xaab"));
  EXPECT_TRUE(grammar_accepts(aab, ""));
}

}  // namespace
}  // namespace trellis
