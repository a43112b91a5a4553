// JSON Schema (a documented subset) -> GBNF text, which parse_gbnf() compiles.
//
// The subset: type (a name or a list of names), properties, required, additionalProperties,
// items, prefixItems, minItems/maxItems, enum, const, anyOf/oneOf/allOf (the common forms),
// $ref/$defs/definitions (recursive schemas too), string minLength/maxLength, pattern, format
// (date, time, date-time, uuid, email), integer/number minimum/maximum (and the exclusive forms).
// Annotations that do not constrain the output (title, description, examples, default, $schema,
// $id, $comment, deprecated, readOnly, writeOnly) are accepted and ignored; but a $ref inside a
// subschema whose $id starts a new base URI is refused ($refs resolve against the root only).
// Any other keyword is refused: the error names the keyword and its JSON pointer path
// (e.g. "unsupported JSON Schema keyword 'minProperties' at #/properties/user"), never silently
// relaxed.
//
// Semantics kept exact where the grammar can (every accepted text validates), with these choices:
//   - A keyword constrains only values of its type, as in JSON Schema: {"minLength": 2} without
//     "type" also admits numbers, objects, ...; give "type" to get one kind of value.
//   - oneOf is read as anyOf: exclusivity of the branches is not enforced.
//   - allOf (and $ref with constraining siblings, anyOf with siblings) is merged into plain
//     schemas (see json_schema_merge.h); two different `pattern` or `format` values are refused.
//   - enum/const are written in compact form; beside them only "type" may constrain.
//   - Extra properties (additionalProperties absent, true or a schema) come after the listed
//     ones, under any key but the listed names (so a listed property cannot reappear unchecked).
//   - Numbers with bounds are written without an exponent; bounds of a "number" must be integers
//     (for "integer" any bound works); bounds beyond +-1e18 are refused.
//   - `pattern` has ECMAScript's search semantics (unanchored sides admit anything) and is matched
//     against the decoded string; characters are written in one JSON spelling each there (the
//     short escapes, \u00XX for other controls). `format` and `pattern` cannot be combined with
//     each other or with minLength/maxLength (refused by name).
//   - Strings elsewhere admit every JSON escape; lengths count code points (an escape is one).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"
#include "grammar/grammar_limits.h"

namespace trellis {

// Where the produced JSON may have whitespace.
enum class JsonWhitespace {
  COMPACT,   // none at all: {"a":1,"b":[2,3]}, as OpenAI's strict structured outputs produce it
  FLEXIBLE,  // up to a bounded run of spaces/newlines/tabs around every structural character
};

struct JsonGrammarOptions {
  JsonWhitespace whitespace = JsonWhitespace::COMPACT;
  GrammarLimits limits;
};

// GBNF whose `root` rule accepts exactly the JSON texts (in the chosen whitespace style) that
// validate against `schema`. Properties are emitted in the schema's order; required ones always,
// optional ones may be left out. Errors: a keyword outside the subset (named with its path), a
// malformed value of a known keyword, an unresolvable $ref, a schema no value satisfies
// (e.g. minimum > maximum, an empty enum), or past `options.limits`.
// Properties come in the order of the schema object's keys: nlohmann::json sorts them, so pass
// the schema as ordered_json (parse the request with nlohmann::ordered_json) to keep the order
// the schema's author wrote.
Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema,
                                        const JsonGrammarOptions& options);
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema,
                                        const JsonGrammarOptions& options);

// GBNF whose `root` accepts any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf(const JsonGrammarOptions& options);

}  // namespace trellis
