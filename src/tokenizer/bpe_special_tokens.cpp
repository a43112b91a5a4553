#include "tokenizer/bpe_special_tokens.h"

#include <algorithm>
#include <functional>

namespace trellis {

SpecialTokenSplitter::SpecialTokenSplitter(const Vocab& vocab) {
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    TokenType type = i < vocab.types.size() ? vocab.types[i] : TokenType::NORMAL;
    if (type != TokenType::CONTROL && type != TokenType::USER_DEFINED) continue;
    const std::string& text = vocab.tokens[i];
    if (text.empty()) continue;
    // On duplicate texts the lowest id wins.
    tokens_.try_emplace(text, Entry{static_cast<TokenId>(i), type == TokenType::CONTROL});
    lengths_.push_back(text.size());
    first_bytes_[static_cast<uint8_t>(text[0])] = true;
  }
  std::sort(lengths_.begin(), lengths_.end(), std::greater<>());
  lengths_.erase(std::unique(lengths_.begin(), lengths_.end()), lengths_.end());
}

std::vector<SpecialTokenSplitter::Fragment> SpecialTokenSplitter::split(
    std::string_view text, bool include_control) const {
  std::vector<Fragment> out;
  //  text:  |--plain--|==token==|--plain--|==token==| ...
  //         ^ plain_begin        ^ pos scans from here
  size_t plain_begin = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t matched_length = 0;
    TokenId matched_id = kNoToken;
    if (first_bytes_[static_cast<uint8_t>(text[pos])]) {
      for (size_t length : lengths_) {
        if (length > text.size() - pos) continue;
        auto it = tokens_.find(text.substr(pos, length));
        if (it == tokens_.end() || (it->second.control && !include_control)) continue;
        matched_length = length;
        matched_id = it->second.id;
        break;
      }
    }
    if (matched_length == 0) {
      ++pos;
      continue;
    }
    if (pos > plain_begin) out.push_back({kNoToken, text.substr(plain_begin, pos - plain_begin)});
    out.push_back({matched_id, text.substr(pos, matched_length)});
    pos += matched_length;
    plain_begin = pos;
  }
  if (text.size() > plain_begin) out.push_back({kNoToken, text.substr(plain_begin)});
  return out;
}

}  // namespace trellis
