// libFuzzer target: the constraint compilers on hostile input. The first byte picks the input
// kind (GBNF, JSON schema, regex); the rest is the input, up to a 0 byte, then bytes to match.
// Every input is refused with an error or compiles to a grammar the automaton runs; nothing
// crashes, and compilation stays within its limits.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "grammar/gbnf.h"
#include "grammar/grammar_automaton.h"
#include "grammar/json_schema_grammar.h"
#include "grammar/regex_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t split = std::min(all.find('\0'), all.size());
  const std::string_view input = all.substr(0, split);
  const std::string_view text = all.substr(std::min(split + 1, all.size()));

  trellis::JsonGrammarOptions options;
  options.limits.max_elements = 1 << 14;
  options.limits.max_gbnf_bytes = 1 << 18;
  options.whitespace =
      data[0] & 4 ? trellis::JsonWhitespace::FLEXIBLE : trellis::JsonWhitespace::COMPACT;
  std::string gbnf;
  switch (data[0] % 3) {
    case 0:
      gbnf = input;
      break;
    case 1: {
      const auto schema = nlohmann::ordered_json::parse(input, nullptr, false);
      if (schema.is_discarded()) return 0;
      trellis::Result<std::string> compiled = trellis::json_schema_to_gbnf(schema, options);
      if (!compiled.ok()) return 0;
      gbnf = std::move(compiled).value();
      break;
    }
    default: {
      trellis::Result<std::string> compiled = trellis::regex_to_gbnf(input, "root", options.limits);
      if (!compiled.ok()) return 0;
      gbnf = std::move(compiled).value();
      break;
    }
  }
  trellis::Result<trellis::Grammar> grammar = trellis::parse_gbnf(gbnf, options.limits);
  if (!grammar.ok()) return 0;
  if (static_cast<int64_t>(grammar->elements.size()) > 2 * options.limits.max_elements + 64)
    std::abort();  // past the limit it was given
  auto shared = std::make_shared<const trellis::Grammar>(std::move(grammar).value());
  trellis::GrammarAutomaton automaton(shared, 4096);
  trellis::GrammarAutomaton::StateId state = automaton.initial();
  for (char c : text) {
    state = automaton.advance(state, static_cast<uint8_t>(c));
    if (state < 0) break;
  }
  return 0;
}
