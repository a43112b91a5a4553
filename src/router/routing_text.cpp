#include "router/routing_text.h"

namespace trellis {
namespace {

// One prompt: a string, or token ids written as numbers (each followed by a comma, so that a
// prefix of the ids is a prefix of the text).
void append_prompt(const nlohmann::json& prompt, std::string& text) {
  if (prompt.is_string()) {
    text += prompt.get_ref<const std::string&>();
    return;
  }
  if (!prompt.is_array()) return;
  for (const nlohmann::json& item : prompt) {
    if (item.is_number_integer()) {
      text += std::to_string(item.get<int64_t>());
      text += ',';
    } else if (item.is_string() || item.is_array()) {  // a batch of prompts
      append_prompt(item, text);
      text += '\n';
    }
  }
}

// A message's content: a string, or parts of which the text ones count.
void append_content(const nlohmann::json& content, std::string& text) {
  if (content.is_string()) {
    text += content.get_ref<const std::string&>();
    return;
  }
  if (!content.is_array()) return;
  for (const nlohmann::json& part : content) {
    if (!part.is_object()) continue;
    const auto it = part.find("text");
    if (it != part.end() && it->is_string()) text += it->get_ref<const std::string&>();
  }
}

}  // namespace

std::string completion_routing_text(const nlohmann::json& request) {
  std::string text;
  if (const auto it = request.find("prompt"); it != request.end()) append_prompt(*it, text);
  return text;
}

std::string chat_routing_text(const nlohmann::json& request) {
  std::string text;
  const auto messages = request.find("messages");
  if (messages == request.end() || !messages->is_array()) return text;
  for (const nlohmann::json& message : *messages) {
    if (!message.is_object()) continue;
    // "\x1e" (record separator) ends a role and "\x1f" a message: neither is typed in chat text,
    // so message boundaries never blur into each other.
    if (const auto role = message.find("role"); role != message.end() && role->is_string())
      text += role->get_ref<const std::string&>();
    text += '\x1e';
    if (const auto content = message.find("content"); content != message.end())
      append_content(*content, text);
    text += '\x1f';
  }
  return text;
}

}  // namespace trellis
