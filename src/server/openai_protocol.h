// The request side of the OpenAI-compatible API: typed structs for POST /v1/completions and
// POST /v1/chat/completions, parsed and validated from the JSON body, and the conversion of their
// sampling fields to SamplingParams. The response side is in openai_response.h.
//
// Conventions of the parser (what OpenAI clients expect):
//   - A field that is missing or null takes its default (clients send null for "not given").
//   - Unknown fields are ignored: clients send many we do not implement (logit_bias, tools, ...).
//   - Integer fields accept JSON integers and numbers with an integral value (16.0); booleans are
//     never numbers.
//   - Every error is a 400 invalid_request_error whose message names the field and whose param is
//     the field's path ("stop[1]", "messages[0].content[2].type"). No exception escapes.
// A request that parses is fully validated: to_sampling_params() succeeds on its sampling fields.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sample/sampling_params.h"
#include "server/api_error.h"
#include "server/output_constraint.h"
#include "server/tool_call_grammar.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/vocab.h"

namespace trellis {

// What this server accepts; built once from the server's configuration.
struct ProtocolLimits {
  // The largest max_tokens (or max_completion_tokens) a request may ask for; the server sets it
  // from the model's context length. Range: >= 1.
  int32_t max_tokens_limit = 16384;
  // The largest n (choices per request). Range: >= 1.
  int32_t max_n = 16;
  // The most stop strings per request (OpenAI allows 4).
  int32_t max_stop_strings = 4;
  // The largest logprobs (completions) or top_logprobs (chat); OpenAI allows 20.
  int32_t max_top_logprobs = 20;
  // Arrays and objects nested deeper than this are refused while parsing, before a deeply nested
  // body can cost memory out of proportion to its size.
  int32_t max_json_depth = 64;
};

// The sampling fields both endpoints share, as the client sent them (nullopt = not given).
struct SamplingOptions {
  std::optional<float> temperature;         // default 1.0; 0 = greedy
  std::optional<float> top_p;               // default 1.0 (off)
  std::optional<int32_t> top_k;             // extension; default 0 (off); -1 also means off (vLLM)
  std::optional<float> min_p;               // extension; default 0 (off)
  std::optional<float> presence_penalty;    // default 0; [-2, 2]
  std::optional<float> frequency_penalty;   // default 0; [-2, 2]
  std::optional<float> repetition_penalty;  // extension (llama.cpp semantics); default 1 (off)
  // Any JSON integer from INT64_MIN to UINT64_MAX; negative values are taken modulo 2^64.
  std::optional<uint64_t> seed;
};

// The SamplingParams of a request: absent fields take their defaults (temperature 1.0), the
// penalties count every token of the history (OpenAI counts all tokens generated so far, so
// penalty_last_n = -1), and the seed is the client's or else `fallback_seed` (the server draws a
// fresh one per request). Out-of-range values give a 400 naming the field (via
// SamplingParams::validate()).
ApiResult<SamplingParams> to_sampling_params(const SamplingOptions& options,
                                             uint64_t fallback_seed);

// POST /v1/completions.
struct CompletionRequest {
  // "" when not given (the server then uses the one model it serves).
  std::string model;
  // Either text (tokenized by the server) or token ids (used as is; ids are >= 0, the vocab
  // range is the engine's to check). Accepted forms: "text", ["text"], [1, 2, 3], [[1, 2, 3]].
  // An empty token list is rejected; empty text is allowed (the tokenizer may add BOS).
  std::variant<std::string, std::vector<TokenId>> prompt;
  // nullopt = not given (OpenAI's default is 16; the server decides). Range: [1, limit].
  std::optional<int32_t> max_tokens;
  SamplingOptions sampling;
  // Non-empty strings, at most limits.max_stop_strings of them.
  std::vector<std::string> stop;
  int32_t n = 1;  // [1, limits.max_n]
  // Logprobs of the chosen token plus this many alternatives per position; nullopt = none.
  // Range: [0, limits.max_top_logprobs].
  std::optional<int32_t> logprobs;
  bool stream = false;
  // stream_options.include_usage: a last chunk with the usage and no choices (when streaming).
  bool include_usage = false;
  std::string user;  // "" when not given
  // Namespaces the prefix cache: requests share cached prefixes only with the same salt.
  // Non-empty when given.
  std::optional<std::string> cache_salt;
  bool ignore_eos = false;  // extension: keep generating past the end-of-sequence token
  // Extension "speculative": false turns speculative decoding off for this request (the output
  // is the same either way; only its speed can differ).
  bool speculative = true;
  // response_format json_object / json_schema, or the extensions grammar (GBNF), regex, choice
  // (and vLLM's guided_json, guided_regex, guided_choice, guided_grammar, llama.cpp's
  // json_schema); at most one. nullopt: free text.
  std::optional<OutputConstraint> constraint;
};

// One message as the client sent it. Same fields as tokenizer/chat_template.h's ChatMessage, which
// the chat template layer renders (that layer decides which roles it knows).
struct ChatRequestMessage {
  // Any string: whether the role is known is for the chat template to decide.
  std::string role;
  // A string content, or the texts of a list of {"type": "text", "text": ...} parts joined with
  // "\n" (as vLLM does). null content is accepted for the assistant role only (a message that
  // carried tool calls) and becomes "".
  std::string content;
  // An assistant message's tool calls (tool_calls[].id, .function.name, .function.arguments).
  std::vector<ChatToolCall> tool_calls;
  // A "tool" message's tool_call_id: the call whose result it carries.
  std::string tool_call_id;
};

// POST /v1/chat/completions.
struct ChatCompletionRequest {
  std::string model;                         // "" when not given
  std::vector<ChatRequestMessage> messages;  // at least one
  // max_completion_tokens, or else the older max_tokens; nullopt = up to the context length.
  // Range: [1, limit].
  std::optional<int32_t> max_tokens;
  SamplingOptions sampling;
  std::vector<std::string> stop;  // as in CompletionRequest
  int32_t n = 1;                  // [1, limits.max_n]
  bool logprobs = false;          // the chosen token's logprob at each position
  // Alternatives per position, [0, limits.max_top_logprobs]; above 0 only with logprobs = true.
  int32_t top_logprobs = 0;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string user;
  std::optional<std::string> cache_salt;
  bool ignore_eos = false;  // extension
  bool speculative = true;  // extension, as in CompletionRequest
  // chat_template_kwargs.enable_thinking (vLLM's extension): false opens the reply of a Qwen3
  // model with an empty <think></think> block, so it answers without reasoning. Other keys of
  // chat_template_kwargs are 400s (the templates are built in, not Jinja).
  bool enable_thinking = true;
  // reasoning_effort: "low", "medium" or "high" (OpenAI's field; gpt-oss's harmony preamble
  // names it; other chat formats refuse it). Empty: not given.
  std::string reasoning_effort;
  std::optional<OutputConstraint> constraint;  // as in CompletionRequest
  // tools: [{"type": "function", "function": {"name", "description", "parameters"}}], names
  // unique; tool_choice needs tools. parallel_tool_calls false: at most one call per reply.
  std::vector<RequestTool> tools;
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
};

// POST /tokenize.
struct TokenizeRequest {
  std::string prompt;
  bool add_special_tokens = true;  // BOS (and the like) when the vocab adds them
};

// POST /detokenize.
struct DetokenizeRequest {
  std::vector<TokenId> tokens;  // each in [0, n_vocab)
};

// Parses and validates a request body. Malformed JSON, a body that is not an object, wrong types,
// missing prompt/messages and out-of-range values are 400s; echo = true is a 400 too (not
// supported).
ApiResult<CompletionRequest> parse_completion_request(std::string_view body,
                                                      const ProtocolLimits& limits);
ApiResult<ChatCompletionRequest> parse_chat_completion_request(std::string_view body,
                                                               const ProtocolLimits& limits);
// A missing or non-string prompt, or a non-boolean add_special_tokens, is a 400.
ApiResult<TokenizeRequest> parse_tokenize_request(std::string_view body,
                                                  const ProtocolLimits& limits);
// tokens must be an array of ids in [0, n_vocab): a 400 names the first one that is not.
ApiResult<DetokenizeRequest> parse_detokenize_request(std::string_view body,
                                                      const ProtocolLimits& limits,
                                                      int64_t n_vocab);

}  // namespace trellis
