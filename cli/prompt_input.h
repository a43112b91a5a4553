// Prompts given on the command line or in a file, as text or as token ids.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "base/token_id.h"

namespace trellis::cli {

// A prompt as text (tokenized with BOS unless --no-bos) or as token ids (used as given).
struct PromptInput {
  std::string text;
  std::vector<TokenId> tokens;
  bool is_tokens = false;
};

// One JSON value per line: a string, or a non-empty array of token ids. Blank lines are skipped.
// Errors name the file and line.
Result<std::vector<PromptInput>> read_prompts_file(const std::string& path);

// The -p texts, then the lines of `prompts_file` (when not empty). Errors: the file's, or no
// prompt at all.
Result<std::vector<PromptInput>> collect_prompts(const std::vector<std::string>& texts,
                                                 const std::string& prompts_file);

}  // namespace trellis::cli
