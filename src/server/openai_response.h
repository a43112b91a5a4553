// The response side of the OpenAI-compatible API: JSON bodies of /v1/completions and
// /v1/chat/completions (whole and streamed), GET /v1/models, and Server-Sent Events framing.
// The inputs are small plain structs, so this file knows nothing of the engine.
//
// Strings may hold invalid UTF-8 (a token can end inside a character): dump_json() and sse_data()
// replace such bytes with U+FFFD instead of throwing.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sample/stop_condition.h"
#include "tokenizer/chat_template.h"

namespace trellis {

// The fields every response and chunk of one request repeats.
struct ResponseHeader {
  std::string id;       // "cmpl-..." or "chatcmpl-...": the same in every chunk of a stream
  int64_t created = 0;  // Unix time in seconds when the request arrived
  std::string model;
};

// The wire value of a FinishReason (sample/stop_condition.h): null for NONE (a streamed chunk
// before the last), "stop" or "length".
nlohmann::json finish_reason_json(FinishReason reason);

// One generated token as logprobs report it. Logprobs are natural logs <= 0; -inf is sent as
// -9999.0 (JSON has no infinity; vLLM sends the same).
struct TokenLogprobText {
  std::string token;  // the token's text (its raw bytes, possibly a partial UTF-8 character)
  float logprob = 0.0f;
};
struct LogprobEntry {
  TokenLogprobText chosen;
  std::vector<TokenLogprobText> top;  // most probable first
};

// One choice of a response, or the piece of it that a streamed chunk carries.
struct ChoiceResult {
  int32_t index = 0;
  std::string text;  // the whole text, or this chunk's new text when streaming
  FinishReason finish_reason = FinishReason::NONE;
  // One entry per token of `text`; nullopt when the request asked for no logprobs.
  std::optional<std::vector<LogprobEntry>> logprobs;
  // Completions logprobs only: the byte offset in the choice's whole text at which `text` starts
  // (0 for a whole response; the length of the text sent so far for a chunk).
  int64_t text_offset = 0;
  // Chat only: the reasoning (reasoning_content), and the tool calls the reply made (whole, or
  // those this chunk completes; `tool_call_index` numbers the first one in the reply). A reply
  // with calls that ended normally finishes with "tool_calls".
  std::string reasoning;
  std::vector<ChatToolCall> tool_calls;
  int32_t tool_call_index = 0;
  bool called_tools = false;
};

struct TokenUsage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // summed over all choices
  int64_t cached_tokens = 0;      // prompt tokens whose KV came from the prefix cache
  // Of cached_tokens, those loaded from the disk tier; absent when the server has none.
  std::optional<int64_t> disk_cached_tokens;
};

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details":
// {"cached_tokens"[, "disk_cached_tokens"]}}
nlohmann::json usage_json(const TokenUsage& usage);

// The legacy completions logprobs object for the tokens of `entries`:
//   {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{token: logprob}, ...],
//    "text_offset": [...]}
// Offsets count bytes from `text_offset`. When two alternatives have the same text the first
// (more probable) one is kept, as a JSON object cannot hold both.
nlohmann::json completion_logprobs_json(const std::vector<LogprobEntry>& entries,
                                        int64_t text_offset);
// The chat logprobs object: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token",
// "logprob", "bytes"}]}]}; bytes are the token's raw bytes as integers 0..255.
nlohmann::json chat_logprobs_json(const std::vector<LogprobEntry>& entries);

// A whole /v1/completions response: object "text_completion", choices [{index, text, logprobs,
// finish_reason}], usage.
nlohmann::json completion_response_json(const ResponseHeader& header,
                                        const std::vector<ChoiceResult>& choices,
                                        const TokenUsage& usage);
// A whole /v1/chat/completions response: object "chat.completion", choices [{index, message:
// {role: "assistant", content}, logprobs, finish_reason}], usage.
nlohmann::json chat_completion_response_json(const ResponseHeader& header,
                                             const std::vector<ChoiceResult>& choices,
                                             const TokenUsage& usage);

// A streamed /v1/completions chunk: object "text_completion", one choice {index, text, logprobs,
// finish_reason}.
nlohmann::json completion_chunk_json(const ResponseHeader& header, const ChoiceResult& choice);
// The first chunk of each chat choice: delta {"role": "assistant", "content": ""}, finish_reason
// null (what OpenAI sends first).
nlohmann::json chat_role_chunk_json(const ResponseHeader& header, int32_t index);
// A later chat chunk: delta {"content": text}, or delta {} when text is empty (the usual last
// chunk, which carries only the finish_reason).
nlohmann::json chat_chunk_json(const ResponseHeader& header, const ChoiceResult& choice);
// The last chunk of a stream with stream_options.include_usage: choices [] and the usage.
// `object` is "text_completion" or "chat.completion.chunk".
nlohmann::json usage_chunk_json(const ResponseHeader& header, const char* object,
                                const TokenUsage& usage);

// GET /v1/models: {"object": "list", "data": [{"id", "object": "model", "created",
// "owned_by": "trellis"}]}.
nlohmann::json models_list_json(const std::string& model_id, int64_t created);

// Compact JSON text; invalid UTF-8 in strings becomes U+FFFD.
std::string dump_json(const nlohmann::json& value);
// One Server-Sent Event: "data: <compact json>\n\n".
std::string sse_data(const nlohmann::json& value);
// The event that ends an OpenAI stream: "data: [DONE]\n\n".
std::string sse_done();

}  // namespace trellis
