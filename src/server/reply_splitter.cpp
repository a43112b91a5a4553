#include "server/reply_splitter.h"

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace trellis {

namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kFunctools = "functools[";
constexpr std::string_view kHarmonyMessage = "<|message|>";
constexpr std::string_view kHarmonyEnd = "<|end|>";
constexpr std::string_view kHarmonyChannel = "<|channel|>";
constexpr std::string_view kHarmonyCall = "<|call|>";
constexpr std::string_view kHarmonyRecipient = "to=";
constexpr std::string_view kHarmonyFunctions = "functions.";
// What a harmony header may begin with (the first message's <|start|>assistant is the prompt's).
constexpr std::string_view kHarmonyHeaderStarts[] = {"<|start|>", kHarmonyChannel,
                                                     " to=", "<|constrain|>"};
// A header longer than this is not one: its text is the model's, shown as content.
constexpr size_t kMaxHarmonyHeader = 256;

// The length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (marker.substr(0, n) == text.substr(text.size() - n)) return n;
  return 0;
}

std::string_view trimmed(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// {"name": NAME, "<args_key>": ARGS} -> a call; ARGS kept as the model wrote it when it can be
// cut out exactly, else as its compact serialization. False when `text` is not such an object.
bool parse_call_object(std::string_view text, const char* args_key, ChatToolCall& call) {
  const auto value = nlohmann::ordered_json::parse(text, nullptr, false);
  if (value.is_discarded() || !value.is_object()) return false;
  auto name = value.find("name");
  auto args = value.find(args_key);
  if (name == value.end() || !name->is_string()) return false;
  call.name = name->get<std::string>();
  if (args == value.end()) {
    call.arguments = "{}";
    return true;
  }
  call.arguments = args->dump();
  // The raw text: from after `"args_key":` to the object's closing brace.
  const std::string key = std::string("\"") + args_key + "\"";
  const size_t at = text.rfind(key);
  const size_t close = text.rfind('}');
  if (at == std::string_view::npos || close == std::string_view::npos || close <= at) return true;
  size_t start = text.find(':', at + key.size());
  if (start == std::string_view::npos || start > close) return true;
  const std::string_view raw = trimmed(text.substr(start + 1, close - start - 1));
  const auto reparsed = nlohmann::ordered_json::parse(raw, nullptr, false);
  if (!reparsed.is_discarded() && reparsed == *args) call.arguments = std::string(raw);
  return true;
}

std::vector<ChatToolCall> parse_hermes(std::string_view text, std::string& leftover) {
  std::vector<ChatToolCall> calls;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t open = text.find(kCallOpen, pos);
    if (open == std::string_view::npos) {
      leftover += trimmed(text.substr(pos));
      break;
    }
    leftover += trimmed(text.substr(pos, open - pos));
    const size_t body = open + kCallOpen.size();
    const size_t close = text.find(kCallClose, body);
    ChatToolCall call;
    if (close == std::string_view::npos ||
        !parse_call_object(trimmed(text.substr(body, close - body)), "arguments", call)) {
      leftover += text.substr(open);  // unfinished or unreadable: the client sees the text
      break;
    }
    calls.push_back(std::move(call));
    pos = close + kCallClose.size();
  }
  return calls;
}

// The end of the JSON value that starts at `pos` (strings, nesting and scalars scanned, not
// validated), or npos when it does not end.
size_t json_value_end(std::string_view text, size_t pos) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = pos; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"') {
        in_string = false;
        if (depth == 0) return i + 1;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
      if (depth < 0) return i;  // a scalar ended by its container
    } else if (depth == 0 && (c == ',' || c == ' ' || c == '\n')) {
      return i;  // a scalar at the top
    }
  }
  return depth == 0 && !in_string && pos < text.size() ? text.size() : std::string_view::npos;
}

// A list of calls as the grammar writes it, `open` {"name": N, "arguments": A}, ... `close`
// ({"tool_calls": [ ... ]} or functools[ ... ]), cut apart so that each A keeps its exact text.
// False when the text is not in that form.
bool scan_call_list(std::string_view text, std::string_view open, std::string_view close,
                    std::vector<ChatToolCall>& calls) {
  auto expect = [&](size_t& pos, std::string_view word) {
    if (text.substr(pos, word.size()) != word) return false;
    pos += word.size();
    return true;
  };
  size_t pos = 0;
  if (!expect(pos, open)) return false;
  for (;;) {
    ChatToolCall call;
    if (!expect(pos, "{\"name\": ")) return false;
    const size_t name_end = json_value_end(text, pos);
    if (name_end == std::string_view::npos) return false;
    const auto name = nlohmann::json::parse(text.substr(pos, name_end - pos), nullptr, false);
    if (!name.is_string()) return false;
    call.name = name.get<std::string>();
    pos = name_end;
    if (!expect(pos, ", \"arguments\": ")) return false;
    const size_t args_end = json_value_end(text, pos);
    if (args_end == std::string_view::npos) return false;
    call.arguments = std::string(text.substr(pos, args_end - pos));
    if (nlohmann::json::parse(call.arguments, nullptr, false).is_discarded()) return false;
    pos = args_end;
    if (!expect(pos, "}")) return false;
    calls.push_back(std::move(call));
    if (expect(pos, close)) return pos == text.size();
    if (!expect(pos, ", ")) return false;
  }
}

std::vector<ChatToolCall> parse_generic(std::string_view text, std::string& leftover) {
  if (std::vector<ChatToolCall> calls;
      scan_call_list(trimmed(text), "{\"tool_calls\": [", "]}", calls))
    return calls;
  const auto value = nlohmann::ordered_json::parse(text, nullptr, false);
  if (value.is_object()) {
    auto response = value.find("response");
    if (response != value.end() && response->is_string()) {
      leftover += response->get<std::string>();
      return {};
    }
    auto list = value.find("tool_calls");
    if (list != value.end() && list->is_array()) {
      std::vector<ChatToolCall> calls;
      for (const auto& item : *list) {
        ChatToolCall call;
        if (!parse_call_object(item.dump(), "arguments", call)) {
          leftover += text;
          return {};
        }
        calls.push_back(std::move(call));
      }
      return calls;
    }
  }
  leftover += text;
  return {};
}

// functools[...] after the text; a list that does not scan stays text.
std::vector<ChatToolCall> parse_functools(std::string_view text, std::string& leftover) {
  std::vector<ChatToolCall> calls;
  if (!scan_call_list(trimmed(text), kFunctools, "]", calls)) leftover += text;
  return calls;
}

}  // namespace

constexpr std::string_view kGenericAnswer = "{\"response\": \"";

ReplySplitter::State ReplySplitter::content_state() const {
  return format_.tools == ToolCallSyntax::GENERIC ? State::GENERIC_START : State::CONTENT;
}

void ReplySplitter::decode_answer(std::string& content, bool at_end) {
  size_t i = 0;
  while (i < pending_.size()) {
    const char c = pending_[i];
    if (c == '"') {  // the answer ends; `}` follows
      pending_.clear();
      state_ = State::DONE;
      return;
    }
    if (c != '\\') {
      content += c;
      ++i;
      continue;
    }
    // An escape: \x, or \uXXXX (two of them for a surrogate pair: a high half waits for its
    // low half).
    size_t length = i + 1 < pending_.size() && pending_[i + 1] == 'u' ? 6 : 2;
    if (length == 6 && i + 6 <= pending_.size()) {
      const auto unit = std::strtoul(pending_.substr(i + 2, 4).c_str(), nullptr, 16);
      if (unit >= 0xD800 && unit < 0xDC00) length = 12;
    }
    if (i + length > pending_.size()) break;  // not complete yet
    const auto decoded =
        nlohmann::json::parse("\"" + pending_.substr(i, length) + "\"", nullptr, false);
    if (decoded.is_string()) content += decoded.get<std::string>();
    i += length;
  }
  pending_.erase(0, i);
  if (at_end) pending_.clear();  // an escape cut by max_tokens
}

bool ReplySplitter::read_harmony_header(bool at_end) {
  const size_t at = pending_.find(kHarmonyMessage);
  const std::string_view text = pending_;
  bool header_like = false;
  for (std::string_view start : kHarmonyHeaderStarts) {
    const size_t n = std::min(text.size(), start.size());
    header_like |= text.substr(0, n) == start.substr(0, n);
  }
  header_like &= (at == std::string::npos ? text.size() : at) <= kMaxHarmonyHeader;
  if (at != std::string::npos && header_like) {
    // The channel: the word after <|channel|> (" json" or <|constrain|> may follow it).
    const size_t channel = text.substr(0, at).find(kHarmonyChannel);
    std::string_view name;
    if (channel != std::string::npos) {
      name = text.substr(channel + kHarmonyChannel.size(), at - channel - kHarmonyChannel.size());
      name = name.substr(0, name.find_first_of(" <"));
    }
    harmony_reasoning_ = format_.split_reasoning && name == "analysis";
    // A message to functions.NAME (the recipient before or after the channel) is a call.
    harmony_call_.reset();
    const size_t to = text.substr(0, at).find(kHarmonyRecipient);
    if (to != std::string::npos && format_.tools) {
      std::string_view recipient = text.substr(to + kHarmonyRecipient.size());
      recipient = recipient.substr(0, std::min(recipient.find_first_of(" <"), at - to));
      if (recipient.substr(0, kHarmonyFunctions.size()) == kHarmonyFunctions) {
        harmony_call_ = ChatToolCall{};
        harmony_call_->name = std::string(recipient.substr(kHarmonyFunctions.size()));
      }
    }
    pending_.erase(0, at + kHarmonyMessage.size());
    return true;
  }
  if (header_like && !at_end) return false;  // may still become a header
  if (header_like) {                         // a header cut by max_tokens: markup only
    pending_.clear();
    return true;
  }
  harmony_reasoning_ = false;  // not harmony: the text is content
  return true;
}

bool ReplySplitter::emit_until(std::string_view marker, std::string& sink, bool at_end,
                               size_t& marker_at) {
  marker_at = pending_.find(marker);
  if (marker_at != std::string::npos) return true;
  const size_t keep = at_end ? 0 : partial_marker_suffix(pending_, marker);
  sink += pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return false;
}

void ReplySplitter::run(ReplyDelta& out, bool at_end) {
  for (;;) {
    switch (state_) {
      case State::START: {
        if (!at_end && pending_.size() < kThinkOpen.size() &&
            kThinkOpen.substr(0, pending_.size()) == pending_)
          return;  // may still become <think>
        if (pending_.rfind(kThinkOpen, 0) == 0) {
          pending_.erase(0, kThinkOpen.size());
          state_ = State::REASONING;
        } else {
          state_ = content_state();
        }
        break;
      }
      case State::REASONING: {
        size_t at = 0;
        if (!emit_until(kThinkClose, out.reasoning, at_end, at)) return;
        out.reasoning += pending_.substr(0, at);
        pending_.erase(0, at + kThinkClose.size());
        strip_newlines_ = true;  // "</think>\n\n" then the answer
        state_ = content_state();
        break;
      }
      case State::CONTENT: {
        while (strip_newlines_ && !pending_.empty() && pending_.front() == '\n')
          pending_.erase(0, 1);
        if (!pending_.empty()) strip_newlines_ = false;
        if (format_.tools == ToolCallSyntax::LLAMA3_JSON && !decided_) {
          const size_t first = pending_.find_first_not_of(" \t\r\n");
          if (first == std::string::npos && !at_end) return;
          decided_ = true;
          if (first != std::string::npos && pending_[first] == '{') {
            state_ = State::CALLS;
            break;
          }
        }
        if (format_.tools != ToolCallSyntax::HERMES && format_.tools != ToolCallSyntax::FUNCTOOLS) {
          out.content += pending_;
          pending_.clear();
          return;
        }
        const std::string_view marker =
            format_.tools == ToolCallSyntax::HERMES ? kCallOpen : kFunctools;
        size_t at = 0;
        std::string text;
        const bool found = emit_until(marker, text, at_end, at);
        if (found) {
          text = pending_.substr(0, at);
          calls_text_ = pending_.substr(at);
          pending_.clear();
        }
        // Trailing newlines wait: the one before a call belongs to the call's markup.
        text = held_newlines_ + text;
        const size_t end = text.find_last_not_of('\n') + 1;  // npos + 1 == 0
        held_newlines_ = text.substr(end);
        out.content += text.substr(0, end);
        if (!found) {
          if (at_end) out.content += std::exchange(held_newlines_, "");
          return;
        }
        // HERMES writes the text and a call with a newline between them (FUNCTOOLS without).
        if (format_.tools == ToolCallSyntax::HERMES && !held_newlines_.empty())
          held_newlines_.pop_back();
        out.content += std::exchange(held_newlines_, "");
        state_ = State::CALLS;
        break;
      }
      case State::CALLS:
        calls_text_ += pending_;
        pending_.clear();
        return;
      case State::GENERIC_START:
        if (!at_end && pending_.size() < kGenericAnswer.size() &&
            kGenericAnswer.substr(0, pending_.size()) == pending_)
          return;  // may still open an answer
        if (pending_.rfind(kGenericAnswer, 0) == 0) {
          pending_.erase(0, kGenericAnswer.size());
          state_ = State::GENERIC_ANSWER;
        } else {
          state_ = State::CALLS;
        }
        break;
      case State::GENERIC_ANSWER:
        decode_answer(out.content, at_end);
        if (state_ == State::GENERIC_ANSWER) return;
        break;
      case State::HARMONY_HEADER:
        if (pending_.empty() || !read_harmony_header(at_end)) return;
        state_ = harmony_call_ ? State::HARMONY_CALL : State::HARMONY_BODY;
        break;
      case State::HARMONY_CALL: {
        // The arguments run to <|call|> (usually the reply's end: it stops generation) or
        // <|end|>; they are sent as a call, never streamed as text.
        const size_t call = pending_.find(kHarmonyCall);
        const size_t at = std::min(call, pending_.find(kHarmonyEnd));
        if (at == std::string::npos && !at_end) return;
        harmony_call_->arguments += pending_.substr(0, at);
        if (at == std::string::npos) {
          pending_.clear();
        } else {
          pending_.erase(0, at + (at == call ? kHarmonyCall.size() : kHarmonyEnd.size()));
        }
        harmony_calls_.push_back(std::move(*harmony_call_));
        harmony_call_.reset();
        state_ = State::HARMONY_HEADER;
        if (pending_.empty()) return;
        break;
      }
      case State::HARMONY_BODY: {
        std::string& sink = harmony_reasoning_ ? out.reasoning : out.content;
        size_t at = 0;
        if (!emit_until(kHarmonyEnd, sink, at_end, at)) return;
        sink += pending_.substr(0, at);
        pending_.erase(0, at + kHarmonyEnd.size());
        state_ = State::HARMONY_HEADER;
        break;
      }
      case State::DONE:
        pending_.clear();
        return;
    }
  }
}

ReplyDelta ReplySplitter::push(std::string_view text) {
  pending_ += text;
  ReplyDelta out;
  run(out, false);
  return out;
}

ReplyDelta ReplySplitter::finish(std::vector<ChatToolCall>& calls, const std::string& id_prefix) {
  ReplyDelta out;
  run(out, true);
  if (state_ == State::CALLS && format_.tools) {
    std::string leftover;
    calls = parse_tool_calls(*format_.tools, calls_text_, id_prefix, leftover);
    out.content += leftover;
  }
  if (format_.harmony && !harmony_calls_.empty()) {
    calls = std::move(harmony_calls_);
    for (size_t i = 0; i < calls.size(); ++i) calls[i].id = id_prefix + std::to_string(i);
  }
  return out;
}

std::vector<ChatToolCall> parse_tool_calls(ToolCallSyntax syntax, std::string_view text,
                                           const std::string& id_prefix, std::string& leftover) {
  std::vector<ChatToolCall> calls;
  if (syntax == ToolCallSyntax::HERMES) {
    calls = parse_hermes(text, leftover);
  } else if (syntax == ToolCallSyntax::FUNCTOOLS) {
    calls = parse_functools(text, leftover);
  } else if (syntax == ToolCallSyntax::GENERIC) {
    calls = parse_generic(text, leftover);
  } else {
    ChatToolCall call;
    if (parse_call_object(trimmed(text), "parameters", call)) {
      calls.push_back(std::move(call));
    } else {
      leftover += text;
    }
  }
  for (size_t i = 0; i < calls.size(); ++i) calls[i].id = id_prefix + std::to_string(i);
  return calls;
}

}  // namespace trellis
