// Readers of another implementation's reference outputs (../shared/reference and
// ../shared/reference-arch): greedy continuations with their top-2 margins, and the top logits of
// every prompt position.
#pragma once

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/token_id.h"

namespace trellis::testing {

struct GreedyCase {
  std::string prompt;
  std::vector<TokenId> prompt_tokens;
  std::vector<TokenId> generated;
  std::vector<float> margins;  // top1 - top2 logit at each generated step
};

struct LogitsCase {
  std::string prompt;
  // Per position: (token id, logit) pairs; all logits or the top K, as the file has them.
  std::vector<std::vector<std::pair<TokenId, float>>> positions;
};

template <typename T>
std::vector<T> parse_numbers(const std::string& text) {
  std::istringstream in(text);
  std::vector<T> out;
  T v;
  while (in >> v) out.push_back(v);
  return out;
}

inline std::string after(const std::string& line, const std::string& prefix) {
  return line.substr(std::min(line.size(), prefix.size()));
}

// `prompt: TEXT`, `prompt_tokens: IDS`, `generated_tokens: IDS`, `top1_minus_top2_logit: X...`.
inline std::vector<GreedyCase> read_greedy(const std::string& path) {
  std::ifstream in(path);
  std::vector<GreedyCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("prompt: ", 0) == 0 || line == "prompt:") {
      cases.emplace_back();
      cases.back().prompt = line == "prompt:" ? "" : after(line, "prompt: ");
    } else if (cases.empty()) {
      continue;  // a header comment
    } else if (line.rfind("prompt_tokens:", 0) == 0) {
      cases.back().prompt_tokens = parse_numbers<TokenId>(after(line, "prompt_tokens:"));
    } else if (line.rfind("generated_tokens:", 0) == 0) {
      cases.back().generated = parse_numbers<TokenId>(after(line, "generated_tokens:"));
    } else if (line.rfind("top1_minus_top2_logit:", 0) == 0) {
      cases.back().margins = parse_numbers<float>(after(line, "top1_minus_top2_logit:"));
    }
  }
  return cases;
}

// `prompt: TEXT`, then one `pos P tok T V V ...` line per position, V = `logit` (ids in order)
// or `id:logit`.
inline std::vector<LogitsCase> read_logits(const std::string& path) {
  std::ifstream in(path);
  std::vector<LogitsCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("prompt:", 0) == 0) {
      cases.emplace_back();
      cases.back().prompt = line == "prompt:" ? "" : after(line, "prompt: ");
    } else if (line.rfind("pos ", 0) == 0 && !cases.empty()) {
      std::istringstream fields(line);
      std::string word;
      fields >> word >> word >> word >> word;  // pos P tok T
      std::vector<std::pair<TokenId, float>> values;
      TokenId next_id = 0;
      while (fields >> word) {
        size_t colon = word.find(':');
        if (colon == std::string::npos) {
          values.emplace_back(next_id++, std::stof(word));
        } else {
          values.emplace_back(std::stoi(word.substr(0, colon)), std::stof(word.substr(colon + 1)));
        }
      }
      cases.back().positions.push_back(std::move(values));
    }
  }
  return cases;
}

// The largest |ours[id] - reference| over the reference's (id, logit) pairs of one position.
inline float worst_difference(const std::vector<float>& ours,
                              const std::vector<std::pair<TokenId, float>>& reference) {
  float worst = 0;
  for (auto [id, expected] : reference) {
    const float diff = ours[static_cast<size_t>(id)] - expected;
    worst = std::max(worst, diff < 0 ? -diff : diff);
  }
  return worst;
}

}  // namespace trellis::testing
