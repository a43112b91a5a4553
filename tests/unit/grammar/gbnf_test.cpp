// The GBNF parser and the byte automaton together: what a grammar accepts and rejects, and the
// errors a bad grammar gets.
#include "grammar/gbnf.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "grammar/grammar_automaton.h"

namespace trellis {
namespace {

std::shared_ptr<const Grammar> compile(const std::string& text) {
  Result<Grammar> grammar = parse_gbnf(text);
  EXPECT_TRUE(grammar.ok()) << (grammar.ok() ? "" : grammar.error().message);
  if (!grammar.ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(grammar).value());
}

std::string error_of(const std::string& text, const GrammarLimits& limits = {}) {
  Result<Grammar> grammar = parse_gbnf(text, limits);
  return grammar.ok() ? "(no error)" : grammar.error().message;
}

TEST(GbnfTest, LiteralsClassesAndRepetitions) {
  auto g = compile(R"(
    root ::= "id:" [0-9]+ ( "," [a-c]{2,3} )? tail   # a comment
    tail ::= "!" | "?" | ""
  )");
  ASSERT_TRUE(g);
  for (const char* ok : {"id:7", "id:0123", "id:1,ab", "id:1,abc!", "id:9?", "id:5,cc?"})
    EXPECT_TRUE(grammar_accepts(g, ok)) << ok;
  for (const char* bad : {"", "id:", "id:x", "id:1,a", "id:1,abcd", "id:1!!", "Id:1", "id:1 "})
    EXPECT_FALSE(grammar_accepts(g, bad)) << bad;
}

TEST(GbnfTest, NegatedClassesAndDotMatchWholeUtf8Characters) {
  auto g = compile(R"(root ::= "\"" [^"\\]* "\"" .)");
  ASSERT_TRUE(g);
  EXPECT_TRUE(grammar_accepts(g, "\"h\xC3\xA9llo \xE2\x82\xAC\"x"));
  EXPECT_TRUE(grammar_accepts(g, "\"\"\xF0\x9F\x98\x80"));
  EXPECT_FALSE(grammar_accepts(g, "\"a\\\"x"));
  // Bytes that are not UTF-8 are never matched by a class or a dot.
  EXPECT_FALSE(grammar_accepts(g, "\"\xC3\"x"));
  EXPECT_FALSE(grammar_accepts(g, "\"\"\xFF"));
  EXPECT_FALSE(grammar_accepts(g, "\"\"\xED\xA0\x80"));  // a surrogate
}

TEST(GbnfTest, CodePointRangesAcrossEncodingLengths) {
  auto g = compile(R"(root ::= [\u0070-\u00A0\u07FF-\u0801\U0001F600-\U0001F64F])");
  ASSERT_TRUE(g);
  for (const char* ok : {"p", "\x7F", "\xC2\x80", "\xC2\xA0", "\xDF\xBF", "\xE0\xA0\x80",
                         "\xE0\xA0\x81", "\xF0\x9F\x98\x80", "\xF0\x9F\x99\x8F"})
    EXPECT_TRUE(grammar_accepts(g, ok)) << ok;
  for (const char* bad : {"o", "\xC2\xA1", "\xDF\xBE", "\xE0\xA0\x82", "\xF0\x9F\x99\x90"})
    EXPECT_FALSE(grammar_accepts(g, bad)) << bad;
}

TEST(GbnfTest, RecursionNestsAndTailLoopsStayFlat) {
  auto g = compile(R"(
    root  ::= value
    value ::= "[" ( value ( "," value )* )? "]" | [0-9]
  )");
  ASSERT_TRUE(g);
  EXPECT_TRUE(grammar_accepts(g, "[[1,[2,[]]],3]"));
  EXPECT_TRUE(grammar_accepts(g, std::string(200, '[') + std::string(200, ']')));
  EXPECT_FALSE(grammar_accepts(g, "[[1,[2,[]]],3"));
  EXPECT_FALSE(grammar_accepts(g, "[1,]"));

  // A long run of a starred item keeps the automaton at a fixed number of states.
  auto flat = std::make_shared<const Grammar>(parse_gbnf(R"(root ::= "a" [b-z]* "!")").value());
  GrammarAutomaton automaton(flat);
  auto state = automaton.advance(automaton.initial(), "a" + std::string(5000, 'q'));
  ASSERT_GE(state, 0);
  EXPECT_LE(automaton.n_states(), 3);
  EXPECT_TRUE(automaton.is_accepting(automaton.advance(state, '!')));
}

TEST(GbnfTest, AmbiguousGrammarsAcceptEveryParse) {
  auto g = compile(R"(root ::= ("a" | "ab") ("bc" | "c") )");
  ASSERT_TRUE(g);
  EXPECT_TRUE(grammar_accepts(g, "abc"));
  EXPECT_TRUE(grammar_accepts(g, "abbc"));
  EXPECT_TRUE(grammar_accepts(g, "ac"));
  EXPECT_FALSE(grammar_accepts(g, "abbbc"));
}

TEST(GbnfTest, AutomatonReportsAllowedBytesAndFinalStates) {
  auto g = compile(R"(root ::= "x" [0-2] | "yes")");
  ASSERT_TRUE(g);
  GrammarAutomaton automaton(g);
  const auto start = automaton.initial();
  EXPECT_EQ(automaton.allowed_bytes(start).count(), 2);
  EXPECT_EQ(automaton.advance(start, 'z'), GrammarAutomaton::kReject);
  const auto after_x = automaton.advance(start, 'x');
  EXPECT_EQ(automaton.allowed_bytes(after_x).count(), 3);
  EXPECT_FALSE(automaton.is_accepting(after_x));
  const auto done = automaton.advance(after_x, '1');
  EXPECT_TRUE(automaton.is_accepting(done));
  EXPECT_TRUE(automaton.is_final(done));
}

TEST(GbnfTest, BadGrammarsAreRefusedByName) {
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  EXPECT_NE(error_of("item ::= \"a\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(error_of("root ::= thing").find("'thing' is used but never defined"),
            std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left recursion: rule 'root'"),
            std::string::npos);
  EXPECT_NE(error_of("root ::= x\nx ::= y? root \"a\" | \"b\"\ny ::= \"c\"").find("left recursion"),
            std::string::npos);
  EXPECT_NE(error_of("root ::= loop\nloop ::= \"a\" loop").find("matches no string"),
            std::string::npos);
  EXPECT_NE(error_of("root ::= [^\\x00-\\U0010FFFF]").find("matches no string"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"abc").find("unterminated string literal at line 1"),
            std::string::npos);
  EXPECT_NE(error_of("root ::= [a-").find("unterminated character class"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\n  ( \"b\" ").find("expected ')' at line 2"),
            std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(error_of("root ::= [z-a]").find("out of order"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,1}").find("min > max"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\xFF\"").find("not valid UTF-8"), std::string::npos);
}

TEST(GbnfTest, HostileSizesAreRefusedQuickly) {
  GrammarLimits limits;
  limits.max_elements = 10000;
  EXPECT_NE(error_of("root ::= \"a\"{0,100000000000}", limits).find("size limit"),
            std::string::npos);
  // Nested repetitions do not multiply: each level refers to the one inside as one rule.
  Result<Grammar> nested = parse_gbnf("root ::= ((\"ab\"{0,100}){50,100}){0,100}", limits);
  ASSERT_TRUE(nested.ok()) << nested.error().message;
  EXPECT_LT(nested->elements.size(), 2000u);
  EXPECT_NE(error_of("root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')'))
                .find("nested too deeply"),
            std::string::npos);
}

TEST(GbnfTest, ExplodingAmbiguityOverflowsInsteadOfHanging) {
  // Every split of the a's between the levels is a parse: the number of stacks grows with the
  // input. The automaton gives up (kOverflow) at its bound on stacks per state.
  auto g = compile(R"(root ::= (("a"{0,40}){0,40}){0,40} "!")");
  ASSERT_TRUE(g);
  GrammarAutomaton automaton(g);
  auto state = automaton.advance(automaton.initial(), std::string(200, 'a'));
  EXPECT_EQ(state, GrammarAutomaton::kOverflow);
  EXPECT_TRUE(automaton.overflowed());
}

}  // namespace
}  // namespace trellis
