#include "tokenizer/chat_template.h"

#include <cstddef>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"

namespace trellis {
namespace {

enum class Role { SYSTEM, USER, ASSISTANT };

std::string_view role_name(Role role) {
  switch (role) {
    case Role::SYSTEM:
      return "system";
    case Role::USER:
      return "user";
    case Role::ASSISTANT:
      return "assistant";
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
    } else {
      return Error{"chat message " + std::to_string(i) + " has role '" + role +
                   "'; the roles are system, user and assistant"};
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

std::string bos_or_default(const ChatRenderOptions& options, std::string_view fallback) {
  return options.bos_token.empty() ? std::string(fallback) : options.bos_token;
}

std::string eos_or_default(const ChatRenderOptions& options) {
  return options.eos_token.empty() ? std::string("</s>") : options.eos_token;
}

// Precondition: check_alternation passed; `first` is its result.
std::string render_llama2(std::span<const ChatMessage> messages, size_t first,
                          const ChatRenderOptions& options) {
  const std::string bos = bos_or_default(options, "<s>");
  const std::string eos = eos_or_default(options);
  std::string out;
  for (size_t i = first; i < messages.size(); ++i) {
    const std::string& content = messages[i].content;
    if ((i - first) % 2 == 0) {  // user
      out += bos + "[INST] ";
      // The system message has no turn of its own: it is folded into the first user turn.
      if (i == first && first == 1) {
        out += "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n";
      }
      out += content + " [/INST]";
    } else {  // assistant
      out += " " + content + " " + eos;
    }
  }
  return out;
}

// Precondition: check_alternation passed; `first` is its result.
std::string render_mistral(std::span<const ChatMessage> messages, size_t first,
                           const ChatRenderOptions& options) {
  const std::string eos = eos_or_default(options);
  // Unlike LLAMA2, BOS opens the whole conversation once, not every user turn.
  std::string out = bos_or_default(options, "<s>");
  for (size_t i = first; i < messages.size(); ++i) {
    const std::string& content = messages[i].content;
    if ((i - first) % 2 == 0) {  // user
      out += "[INST] ";
      if (i == first && first == 1) out += messages[0].content + "\n\n";
      out += content + " [/INST]";
    } else {  // assistant
      out += content + eos;
    }
  }
  return out;
}

std::string render_zephyr(std::span<const ChatMessage> messages, std::span<const Role> roles,
                          const ChatRenderOptions& options) {
  const std::string eos = eos_or_default(options);
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    out += "<|" + std::string(role_name(roles[i])) + "|>\n" + messages[i].content + eos + "\n";
  }
  if (options.add_generation_prompt) out += "<|assistant|>\n";
  return out;
}

std::string render_chatml(std::span<const ChatMessage> messages, std::span<const Role> roles,
                          const ChatRenderOptions& options) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    out += "<|im_start|>" + std::string(role_name(roles[i])) + "\n" + messages[i].content +
           "<|im_end|>\n";
  }
  if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string render_llama3(std::span<const ChatMessage> messages, std::span<const Role> roles,
                          const ChatRenderOptions& options) {
  std::string out = bos_or_default(options, "<|begin_of_text|>");
  for (size_t i = 0; i < messages.size(); ++i) {
    out += "<|start_header_id|>" + std::string(role_name(roles[i])) + "<|end_header_id|>\n\n" +
           messages[i].content + "<|eot_id|>";
  }
  if (options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace

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
  if (contains(jinja_source, "<|im_start|>")) return ChatTemplateKind::CHATML;
  if (contains(jinja_source, "<|start_header_id|>")) return ChatTemplateKind::LLAMA3;
  if (contains(jinja_source, "<|user|>") && contains(jinja_source, "<|assistant|>")) {
    // Phi-3 uses Zephyr's role headers but ends turns with <|end|> instead of EOS; rendering it as
    // Zephyr would silently produce text the model was not trained on.
    if (contains(jinja_source, "<|end|>")) {
      return Error{
          "the chat template looks like Phi-3 (<|user|> turns ended by <|end|>), which is not "
          "supported; " +
          override_hint()};
    }
    return ChatTemplateKind::ZEPHYR;
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

Result<std::string> render_chat(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                const ChatRenderOptions& options) {
  if (messages.empty()) {
    return Error{"cannot render an empty conversation: at least one chat message is needed"};
  }
  Result<std::vector<Role>> roles = parse_roles(messages);
  if (!roles.ok()) return roles.error();
  switch (kind) {
    case ChatTemplateKind::LLAMA2:
    case ChatTemplateKind::MISTRAL: {
      Result<size_t> first = check_alternation(kind, *roles);
      if (!first.ok()) return first.error();
      return kind == ChatTemplateKind::LLAMA2 ? render_llama2(messages, *first, options)
                                              : render_mistral(messages, *first, options);
    }
    case ChatTemplateKind::ZEPHYR:
      return render_zephyr(messages, *roles, options);
    case ChatTemplateKind::CHATML:
      return render_chatml(messages, *roles, options);
    case ChatTemplateKind::LLAMA3:
      return render_llama3(messages, *roles, options);
  }
  return Error{"unknown chat template kind"};
}

}  // namespace trellis
