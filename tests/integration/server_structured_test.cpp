// Structured outputs through the HTTP API on the tiny random-weight model: whatever the model's
// logits, a constrained reply is valid (a random model is the hardest case), on both endpoints,
// streamed or whole, for n > 1; and constraints outside what is served are 400s naming them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>

#include "server_fixture.h"

namespace trellis::testing {
namespace {

using nlohmann::json;

const json kPersonSchema = json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "role": {"enum": ["admin", "user", "guest"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3}
  },
  "required": ["name", "age", "role"],
  "additionalProperties": false
})");

// What kPersonSchema asks, checked on the parsed reply.
void expect_person(const std::string& text) {
  const json value = json::parse(text, nullptr, false);
  ASSERT_FALSE(value.is_discarded()) << "not JSON: " << text;
  ASSERT_TRUE(value.is_object()) << text;
  ASSERT_TRUE(value.contains("name") && value["name"].is_string()) << text;
  const std::string name = value["name"];
  EXPECT_GE(name.size(), 1u);
  ASSERT_TRUE(value.contains("age") && value["age"].is_number_integer()) << text;
  EXPECT_GE(value["age"].get<int64_t>(), 0);
  EXPECT_LE(value["age"].get<int64_t>(), 120);
  ASSERT_TRUE(value.contains("role")) << text;
  EXPECT_TRUE(std::set<std::string>({"admin", "user", "guest"}).count(value["role"]));
  for (const auto& [key, _] : value.items())
    EXPECT_TRUE(key == "name" || key == "age" || key == "role" || key == "tags") << key;
  if (value.contains("tags")) {
    ASSERT_TRUE(value["tags"].is_array());
    EXPECT_LE(value["tags"].size(), 3u);
  }
}

json schema_format(const json& schema) {
  return {{"type", "json_schema"},
          {"json_schema", {{"name", "person"}, {"strict", true}, {"schema", schema}}}};
}

TEST(ServerStructuredTest, JsonSchemaRepliesValidateOnBothEndpoints) {
  TestServer server;
  for (int seed = 0; seed < 4; ++seed) {
    const json completion = {{"prompt", "A person:"},
                             {"max_tokens", 200},
                             {"temperature", 1.2},
                             {"seed", seed},
                             {"response_format", schema_format(kPersonSchema)}};
    const HttpReply reply = server.post("/v1/completions", completion);
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json body = reply.json();
    EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
    expect_person(body["choices"][0]["text"]);

    const json chat = {{"messages", {{{"role", "user"}, {"content", "Who?"}}}},
                       {"max_tokens", 200},
                       {"temperature", 1.2},
                       {"seed", seed},
                       {"response_format", schema_format(kPersonSchema)}};
    const HttpReply chat_reply = server.post("/v1/chat/completions", chat);
    ASSERT_EQ(chat_reply.status, 200) << chat_reply.body;
    expect_person(chat_reply.json()["choices"][0]["message"]["content"]);
  }
}

TEST(ServerStructuredTest, PropertiesComeInTheSchemasOrder) {
  TestServer server;
  // Not alphabetical: a parser that sorts keys would put "apple" first.
  const std::string body = R"({"prompt": "x", "max_tokens": 60, "temperature": 0,
    "json_schema": {"type": "object", "required": ["zebra", "apple", "mango"],
      "additionalProperties": false, "properties": {"zebra": {"type": "integer"},
      "apple": {"type": "boolean"}, "mango": {"enum": [1, 2]}}}})";
  const HttpReply reply = server.post("/v1/completions", body);
  ASSERT_EQ(reply.status, 200) << reply.body;
  const std::string text = reply.json()["choices"][0]["text"];
  EXPECT_EQ(text.rfind("{\"zebra\":", 0), 0u) << text;
  const size_t apple = text.find("\"apple\":"), mango = text.find("\"mango\":");
  EXPECT_NE(apple, std::string::npos) << text;
  EXPECT_LT(apple, mango) << text;
}

TEST(ServerStructuredTest, StreamedAndParallelRepliesValidate) {
  TestServer server;
  json request = {{"prompt", "People:"},
                  {"max_tokens", 200},
                  {"temperature", 1.0},
                  {"seed", 5},
                  {"n", 3},
                  {"response_format", schema_format(kPersonSchema)}};
  const json whole = server.post("/v1/completions", request).json();
  ASSERT_EQ(whole["choices"].size(), 3u) << whole.dump();
  for (const json& choice : whole["choices"]) expect_person(choice["text"]);

  request["n"] = 1;
  request["stream"] = true;
  const HttpReply streamed = server.post("/v1/completions", request);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  std::string text;
  for (const std::string& payload : sse_payloads(streamed.body)) {
    if (payload == "[DONE]") continue;
    const json chunk = json::parse(payload);
    for (const json& choice : chunk["choices"]) text += choice["text"].get<std::string>();
  }
  expect_person(text);
}

TEST(ServerStructuredTest, JsonObjectRegexChoiceAndGrammar) {
  TestServer server;
  auto complete = [&](json extra) {
    json request = {{"prompt", "Answer:"}, {"max_tokens", 120}, {"temperature", 1.5}};
    for (auto& [key, value] : extra.items()) request[key] = value;
    const HttpReply reply = server.post("/v1/completions", request);
    EXPECT_EQ(reply.status, 200) << reply.body;
    return reply.json()["choices"][0]["text"].get<std::string>();
  };
  for (int seed = 0; seed < 3; ++seed) {
    const json object = json::parse(
        complete(
            {{"seed", seed}, {"response_format", {{"type", "json_object"}}}, {"max_tokens", 250}}),
        nullptr, false);
    // A random model may run out of tokens inside an object; when it ends, it is an object.
    if (!object.is_discarded()) {
      EXPECT_TRUE(object.is_object());
    }

    const std::string code = complete({{"seed", seed}, {"regex", "[A-Z]{3}-[0-9]{2,4}"}});
    EXPECT_TRUE(std::regex_match(code, std::regex("[A-Z]{3}-[0-9]{2,4}"))) << code;

    const std::string color = complete({{"seed", seed}, {"choice", {"red", "green", "blue"}}});
    EXPECT_TRUE(color == "red" || color == "green" || color == "blue") << color;

    const std::string list = complete(
        {{"seed", seed}, {"grammar", "root ::= item (\", \" item){0,2}\nitem ::= [a-z]{2,5}"}});
    EXPECT_TRUE(std::regex_match(list, std::regex("[a-z]{2,5}(, [a-z]{2,5}){0,2}"))) << list;
  }
}

TEST(ServerStructuredTest, JumpForwardTokensAreCounted) {
  TestServer server;
  EXPECT_EQ(server.metric("grammar_forced_tokens_total"), 0);
  const HttpReply reply =
      server.post("/v1/completions", {{"prompt", "x"},
                                      {"max_tokens", 200},
                                      {"temperature", 0},
                                      {"response_format", schema_format(kPersonSchema)}});
  ASSERT_EQ(reply.status, 200);
  // `","age":` and the like are forced: appended without sampling.
  EXPECT_GT(server.metric("grammar_forced_tokens_total"), 0);
}

TEST(ServerStructuredTest, MaxTokensInsideTheObjectEndsWithLength) {
  TestServer server;
  const json body =
      server
          .post("/v1/completions", {{"prompt", "x"},
                                    {"max_tokens", 4},
                                    {"temperature", 0},
                                    {"response_format", schema_format(kPersonSchema)}})
          .json();
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);
}

TEST(ServerStructuredTest, WhatCannotBeServedIsA400NamingIt) {
  TestServer server;
  auto error_of = [&](json extra) {
    json request = {{"prompt", "x"}, {"max_tokens", 8}};
    for (auto& [key, value] : extra.items()) request[key] = value;
    const HttpReply reply = server.post("/v1/completions", request);
    EXPECT_EQ(reply.status, 400) << reply.body;
    return reply.json()["error"];
  };
  const json unsupported = error_of(
      {{"response_format",
        schema_format({{"type", "object"},
                       {"properties", {{"user", {{"type", "object"}, {"minProperties", 2}}}}}})}});
  EXPECT_EQ(unsupported["param"], "response_format.json_schema.schema");
  const std::string message = unsupported["message"];
  EXPECT_NE(message.find("minProperties"), std::string::npos) << message;
  EXPECT_NE(message.find("#/properties/user"), std::string::npos) << message;

  const json empty = error_of({{"json_schema", {{"enum", json::array()}}}});
  EXPECT_EQ(empty["param"], "json_schema");

  const json grammar = error_of({{"grammar", "root ::= undefined-rule"}});
  EXPECT_EQ(grammar["param"], "grammar");
  EXPECT_NE(grammar["message"].get<std::string>().find("undefined-rule"), std::string::npos);

  const json no_string = error_of({{"grammar", "root ::= x\nx ::= \"a\" x"}});
  EXPECT_NE(no_string["message"].get<std::string>().find("matches no string"), std::string::npos);

  const json regex = error_of({{"regex", "(?<=a)b"}});
  EXPECT_EQ(regex["param"], "regex");

  const json huge = error_of({{"regex", "a{0,100000000}"}});
  EXPECT_EQ(huge["param"], "regex");

  // The server still serves afterwards.
  EXPECT_EQ(server.post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}}).status, 200);
}

}  // namespace
}  // namespace trellis::testing
