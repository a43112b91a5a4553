#include "server/openai_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <type_traits>

#include "sample/rng.h"
#include "server/auth.h"
#include "server/harmony_tools.h"
#include "server/openai_response.h"
#include "server/reply_memory.h"
#include "server/reply_splitter.h"
#include "tokenizer/chat_tools.h"

namespace trellis {
namespace {

using Clock = std::chrono::steady_clock;

// OpenAI's default max_tokens for /v1/completions.
constexpr int32_t kDefaultCompletionTokens = 16;
// The status logged for a request whose client hung up before the response (nginx's 499).
constexpr int kClientClosedRequest = 499;

// Cancels every request of a generation (a copy of the handles, safe from any thread).
std::function<void()> cancel_all(const std::vector<RequestHandle>& handles) {
  return [copy = handles]() mutable {
    for (RequestHandle& h : copy) h.cancel();
  };
}
// A stream with nothing to say for this long sends an SSE comment, so a client that left is
// noticed (the write fails) even while its request is still queued.
constexpr auto kKeepAlive = std::chrono::seconds(2);

// The error that a choice which did not complete answers with: 503 when it was cancelled (the
// server is shutting down; a client that left gets no answer), 500 when generation failed.
// nullopt for a completed choice.
std::optional<ApiError> choice_failure(const RequestOutput& out) {
  if (out.finish_reason == FinishReason::CANCELLED)
    return server_error("the request was cancelled (server shutting down)", 503);
  if (out.finish_reason == FinishReason::ERROR)
    return server_error("generation failed: " + out.error, 500);
  return std::nullopt;
}

ApiResponse json_response(int status, const nlohmann::json& body) {
  return ApiResponse{status, "application/json", dump_json(body), {}};
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// One generation request, ready for the engine.
struct OpenAiService::Generation {
  uint64_t key = 0;  // index into active_
  ResponseHeader header;
  bool chat = false;
  EngineRequest request;
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;
  std::optional<int32_t> top_logprobs;  // nullopt: no logprobs
  ReplyFormat reply;                    // chat: how the reply splits into reasoning, content, calls
  Clock::time_point arrived = Clock::now();
};

// A slot among max_concurrent_requests, held for as long as the request is served.
struct OpenAiService::InFlight {
  explicit InFlight(std::atomic<int32_t>& counter) : counter(counter) {}
  ~InFlight() { --counter; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  std::atomic<int32_t>& counter;
};

// What the engine's thread hands a stream: its choices' text pieces, then their ends.
class OpenAiService::Stream {
 public:
  explicit Stream(int32_t n_choices) : n_running_(n_choices) {}

  struct Piece {
    int32_t index = 0;  // the choice
    std::string text;
    int32_t n_tokens = 0;  // the generated tokens whose text it completes
  };

  void push(int32_t index, std::string_view text, int32_t n_tokens) {
    std::lock_guard<std::mutex> lock(mutex_);
    pieces_.push_back(Piece{index, std::string(text), n_tokens});
    changed_.notify_all();
  }
  // A choice's request ended; the engine has pushed all of its text before.
  void end() {
    std::lock_guard<std::mutex> lock(mutex_);
    --n_running_;
    changed_.notify_all();
  }

  struct Taken {
    std::deque<Piece> pieces;
    bool all_ended = false;  // nothing more will come
  };
  // Waits until there are pieces or every choice has ended, at most `timeout`; takes the pieces.
  Taken take(Clock::duration timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, timeout, [&] { return !pieces_.empty() || n_running_ == 0; });
    Taken taken;
    taken.pieces.swap(pieces_);
    taken.all_ended = n_running_ == 0;
    return taken;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Piece> pieces_;
  int32_t n_running_;
};

OpenAiService::OpenAiService(Engine& engine, ServerConfig config)
    : engine_(engine),
      config_(std::move(config)),
      has_disk_tier_(engine.stats().has_disk_tier),
      created_(unix_seconds()) {
  limits_.max_tokens_limit = std::max(1, engine_.n_ctx());
  constraints_ = std::make_unique<ConstraintCompiler>(config_.json_grammar);
  replies_ = std::make_unique<ReplyMemory>();
  if (config_.chat_template) {
    chat_template_ = *config_.chat_template;
  } else if (Result<ChatTemplateKind> detected = detect_chat_template(engine_.file());
             detected.ok()) {
    chat_template_ = *detected;
  } else {
    // A model without a usable template still chats, in ChatML (as llama.cpp's server does);
    // the caller says so once at start-up.
    chat_template_ = ChatTemplateKind::CHATML;
    chat_template_warning_ = "chat requests use ChatML: " + detected.error().message;
  }
  chat_stop_tokens_ = chat_stop_tokens(engine_.tokenizer().vocab(), chat_template_);
  chat_markup_tokens_ = chat_markup_tokens(engine_.tokenizer().vocab(), chat_template_);
  std::random_device device;
  seed_base_ = (static_cast<uint64_t>(device()) << 32) ^ device();
}

OpenAiService::~OpenAiService() {
  begin_shutdown();
}

ApiResponse OpenAiService::error_response(const ApiError& error) {
  return json_response(error.http_status, error_json(error));
}

std::string OpenAiService::next_id(const char* prefix) {
  char text[40];
  std::snprintf(text, sizeof text, "%s-%016llx", prefix,
                static_cast<unsigned long long>(derive_seed(seed_base_, ++counter_)));
  return text;
}

uint64_t OpenAiService::next_seed() {
  return derive_seed(seed_base_ ^ 0x5eed5eed5eed5eedULL, ++counter_);
}

Status OpenAiService::check_model(const std::string& model) const {
  if (model.empty() || model == config_.model_id) return {};
  return Error{"The model `" + model + "` does not exist (this server serves `" + config_.model_id +
               "`)"};
}

ApiResult<int32_t> OpenAiService::max_tokens_for(int32_t n_prompt, std::optional<int32_t> requested,
                                                 int32_t fallback) const {
  const int32_t n_ctx = engine_.n_ctx();
  if (n_prompt >= n_ctx) {
    return invalid_request_error("This model's maximum context length is " + std::to_string(n_ctx) +
                                     " tokens, but the prompt has " + std::to_string(n_prompt) +
                                     " tokens (at most " + std::to_string(n_ctx - 1) +
                                     ", to leave room for the reply)",
                                 "prompt");
  }
  const int32_t room = n_ctx - n_prompt;
  if (requested && *requested > room) {
    return invalid_request_error("This model's maximum context length is " + std::to_string(n_ctx) +
                                     " tokens; the prompt has " + std::to_string(n_prompt) +
                                     " tokens and max_tokens asks for " +
                                     std::to_string(*requested) + " more (at most " +
                                     std::to_string(room) + ")",
                                 "max_tokens");
  }
  return requested ? *requested : std::min(fallback, room);
}

// The fields both endpoints share; `prompt` is already tokenized, `top_logprobs` is nullopt when
// the request asked for no logprobs.
template <typename ParsedRequest>
ApiResult<OpenAiService::Generation> OpenAiService::make_generation(
    const ParsedRequest& req, std::vector<TokenId> prompt, std::optional<int32_t> top_logprobs,
    int32_t default_max_tokens, std::string_view api_key) {
  Generation g;
  g.chat = std::is_same_v<ParsedRequest, ChatCompletionRequest>;
  ApiResult<int32_t> max_tokens =
      max_tokens_for(static_cast<int32_t>(prompt.size()), req.max_tokens, default_max_tokens);
  if (!max_tokens.ok()) return max_tokens.error();
  ApiResult<SamplingParams> sampling = to_sampling_params(req.sampling, next_seed());
  if (!sampling.ok()) return sampling.error();
  g.header = {next_id(g.chat ? "chatcmpl" : "cmpl"), unix_seconds(), config_.model_id};
  g.request.prompt = std::move(prompt);
  g.request.sampling = *sampling;
  g.request.max_tokens = *max_tokens;
  g.request.stop = req.stop;
  g.request.ignore_eos = req.ignore_eos;
  g.request.speculate = req.speculative;
  g.request.cache_namespace = cache_namespace_for(config_.cache_isolation, api_key, req.cache_salt);
  g.request.logprobs = top_logprobs.value_or(-1);
  if (req.constraint) {
    ApiResult<std::shared_ptr<const Grammar>> grammar = constraints_->compile(*req.constraint);
    if (!grammar.ok()) return grammar.error();
    g.request.grammar = std::move(grammar).value();
  }
  g.n = req.n;
  g.stream = req.stream;
  g.include_usage = req.include_usage;
  g.top_logprobs = top_logprobs;
  return g;
}

ApiResult<OpenAiService::Generation> OpenAiService::prepare_completion(std::string_view body,
                                                                       std::string_view api_key) {
  ApiResult<CompletionRequest> parsed = parse_completion_request(body, limits_);
  if (!parsed.ok()) return parsed.error();
  const CompletionRequest& req = *parsed;
  if (Status model = check_model(req.model); !model.ok())
    return not_found_error(model.error().message, "model_not_found");
  std::vector<TokenId> prompt;
  if (const auto* text = std::get_if<std::string>(&req.prompt)) {
    if (std::optional<ApiError> refused = refuse_oversized_text(text->size(), "prompt"))
      return *refused;
    prompt = engine_.tokenizer().encode(*text, /*add_special=*/true, /*parse_special=*/true);
    if (prompt.empty()) return invalid_request_error("the prompt has no tokens", "prompt");
  } else {
    prompt = std::get<std::vector<TokenId>>(req.prompt);
  }
  return make_generation(req, std::move(prompt), req.logprobs, kDefaultCompletionTokens, api_key);
}

std::optional<ApiError> OpenAiService::refuse_oversized_text(size_t n_bytes,
                                                             const char* param) const {
  const size_t per_token = engine_.tokenizer().max_text_bytes_per_token();
  const auto n_ctx = static_cast<size_t>(engine_.n_ctx());
  if (n_bytes <= n_ctx * per_token) return std::nullopt;
  return invalid_request_error("This model's maximum context length is " + std::to_string(n_ctx) +
                                   " tokens, but the text of `" + std::string(param) + "` is " +
                                   std::to_string(n_bytes) + " bytes long, at least " +
                                   std::to_string((n_bytes + per_token - 1) / per_token) +
                                   " tokens (no token of this model stands for more than " +
                                   std::to_string(per_token) + " bytes)",
                               param);
}

ApiResult<std::vector<TokenId>> OpenAiService::render_chat_prompt(const ChatCompletionRequest& req,
                                                                  const std::string& ns) const {
  size_t n_bytes = 0;
  for (const ChatRequestMessage& m : req.messages) n_bytes += m.content.size();
  if (std::optional<ApiError> refused = refuse_oversized_text(n_bytes, "messages")) return *refused;
  std::vector<ChatMessage> messages;
  bool has_tool_turns = false;
  for (const ChatRequestMessage& m : req.messages) {
    messages.emplace_back(m.role, m.content, m.tool_calls, m.tool_call_id);
    has_tool_turns |= m.role == "tool" || !m.tool_calls.empty();
  }
  if (!req.tools.empty() || has_tool_turns) {
    std::vector<ChatTool> tools;
    for (const RequestTool& t : req.tools)
      tools.push_back({t.name, t.description, t.parameters.is_null() ? "" : t.parameters.dump()});
    messages = with_tools_written_out(chat_template_, messages, tools);
    // gpt-oss reads its tools as a TypeScript namespace.
    if (chat_template_ == ChatTemplateKind::HARMONY && !req.tools.empty())
      add_harmony_tools(messages, harmony_tools_text(req.tools));
  }
  // Content is tokenized as plain text: only the template writes control tokens.
  ChatRenderOptions options;
  options.enable_thinking = req.enable_thinking;
  if (!req.reasoning_effort.empty()) {
    if (chat_template_ != ChatTemplateKind::HARMONY) {
      return invalid_request_error("reasoning_effort is not supported by the " +
                                       std::string(chat_template_name(chat_template_)) +
                                       " chat format (only harmony, gpt-oss, takes it)",
                                   "reasoning_effort");
    }
    options.reasoning_effort = req.reasoning_effort;
  }
  // Earlier replies of the model keep the tokens it produced (see reply_memory.h).
  std::vector<std::shared_ptr<const std::vector<TokenId>>> held;
  options.reply_tokens = [&](std::string_view text) -> const std::vector<TokenId>* {
    std::shared_ptr<const std::vector<TokenId>> tokens = replies_->find(ns, text);
    if (!tokens) return nullptr;
    held.push_back(tokens);
    return tokens.get();
  };
  Result<std::vector<TokenId>> tokens =
      encode_chat(engine_.tokenizer(), chat_template_, messages, options);
  if (!tokens.ok()) return invalid_request_error(tokens.error().message, "messages");
  if (tokens->empty()) return invalid_request_error("the messages render to no tokens", "messages");
  return std::move(tokens).value();
}

ApiResult<OpenAiService::Generation> OpenAiService::prepare_chat(std::string_view body,
                                                                 std::string_view api_key) {
  ApiResult<ChatCompletionRequest> parsed = parse_chat_completion_request(body, limits_);
  if (!parsed.ok()) return parsed.error();
  const ChatCompletionRequest& req = *parsed;
  if (Status model = check_model(req.model); !model.ok())
    return not_found_error(model.error().message, "model_not_found");
  ApiResult<std::vector<TokenId>> prompt = render_chat_prompt(
      req, cache_namespace_for(config_.cache_isolation, api_key, req.cache_salt));
  if (!prompt.ok()) return prompt.error();
  // A chat reply may run to the end of the context unless the client says otherwise.
  ApiResult<Generation> g =
      make_generation(req, std::move(prompt).value(),
                      req.logprobs ? std::optional<int32_t>(req.top_logprobs) : std::nullopt,
                      engine_.n_ctx(), api_key);
  if (!g.ok()) return g;
  // The reply ends with the model's turn, at the format's end-of-turn token as at EOS.
  g->request.stop_token_ids = chat_stop_tokens_;
  // Harmony's reply is messages on channels, split by its markup tokens: they are kept in the
  // text, and the analysis channel is the reasoning.
  g->request.spelled_tokens = chat_markup_tokens_;
  g->reply.harmony = chat_template_ == ChatTemplateKind::HARMONY;
  g->reply.split_reasoning =
      config_.separate_reasoning &&
      ((chat_template_ == ChatTemplateKind::QWEN3 && req.enable_thinking) || g->reply.harmony);
  if (!req.tools.empty() && req.tool_choice.mode != ToolChoiceMode::NONE &&
      chat_template_ == ChatTemplateKind::HARMONY) {
    // A call is a message of its own, its header in markup tokens, which grammars do not
    // match: the model calls when it chooses to.
    if (req.tool_choice.mode != ToolChoiceMode::AUTO) {
      return invalid_request_error(
          "tool_choice 'required' or a named function is not supported with the harmony chat "
          "format (gpt-oss), whose calls cannot be constrained yet; use 'auto'",
          "tool_choice");
    }
    g->reply.tools = ToolCallSyntax::HARMONY;
  } else if (!req.tools.empty() && req.tool_choice.mode != ToolChoiceMode::NONE) {
    ToolGrammarOptions options;
    options.syntax = tool_call_syntax(chat_template_);
    options.choice = req.tool_choice;
    options.parallel = req.parallel_tool_calls;
    options.reasoning = chat_template_ == ChatTemplateKind::QWEN3 && req.enable_thinking;
    options.json = config_.json_grammar;
    options.json.whitespace = JsonWhitespace::FLEXIBLE;  // as models write their calls' JSON
    Result<std::string> gbnf = tool_call_gbnf(req.tools, options);
    if (!gbnf.ok()) return invalid_request_error("tools: " + gbnf.error().message, "tools");
    ApiResult<std::shared_ptr<const Grammar>> grammar =
        constraints_->compile({OutputConstraint::Kind::GBNF, {}, *gbnf, {}, "tools"});
    if (!grammar.ok()) return grammar.error();
    g->request.grammar = std::move(grammar).value();
    g->reply.tools = options.syntax;
  }
  return g;
}

ApiResponse OpenAiService::completions(std::string_view body, std::string_view api_key,
                                       std::shared_ptr<ClientPresence> client) {
  return generate(prepare_completion(body, api_key), std::move(client));
}

ApiResponse OpenAiService::chat_completions(std::string_view body, std::string_view api_key,
                                            std::shared_ptr<ClientPresence> client) {
  return generate(prepare_chat(body, api_key), std::move(client));
}

ApiResponse OpenAiService::generate(ApiResult<Generation> generation,
                                    std::shared_ptr<ClientPresence> client) {
  if (shutting_down_) return error_response(server_error("the server is shutting down", 503));
  if (std::string why = engine_.failure(); !why.empty())
    return error_response(server_error("the engine has stopped: " + why, 503));
  if (!generation.ok()) return error_response(generation.error());
  // Take a slot first, then check: concurrent callers can never all pass the limit together.
  auto slot = std::make_shared<InFlight>(in_flight_);
  if (++in_flight_ > config_.max_concurrent_requests) {
    return error_response(rate_limit_error(
        "too many concurrent requests (the server serves at most " +
        std::to_string(config_.max_concurrent_requests) + " at once); retry later"));
  }
  generation->key = ++counter_;
  if (!client) client = std::make_shared<ClientPresence>();  // a caller that never leaves
  if (generation->stream) {
    return run_stream(std::make_shared<Generation>(std::move(generation).value()), slot,
                      std::move(client));
  }
  return run_whole(*generation, slot, *client);
}

ApiResult<std::vector<RequestHandle>> OpenAiService::start(Generation& g, ForkEvents events) {
  Result<std::vector<RequestHandle>> handles = [&]() -> Result<std::vector<RequestHandle>> {
    if (g.n > 1) return engine_.fork(g.request, g.n, std::move(events));
    RequestEvents one;
    if (events.on_text) {
      one.on_text = [on_text = events.on_text](std::string_view piece, int32_t n_tokens) {
        on_text(0, piece, n_tokens);
      };
    }
    if (events.on_end) {
      one.on_end = [on_end = events.on_end](const RequestOutput& out) { on_end(0, out); };
    }
    Result<RequestHandle> handle = engine_.submit(g.request, std::move(one));
    if (!handle.ok()) return handle.error();
    return std::vector<RequestHandle>{*handle};
  }();
  if (!handles.ok()) return invalid_request_error(handles.error().message, "prompt");
  std::lock_guard<std::mutex> lock(active_mutex_);
  if (shutting_down_) {  // shutdown began after the check in generate(): cancel at once
    for (RequestHandle& h : *handles) h.cancel();
  }
  active_[g.key] = *handles;
  return std::move(handles).value();
}

std::vector<LogprobEntry> OpenAiService::logprob_entries(
    const std::vector<Logprobs>& logprobs) const {
  const Tokenizer& tokenizer = engine_.tokenizer();
  auto text_of = [&](const TokenLogprob& t) {
    return TokenLogprobText{tokenizer.token_to_piece(t.id, true), t.logprob};
  };
  std::vector<LogprobEntry> entries;
  entries.reserve(logprobs.size());
  for (const Logprobs& lp : logprobs) {
    LogprobEntry entry;
    entry.chosen = text_of(lp.chosen);
    for (const TokenLogprob& t : lp.top) entry.top.push_back(text_of(t));
    entries.push_back(std::move(entry));
  }
  return entries;
}

void OpenAiService::split_reply(const Generation& g, ChoiceResult& choice) {
  ReplySplitter splitter(g.reply);
  ReplyDelta first = splitter.push(choice.text);
  ReplyDelta rest = splitter.finish(choice.tool_calls, tool_call_id_prefix(g, choice.index));
  choice.reasoning = first.reasoning + rest.reasoning;
  choice.text = first.content + rest.content;
  choice.called_tools = !choice.tool_calls.empty();
}

std::string OpenAiService::tool_call_id_prefix(const Generation& g, int32_t index) {
  // "chatcmpl-<hex>" -> "call_<hex>_<choice>_<call>": unique per reply, stable within it.
  const size_t dash = g.header.id.find('-');
  return "call_" + g.header.id.substr(dash == std::string::npos ? 0 : dash + 1) + "_" +
         std::to_string(index) + "_";
}

ApiResponse OpenAiService::run_whole(Generation& g, std::shared_ptr<InFlight> slot,
                                     ClientPresence& client) {
  ApiResult<std::vector<RequestHandle>> handles = start(g, ForkEvents{});
  if (!handles.ok()) return error_response(handles.error());
  // A client that hangs up before the reply is ready stops the generation and frees its blocks.
  client.on_leave(cancel_all(*handles), /*streaming=*/false);
  std::vector<RequestOutput> outputs;
  for (RequestHandle& h : *handles) outputs.push_back(h.wait());
  client.clear();
  {
    std::lock_guard<std::mutex> lock(active_mutex_);
    active_.erase(g.key);
  }
  if (client.gone()) {
    finish_request(g, outputs, kClientClosedRequest);
    return error_response(ApiError{kClientClosedRequest, "the client closed the connection",
                                   ApiErrorType::INVALID_REQUEST, std::nullopt, std::nullopt});
  }
  std::vector<ChoiceResult> choices;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const RequestOutput& out = outputs[i];
    if (std::optional<ApiError> failure = choice_failure(out)) {
      finish_request(g, outputs, failure->http_status);
      return error_response(*failure);
    }
    ChoiceResult choice;
    choice.index = static_cast<int32_t>(i);
    choice.text = out.text;
    choice.finish_reason = out.finish_reason;
    if (g.chat) split_reply(g, choice);
    if (g.top_logprobs) choice.logprobs = logprob_entries(out.logprobs);
    choices.push_back(std::move(choice));
  }
  const TokenUsage usage = usage_of(g, outputs);
  finish_request(g, outputs, 200);
  (void)slot;  // released when this returns
  return json_response(200, g.chat ? chat_completion_response_json(g.header, choices, usage)
                                   : completion_response_json(g.header, choices, usage));
}

ApiResponse OpenAiService::run_stream(std::shared_ptr<Generation> g, std::shared_ptr<InFlight> slot,
                                      std::shared_ptr<ClientPresence> client) {
  auto pieces = std::make_shared<Stream>(g->n);
  ForkEvents events;
  events.on_text = [pieces](int32_t index, std::string_view text, int32_t n_tokens) {
    pieces->push(index, text, n_tokens);
  };
  events.on_end = [pieces](int32_t, const RequestOutput&) { pieces->end(); };
  ApiResult<std::vector<RequestHandle>> started = start(*g, std::move(events));
  if (!started.ok()) return error_response(started.error());
  // A departure the transport sees between writes cancels at once, not at the next write.
  client->on_leave(cancel_all(*started), /*streaming=*/true);
  ApiResponse response;
  response.content_type = "text/event-stream";
  response.stream = [this, g, slot, pieces, client,
                     handles = std::move(started).value()](const StreamWriter& write) mutable {
    bool connected = true;
    auto send = [&](const std::string& event) {
      if (connected && !write(event)) connected = false;
      return connected;
    };
    if (g->chat) {
      for (int32_t i = 0; i < g->n; ++i) send(sse_data(chat_role_chunk_json(g->header, i)));
    }
    std::vector<int64_t> offsets(handles.size(), 0);
    std::vector<ReplySplitter> splitters(handles.size(), ReplySplitter(g->reply));
    // Each chunk carries the logprobs of exactly the tokens whose text it carries (a token whose
    // text was held back, an unfinished character or a possible stop string, goes with the chunk
    // that releases it; a token's entry exists before its text is handed over). The last chunk
    // carries those of tokens whose text no chunk shows (swallowed by a stop string).
    std::vector<size_t> logprobs_sent(handles.size(), 0);
    auto next_logprobs = [&](int32_t index,
                             size_t count) -> std::optional<std::vector<LogprobEntry>> {
      if (!g->top_logprobs) return std::nullopt;
      const auto i = static_cast<size_t>(index);
      const std::vector<Logprobs> fresh = handles[i].logprobs_range(logprobs_sent[i], count);
      logprobs_sent[i] += fresh.size();
      return logprob_entries(fresh);
    };
    // Pushed, not polled: the loop wakes for text, for the end of the last choice, or when a
    // keep-alive is due.
    Clock::time_point last_write = Clock::now();
    while (connected) {
      Stream::Taken taken = pieces->take(last_write + kKeepAlive - Clock::now());
      for (Stream::Piece& piece : taken.pieces) {
        ChoiceResult choice;
        choice.index = piece.index;
        choice.text = std::move(piece.text);
        choice.text_offset = offsets[static_cast<size_t>(piece.index)];
        offsets[static_cast<size_t>(piece.index)] += static_cast<int64_t>(choice.text.size());
        choice.logprobs = next_logprobs(piece.index, static_cast<size_t>(piece.n_tokens));
        if (g->chat) {
          // Reasoning and content apart; text that may open a tool call waits.
          ReplyDelta delta = splitters[static_cast<size_t>(piece.index)].push(choice.text);
          choice.text = std::move(delta.content);
          choice.reasoning = std::move(delta.reasoning);
          const bool has_logprobs = choice.logprobs && !choice.logprobs->empty();
          if (choice.text.empty() && choice.reasoning.empty() && !has_logprobs) continue;
        }
        send(sse_data(g->chat ? chat_chunk_json(g->header, choice)
                              : completion_chunk_json(g->header, choice)));
        last_write = Clock::now();
      }
      if (taken.all_ended) break;
      if (Clock::now() - last_write >= kKeepAlive) {
        send(": keep-alive\n\n");
        last_write = Clock::now();
      }
    }
    if (!connected) {  // the client left: stop generating at once
      for (RequestHandle& h : handles) h.cancel();
    }
    std::vector<RequestOutput> outputs;
    for (RequestHandle& h : handles) outputs.push_back(h.wait());
    {
      std::lock_guard<std::mutex> lock(active_mutex_);
      active_.erase(g->key);
    }
    for (size_t i = 0; i < outputs.size() && connected; ++i) {
      const RequestOutput& out = outputs[i];
      if (std::optional<ApiError> failure = choice_failure(out)) {
        send(sse_data(error_json(*failure)));
        continue;
      }
      ChoiceResult last;
      last.index = static_cast<int32_t>(i);
      if (g->chat) {  // what the splitter held back, and the tool calls, before the end
        ChoiceResult rest;
        rest.index = last.index;
        ReplyDelta delta =
            splitters[i].finish(rest.tool_calls, tool_call_id_prefix(*g, rest.index));
        rest.text = std::move(delta.content);
        rest.reasoning = std::move(delta.reasoning);
        last.called_tools = !rest.tool_calls.empty();
        if (!rest.text.empty() || !rest.reasoning.empty() || !rest.tool_calls.empty())
          send(sse_data(chat_chunk_json(g->header, rest)));
      }
      last.finish_reason = out.finish_reason;
      last.text_offset = offsets[i];
      if (g->top_logprobs && logprobs_sent[i] < out.logprobs.size())
        last.logprobs = next_logprobs(last.index, out.logprobs.size() - logprobs_sent[i]);
      send(sse_data(g->chat ? chat_chunk_json(g->header, last)
                            : completion_chunk_json(g->header, last)));
    }
    if (g->include_usage) {
      send(sse_data(usage_chunk_json(g->header,
                                     g->chat ? "chat.completion.chunk" : "text_completion",
                                     usage_of(*g, outputs))));
    }
    send(sse_done());
    client->clear();
    finish_request(*g, outputs, connected ? 200 : kClientClosedRequest);
    slot.reset();
  };
  return response;
}

TokenUsage OpenAiService::usage_of(const Generation& g,
                                   const std::vector<RequestOutput>& outputs) const {
  TokenUsage usage;
  usage.prompt_tokens = static_cast<int64_t>(g.request.prompt.size());
  usage.cached_tokens = outputs.front().stats.n_cached_tokens;
  if (has_disk_tier_) usage.disk_cached_tokens = outputs.front().stats.n_disk_cached_tokens;
  for (const RequestOutput& out : outputs) usage.completion_tokens += out.stats.n_generated_tokens;
  return usage;
}

void OpenAiService::finish_request(const Generation& g, const std::vector<RequestOutput>& outputs,
                                   int status) {
  if (g.chat && status == 200) {
    for (const RequestOutput& out : outputs) {
      // Only a reply whose tokens spell exactly its text (no stop string cut it).
      if (engine_.tokenizer().decode(out.tokens) == out.text)
        replies_->remember(g.request.cache_namespace, out.text, out.tokens);
    }
  }
  FinishedRequest r;
  r.prompt_tokens = static_cast<int64_t>(g.request.prompt.size());
  r.cached_tokens = outputs.empty() ? 0 : outputs.front().stats.n_cached_tokens;
  double ttft_ms = 0;
  for (const RequestOutput& out : outputs) {
    r.generated_tokens += out.stats.n_generated_tokens;
    if (out.stats.n_generated_tokens > 0 && (ttft_ms == 0 || out.stats.ttft_ms < ttft_ms))
      ttft_ms = out.stats.ttft_ms;
  }
  r.ttft_seconds = ttft_ms / 1000.0;
  r.total_seconds = std::chrono::duration<double>(Clock::now() - g.arrived).count();
  r.finish_reason = outputs.empty() ? FinishReason::ERROR : outputs.front().finish_reason;
  if (status == 499) r.finish_reason = FinishReason::CANCELLED;  // the client left
  metrics_.record(r);
  if (config_.log_requests) {
    std::fprintf(stderr,
                 "request %s status=%d n=%d prompt=%lld cached=%lld generated=%lld ttft_ms=%.1f "
                 "total_ms=%.1f finish=%s\n",
                 g.header.id.c_str(), status, g.n, static_cast<long long>(r.prompt_tokens),
                 static_cast<long long>(r.cached_tokens),
                 static_cast<long long>(r.generated_tokens), ttft_ms, r.total_seconds * 1000.0,
                 std::string(finish_reason_name(r.finish_reason)).c_str());
  }
}

void OpenAiService::begin_shutdown() {
  shutting_down_ = true;
  std::lock_guard<std::mutex> lock(active_mutex_);
  for (auto& [key, handles] : active_) {
    for (RequestHandle& h : handles) h.cancel();
  }
}

std::span<const ApiEndpoint> OpenAiService::endpoints() {
  using E = OpenAiEndpoint;
  static constexpr ApiEndpoint kEndpoints[] = {
      {ApiMethod::GET, "/health", static_cast<int>(E::HEALTH), false, false, false},
      {ApiMethod::GET, "/metrics", static_cast<int>(E::METRICS), false, false, false},
      {ApiMethod::GET, "/v1/models", static_cast<int>(E::MODELS), true, false, false},
      {ApiMethod::POST, "/v1/completions", static_cast<int>(E::COMPLETIONS), true, true, true},
      {ApiMethod::POST, "/v1/chat/completions", static_cast<int>(E::CHAT), true, true, true},
      {ApiMethod::POST, "/tokenize", static_cast<int>(E::TOKENIZE), true, true, false},
      {ApiMethod::POST, "/detokenize", static_cast<int>(E::DETOKENIZE), true, true, false},
  };
  return kEndpoints;
}

ApiResponse OpenAiService::serve(const ApiEndpoint& endpoint, std::string_view body,
                                 std::string_view api_key, std::shared_ptr<ClientPresence> client) {
  switch (static_cast<OpenAiEndpoint>(endpoint.id)) {
    case OpenAiEndpoint::HEALTH:
      return ApiResponse{200, "application/json", R"({"status":"ok"})", {}};
    case OpenAiEndpoint::METRICS:
      return metrics();
    case OpenAiEndpoint::MODELS:
      return models();
    case OpenAiEndpoint::COMPLETIONS:
      return completions(body, api_key, std::move(client));
    case OpenAiEndpoint::CHAT:
      return chat_completions(body, api_key, std::move(client));
    case OpenAiEndpoint::TOKENIZE:
      return tokenize(body);
    case OpenAiEndpoint::DETOKENIZE:
      return detokenize(body);
  }
  return error_response(not_found_error("no such endpoint"));
}

ApiResponse OpenAiService::models() const {
  return json_response(200, models_list_json(config_.model_id, created_));
}

ApiResponse OpenAiService::metrics() {
  ApiResponse response{200,
                       "text/plain; version=0.0.4",
                       metrics_.render(engine_.stats(), engine_.stage_stats()),
                       {}};
  return response;
}

ApiResponse OpenAiService::tokenize(std::string_view body) const {
  ApiResult<TokenizeRequest> request = parse_tokenize_request(body, limits_);
  if (!request.ok()) return error_response(request.error());
  if (std::optional<ApiError> refused = refuse_oversized_text(request->prompt.size(), "prompt"))
    return error_response(*refused);
  const std::vector<TokenId> tokens = engine_.tokenizer().encode(
      request->prompt, request->add_special_tokens, /*parse_special=*/true);
  return json_response(
      200, {{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", engine_.n_ctx()}});
}

ApiResponse OpenAiService::detokenize(std::string_view body) const {
  ApiResult<DetokenizeRequest> request = parse_detokenize_request(
      body, limits_, static_cast<int64_t>(engine_.tokenizer().vocab().size()));
  if (!request.ok()) return error_response(request.error());
  return json_response(200, {{"prompt", engine_.tokenizer().decode(request->tokens)}});
}

}  // namespace trellis
