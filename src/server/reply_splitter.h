// Splits a chat reply's text as it streams into what the API returns apart: the reasoning
// (Qwen3's <think>...</think> at the start, sent as reasoning_content), the content, and the tool
// calls (sent as tool_calls, never as text). Text that might be the start of a marker is held back
// until it is known not to be one, like a stop string.
//
//   reply:  [<think> reasoning </think>\n\n] content [\n<tool_call>...</tool_call> ...]   HERMES
//           [<think> reasoning </think>\n\n] content | {"name": ..., "parameters": ...} LLAMA3_JSON
//           {"tool_calls": [...]} | {"response": "..."}                                    GENERIC
//   harmony (gpt-oss, its markup tokens spelled in the text): messages, each
//           [<|start|>assistant][ to=R]<|channel|>CHANNEL[ <|constrain|>T]<|message|>BODY[<|end|>]
//           whose analysis bodies are reasoning and the others content; with tools, a message
//           to functions.NAME is a call, its body the arguments (ending at <|call|>).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/chat_tools.h"

namespace trellis {

struct ReplyFormat {
  // A leading <think> block goes to reasoning (harmony: the analysis channel does).
  bool split_reasoning = false;
  // The syntax tool calls come in; nullopt: the request has no tools (or tool_choice none), so
  // the text is all content.
  std::optional<ToolCallSyntax> tools;
  bool harmony = false;  // the reply is harmony messages (see the top of this file)
};

struct ReplyDelta {
  std::string reasoning;
  std::string content;
  bool empty() const { return reasoning.empty() && content.empty(); }
};

class ReplySplitter {
 public:
  explicit ReplySplitter(ReplyFormat format) : format_(format) {
    state_ = format.harmony           ? State::HARMONY_HEADER
             : format.split_reasoning ? State::START
                                      : content_state();
  }

  // Feeds the next piece of generated text; returns what can be sent now.
  ReplyDelta push(std::string_view text);
  // The end of the reply: the rest of the text, and the tool calls (with ids from `id_prefix`
  // and their index). A call whose text does not parse (the reply was cut by max_tokens) is
  // returned as content.
  ReplyDelta finish(std::vector<ChatToolCall>& calls, const std::string& id_prefix);

 private:
  // GENERIC_START: whether a generic-form reply is an answer or calls is not known yet;
  // GENERIC_ANSWER: inside {"response": "...: the string's text streams as content.
  // HARMONY_HEADER: a message's header, up to <|message|> (never sent); HARMONY_BODY: its text,
  // up to <|end|>, to reasoning or content by its channel; HARMONY_CALL: a call's arguments.
  enum class State {
    START,
    REASONING,
    CONTENT,
    CALLS,
    GENERIC_START,
    GENERIC_ANSWER,
    HARMONY_HEADER,
    HARMONY_BODY,
    HARMONY_CALL,
    DONE
  };
  State content_state() const;
  void run(ReplyDelta& out, bool at_end);
  // HARMONY_HEADER: reads a whole header (false: wait for more); text that cannot begin one is
  // content, as if the model had written a message without a header.
  bool read_harmony_header(bool at_end);
  // GENERIC_ANSWER: decodes the JSON string in pending_ into `content` up to its closing quote
  // (then DONE) or an escape not complete yet (kept, unless at_end).
  void decode_answer(std::string& content, bool at_end);
  // Emits `pending_` up to what may still begin `marker` (all of it when at_end); returns true
  // and consumes through the marker when it is found.
  bool emit_until(std::string_view marker, std::string& sink, bool at_end, size_t& marker_at);

  ReplyFormat format_;
  State state_;
  std::string pending_;             // received, not yet sent nor classified
  std::string calls_text_;          // everything from the first call on
  std::string held_newlines_;       // content's trailing newlines: one is dropped if a call follows
  bool strip_newlines_ = false;     // after </think>: the newlines before the answer are markup
  bool decided_ = false;            // LLAMA3_JSON: whether the reply is a call is known
  bool harmony_reasoning_ = false;  // HARMONY_BODY: the message is on the analysis channel
  std::optional<ChatToolCall> harmony_call_;  // HARMONY_CALL: the call being read
  std::vector<ChatToolCall> harmony_calls_;   // the calls read so far
};

// The calls in a reply's call text (see ReplySplitter); `leftover` receives what does not parse.
std::vector<ChatToolCall> parse_tool_calls(ToolCallSyntax syntax, std::string_view text,
                                           const std::string& id_prefix, std::string& leftover);

}  // namespace trellis
