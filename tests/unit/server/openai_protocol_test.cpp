// Parsing of OpenAI request bodies: exact values of every field, defaults, the accepted prompt and
// content forms, and every error path with its message and param; plus ApiError's JSON shape and
// the conversion to SamplingParams.
#include "server/openai_protocol.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace trellis {
namespace {

using nlohmann::json;

ProtocolLimits test_limits() {
  ProtocolLimits limits;
  limits.max_tokens_limit = 1000;
  limits.max_n = 4;
  limits.max_stop_strings = 4;
  limits.max_top_logprobs = 20;
  return limits;
}

ApiResult<CompletionRequest> parse_completion(const json& body) {
  return parse_completion_request(body.dump(), test_limits());
}

ApiResult<ChatCompletionRequest> parse_chat(const json& body) {
  return parse_chat_completion_request(body.dump(), test_limits());
}

// Checks that parsing failed with a 400 whose param is `param` (nullopt: none) and whose message
// contains `message_part`.
template <typename T>
void expect_bad_request(const ApiResult<T>& result, const std::optional<std::string>& param,
                        const std::string& message_part) {
  ASSERT_FALSE(result.ok()) << "expected an error about " << message_part;
  const ApiError& error = result.error();
  EXPECT_EQ(error.http_status, 400);
  EXPECT_EQ(error.type, ApiErrorType::INVALID_REQUEST);
  EXPECT_EQ(error.param, param) << error.message;
  EXPECT_NE(error.message.find(message_part), std::string::npos) << error.message;
}

// ---- ApiError ----

TEST(ApiErrorTest, ErrorJsonHasTheOpenAiShape) {
  const ApiError error = invalid_request_error("n must be in [1, 4], got 9", "n");
  EXPECT_EQ(error_json(error), json::parse(R"({"error": {"message": "n must be in [1, 4], got 9",
      "type": "invalid_request_error", "param": "n", "code": null}})"));
}

TEST(ApiErrorTest, FactoriesSetStatusTypeAndCode) {
  const ApiError auth = authentication_error("bad key");
  EXPECT_EQ(auth.http_status, 401);
  EXPECT_EQ(error_json(auth), json::parse(R"({"error": {"message": "bad key",
      "type": "authentication_error", "param": null, "code": "invalid_api_key"}})"));

  const ApiError missing = not_found_error("no model x", "model_not_found");
  EXPECT_EQ(missing.http_status, 404);
  EXPECT_EQ(error_json(missing)["error"]["type"], "not_found_error");
  EXPECT_EQ(error_json(missing)["error"]["code"], "model_not_found");

  const ApiError busy = rate_limit_error("slow down");
  EXPECT_EQ(busy.http_status, 429);
  EXPECT_EQ(error_json(busy)["error"]["type"], "rate_limit_error");

  const ApiError internal = server_error("boom");
  EXPECT_EQ(internal.http_status, 500);
  EXPECT_EQ(server_error("full", 503).http_status, 503);
  EXPECT_EQ(error_json(internal), json::parse(R"({"error": {"message": "boom",
      "type": "server_error", "param": null, "code": null}})"));
}

// ---- Completions: values ----

TEST(CompletionRequestTest, EveryFieldIsRead) {
  auto result = parse_completion({
      {"model", "tiny"},
      {"prompt", "Once upon"},
      {"max_tokens", 32},
      {"temperature", 0.5},
      {"top_p", 0.9},
      {"top_k", 40},
      {"min_p", 0.05},
      {"seed", 1234},
      {"stop", {"\n", "END"}},
      {"n", 2},
      {"presence_penalty", 0.25},
      {"frequency_penalty", -0.5},
      {"repetition_penalty", 1.1},
      {"logprobs", 3},
      {"echo", false},
      {"stream", true},
      {"stream_options", {{"include_usage", true}}},
      {"user", "u-1"},
      {"cache_salt", "salt"},
      {"ignore_eos", true},
      {"suffix", nullptr},
  });
  ASSERT_TRUE(result.ok()) << result.error().message;
  const CompletionRequest& r = result.value();
  EXPECT_EQ(r.model, "tiny");
  EXPECT_EQ(std::get<std::string>(r.prompt), "Once upon");
  EXPECT_EQ(r.max_tokens, 32);
  EXPECT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.sampling.min_p, 0.05f);
  EXPECT_EQ(r.sampling.seed, 1234u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.sampling.presence_penalty, 0.25f);
  EXPECT_EQ(r.sampling.frequency_penalty, -0.5f);
  EXPECT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.logprobs, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.user, "u-1");
  EXPECT_EQ(r.cache_salt, "salt");
  EXPECT_TRUE(r.ignore_eos);
}

TEST(CompletionRequestTest, DefaultsWhenFieldsAreMissing) {
  auto result = parse_completion({{"prompt", "hi"}});
  ASSERT_TRUE(result.ok()) << result.error().message;
  const CompletionRequest& r = result.value();
  EXPECT_EQ(r.model, "");
  EXPECT_EQ(r.max_tokens, std::nullopt);
  EXPECT_EQ(r.sampling.temperature, std::nullopt);
  EXPECT_EQ(r.sampling.top_p, std::nullopt);
  EXPECT_EQ(r.sampling.top_k, std::nullopt);
  EXPECT_EQ(r.sampling.min_p, std::nullopt);
  EXPECT_EQ(r.sampling.seed, std::nullopt);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_EQ(r.n, 1);
  EXPECT_EQ(r.logprobs, std::nullopt);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_EQ(r.user, "");
  EXPECT_EQ(r.cache_salt, std::nullopt);
  EXPECT_FALSE(r.ignore_eos);
}

TEST(CompletionRequestTest, NullMeansNotGiven) {
  auto result = parse_completion({{"prompt", "hi"},
                                  {"max_tokens", nullptr},
                                  {"temperature", nullptr},
                                  {"stop", nullptr},
                                  {"n", nullptr},
                                  {"seed", nullptr},
                                  {"logprobs", nullptr},
                                  {"stream_options", nullptr},
                                  {"echo", nullptr},
                                  {"model", nullptr}});
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->max_tokens, std::nullopt);
  EXPECT_EQ(result->sampling.temperature, std::nullopt);
  EXPECT_TRUE(result->stop.empty());
  EXPECT_EQ(result->n, 1);
  EXPECT_EQ(result->logprobs, std::nullopt);
}

TEST(CompletionRequestTest, PromptForms) {
  auto text = parse_completion({{"prompt", ""}});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(std::get<std::string>(text->prompt), "");

  auto one_string = parse_completion({{"prompt", {"only one"}}});
  ASSERT_TRUE(one_string.ok());
  EXPECT_EQ(std::get<std::string>(one_string->prompt), "only one");

  auto tokens = parse_completion({{"prompt", {1, 15043, 0, 2147483647}}});
  ASSERT_TRUE(tokens.ok()) << tokens.error().message;
  EXPECT_EQ(std::get<std::vector<TokenId>>(tokens->prompt),
            (std::vector<TokenId>{1, 15043, 0, 2147483647}));

  auto nested = parse_completion({{"prompt", json::array({json::array({5, 6})})}});
  ASSERT_TRUE(nested.ok()) << nested.error().message;
  EXPECT_EQ(std::get<std::vector<TokenId>>(nested->prompt), (std::vector<TokenId>{5, 6}));
}

TEST(CompletionRequestTest, IntegralFloatsCountAsIntegers) {
  auto result = parse_completion({{"prompt", "x"}, {"max_tokens", 16.0}, {"n", 2.0}});
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->max_tokens, 16);
  EXPECT_EQ(result->n, 2);
}

TEST(CompletionRequestTest, LimitsAreInclusive) {
  auto result = parse_completion({{"prompt", "x"},
                                  {"max_tokens", 1000},
                                  {"n", 4},
                                  {"logprobs", 20},
                                  {"stop", {"a", "b", "c", "d"}}});
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->max_tokens, 1000);
  EXPECT_EQ(result->n, 4);
  EXPECT_EQ(result->logprobs, 20);
  EXPECT_EQ(result->stop.size(), 4u);

  auto low = parse_completion({{"prompt", "x"}, {"max_tokens", 1}, {"logprobs", 0}});
  ASSERT_TRUE(low.ok()) << low.error().message;
  EXPECT_EQ(low->max_tokens, 1);
  EXPECT_EQ(low->logprobs, 0);
}

TEST(CompletionRequestTest, StopAsOneString) {
  auto result = parse_completion({{"prompt", "x"}, {"stop", "###"}});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->stop, (std::vector<std::string>{"###"}));
  auto empty_list = parse_completion({{"prompt", "x"}, {"stop", json::array()}});
  ASSERT_TRUE(empty_list.ok());
  EXPECT_TRUE(empty_list->stop.empty());
}

TEST(CompletionRequestTest, SeedAcceptsTheFullIntegerRange) {
  auto big = parse_completion({{"prompt", "x"}, {"seed", 18446744073709551615ull}});
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->sampling.seed, 18446744073709551615ull);
  auto negative = parse_completion({{"prompt", "x"}, {"seed", -1}});
  ASSERT_TRUE(negative.ok());
  EXPECT_EQ(negative->sampling.seed, 18446744073709551615ull);
  expect_bad_request(parse_completion({{"prompt", "x"}, {"seed", 1.5}}), "seed", "integer");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"seed", "7"}}), "seed",
                     "seed must be an integer, got a string");
}

TEST(CompletionRequestTest, TopKMinusOneMeansOff) {
  auto result = parse_completion({{"prompt", "x"}, {"top_k", -1}});
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->sampling.top_k, -1);
  auto params = to_sampling_params(result->sampling, 0);
  ASSERT_TRUE(params.ok());
  EXPECT_EQ(params->top_k, 0);
  expect_bad_request(parse_completion({{"prompt", "x"}, {"top_k", -2}}), "top_k",
                     "top_k must be in [-1, 2147483647], got -2");
}

// ---- Completions: errors ----

TEST(CompletionRequestTest, MalformedJsonIsAnErrorNotAnException) {
  const ProtocolLimits limits = test_limits();
  for (const char* body : {"", "{", "{\"prompt\": }", "{\"prompt\": \"x\"} trailing", "nul",
                           "{\"prompt\": \"\xff\"}"}) {
    auto result = parse_completion_request(body, limits);
    expect_bad_request(result, std::nullopt, "request body is not valid JSON");
  }
  auto located = parse_completion_request("{\"prompt\": x}", limits);
  expect_bad_request(located, std::nullopt, "(error at byte 12)");
}

TEST(CompletionRequestTest, BodyMustBeAnObject) {
  const ProtocolLimits limits = test_limits();
  expect_bad_request(parse_completion_request("[1, 2]", limits), std::nullopt,
                     "request body must be a JSON object, got an array");
  expect_bad_request(parse_completion_request("\"hi\"", limits), std::nullopt,
                     "request body must be a JSON object, got a string");
  expect_bad_request(parse_chat_completion_request("null", limits), std::nullopt,
                     "request body must be a JSON object, got a null");
}

TEST(CompletionRequestTest, MissingPrompt) {
  expect_bad_request(parse_completion({{"model", "m"}}), "prompt", "prompt is required");
  expect_bad_request(parse_completion({{"prompt", nullptr}}), "prompt", "prompt is required");
}

TEST(CompletionRequestTest, BadPrompts) {
  expect_bad_request(parse_completion({{"prompt", 5}}), "prompt",
                     "prompt must be a string or an array of token ids, got a number");
  expect_bad_request(parse_completion({{"prompt", {{"a", 1}}}}), "prompt",
                     "prompt must be a string or an array of token ids, got an object");
  expect_bad_request(parse_completion({{"prompt", json::array()}}), "prompt",
                     "prompt must not be an empty array");
  expect_bad_request(parse_completion({{"prompt", {"a", "b"}}}), "prompt",
                     "only one prompt per request");
  expect_bad_request(
      parse_completion({{"prompt", json::array({json::array({1}), json::array({2})})}}), "prompt",
      "only one prompt per request");
  expect_bad_request(parse_completion({{"prompt", {1, "x"}}}), "prompt[1]",
                     "prompt[1] must be a token id (an integer >= 0), got a string");
  expect_bad_request(parse_completion({{"prompt", {1, -3}}}), "prompt[1]",
                     "prompt[1] must be in [0, 2147483647], got -3");
  expect_bad_request(parse_completion({{"prompt", {1, 2.5}}}), "prompt[1]",
                     "prompt[1] must be an integer, got a number");
  expect_bad_request(parse_completion({{"prompt", {7, 2147483648ll}}}), "prompt[1]",
                     "got 2147483648");
  expect_bad_request(parse_completion({{"prompt", json::array({json::array()})}}), "prompt[0]",
                     "prompt[0] must not be an empty list of token ids");
  expect_bad_request(parse_completion({{"prompt", json::array({json::array({1, true})})}}),
                     "prompt[0][1]", "prompt[0][1] must be a token id");
}

TEST(CompletionRequestTest, MaxTokensRange) {
  expect_bad_request(parse_completion({{"prompt", "x"}, {"max_tokens", -5}}), "max_tokens",
                     "max_tokens must be in [1, 1000], got -5");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"max_tokens", 0}}), "max_tokens",
                     "max_tokens must be in [1, 1000], got 0");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"max_tokens", 1001}}), "max_tokens",
                     "max_tokens must be in [1, 1000], got 1001");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"max_tokens", 18446744073709551615ull}}),
                     "max_tokens", "got 18446744073709551615");
  expect_bad_request(
      parse_completion_request(R"({"prompt": "x", "max_tokens": 1e30})", test_limits()),
      "max_tokens", "max_tokens must be in [1, 1000]");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"max_tokens", 10.5}}), "max_tokens",
                     "max_tokens must be an integer, got a number");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"max_tokens", "16"}}), "max_tokens",
                     "max_tokens must be an integer, got a string");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"max_tokens", true}}), "max_tokens",
                     "max_tokens must be an integer, got a boolean");
}

TEST(CompletionRequestTest, NRange) {
  expect_bad_request(parse_completion({{"prompt", "x"}, {"n", 0}}), "n",
                     "n must be in [1, 4], got 0");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"n", 5}}), "n",
                     "n must be in [1, 4], got 5");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"n", "2"}}), "n",
                     "n must be an integer, got a string");
}

TEST(CompletionRequestTest, BadStop) {
  expect_bad_request(parse_completion({{"prompt", "x"}, {"stop", {"a", "b", "c", "d", "e"}}}),
                     "stop", "stop may hold at most 4 strings, got 5");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"stop", {"a", 3}}}), "stop[1]",
                     "stop[1] must be a string, got a number");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"stop", 3}}), "stop",
                     "stop must be a string or an array of strings, got a number");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"stop", ""}}), "stop",
                     "stop must not be an empty string");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"stop", {"a", ""}}}), "stop[1]",
                     "stop[1] must not be an empty string");
}

TEST(CompletionRequestTest, WrongTypesNameTheField) {
  struct Case {
    const char* field;
    json value;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"model", 3, "model must be a string, got a number"},
      {"temperature", "hot", "temperature must be a number, got a string"},
      {"top_p", true, "top_p must be a number, got a boolean"},
      {"top_k", 0.5, "top_k must be an integer, got a number"},
      {"min_p", json::array(), "min_p must be a number, got an array"},
      {"presence_penalty", "0", "presence_penalty must be a number, got a string"},
      {"frequency_penalty", json::object(), "frequency_penalty must be a number, got an object"},
      {"repetition_penalty", "1", "repetition_penalty must be a number, got a string"},
      {"logprobs", true, "logprobs must be an integer, got a boolean"},
      {"echo", "no", "echo must be a boolean, got a string"},
      {"stream", 1, "stream must be a boolean, got a number"},
      {"stream_options", true, "stream_options must be an object, got a boolean"},
      {"user", 5, "user must be a string, got a number"},
      {"cache_salt", 5, "cache_salt must be a string, got a number"},
      {"ignore_eos", "yes", "ignore_eos must be a boolean, got a string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    json body = {{"prompt", "x"}};
    body[c.field] = c.value;
    if (std::string(c.field) == "stream_options") body["stream"] = true;
    expect_bad_request(parse_completion(body), c.field, c.message);
  }
  expect_bad_request(
      parse_completion(
          {{"prompt", "x"}, {"stream", true}, {"stream_options", {{"include_usage", "yes"}}}}),
      "stream_options.include_usage",
      "stream_options.include_usage must be a boolean, got a string");
}

// Fields that change what a request means and are not implemented are refused by name; before,
// best_of, suffix, functions (and more) were silently ignored.
TEST(CompletionRequestTest, UnimplementedFieldsAreRefusedByName) {
  struct Case {
    const char* field;
    json value;
  };
  const std::vector<Case> shared = {
      {"functions", json::array({{{"name", "f"}}})},
      {"function_call", {{"name", "f"}}},
      {"logit_bias", {{"5", 10}}},
  };
  for (const Case& c : shared) {
    SCOPED_TRACE(c.field);
    json completion = {{"prompt", "x"}, {c.field, c.value}};
    expect_bad_request(parse_completion(completion), c.field, "is not supported");
    json chat = {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {c.field, c.value}};
    expect_bad_request(parse_chat(chat), c.field, "is not supported");
  }
  // Tools are a chat feature.
  expect_bad_request(
      parse_completion({{"prompt", "x"},
                        {"tools", json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}})}}),
      "tools", "use /v1/chat/completions");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"tool_choice", "required"}}), "tool_choice",
                     "is not supported");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"best_of", 3}}), "best_of",
                     "best_of (ranking");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"n", 2}, {"best_of", 3}}), "best_of",
                     "is not supported");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"suffix", "END"}}), "suffix",
                     "suffix (text inserted");
  // OpenAI refuses stream_options on a whole response too.
  expect_bad_request(
      parse_completion({{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}}),
      "stream_options", "only allowed when stream is true");
  expect_bad_request(parse_chat({{"messages", {{{"role", "user"}, {"content", "x"}}}},
                                 {"stream", false},
                                 {"stream_options", {{"include_usage", true}}}}),
                     "stream_options", "only allowed when stream is true");
}

// The same fields with values that ask for nothing are served.
TEST(CompletionRequestTest, UnimplementedFieldsThatAskForNothingAreAccepted) {
  const json harmless = {
      {"prompt", "x"},
      {"response_format", {{"type", "text"}}},
      {"tools", json::array()},
      {"tool_choice", "none"},
      {"functions", json::array()},
      {"function_call", "auto"},
      {"logit_bias", json::object()},
      {"suffix", ""},
      {"n", 2},
      {"best_of", 2},
  };
  EXPECT_TRUE(parse_completion(harmless).ok());
  EXPECT_TRUE(parse_completion({{"prompt", "x"}, {"best_of", 1}}).ok());
  EXPECT_TRUE(parse_completion({{"prompt", "x"}, {"grammar", nullptr}}).ok()) << "null is absent";
}

// Every field that constrains the output becomes one OutputConstraint, with the param its
// compilation errors will name.
TEST(CompletionRequestTest, OutputConstraintsParseFromEveryAlias) {
  using Kind = OutputConstraint::Kind;
  const json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}};
  struct Case {
    const char* field;
    json value;
    Kind kind;
    const char* param;
  };
  const std::vector<Case> cases = {
      {"response_format", {{"type", "json_object"}}, Kind::JSON_OBJECT, "response_format"},
      {"response_format", {{"type", "json_object"}, {"schema", schema}}, Kind::JSON_SCHEMA,
       "response_format.schema"},
      {"response_format",
       {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"strict", true}, {"schema", schema}}}},
       Kind::JSON_SCHEMA, "response_format.json_schema.schema"},
      {"json_schema", schema, Kind::JSON_SCHEMA, "json_schema"},
      {"guided_json", schema.dump(), Kind::JSON_SCHEMA, "guided_json"},
      {"grammar", "root ::= \"a\"", Kind::GBNF, "grammar"},
      {"guided_grammar", "root ::= \"a\"", Kind::GBNF, "guided_grammar"},
      {"regex", "[a-z]+", Kind::REGEX, "regex"},
      {"guided_regex", "a+", Kind::REGEX, "guided_regex"},
      {"choice", {"yes", "no"}, Kind::CHOICE, "choice"},
      {"guided_choice", {"a"}, Kind::CHOICE, "guided_choice"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    for (bool chat : {false, true}) {
      json body = chat ? json{{"messages", {{{"role", "user"}, {"content", "x"}}}}} : json{{"prompt", "x"}};
      body[c.field] = c.value;
      const std::optional<OutputConstraint> constraint =
          chat ? parse_chat(body)->constraint : parse_completion(body)->constraint;
      ASSERT_TRUE(constraint.has_value());
      EXPECT_EQ(constraint->kind, c.kind);
      EXPECT_EQ(constraint->param, c.param);
      if (c.kind == Kind::JSON_SCHEMA) {
        EXPECT_EQ(constraint->schema.dump(), schema.dump());
      }
    }
  }
  EXPECT_FALSE(parse_completion({{"prompt", "x"}, {"response_format", {{"type", "text"}}}})
                   ->constraint.has_value());
}

TEST(CompletionRequestTest, BadOutputConstraintsAreRefusedByName) {
  expect_bad_request(parse_completion({{"prompt", "x"}, {"regex", "a"}, {"choice", {"a"}}}),
                     "choice", "only one output constraint may be given, not both regex and choice");
  expect_bad_request(
      parse_completion({{"prompt", "x"}, {"response_format", {{"type", "yaml"}}}}),
      "response_format.type", "not \"yaml\"");
  expect_bad_request(
      parse_completion({{"prompt", "x"}, {"response_format", {{"type", "json_schema"}}}}),
      "response_format.json_schema", "must be an object with a schema");
  expect_bad_request(
      parse_completion({{"prompt", "x"},
                        {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", 3}}}}}}),
      "response_format.json_schema.schema", "must be a JSON schema");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"choice", json::array()}}), "choice",
                     "non-empty array");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"choice", {"a", 1}}}), "choice[1]",
                     "must be a string");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"grammar", ""}}), "grammar",
                     "non-empty string");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"guided_json", "{not json"}}),
                     "guided_json", "is not a JSON schema");
}

TEST(CompletionRequestTest, OutOfRangeSamplingNamesTheField) {
  expect_bad_request(parse_completion({{"prompt", "x"}, {"temperature", -1}}), "temperature",
                     "temperature must be a finite number >= 0");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"top_p", 0}}), "top_p",
                     "top_p must be in (0, 1]");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"min_p", 1.5}}), "min_p",
                     "min_p must be in [0, 1]");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"presence_penalty", 2.5}}),
                     "presence_penalty", "presence_penalty must be in [-2, 2]");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"frequency_penalty", -3}}),
                     "frequency_penalty", "frequency_penalty must be in [-2, 2]");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"repetition_penalty", 0}}),
                     "repetition_penalty", "repetition_penalty must be a finite number > 0");
  // Beyond float's range: +inf after narrowing, rejected rather than silently clamped.
  expect_bad_request(
      parse_completion_request(R"({"prompt": "x", "temperature": 1e300})", test_limits()),
      "temperature", "temperature must be a finite number");
}

TEST(CompletionRequestTest, LogprobsRange) {
  expect_bad_request(parse_completion({{"prompt", "x"}, {"logprobs", 21}}), "logprobs",
                     "logprobs must be in [0, 20], got 21");
  expect_bad_request(parse_completion({{"prompt", "x"}, {"logprobs", -1}}), "logprobs",
                     "logprobs must be in [0, 20], got -1");
}

TEST(CompletionRequestTest, EchoIsNotSupported) {
  expect_bad_request(parse_completion({{"prompt", "x"}, {"echo", true}}), "echo",
                     "echo is not supported");
}

TEST(CompletionRequestTest, EmptyCacheSaltIsRejected) {
  expect_bad_request(parse_completion({{"prompt", "x"}, {"cache_salt", ""}}), "cache_salt",
                     "cache_salt must not be empty");
}

TEST(CompletionRequestTest, FirstErrorWins) {
  // The prompt is read first, so its error is the one reported.
  auto result = parse_completion({{"prompt", 1}, {"n", 0}, {"max_tokens", -1}});
  expect_bad_request(result, "prompt", "prompt must be a string");
}

// ---- Chat ----

TEST(ChatCompletionRequestTest, EveryFieldIsRead) {
  auto result = parse_chat({
      {"model", "tiny-chat"},
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}},
        {{"role", "user"},
         {"content",
          {{{"type", "text"}, {"text", "Hello"}}, {{"type", "text"}, {"text", "there"}}}}},
        {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array()}},
        {{"role", "tool"}, {"content", "42"}, {"name", "calc"}}}},
      {"max_completion_tokens", 64},
      {"temperature", 0},
      {"top_p", 0.5},
      {"top_k", 5},
      {"min_p", 0.1},
      {"seed", 9},
      {"stop", "\n\n"},
      {"n", 3},
      {"presence_penalty", 1},
      {"frequency_penalty", 0.5},
      {"repetition_penalty", 1.2},
      {"logprobs", true},
      {"top_logprobs", 5},
      {"stream", true},
      {"stream_options", {{"include_usage", false}}},
      {"user", "someone"},
      {"cache_salt", "team-a"},
      {"ignore_eos", true},
      {"tools", json::array()},  // no tools: asks for nothing
  });
  ASSERT_TRUE(result.ok()) << result.error().message;
  const ChatCompletionRequest& r = result.value();
  EXPECT_EQ(r.model, "tiny-chat");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[1].role, "user");
  EXPECT_EQ(r.messages[1].content, "Hello\nthere");
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.messages[3].role, "tool");
  EXPECT_EQ(r.messages[3].content, "42");
  EXPECT_EQ(r.max_tokens, 64);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 5);
  EXPECT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_EQ(r.sampling.seed, 9u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n\n"}));
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.sampling.presence_penalty, 1.0f);
  EXPECT_EQ(r.sampling.frequency_penalty, 0.5f);
  EXPECT_EQ(r.sampling.repetition_penalty, 1.2f);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 5);
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_EQ(r.user, "someone");
  EXPECT_EQ(r.cache_salt, "team-a");
  EXPECT_TRUE(r.ignore_eos);
}

TEST(ChatCompletionRequestTest, Defaults) {
  auto result = parse_chat({{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  ASSERT_TRUE(result.ok()) << result.error().message;
  const ChatCompletionRequest& r = result.value();
  EXPECT_EQ(r.model, "");
  EXPECT_EQ(r.max_tokens, std::nullopt);
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 0);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_EQ(r.cache_salt, std::nullopt);
  EXPECT_FALSE(r.ignore_eos);
  EXPECT_TRUE(r.enable_thinking);
}

TEST(ChatCompletionRequestTest, ChatTemplateKwargsEnableThinkingOnly) {
  const json messages = {{{"role", "user"}, {"content", "hi"}}};
  auto off =
      parse_chat({{"messages", messages}, {"chat_template_kwargs", {{"enable_thinking", false}}}});
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_FALSE(off->enable_thinking);
  expect_bad_request(
      parse_chat({{"messages", messages}, {"chat_template_kwargs", {{"tools", json::array()}}}}),
      "chat_template_kwargs.tools",
      "chat_template_kwargs.tools is not supported (only enable_thinking)");
  expect_bad_request(parse_chat({{"messages", messages}, {"chat_template_kwargs", true}}),
                     "chat_template_kwargs",
                     "chat_template_kwargs must be an object, got a boolean");
  expect_bad_request(
      parse_chat({{"messages", messages}, {"chat_template_kwargs", {{"enable_thinking", "no"}}}}),
      "chat_template_kwargs.enable_thinking",
      "chat_template_kwargs.enable_thinking must be a boolean, got a string");
}

TEST(ChatCompletionRequestTest, MaxTokensAndMaxCompletionTokens) {
  const json messages = {{{"role", "user"}, {"content", "hi"}}};
  auto old_name = parse_chat({{"messages", messages}, {"max_tokens", 10}});
  ASSERT_TRUE(old_name.ok());
  EXPECT_EQ(old_name->max_tokens, 10);
  auto both =
      parse_chat({{"messages", messages}, {"max_tokens", 10}, {"max_completion_tokens", 20}});
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->max_tokens, 20);
  expect_bad_request(parse_chat({{"messages", messages}, {"max_completion_tokens", 5000}}),
                     "max_completion_tokens",
                     "max_completion_tokens must be in [1, 1000], got 5000");
  expect_bad_request(parse_chat({{"messages", messages}, {"max_tokens", -1}}), "max_tokens",
                     "max_tokens must be in [1, 1000], got -1");
}

TEST(ChatCompletionRequestTest, MissingOrBadMessages) {
  expect_bad_request(parse_chat({{"model", "m"}}), "messages", "messages is required");
  expect_bad_request(parse_chat({{"messages", "hi"}}), "messages",
                     "messages must be an array of messages, got a string");
  expect_bad_request(parse_chat({{"messages", json::array()}}), "messages",
                     "messages must hold at least one message");
  expect_bad_request(parse_chat({{"messages", {"hi"}}}), "messages[0]",
                     "messages[0] must be an object, got a string");
  expect_bad_request(parse_chat({{"messages", {{{"content", "hi"}}}}}), "messages[0].role",
                     "messages[0].role is required");
  expect_bad_request(parse_chat({{"messages", {{{"role", 1}, {"content", "hi"}}}}}),
                     "messages[0].role", "messages[0].role must be a string, got a number");
  expect_bad_request(
      parse_chat({{"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "user"}}}}}),
      "messages[1].content", "messages[1].content is required");
  expect_bad_request(parse_chat({{"messages", {{{"role", "user"}, {"content", nullptr}}}}}),
                     "messages[0].content", "messages[0].content is required");
  expect_bad_request(parse_chat({{"messages", {{{"role", "user"}, {"content", 7}}}}}),
                     "messages[0].content",
                     "messages[0].content must be a string or an array of content parts, got a "
                     "number");
}

TEST(ChatCompletionRequestTest, UnknownRolesAreLeftToTheTemplate) {
  auto result = parse_chat({{"messages", {{{"role", "narrator"}, {"content", "..."}}}}});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->messages[0].role, "narrator");
}

TEST(ChatCompletionRequestTest, BadContentParts) {
  auto with_parts = [](json parts) {
    return json{{"messages", {{{"role", "user"}, {"content", std::move(parts)}}}}};
  };
  expect_bad_request(
      parse_chat(with_parts({{{"type", "text"}, {"text", "a"}},
                             {{"type", "image_url"}, {"image_url", {{"url", "http://x"}}}}})),
      "messages[0].content[1].type",
      "messages[0].content[1].type 'image_url' is not supported (only 'text' parts are)");
  expect_bad_request(parse_chat(with_parts({"just a string"})), "messages[0].content[0]",
                     "messages[0].content[0] must be an object, got a string");
  expect_bad_request(parse_chat(with_parts({{{"text", "a"}}})), "messages[0].content[0].type",
                     "messages[0].content[0].type is required");
  expect_bad_request(parse_chat(with_parts({{{"type", 1}}})), "messages[0].content[0].type",
                     "messages[0].content[0].type must be a string, got a number");
  expect_bad_request(parse_chat(with_parts({{{"type", "text"}}})), "messages[0].content[0].text",
                     "messages[0].content[0].text is required");
  expect_bad_request(parse_chat(with_parts({{{"type", "text"}, {"text", 5}}})),
                     "messages[0].content[0].text",
                     "messages[0].content[0].text must be a string, got a number");
  // An empty part list is an empty text.
  auto empty = parse_chat(with_parts(json::array()));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->messages[0].content, "");
}

TEST(ChatCompletionRequestTest, LogprobsFields) {
  const json messages = {{{"role", "user"}, {"content", "hi"}}};
  expect_bad_request(parse_chat({{"messages", messages}, {"logprobs", 1}}), "logprobs",
                     "logprobs must be a boolean, got a number");
  expect_bad_request(parse_chat({{"messages", messages}, {"logprobs", true}, {"top_logprobs", 21}}),
                     "top_logprobs", "top_logprobs must be in [0, 20], got 21");
  expect_bad_request(parse_chat({{"messages", messages}, {"top_logprobs", 2}}), "top_logprobs",
                     "top_logprobs requires logprobs to be true");
  auto zero = parse_chat({{"messages", messages}, {"top_logprobs", 0}});
  ASSERT_TRUE(zero.ok());
  EXPECT_FALSE(zero->logprobs);
}

TEST(ChatCompletionRequestTest, SharedValidationApplies) {
  const json messages = {{{"role", "user"}, {"content", "hi"}}};
  expect_bad_request(parse_chat({{"messages", messages}, {"n", 0}}), "n", "n must be in [1, 4]");
  expect_bad_request(parse_chat({{"messages", messages}, {"stop", {"1", "2", "3", "4", "5"}}}),
                     "stop", "stop may hold at most 4 strings, got 5");
  expect_bad_request(parse_chat({{"messages", messages}, {"temperature", "0"}}), "temperature",
                     "temperature must be a number, got a string");
  expect_bad_request(parse_chat({{"messages", messages}, {"top_p", 2}}), "top_p",
                     "top_p must be in (0, 1]");
  expect_bad_request(parse_chat_completion_request("{\"messages\": [", test_limits()), std::nullopt,
                     "request body is not valid JSON");
}

// ---- SamplingParams ----

TEST(ToSamplingParamsTest, DefaultsAndFallbackSeed) {
  auto params = to_sampling_params(SamplingOptions{}, 77);
  ASSERT_TRUE(params.ok());
  EXPECT_EQ(params->temperature, 1.0f);
  EXPECT_EQ(params->top_p, 1.0f);
  EXPECT_EQ(params->top_k, 0);
  EXPECT_EQ(params->min_p, 0.0f);
  EXPECT_EQ(params->presence_penalty, 0.0f);
  EXPECT_EQ(params->frequency_penalty, 0.0f);
  EXPECT_EQ(params->repetition_penalty, 1.0f);
  EXPECT_EQ(params->penalty_last_n, -1);
  EXPECT_EQ(params->seed, 77u);
  EXPECT_FALSE(params->has_penalties());
}

TEST(ToSamplingParamsTest, ValuesAreCopiedAndTheClientSeedWins) {
  SamplingOptions options;
  options.temperature = 0.0f;
  options.top_p = 0.8f;
  options.top_k = 12;
  options.min_p = 0.02f;
  options.presence_penalty = 0.5f;
  options.frequency_penalty = 0.25f;
  options.repetition_penalty = 1.3f;
  options.seed = 5;
  auto params = to_sampling_params(options, 77);
  ASSERT_TRUE(params.ok());
  EXPECT_TRUE(params->is_greedy());
  EXPECT_EQ(params->top_p, 0.8f);
  EXPECT_EQ(params->top_k, 12);
  EXPECT_EQ(params->min_p, 0.02f);
  EXPECT_EQ(params->presence_penalty, 0.5f);
  EXPECT_EQ(params->frequency_penalty, 0.25f);
  EXPECT_EQ(params->repetition_penalty, 1.3f);
  EXPECT_EQ(params->penalty_last_n, -1);
  EXPECT_EQ(params->seed, 5u);
  EXPECT_TRUE(params->has_penalties());
}

TEST(ToSamplingParamsTest, InvalidValuesNameTheParam) {
  SamplingOptions options;
  options.frequency_penalty = 3.0f;
  auto params = to_sampling_params(options, 0);
  ASSERT_FALSE(params.ok());
  EXPECT_EQ(params.error().http_status, 400);
  EXPECT_EQ(params.error().param, "frequency_penalty");
  EXPECT_EQ(params.error().message, "frequency_penalty must be in [-2, 2] (0 = off), got 3");
}

// ---- /tokenize and /detokenize ----

TEST(TokenizeRequestTest, ReadsPromptAndAddSpecialTokens) {
  auto r = parse_tokenize_request(json{{"prompt", "Hello"}}.dump(), test_limits());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->prompt, "Hello");
  EXPECT_TRUE(r->add_special_tokens);
  r = parse_tokenize_request(json{{"prompt", ""}, {"add_special_tokens", false}}.dump(),
                             test_limits());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->prompt, "");
  EXPECT_FALSE(r->add_special_tokens);
}

TEST(TokenizeRequestTest, BadBodiesAre400s) {
  expect_bad_request(parse_tokenize_request("{", test_limits()), std::nullopt, "JSON");
  expect_bad_request(parse_tokenize_request("[1]", test_limits()), std::nullopt, "object");
  expect_bad_request(parse_tokenize_request("{}", test_limits()), "prompt", "prompt");
  expect_bad_request(parse_tokenize_request(json{{"prompt", 5}}.dump(), test_limits()), "prompt",
                     "prompt must be a string");
  expect_bad_request(parse_tokenize_request(
                         json{{"prompt", "a"}, {"add_special_tokens", "no"}}.dump(), test_limits()),
                     "add_special_tokens", "add_special_tokens must be a boolean");
}

TEST(DetokenizeRequestTest, ReadsTokenIdsInsideTheVocab) {
  auto r = parse_detokenize_request(json{{"tokens", {0, 5, 9}}}.dump(), test_limits(), 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tokens, (std::vector<TokenId>{0, 5, 9}));
  r = parse_detokenize_request(json{{"tokens", json::array()}}.dump(), test_limits(), 10);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->tokens.empty());
}

TEST(DetokenizeRequestTest, NamesTheFirstBadToken) {
  expect_bad_request(parse_detokenize_request("{}", test_limits(), 10), "tokens",
                     "tokens must be an array");
  expect_bad_request(parse_detokenize_request(json{{"tokens", {1, 10}}}.dump(), test_limits(), 10),
                     "tokens[1]", "tokens[1] must be a token id in [0, 10)");
  expect_bad_request(parse_detokenize_request(json{{"tokens", {-1}}}.dump(), test_limits(), 10),
                     "tokens[0]", "tokens[0]");
  expect_bad_request(parse_detokenize_request(json{{"tokens", {"a"}}}.dump(), test_limits(), 10),
                     "tokens[0]", "tokens[0]");
}

}  // namespace
}  // namespace trellis
