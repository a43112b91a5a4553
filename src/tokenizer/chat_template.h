// Chat templates: a conversation (system / user / assistant messages) rendered as the prompt text
// a chat model was trained on. Five well-known formats are built in; the Jinja source a GGUF
// stores under `tokenizer.chat_template` is only inspected for markers to pick one of them (it is
// never executed), and a user can override the choice by name.
//
// Tokenizing the rendered text (the contract with tokenizer.h):
//   - Always tokenize with parse_special = true, so that markers such as `<s>`, `</s>`,
//     `<|im_start|>` or `<|eot_id|>` become their single token ids instead of plain text.
//   - text_has_bos(kind) true: the text already starts with BOS. Tokenize with
//     add_special = false; adding the vocab's BOS as well would give two BOS tokens.
//   - text_has_bos(kind) false: the text carries no BOS. Tokenize with add_special = true, so
//     the vocab adds BOS if it wants one (tokenizer.ggml.add_bos_token).
//   - Message content is inserted verbatim and not escaped: content that spells a special token
//     (say "<|im_end|>") is parsed as that token. A server that must prevent this filters content
//     before rendering.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"

namespace trellis {

class GgufFile;

// The GGUF metadata key holding a model's Jinja chat template.
inline constexpr std::string_view kChatTemplateKey = "tokenizer.chat_template";

// The formats, for a system + user + assistant + user conversation ({S}, {U}, {A}: contents;
// {bos}, {eos}: ChatRenderOptions' spellings; `\n` is a newline), then the generation prompt:
//   LLAMA2   {bos}[INST] <<SYS>>\n{S}\n<</SYS>>\n\n{U} [/INST] {A} {eos}{bos}[INST] {U} [/INST]
//            (none: a user turn already ends with " [/INST]")
//   ZEPHYR   <|system|>\n{S}{eos}\n<|user|>\n{U}{eos}\n<|assistant|>\n{A}{eos}\n ... (<|role|>\n)
//            <|assistant|>\n
//   CHATML   <|im_start|>system\n{S}<|im_end|>\n<|im_start|>user\n{U}<|im_end|>\n ...
//            <|im_start|>assistant\n
//   LLAMA3   {bos}<|start_header_id|>system<|end_header_id|>\n\n{S}<|eot_id|> ...
//            <|start_header_id|>assistant<|end_header_id|>\n\n
//   MISTRAL  {bos}[INST] {S}\n\n{U} [/INST]{A}{eos}[INST] {U} [/INST]
//            (none, as LLAMA2)
// Content is never changed (the published Llama-2/Llama-3 Jinja templates also trim it). MISTRAL
// is the v0.1 layout; later Mistral templates differ in spaces and where the system text goes.
enum class ChatTemplateKind { LLAMA2, ZEPHYR, CHATML, LLAMA3, MISTRAL };

inline constexpr std::array<ChatTemplateKind, 5> kAllChatTemplateKinds = {
    ChatTemplateKind::LLAMA2, ChatTemplateKind::ZEPHYR, ChatTemplateKind::CHATML,
    ChatTemplateKind::LLAMA3, ChatTemplateKind::MISTRAL};

// "llama2", "zephyr", "chatml", "llama3", "mistral": the names --chat-template accepts.
std::string_view chat_template_name(ChatTemplateKind kind);
// The inverse of chat_template_name (exact, lower case). Error: an unknown name; the message lists
// the valid ones.
Result<ChatTemplateKind> parse_chat_template_name(std::string_view name);

// True when render_chat's text begins with BOS (LLAMA2, MISTRAL, LLAMA3): the caller must then
// not add another one when tokenizing (see the top of this file).
bool text_has_bos(ChatTemplateKind kind);

// Picks the built-in format that a Jinja chat template implements, by its distinctive markers,
// checked in this order:
//   `<|im_start|>`                              -> CHATML
//   `<|start_header_id|>`                       -> LLAMA3
//   `<|user|>` and `<|assistant|>`, no `<|end|>` -> ZEPHYR   (with `<|end|>` it is Phi-3: rejected)
//   `[INST]` with `<<SYS>>`                     -> LLAMA2
//   `[INST]` without `<<SYS>>`                  -> MISTRAL
// Error: an empty or unrecognised template; the message suggests `--chat-template NAME`.
Result<ChatTemplateKind> detect_chat_template(std::string_view jinja_source);

// detect_chat_template on the file's `tokenizer.chat_template`. Errors (prefixed with the file
// name): the key is absent or not a string, or its template is not recognised.
Result<ChatTemplateKind> detect_chat_template(const GgufFile& file);

// One message of a conversation. role: "system", "user" or "assistant".
struct ChatMessage {
  std::string role;
  std::string content;
};

struct ChatRenderOptions {
  // End with the header that opens an assistant turn, so the model's next tokens are its reply.
  // LLAMA2 and MISTRAL have no such header (a user turn already ends with "[/INST]"), so for them
  // this flag changes nothing.
  bool add_generation_prompt = true;
  // How BOS and EOS are spelled in the text, for the formats that write them there (LLAMA2,
  // MISTRAL: both; ZEPHYR: EOS; LLAMA3: BOS; CHATML: neither). Normally the vocab's token text.
  // Empty: the format's usual spelling, "<s>" / "</s>" (LLAMA3's BOS: "<|begin_of_text|>").
  std::string bos_token;
  std::string eos_token;
};

// Renders `messages` in `kind`'s format (see the table above).
// Errors: no messages; a role other than system / user / assistant (the message names the role and
// its index). LLAMA2 and MISTRAL also require, after an optional first system message, at least
// one message and roles alternating user, assistant, user, ... (their [INST] pairs cannot express
// anything else); the other formats take any order.
Result<std::string> render_chat(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                const ChatRenderOptions& options = {});

}  // namespace trellis
