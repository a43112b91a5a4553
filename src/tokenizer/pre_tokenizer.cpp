#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <cstdint>
#include <utility>

#include "base/utf8.h"

namespace trellis {
namespace {

// ---- Regex lists per pre type -------------------------------------------------------------
// These are the split patterns of the models' tokenizer definitions (HF tokenizer.json), in the
// order they are applied. HF's pipelines end with the ByteLevel step, which maps bytes to
// characters but splits nothing more (its own regex, where enabled, is listed here); the BPE
// model does that mapping.

// GPT-2. HF's pattern ends with "|\s+"; that alternative only ever matches whitespace that the
// other alternatives leave unmatched, and unmatched stretches become pieces anyway.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// Llama 3: case-insensitive contractions, letters with one optional leading non-letter, digits
// in groups of 1..3, newlines kept together with preceding whitespace.
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2: as Llama 3 but every digit is its own piece.
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-4o / o200k (gpt-oss): a word is cased letters (and marks) then lower-case ones, or the
// reverse, with one optional leading non-letter and an English contraction; digits in groups of
// 1..3; punctuation runs take trailing newlines and slashes.
constexpr std::string_view kGpt4oPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr std::array<std::string_view, 1> kGpt2 = {kGpt2Pattern};
constexpr std::array<std::string_view, 1> kGpt4o = {kGpt4oPattern};
constexpr std::array<std::string_view, 1> kLlama3 = {kLlama3Pattern};
constexpr std::array<std::string_view, 1> kQwen2 = {kQwen2Pattern};

// StarCoder: every digit first becomes its own piece, then the GPT-2 pattern.
constexpr std::array<std::string_view, 2> kStarcoder = {R"(\p{N})", kGpt2Pattern};

// Falcon: runs of punctuation (Unicode P plus ASCII symbols), then GPT-2, then digit triples.
constexpr std::array<std::string_view, 3> kFalcon = {
    R"([\p{P}\$\+<=>\^~\|`]+)",
    kGpt2Pattern,
    R"([0-9][0-9][0-9])",
};

// DeepSeek LLM: newlines alone; runs of cased letters (the Unicode "LC" ranges, spelled out)
// with an optional leading space; runs of ASCII/fullwidth punctuation; trailing whitespace;
// CJK and Hangul runs; digit runs.
constexpr std::array<std::string_view, 6> kDeepseekLlm = {
    R"([\r\n])",
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})"
    R"(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})"
    R"(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})"
    R"(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3})"
    R"(\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})"
    R"(\x{1E900}-\x{1E943}]+)",
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)",
    R"(\s+$)",
    R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)",
    R"(\p{N}+)",
};

// DeepSeek Coder: newlines alone, letter runs, punctuation runs, CJK/Hangul runs, single digits.
constexpr std::array<std::string_view, 5> kDeepseekCoder = {
    R"([\r\n])",    R"(\s?\p{L}+)",
    R"(\s?\p{P}+)", R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)",
    R"(\p{N})",
};

// What llama.cpp applies to a BPE vocab whose file names no pre type ("default").
constexpr std::array<std::string_view, 4> kDefault = {
    R"([\p{P}\$\+<=>\^~\|]+)",
    kGpt2Pattern,
    R"(\p{N}+)",
    R"([0-9][0-9][0-9])",
};

struct PreTypeEntry {
  std::string_view name;
  std::span<const std::string_view> patterns;
};

// Names as llama.cpp's converter writes them to `tokenizer.ggml.pre`; several models share a list.
constexpr std::array<PreTypeEntry, 23> kPreTypes = {{
    {"default", kDefault},
    {"gpt-2", kGpt2},
    {"phi-2", kGpt2},
    {"roberta-bpe", kGpt2},
    {"mpt", kGpt2},
    {"olmo", kGpt2},
    {"jais", kGpt2},
    {"llama-bpe", kLlama3},
    {"llama3", kLlama3},
    {"llama-v3", kLlama3},
    {"falcon3", kLlama3},
    {"dbrx", kLlama3},
    {"smaug-bpe", kLlama3},
    {"qwen2", kQwen2},
    {"gpt-4o", kGpt4o},
    {"deepseek-r1-qwen", kQwen2},
    {"deepseek-llm", kDeepseekLlm},
    {"deepseek-coder", kDeepseekCoder},
    {"falcon", kFalcon},
    {"starcoder", kStarcoder},
    {"refact", kStarcoder},
    {"command-r", kStarcoder},
    {"smollm", kStarcoder},
}};

std::string pcre2_error_text(int error_code) {
  std::array<PCRE2_UCHAR, 256> buffer{};
  int n = pcre2_get_error_message(error_code, buffer.data(), buffer.size());
  if (n < 0) return "PCRE2 error " + std::to_string(error_code);
  return std::string(reinterpret_cast<const char*>(buffer.data()), static_cast<size_t>(n));
}

// A half-open byte range [begin, end) of the text being split.
struct Span {
  size_t begin;
  size_t end;
};

// Match data sized for the whole match only (ovector pair 0); one per split() call so that
// concurrent calls never share it.
struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
using MatchDataPtr = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

}  // namespace

// ---- PreTokenizer::Pattern -------------------------------------------------------------------

class PreTokenizer::Pattern {
 public:
  static Result<std::unique_ptr<Pattern>> compile(std::string_view source) {
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                                     PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
    if (code == nullptr) {
      return Error{"pre-tokenizer pattern '" + std::string(source) +
                   "' does not compile at offset " + std::to_string(error_offset) + ": " +
                   pcre2_error_text(error_code)};
    }
    return std::unique_ptr<Pattern>(new Pattern(code));
  }

  Pattern(const Pattern&) = delete;
  Pattern& operator=(const Pattern&) = delete;
  ~Pattern() { pcre2_code_free(code_); }

  // Appends to `out` the pieces of `piece` (a range of `text`): matches and the stretches
  // between them, all non-empty, in order. Precondition: text[piece] is valid UTF-8.
  void split_piece(std::string_view text, Span piece, pcre2_match_data* match_data,
                   std::vector<Span>& out) const {
    // The piece is the whole subject: lookaheads and '$' must not see past its end.
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + piece.begin);
    const size_t length = piece.end - piece.begin;
    //  piece:  |--unmatched--|==match==|--unmatched--|==match==|...
    //          ^ emitted_end            ^ search_from (after a match, == emitted_end)
    size_t emitted_end = 0;  // bytes [0, emitted_end) of the piece are already in `out`
    size_t search_from = 0;
    while (search_from < length) {
      // The text was validated once up front; skip PCRE2's per-call check (O(length) each).
      int rc =
          pcre2_match(code_, subject, length, search_from, PCRE2_NO_UTF_CHECK, match_data, nullptr);
      if (rc < 0) break;  // PCRE2_ERROR_NOMATCH, or a resource limit: keep the rest whole
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
      size_t match_begin = ovector[0];
      size_t match_end = ovector[1];
      if (match_end == match_begin) {
        // An empty match splits nothing; step over one character and search again.
        search_from = match_begin + char_length(subject, length, match_begin);
        continue;
      }
      if (match_begin > emitted_end)
        out.push_back({piece.begin + emitted_end, piece.begin + match_begin});
      out.push_back({piece.begin + match_begin, piece.begin + match_end});
      emitted_end = match_end;
      search_from = match_end;
    }
    if (emitted_end < length) out.push_back({piece.begin + emitted_end, piece.end});
  }

 private:
  explicit Pattern(pcre2_code* code) : code_(code) {}

  static size_t char_length(PCRE2_SPTR subject, size_t length, size_t pos) {
    size_t n = utf8_sequence_length(subject[pos]);
    if (n == 0 || pos + n > length) return 1;
    return n;
  }

  pcre2_code* code_;  // owned; immutable after compilation, so shared by concurrent matches
};

// ---- PreTokenizer ----------------------------------------------------------------------------

PreTokenizer::PreTokenizer(std::vector<std::unique_ptr<Pattern>> patterns)
    : patterns_(std::move(patterns)) {}
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

Result<PreTokenizer> PreTokenizer::from_patterns(std::span<const std::string_view> patterns) {
  std::vector<std::unique_ptr<Pattern>> compiled;
  compiled.reserve(patterns.size());
  for (std::string_view source : patterns) {
    Result<std::unique_ptr<Pattern>> pattern = Pattern::compile(source);
    if (!pattern.ok()) return pattern.error();
    compiled.push_back(std::move(pattern).value());
  }
  return PreTokenizer(std::move(compiled));
}

Result<PreTokenizer> PreTokenizer::for_pre_type(std::string_view pre_type) {
  for (const PreTypeEntry& entry : kPreTypes) {
    if (entry.name == pre_type) return from_patterns(entry.patterns);
  }
  std::string known;
  for (const PreTypeEntry& entry : kPreTypes) {
    if (!known.empty()) known += ", ";
    known += entry.name;
  }
  return Error{"unknown BPE pre-tokenizer type '" + std::string(pre_type) +
               "' (tokenizer.ggml.pre); known types: " + known};
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  // Initial pieces: maximal runs of valid UTF-8, and each invalid byte on its own. A one-byte
  // piece with the high bit set is necessarily such an invalid byte (valid one-byte characters
  // are ASCII), which is how the loop below recognizes the pieces it must not match against.
  std::vector<Span> pieces;
  {
    size_t run_begin = 0;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t char_begin = pos;
      char32_t cp = decode_utf8(text, pos);
      bool invalid = cp == 0xFFFD && pos == char_begin + 1;
      if (!invalid) continue;
      if (char_begin > run_begin) pieces.push_back({run_begin, char_begin});
      pieces.push_back({char_begin, pos});
      run_begin = pos;
    }
    if (text.size() > run_begin) pieces.push_back({run_begin, text.size()});
  }

  MatchDataPtr match_data(pcre2_match_data_create(1, nullptr));
  std::vector<Span> next;
  for (const std::unique_ptr<Pattern>& pattern : patterns_) {
    next.clear();
    next.reserve(pieces.size() * 2);
    for (Span piece : pieces) {
      bool invalid_byte =
          piece.end - piece.begin == 1 && static_cast<uint8_t>(text[piece.begin]) >= 0x80;
      if (invalid_byte || match_data == nullptr) {
        next.push_back(piece);
      } else {
        pattern->split_piece(text, piece, match_data.get(), next);
      }
    }
    pieces.swap(next);
  }

  std::vector<std::string_view> out;
  out.reserve(pieces.size());
  for (Span piece : pieces) out.push_back(text.substr(piece.begin, piece.end - piece.begin));
  return out;
}

std::vector<std::string> known_pre_types() {
  std::vector<std::string> names;
  for (const PreTypeEntry& entry : kPreTypes) names.emplace_back(entry.name);
  return names;
}

}  // namespace trellis
