#include "tokenizer/byte_unicode.h"

#include <array>

#include "base/utf8.h"

namespace trellis {
namespace {

constexpr bool maps_to_itself(unsigned byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

// byte -> code point. Bytes that do not map to themselves take U+0100 + (their rank among such
// bytes), so the table is fixed by the definition above.
constexpr std::array<char32_t, 256> make_byte_table() {
  std::array<char32_t, 256> table{};
  char32_t next_shifted = 0x100;
  for (unsigned byte = 0; byte < 256; ++byte) {
    table[byte] = maps_to_itself(byte) ? static_cast<char32_t>(byte) : next_shifted++;
  }
  return table;
}

constexpr std::array<char32_t, 256> kByteToUnicode = make_byte_table();
// All mapped code points are below this bound (the largest is U+0143).
constexpr char32_t kCodePointLimit = 0x144;

// code point -> byte + 1 (0 marks a code point outside the mapping).
constexpr std::array<uint16_t, kCodePointLimit> make_inverse_table() {
  std::array<uint16_t, kCodePointLimit> table{};
  for (unsigned byte = 0; byte < 256; ++byte) {
    table[kByteToUnicode[byte]] = static_cast<uint16_t>(byte + 1);
  }
  return table;
}

constexpr std::array<uint16_t, kCodePointLimit> kUnicodeToBytePlusOne = make_inverse_table();

static_assert(kByteToUnicode[' '] == 0x120, "space maps to U+0120 ('Ġ')");
static_assert(kByteToUnicode['\n'] == 0x10A, "newline maps to U+010A ('Ċ')");
static_assert(kByteToUnicode[0xAD] == 0x143, "the last shifted byte maps to U+0143");

}  // namespace

char32_t byte_to_unicode(uint8_t byte) {
  return kByteToUnicode[byte];
}

std::optional<uint8_t> unicode_to_byte(char32_t cp) {
  if (cp >= kCodePointLimit || kUnicodeToBytePlusOne[cp] == 0) return std::nullopt;
  return static_cast<uint8_t>(kUnicodeToBytePlusOne[cp] - 1);
}

void append_byte_as_unicode(std::string& out, uint8_t byte) {
  append_utf8(out, kByteToUnicode[byte]);
}

std::string bytes_to_unicode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_byte_as_unicode(out, static_cast<uint8_t>(c));
  return out;
}

std::optional<std::string> unicode_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp = decode_utf8(text, pos);
    // decode_utf8 maps invalid input to U+FFFD, which is outside the mapping anyway; a literal
    // U+FFFD is rejected the same way.
    std::optional<uint8_t> byte = unicode_to_byte(cp);
    if (!byte) return std::nullopt;
    out.push_back(static_cast<char>(*byte));
  }
  return out;
}

}  // namespace trellis
