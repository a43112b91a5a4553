#include "server/openai_response.h"

#include <cmath>
#include <utility>

namespace trellis {
namespace {

using nlohmann::json;

// JSON has no infinity (nlohmann would write null); clients expect a number.
constexpr double kMinLogprob = -9999.0;

double wire_logprob(float logprob) {
  const double value = static_cast<double>(logprob);
  return std::isfinite(value) ? value : kMinLogprob;
}

json token_bytes(const std::string& token) {
  json bytes = json::array();
  for (char c : token) bytes.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return bytes;
}

json header_json(const ResponseHeader& header, const char* object) {
  return {
      {"id", header.id},
      {"object", object},
      {"created", header.created},
      {"model", header.model},
  };
}

json optional_logprobs(const ChoiceResult& choice, bool chat) {
  if (!choice.logprobs) return nullptr;
  return chat ? chat_logprobs_json(*choice.logprobs)
              : completion_logprobs_json(*choice.logprobs, choice.text_offset);
}

}  // namespace

json finish_reason_json(FinishReason reason) {
  if (reason == FinishReason::NONE) return nullptr;
  return std::string(finish_reason_name(reason));
}

json usage_json(const TokenUsage& usage) {
  json details = {{"cached_tokens", usage.cached_tokens}};
  if (usage.disk_cached_tokens) details["disk_cached_tokens"] = *usage.disk_cached_tokens;
  return {
      {"prompt_tokens", usage.prompt_tokens},
      {"completion_tokens", usage.completion_tokens},
      {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
      {"prompt_tokens_details", std::move(details)},
  };
}

json completion_logprobs_json(const std::vector<LogprobEntry>& entries, int64_t text_offset) {
  json tokens = json::array();
  json token_logprobs = json::array();
  json top_logprobs = json::array();
  json offsets = json::array();
  int64_t offset = text_offset;
  for (const LogprobEntry& entry : entries) {
    tokens.push_back(entry.chosen.token);
    token_logprobs.push_back(wire_logprob(entry.chosen.logprob));
    json top = json::object();
    for (const TokenLogprobText& alternative : entry.top) {
      if (!top.contains(alternative.token)) {
        top[alternative.token] = wire_logprob(alternative.logprob);
      }
    }
    top_logprobs.push_back(std::move(top));
    offsets.push_back(offset);
    offset += static_cast<int64_t>(entry.chosen.token.size());
  }
  return {
      {"tokens", std::move(tokens)},
      {"token_logprobs", std::move(token_logprobs)},
      {"top_logprobs", std::move(top_logprobs)},
      {"text_offset", std::move(offsets)},
  };
}

json chat_logprobs_json(const std::vector<LogprobEntry>& entries) {
  json content = json::array();
  for (const LogprobEntry& entry : entries) {
    json top = json::array();
    for (const TokenLogprobText& alternative : entry.top) {
      top.push_back({
          {"token", alternative.token},
          {"logprob", wire_logprob(alternative.logprob)},
          {"bytes", token_bytes(alternative.token)},
      });
    }
    content.push_back({
        {"token", entry.chosen.token},
        {"logprob", wire_logprob(entry.chosen.logprob)},
        {"bytes", token_bytes(entry.chosen.token)},
        {"top_logprobs", std::move(top)},
    });
  }
  return {{"content", std::move(content)}};
}

json completion_response_json(const ResponseHeader& header,
                              const std::vector<ChoiceResult>& choices, const TokenUsage& usage) {
  json body = header_json(header, "text_completion");
  json out = json::array();
  for (const ChoiceResult& choice : choices) {
    out.push_back({
        {"index", choice.index},
        {"text", choice.text},
        {"logprobs", optional_logprobs(choice, /*chat=*/false)},
        {"finish_reason", finish_reason_json(choice.finish_reason)},
    });
  }
  body["choices"] = std::move(out);
  body["usage"] = usage_json(usage);
  return body;
}

namespace {

// [{"index"?, "id", "type": "function", "function": {"name", "arguments"}}]; indices in deltas.
json tool_calls_json(const ChoiceResult& choice, bool with_index) {
  json calls = json::array();
  for (size_t i = 0; i < choice.tool_calls.size(); ++i) {
    const ChatToolCall& call = choice.tool_calls[i];
    json item = {{"id", call.id},
                 {"type", "function"},
                 {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
    if (with_index) item["index"] = choice.tool_call_index + static_cast<int32_t>(i);
    calls.push_back(std::move(item));
  }
  return calls;
}

json chat_finish_reason_json(const ChoiceResult& choice) {
  if (choice.called_tools && choice.finish_reason == FinishReason::STOP) return "tool_calls";
  return finish_reason_json(choice.finish_reason);
}

}  // namespace

json chat_completion_response_json(const ResponseHeader& header,
                                   const std::vector<ChoiceResult>& choices,
                                   const TokenUsage& usage) {
  json body = header_json(header, "chat.completion");
  json out = json::array();
  for (const ChoiceResult& choice : choices) {
    json message = {{"role", "assistant"}, {"content", choice.text}};
    // OpenAI's shape: content null when the reply is calls only.
    if (!choice.tool_calls.empty()) {
      if (choice.text.empty()) message["content"] = nullptr;
      message["tool_calls"] = tool_calls_json(choice, /*with_index=*/false);
    }
    if (!choice.reasoning.empty()) message["reasoning_content"] = choice.reasoning;
    out.push_back({
        {"index", choice.index},
        {"message", std::move(message)},
        {"logprobs", optional_logprobs(choice, /*chat=*/true)},
        {"finish_reason", chat_finish_reason_json(choice)},
    });
  }
  body["choices"] = std::move(out);
  body["usage"] = usage_json(usage);
  return body;
}

json completion_chunk_json(const ResponseHeader& header, const ChoiceResult& choice) {
  json body = header_json(header, "text_completion");
  body["choices"] = json::array({{
      {"index", choice.index},
      {"text", choice.text},
      {"logprobs", optional_logprobs(choice, /*chat=*/false)},
      {"finish_reason", finish_reason_json(choice.finish_reason)},
  }});
  return body;
}

json chat_role_chunk_json(const ResponseHeader& header, int32_t index) {
  json body = header_json(header, "chat.completion.chunk");
  body["choices"] = json::array({{
      {"index", index},
      {"delta", {{"role", "assistant"}, {"content", ""}}},
      {"logprobs", nullptr},
      {"finish_reason", nullptr},
  }});
  return body;
}

json chat_chunk_json(const ResponseHeader& header, const ChoiceResult& choice) {
  json body = header_json(header, "chat.completion.chunk");
  json delta = json::object();
  if (!choice.reasoning.empty()) delta["reasoning_content"] = choice.reasoning;
  if (!choice.text.empty()) delta["content"] = choice.text;
  if (!choice.tool_calls.empty()) delta["tool_calls"] = tool_calls_json(choice, /*with_index=*/true);
  body["choices"] = json::array({{
      {"index", choice.index},
      {"delta", std::move(delta)},
      {"logprobs", optional_logprobs(choice, /*chat=*/true)},
      {"finish_reason", chat_finish_reason_json(choice)},
  }});
  return body;
}

json usage_chunk_json(const ResponseHeader& header, const char* object, const TokenUsage& usage) {
  json body = header_json(header, object);
  body["choices"] = json::array();
  body["usage"] = usage_json(usage);
  return body;
}

json models_list_json(const std::string& model_id, int64_t created) {
  return {
      {"object", "list"},
      {"data", json::array({{
                   {"id", model_id},
                   {"object", "model"},
                   {"created", created},
                   {"owned_by", "trellis"},
               }})},
  };
}

std::string dump_json(const json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

std::string sse_data(const json& value) {
  return "data: " + dump_json(value) + "\n\n";
}

std::string sse_done() {
  return "data: [DONE]\n\n";
}

}  // namespace trellis
