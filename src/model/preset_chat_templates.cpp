#include "model/preset_chat_templates.h"

#include <string>

namespace trellis {
namespace {

// In the templates below every tag trims the whitespace around it ({%- -%}, {{- -}}), so the
// layout of the source adds nothing to the rendered text; `\n` inside a quoted string is a
// newline (Jinja string escapes).

// ZEPHYR and PHI3: a `<|role|>` header line per message; the turn ends with `end`.
std::string role_header_template(std::string_view end) {
  return std::string(R"({%- for message in messages -%}
  {%- if message['role'] == 'system' -%}
    {{- '<|system|>\n' -}}
  {%- elif message['role'] == 'user' -%}
    {{- '<|user|>\n' -}}
  {%- else -%}
    {{- '<|assistant|>\n' -}}
  {%- endif -%}
  {{- message['content'] + )") +
         std::string(end) + R"( -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|assistant|>\n' -}}
{%- endif -%})";
}

// LLAMA2, MISTRAL and GEMMA: an optional first system message is folded into the first user turn
// as `system_open + content + system_close` (the variable system_text), and the remaining
// messages (`turns`) must alternate user, assistant, user, ...
std::string alternating_turns_preamble(std::string_view system_open,
                                       std::string_view system_close) {
  return std::string(R"({%- if messages[0]['role'] == 'system' -%}
  {%- set system_text = )") +
         std::string(system_open) + " + messages[0]['content'] + " + std::string(system_close) +
         R"( -%}
  {%- set turns = messages[1:] -%}
{%- else -%}
  {%- set system_text = '' -%}
  {%- set turns = messages -%}
{%- endif -%}
{%- if turns | length == 0 -%}
  {{- raise_exception('a conversation needs a user message') -}}
{%- endif -%}
{%- for message in turns -%}
  {%- if message['role'] != ('user' if loop.index0 % 2 == 0 else 'assistant') -%}
    {{- raise_exception('after the system message, roles must alternate user, assistant, user, ...') -}}
  {%- endif -%}
{%- endfor -%}
)";
}

const std::string& zephyr_template() {
  static const std::string text = role_header_template("eos_token + '\\n'");
  return text;
}

const std::string& phi3_template() {
  static const std::string text = role_header_template("'<|end|>\\n'");
  return text;
}

// Phi-4-mini: Phi-3's role markers without newlines; a system message's tools go between
// <|tool|> and <|/tool|>.
constexpr std::string_view kPhi4Template = R"({%- for message in messages -%}
  {%- if message['role'] == 'system' and message['tools'] is defined and message['tools'] -%}
    {{- '<|system|>' + message['content'] + '<|tool|>' + message['tools'] + '<|/tool|><|end|>' -}}
  {%- else -%}
    {{- '<|' + message['role'] + '|>' + message['content'] + '<|end|>' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|assistant|>' -}}
{%- endif -%})";

constexpr std::string_view kChatMlTemplate = R"({%- for message in messages -%}
  {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|im_start|>assistant\n' -}}
{%- endif -%})";

// ChatML, where an assistant turn before the last user message keeps only the text after its last
// `</think>` (leading newlines dropped), and enable_thinking = false opens the reply with an
// empty reasoning block.
constexpr std::string_view kQwen3Template = R"({%- set state = namespace(last_user=-1) -%}
{%- for message in messages -%}
  {%- if message['role'] == 'user' -%}
    {%- set state.last_user = loop.index0 -%}
  {%- endif -%}
{%- endfor -%}
{%- for message in messages -%}
  {%- set content = message['content'] -%}
  {%- if message['role'] == 'assistant' and loop.index0 < state.last_user and '</think>' in content -%}
    {%- set content = content.split('</think>')[-1].lstrip('\n') -%}
  {%- endif -%}
  {{- '<|im_start|>' + message['role'] + '\n' + content + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|im_start|>assistant\n' -}}
  {%- if enable_thinking is defined and enable_thinking is false -%}
    {{- '<think>\n\n</think>\n\n' -}}
  {%- endif -%}
{%- endif -%})";

// gpt-oss's harmony format: the system preamble (harmony_preamble, its newlines as Jinja
// escapes; reasoning_effort as gpt-oss's template takes it, medium by default), a system message
// as the developer's instructions, replies on the final channel.
constexpr std::string_view kHarmonyTemplate = R"({%- if reasoning_effort is not defined -%}
  {%- set reasoning_effort = 'medium' -%}
{%- endif -%}
{{- '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n\nReasoning: ' + reasoning_effort + '\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>' -}}
{%- for message in messages -%}
  {%- if message['role'] == 'system' -%}
    {{- '<|start|>developer<|message|># Instructions\n\n' + message['content'] + '<|end|>' -}}
  {%- elif message['role'] == 'assistant' -%}
    {{- '<|start|>assistant<|channel|>final<|message|>' + message['content'] + '<|end|>' -}}
  {%- else -%}
    {{- '<|start|>' + message['role'] + '<|message|>' + message['content'] + '<|end|>' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|start|>assistant' -}}
{%- endif -%})";

constexpr std::string_view kLlama3Template = R"({{- bos_token -}}
{%- for message in messages -%}
  {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] + '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%})";

const std::string& llama2_template() {
  static const std::string text =
      alternating_turns_preamble("'<<SYS>>\\n'", "'\\n<</SYS>>\\n\\n'") +
      R"({%- for message in turns -%}
  {%- if message['role'] == 'user' -%}
    {{- bos_token + '[INST] ' -}}
    {%- if loop.first -%}
      {{- system_text -}}
    {%- endif -%}
    {{- message['content'] + ' [/INST]' -}}
  {%- else -%}
    {{- ' ' + message['content'] + ' ' + eos_token -}}
  {%- endif -%}
{%- endfor -%})";
  return text;
}

const std::string& mistral_template() {
  static const std::string text = alternating_turns_preamble("''", "'\\n\\n'") +
                                  R"({{- bos_token -}}
{%- for message in turns -%}
  {%- if message['role'] == 'user' -%}
    {{- '[INST] ' -}}
    {%- if loop.first -%}
      {{- system_text -}}
    {%- endif -%}
    {{- message['content'] + ' [/INST]' -}}
  {%- else -%}
    {{- message['content'] + eos_token -}}
  {%- endif -%}
{%- endfor -%})";
  return text;
}

// Gemma has no system role (its text opens the first user turn) and calls the assistant `model`.
const std::string& gemma_template() {
  static const std::string text = alternating_turns_preamble("''", "'\\n\\n'") +
                                  R"({%- for message in turns -%}
  {%- if message['role'] == 'user' -%}
    {{- '<start_of_turn>user\n' -}}
  {%- else -%}
    {{- '<start_of_turn>model\n' -}}
  {%- endif -%}
  {%- if loop.first -%}
    {{- system_text -}}
  {%- endif -%}
  {{- message['content'] + '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<start_of_turn>model\n' -}}
{%- endif -%})";
  return text;
}

}  // namespace

ChatTemplateKind preset_chat_format(const ModelPreset& preset) {
  const std::string& arch = preset.hparams.arch;
  if (arch == "llama")
    return preset.llama3_rope ? ChatTemplateKind::LLAMA3 : ChatTemplateKind::ZEPHYR;
  if (arch == "qwen3" || arch == "qwen3moe") return ChatTemplateKind::QWEN3;
  if (arch == "mixtral") return ChatTemplateKind::MISTRAL;
  if (arch == "gemma3") return ChatTemplateKind::GEMMA;
  if (arch == "phi3") return ChatTemplateKind::PHI3;
  if (arch == "gpt-oss") return ChatTemplateKind::HARMONY;
  // qwen2 (Qwen2.5), qwen2moe (Qwen1.5-MoE), and any family without a format of its own
  return ChatTemplateKind::CHATML;
}

std::string_view chat_template_source(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::LLAMA2:
      return llama2_template();
    case ChatTemplateKind::ZEPHYR:
      return zephyr_template();
    case ChatTemplateKind::CHATML:
      return kChatMlTemplate;
    case ChatTemplateKind::LLAMA3:
      return kLlama3Template;
    case ChatTemplateKind::MISTRAL:
      return mistral_template();
    case ChatTemplateKind::GEMMA:
      return gemma_template();
    case ChatTemplateKind::PHI3:
      return phi3_template();
    case ChatTemplateKind::QWEN3:
      return kQwen3Template;
    case ChatTemplateKind::PHI4:
      return kPhi4Template;
    case ChatTemplateKind::HARMONY:
      return kHarmonyTemplate;
  }
  return kChatMlTemplate;
}

std::string_view preset_chat_template(const ModelPreset& preset) {
  return chat_template_source(preset_chat_format(preset));
}

}  // namespace trellis
