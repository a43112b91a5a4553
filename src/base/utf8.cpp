#include "base/utf8.h"

namespace trellis {

size_t utf8_sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 0;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode_utf8(char32_t cp) {
  std::string out;
  append_utf8(out, cp);
  return out;
}

char32_t decode_utf8(std::string_view text, size_t& pos) {
  constexpr char32_t kReplacement = 0xFFFD;
  auto lead = static_cast<uint8_t>(text[pos]);
  size_t len = utf8_sequence_length(lead);
  if (len == 0 || pos + len > text.size()) {
    ++pos;
    return kReplacement;
  }
  static constexpr uint8_t kLeadMask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  char32_t cp = lead & kLeadMask[len];
  for (size_t i = 1; i < len; ++i) {
    auto byte = static_cast<uint8_t>(text[pos + i]);
    if ((byte & 0xC0) != 0x80) {
      ++pos;
      return kReplacement;
    }
    cp = (cp << 6) | (byte & 0x3F);
  }
  // Reject overlong forms, surrogates and values past U+10FFFF.
  static constexpr char32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++pos;
    return kReplacement;
  }
  pos += len;
  return cp;
}

size_t utf8_complete_prefix(std::string_view text) {
  // Look back at most 3 bytes for the lead byte of an unfinished sequence.
  size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    auto byte = static_cast<uint8_t>(text[n - back]);
    if ((byte & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t len = utf8_sequence_length(byte);
    return len > back ? n - back : n;
  }
  return n;
}

bool is_valid_utf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    char32_t cp = decode_utf8(text, pos);
    if (cp == 0xFFFD && !(pos - start == 3 && text.substr(start, 3) == "\xEF\xBF\xBD"))
      return false;
  }
  return true;
}

}  // namespace trellis
