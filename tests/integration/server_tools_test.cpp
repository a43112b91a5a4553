// Tool calls through the chat API on the tiny random-weight model, in each family's syntax
// (HERMES for ChatML, Llama 3's JSON, the generic JSON form for the rest): with tool_choice
// required or a named function every reply is calls of declared functions whose arguments
// validate; auto gives text or calls; streaming carries the calls as delta.tool_calls; a second
// turn renders the calls and results back into the prompt. Harmony (gpt-oss) takes tools with
// tool_choice auto only.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "server_fixture.h"

namespace trellis::testing {
namespace {

using nlohmann::json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {
      "city": {"enum": ["Paris", "Lima", "Oslo"]},
      "days": {"type": "integer", "minimum": 1, "maximum": 7}},
      "required": ["city", "days"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 8}},
      "required": ["zone"], "additionalProperties": false}}}
])");

void expect_valid_call(const json& call) {
  ASSERT_TRUE(call["id"].is_string()) << call.dump();
  EXPECT_EQ(call["type"], "function");
  const std::string name = call["function"]["name"];
  const json args = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object()) << call.dump();
  if (name == "get_weather") {
    EXPECT_TRUE(std::set<std::string>({"Paris", "Lima", "Oslo"}).count(args["city"])) << args;
    ASSERT_TRUE(args["days"].is_number_integer()) << args;
    EXPECT_GE(args["days"].get<int>(), 1);
    EXPECT_LE(args["days"].get<int>(), 7);
    EXPECT_EQ(args.size(), 2u);
  } else {
    EXPECT_EQ(name, "get_time");
    ASSERT_TRUE(args["zone"].is_string()) << args;
  }
}

// One call per reply, and (Qwen3) no <think> block: a random model would ramble on in either,
// up to max_tokens.
json chat_request(const json& tool_choice, int seed) {
  json request = {{"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
                  {"tools", kTools},
                  {"max_tokens", 200},
                  {"temperature", 1.0},
                  {"seed", seed},
                  {"parallel_tool_calls", false},
                  {"chat_template_kwargs", {{"enable_thinking", false}}}};
  if (!tool_choice.is_null()) request["tool_choice"] = tool_choice;
  return request;
}

ServerConfig with_template(std::optional<ChatTemplateKind> kind) {
  ServerConfig config;
  config.chat_template = kind;
  return config;
}

// Tool definitions take several hundred tokens of the tiny vocabulary.
EngineConfig long_context() {
  EngineConfig config = TestServer::default_engine();
  config.n_ctx = 1536;
  return config;
}

class ServerToolsTest : public ::testing::TestWithParam<const char*> {
 protected:
  std::optional<ChatTemplateKind> kind() const {
    const std::string name = GetParam();
    if (name == "default") return std::nullopt;  // the tiny model's Zephyr: the generic form
    return parse_chat_template_name(name).value();
  }
};

TEST_P(ServerToolsTest, RequiredAndNamedChoicesAlwaysCall) {
  TestServer server(with_template(kind()), long_context());
  for (int seed = 0; seed < 3; ++seed) {
    const HttpReply reply = server.post("/v1/chat/completions", chat_request("required", seed));
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json choice = reply.json()["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << choice.dump();
    ASSERT_TRUE(choice["message"]["tool_calls"].is_array()) << choice.dump();
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
    for (const json& call : choice["message"]["tool_calls"]) expect_valid_call(call);

    json named = chat_request({{"type", "function"}, {"function", {{"name", "get_time"}}}}, seed);
    const json only = server.post("/v1/chat/completions", named).json()["choices"][0];
    ASSERT_EQ(only["message"]["tool_calls"].size(), 1u) << only.dump();
    EXPECT_EQ(only["message"]["tool_calls"][0]["function"]["name"], "get_time");
    expect_valid_call(only["message"]["tool_calls"][0]);
  }
}

TEST_P(ServerToolsTest, ParallelCallsAreAllValid) {
  TestServer server(with_template(kind()), long_context());
  json request = chat_request("required", 11);
  request["parallel_tool_calls"] = true;
  request["max_tokens"] = 400;
  const json choice = server.post("/v1/chat/completions", request).json()["choices"][0];
  // A random model may go on calling until max_tokens; the complete calls are valid either way.
  if (choice["finish_reason"] == "tool_calls") {
    ASSERT_GE(choice["message"]["tool_calls"].size(), 1u);
    for (const json& call : choice["message"]["tool_calls"]) expect_valid_call(call);
  } else {
    EXPECT_EQ(choice["finish_reason"], "length") << choice.dump();
  }
}

TEST_P(ServerToolsTest, AutoGivesTextOrValidCalls) {
  TestServer server(with_template(kind()), long_context());
  for (int seed = 0; seed < 4; ++seed) {
    const HttpReply reply = server.post("/v1/chat/completions", chat_request(nullptr, seed));
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json choice = reply.json()["choices"][0];
    if (choice["message"].contains("tool_calls")) {
      EXPECT_EQ(choice["finish_reason"], "tool_calls");
      for (const json& call : choice["message"]["tool_calls"]) expect_valid_call(call);
    } else {
      EXPECT_TRUE(choice["message"]["content"].is_string()) << choice.dump();
    }
  }
}

TEST_P(ServerToolsTest, StreamedCallsMatchTheWholeReply) {
  TestServer server(with_template(kind()), long_context());
  json request = chat_request("required", 7);
  request["temperature"] = 0;
  const json whole = server.post("/v1/chat/completions", request).json()["choices"][0];
  request["stream"] = true;
  const HttpReply streamed = server.post("/v1/chat/completions", request);
  ASSERT_EQ(streamed.status, 200);
  json calls = json::array();
  std::string finish;
  for (const std::string& payload : sse_payloads(streamed.body)) {
    if (payload == "[DONE]") continue;
    const json chunk = json::parse(payload);
    for (const json& choice : chunk["choices"]) {
      if (choice["delta"].contains("tool_calls"))
        for (const json& call : choice["delta"]["tool_calls"]) calls.push_back(call);
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
  }
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(calls.size(), whole["message"]["tool_calls"].size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i]["index"], static_cast<int>(i));
    EXPECT_EQ(calls[i]["function"], whole["message"]["tool_calls"][i]["function"]);
  }
}

TEST_P(ServerToolsTest, ASecondTurnRendersCallsAndResultsAndHitsTheCache) {
  TestServer server(with_template(kind()), long_context());
  json request = chat_request("required", 3);
  request["temperature"] = 0;
  const json first = server.post("/v1/chat/completions", request).json();
  const json message = first["choices"][0]["message"];
  ASSERT_TRUE(message.contains("tool_calls")) << first.dump();
  json next = request;
  next["messages"].push_back(message);
  for (const json& call : message["tool_calls"])
    next["messages"].push_back(
        {{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "{\"result\": 21}"}});
  next["tool_choice"] = "auto";
  const HttpReply second = server.post("/v1/chat/completions", next);
  ASSERT_EQ(second.status, 200) << second.body;
  const json usage = second.json()["usage"];
  const int prompt_1 = first["usage"]["prompt_tokens"];
  const int reply_1 = first["usage"]["completion_tokens"];
  const int cached = usage["prompt_tokens_details"]["cached_tokens"];
  std::printf("%s: turn 1 prompt %d + reply %d tokens; turn 2 prompt %d, cached %d\n", GetParam(),
              prompt_1, reply_1, usage["prompt_tokens"].get<int>(), cached);
  EXPECT_GE(cached, prompt_1 - 16) << "the first turn's prompt is cached (within a block)";
}

INSTANTIATE_TEST_SUITE_P(Formats, ServerToolsTest,
                         ::testing::Values("default", "chatml", "qwen3", "llama3", "phi4"),
                         [](const auto& info) { return std::string(info.param); });

TEST(ServerToolsErrorsTest, BadToolRequestsAreRefusedByName) {
  TestServer server({}, long_context());
  auto error_of = [&](json request) {
    const HttpReply reply = server.post("/v1/chat/completions", request);
    EXPECT_EQ(reply.status, 400) << reply.body;
    return reply.json()["error"];
  };
  const json messages = {{{"role", "user"}, {"content", "x"}}};
  EXPECT_EQ(error_of({{"messages", messages}, {"tool_choice", "required"}})["param"],
            "tool_choice");
  EXPECT_EQ(error_of({{"messages", messages},
                      {"tools", kTools},
                      {"tool_choice",
                       {{"type", "function"}, {"function", {{"name", "nope"}}}}}})["param"],
            "tool_choice.function.name");
  json bad_schema = kTools;
  bad_schema[0]["function"]["parameters"]["properties"]["city"] = {{"type", "string"},
                                                                   {"minProperties", 1}};
  const json unsupported = error_of({{"messages", messages}, {"tools", bad_schema}});
  EXPECT_EQ(unsupported["param"], "tools");
  EXPECT_NE(unsupported["message"].get<std::string>().find("get_weather"), std::string::npos);
  json twice = json::array({kTools[0], kTools[0]});
  EXPECT_EQ(error_of({{"messages", messages}, {"tools", twice}})["param"],
            "tools[1].function.name");
  EXPECT_EQ(error_of({{"messages", messages},
                      {"tools", kTools},
                      {"response_format", {{"type", "json_object"}}}})["param"],
            "tools");
  // tool_choice none: tools are shown to the model, the reply is text.
  const HttpReply none = server.post(
      "/v1/chat/completions",
      {{"messages", messages}, {"tools", kTools}, {"tool_choice", "none"}, {"max_tokens", 8}});
  EXPECT_EQ(none.status, 200);
  EXPECT_FALSE(none.json()["choices"][0]["message"].contains("tool_calls"));
}

TEST(ServerToolsErrorsTest, HarmonyTakesToolsWithAutoChoiceOnly) {
  // gpt-oss's format: tools (as its TypeScript namespace) and tool turns render; its calls are
  // markup tokens a grammar cannot match, so only tool_choice auto (or none) is served.
  TestServer server(with_template(ChatTemplateKind::HARMONY), long_context());
  const json messages = {{{"role", "user"}, {"content", "Weather in Paris?"}}};
  const HttpReply plain =
      server.post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 4}});
  EXPECT_EQ(plain.status, 200) << plain.body;
  const HttpReply tools = server.post(
      "/v1/chat/completions", {{"messages", messages}, {"tools", kTools}, {"max_tokens", 4}});
  EXPECT_EQ(tools.status, 200) << tools.body;
  EXPECT_GT(tools.json()["usage"]["prompt_tokens"].get<int>(),
            plain.json()["usage"]["prompt_tokens"].get<int>() + 20)
      << "the tools are part of the prompt";
  for (const json& choice :
       {json("required"), json({{"type", "function"}, {"function", {{"name", "get_weather"}}}})}) {
    const HttpReply forced =
        server.post("/v1/chat/completions",
                    {{"messages", messages}, {"tools", kTools}, {"tool_choice", choice}});
    EXPECT_EQ(forced.status, 400) << forced.body;
    EXPECT_EQ(forced.json()["error"]["param"], "tool_choice");
    EXPECT_NE(forced.json()["error"]["message"].get<std::string>().find("harmony"),
              std::string::npos);
  }
  json turns = messages;
  turns.push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}});
  turns.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}});
  const HttpReply tool_turn = server.post(
      "/v1/chat/completions", {{"messages", turns}, {"tools", kTools}, {"max_tokens", 4}});
  EXPECT_EQ(tool_turn.status, 200) << tool_turn.body;
  // reasoning_effort names the preamble's effort; only low, medium and high exist.
  const HttpReply low =
      server.post("/v1/chat/completions",
                  {{"messages", messages}, {"max_tokens", 4}, {"reasoning_effort", "low"}});
  EXPECT_EQ(low.status, 200) << low.body;
  const HttpReply extreme = server.post("/v1/chat/completions",
                                        {{"messages", messages}, {"reasoning_effort", "extreme"}});
  EXPECT_EQ(extreme.status, 400) << extreme.body;
  EXPECT_EQ(extreme.json()["error"]["param"], "reasoning_effort");
}

TEST(ServerToolsErrorsTest, ReasoningEffortIsRefusedOutsideHarmony) {
  TestServer server;
  const HttpReply reply = server.post(
      "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"reasoning_effort", "high"}});
  EXPECT_EQ(reply.status, 400) << reply.body;
  EXPECT_EQ(reply.json()["error"]["param"], "reasoning_effort");
}

}  // namespace
}  // namespace trellis::testing
