#include "bench/http_load_client.h"

#include <httplib.h>

#include <chrono>

namespace trellis::bench {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

json chat_body(const std::string& system, const std::string& user, int32_t max_tokens) {
  return conversation_body(
      {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", user}}},
      max_tokens);
}

json conversation_body(json messages, int32_t max_tokens) {
  return {{"messages", std::move(messages)},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true},
          {"stream", true},
          {"stream_options", {{"include_usage", true}}}};
}

Result<ChatFigures> chat_request(int port, const json& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(600, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.set_header("Content-Type", "application/json");
  req.body = body.dump(-1, ' ', false,
                       json::error_handler_t::replace);  // random text may be invalid UTF-8
  ChatFigures figures;
  std::string pending;
  const Clock::time_point start = Clock::now();
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    pending.append(data, size);
    size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]") continue;
      const json chunk = json::parse(event.substr(6), nullptr, false);
      if (chunk.is_discarded()) continue;
      if (chunk.contains("usage") && chunk["usage"].is_object()) {
        figures.prompt_tokens = chunk["usage"]["prompt_tokens"];
        figures.cached_tokens = chunk["usage"]["prompt_tokens_details"]["cached_tokens"];
        figures.completion_tokens = chunk["usage"]["completion_tokens"];
      }
      for (const json& choice : chunk.value("choices", json::array())) {
        const json& delta = choice["delta"];
        if (!delta.contains("content") || delta["content"].get<std::string>().empty()) continue;
        if (figures.text.empty())
          figures.ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        figures.text += delta["content"].get<std::string>();
      }
    }
    return true;
  };
  httplib::Result r = client.send(req);
  if (!r) return Error{"request failed: " + httplib::to_string(r.error())};
  if (r->status != 200) return Error{"HTTP " + std::to_string(r->status) + ": " + r->body};
  figures.latency_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return figures;
}

}  // namespace trellis::bench
