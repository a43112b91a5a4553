// Chat templates: a conversation (system / user / assistant messages) rendered as the prompt a
// chat model was trained on. Eight well-known formats are built in; the Jinja source a GGUF stores
// under `tokenizer.chat_template` is only inspected for markers to pick one of them (it is never
// executed), and a user can override the choice by name.
//
// The contract with the tokenizer:
//   - Only the template inserts control tokens. render_chat_segments returns the prompt as
//     markup (written by the format, may spell special tokens such as `<|im_start|>`, `</s>` or
//     `<|eot_id|>`) and content (a message's text, inserted verbatim). encode_chat tokenizes the
//     markup with parse_special = true and the content with parse_special = false, so content
//     that spells "</s>" or "<|im_end|>" stays literal text and never becomes a control token.
//     Plain text runs on across segments (Tokenizer::encode of segments), so a prompt whose
//     content spells no special token gets exactly the tokens of its whole text with
//     parse_special = true, SentencePiece's space prefix included.
//   - text_has_bos(kind) true: the text already starts with BOS. Tokenize with
//     add_special = false; adding the vocab's BOS as well would give two BOS tokens.
//   - text_has_bos(kind) false: the text carries no BOS. Tokenize with add_special = true, so
//     the vocab adds BOS if it wants one (tokenizer.ggml.add_bos_token).
//   encode_chat does all of this; render_chat (one string) is for display and tests.
//   - Generation of a reply ends at the format's end-of-turn token (chat_stop_tokens) as well as
//     at the vocab's EOS.
#pragma once

#include <array>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/token_id.h"

namespace trellis {

class GgufFile;
class Tokenizer;
struct Vocab;

// The GGUF metadata key holding a model's Jinja chat template.
inline constexpr std::string_view kChatTemplateKey = "tokenizer.chat_template";

// The formats, for a system + user + assistant + user conversation ({S}, {U}, {A}: contents;
// {bos}, {eos}: ChatRenderOptions' spellings; `\n` is a newline), then the generation prompt:
//   LLAMA2   {bos}[INST] <<SYS>>\n{S}\n<</SYS>>\n\n{U} [/INST] {A} {eos}{bos}[INST] {U} [/INST]
//            (none: a user turn already ends with " [/INST]")
//   HARMONY  <|start|>system<|message|>{preamble}<|end|>
//            <|start|>developer<|message|>#
//            Instructions\n\n{S}<|end|><|start|>user<|message|>{U}<|end|>
//            <|start|>assistant<|channel|>final<|message|>{A}<|end|> ...    <|start|>assistant
//            (gpt-oss; the preamble is the model's identity, knowledge cutoff, reasoning effort
//            (ChatRenderOptions::reasoning_effort) and its three channels,
//            harmony_preamble; a system message becomes a
//            developer message; earlier replies are written on the final channel, without
//            their reasoning)
//   ZEPHYR   <|system|>\n{S}{eos}\n<|user|>\n{U}{eos}\n<|assistant|>\n{A}{eos}\n ... (<|role|>\n)
//            <|assistant|>\n
//   CHATML   <|im_start|>system\n{S}<|im_end|>\n<|im_start|>user\n{U}<|im_end|>\n ...
//            <|im_start|>assistant\n
//   LLAMA3   {bos}<|start_header_id|>system<|end_header_id|>\n\n{S}<|eot_id|> ...
//            <|start_header_id|>assistant<|end_header_id|>\n\n
//   MISTRAL  {bos}[INST] {S}\n\n{U} [/INST]{A}{eos}[INST] {U} [/INST]
//            (none, as LLAMA2)
//   GEMMA    <start_of_turn>user\n{S}\n\n{U}<end_of_turn>\n<start_of_turn>model\n{A}<end_of_turn>\n
//            <start_of_turn>user\n{U}<end_of_turn>\n ... <start_of_turn>model\n
//            (no system role: the system text opens the first user turn; BOS comes from the vocab)
//   PHI3     <|system|>\n{S}<|end|>\n<|user|>\n{U}<|end|>\n<|assistant|>\n{A}<|end|>\n ...
//            <|assistant|>\n
//   PHI4     <|system|>{S}<|end|><|user|>{U}<|end|><|assistant|>{A}<|end|> ... <|assistant|>
//            (Phi-4-mini; a system message with tools adds <|tool|>{tools}<|/tool|> before <|end|>)
//   QWEN3    as CHATML, except that an assistant turn before the last user message is written
//            without its reasoning: of "<think>R</think>\n\nA" only "A" (the text after the last
//            `</think>`, leading newlines dropped). The generation prompt leaves thinking on
//            (Qwen3's default): just <|im_start|>assistant\n.
// Content is never changed otherwise (the published Llama-2/Llama-3/Gemma Jinja templates also
// trim it). MISTRAL is the v0.1 layout; later Mistral templates differ in spaces and where the
// system text goes.
enum class ChatTemplateKind {
  LLAMA2,
  ZEPHYR,
  CHATML,
  LLAMA3,
  MISTRAL,
  GEMMA,
  PHI3,
  QWEN3,
  PHI4,
  HARMONY
};

inline constexpr std::array<ChatTemplateKind, 10> kAllChatTemplateKinds = {
    ChatTemplateKind::LLAMA2, ChatTemplateKind::ZEPHYR,  ChatTemplateKind::CHATML,
    ChatTemplateKind::LLAMA3, ChatTemplateKind::MISTRAL, ChatTemplateKind::GEMMA,
    ChatTemplateKind::PHI3,   ChatTemplateKind::QWEN3,   ChatTemplateKind::PHI4,
    ChatTemplateKind::HARMONY};

// HARMONY's system message with reasoning effort `effort` ("low", "medium", "high"): what
// gpt-oss's template writes for a request without a date (with `tools`: the line that sends
// calls to the commentary channel).
std::string harmony_preamble(std::string_view effort, bool tools = false);

// "llama2", "zephyr", "chatml", "llama3", "mistral", "gemma", "phi3", "qwen3", "phi4", "harmony":
// the names --chat-template accepts.
std::string_view chat_template_name(ChatTemplateKind kind);
// The inverse of chat_template_name (exact, lower case). Error: an unknown name; the message lists
// the valid ones.
Result<ChatTemplateKind> parse_chat_template_name(std::string_view name);

// True when render_chat's text begins with BOS (LLAMA2, MISTRAL, LLAMA3): the caller must then
// not add another one when tokenizing (see the top of this file).
bool text_has_bos(ChatTemplateKind kind);

// Picks the built-in format that a Jinja chat template implements, by its distinctive markers,
// checked in this order:
//   `<|channel|>` with `<|message|>`            -> HARMONY  (gpt-oss)
//   `<|im_start|>` with `<think>`               -> QWEN3
//   `<|im_start|>`                              -> CHATML   (Qwen2.5 and most ChatML models)
//   `<|start_header_id|>`                       -> LLAMA3
//   `<start_of_turn>`                           -> GEMMA
//   `<|tool|>` with `<|end|>`                   -> PHI4     (Phi-4-mini)
//   `<|user|>` and `<|assistant|>`, `<|end|>`   -> PHI3
//   `<|user|>` and `<|assistant|>`, no `<|end|>` -> ZEPHYR
//   `[INST]` with `<<SYS>>`                     -> LLAMA2
//   `[INST]` without `<<SYS>>`                  -> MISTRAL
// Error: an empty or unrecognised template; the message suggests `--chat-template NAME`.
Result<ChatTemplateKind> detect_chat_template(std::string_view jinja_source);

// detect_chat_template on the file's `tokenizer.chat_template`. Errors (prefixed with the file
// name): the key is absent or not a string, or its template is not recognised.
Result<ChatTemplateKind> detect_chat_template(const GgufFile& file);

// A call of a tool (a function) by the model, as an assistant message carries it.
struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object's text, written into the prompt as it is
};

// One message of a conversation. role: "system", "user" or "assistant" ("ipython" too, for
// Llama 3's tool results); a conversation with tools, tool calls and "tool" messages is first
// written out by with_tools_written_out() (chat_tools.h).
struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string role_, std::string content_, std::vector<ChatToolCall> tool_calls_ = {},
              std::string tool_call_id_ = {})
      : role(std::move(role_)),
        content(std::move(content_)),
        tool_calls(std::move(tool_calls_)),
        tool_call_id(std::move(tool_call_id_)) {}

  std::string role;
  std::string content;
  std::vector<ChatToolCall> tool_calls;  // assistant messages: the calls the model made
  std::string tool_call_id;              // "tool" messages: the call this is the result of
  // PHI4 system messages: the tools' JSON list, written between <|tool|> and <|/tool|> (as
  // content: it is the client's text). HARMONY system messages: the tools' TypeScript namespace.
  std::string tools_json;
  // HARMONY "tool" messages: the function whose result this is.
  std::string tool_name;
};

struct ChatRenderOptions {
  // End with the header that opens an assistant turn, so the model's next tokens are its reply.
  // LLAMA2 and MISTRAL have no such header (a user turn already ends with "[/INST]"), so for them
  // this flag changes nothing.
  bool add_generation_prompt = true;
  // QWEN3 only: false ends the generation prompt with an empty "<think>\n\n</think>\n\n", as
  // Qwen3's template does for enable_thinking=false, so the model answers without reasoning.
  bool enable_thinking = true;
  // HARMONY only: the reasoning effort its preamble names ("low", "medium" or "high").
  std::string reasoning_effort = "medium";
  // How BOS and EOS are spelled in the text, for the formats that write them there (LLAMA2,
  // MISTRAL: both; ZEPHYR: EOS; LLAMA3: BOS; CHATML, QWEN3, GEMMA, PHI3: neither). Normally the
  // vocab's token text. Empty: the format's usual spelling, "<s>" / "</s>" (LLAMA3's BOS:
  // "<|begin_of_text|>").
  std::string bos_token;
  std::string eos_token;
  // The tokens the model generated for an assistant message's text, when the caller remembers
  // them (null: tokenize the text). encode_chat then uses those tokens for that message, so a
  // conversation sent back with the model's reply in it reproduces the reply's tokens and the
  // prefix cache matches through it (a re-tokenization may split the same text differently).
  // Used only where the assistant's turn ends with a control token.
  std::function<const std::vector<TokenId>*(std::string_view reply_text)> reply_tokens;
};

// One piece of a rendered conversation: markup the format writes, or a message's content.
struct ChatSegment {
  std::string text;
  bool is_content = false;  // true: tokenize as plain text (never as control tokens)
  bool is_reply = false;    // an assistant message's content (is_content too)
};

// Renders `messages` in `kind`'s format (see the table above) as segments in order; neighbours
// never have the same is_content, and no segment is empty.
// Errors: no messages; a role other than system / user / assistant (the message names the role and
// its index). LLAMA2, MISTRAL and GEMMA also require, after an optional first system message, at
// least one message and roles alternating user, assistant, user, ... (their [INST] pairs and
// Gemma's template cannot express anything else); the other formats take any order.
Result<std::vector<ChatSegment>> render_chat_segments(ChatTemplateKind kind,
                                                      std::span<const ChatMessage> messages,
                                                      const ChatRenderOptions& options = {});

// The segments' texts concatenated. Errors: as render_chat_segments.
Result<std::string> render_chat(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                const ChatRenderOptions& options = {});

// The prompt tokens of a conversation, following the contract at the top of this file: markup with
// parse_special, content without, add_special exactly when !text_has_bos(kind). BOS and EOS are
// spelled as the tokenizer's vocab spells them unless `options` names them.
// Errors: as render_chat_segments.
Result<std::vector<TokenId>> encode_chat(const Tokenizer& tokenizer, ChatTemplateKind kind,
                                         std::span<const ChatMessage> messages,
                                         ChatRenderOptions options = {});

// The texts of the tokens that end a turn in `kind`'s format, besides EOS:
//   LLAMA3 `<|eot_id|>`, `<|eom_id|>`; CHATML, QWEN3 `<|im_end|>`; GEMMA `<end_of_turn>`;
//   PHI3 `<|end|>`; HARMONY `<|return|>` (the final answer's end) and `<|call|>` (a tool call's;
//   its `<|end|>` ends one message of the reply, not the turn); LLAMA2, ZEPHYR, MISTRAL none
//   (their turns end with EOS itself).
std::span<const std::string_view> end_of_turn_texts(ChatTemplateKind kind);

// The ids of end_of_turn_texts(kind) that `vocab` has (a token whose text is exactly the marker;
// the lowest id when several are), without the vocab's EOS. A chat request adds them to its stop
// tokens, so the reply ends at the end of the model's turn. Cost: one pass over the vocab.
std::vector<TokenId> chat_stop_tokens(const Vocab& vocab, ChatTemplateKind kind);

// The control tokens of `kind`'s markup that a reply's text keeps, so that the reply can be split
// by them: HARMONY's `<|start|>`, `<|channel|>`, `<|message|>`, `<|end|>` and `<|constrain|>`
// (a reply is messages on channels: analysis, commentary, final); none for the other formats.
// The ids `vocab` has, as chat_stop_tokens finds them.
std::vector<TokenId> chat_markup_tokens(const Vocab& vocab, ChatTemplateKind kind);

}  // namespace trellis
