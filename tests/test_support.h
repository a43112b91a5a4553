// Helpers shared by the tests: where the data lives, and skipping when it is absent.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gguf/gguf_value.h"
#include "tokenizer/vocab.h"

namespace trellis::testing {

// A SentencePiece vocab in which every text can be encoded: <unk> 0 (UNK), <s> 1 (BOS), </s> 2
// (EOS, both CONTROL), then the byte tokens <0x00>..<0xFF> at 3..258. add_bos and
// add_space_prefix are left false. Tests append their own tokens with add_token.
Vocab byte_fallback_vocab();
void add_token(Vocab& vocab, const std::string& text, TokenType type, float score = 0.0f);

// The ../shared folder beside the checkout (models, tokenizer vectors, reference outputs).
std::string shared_dir();
// True when shared_dir() exists; tests that need it call GTEST_SKIP() otherwise.
bool have_shared_dir();
// A fresh empty directory for this test's files, removed at process exit.
std::string temp_dir();

// A copy of the GGUF `source` at temp_dir()/name.gguf: its metadata with `key` set to `value`
// (when given), and every tensor but `dropped` (none when empty). For tests of files that lie or
// lack something.
std::string rewrite_gguf(const std::string& source, const std::string& name,
                         const std::string& key = "", std::optional<GgufValue> value = std::nullopt,
                         const std::string& dropped = "");

// A greedy request that generates exactly max_tokens tokens (EOS ignored), with the logits of
// each generated token when `return_logits`.
EngineRequest greedy_request(std::vector<TokenId> prompt, int32_t max_tokens,
                             bool return_logits = false);

// The tiny preset as Q8_0 (seed 9), made once per test process: the engine tests' model.
const std::string& tiny_engine_model();
// The same shape and vocabulary with other weights (seed 10): a draft model that disagrees with
// tiny_engine_model() on most tokens.
const std::string& tiny_draft_model();
// The tiny preset recast as gpt-oss (Q8_0): a mixture of experts with biases, attention sinks and
// window layers, for the tests that run every family's machinery through the engine.
const std::string& tiny_moe_engine_model();
// The tiny preset recast as gemma3 (Q8_0): a window of 32 positions on layers 0 and 2 of 4.
const std::string& tiny_gemma3_engine_model();

// How many repetitions a stress or randomized test runs: `full` times TRELLIS_TEST_SCALE (a
// number in (0, 1], default 1), rounded up, and never below `minimum`. The sanitizer runs set
// the scale below 1: they take the same code paths, only fewer times over, since a sanitizer
// slows each repetition several times. Size `minimum` so that every path the test means to reach
// is still reached. A value that is not a number in (0, 1] counts as 1.
int scaled_count(int full, int minimum);

// Every block came back: the pool's and the tree's invariants hold, no request holds a block,
// and once the cache is flushed every block is free.
void expect_no_leak(Engine& engine);

// True in the sanitizer builds (AddressSanitizer or ThreadSanitizer). End-to-end checks whose code
// paths other tests already take under the sanitizer skip there: the sanitizer runs stay short.
constexpr bool under_sanitizer() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  return false;
#endif
}

}  // namespace trellis::testing

// Skips the current test with a clear message when ../shared is absent.
#define TRELLIS_REQUIRE_SHARED()                                                        \
  do {                                                                                  \
    if (!::trellis::testing::have_shared_dir())                                         \
      GTEST_SKIP() << "needs " << ::trellis::testing::shared_dir() << " (not present)"; \
  } while (0)
