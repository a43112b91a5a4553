// The JSON schemas `trellis bench structured` constrains to: three of its own, shaped like what
// structured-output requests send (a nested object with an array, an enum and number-range heavy
// record, a recursive tree via $ref), and those of a JSON-Schema-Test-Suite folder (the Debian
// package json-schema-test-suite installs one per draft under /usr/share/json-schema-test-suite).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "grammar/grammar.h"

namespace trellis::bench {

struct NamedSchema {
  std::string name;  // "person", or "FILE#INDEX" for a suite schema (FILE relative to its folder)
  nlohmann::ordered_json schema;
};

// The bench's own schemas, in this order: "person" (name, age, email, an address object, a tags
// array), "order" (enums, integer and number ranges, a pattern, a nested object), "tree" (a node
// with a children array of nodes, through $defs and $ref). Every one compiles.
const std::vector<NamedSchema>& structured_bench_schemas();
// structured_bench_schemas()[0].
const NamedSchema& person_schema();

// Every test group's "schema" in the *.json files below `dir` (recursively, files in path order,
// groups in file order), named FILE#INDEX. Errors: `dir` is not a folder, a file that is not a
// JSON array of groups.
Result<std::vector<NamedSchema>> load_schema_suite(const std::string& dir);

// What a structured-output request compiles: json_schema_to_gbnf (compact whitespace, default
// limits, as the server) then parse_gbnf. Errors: the schema is refused (outside the subset,
// unsatisfiable, past the limits).
Result<Grammar> compile_json_schema(const nlohmann::ordered_json& schema);

}  // namespace trellis::bench
