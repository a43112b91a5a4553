#include "prompt_input.h"

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>

namespace trellis::cli {

Result<std::vector<PromptInput>> read_prompts_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{path + ": cannot open"};
  std::vector<PromptInput> prompts;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    nlohmann::json value = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    PromptInput prompt;
    if (value.is_string()) {
      prompt.text = value.get<std::string>();
    } else if (value.is_array() && !value.empty()) {
      prompt.is_tokens = true;
      for (const nlohmann::json& id : value) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
          return Error{where + ": token ids must be non-negative integers"};
        prompt.tokens.push_back(id.get<TokenId>());
      }
    } else {
      return Error{where + ": expected a JSON string or a non-empty array of token ids per line"};
    }
    prompts.push_back(std::move(prompt));
  }
  return prompts;
}

Result<std::vector<PromptInput>> collect_prompts(const std::vector<std::string>& texts,
                                                 const std::string& prompts_file) {
  std::vector<PromptInput> prompts;
  for (const std::string& text : texts) prompts.push_back({text, {}, false});
  if (!prompts_file.empty()) {
    Result<std::vector<PromptInput>> more = read_prompts_file(prompts_file);
    if (!more.ok()) return more.error();
    prompts.insert(prompts.end(), more->begin(), more->end());
  }
  if (prompts.empty()) return Error{"give a prompt with -p TEXT or --prompts-file FILE"};
  return prompts;
}

}  // namespace trellis::cli
