// GPT-2's reversible byte <-> Unicode mapping used by byte-level BPE vocabs.
//
// Every byte value is given a printable code point so that token texts never contain control
// characters or spaces: the 188 printable bytes '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF map
// to themselves; the remaining 68 bytes (0x00..0x20, 0x7F..0xA0, 0xAD), in increasing order, map
// to U+0100, U+0101, ... U+0143. The mapping is a bijection between the 256 bytes and those 256
// code points.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace trellis {

// The code point that stands for `byte` in token texts (range U+0021..U+0143).
char32_t byte_to_unicode(uint8_t byte);

// The byte that `cp` stands for, or nullopt when `cp` is not one of the 256 mapped code points.
std::optional<uint8_t> unicode_to_byte(char32_t cp);

// UTF-8 of the mapped code point of each byte of `bytes` (1 or 2 output bytes per input byte).
std::string bytes_to_unicode(std::string_view bytes);
// Appends the UTF-8 of `byte`'s mapped code point to `out`.
void append_byte_as_unicode(std::string& out, uint8_t byte);

// Inverse of bytes_to_unicode: nullopt when `text` holds invalid UTF-8 or a code point that is
// not in the mapping (such text did not come from bytes_to_unicode).
std::optional<std::string> unicode_to_bytes(std::string_view text);

}  // namespace trellis
