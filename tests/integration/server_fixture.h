// An in-process `trellis serve` for the server tests: an engine on the tiny synthetic model, an
// HttpServer on a free loopback port serving it, and small client helpers (httplib::Client).
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "model/model_presets.h"
#include "model/synth_model.h"
#include "server/http_server.h"
#include "test_support.h"

namespace trellis::testing {

// The tiny preset as Q8_0, made once per test process; it carries the preset's chat template
// (Zephyr's format) unless `chat_template` is false.
inline const std::string& server_tiny_model(bool chat_template = true) {
  static const auto make = [](bool with_template) {
    std::string p = temp_dir() + (with_template ? "/server-tiny.gguf" : "/server-tiny-bare.gguf");
    SynthOptions options{*find_model_preset("tiny"), DType::Q8_0, 11, "", p, 2, false};
    options.chat_template = with_template;
    const Status status = synthesize_model(options);
    if (!status.ok()) ADD_FAILURE() << status.error().message;
    return p;
  };
  static const std::string with = make(true);
  if (chat_template) return with;
  static const std::string without = make(false);
  return without;
}

struct HttpReply {
  int status = 0;  // 0: no response (connection failed)
  std::string body;
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

// The "data: " payloads of a Server-Sent Events body, in order.
inline std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string::npos) end = body.size();
    const std::string line = body.substr(pos, end - pos);
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
    pos = end + 1;
  }
  return out;
}

// A greedy streaming POST /v1/completions (ignore_eos) whose bytes go to `receiver`, which may
// return false to hang up.
inline httplib::Request streaming_completion(const nlohmann::json& prompt, int max_tokens,
                                             httplib::ContentReceiverWithProgress receiver) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.set_header("Content-Type", "application/json");
  req.body = nlohmann::json{
      {"prompt", prompt},
      {"max_tokens", max_tokens},
      {"temperature", 0},
      {"ignore_eos", true},
      {"stream",
       true}}.dump();
  req.content_receiver = std::move(receiver);
  return req;
}

// A client of 127.0.0.1:port with bounded waits, and one request through it (`api_key` sent as a
// bearer token when not empty).
inline httplib::Client loopback_client(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  c.set_connection_timeout(5, 0);
  return c;
}
inline HttpReply loopback_post(int port, const std::string& path, const std::string& body,
                               const std::string& api_key = "") {
  httplib::Client c = loopback_client(port);
  httplib::Headers headers;
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  httplib::Result r = c.Post(path.c_str(), headers, body, "application/json");
  return r ? HttpReply{r->status, r->body} : HttpReply{};
}
inline HttpReply loopback_get(int port, const std::string& path, const std::string& api_key = "") {
  httplib::Client c = loopback_client(port);
  httplib::Headers headers;
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  httplib::Result r = c.Get(path.c_str(), headers);
  return r ? HttpReply{r->status, r->body} : HttpReply{};
}

class TestServer {
 public:
  explicit TestServer(ServerConfig config = {}, EngineConfig engine_config = default_engine(),
                      const std::string& model = server_tiny_model()) {
    config.port = 0;
    if (config.model_id.empty()) config.model_id = "tiny";
    config.log_requests = false;
    Result<std::unique_ptr<Engine>> engine = Engine::create(model, engine_config);
    EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
    if (engine.ok()) engine_ = std::move(engine).value();
    server_ = std::make_unique<HttpServer>(config);
    const Status bound = server_->bind();
    EXPECT_TRUE(bound.ok()) << (bound.ok() ? "" : bound.error().message);
    thread_ = std::thread([this] { server_->serve(); });
    if (engine_) server_->set_engine(*engine_);
  }
  ~TestServer() { stop(); }

  static EngineConfig default_engine() {
    EngineConfig config;
    config.n_threads = 1;
    config.n_ctx = 256;
    return config;
  }

  void stop() {
    if (thread_.joinable()) {
      server_->shutdown();
      thread_.join();
    }
  }

  httplib::Client client() const { return loopback_client(server_->port()); }
  HttpReply post(const std::string& path, const std::string& body,
                 const std::string& api_key = "") const {
    return loopback_post(server_->port(), path, body, api_key);
  }
  HttpReply post(const std::string& path, const nlohmann::json& body,
                 const std::string& api_key = "") const {
    return post(path, body.dump(), api_key);
  }
  HttpReply get(const std::string& path, const std::string& api_key = "") const {
    return loopback_get(server_->port(), path, api_key);
  }

  // The value of an unlabelled metric, or of one sample `name{labels}`; -1 when absent.
  double metric(const std::string& sample) const {
    const std::string text = get("/metrics").body;
    const std::string key = "trellis:" + sample + " ";
    size_t pos = text.find("\n" + key);
    if (pos == std::string::npos) return -1;
    pos += 1 + key.size();
    return std::stod(text.substr(pos, text.find('\n', pos) - pos));
  }

  Engine& engine() { return *engine_; }
  HttpServer& server() { return *server_; }

 private:
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

}  // namespace trellis::testing
