// Speculative decoding through the engine on the tiny synthetic model: decode steps verify drafts
// from the prefix cache, the request's own tokens, the n-gram pool and a draft model, and every
// output is exactly what decoding without speculation gives (tokens, text, finish reason, the
// logits and logprobs of each token), greedy or sampled with a seed, alone or batched, with the
// prefix cache on or off. Rejected guesses leave nothing behind: every block returns, the tree
// holds verified tokens only.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "grammar/gbnf.h"
#include "test_support.h"

namespace trellis {
namespace {

using Tokens = std::vector<TokenId>;

EngineConfig config_with(bool speculation, bool cache) {
  EngineConfig config;
  config.n_threads = 2;
  config.block_size = 8;
  config.n_ctx = 256;
  config.prefix_cache.enabled = cache;
  if (!speculation) config.speculation.sources.fill(false);
  // Draft lengths by acceptance and rows alone, not by timings: the tests count drafts (the
  // batched and draft-model tests turn the step costs back on; their counts are loose).
  config.speculation.length.weigh_step_cost = false;
  return config;
}

std::unique_ptr<Engine> make_engine(const EngineConfig& config) {
  Result<std::unique_ptr<Engine>> engine = Engine::create(testing::tiny_engine_model(), config);
  EXPECT_TRUE(engine.ok()) << engine.error().message;
  return engine.ok() ? std::move(engine).value() : nullptr;
}

Tokens random_tokens(std::mt19937& rng, int n) {
  Tokens t;
  for (int i = 0; i < n; ++i) t.push_back(std::uniform_int_distribution<TokenId>(3, 2000)(rng));
  return t;
}

// What a request's output must match between runs.
struct Output {
  Tokens tokens;
  std::string text;
  FinishReason finish_reason = FinishReason::NONE;
  std::vector<std::vector<float>> logits;
  std::vector<Logprobs> logprobs;
};

Output output_of(const RequestOutput& out) {
  return {out.tokens, out.text, out.finish_reason, out.logits, out.logprobs};
}

Output run(Engine& engine, EngineRequest request) {
  Result<RequestOutput> out = engine.run(std::move(request));
  EXPECT_TRUE(out.ok()) << out.error().message;
  return out.ok() ? output_of(*out) : Output{};
}

void expect_same(const Output& a, const Output& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  EXPECT_EQ(a.text, b.text) << what;
  EXPECT_EQ(a.finish_reason, b.finish_reason) << what;
  EXPECT_EQ(a.logits, b.logits) << what;  // bit for bit: the same rows were sampled
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << what;
  for (size_t i = 0; i < a.logprobs.size(); ++i) {
    EXPECT_EQ(a.logprobs[i].chosen.id, b.logprobs[i].chosen.id) << what;
    EXPECT_EQ(a.logprobs[i].chosen.logprob, b.logprobs[i].chosen.logprob) << what;
    ASSERT_EQ(a.logprobs[i].top.size(), b.logprobs[i].top.size()) << what;
    for (size_t k = 0; k < a.logprobs[i].top.size(); ++k)
      EXPECT_EQ(a.logprobs[i].top[k].id, b.logprobs[i].top[k].id) << what;
  }
}

// Each request run alone on `engine`, one after another.
std::vector<Output> run_each(Engine& engine, const std::vector<EngineRequest>& requests) {
  std::vector<Output> outputs;
  for (const EngineRequest& r : requests) outputs.push_back(run(engine, r));
  return outputs;
}

// The requests submitted at once (they share steps), each output compared with `expected`.
void expect_together(Engine& engine, const std::vector<EngineRequest>& requests,
                     const std::vector<Output>& expected, const std::string& what) {
  std::vector<RequestHandle> handles;
  for (const EngineRequest& r : requests) {
    Result<RequestHandle> h = engine.submit(r);
    ASSERT_TRUE(h.ok()) << h.error().message;
    handles.push_back(*h);
  }
  for (size_t i = 0; i < handles.size(); ++i)
    expect_same(output_of(handles[i].wait()), expected[i], what + ", request " + std::to_string(i));
}

using testing::expect_no_leak;

DraftCounts counts(const Engine& engine, DraftSource source) {
  return engine.stats().drafts[static_cast<size_t>(source)];
}

TEST(EngineSpeculationTest, ARegeneratedAnswerIsDraftedFromTheCacheAndComesOutTheSame) {
  std::mt19937 rng(1);
  const Tokens prompt = random_tokens(rng, 21);
  const EngineRequest request = testing::greedy_request(prompt, 60, /*return_logits=*/true);
  std::unique_ptr<Engine> plain = make_engine(config_with(false, true));
  const Output expected = run(*plain, request);

  std::unique_ptr<Engine> engine = make_engine(config_with(true, true));
  expect_same(run(*engine, request), expected, "first run");
  const int64_t first_steps = engine->stats().n_steps;
  const int64_t accepted_before = counts(*engine, DraftSource::PREFIX_CACHE).n_accepted;
  expect_same(run(*engine, request), expected, "regenerated");
  const int64_t second_steps = engine->stats().n_steps - first_steps;
  // The tree holds the whole answer: drafts of up to 8 tokens, all kept, so the 60 tokens take a
  // handful of decode steps instead of 59.
  EXPECT_GE(counts(*engine, DraftSource::PREFIX_CACHE).n_accepted - accepted_before, 50);
  EXPECT_LT(second_steps, first_steps / 3) << first_steps << " then " << second_steps;
  expect_no_leak(*engine);
}

// Prompts that repeat a span of their own (prompt lookup drafts it) and answers generated twice
// (the cache and the n-gram pool draft them), all at once: the batch mixes decode tokens, drafts
// being kept and rejected, and prefill chunks.
class EngineSpeculationBatchTest : public ::testing::TestWithParam<bool> {};

TEST_P(EngineSpeculationBatchTest, BatchedOutputsAreThoseOfDecodingWithoutSpeculation) {
  const bool cache = GetParam();
  std::mt19937 rng(7);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 6; ++i) {
    const Tokens span = random_tokens(rng, 12);
    Tokens prompt = random_tokens(rng, 5);
    prompt.insert(prompt.end(), span.begin(), span.end());
    prompt.insert(prompt.end(), span.begin(), span.begin() + 4);  // the span again: a copy begins
    EngineRequest r = testing::greedy_request(prompt, 40 + 3 * i, /*return_logits=*/true);
    requests.push_back(r);
    requests.push_back(r);  // the same again, at once and later
  }
  std::unique_ptr<Engine> plain = make_engine(config_with(false, cache));
  const std::vector<Output> expected = run_each(*plain, requests);

  EngineConfig config = config_with(true, cache);
  config.speculation.length.weigh_step_cost = true;
  std::unique_ptr<Engine> engine = make_engine(config);
  for (int round = 0; round < 2; ++round)
    expect_together(*engine, requests, expected, "round " + std::to_string(round));
  int64_t drafted = 0;
  int64_t accepted = 0;
  for (const DraftCounts& c : engine->stats().drafts) {
    drafted += c.n_drafted;
    accepted += c.n_accepted;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(drafted, accepted);  // some were rejected: the rollback ran
  expect_no_leak(*engine);
}

INSTANTIATE_TEST_SUITE_P(CacheOnAndOff, EngineSpeculationBatchTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "cache_on" : "cache_off"; });

TEST(EngineSpeculationTest, SeededSamplingGivesTheSameTokensWithSpeculation) {
  std::mt19937 rng(3);
  const Tokens prompt = random_tokens(rng, 17);
  std::unique_ptr<Engine> plain = make_engine(config_with(false, true));
  std::unique_ptr<Engine> engine = make_engine(config_with(true, true));
  for (uint64_t seed : {1u, 2u, 3u, 1u, 2u}) {  // repeated seeds regenerate: cache drafts
    EngineRequest r;
    r.prompt = prompt;
    r.max_tokens = 48;
    r.ignore_eos = true;
    r.sampling.temperature = 0.8f;
    r.sampling.top_k = 40;
    r.sampling.seed = seed;
    r.logprobs = 2;
    expect_same(run(*engine, r), run(*plain, r), "seed " + std::to_string(seed));
  }
  EXPECT_GT(counts(*engine, DraftSource::PREFIX_CACHE).n_accepted, 40);
  expect_no_leak(*engine);
}

TEST(EngineSpeculationTest, StopStringsAndMaxTokensEndWhereTheyWouldWithoutSpeculation) {
  std::mt19937 rng(5);
  const Tokens prompt = random_tokens(rng, 19);
  std::unique_ptr<Engine> plain = make_engine(config_with(false, true));
  const Output whole = run(*plain, testing::greedy_request(prompt, 40));
  ASSERT_GT(whole.text.size(), 20u);
  EngineRequest stopped = testing::greedy_request(prompt, 40);
  stopped.stop = {whole.text.substr(whole.text.size() / 2, 3)};
  stopped.logprobs = 1;
  EngineRequest shorter = testing::greedy_request(prompt, 13);

  std::unique_ptr<Engine> engine = make_engine(config_with(true, true));
  run(*engine, testing::greedy_request(prompt, 40));  // the tree now drafts all of it
  for (int round = 0; round < 2; ++round) {
    const Output out = run(*engine, stopped);
    expect_same(out, run(*plain, stopped), "stop string");
    EXPECT_EQ(out.finish_reason, FinishReason::STOP);
    EXPECT_LT(out.tokens.size(), whole.tokens.size());
    const Output cut = run(*engine, shorter);
    expect_same(cut, run(*plain, shorter), "max_tokens");
    EXPECT_EQ(cut.tokens.size(), 13u);
  }
  expect_no_leak(*engine);
}

// Constrained requests regenerated: the cache's drafts are cut where the grammar refuses a token
// (none is here: the answer is the grammar's), jump-forward's forced tokens end a verification,
// a draft model's ungrammatical guesses are rejected, and the outputs are those without
// speculation.
TEST(EngineSpeculationTest, ConstrainedOutputsAreThoseWithoutSpeculation) {
  Result<Grammar> parsed = parse_gbnf(R"(
    root ::= "{\"name\":\"" [a-z ]{1,12} "\",\"n\":" [0-9]{1,3} ",\"ok\":" ("true" | "false") "}"
  )");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  auto grammar = std::make_shared<const Grammar>(std::move(parsed).value());
  std::mt19937 rng(17);
  for (bool jump_forward : {false, true}) {
    EngineConfig plain_config = config_with(false, true);
    plain_config.jump_forward = jump_forward;
    EngineConfig spec_config = config_with(true, true);
    spec_config.jump_forward = jump_forward;
    spec_config.draft_model = testing::tiny_draft_model();  // where the cache has nothing
    std::unique_ptr<Engine> plain = make_engine(plain_config);
    std::unique_ptr<Engine> engine = make_engine(spec_config);
    for (int i = 0; i < 4; ++i) {
      EngineRequest r;
      r.prompt = random_tokens(rng, 13 + i);
      r.max_tokens = 80;
      r.sampling.temperature = i == 0 ? 0.0f : 1.2f;
      r.sampling.seed = 50 + static_cast<uint64_t>(i);
      r.grammar = grammar;
      const Output expected = run(*plain, r);
      EXPECT_EQ(expected.finish_reason, FinishReason::STOP);
      expect_same(run(*engine, r), expected, "first");
      expect_same(run(*engine, r), expected, "regenerated");
    }
    EXPECT_GT(counts(*engine, DraftSource::PREFIX_CACHE).n_accepted, 0);
    EXPECT_GT(counts(*engine, DraftSource::DRAFT_MODEL).n_drafts, 0);
    expect_no_leak(*engine);
  }
}

TEST(EngineSpeculationTest, ARequestCanOptOut) {
  std::mt19937 rng(11);
  const Tokens prompt = random_tokens(rng, 15);
  std::unique_ptr<Engine> engine = make_engine(config_with(true, true));
  EngineRequest r = testing::greedy_request(prompt, 30);
  auto n_drafts = [&] {
    int64_t n = 0;
    for (const DraftCounts& c : engine->stats().drafts) n += c.n_drafts;
    return n;
  };
  const Output first = run(*engine, r);
  const int64_t drafts_before = n_drafts();
  r.speculate = false;
  expect_same(run(*engine, r), first, "opted out");
  EXPECT_EQ(n_drafts(), drafts_before);  // though the tree holds the whole answer
  r.speculate = true;
  expect_same(run(*engine, r), first, "speculating");
  EXPECT_GT(n_drafts(), drafts_before);
  expect_no_leak(*engine);
}

TEST(EngineSpeculationTest, TheNgramPoolDraftsWhatAnEarlierRequestGenerated) {
  std::mt19937 rng(13);
  const Tokens prompt = random_tokens(rng, 15);
  EngineConfig config = config_with(true, /*cache=*/false);  // nothing in the tree
  config.speculation.sources = {false, false, true};         // the pool alone
  std::unique_ptr<Engine> engine = make_engine(config);
  std::unique_ptr<Engine> plain = make_engine(config_with(false, false));
  const EngineRequest r = testing::greedy_request(prompt, 40);
  const Output expected = run(*plain, r);
  expect_same(run(*engine, r), expected, "first");
  expect_same(run(*engine, r), expected, "second");
  // Most of the answer (an n-gram seen twice in it keeps only its later continuation).
  EXPECT_GE(counts(*engine, DraftSource::NGRAM_POOL).n_accepted, 20);
  expect_no_leak(*engine);
}

// A draft model alone drafts: the target's own file (it agrees by construction: the kernels are
// batch-invariant, so its greedy guesses are the target's tokens) and another model of the same
// vocabulary (it mostly disagrees). Requests in pairs with the same prompt at once: the draft's
// catch-up over blocks they share runs once. Outputs are always those without speculation.
class EngineDraftModelTest : public ::testing::TestWithParam<bool> {};

TEST_P(EngineDraftModelTest, DraftModelGuessesAreVerifiedAndTheOutputsAreThoseWithoutThem) {
  const bool cache = GetParam();
  std::mt19937 rng(23);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 3; ++i) {
    EngineRequest r = testing::greedy_request(random_tokens(rng, 20 + 7 * i), 30 + 5 * i,
                                              /*return_logits=*/true);
    requests.push_back(r);
    requests.push_back(r);
  }
  EngineRequest sampled = requests[0];
  sampled.sampling.temperature = 0.9f;
  sampled.sampling.seed = 4;
  sampled.logprobs = 2;
  requests.push_back(sampled);
  std::unique_ptr<Engine> plain = make_engine(config_with(false, cache));
  const std::vector<Output> expected = run_each(*plain, requests);

  for (const std::string& draft : {testing::tiny_engine_model(), testing::tiny_draft_model()}) {
    const bool agrees = draft == testing::tiny_engine_model();
    EngineConfig config = config_with(true, cache);
    config.speculation.sources = {false, false, false, true};
    // Lengths by acceptance, not by the steps' measured cost, so that the counts below do not
    // depend on the machine's load.
    config.speculation.length.weigh_step_cost = false;
    config.draft_model = draft;
    std::unique_ptr<Engine> engine = make_engine(config);
    ASSERT_NE(engine, nullptr);
    std::vector<int64_t> draft_rows;
    for (int round = 0; round < 2; ++round) {
      expect_together(
          *engine, requests, expected,
          std::string(agrees ? "self" : "other") + " draft, round " + std::to_string(round));
      draft_rows.push_back(engine->stats().n_draft_model_rows);
    }
    const DraftCounts c = counts(*engine, DraftSource::DRAFT_MODEL);
    EXPECT_GT(c.n_drafted, 40);
    if (agrees) {
      // All but the greedy guesses past max_tokens and the sampled request's misses.
      EXPECT_GT(c.n_accepted, c.n_drafted * 8 / 10) << c.n_accepted << " of " << c.n_drafted;
    } else {
      EXPECT_LT(c.n_accepted, c.n_drafted / 2) << c.n_accepted << " of " << c.n_drafted;
    }
    if (cache) {
      // The second round's prompts are cached with the draft's KV of them: no catch-up over them.
      EXPECT_LT(draft_rows[1] - draft_rows[0], draft_rows[0]) << draft_rows[0];
    }
    expect_no_leak(*engine);
  }
}

INSTANTIATE_TEST_SUITE_P(CacheOnAndOff, EngineDraftModelTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "cache_on" : "cache_off"; });

// A pool too small for the batch: sequences are preempted and their blocks evicted and handed out
// again while the draft model tracks what it computed in them; its guesses stay the target's.
TEST(EngineSpeculationTest, DraftModelUnderPoolPressureKeepsOutputsAndLeaksNothing) {
  std::mt19937 rng(29);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 6; ++i)
    requests.push_back(testing::greedy_request(random_tokens(rng, 30 + 4 * i), 40));
  EngineConfig plain_config = config_with(false, true);
  EngineConfig config = config_with(true, true);
  config.speculation.sources = {false, false, false, true};
  config.draft_model = testing::tiny_engine_model();
  config.n_ctx = 96;
  config.kv_tokens = 96 + 3 * 8;  // about one and a half requests
  plain_config.n_ctx = 96;
  std::unique_ptr<Engine> plain = make_engine(plain_config);
  std::unique_ptr<Engine> engine = make_engine(config);
  ASSERT_NE(engine, nullptr);
  expect_together(*engine, requests, run_each(*plain, requests), "under pressure");
  EXPECT_GT(engine->stats().n_preemptions + engine->stats().n_blocks_evicted, 0);
  const DraftCounts c = counts(*engine, DraftSource::DRAFT_MODEL);
  EXPECT_GT(c.n_accepted, c.n_drafted * 8 / 10) << c.n_accepted << " of " << c.n_drafted;
  expect_no_leak(*engine);
}

TEST(EngineSpeculationTest, ADraftModelThatCannotBeLoadedIsAnError) {
  EngineConfig config = config_with(true, true);
  config.draft_model = testing::temp_dir() + "/no-such-draft.gguf";
  Result<std::unique_ptr<Engine>> engine = Engine::create(testing::tiny_engine_model(), config);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.error().message.find("draft model"), std::string::npos)
      << engine.error().message;
}

TEST(EngineSpeculationTest, ParsesTheSourcesFlag) {
  Result<SpeculationConfig> off = parse_speculation("off");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->enabled());
  Result<SpeculationConfig> on = parse_speculation("on");
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on->uses(DraftSource::PREFIX_CACHE) && on->uses(DraftSource::NGRAM_POOL) &&
              on->uses(DraftSource::DRAFT_MODEL));
  Result<SpeculationConfig> two = parse_speculation("prompt_lookup,ngram_pool");
  ASSERT_TRUE(two.ok());
  EXPECT_FALSE(two->uses(DraftSource::PREFIX_CACHE));
  EXPECT_TRUE(two->uses(DraftSource::PROMPT_LOOKUP) && two->uses(DraftSource::NGRAM_POOL));
  EXPECT_FALSE(two->uses(DraftSource::DRAFT_MODEL));
  Result<SpeculationConfig> bad = parse_speculation("tree,lookahead");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("'tree'"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace trellis
