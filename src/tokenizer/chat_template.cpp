#include "tokenizer/chat_template.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace trellis {
namespace {

// IPYTHON: Llama 3's role for a tool's result (chat_tools.h writes tool results in it). TOOL: a
// tool's result as HARMONY writes it (the other formats get theirs written out by chat_tools.h).
enum class Role { SYSTEM, USER, ASSISTANT, IPYTHON, TOOL };

std::string_view role_name(Role role) {
  switch (role) {
    case Role::SYSTEM:
      return "system";
    case Role::USER:
      return "user";
    case Role::ASSISTANT:
      return "assistant";
    case Role::IPYTHON:
      return "ipython";
    case Role::TOOL:
      return "tool";
  }
  return "?";
}

std::string valid_names() {
  std::string out;
  for (ChatTemplateKind kind : kAllChatTemplateKinds) {
    if (!out.empty()) out += ", ";
    out += chat_template_name(kind);
  }
  return out;
}

// The advice every detection failure ends with: the user can always name the format.
std::string override_hint() {
  return "pass --chat-template NAME to choose one of: " + valid_names();
}

bool contains(std::string_view text, std::string_view marker) {
  return text.find(marker) != std::string_view::npos;
}

// One Role per message. Error: an unknown role, naming it and its index.
Result<std::vector<Role>> parse_roles(std::span<const ChatMessage> messages) {
  std::vector<Role> roles;
  roles.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role == "system") {
      roles.push_back(Role::SYSTEM);
    } else if (role == "user") {
      roles.push_back(Role::USER);
    } else if (role == "assistant") {
      roles.push_back(Role::ASSISTANT);
    } else if (role == "ipython") {
      roles.push_back(Role::IPYTHON);
    } else if (role == "tool") {
      roles.push_back(Role::TOOL);
    } else {
      return Error{"chat message " + std::to_string(i) + " has role '" + role +
                   "'; the roles are system, user, assistant and tool"};
    }
  }
  return roles;
}

// The [INST] formats pair each user turn with the assistant turn that answers it, so after an
// optional leading system message the roles must be user, assistant, user, ... Returns the index
// of the first non-system message (0 or 1).
//
//   roles:  [system] user assistant user assistant ... user|assistant
//            ^0       ^first (even offsets from first: user; odd: assistant)
Result<size_t> check_alternation(ChatTemplateKind kind, std::span<const Role> roles) {
  const size_t first = roles[0] == Role::SYSTEM ? 1 : 0;
  const std::string format(chat_template_name(kind));
  if (first == roles.size()) {
    return Error{"the " + format +
                 " chat format needs a user message after the system message (chat message 0)"};
  }
  for (size_t i = first; i < roles.size(); ++i) {
    const Role expected = (i - first) % 2 == 0 ? Role::USER : Role::ASSISTANT;
    if (roles[i] != expected) {
      return Error{"chat message " + std::to_string(i) + " has role '" +
                   std::string(role_name(roles[i])) + "' where the " + format +
                   " chat format needs '" + std::string(role_name(expected)) +
                   "': after an optional first system message, roles must alternate user, "
                   "assistant, user, ..."};
    }
  }
  return first;
}

// Collects a rendering as segments; neighbouring pieces of the same kind merge, empty ones vanish.
class SegmentWriter {
 public:
  SegmentWriter& markup(std::string_view text) { return add(text, false, false); }
  SegmentWriter& content(std::string_view text) { return add(text, true, false); }
  // An assistant message's content: a segment of its own, never merged.
  SegmentWriter& reply(std::string_view text) { return add(text, true, true); }
  std::vector<ChatSegment> take() { return std::move(segments_); }

 private:
  SegmentWriter& add(std::string_view text, bool is_content, bool is_reply) {
    if (text.empty()) return *this;
    if (!is_reply && !segments_.empty() && segments_.back().is_content == is_content &&
        !segments_.back().is_reply) {
      segments_.back().text += text;
    } else {
      segments_.push_back({std::string(text), is_content, is_reply});
    }
    return *this;
  }
  std::vector<ChatSegment> segments_;
};

std::string bos_or_default(const ChatRenderOptions& options, std::string_view fallback) {
  return options.bos_token.empty() ? std::string(fallback) : options.bos_token;
}

std::string eos_or_default(const ChatRenderOptions& options) {
  return options.eos_token.empty() ? std::string("</s>") : options.eos_token;
}

// Precondition: check_alternation passed; `first` is its result.
void render_llama2(std::span<const ChatMessage> messages, size_t first,
                   const ChatRenderOptions& options, SegmentWriter& out) {
  const std::string bos = bos_or_default(options, "<s>");
  const std::string eos = eos_or_default(options);
  for (size_t i = first; i < messages.size(); ++i) {
    const std::string& content = messages[i].content;
    if ((i - first) % 2 == 0) {  // user
      out.markup(bos + "[INST] ");
      // The system message has no turn of its own: it is folded into the first user turn.
      if (i == first && first == 1) {
        out.markup("<<SYS>>\n").content(messages[0].content).markup("\n<</SYS>>\n\n");
      }
      out.content(content).markup(" [/INST]");
    } else {  // assistant
      out.markup(" ").content(content).markup(" " + eos);
    }
  }
}

// Precondition: check_alternation passed; `first` is its result.
void render_mistral(std::span<const ChatMessage> messages, size_t first,
                    const ChatRenderOptions& options, SegmentWriter& out) {
  const std::string eos = eos_or_default(options);
  // Unlike LLAMA2, BOS opens the whole conversation once, not every user turn.
  out.markup(bos_or_default(options, "<s>"));
  for (size_t i = first; i < messages.size(); ++i) {
    const std::string& content = messages[i].content;
    if ((i - first) % 2 == 0) {  // user
      out.markup("[INST] ");
      if (i == first && first == 1) out.content(messages[0].content).markup("\n\n");
      out.content(content).markup(" [/INST]");
    } else {  // assistant
      out.content(content).markup(eos);
    }
  }
}

// Precondition: check_alternation passed; `first` is its result.
void render_gemma(std::span<const ChatMessage> messages, size_t first,
                  const ChatRenderOptions& options, SegmentWriter& out) {
  for (size_t i = first; i < messages.size(); ++i) {
    const bool user = (i - first) % 2 == 0;
    out.markup(user ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
    // Gemma has no system role: its text opens the first user turn.
    if (i == first && first == 1) out.content(messages[0].content).markup("\n\n");
    if (user) {
      out.content(messages[i].content);
    } else {
      out.reply(messages[i].content);
    }
    out.markup("<end_of_turn>\n");
  }
  if (options.add_generation_prompt) out.markup("<start_of_turn>model\n");
}

// Every message as header + content + trailer (ZEPHYR, PHI3, CHATML, QWEN3, LLAMA3); `header`
// gets the role's name.
struct TurnLayout {
  std::string_view header_open;
  std::string_view header_close;
  std::string trailer;
  std::string_view generation_prompt;
};

// Qwen3 keeps an assistant turn's reasoning only after the last user message: earlier turns keep
// the text after their last `</think>`, without the newlines that follow it.
std::string_view without_reasoning(std::string_view content) {
  const size_t end = content.rfind("</think>");
  if (end == std::string_view::npos) return content;
  std::string_view answer = content.substr(end + std::string_view("</think>").size());
  while (!answer.empty() && answer.front() == '\n') answer.remove_prefix(1);
  return answer;
}

// reasoning_tags: Qwen3's <think> handling (old turns' reasoning dropped; enable_thinking).
void render_turns(std::span<const ChatMessage> messages, std::span<const Role> roles,
                  const TurnLayout& layout, bool reasoning_tags, const ChatRenderOptions& options,
                  SegmentWriter& out) {
  size_t last_user = 0;
  for (size_t i = 0; i < roles.size(); ++i) {
    if (roles[i] == Role::USER) last_user = i;
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    std::string_view content = messages[i].content;
    if (reasoning_tags && roles[i] == Role::ASSISTANT && i < last_user) {
      content = without_reasoning(content);
    }
    out.markup(std::string(layout.header_open) + std::string(role_name(roles[i])) +
               std::string(layout.header_close));
    if (roles[i] == Role::ASSISTANT) {
      out.reply(content);
    } else {
      out.content(content);
    }
    if (!messages[i].tools_json.empty())
      out.markup("<|tool|>").content(messages[i].tools_json).markup("<|/tool|>");
    out.markup(layout.trailer);
  }
  if (options.add_generation_prompt) {
    out.markup(layout.generation_prompt);
    if (reasoning_tags && !options.enable_thinking) {
      out.markup("<think>\n\n</think>\n\n");
    }
  }
}

// gpt-oss: the system preamble, then every message as <|start|>ROLE[<|channel|>C]<|message|>
// CONTENT<|end|>; a system message is the developer's instructions (and the tools' namespace);
// an assistant's calls are <|start|>assistant to=functions.NAME<|channel|>commentary json
// <|message|>ARGS<|call|> and a tool's result <|start|>functions.NAME to=assistant<|channel|>
// commentary<|message|>RESULT<|end|>.
void render_harmony(std::span<const ChatMessage> messages, std::span<const Role> roles,
                    const ChatRenderOptions& options, SegmentWriter& out) {
  const bool has_tools = std::any_of(messages.begin(), messages.end(),
                                     [](const ChatMessage& m) { return !m.tools_json.empty(); });
  out.markup("<|start|>system<|message|>" + harmony_preamble(options.reasoning_effort, has_tools) +
             "<|end|>");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    switch (roles[i]) {
      case Role::SYSTEM:
        out.markup("<|start|>developer<|message|>");
        if (!m.content.empty()) out.markup("# Instructions\n\n").content(m.content);
        if (!m.tools_json.empty()) {
          if (!m.content.empty()) out.markup("\n\n");
          out.content(m.tools_json);
        }
        break;
      case Role::ASSISTANT:
        if (!m.content.empty() || m.tool_calls.empty()) {
          // Text before calls is a preamble on the commentary channel, as gpt-oss writes one.
          const char* channel = m.tool_calls.empty() ? "final" : "commentary";
          out.markup("<|start|>assistant<|channel|>" + std::string(channel) + "<|message|>")
              .reply(m.content)
              .markup("<|end|>");
        }
        // Names are [a-zA-Z0-9_-] (the API checks), so a header holds no markup but its own.
        for (const ChatToolCall& call : m.tool_calls) {
          out.markup("<|start|>assistant to=functions." + call.name +
                     "<|channel|>commentary json<|message|>")
              .content(call.arguments.empty() ? "{}" : call.arguments)
              .markup("<|call|>");
        }
        continue;  // each part closed itself
      case Role::TOOL:
        out.markup("<|start|>functions." + m.tool_name +
                   " to=assistant<|channel|>commentary<|message|>")
            .content(m.content);
        break;
      case Role::USER:
      case Role::IPYTHON:
        out.markup("<|start|>" + std::string(role_name(roles[i])) + "<|message|>")
            .content(m.content);
        break;
    }
    out.markup("<|end|>");
  }
  if (options.add_generation_prompt) out.markup("<|start|>assistant");
}

TurnLayout turn_layout(ChatTemplateKind kind, const ChatRenderOptions& options) {
  switch (kind) {
    case ChatTemplateKind::ZEPHYR:
      return {"<|", "|>\n", eos_or_default(options) + "\n", "<|assistant|>\n"};
    case ChatTemplateKind::PHI3:
      return {"<|", "|>\n", "<|end|>\n", "<|assistant|>\n"};
    case ChatTemplateKind::PHI4:
      return {"<|", "|>", "<|end|>", "<|assistant|>"};
    case ChatTemplateKind::LLAMA3:
      return {"<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>",
              "<|start_header_id|>assistant<|end_header_id|>\n\n"};
    case ChatTemplateKind::CHATML:
    case ChatTemplateKind::QWEN3:
    case ChatTemplateKind::LLAMA2:  // not turn formats; never asked for
    case ChatTemplateKind::MISTRAL:
    case ChatTemplateKind::GEMMA:
    case ChatTemplateKind::HARMONY:
      break;
  }
  return {"<|im_start|>", "\n", "<|im_end|>\n", "<|im_start|>assistant\n"};
}

}  // namespace

std::string harmony_preamble(std::string_view effort, bool tools) {
  std::string text =
      "You are ChatGPT, a large language model trained by OpenAI.\n"
      "Knowledge cutoff: 2024-06\n\n"
      "Reasoning: " +
      std::string(effort) +
      "\n\n"
      "# Valid channels: analysis, commentary, final. Channel must be included for every "
      "message.";
  if (tools) text += "\nCalls to these tools must go to the commentary channel: 'functions'.";
  return text;
}

std::string_view chat_template_name(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::LLAMA2:
      return "llama2";
    case ChatTemplateKind::ZEPHYR:
      return "zephyr";
    case ChatTemplateKind::CHATML:
      return "chatml";
    case ChatTemplateKind::LLAMA3:
      return "llama3";
    case ChatTemplateKind::MISTRAL:
      return "mistral";
    case ChatTemplateKind::GEMMA:
      return "gemma";
    case ChatTemplateKind::PHI3:
      return "phi3";
    case ChatTemplateKind::QWEN3:
      return "qwen3";
    case ChatTemplateKind::PHI4:
      return "phi4";
    case ChatTemplateKind::HARMONY:
      return "harmony";
  }
  return "?";
}

Result<ChatTemplateKind> parse_chat_template_name(std::string_view name) {
  for (ChatTemplateKind kind : kAllChatTemplateKinds) {
    if (chat_template_name(kind) == name) return kind;
  }
  return Error{"unknown chat template '" + std::string(name) + "' (valid: " + valid_names() + ")"};
}

bool text_has_bos(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::LLAMA2:
    case ChatTemplateKind::MISTRAL:
    case ChatTemplateKind::LLAMA3:
      return true;
    case ChatTemplateKind::ZEPHYR:
    case ChatTemplateKind::CHATML:
    case ChatTemplateKind::GEMMA:
    case ChatTemplateKind::PHI3:
    case ChatTemplateKind::QWEN3:
    case ChatTemplateKind::PHI4:
    case ChatTemplateKind::HARMONY:
      return false;
  }
  return false;
}

Result<ChatTemplateKind> detect_chat_template(std::string_view jinja_source) {
  if (jinja_source.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return Error{"the chat template is empty; " + override_hint()};
  }
  // The order matters where markers overlap: a ChatML or Llama-3 template may mention other
  // formats' markers in comments or branches, but its own delimiters decide how it renders.
  // gpt-oss's channels come first: its <|end|> and <|start|> would otherwise read as others'.
  if (contains(jinja_source, "<|channel|>") && contains(jinja_source, "<|message|>"))
    return ChatTemplateKind::HARMONY;
  if (contains(jinja_source, "<|im_start|>")) {
    // Qwen3 is ChatML with reasoning between <think> tags; Qwen2.5's template has no such tag.
    return contains(jinja_source, "<think>") ? ChatTemplateKind::QWEN3 : ChatTemplateKind::CHATML;
  }
  if (contains(jinja_source, "<|start_header_id|>")) return ChatTemplateKind::LLAMA3;
  if (contains(jinja_source, "<start_of_turn>")) return ChatTemplateKind::GEMMA;
  // Phi-4-mini: Phi-3's markers without the newlines, and tools between <|tool|> markers.
  if (contains(jinja_source, "<|tool|>") && contains(jinja_source, "<|end|>"))
    return ChatTemplateKind::PHI4;
  if (contains(jinja_source, "<|user|>") && contains(jinja_source, "<|assistant|>")) {
    // Phi-3 uses Zephyr's role headers but ends turns with <|end|> instead of EOS.
    return contains(jinja_source, "<|end|>") ? ChatTemplateKind::PHI3 : ChatTemplateKind::ZEPHYR;
  }
  if (contains(jinja_source, "[INST]")) {
    return contains(jinja_source, "<<SYS>>") ? ChatTemplateKind::LLAMA2 : ChatTemplateKind::MISTRAL;
  }
  return Error{"the chat template is not one of the known formats; " + override_hint()};
}

Result<ChatTemplateKind> detect_chat_template(const GgufFile& file) {
  if (!file.has(kChatTemplateKey)) {
    return Error{file.name() + ": no " + std::string(kChatTemplateKey) + " key; " +
                 override_hint()};
  }
  Result<std::string> source = file.get_string(kChatTemplateKey);
  if (!source.ok()) return source.error();
  Result<ChatTemplateKind> kind = detect_chat_template(*source);
  if (!kind.ok()) {
    return Error{file.name() + ": " + std::string(kChatTemplateKey) + ": " + kind.error().message};
  }
  return kind;
}

Result<std::vector<ChatSegment>> render_chat_segments(ChatTemplateKind kind,
                                                      std::span<const ChatMessage> messages,
                                                      const ChatRenderOptions& options) {
  if (messages.empty()) {
    return Error{"cannot render an empty conversation: at least one chat message is needed"};
  }
  Result<std::vector<Role>> roles = parse_roles(messages);
  if (!roles.ok()) return roles.error();
  if (kind != ChatTemplateKind::HARMONY) {
    for (size_t i = 0; i < roles->size(); ++i) {
      if ((*roles)[i] == Role::TOOL) {
        return Error{"chat message " + std::to_string(i) + " has role 'tool', which the " +
                     std::string(chat_template_name(kind)) +
                     " format renders only once the conversation's tools are written out"};
      }
    }
  }
  SegmentWriter out;
  switch (kind) {
    case ChatTemplateKind::LLAMA2:
    case ChatTemplateKind::MISTRAL:
    case ChatTemplateKind::GEMMA: {
      Result<size_t> first = check_alternation(kind, *roles);
      if (!first.ok()) return first.error();
      if (kind == ChatTemplateKind::LLAMA2) {
        render_llama2(messages, *first, options, out);
      } else if (kind == ChatTemplateKind::MISTRAL) {
        render_mistral(messages, *first, options, out);
      } else {
        render_gemma(messages, *first, options, out);
      }
      break;
    }
    case ChatTemplateKind::LLAMA3:
      out.markup(bos_or_default(options, "<|begin_of_text|>"));
      render_turns(messages, *roles, turn_layout(kind, options), false, options, out);
      break;
    case ChatTemplateKind::ZEPHYR:
    case ChatTemplateKind::CHATML:
    case ChatTemplateKind::PHI3:
    case ChatTemplateKind::QWEN3:
    case ChatTemplateKind::PHI4:
      render_turns(messages, *roles, turn_layout(kind, options), kind == ChatTemplateKind::QWEN3,
                   options, out);
      break;
    case ChatTemplateKind::HARMONY:
      render_harmony(messages, *roles, options, out);
      break;
  }
  return out.take();
}

Result<std::string> render_chat(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                const ChatRenderOptions& options) {
  Result<std::vector<ChatSegment>> segments = render_chat_segments(kind, messages, options);
  if (!segments.ok()) return segments.error();
  std::string text;
  for (const ChatSegment& segment : *segments) text += segment.text;
  return text;
}

Result<std::vector<TokenId>> encode_chat(const Tokenizer& tokenizer, ChatTemplateKind kind,
                                         std::span<const ChatMessage> messages,
                                         ChatRenderOptions options) {
  const Vocab& vocab = tokenizer.vocab();
  if (options.bos_token.empty() && vocab.bos_id != kNoToken)
    options.bos_token = tokenizer.token_to_piece(vocab.bos_id, /*render_special=*/true);
  if (options.eos_token.empty() && vocab.eos_id != kNoToken)
    options.eos_token = tokenizer.token_to_piece(vocab.eos_id, /*render_special=*/true);
  Result<std::vector<ChatSegment>> segments = render_chat_segments(kind, messages, options);
  if (!segments.ok()) return segments.error();
  // Runs of segments are tokenized together; a remembered reply's tokens are spliced in between
  // runs. Only where the turn after it opens with a control token (every turn format here): the
  // text after a splice then starts at a token boundary, as it would in one encoding.
  const bool splice = static_cast<bool>(options.reply_tokens) && kind != ChatTemplateKind::LLAMA2 &&
                      kind != ChatTemplateKind::MISTRAL;
  std::vector<TokenId> tokens;
  std::vector<TextSegment> pieces;
  bool first_run = true;
  auto flush = [&] {
    if (pieces.empty()) return;
    // The formats that spell BOS in the text must not get a second one from the tokenizer.
    std::vector<TokenId> run = tokenizer.encode(pieces, first_run && !text_has_bos(kind));
    tokens.insert(tokens.end(), run.begin(), run.end());
    pieces.clear();
    first_run = false;
  };
  for (const ChatSegment& segment : *segments) {
    const std::vector<TokenId>* known =
        splice && segment.is_reply ? options.reply_tokens(segment.text) : nullptr;
    if (known == nullptr) {
      pieces.push_back({segment.text, /*parse_special=*/!segment.is_content});
      continue;
    }
    flush();
    tokens.insert(tokens.end(), known->begin(), known->end());
    first_run = false;
  }
  flush();
  return tokens;
}

std::span<const std::string_view> end_of_turn_texts(ChatTemplateKind kind) {
  static constexpr std::string_view kLlama3[] = {"<|eot_id|>", "<|eom_id|>"};
  static constexpr std::string_view kChatMl[] = {"<|im_end|>"};
  static constexpr std::string_view kGemma[] = {"<end_of_turn>"};
  static constexpr std::string_view kPhi3[] = {"<|end|>"};
  static constexpr std::string_view kHarmony[] = {"<|return|>", "<|call|>"};
  switch (kind) {
    case ChatTemplateKind::LLAMA3:
      return kLlama3;
    case ChatTemplateKind::CHATML:
    case ChatTemplateKind::QWEN3:
      return kChatMl;
    case ChatTemplateKind::GEMMA:
      return kGemma;
    case ChatTemplateKind::PHI3:
    case ChatTemplateKind::PHI4:
      return kPhi3;
    case ChatTemplateKind::HARMONY:
      return kHarmony;
    case ChatTemplateKind::LLAMA2:
    case ChatTemplateKind::ZEPHYR:
    case ChatTemplateKind::MISTRAL:
      break;
  }
  return {};
}

namespace {

// The lowest id of each marker `vocab` has, EOS left out.
std::vector<TokenId> marker_ids(const Vocab& vocab, std::span<const std::string_view> markers) {
  std::vector<TokenId> ids;
  for (std::string_view marker : markers) {
    for (TokenId id = 0; id < vocab.size(); ++id) {
      if (vocab.tokens[static_cast<size_t>(id)] != marker) continue;
      if (id != vocab.eos_id) ids.push_back(id);
      break;
    }
  }
  return ids;
}

}  // namespace

std::vector<TokenId> chat_stop_tokens(const Vocab& vocab, ChatTemplateKind kind) {
  return marker_ids(vocab, end_of_turn_texts(kind));
}

std::vector<TokenId> chat_markup_tokens(const Vocab& vocab, ChatTemplateKind kind) {
  static constexpr std::string_view kHarmony[] = {"<|start|>", "<|channel|>", "<|message|>",
                                                  "<|end|>", "<|constrain|>"};
  if (kind != ChatTemplateKind::HARMONY) return {};
  return marker_ids(vocab, kHarmony);
}

}  // namespace trellis
