// The JSON Schema -> GBNF compiler behind json_schema_to_gbnf(): walks the schema, one grammar
// expression per (sub)schema, named rules for objects, arrays, alternatives and $ref targets.
#pragma once

#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "grammar/json_schema_grammar.h"
#include "grammar/json_schema_keywords.h"
#include "grammar/json_schema_merge.h"
#include "grammar/json_value_rules.h"

namespace trellis {

// What a (sub)schema compiles to: a GBNF expression without a top-level '|' (safe to place in a
// sequence), or, when no JSON value satisfies the schema, the reason. An unsatisfiable schema is
// not an error where the value may be left out (an optional property, an anyOf branch, one type
// of a type list); elsewhere it becomes one.
struct SchemaPiece {
  std::string gbnf;
  std::string unsatisfiable;

  bool ok() const { return unsatisfiable.empty(); }
};

class JsonSchemaCompiler {
 public:
  JsonSchemaCompiler(const SchemaJson& root, const JsonGrammarOptions& options);

  // The whole grammar text, `root` first.
  Result<std::string> compile();

 private:
  using Piece = SchemaPiece;

  Result<Piece> visit(const SchemaJson& schema, const std::string& path, int depth);
  // A schema without $ref, allOf, anyOf or oneOf at its top.
  Result<Piece> visit_plain(const SchemaJson& schema, const std::string& path, int depth);
  Result<Piece> ref_piece(const std::string& ref, const std::string& path);
  Result<Piece> enum_piece(const SchemaJson& schema, const std::string& path);
  Result<Piece> type_piece(const std::string& type, const SchemaJson& schema,
                           const std::string& path, int depth);
  Result<Piece> string_piece(const SchemaJson& schema, const std::string& path);
  Result<Piece> number_piece(const SchemaJson& schema, const std::string& path, bool integer);
  Result<Piece> object_piece(const SchemaJson& schema, const std::string& path, int depth);
  Result<Piece> array_piece(const SchemaJson& schema, const std::string& path, int depth);

  // One "key": value member of an object, key included.
  std::string member(const std::string& key_gbnf, const std::string& value_gbnf) const;
  // The member for a listed property `key` (its name as a literal).
  std::string listed_member(const std::string& key, const std::string& value_gbnf) const;
  struct Member {
    std::string gbnf;
    bool required = false;
  };
  // What goes between the braces of an object with `members` in order and, when `extra` is not
  // empty, more members of that form after them. Whether it may be empty comes back in
  // `optional`.
  Result<std::string> object_body(const std::string& rule, const std::vector<Member>& members,
                                  const std::string& extra, bool& optional);
  // open, inner (in `( )?` when optional), close, with the whitespace style's separators.
  std::string bracketed(const char* open, const std::string& inner, bool optional,
                        const char* close);

  // Output.
  std::string unique_name(const std::string& path_or_base, bool is_path);
  Status add_rule(const std::string& name, const std::string& body);
  std::string use_shared(const std::string& name);
  Result<std::string> use_format(const std::string& format, const std::string& path);
  Result<std::string> use_pattern(const std::string& pattern, const std::string& path);
  Status check_count(const char* keyword, int64_t count, const std::string& path) const;

  const SchemaJson& root_;
  JsonGrammarOptions options_;
  SchemaMerger merger_;
  const char* w_;    // between structural tokens: " ws " or " "
  std::string sep_;  // between members and elements: w_ "," w_

  std::vector<std::pair<std::string, std::string>> rules_;  // (name, body); name "" = raw text
  std::set<std::string> names_;
  int64_t n_bytes_ = 0;
  std::map<std::string, JsonValueRule> shared_rules_;
  std::set<std::string> shared_used_;
  std::set<std::string> formats_used_;
  std::map<std::string, std::string> pattern_rules_;  // pattern -> rule name
  std::map<std::string, std::string> ref_rules_;      // target path -> rule name
  struct PendingRef {
    const SchemaJson* schema;
    std::string path;
    std::string rule;
  };
  std::deque<PendingRef> pending_refs_;
};

}  // namespace trellis
