// Small UTF-8 helpers shared by the tokenizers and text streaming.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace trellis {

// Length of the sequence that `lead` starts (1..4), or 0 for a byte that cannot start one
// (a continuation byte or an invalid lead such as 0xF8).
size_t utf8_sequence_length(uint8_t lead);

// Appends the UTF-8 encoding of `cp` (which must be <= 0x10FFFF) to `out`.
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(char32_t cp);

// Decodes the code point starting at text[pos]; advances `pos` past it. Invalid or truncated
// sequences decode as U+FFFD and advance by one byte.
char32_t decode_utf8(std::string_view text, size_t& pos);

// Length of the longest prefix of `text` that ends on a whole character: the bytes after it are
// the start of a character that is not complete yet (at most 3 bytes are held back).
size_t utf8_complete_prefix(std::string_view text);

bool is_valid_utf8(std::string_view text);

}  // namespace trellis
