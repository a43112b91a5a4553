// Response builders: the exact JSON of whole responses, streamed chunks, logprobs objects and the
// model list (compared as parsed objects), and the SSE framing.
#include "server/openai_response.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace trellis {
namespace {

ChoiceResult choice(int32_t index, std::string text, FinishReason reason,
                    std::optional<std::vector<LogprobEntry>> logprobs) {
  ChoiceResult c;
  c.index = index;
  c.text = std::move(text);
  c.finish_reason = reason;
  c.logprobs = std::move(logprobs);
  return c;
}

ChoiceResult offset_choice(ChoiceResult c, int64_t text_offset) {
  c.text_offset = text_offset;
  return c;
}

using nlohmann::json;

const ResponseHeader kHeader{"cmpl-7", 1700000000, "tiny"};

TEST(OpenAiResponseTest, UsageJson) {
  EXPECT_EQ(usage_json(TokenUsage{10, 5, 8, std::nullopt}), json::parse(R"({"prompt_tokens": 10,
      "completion_tokens": 5, "total_tokens": 15, "prompt_tokens_details": {"cached_tokens": 8}})"));
  // With a disk tier, the details say how many of the cached tokens were loaded from disk.
  EXPECT_EQ(usage_json(TokenUsage{10, 5, 8, 6}), json::parse(R"({"prompt_tokens": 10,
      "completion_tokens": 5, "total_tokens": 15,
      "prompt_tokens_details": {"cached_tokens": 8, "disk_cached_tokens": 6}})"));
}

TEST(OpenAiResponseTest, FinishReasons) {
  EXPECT_EQ(finish_reason_json(FinishReason::NONE), json(nullptr));
  EXPECT_EQ(finish_reason_json(FinishReason::STOP), json("stop"));
  EXPECT_EQ(finish_reason_json(FinishReason::LENGTH), json("length"));
}

TEST(OpenAiResponseTest, CompletionResponse) {
  const std::vector<ChoiceResult> choices = {
      choice(0, "Hello world", FinishReason::STOP, std::nullopt),
      choice(1, "Hi", FinishReason::LENGTH, std::nullopt),
  };
  EXPECT_EQ(completion_response_json(kHeader, choices, TokenUsage{4, 7, 0, std::nullopt}), json::parse(R"({
      "id": "cmpl-7", "object": "text_completion", "created": 1700000000, "model": "tiny",
      "choices": [
        {"index": 0, "text": "Hello world", "logprobs": null, "finish_reason": "stop"},
        {"index": 1, "text": "Hi", "logprobs": null, "finish_reason": "length"}],
      "usage": {"prompt_tokens": 4, "completion_tokens": 7, "total_tokens": 11,
                "prompt_tokens_details": {"cached_tokens": 0}}})"));
}

TEST(OpenAiResponseTest, ChatCompletionResponse) {
  const ResponseHeader header{"chatcmpl-1", 1700000001, "tiny-chat"};
  const std::vector<ChoiceResult> choices = {
      choice(0, "Hi there!", FinishReason::STOP, std::nullopt)};
  EXPECT_EQ(chat_completion_response_json(header, choices, TokenUsage{20, 3, 16, std::nullopt}), json::parse(R"({
      "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000001, "model": "tiny-chat",
      "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi there!"},
                   "logprobs": null, "finish_reason": "stop"}],
      "usage": {"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23,
                "prompt_tokens_details": {"cached_tokens": 16}}})"));
}

std::vector<LogprobEntry> sample_logprobs() {
  const float minus_inf = -std::numeric_limits<float>::infinity();
  return {
      {{"Hi", -0.5f}, {{"Hi", -0.5f}, {"Hey", -1.5f}, {"Hi", -2.0f}}},
      {{" there", -0.25f}, {{" there", -0.25f}, {"!", minus_inf}}},
  };
}

TEST(OpenAiResponseTest, CompletionLogprobs) {
  // Offsets start at the given 3 and advance by each token's byte length; a repeated alternative
  // text keeps its first (most probable) logprob; -inf becomes -9999.
  EXPECT_EQ(completion_logprobs_json(sample_logprobs(), 3), json::parse(R"({
      "tokens": ["Hi", " there"],
      "token_logprobs": [-0.5, -0.25],
      "top_logprobs": [{"Hi": -0.5, "Hey": -1.5}, {" there": -0.25, "!": -9999.0}],
      "text_offset": [3, 5]})"));
}

TEST(OpenAiResponseTest, ChatLogprobs) {
  // Built step by step: the nested braced form trips a false -Wmaybe-uninitialized in g++ 12 -O2.
  LogprobEntry entry;
  entry.chosen = {"A\xc3\xa9", -0.5f};
  entry.top.push_back(entry.chosen);
  const std::vector<LogprobEntry> entries = {entry};
  EXPECT_EQ(chat_logprobs_json(entries), json::parse(R"({"content": [
      {"token": "Aé", "logprob": -0.5, "bytes": [65, 195, 169],
       "top_logprobs": [{"token": "Aé", "logprob": -0.5, "bytes": [65, 195, 169]}]}]})"));
}

TEST(OpenAiResponseTest, ResponsesCarryLogprobsWhenAsked) {
  const std::vector<ChoiceResult> choices = {
      choice(0, "Hi there", FinishReason::STOP, sample_logprobs())};
  const json completion = completion_response_json(kHeader, choices, TokenUsage{1, 2, 0, std::nullopt});
  EXPECT_EQ(completion["choices"][0]["logprobs"], completion_logprobs_json(sample_logprobs(), 0));
  const json chat = chat_completion_response_json(kHeader, choices, TokenUsage{1, 2, 0, std::nullopt});
  EXPECT_EQ(chat["choices"][0]["logprobs"], chat_logprobs_json(sample_logprobs()));
}

TEST(OpenAiResponseTest, CompletionChunks) {
  EXPECT_EQ(completion_chunk_json(kHeader, choice(0, "Hel", FinishReason::NONE, std::nullopt)),
            json::parse(R"({"id": "cmpl-7", "object": "text_completion", "created": 1700000000,
                "model": "tiny", "choices": [{"index": 0, "text": "Hel", "logprobs": null,
                "finish_reason": null}]})"));
  EXPECT_EQ(completion_chunk_json(kHeader, choice(2, "", FinishReason::LENGTH, std::nullopt)),
            json::parse(R"({"id": "cmpl-7", "object": "text_completion", "created": 1700000000,
                "model": "tiny", "choices": [{"index": 2, "text": "", "logprobs": null,
                "finish_reason": "length"}]})"));
  // A chunk's logprobs offsets continue from the text sent before it.
  const json with_logprobs =
      completion_chunk_json(kHeader, offset_choice(choice(0, "Hi there", FinishReason::NONE,
                                                          sample_logprobs()), 10));
  EXPECT_EQ(with_logprobs["choices"][0]["logprobs"]["text_offset"], json::parse("[10, 12]"));
}

TEST(OpenAiResponseTest, ChatChunks) {
  const ResponseHeader header{"chatcmpl-9", 5, "m"};
  EXPECT_EQ(chat_role_chunk_json(header, 1), json::parse(R"({"id": "chatcmpl-9",
      "object": "chat.completion.chunk", "created": 5, "model": "m",
      "choices": [{"index": 1, "delta": {"role": "assistant", "content": ""}, "logprobs": null,
                   "finish_reason": null}]})"));
  EXPECT_EQ(chat_chunk_json(header, choice(1, "lo", FinishReason::NONE, std::nullopt)),
            json::parse(R"({"id": "chatcmpl-9", "object": "chat.completion.chunk", "created": 5,
                "model": "m", "choices": [{"index": 1, "delta": {"content": "lo"},
                "logprobs": null, "finish_reason": null}]})"));
  EXPECT_EQ(chat_chunk_json(header, choice(1, "", FinishReason::STOP, std::nullopt)),
            json::parse(R"({"id": "chatcmpl-9", "object": "chat.completion.chunk", "created": 5,
                "model": "m", "choices": [{"index": 1, "delta": {}, "logprobs": null,
                "finish_reason": "stop"}]})"));
  const json with_logprobs =
      chat_chunk_json(header, choice(0, "Hi there", FinishReason::NONE, sample_logprobs()));
  EXPECT_EQ(with_logprobs["choices"][0]["logprobs"], chat_logprobs_json(sample_logprobs()));
}

TEST(OpenAiResponseTest, UsageChunk) {
  EXPECT_EQ(usage_chunk_json(kHeader, "chat.completion.chunk", TokenUsage{3, 4, 2, std::nullopt}),
            json::parse(R"({"id": "cmpl-7", "object": "chat.completion.chunk",
                "created": 1700000000, "model": "tiny", "choices": [],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7,
                          "prompt_tokens_details": {"cached_tokens": 2}}})"));
}

TEST(OpenAiResponseTest, ModelsList) {
  EXPECT_EQ(models_list_json("tinyllama", 1690000000), json::parse(R"({"object": "list",
      "data": [{"id": "tinyllama", "object": "model", "created": 1690000000,
                "owned_by": "trellis"}]})"));
}

TEST(OpenAiResponseTest, SseFraming) {
  EXPECT_EQ(sse_data(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
}

TEST(OpenAiResponseTest, InvalidUtf8IsReplacedNotThrown) {
  // A token that ends inside a two-byte character; json::dump() would throw on it.
  const json chunk =
      completion_chunk_json(kHeader, choice(0, "ok\xc3", FinishReason::NONE, std::nullopt));
  std::string text;
  ASSERT_NO_THROW(text = sse_data(chunk));
  EXPECT_NE(text.find("\"text\":\"ok\xef\xbf\xbd\""), std::string::npos) << text;
  EXPECT_EQ(dump_json(json("caf\xc3\xa9")), "\"caf\xc3\xa9\"");  // valid UTF-8 is kept as is
}

}  // namespace
}  // namespace trellis
