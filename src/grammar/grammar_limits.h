// Bounds on what compiling one grammar may cost, so that a hostile schema or grammar is refused in
// bounded time and memory instead of exhausting the server.
#pragma once

#include <cstdint>

namespace trellis {

struct GrammarLimits {
  // The most elements (terminals and rule references, repetitions expanded) a compiled grammar may
  // have; `{"maxLength": 100000}` or deeply nested repetitions are refused past it.
  int64_t max_elements = 1 << 20;
  // The most bytes of GBNF text an input may compile to (schema and regex compilers emit GBNF).
  int64_t max_gbnf_bytes = 8 << 20;
  // The deepest nesting of a schema ($ref chains are not nesting: they become rules).
  int32_t max_schema_depth = 64;
};

}  // namespace trellis
