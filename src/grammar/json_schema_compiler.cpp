#include "grammar/json_schema_compiler.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "grammar/gbnf_text.h"
#include "grammar/json_formats.h"
#include "grammar/json_key_exclusion.h"
#include "grammar/json_number_range.h"
#include "grammar/regex_compiler.h"
#include "grammar/regex_grammar.h"

namespace trellis {

namespace json_schema_compiler_impl {
namespace {

constexpr const char* kTypes[] = {"null", "boolean", "object", "array", "string", "number"};
constexpr size_t kMaxNameLength = 48;
const std::string kQuote = "\"\\\"\"";  // the GBNF literal of one double quote

SchemaPiece unsatisfiable(std::string why) {
  return SchemaPiece{"", std::move(why)};
}

// A schema every value satisfies: true, or an object of annotations only (an unknown keyword makes
// it something to visit, so that it is refused there).
bool is_true_schema(const SchemaJson& s) {
  if (s.is_boolean()) return s.get<bool>();
  if (!s.is_object()) return false;
  for (const auto& [key, value] : s.items())
    if (!is_annotation_keyword(key) && key != "$defs" && key != "definitions") return false;
  return true;
}
bool is_false_schema(const SchemaJson& s) {
  return s.is_boolean() && !s.get<bool>();
}

bool has_combinators(const SchemaJson& s) {
  return s.contains("$ref") || s.contains("allOf") || s.contains("anyOf") || s.contains("oneOf");
}

// A rule name from a schema path: the pointer's tokens without the structural ones, e.g.
// #/properties/user/properties/tags/items -> user-tags-items. Only [a-zA-Z0-9-], never "--"
// (the compiler's fixed names use "--" to stay clear of these).
std::string name_from_path(const std::string& path) {
  std::string name;
  size_t pos = 0;
  while (pos != std::string::npos && pos < path.size()) {
    const size_t slash = path.find('/', pos);
    const std::string token = path.substr(pos, slash == std::string::npos ? slash : slash - pos);
    pos = slash == std::string::npos ? slash : slash + 1;
    if (token == "#" || token == "properties" || token == "$defs" || token == "definitions")
      continue;
    if (!name.empty()) name += '-';
    name += token;
  }
  return name;
}

std::string sanitize_name(const std::string& text) {
  std::string name;
  for (char c : text) {
    const bool keep =
        std::isalnum(static_cast<unsigned char>(c)) && static_cast<unsigned char>(c) < 0x80;
    if (keep) {
      name += c;
    } else if (!name.empty() && name.back() != '-') {
      name += '-';
    }
    if (name.size() >= kMaxNameLength) break;
  }
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name.empty() ? "schema" : name;
}

// The GBNF suffix for repeating min..max times (max < 0: unbounded); "" for exactly once.
std::string repeat_suffix(int64_t min, int64_t max) {
  if (min == 1 && max == 1) return "";
  if (min == 0 && max == 1) return "?";
  if (min == 0 && max < 0) return "*";
  if (min == 1 && max < 0) return "+";
  if (min == max) return "{" + std::to_string(min) + "}";
  return "{" + std::to_string(min) + "," + (max < 0 ? "" : std::to_string(max)) + "}";
}

std::vector<std::string> schema_types(const SchemaJson& s) {
  std::vector<std::string> types;
  if (!s.contains("type")) return std::vector<std::string>(std::begin(kTypes), std::end(kTypes));
  const SchemaJson& type = s["type"];
  if (type.is_string()) return {type.get<std::string>()};
  for (const SchemaJson& t : type) types.push_back(t.get<std::string>());
  // "number" covers "integer".
  if (std::find(types.begin(), types.end(), "number") != types.end())
    std::erase(types, std::string("integer"));
  std::sort(types.begin(), types.end());
  types.erase(std::unique(types.begin(), types.end()), types.end());
  return types;
}

bool value_has_type(const SchemaJson& v, const std::string& type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer")
    return v.is_number_integer() ||
           (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
  return false;
}

// A numeric bound of a schema, read exactly when it is an integer.
struct BoundValue {
  int64_t floor = 0;  // the largest integer <= the bound
  bool integral = true;
  std::string text;  // as written, for messages
};

Result<std::optional<BoundValue>> read_bound(const SchemaJson& s, const char* key,
                                             const std::string& path) {
  if (!s.contains(key)) return std::optional<BoundValue>();
  const SchemaJson& v = s[key];
  const Error out_of_range{"'" + std::string(key) + "' at " + path +
                           " is outside the supported range of -1e18 to 1e18"};
  BoundValue bound;
  bound.text = compact_json(v);
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > uint64_t(kMaxNumberBound)) return out_of_range;
    bound.floor = static_cast<int64_t>(v.get<uint64_t>());
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i > kMaxNumberBound || i < -kMaxNumberBound) return out_of_range;
    bound.floor = i;
  } else {
    const double d = v.get<double>();
    if (!(std::fabs(d) <= double(kMaxNumberBound))) return out_of_range;
    bound.floor = static_cast<int64_t>(std::floor(d));
    bound.integral = std::floor(d) == d;
  }
  return std::optional<BoundValue>(bound);
}

}  // namespace
}  // namespace json_schema_compiler_impl

using namespace json_schema_compiler_impl;

JsonSchemaCompiler::JsonSchemaCompiler(const SchemaJson& root, const JsonGrammarOptions& options)
    : root_(root),
      options_(options),
      merger_(root, options.limits.max_schema_depth),
      w_(json_ws_separator(options.whitespace)) {
  sep_ = std::string(w_) + "\",\"" + w_;
  for (JsonValueRule& rule : json_value_rules(options.whitespace)) {
    names_.insert(rule.name);
    shared_rules_.emplace(rule.name, std::move(rule));
  }
  for (const std::string& name : json_format_rule_names()) names_.insert(name);
  names_.insert("root");
  ref_rules_["#"] = "root";
}

Result<std::string> JsonSchemaCompiler::compile() {
  TRELLIS_TRY(check_ref_bases(root_));
  Piece root;
  TRELLIS_ASSIGN(root, visit(root_, "#", 0));
  if (!root.ok()) return Error{root.unsatisfiable};
  // $ref targets compile here, one after another, each at depth 0: a chain of references is not
  // nesting, and the C++ stack stays as deep as one schema's nesting.
  while (!pending_refs_.empty()) {
    const PendingRef ref = std::move(pending_refs_.front());
    pending_refs_.pop_front();
    Piece target;
    TRELLIS_ASSIGN(target, visit(*ref.schema, ref.path, 0));
    if (!target.ok())
      return Error{"no value satisfies the schema at " + ref.path +
                   ", which a '$ref' names: " + target.unsatisfiable};
    TRELLIS_TRY(add_rule(ref.rule, target.gbnf));
  }
  std::string text = "root ::= " + root.gbnf + "\n";
  for (const auto& [name, body] : rules_)
    text += name.empty() ? body : name + " ::= " + body + "\n";
  if (static_cast<int64_t>(text.size()) > options_.limits.max_gbnf_bytes)
    return Error{"the grammar for the schema exceeds " +
                 std::to_string(options_.limits.max_gbnf_bytes) + " bytes (max_gbnf_bytes)"};
  return text;
}

Result<SchemaPiece> JsonSchemaCompiler::visit(const SchemaJson& schema, const std::string& path,
                                              int depth) {
  if (depth > options_.limits.max_schema_depth)
    return Error{"the schema nests deeper than " +
                 std::to_string(options_.limits.max_schema_depth) + " levels at " + path};
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return Piece{use_shared("json-value"), ""};
    return unsatisfiable("no value satisfies the schema at " + path + ": it is false");
  }
  if (!schema.is_object())
    return Error{"the schema at " + path + " must be an object or a boolean"};
  TRELLIS_TRY(check_schema_keywords(schema, path));
  if (schema.contains("$ref") && !has_constraints_besides(schema, {"$ref"}))
    return ref_piece(schema["$ref"].get<std::string>(), path);
  if (!has_combinators(schema)) return visit_plain(schema, path, depth);

  SchemaJson flat;
  std::vector<SchemaJson> branches;
  TRELLIS_ASSIGN(flat, merger_.flatten(schema, path));
  TRELLIS_ASSIGN(branches, merger_.expand(flat, path));
  std::vector<std::string> alternatives;
  std::string why;
  // Branch paths name the schema's own keyword; the index is exact when no sibling keyword was
  // merged into the branches (merging drops the branches no value satisfies).
  const char* branch_key =
      flat.is_object() && flat.contains("oneOf") && !flat.contains("anyOf") ? "oneOf" : "anyOf";
  for (size_t i = 0; i < branches.size(); ++i) {
    const std::string branch_path =
        branches.size() == 1 ? path : child_path(child_path(path, branch_key), std::to_string(i));
    Piece piece;
    TRELLIS_ASSIGN(piece, visit(branches[i], branch_path, depth + 1));
    if (piece.ok()) {
      alternatives.push_back(piece.gbnf);
    } else if (why.empty()) {
      why = piece.unsatisfiable;
    }
  }
  if (alternatives.empty())
    return unsatisfiable(why.empty() ? "no value satisfies the schema at " + path : why);
  if (alternatives.size() == 1) return Piece{alternatives[0], ""};
  const std::string name = unique_name(path, true);
  std::string body;
  for (const std::string& alternative : alternatives)
    body += (body.empty() ? "" : " | ") + alternative;
  TRELLIS_TRY(add_rule(name, body));
  return Piece{name, ""};
}

Result<SchemaPiece> JsonSchemaCompiler::visit_plain(const SchemaJson& schema,
                                                    const std::string& path, int depth) {
  SchemaJson s;
  TRELLIS_ASSIGN(s, normalize_schema(schema, path));
  if (s.contains("enum") || s.contains("const")) return enum_piece(s, path);
  if (!has_constraints_besides(s, {})) return Piece{use_shared("json-value"), ""};
  std::vector<std::string> alternatives;
  std::string why;
  for (const std::string& type : schema_types(s)) {
    Piece piece;
    TRELLIS_ASSIGN(piece, type_piece(type, s, path, depth));
    if (piece.ok()) {
      alternatives.push_back(piece.gbnf);
    } else if (why.empty()) {
      why = piece.unsatisfiable;
    }
  }
  if (alternatives.empty()) return unsatisfiable(why);
  return Piece{gbnf_alternation(alternatives), ""};
}

Result<SchemaPiece> JsonSchemaCompiler::type_piece(const std::string& type,
                                                   const SchemaJson& schema,
                                                   const std::string& path, int depth) {
  if (type == "null") return Piece{"\"null\"", ""};
  if (type == "boolean") return Piece{"( \"true\" | \"false\" )", ""};
  if (type == "string") return string_piece(schema, path);
  if (type == "integer" || type == "number") return number_piece(schema, path, type == "integer");
  if (type == "object") return object_piece(schema, path, depth);
  return array_piece(schema, path, depth);
}

Result<SchemaPiece> JsonSchemaCompiler::ref_piece(const std::string& ref, const std::string& path) {
  ResolvedRef target;
  TRELLIS_ASSIGN(target, resolve_schema_ref(root_, ref, path));
  auto [it, added] = ref_rules_.try_emplace(target.path, "");
  if (added) {
    it->second = unique_name(target.path, true);
    pending_refs_.push_back({target.schema, target.path, it->second});
  }
  return Piece{it->second, ""};
}

Result<SchemaPiece> JsonSchemaCompiler::enum_piece(const SchemaJson& s, const std::string& path) {
  const char* keyword = s.contains("enum") ? "enum" : "const";
  for (const auto& [key, value] : s.items()) {
    if (is_constraining_keyword(key) && key != "type" && key != "enum" && key != "const")
      return Error{"'" + std::string(keyword) + "' together with '" + key + "' at " + path +
                   " is not supported"};
  }
  std::vector<SchemaJson> values;
  if (s.contains("enum")) values.assign(s["enum"].begin(), s["enum"].end());
  if (s.contains("const")) {
    const bool listed =
        !s.contains("enum") || std::find(values.begin(), values.end(), s["const"]) != values.end();
    values = listed ? std::vector<SchemaJson>{s["const"]} : std::vector<SchemaJson>{};
  }
  if (s.contains("type")) {
    const std::vector<std::string> types = schema_types(s);
    std::erase_if(values, [&](const SchemaJson& v) {
      return std::none_of(types.begin(), types.end(),
                          [&](const std::string& t) { return value_has_type(v, t); });
    });
  }
  std::vector<std::string> literals;
  for (const SchemaJson& value : values) {
    std::string literal = gbnf_literal(compact_json(value));
    if (std::find(literals.begin(), literals.end(), literal) == literals.end())
      literals.push_back(std::move(literal));
  }
  if (literals.empty())
    return unsatisfiable("no value satisfies '" + std::string(keyword) + "' at " + path);
  return Piece{gbnf_alternation(literals), ""};
}

Result<SchemaPiece> JsonSchemaCompiler::string_piece(const SchemaJson& s, const std::string& path) {
  const bool has_lengths = s.contains("minLength") || s.contains("maxLength");
  const char* length_keyword = s.contains("minLength") ? "minLength" : "maxLength";
  if (s.contains("format")) {
    if (s.contains("pattern"))
      return Error{"'format' together with 'pattern' at " + path + " is not supported"};
    if (has_lengths)
      return Error{"'format' together with '" + std::string(length_keyword) + "' at " + path +
                   " is not supported"};
    std::string rule;
    TRELLIS_ASSIGN(rule, use_format(s["format"].get<std::string>(), path));
    return Piece{kQuote + " " + rule + " " + kQuote, ""};
  }
  if (s.contains("pattern")) {
    if (has_lengths)
      return Error{"'pattern' together with '" + std::string(length_keyword) + "' at " + path +
                   " is not supported"};
    std::string rule;
    TRELLIS_ASSIGN(rule, use_pattern(s["pattern"].get<std::string>(), path));
    return Piece{kQuote + " " + rule + " " + kQuote, ""};
  }
  const int64_t min = s.contains("minLength") ? count_keyword(s, "minLength") : 0;
  const int64_t max = s.contains("maxLength") ? count_keyword(s, "maxLength") : -1;
  if (max >= 0 && max < min)
    return unsatisfiable("no string satisfies 'minLength' " + std::to_string(min) +
                         " and 'maxLength' " + std::to_string(max) + " at " + path);
  TRELLIS_TRY(check_count("minLength", min, path));
  TRELLIS_TRY(check_count("maxLength", max, path));
  if (max == 0) return Piece{"\"\\\"\\\"\"", ""};
  return Piece{kQuote + " " + use_shared("json-char") + repeat_suffix(min, max) + " " + kQuote, ""};
}

Result<SchemaPiece> JsonSchemaCompiler::number_piece(const SchemaJson& s, const std::string& path,
                                                     bool integer) {
  std::optional<BoundValue> minimum, maximum, exclusive_minimum, exclusive_maximum;
  TRELLIS_ASSIGN(minimum, read_bound(s, "minimum", path));
  TRELLIS_ASSIGN(maximum, read_bound(s, "maximum", path));
  TRELLIS_ASSIGN(exclusive_minimum, read_bound(s, "exclusiveMinimum", path));
  TRELLIS_ASSIGN(exclusive_maximum, read_bound(s, "exclusiveMaximum", path));
  if (!minimum && !maximum && !exclusive_minimum && !exclusive_maximum)
    return Piece{use_shared(integer ? "json-integer" : "json-number"), ""};
  const std::string empty_range =
      "no value satisfies the bounds ('minimum', 'maximum' and "
      "their exclusive forms) at " +
      path + ": the range holds no " + (integer ? "integer" : "number");
  if (integer) {
    // The integers >= a bound b are those >= ceil(b); > b: >= floor(b) + 1.
    std::optional<int64_t> lo, hi;
    auto raise = [&](int64_t v) { lo = lo ? std::max(*lo, v) : v; };
    auto lower = [&](int64_t v) { hi = hi ? std::min(*hi, v) : v; };
    if (minimum) raise(minimum->integral ? minimum->floor : minimum->floor + 1);
    if (exclusive_minimum) raise(exclusive_minimum->floor + 1);
    if (maximum) lower(maximum->floor);
    if (exclusive_maximum)
      lower(exclusive_maximum->integral ? exclusive_maximum->floor - 1 : exclusive_maximum->floor);
    std::string text = integer_range_gbnf(lo, hi);
    if (text.empty()) return unsatisfiable(empty_range);
    return Piece{text, ""};
  }
  for (const auto& [bound, keyword] :
       {std::pair{&minimum, "minimum"}, std::pair{&maximum, "maximum"},
        std::pair{&exclusive_minimum, "exclusiveMinimum"},
        std::pair{&exclusive_maximum, "exclusiveMaximum"}}) {
    if (*bound && !(*bound)->integral)
      return Error{"a non-integer '" + std::string(keyword) + "' (" + (*bound)->text +
                   ") for a number at " + path + " is not supported"};
  }
  // Of an inclusive and an exclusive bound, the stricter (the exclusive one on a tie).
  auto stricter = [](std::optional<BoundValue> inclusive, std::optional<BoundValue> exclusive,
                     bool lower) -> std::optional<NumberBound> {
    if (!inclusive && !exclusive) return std::nullopt;
    if (!inclusive) return NumberBound{exclusive->floor, true};
    if (!exclusive) return NumberBound{inclusive->floor, false};
    const bool exclusive_wins =
        lower ? exclusive->floor >= inclusive->floor : exclusive->floor <= inclusive->floor;
    return exclusive_wins ? NumberBound{exclusive->floor, true}
                          : NumberBound{inclusive->floor, false};
  };
  std::string text = number_range_gbnf(stricter(minimum, exclusive_minimum, true),
                                       stricter(maximum, exclusive_maximum, false));
  if (text.empty()) return unsatisfiable(empty_range);
  return Piece{text, ""};
}

Result<SchemaPiece> JsonSchemaCompiler::object_piece(const SchemaJson& s, const std::string& path,
                                                     int depth) {
  const SchemaJson no_properties = SchemaJson::object();
  const SchemaJson& properties = s.contains("properties") ? s["properties"] : no_properties;
  std::vector<std::string> required;
  if (s.contains("required"))
    for (const SchemaJson& name : s["required"])
      if (std::find(required.begin(), required.end(), name) == required.end())
        required.push_back(name.get<std::string>());
  const SchemaJson extra_schema =
      s.contains("additionalProperties") ? s["additionalProperties"] : SchemaJson(true);
  if (properties.empty() && required.empty() && is_true_schema(extra_schema))
    return Piece{use_shared("json-object"), ""};

  auto is_required = [&](const std::string& key) {
    return std::find(required.begin(), required.end(), key) != required.end();
  };
  std::vector<Member> members;
  std::vector<std::string> listed;  // every name an extra member must not take
  for (const auto& [key, schema] : properties.items()) {
    listed.push_back(key);
    Piece value;
    TRELLIS_ASSIGN(value,
                   visit(schema, child_path(child_path(path, "properties"), key), depth + 1));
    if (!value.ok()) {
      if (!is_required(key)) continue;  // an optional property no value fits is left out
      return unsatisfiable("required property '" + key + "' at " + path +
                           " cannot be satisfied: " + value.unsatisfiable);
    }
    members.push_back({listed_member(key, value.gbnf), is_required(key)});
  }
  Piece extra;
  if (is_false_schema(extra_schema)) {
    extra = unsatisfiable("'additionalProperties' is false");
  } else {
    TRELLIS_ASSIGN(extra, visit(extra_schema, child_path(path, "additionalProperties"), depth + 1));
  }
  // Required names the properties do not list take the additionalProperties schema.
  for (const std::string& key : required) {
    if (properties.contains(key)) continue;
    listed.push_back(key);
    if (!extra.ok())
      return unsatisfiable("required property '" + key + "' at " + path +
                           " is not allowed by 'additionalProperties'");
    members.push_back({listed_member(key, extra.gbnf), true});
  }
  const std::string name = unique_name(path, true);
  std::string extra_member;
  if (extra.ok()) {
    std::string key = use_shared("json-string");
    if (!listed.empty()) {
      const auto rules = json_key_exclusion_rules(
          listed, [&] { return unique_name(name + "-key", false); }, use_shared("json-char"));
      for (const auto& [rule, body] : rules) TRELLIS_TRY(add_rule(rule, body));
      key = kQuote + " " + rules.front().first + " " + kQuote;
    }
    extra_member = member(key, extra.gbnf);
  }
  bool optional = false;
  std::string inner;
  TRELLIS_ASSIGN(inner, object_body(name, members, extra_member, optional));
  TRELLIS_TRY(add_rule(name, bracketed("{", inner, optional, "}")));
  return Piece{name, ""};
}

std::string JsonSchemaCompiler::member(const std::string& key_gbnf,
                                       const std::string& value_gbnf) const {
  return key_gbnf + w_ + "\":\"" + w_ + value_gbnf;
}

std::string JsonSchemaCompiler::listed_member(const std::string& key,
                                              const std::string& value_gbnf) const {
  if (options_.whitespace == JsonWhitespace::COMPACT)
    return gbnf_literal(compact_json(key) + ":") + " " + value_gbnf;
  return member(gbnf_literal(compact_json(key)), value_gbnf);
}

// Members in order, required ones always and optional ones maybe, written so that every text has
// one parse (the "chain" form). With r the first required member, the object opens with one of
// members 0..r (those before r being optional, each may be the first present one); after the
// first present member j, each later member k comes as `sep member_k` (optional: in `( )?`),
// then `( sep extra )*`. The tail after member j is a rule tail-j+1 ::= step_j+1 tail-j+2, so the
// text stays linear in the number of members.
Result<std::string> JsonSchemaCompiler::object_body(const std::string& rule,
                                                    const std::vector<Member>& members,
                                                    const std::string& extra, bool& optional) {
  const size_t n = members.size();
  size_t first_required = n;
  for (size_t i = 0; i < n && first_required == n; ++i)
    if (members[i].required) first_required = i;
  optional = first_required == n;
  const std::string extras = extra.empty() ? "" : "(" + sep_ + extra + " )*";
  std::vector<std::string> alternatives;
  if (n > 0) {
    const size_t heads = std::min(first_required + 1, n);  // members that may come first
    auto step = [&](size_t k) {
      return members[k].required ? sep_ + members[k].gbnf : "(" + sep_ + members[k].gbnf + " )?";
    };
    // tail[k]: what may follow once member k-1 is present, for k in 1..heads.
    std::vector<std::string> tail(heads + 1);
    std::string rest;
    for (size_t k = heads; k < n; ++k) rest += step(k) + " ";
    rest += extras;
    tail[heads] = rest;
    if (heads > 1 && !rest.empty()) {
      const std::string name = unique_name(rule + "-tail", false);
      TRELLIS_TRY(add_rule(name, rest));
      tail[heads] = name;
    }
    for (size_t k = heads - 1; k >= 1; --k) {
      const std::string name = unique_name(rule + "-tail", false);
      TRELLIS_TRY(add_rule(name, step(k) + " " + tail[k + 1]));
      tail[k] = name;
    }
    for (size_t j = 0; j < heads; ++j) alternatives.push_back(members[j].gbnf + " " + tail[j + 1]);
  }
  if (optional && !extra.empty()) alternatives.push_back(extra + " " + extras);
  if (alternatives.empty()) return std::string();
  std::string inner;
  for (const std::string& alternative : alternatives)
    inner += (inner.empty() ? "" : " | ") + alternative;
  return alternatives.size() == 1 ? inner : "( " + inner + " )";
}

std::string JsonSchemaCompiler::bracketed(const char* open, const std::string& inner, bool optional,
                                          const char* close) {
  const bool flexible = options_.whitespace == JsonWhitespace::FLEXIBLE;
  if (flexible) use_shared("ws");  // the separators inside use it too
  std::string text = std::string("\"") + open + "\"" + (flexible ? " ws " : " ");
  if (!inner.empty()) {
    const std::string body = inner + (flexible ? " ws" : "");
    text += optional ? "( " + body + " )? " : body + " ";
  }
  return text + "\"" + close + "\"";
}

Result<SchemaPiece> JsonSchemaCompiler::array_piece(const SchemaJson& s, const std::string& path,
                                                    int depth) {
  const SchemaJson no_prefix = SchemaJson::array();
  const SchemaJson& prefix = s.contains("prefixItems") ? s["prefixItems"] : no_prefix;
  const SchemaJson items = s.contains("items") ? s["items"] : SchemaJson(true);
  const int64_t min = s.contains("minItems") ? count_keyword(s, "minItems") : 0;
  int64_t max = s.contains("maxItems") ? count_keyword(s, "maxItems") : -1;
  if (prefix.empty() && is_true_schema(items) && min == 0 && max < 0)
    return Piece{use_shared("json-array"), ""};

  // Positions whose schema no value fits end the array before them.
  std::vector<std::string> elements;
  for (size_t i = 0; i < prefix.size() && (max < 0 || int64_t(i) < max); ++i) {
    Piece element;
    TRELLIS_ASSIGN(element,
                   visit(prefix[i], child_path(child_path(path, "prefixItems"), std::to_string(i)),
                         depth + 1));
    if (!element.ok()) {
      max = int64_t(i);
      break;
    }
    elements.push_back(element.gbnf);
  }
  const int64_t p = static_cast<int64_t>(elements.size());
  Piece item = unsatisfiable("'items' is false");
  if (max < 0 || max > p) {
    if (!is_false_schema(items))
      TRELLIS_ASSIGN(item, visit(items, child_path(path, "items"), depth + 1));
    if (!item.ok()) max = p;
  }
  if (max >= 0 && max < min)
    return unsatisfiable("no array satisfies 'minItems' " + std::to_string(min) + " at " + path +
                         " (at most " + std::to_string(max) + " items are possible)");
  TRELLIS_TRY(check_count("minItems", min, path));
  TRELLIS_TRY(check_count("maxItems", max, path));

  // After the prefix: (sep item){min-p, max-p}.
  std::string rest;
  if (item.ok() && (max < 0 || max > p)) {
    const int64_t more_min = std::max<int64_t>(0, min - p);
    const int64_t more_max = max < 0 ? -1 : max - p;
    if (p == 0) {
      rest = item.gbnf;
      if (more_max != 1)
        rest += " (" + sep_ + item.gbnf + " )" +
                repeat_suffix(std::max<int64_t>(0, more_min - 1), more_max < 0 ? -1 : more_max - 1);
    } else {
      rest = "(" + sep_ + item.gbnf + " )" + repeat_suffix(more_min, more_max);
    }
  }
  // The prefix, each position after the first behind a separator and optional past minItems.
  for (int64_t i = p - 1; i >= 1; --i) {
    rest = sep_ + elements[i] + " " + rest;
    if (i >= min) rest = "(" + rest + " )?";
  }
  if (p > 0) rest = elements[0] + " " + rest;
  const std::string name = unique_name(path, true);
  TRELLIS_TRY(add_rule(name, bracketed("[", rest, min == 0, "]")));
  return Piece{name, ""};
}

std::string JsonSchemaCompiler::unique_name(const std::string& path_or_base, bool is_path) {
  const std::string base = sanitize_name(is_path ? name_from_path(path_or_base) : path_or_base);
  std::string name = base;
  for (int i = 2; names_.count(name); ++i) name = base + "-" + std::to_string(i);
  names_.insert(name);
  return name;
}

Status JsonSchemaCompiler::add_rule(const std::string& name, const std::string& body) {
  n_bytes_ += static_cast<int64_t>(name.size() + body.size() + 6);
  if (n_bytes_ > options_.limits.max_gbnf_bytes)
    return Error{"the grammar for the schema exceeds " +
                 std::to_string(options_.limits.max_gbnf_bytes) + " bytes (max_gbnf_bytes)"};
  rules_.emplace_back(name, body);
  return {};
}

std::string JsonSchemaCompiler::use_shared(const std::string& name) {
  if (!shared_used_.insert(name).second) return name;
  const JsonValueRule& rule = shared_rules_.at(name);
  rules_.emplace_back(rule.name, rule.body);
  n_bytes_ += static_cast<int64_t>(rule.name.size() + rule.body.size() + 6);
  for (const std::string& used : rule.uses) use_shared(used);
  return name;
}

Result<std::string> JsonSchemaCompiler::use_format(const std::string& format,
                                                   const std::string& path) {
  const auto rules = json_format_rules(format);
  if (!rules) return Error{"unsupported JSON Schema format '" + format + "' at " + path};
  for (const auto& [name, body] : *rules)
    if (formats_used_.insert(name).second) TRELLIS_TRY(add_rule(name, body));
  return format_rule_name(format);
}

Result<std::string> JsonSchemaCompiler::use_pattern(const std::string& pattern,
                                                    const std::string& path) {
  auto it = pattern_rules_.find(pattern);
  if (it != pattern_rules_.end()) return it->second;
  // "--" keeps these names and their helpers apart from every name unique_name() hands out.
  const std::string name = "pattern--" + std::to_string(pattern_rules_.size() + 1);
  Result<std::string> text =
      compile_regex(pattern, name, RegexTarget::JSON_STRING, RegexMatch::SEARCH, options_.limits);
  if (!text) return Error{"'pattern' at " + path + ": " + text.error().message};
  TRELLIS_TRY(add_rule("", *text));
  pattern_rules_.emplace(pattern, name);
  return name;
}

Status JsonSchemaCompiler::check_count(const char* keyword, int64_t count,
                                       const std::string& path) const {
  if (count <= options_.limits.max_elements) return {};
  return Error{"'" + std::string(keyword) + "' " + std::to_string(count) + " at " + path +
               " exceeds the grammar limits (max_elements " +
               std::to_string(options_.limits.max_elements) + ")"};
}

}  // namespace trellis
