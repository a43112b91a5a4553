// The chat templates synthesized models carry (`tokenizer.chat_template`): each family gets a
// Jinja template of the format its real chat models use, so a server on a synthesized model
// chats in that format, as it would on the real model.
#pragma once

#include <string_view>

#include "model/model_presets.h"
#include "tokenizer/chat_template.h"

namespace trellis {

// The chat format of the real models of `preset`'s family:
//   llama (tiny, small, tinyllama-1.1b)  ZEPHYR   TinyLlama-1.1B-Chat's format
//   llama3 (llama with rope_freqs)       LLAMA3
//   qwen2                                CHATML   Qwen2.5's
//   qwen3                                QWEN3
//   gemma3                               GEMMA
//   phi3                                 PHI3
//   gpt-oss                              HARMONY
// A family not listed gets CHATML.
ChatTemplateKind preset_chat_format(const ModelPreset& preset);

// A Jinja template of `kind`'s format. Rendered by a Jinja engine with the variables llama.cpp
// and transformers pass (messages, add_generation_prompt, bos_token, eos_token and, for QWEN3,
// enable_thinking) it gives the text render_chat gives (tokenizer/chat_template.h; LLAMA2,
// MISTRAL and GEMMA raise an error where render_chat does, on roles that do not alternate), and
// detect_chat_template recognises it as `kind`.
std::string_view chat_template_source(ChatTemplateKind kind);

// chat_template_source(preset_chat_format(preset)).
std::string_view preset_chat_template(const ModelPreset& preset);

}  // namespace trellis
