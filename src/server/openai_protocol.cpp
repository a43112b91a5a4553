#include "server/openai_protocol.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <utility>

#include "server/json_fields.h"

namespace trellis {
namespace {

SamplingOptions read_sampling(FieldReader& reader, const OrderedJson& body) {
  SamplingOptions options;
  options.temperature = reader.number(body, "temperature");
  options.top_p = reader.number(body, "top_p");
  // -1 is vLLM's "off"; to_sampling_params() maps it to 0.
  if (auto top_k = reader.integer(body, "top_k", -1, kInt32Max)) {
    options.top_k = static_cast<int32_t>(*top_k);
  }
  options.min_p = reader.number(body, "min_p");
  options.presence_penalty = reader.number(body, "presence_penalty");
  options.frequency_penalty = reader.number(body, "frequency_penalty");
  options.repetition_penalty = reader.number(body, "repetition_penalty");
  options.seed = reader.seed(body, "seed");
  return options;
}

// "stop": a string, or an array of at most limits.max_stop_strings strings; none may be empty.
std::vector<std::string> read_stop(FieldReader& reader, const OrderedJson& body,
                                   const ProtocolLimits& limits) {
  const OrderedJson* value = reader.find(body, "stop");
  if (value == nullptr) return {};
  if (value->is_string()) {
    if (value->get_ref<const std::string&>().empty()) {
      reader.fail("stop must not be an empty string", "stop");
      return {};
    }
    return {value->get<std::string>()};
  }
  if (!value->is_array()) {
    reader.type_error("stop", "a string or an array of strings", *value);
    return {};
  }
  if (value->size() > static_cast<size_t>(limits.max_stop_strings)) {
    reader.fail("stop may hold at most " + std::to_string(limits.max_stop_strings) +
                    " strings, got " + std::to_string(value->size()),
                "stop");
    return {};
  }
  std::vector<std::string> stop;
  for (size_t i = 0; i < value->size(); ++i) {
    const OrderedJson& item = (*value)[i];
    const std::string path = "stop[" + std::to_string(i) + "]";
    if (!item.is_string()) {
      reader.type_error(path, "a string", item);
      return {};
    }
    if (item.get_ref<const std::string&>().empty()) {
      reader.fail(path + " must not be an empty string", path);
      return {};
    }
    stop.push_back(item.get<std::string>());
  }
  return stop;
}

// A request field that would change what the client gets and that the server does not implement:
// accepting it silently would answer another question, so it is refused by name unless its value
// asks for nothing (`harmless`).
struct UnimplementedField {
  const char* name;
  const char* what_it_asks;  // completes "<name> (...) is not supported"
  bool (*harmless)(const OrderedJson& value, const OrderedJson& body);
};

bool is_empty(const OrderedJson& value, const OrderedJson&) {
  return value.empty() || (value.is_string() && value.get_ref<const std::string&>().empty());
}
bool asks_for_no_call(const OrderedJson& value, const OrderedJson&) {
  return value.is_string() && (value == "none" || value == "auto");
}
// best_of equal to n (1 when n is absent) returns every sequence generated: what n alone does.
bool best_of_equals_n(const OrderedJson& value, const OrderedJson& body) {
  const OrderedJson n = body.value("n", OrderedJson(1));
  return value.is_number_integer() && n.is_number_integer() && value == n;
}

constexpr UnimplementedField kSharedUnimplemented[] = {
    {"logit_bias", "biasing token logits", is_empty},
    {"functions", "function calls, the older form of tools", is_empty},
    {"function_call", "forcing a function call", asks_for_no_call},
};
constexpr UnimplementedField kCompletionUnimplemented[] = {
    {"best_of", "ranking more sequences than are returned; best_of equal to n is served",
     best_of_equals_n},
    {"suffix", "text inserted after the completion", is_empty},
    {"tools", "tool calls (a chat feature: use /v1/chat/completions)", is_empty},
    {"tool_choice", "forcing a tool call (a chat feature)", asks_for_no_call},
};

void refuse_unimplemented(FieldReader& reader, const OrderedJson& body,
                          std::span<const UnimplementedField> fields) {
  for (const UnimplementedField& field : fields) {
    const OrderedJson* value = reader.find(body, field.name);
    if (value == nullptr || field.harmless(*value, body)) continue;
    reader.fail(std::string(field.name) + " (" + field.what_it_asks + ") is not supported",
                field.name);
  }
}

// A JSON schema given as an object or a boolean (or, for vLLM's guided_json, as JSON text).
std::optional<OrderedJson> read_schema(FieldReader& reader, const OrderedJson& value,
                                       const std::string& path, bool text_allowed) {
  if (value.is_object() || value.is_boolean()) return value;
  if (text_allowed && value.is_string()) {
    OrderedJson parsed =
        OrderedJson::parse(value.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_discarded() && (parsed.is_object() || parsed.is_boolean())) return parsed;
    reader.fail(path + " is not a JSON schema (an object)", path);
    return std::nullopt;
  }
  reader.type_error(path, "a JSON schema (an object)", value);
  return std::nullopt;
}

// response_format: {"type": "text" | "json_object" | "json_schema", ...}.
std::optional<OutputConstraint> read_response_format(FieldReader& reader,
                                                     const OrderedJson& format) {
  if (!format.is_object()) {
    reader.type_error("response_format", "an object", format);
    return std::nullopt;
  }
  const std::string type = reader.string(format, "type", "response_format.type").value_or("");
  OutputConstraint c;
  if (type == "text" || reader.failed()) return std::nullopt;
  if (type == "json_object") {
    // llama.cpp's form {"type": "json_object", "schema": {...}} constrains to the schema.
    if (const OrderedJson* schema = reader.find(format, "schema")) {
      std::optional<OrderedJson> s = read_schema(reader, *schema, "response_format.schema", false);
      if (!s) return std::nullopt;
      return OutputConstraint{
          OutputConstraint::Kind::JSON_SCHEMA, *s, "", {}, "response_format.schema"};
    }
    return OutputConstraint{OutputConstraint::Kind::JSON_OBJECT, {}, "", {}, "response_format"};
  }
  if (type == "json_schema") {
    const OrderedJson* spec = reader.find(format, "json_schema");
    if (spec == nullptr || !spec->is_object()) {
      reader.fail("response_format.json_schema must be an object with a schema",
                  "response_format.json_schema");
      return std::nullopt;
    }
    (void)reader.string(*spec, "name", "response_format.json_schema.name");
    (void)reader.boolean(*spec, "strict", "response_format.json_schema.strict");
    const OrderedJson* schema = reader.find(*spec, "schema");
    if (schema == nullptr) {  // OpenAI's default: any JSON object
      return OutputConstraint{
          OutputConstraint::Kind::JSON_OBJECT, {}, "", {}, "response_format.json_schema"};
    }
    std::optional<OrderedJson> s =
        read_schema(reader, *schema, "response_format.json_schema.schema", false);
    if (!s) return std::nullopt;
    return OutputConstraint{
        OutputConstraint::Kind::JSON_SCHEMA, *s, "", {}, "response_format.json_schema.schema"};
  }
  reader.fail("response_format.type must be \"text\", \"json_object\" or \"json_schema\"" +
                  (type.empty() ? std::string() : ", not \"" + type + "\""),
              "response_format.type");
  return std::nullopt;
}

// One of the constraint fields, by its name.
std::optional<OutputConstraint> read_constraint_field(FieldReader& reader, const OrderedJson& value,
                                                      const std::string& name) {
  using Kind = OutputConstraint::Kind;
  if (name == "response_format") return read_response_format(reader, value);
  if (name == "json_schema" || name == "guided_json") {
    std::optional<OrderedJson> s = read_schema(reader, value, name, name == "guided_json");
    if (!s) return std::nullopt;
    return OutputConstraint{Kind::JSON_SCHEMA, *s, "", {}, name};
  }
  if (name == "grammar" || name == "guided_grammar" || name == "regex" || name == "guided_regex") {
    if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
      reader.type_error(name, "a non-empty string", value);
      return std::nullopt;
    }
    const bool is_grammar = name.find("grammar") != std::string::npos;
    return OutputConstraint{
        is_grammar ? Kind::GBNF : Kind::REGEX, {}, value.get<std::string>(), {}, name};
  }
  // choice, guided_choice: a non-empty list of strings.
  if (!value.is_array() || value.empty()) {
    reader.type_error(name, "a non-empty array of strings", value);
    return std::nullopt;
  }
  OutputConstraint c{Kind::CHOICE, {}, "", {}, name};
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string()) {
      reader.type_error(name + "[" + std::to_string(i) + "]", "a string", value[i]);
      return std::nullopt;
    }
    c.choices.push_back(value[i].get<std::string>());
  }
  return c;
}

// At most one of the fields that constrain the output.
std::optional<OutputConstraint> read_output_constraint(FieldReader& reader,
                                                       const OrderedJson& body) {
  static const char* const kFields[] = {"response_format", "json_schema",  "grammar",
                                        "regex",           "choice",       "guided_json",
                                        "guided_grammar",  "guided_regex", "guided_choice"};
  std::optional<OutputConstraint> constraint;
  std::string first;
  for (const char* name : kFields) {
    const OrderedJson* value = reader.find(body, name);
    if (value == nullptr) continue;
    std::optional<OutputConstraint> c = read_constraint_field(reader, *value, name);
    if (reader.failed() || !c) continue;
    if (constraint) {
      reader.fail("only one output constraint may be given, not both " + first + " and " + name,
                  name);
      return std::nullopt;
    }
    constraint = std::move(c);
    first = name;
  }
  return constraint;
}

// The fields both endpoints share. Request is CompletionRequest or ChatCompletionRequest.
template <typename Request>
void read_shared_fields(FieldReader& reader, const OrderedJson& body, const ProtocolLimits& limits,
                        Request& request) {
  request.model = reader.string(body, "model").value_or("");
  refuse_unimplemented(reader, body, kSharedUnimplemented);
  request.sampling = read_sampling(reader, body);
  request.stop = read_stop(reader, body, limits);
  request.n = static_cast<int32_t>(reader.integer(body, "n", 1, limits.max_n).value_or(1));
  request.stream = reader.boolean(body, "stream").value_or(false);
  if (const OrderedJson* options = reader.find(body, "stream_options")) {
    if (!request.stream && !reader.failed()) {
      // As OpenAI answers: the options would be silently void on a whole response.
      reader.fail("stream_options is only allowed when stream is true", "stream_options");
    } else if (options->is_object()) {
      request.include_usage =
          reader.boolean(*options, "include_usage", "stream_options.include_usage").value_or(false);
    } else {
      reader.type_error("stream_options", "an object", *options);
    }
  }
  request.user = reader.string(body, "user").value_or("");
  request.cache_salt = reader.string(body, "cache_salt");
  if (request.cache_salt && request.cache_salt->empty()) {
    reader.fail("cache_salt must not be empty when given", "cache_salt");
  }
  request.ignore_eos = reader.boolean(body, "ignore_eos").value_or(false);
  request.speculative = reader.boolean(body, "speculative").value_or(true);
  request.constraint = read_output_constraint(reader, body);
}

// A token id list at `path`: integers in [0, INT32_MAX], at least one.
std::vector<TokenId> read_token_ids(FieldReader& reader, const OrderedJson& array,
                                    const std::string& path) {
  if (array.empty()) {
    reader.fail(path + " must not be an empty list of token ids", path);
    return {};
  }
  std::vector<TokenId> tokens;
  tokens.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    const OrderedJson& item = array[i];
    if (!item.is_number()) {
      reader.type_error(item_path, "a token id (an integer >= 0)", item);
      return {};
    }
    auto id = reader.integer_value(item, item_path, 0, kInt32Max);
    if (!id) return {};
    tokens.push_back(static_cast<TokenId>(*id));
  }
  return tokens;
}

// "prompt": "text", ["text"], [1, 2, 3] or [[1, 2, 3]]. Several prompts in one request (OpenAI's
// batch form) are rejected: clients send one request per prompt.
std::variant<std::string, std::vector<TokenId>> read_prompt(FieldReader& reader,
                                                            const OrderedJson& body) {
  const OrderedJson* value = reader.find(body, "prompt");
  if (value == nullptr) {
    if (!reader.failed()) reader.fail("prompt is required", "prompt");
    return std::string();
  }
  if (value->is_string()) return value->get<std::string>();
  if (!value->is_array()) {
    reader.type_error("prompt", "a string or an array of token ids", *value);
    return std::string();
  }
  if (value->empty()) {
    reader.fail("prompt must not be an empty array", "prompt");
    return std::string();
  }
  const OrderedJson& first = value->front();
  if (first.is_string() || first.is_array()) {
    if (value->size() != 1) {
      reader.fail("prompt holds " + std::to_string(value->size()) +
                      " prompts; only one prompt per request is supported",
                  "prompt");
      return std::string();
    }
    if (first.is_string()) return first.get<std::string>();
    return read_token_ids(reader, first, "prompt[0]");
  }
  return read_token_ids(reader, *value, "prompt");
}

// A message's content: a string, or a list of text parts joined with "\n"; null is accepted for
// the assistant role only. `path` is "messages[i]".
std::string read_content(FieldReader& reader, const OrderedJson& message, const std::string& role,
                         const std::string& path) {
  const std::string content_path = path + ".content";
  const OrderedJson* content = reader.find(message, "content");
  if (content == nullptr) {
    if (role != "assistant") reader.fail(content_path + " is required", content_path);
    return "";
  }
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) {
    reader.type_error(content_path, "a string or an array of content parts", *content);
    return "";
  }
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const OrderedJson& part = (*content)[i];
    const std::string part_path = content_path + "[" + std::to_string(i) + "]";
    if (!part.is_object()) {
      reader.type_error(part_path, "an object", part);
      return "";
    }
    const std::string type_path = part_path + ".type";
    const std::optional<std::string> type = reader.string(part, "type", type_path);
    if (reader.failed()) return "";
    if (!type) {
      reader.fail(type_path + " is required", type_path);
      return "";
    }
    if (*type != "text") {
      reader.fail(type_path + " '" + *type + "' is not supported (only 'text' parts are)",
                  type_path);
      return "";
    }
    const std::string text_path = part_path + ".text";
    const std::optional<std::string> part_text = reader.string(part, "text", text_path);
    if (reader.failed()) return "";
    if (!part_text) {
      reader.fail(text_path + " is required", text_path);
      return "";
    }
    if (i > 0) text += '\n';
    text += *part_text;
  }
  return text;
}

// An assistant message's tool_calls: [{"id", "type": "function", "function": {"name",
// "arguments"}}]; arguments is a JSON text (OpenAI's form) or, leniently, an object.
std::vector<ChatToolCall> read_message_tool_calls(FieldReader& reader, const OrderedJson& message,
                                                  const std::string& path) {
  const OrderedJson* list = reader.find(message, "tool_calls");
  if (list == nullptr) return {};
  const std::string list_path = path + ".tool_calls";
  if (!list->is_array()) {
    reader.type_error(list_path, "an array of tool calls", *list);
    return {};
  }
  std::vector<ChatToolCall> calls;
  for (size_t i = 0; i < list->size(); ++i) {
    const OrderedJson& item = (*list)[i];
    const std::string item_path = list_path + "[" + std::to_string(i) + "]";
    const OrderedJson* function = item.is_object() ? reader.find(item, "function") : nullptr;
    if (function == nullptr || !function->is_object()) {
      reader.fail(item_path + ".function is required (an object)", item_path + ".function");
      return {};
    }
    ChatToolCall call;
    call.id = reader.string(item, "id", item_path + ".id").value_or("");
    const std::optional<std::string> name =
        reader.string(*function, "name", item_path + ".function.name");
    if (!name && !reader.failed())
      reader.fail(item_path + ".function.name is required", item_path + ".function.name");
    const OrderedJson* arguments = reader.find(*function, "arguments");
    if (reader.failed()) return {};
    call.name = *name;
    if (arguments == nullptr) {
      call.arguments = "{}";
    } else if (arguments->is_string()) {
      call.arguments = arguments->get<std::string>();
    } else if (arguments->is_object()) {
      call.arguments = arguments->dump();
    } else {
      reader.type_error(item_path + ".function.arguments", "a JSON text", *arguments);
      return {};
    }
    calls.push_back(std::move(call));
  }
  return calls;
}

std::vector<ChatRequestMessage> read_messages(FieldReader& reader, const OrderedJson& body) {
  const OrderedJson* value = reader.find(body, "messages");
  if (value == nullptr) {
    if (!reader.failed()) reader.fail("messages is required", "messages");
    return {};
  }
  if (!value->is_array()) {
    reader.type_error("messages", "an array of messages", *value);
    return {};
  }
  if (value->empty()) {
    reader.fail("messages must hold at least one message", "messages");
    return {};
  }
  std::vector<ChatRequestMessage> messages;
  messages.reserve(value->size());
  for (size_t i = 0; i < value->size(); ++i) {
    const OrderedJson& item = (*value)[i];
    const std::string path = "messages[" + std::to_string(i) + "]";
    if (!item.is_object()) {
      reader.type_error(path, "an object", item);
      return {};
    }
    const std::string role_path = path + ".role";
    std::optional<std::string> role = reader.string(item, "role", role_path);
    if (reader.failed()) return {};
    if (!role) {
      reader.fail(role_path + " is required", role_path);
      return {};
    }
    std::string content = read_content(reader, item, *role, path);
    if (reader.failed()) return {};
    ChatRequestMessage message{std::move(*role), std::move(content), {}, {}};
    if (message.role == "assistant")
      message.tool_calls = read_message_tool_calls(reader, item, path);
    if (message.role == "tool")
      message.tool_call_id =
          reader.string(item, "tool_call_id", path + ".tool_call_id").value_or("");
    if (reader.failed()) return {};
    messages.push_back(std::move(message));
  }
  return messages;
}

// The error of a failed SamplingParams::validate() names the field first ("top_p must be ..."):
// that word is the param.
std::optional<std::string> field_named_in(const std::string& message) {
  const size_t space = message.find(' ');
  if (space == std::string::npos || space == 0) return std::nullopt;
  return message.substr(0, space);
}

}  // namespace

ApiResult<SamplingParams> to_sampling_params(const SamplingOptions& options,
                                             uint64_t fallback_seed) {
  SamplingParams params;
  params.temperature = options.temperature.value_or(1.0f);
  params.top_p = options.top_p.value_or(1.0f);
  const int32_t top_k = options.top_k.value_or(0);
  params.top_k = top_k == -1 ? 0 : top_k;
  params.min_p = options.min_p.value_or(0.0f);
  params.presence_penalty = options.presence_penalty.value_or(0.0f);
  params.frequency_penalty = options.frequency_penalty.value_or(0.0f);
  params.repetition_penalty = options.repetition_penalty.value_or(1.0f);
  params.penalty_last_n = -1;
  params.seed = options.seed.value_or(fallback_seed);
  Status status = params.validate();
  if (!status.ok()) {
    return invalid_request_error(status.error().message, field_named_in(status.error().message));
  }
  return params;
}

ApiResult<CompletionRequest> parse_completion_request(std::string_view body_text,
                                                      const ProtocolLimits& limits) {
  ApiResult<OrderedJson> body = parse_body(body_text, limits.max_json_depth);
  if (!body.ok()) return body.error();
  FieldReader reader;
  CompletionRequest request;
  request.prompt = read_prompt(reader, *body);
  if (auto max_tokens = reader.integer(*body, "max_tokens", 1, limits.max_tokens_limit)) {
    request.max_tokens = static_cast<int32_t>(*max_tokens);
  }
  read_shared_fields(reader, *body, limits, request);
  refuse_unimplemented(reader, *body, kCompletionUnimplemented);
  if (auto logprobs = reader.integer(*body, "logprobs", 0, limits.max_top_logprobs)) {
    request.logprobs = static_cast<int32_t>(*logprobs);
  }
  if (reader.boolean(*body, "echo").value_or(false)) {
    reader.fail("echo is not supported (the prompt is not repeated in the output)", "echo");
  }
  if (reader.failed()) return reader.take_error();
  TRELLIS_TRY(to_sampling_params(request.sampling, 0));
  return request;
}

// chat_template_kwargs: only enable_thinking (a boolean) is understood.
bool read_enable_thinking(FieldReader& reader, const OrderedJson& body) {
  const OrderedJson* kwargs = reader.find(body, "chat_template_kwargs");
  if (kwargs == nullptr) return true;
  if (!kwargs->is_object()) {
    reader.type_error("chat_template_kwargs", "an object", *kwargs);
    return true;
  }
  for (const auto& [key, value] : kwargs->items()) {
    if (key != "enable_thinking") {
      reader.fail("chat_template_kwargs." + key + " is not supported (only enable_thinking)",
                  "chat_template_kwargs." + key);
      return true;
    }
  }
  return reader.boolean(*kwargs, "enable_thinking", "chat_template_kwargs.enable_thinking")
      .value_or(true);
}

bool is_tool_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

// tools: [{"type": "function", "function": {"name", "description", "parameters", "strict"}}].
std::vector<RequestTool> read_tools(FieldReader& reader, const OrderedJson& body) {
  const OrderedJson* list = reader.find(body, "tools");
  if (list == nullptr) return {};
  if (!list->is_array()) {
    reader.type_error("tools", "an array of tools", *list);
    return {};
  }
  std::vector<RequestTool> tools;
  for (size_t i = 0; i < list->size(); ++i) {
    const OrderedJson& item = (*list)[i];
    const std::string path = "tools[" + std::to_string(i) + "]";
    if (!item.is_object()) {
      reader.type_error(path, "an object", item);
      return {};
    }
    const std::string type = reader.string(item, "type", path + ".type").value_or("function");
    if (type != "function" && !reader.failed()) {
      reader.fail(path + ".type '" + type + "' is not supported (only 'function')", path + ".type");
    }
    const OrderedJson* function = reader.find(item, "function");
    if (reader.failed()) return {};
    if (function == nullptr || !function->is_object()) {
      reader.fail(path + ".function is required (an object)", path + ".function");
      return {};
    }
    RequestTool tool;
    tool.name = reader.string(*function, "name", path + ".function.name").value_or("");
    tool.description =
        reader.string(*function, "description", path + ".function.description").value_or("");
    (void)reader.boolean(*function, "strict", path + ".function.strict");
    if (reader.failed()) return {};
    if (!is_tool_name(tool.name)) {
      reader.fail(path + ".function.name must be 1 to 64 of a-z, A-Z, 0-9, _ and -",
                  path + ".function.name");
      return {};
    }
    for (const RequestTool& earlier : tools) {
      if (earlier.name == tool.name) {
        reader.fail(path + ".function.name '" + tool.name + "' is given twice",
                    path + ".function.name");
        return {};
      }
    }
    if (const OrderedJson* parameters = reader.find(*function, "parameters")) {
      if (!parameters->is_object()) {
        reader.type_error(path + ".function.parameters", "a JSON schema (an object)", *parameters);
        return {};
      }
      tool.parameters = *parameters;
    }
    tools.push_back(std::move(tool));
  }
  return tools;
}

// tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}}.
ToolChoice read_tool_choice(FieldReader& reader, const OrderedJson& body,
                            const std::vector<RequestTool>& tools) {
  const OrderedJson* value = reader.find(body, "tool_choice");
  if (value == nullptr) return {tools.empty() ? ToolChoiceMode::NONE : ToolChoiceMode::AUTO, ""};
  ToolChoice choice;
  if (value->is_string()) {
    const std::string mode = value->get<std::string>();
    if (mode == "none") return {ToolChoiceMode::NONE, ""};
    if (mode == "auto")
      choice.mode = ToolChoiceMode::AUTO;
    else if (mode == "required")
      choice.mode = ToolChoiceMode::REQUIRED;
    else {
      reader.fail("tool_choice must be \"none\", \"auto\", \"required\" or a function, not \"" +
                      mode + "\"",
                  "tool_choice");
      return {};
    }
  } else if (value->is_object()) {
    const OrderedJson* function = reader.find(*value, "function");
    const std::optional<std::string> name =
        function != nullptr && function->is_object()
            ? reader.string(*function, "name", "tool_choice.function.name")
            : std::nullopt;
    if (reader.failed()) return {};
    if (!name) {
      reader.fail("tool_choice.function.name is required", "tool_choice.function.name");
      return {};
    }
    choice = {ToolChoiceMode::NAMED, *name};
    const bool known = std::any_of(tools.begin(), tools.end(),
                                   [&](const RequestTool& t) { return t.name == *name; });
    if (!known && !tools.empty()) {
      reader.fail("tool_choice names the function '" + *name + "', which is not in tools",
                  "tool_choice.function.name");
      return {};
    }
  } else {
    reader.type_error("tool_choice", "a string or an object", *value);
    return {};
  }
  if (tools.empty()) reader.fail("tool_choice needs tools", "tool_choice");
  return choice;
}

ApiResult<ChatCompletionRequest> parse_chat_completion_request(std::string_view body_text,
                                                               const ProtocolLimits& limits) {
  ApiResult<OrderedJson> body = parse_body(body_text, limits.max_json_depth);
  if (!body.ok()) return body.error();
  FieldReader reader;
  ChatCompletionRequest request;
  request.messages = read_messages(reader, *body);
  // Both are checked; the newer max_completion_tokens wins when both are given.
  auto max_tokens = reader.integer(*body, "max_tokens", 1, limits.max_tokens_limit);
  auto max_completion_tokens =
      reader.integer(*body, "max_completion_tokens", 1, limits.max_tokens_limit);
  if (auto chosen = max_completion_tokens ? max_completion_tokens : max_tokens) {
    request.max_tokens = static_cast<int32_t>(*chosen);
  }
  read_shared_fields(reader, *body, limits, request);
  request.logprobs = reader.boolean(*body, "logprobs").value_or(false);
  request.top_logprobs = static_cast<int32_t>(
      reader.integer(*body, "top_logprobs", 0, limits.max_top_logprobs).value_or(0));
  request.enable_thinking = read_enable_thinking(reader, *body);
  request.reasoning_effort = reader.string(*body, "reasoning_effort").value_or("");
  if (!request.reasoning_effort.empty() && request.reasoning_effort != "low" &&
      request.reasoning_effort != "medium" && request.reasoning_effort != "high") {
    reader.fail("reasoning_effort must be \"low\", \"medium\" or \"high\"", "reasoning_effort");
  }
  request.tools = read_tools(reader, *body);
  request.tool_choice = read_tool_choice(reader, *body, request.tools);
  request.parallel_tool_calls = reader.boolean(*body, "parallel_tool_calls").value_or(true);
  if (reader.failed()) return reader.take_error();
  if (!request.tools.empty() && request.tool_choice.mode != ToolChoiceMode::NONE &&
      request.constraint) {
    return invalid_request_error(
        "tools with an output constraint (response_format, grammar, ...) are not supported "
        "together: a reply is either calls or constrained text",
        "tools");
  }
  if (request.top_logprobs > 0 && !request.logprobs) {
    return invalid_request_error("top_logprobs requires logprobs to be true", "top_logprobs");
  }
  TRELLIS_TRY(to_sampling_params(request.sampling, 0));
  return request;
}

ApiResult<TokenizeRequest> parse_tokenize_request(std::string_view body_text,
                                                  const ProtocolLimits& limits) {
  ApiResult<OrderedJson> body = parse_body(body_text, limits.max_json_depth);
  if (!body.ok()) return body.error();
  FieldReader reader;
  TokenizeRequest request;
  std::optional<std::string> prompt = reader.string(*body, "prompt");
  request.add_special_tokens = reader.boolean(*body, "add_special_tokens").value_or(true);
  if (reader.failed()) return reader.take_error();
  if (!prompt) return invalid_request_error("prompt must be a string", "prompt");
  request.prompt = std::move(*prompt);
  return request;
}

ApiResult<DetokenizeRequest> parse_detokenize_request(std::string_view body_text,
                                                      const ProtocolLimits& limits,
                                                      int64_t n_vocab) {
  ApiResult<OrderedJson> body = parse_body(body_text, limits.max_json_depth);
  if (!body.ok()) return body.error();
  FieldReader reader;
  const OrderedJson* tokens = reader.find(*body, "tokens");
  if (tokens == nullptr || !tokens->is_array())
    return invalid_request_error("tokens must be an array of token ids", "tokens");
  DetokenizeRequest request;
  request.tokens.reserve(tokens->size());
  for (size_t i = 0; i < tokens->size(); ++i) {
    const OrderedJson& t = (*tokens)[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
      const std::string path = "tokens[" + std::to_string(i) + "]";
      return invalid_request_error(
          path + " must be a token id in [0, " + std::to_string(n_vocab) + ")", path);
    }
    request.tokens.push_back(static_cast<TokenId>(t.get<int64_t>()));
  }
  return request;
}

}  // namespace trellis
