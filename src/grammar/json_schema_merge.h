// Reducing JSON Schema's combinators ($ref with siblings, allOf, anyOf/oneOf with siblings) to
// plain schemas and alternatives of plain schemas, as the schema compiler needs them: a plain
// schema's keywords all constrain one value directly, so it maps onto one grammar expression.
//
// allOf is merged keyword by keyword, with JSON Schema's semantics kept exact: types intersect,
// bounds take the stricter value, enums intersect, properties merge (a property one side does not
// list must satisfy that side's additionalProperties), array positions merge. Two different
// `pattern` or `format` values cannot be merged and are refused by name.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "grammar/json_schema_keywords.h"

namespace trellis {

// The schema a local $ref ("#", "#/$defs/x", any JSON pointer fragment, percent-encoded or not)
// points at, and its path. Errors: a reference outside the document, no such location, or a
// location that holds no schema.
struct ResolvedRef {
  const SchemaJson* schema = nullptr;
  std::string path;
};
Result<ResolvedRef> resolve_schema_ref(const SchemaJson& root, const std::string& ref,
                                       const std::string& at);

// resolve_schema_ref() reads every '#...' reference against the root schema. A `$id` below the
// root (other than a plain-name fragment "#foo") starts a new base URI, against which JSON Schema
// resolves the $refs inside that subschema ("#" there is the subschema itself): such $refs are
// refused by name, with the path of the $id. The whole document is checked, iteratively (any
// depth), skipping the data of enum, const, examples and default.
Status check_ref_bases(const SchemaJson& root);

// `schema` with the draft-4 forms rewritten: a boolean exclusiveMinimum/exclusiveMaximum becomes
// the numeric form, and a list-valued `items` becomes `prefixItems`.
Result<SchemaJson> normalize_schema(const SchemaJson& schema, const std::string& path);

class SchemaMerger {
 public:
  // `max_depth` bounds the $ref and allOf levels followed while merging.
  SchemaMerger(const SchemaJson& root, int max_depth) : root_(root), max_depth_(max_depth) {}

  // `schema` (an object or a boolean) with no $ref or allOf at its top: what they name is merged
  // in. It may keep anyOf/oneOf; `false` when the merge shows no value satisfies it.
  Result<SchemaJson> flatten(const SchemaJson& schema, const std::string& path) {
    return flatten(schema, path, 0);
  }

  // The alternatives `schema` stands for: its anyOf/oneOf branches each merged with its other
  // keywords (oneOf is read as anyOf: exclusivity is not enforced). A branch is returned as it is
  // when there is nothing to merge into it (so a $ref branch stays a reference). `schema` must be
  // flattened.
  Result<std::vector<SchemaJson>> expand(const SchemaJson& schema, const std::string& path) {
    return expand(schema, path, 0);
  }

 private:
  Result<SchemaJson> flatten(const SchemaJson& schema, const std::string& path, int depth);
  Result<std::vector<SchemaJson>> expand(const SchemaJson& schema, const std::string& path,
                                         int depth);
  Result<SchemaJson> merge(const SchemaJson& a, const SchemaJson& b, const std::string& path,
                           int depth);
  Result<SchemaJson> merge_plain(const SchemaJson& a, const SchemaJson& b, const std::string& path);

  // Counts flatten and merge steps: $refs followed while merging are inlined, so a chain of allOf
  // lists of references could otherwise take exponential time before any output exists.
  Status take_step(const std::string& path);

  const SchemaJson& root_;
  int max_depth_;
  int64_t n_steps_ = 0;
};

}  // namespace trellis
