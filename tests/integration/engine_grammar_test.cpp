// Grammar-constrained requests through the engine on the tiny synthetic model: every output is a
// sentence of the grammar (greedy and sampled, alone, batched with free requests, forked), the
// outputs do not depend on the cache or the batch, jump-forward appends forced tokens without
// sampling them, and max_tokens mid-sentence ends with LENGTH.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_automaton.h"
#include "test_support.h"

namespace trellis {
namespace {

using Tokens = std::vector<TokenId>;

const char* kRecordGrammar = R"(
  root ::= "{\"name\":\"" [a-z ]{1,10} "\",\"n\":" [0-9]{1,3} ",\"ok\":" ("true" | "false") "}"
)";

std::shared_ptr<const Grammar> compile(const char* text) {
  Result<Grammar> grammar = parse_gbnf(text);
  EXPECT_TRUE(grammar.ok()) << (grammar.ok() ? "" : grammar.error().message);
  return std::make_shared<const Grammar>(std::move(grammar).value());
}

EngineConfig config(bool cache, bool jump_forward) {
  EngineConfig c;
  c.n_threads = 2;
  c.block_size = 8;
  c.n_ctx = 256;
  c.prefix_cache.enabled = cache;
  c.jump_forward = jump_forward;
  return c;
}

std::unique_ptr<Engine> make_engine(const EngineConfig& c) {
  Result<std::unique_ptr<Engine>> engine = Engine::create(testing::tiny_engine_model(), c);
  EXPECT_TRUE(engine.ok()) << engine.error().message;
  return engine.ok() ? std::move(engine).value() : nullptr;
}

EngineRequest constrained(std::shared_ptr<const Grammar> grammar, Tokens prompt, float temperature,
                          uint64_t seed) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = 120;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.grammar = std::move(grammar);
  return r;
}

Tokens prompt_of(int i) {
  Tokens p;
  for (int k = 0; k < 20 + i % 7; ++k) p.push_back(300 + (k * 37 + i * 11) % 700);
  return p;
}

void expect_sentence(const std::shared_ptr<const Grammar>& grammar, const RequestOutput& out) {
  EXPECT_EQ(out.finish_reason, FinishReason::STOP) << out.error;
  EXPECT_TRUE(grammar_accepts(grammar, out.text)) << out.text;
}

TEST(EngineGrammarTest, EveryOutputIsASentenceGreedyAndSampled) {
  auto grammar = compile(kRecordGrammar);
  std::unique_ptr<Engine> engine = make_engine(config(true, false));
  ASSERT_NE(engine, nullptr);
  for (int i = 0; i < 8; ++i) {
    Result<RequestOutput> out =
        engine->run(constrained(grammar, prompt_of(i), i == 0 ? 0.0f : 1.5f, 1000 + i));
    ASSERT_TRUE(out.ok()) << out.error().message;
    expect_sentence(grammar, *out);
    EXPECT_EQ(engine->tokenizer().decode(out->tokens), out->text);
    EXPECT_EQ(out->stats.n_forced_tokens, 0);
  }
  EXPECT_EQ(engine->stats().n_blocks_in_use, 0);
}

TEST(EngineGrammarTest, JumpForwardAppendsForcedTokensAndStaysExact) {
  auto grammar = compile(kRecordGrammar);
  std::vector<RequestOutput> want;
  int64_t steps_without = 0, steps_with = 0;
  {
    std::unique_ptr<Engine> engine = make_engine(config(false, false));
    ASSERT_NE(engine, nullptr);
    for (int i = 0; i < 4; ++i) {
      Result<RequestOutput> out = engine->run(constrained(grammar, prompt_of(i), 0.0f, 0));
      ASSERT_TRUE(out.ok());
      expect_sentence(grammar, *out);
    }
    steps_without = engine->stats().n_steps;
  }
  // Jump-forward, cache off, one at a time: the reference of the exactness checks below.
  {
    std::unique_ptr<Engine> engine = make_engine(config(false, true));
    ASSERT_NE(engine, nullptr);
    for (int i = 0; i < 4; ++i) {
      Result<RequestOutput> out = engine->run(constrained(grammar, prompt_of(i), 0.0f, 0));
      ASSERT_TRUE(out.ok());
      expect_sentence(grammar, *out);
      EXPECT_GT(out->stats.n_forced_tokens, 0) << out->text;
      want.push_back(*out);
    }
    steps_with = engine->stats().n_steps;
    EXPECT_GT(engine->stats().n_forced_tokens, 0);
  }
  EXPECT_LT(steps_with, steps_without) << "forced tokens are not sampled one step at a time";

  // Cache on, all submitted at once next to free requests (sampled): the same tokens.
  std::unique_ptr<Engine> engine = make_engine(config(true, true));
  ASSERT_NE(engine, nullptr);
  std::vector<RequestHandle> handles, free_handles;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 4; ++i) {
      Result<RequestHandle> h = engine->submit(constrained(grammar, prompt_of(i), 0.0f, 0));
      ASSERT_TRUE(h.ok());
      handles.push_back(*h);
      EngineRequest free_request = testing::greedy_request(prompt_of(i + 20), 30);
      Result<RequestHandle> f = engine->submit(free_request);
      ASSERT_TRUE(f.ok());
      free_handles.push_back(*f);
    }
    if (round == 0)  // the second round finds the first's prompts in the cache
      for (RequestHandle& h : handles) h.wait();
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    const RequestOutput& got = handles[i].wait();
    EXPECT_EQ(got.tokens, want[i % 4].tokens) << "request " << i;
    EXPECT_EQ(got.text, want[i % 4].text);
  }
  for (RequestHandle& f : free_handles) EXPECT_EQ(f.wait().finish_reason, FinishReason::LENGTH);
  EXPECT_GT(handles[5].wait().stats.n_cached_tokens, 0) << "the second round hits the cache";
  EXPECT_EQ(engine->stats().n_blocks_in_use, 0);
}

TEST(EngineGrammarTest, MaxTokensMidSentenceEndsWithLength) {
  auto grammar = compile(kRecordGrammar);
  std::unique_ptr<Engine> engine = make_engine(config(true, true));
  ASSERT_NE(engine, nullptr);
  EngineRequest request = constrained(grammar, prompt_of(1), 0.0f, 0);
  request.max_tokens = 3;
  Result<RequestOutput> out = engine->run(request);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->finish_reason, FinishReason::LENGTH);
  EXPECT_EQ(out->tokens.size(), 3u);
  // A prefix of a sentence: the automaton can still go on from it.
  GrammarAutomaton automaton(grammar);
  EXPECT_GE(automaton.advance(automaton.initial(), out->text), 0) << out->text;
  EXPECT_EQ(engine->stats().n_blocks_in_use, 0);
}

TEST(EngineGrammarTest, LogprobsAndStopStringsKeepWorking) {
  auto grammar = compile(kRecordGrammar);
  std::unique_ptr<Engine> engine = make_engine(config(true, true));
  ASSERT_NE(engine, nullptr);
  // Logprobs: every token sampled (none forced), one entry per token.
  EngineRequest request = constrained(grammar, prompt_of(2), 0.0f, 0);
  request.logprobs = 2;
  Result<RequestOutput> out = engine->run(request);
  ASSERT_TRUE(out.ok());
  expect_sentence(grammar, *out);
  EXPECT_EQ(out->stats.n_forced_tokens, 0);
  EXPECT_EQ(out->logprobs.size(), out->tokens.size());
  // A stop string inside the sentence ends it there.
  Result<RequestOutput> whole = engine->run(constrained(grammar, prompt_of(2), 0.0f, 0));
  ASSERT_TRUE(whole.ok());
  EngineRequest stopped = constrained(grammar, prompt_of(2), 0.0f, 0);
  stopped.stop = {"\"n\""};
  Result<RequestOutput> cut = engine->run(stopped);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->finish_reason, FinishReason::STOP);
  ASSERT_NE(whole->text.find("\"n\""), std::string::npos);
  EXPECT_EQ(cut->text, whole->text.substr(0, whole->text.find("\"n\"")));
  EXPECT_EQ(engine->stats().n_blocks_in_use, 0);
}

TEST(EngineGrammarTest, ForkedBranchesEachFollowTheGrammar) {
  auto grammar = compile(kRecordGrammar);
  std::unique_ptr<Engine> engine = make_engine(config(true, true));
  ASSERT_NE(engine, nullptr);
  Result<std::vector<RequestHandle>> branches =
      engine->fork(constrained(grammar, prompt_of(3), 1.2f, 77), 4);
  ASSERT_TRUE(branches.ok()) << branches.error().message;
  std::vector<std::string> texts;
  for (RequestHandle& h : *branches) {
    expect_sentence(grammar, h.wait());
    texts.push_back(h.wait().text);
  }
  EXPECT_TRUE(texts[0] != texts[1] || texts[1] != texts[2] || texts[2] != texts[3]);
  EXPECT_EQ(engine->stats().n_blocks_in_use, 0);
}

TEST(EngineGrammarTest, EndOfSequenceOnlyWhereTheGrammarMayEnd) {
  // "x" then any number of "y": EOS (not ignored here) may end the output after the "x" only.
  auto grammar = compile(R"(root ::= "x" "y"{0,40})");
  std::unique_ptr<Engine> engine = make_engine(config(true, true));
  ASSERT_NE(engine, nullptr);
  for (int i = 0; i < 6; ++i) {
    EngineRequest request = constrained(grammar, prompt_of(i), 2.0f, 500 + i);
    Result<RequestOutput> out = engine->run(request);
    ASSERT_TRUE(out.ok());
    expect_sentence(grammar, *out);
  }
}

}  // namespace
}  // namespace trellis
