// json_schema_to_gbnf: the GBNF it writes is compiled with parse_gbnf() and run with
// grammar_accepts() on texts that must be accepted and near misses that must not. Number ranges
// are checked against arithmetic over a span around their bounds, and random values near a
// schema are checked against a small reference validator of the subset, both ways.
#include "grammar/json_schema_grammar.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/grammar_automaton.h"

namespace trellis {
namespace {

using nlohmann::ordered_json;

struct Compiled {
  std::string gbnf;
  std::shared_ptr<const Grammar> grammar;

  bool accepts(std::string_view text) const { return grammar && grammar_accepts(grammar, text); }
};

Compiled compile_schema(const std::string& schema,
                        JsonWhitespace whitespace = JsonWhitespace::COMPACT) {
  JsonGrammarOptions options;
  options.whitespace = whitespace;
  Result<std::string> gbnf = json_schema_to_gbnf(ordered_json::parse(schema), options);
  EXPECT_TRUE(gbnf.ok()) << schema << ": " << (gbnf.ok() ? "" : gbnf.error().message);
  if (!gbnf.ok()) return {};
  Result<Grammar> grammar = parse_gbnf(*gbnf);
  EXPECT_TRUE(grammar.ok()) << (grammar.ok() ? "" : grammar.error().message) << "\n" << *gbnf;
  if (!grammar.ok()) return {*gbnf, nullptr};
  return {*gbnf, std::make_shared<const Grammar>(std::move(grammar).value())};
}

std::string schema_error(const std::string& schema, const JsonGrammarOptions& options = {}) {
  Result<std::string> gbnf = json_schema_to_gbnf(ordered_json::parse(schema), options);
  EXPECT_FALSE(gbnf.ok()) << schema << " compiled to\n" << (gbnf.ok() ? *gbnf : "");
  return gbnf.ok() ? "" : gbnf.error().message;
}

void expect_accepts(const Compiled& compiled, const std::vector<std::string>& texts) {
  for (const std::string& text : texts)
    EXPECT_TRUE(compiled.accepts(text)) << "should accept " << text << "\n" << compiled.gbnf;
}

void expect_rejects(const Compiled& compiled, const std::vector<std::string>& texts) {
  for (const std::string& text : texts)
    EXPECT_FALSE(compiled.accepts(text)) << "should reject " << text << "\n" << compiled.gbnf;
}

// ---------------------------------------------------------------------------------------------
// A reference validator of the subset (what the grammar must agree with). "integer" means a
// number written without a fraction, as the grammar writes integers.

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

class Validator {
 public:
  explicit Validator(const ordered_json& root) : root_(root) {}

  bool valid(const ordered_json& v, const ordered_json& s) const {
    if (s.is_boolean()) return s.get<bool>();
    if (s.contains("$ref")) {
      const std::string ref = s["$ref"].get<std::string>();
      const ordered_json& target = root_.at(ordered_json::json_pointer(ref.substr(1)));
      if (!valid(v, target)) return false;
    }
    if (s.contains("allOf"))
      for (const ordered_json& part : s["allOf"])
        if (!valid(v, part)) return false;
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      bool any = false;
      for (const ordered_json& part : s[key]) any = any || valid(v, part);
      if (!any) return false;
    }
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
      return false;
    if (s.contains("const") && s["const"] != v) return false;
    if (s.contains("type") && !has_type(v, s["type"])) return false;
    if (v.is_string() && !valid_string(v.get<std::string>(), s)) return false;
    if (v.is_number() && !valid_number(v.get<double>(), s)) return false;
    if (v.is_object() && !valid_object(v, s)) return false;
    if (v.is_array() && !valid_array(v, s)) return false;
    return true;
  }

 private:
  static bool has_type(const ordered_json& v, const ordered_json& type) {
    if (type.is_array()) {
      for (const ordered_json& t : type)
        if (has_type(v, t)) return true;
      return false;
    }
    const std::string t = type.get<std::string>();
    if (t == "integer") return v.is_number_integer();
    if (t == "number") return v.is_number();
    if (t == "string") return v.is_string();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "object") return v.is_object();
    return v.is_array();
  }

  static bool valid_string(const std::string& text, const ordered_json& s) {
    if (s.contains("minLength") && code_points(text) < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && code_points(text) > s["maxLength"].get<size_t>()) return false;
    if (s.contains("pattern") &&
        !std::regex_search(text, std::regex(s["pattern"].get<std::string>())))
      return false;
    return true;
  }

  static bool valid_number(double x, const ordered_json& s) {
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return false;
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return false;
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return false;
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return false;
    return true;
  }

  bool valid_object(const ordered_json& v, const ordered_json& s) const {
    if (s.contains("required"))
      for (const ordered_json& name : s["required"])
        if (!v.contains(name.get<std::string>())) return false;
    for (const auto& [key, value] : v.items()) {
      if (s.contains("properties") && s["properties"].contains(key)) {
        if (!valid(value, s["properties"][key])) return false;
      } else if (s.contains("additionalProperties") && !valid(value, s["additionalProperties"])) {
        return false;
      }
    }
    return true;
  }

  bool valid_array(const ordered_json& v, const ordered_json& s) const {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    const size_t n_prefix = s.contains("prefixItems") ? s["prefixItems"].size() : 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i < n_prefix) {
        if (!valid(v[i], s["prefixItems"][i])) return false;
      } else if (s.contains("items") && !valid(v[i], s["items"])) {
        return false;
      }
    }
    return true;
  }

  const ordered_json& root_;
};

// Random values near a schema: mostly following it, sometimes off by a little (a length, a bound,
// a missing or extra member, a wrong type), in the canonical layout the grammar writes (members
// in schema order, extra members last, compact numbers without exponents).
class NearValues {
 public:
  NearValues(const ordered_json& root, uint32_t seed) : root_(root), rng_(seed) {}

  ordered_json make(const ordered_json& s, int depth = 0) {
    if (chance(0.06) || depth > 6 || s.is_boolean()) return random_scalar();
    if (s.contains("$ref")) {
      const std::string ref = s["$ref"].get<std::string>();
      return make(root_.at(ordered_json::json_pointer(ref.substr(1))), depth + 1);
    }
    for (const char* key : {"anyOf", "oneOf", "allOf"})
      if (s.contains(key)) return make(s[key][rng_() % s[key].size()], depth + 1);
    if (s.contains("enum"))
      return chance(0.9) ? s["enum"][rng_() % s["enum"].size()] : random_scalar();
    if (s.contains("const")) return chance(0.9) ? s["const"] : random_scalar();
    std::string type = "string";
    if (s.contains("type")) {
      const ordered_json& t = s["type"];
      type = t.is_string() ? t.get<std::string>() : t[rng_() % t.size()].get<std::string>();
    } else if (s.contains("properties")) {
      type = "object";
    }
    if (type == "integer") return make_integer(s);
    if (type == "number") return make_number(s);
    if (type == "string") return make_string(s);
    if (type == "boolean") return chance(0.5);
    if (type == "null") return nullptr;
    if (type == "object") return make_object(s, depth);
    return make_array(s, depth);
  }

 private:
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  int64_t between(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  ordered_json random_scalar() {
    switch (rng_() % 5) {
      case 0:
        return nullptr;
      case 1:
        return between(-5, 5);
      case 2:
        return "s";
      case 3:
        return ordered_json::array();
      default:
        return 0.5;
    }
  }

  std::pair<int64_t, int64_t> around_bounds(const ordered_json& s) {
    int64_t lo = -20, hi = 20;
    if (s.contains("minimum")) lo = int64_t(std::floor(s["minimum"].get<double>())) - 2;
    if (s.contains("exclusiveMinimum")) lo = int64_t(s["exclusiveMinimum"].get<double>()) - 2;
    if (s.contains("maximum")) hi = int64_t(std::ceil(s["maximum"].get<double>())) + 2;
    if (s.contains("exclusiveMaximum")) hi = int64_t(s["exclusiveMaximum"].get<double>()) + 2;
    if (lo > hi) std::swap(lo, hi);
    return {lo, hi};
  }

  ordered_json make_integer(const ordered_json& s) {
    auto [lo, hi] = around_bounds(s);
    return between(lo, hi);
  }

  // Quarters, so that the text never needs an exponent and the arithmetic is exact.
  ordered_json make_number(const ordered_json& s) {
    auto [lo, hi] = around_bounds(s);
    const int64_t quarters = between(lo * 4, hi * 4);
    if (quarters % 4 == 0 && chance(0.5)) return quarters / 4;
    if (quarters == 0) return 0;
    return double(quarters) / 4;
  }

  ordered_json make_string(const ordered_json& s) {
    static const std::vector<std::string> pieces = {
        "a", "b", "Z", " ", "\"", "\\", "\n", "\x01", "\xC3\xA9", "\xF0\x9F\x98\x80", "7"};
    const int64_t lo = s.contains("minLength") ? s["minLength"].get<int64_t>() : 0;
    const int64_t hi = s.contains("maxLength") ? s["maxLength"].get<int64_t>() : lo + 6;
    const int64_t length = between(std::max<int64_t>(0, lo - 1), hi + 1);
    std::string text;
    for (int64_t i = 0; i < length; ++i) text += pieces[rng_() % pieces.size()];
    return text;
  }

  ordered_json make_object(const ordered_json& s, int depth) {
    ordered_json out = ordered_json::object();
    std::vector<std::string> required;
    if (s.contains("required")) required = s["required"].get<std::vector<std::string>>();
    if (s.contains("properties")) {
      for (const auto& [key, sub] : s["properties"].items()) {
        const bool is_required = std::find(required.begin(), required.end(), key) != required.end();
        if (chance(is_required ? 0.95 : 0.5)) out[key] = make(sub, depth + 1);
      }
    }
    if (chance(0.25)) out["zz"] = chance(0.5) ? ordered_json(between(0, 3)) : ordered_json("x");
    return out;
  }

  ordered_json make_array(const ordered_json& s, int depth) {
    const int64_t lo = s.contains("minItems") ? s["minItems"].get<int64_t>() : 0;
    const int64_t hi = s.contains("maxItems") ? s["maxItems"].get<int64_t>() : lo + 3;
    const int64_t length = between(std::max<int64_t>(0, lo - 1), std::min<int64_t>(hi + 1, 5));
    const size_t n_prefix = s.contains("prefixItems") ? s["prefixItems"].size() : 0;
    ordered_json out = ordered_json::array();
    for (int64_t i = 0; i < length; ++i) {
      const ordered_json& element_schema = size_t(i) < n_prefix  ? s["prefixItems"][i]
                                           : s.contains("items") ? s["items"]
                                                                 : ordered_json(true);
      out.push_back(make(element_schema, depth + 1));
    }
    return out;
  }

  const ordered_json& root_;
  std::mt19937 rng_;
};

// The grammar and the validator agree on many values near `schema_text`, written compactly (and
// with indentation when `whitespace` is FLEXIBLE).
void expect_agrees_with_validator(const std::string& schema_text,
                                  JsonWhitespace whitespace = JsonWhitespace::COMPACT) {
  const ordered_json schema = ordered_json::parse(schema_text);
  const Compiled compiled = compile_schema(schema_text, whitespace);
  ASSERT_TRUE(compiled.grammar);
  const Validator validator(schema);
  NearValues values(schema, 1234);
  int n_valid = 0, n_invalid = 0;
  for (int i = 0; i < 1500; ++i) {
    const ordered_json value = values.make(schema);
    const bool expected = validator.valid(value, schema);
    (expected ? n_valid : n_invalid)++;
    const std::string text = value.dump();
    ASSERT_EQ(compiled.accepts(text), expected) << "value " << text << "\n" << compiled.gbnf;
    if (whitespace == JsonWhitespace::FLEXIBLE) {
      const std::string indented = value.dump(1);
      ASSERT_EQ(compiled.accepts(indented), expected) << "value " << indented;
    }
  }
  // Both kinds must be well represented, or the comparison says little.
  EXPECT_GT(n_valid, 150);
  EXPECT_GT(n_invalid, 150);
}

// `needle` and `path` both appear in the message.
void expect_error_names(const std::string& schema, const std::string& needle,
                        const std::string& path, const JsonGrammarOptions& options = {}) {
  const std::string message = schema_error(schema, options);
  EXPECT_NE(message.find(needle), std::string::npos) << message;
  EXPECT_NE(message.find(" " + path), std::string::npos) << message;
}

// ---------------------------------------------------------------------------------------------

TEST(JsonSchemaGrammar, ScalarTypes) {
  expect_accepts(compile_schema(R"({"type": "string"})"),
                 {R"("")", R"("abc")", R"("a\"b\\c\n\u00e9\/")", "\"\xC3\xA9\""});
  expect_rejects(compile_schema(R"({"type": "string"})"),
                 {"abc", R"("a)", "\"a\nb\"", R"("\x")", R"("\u12")", "1"});
  expect_accepts(compile_schema(R"({"type": "integer"})"), {"0", "-7", "123456789012"});
  expect_rejects(compile_schema(R"({"type": "integer"})"),
                 {"01", "1.5", "1e3", "-", "+1", "\"1\""});
  expect_accepts(compile_schema(R"({"type": "number"})"), {"0", "-0.5", "1e10", "2.5E-3", "10"});
  expect_rejects(compile_schema(R"({"type": "number"})"), {".5", "1.", "00", "1e", "NaN"});
  expect_accepts(compile_schema(R"({"type": "boolean"})"), {"true", "false"});
  expect_rejects(compile_schema(R"({"type": "boolean"})"), {"null", "True", "1"});
  expect_accepts(compile_schema(R"({"type": "null"})"), {"null"});
  expect_accepts(compile_schema(R"({"type": ["string", "null"]})"), {"null", R"("x")"});
  expect_rejects(compile_schema(R"({"type": ["string", "null"]})"), {"1", "{}"});
}

TEST(JsonSchemaGrammar, AnyValueSchemas) {
  for (const char* schema : {"{}", "true", R"({"description": "anything"})"}) {
    const Compiled compiled = compile_schema(schema);
    expect_accepts(compiled, {"null", "1", R"({"a":[1,{"b":null}]})", R"(["x",true])", R"("s")"});
    expect_rejects(compiled, {"", "{", "[1,]", "nul"});
  }
}

TEST(JsonSchemaGrammar, SurrogatePairsOnlyAsPairs) {
  const Compiled compiled = compile_schema(R"({"type": "string"})");
  expect_accepts(compiled, {R"("\ud83d\ude00")", R"("\uD83D\uDE00x")", R"("\u20ac")"});
  expect_rejects(compiled, {R"("\ud83d")", R"("\ude00")", R"("\ud83dx")"});
}

const char* const kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 8},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "format": "email"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}
  },
  "required": ["name", "age"],
  "additionalProperties": false
})";

TEST(JsonSchemaGrammar, ObjectWithRequiredAndOptionalProperties) {
  const Compiled compiled = compile_schema(kPersonSchema);
  expect_accepts(compiled,
                 {R"({"name":"Al","age":30})", R"({"name":"Al","age":30,"email":"al@example.com"})",
                  R"({"name":"Al","age":30,"tags":["a","b"]})",
                  R"({"name":"Al","age":0,"email":"a.b@x.org","tags":[]})"});
  expect_rejects(compiled, {
                               R"({"name":"Al"})",                               // missing required
                               R"({"age":30})",                                  // missing required
                               R"({"age":30,"name":"Al"})",                      // wrong order
                               R"({"name":"Al","age":30,"extra":1})",            // additional
                               R"({"name":"Al","age":151})",                     // out of range
                               R"({"name":"Al","age":-1})",                      // out of range
                               R"({"name":"","age":3})",                         // too short
                               R"({"name":"Alexander","age":3})",                // too long
                               R"({"name":"Al","age":3,"tags":["a","b","c"]})",  // maxItems
                               R"({"name":"Al","age":3,"email":"nope"})",        // format
                               R"({"name":"Al","age":3,})",                      // trailing comma
                               R"({"name":"Al","age":"3"})",                     // wrong type
                               R"({"name":"Al","age":30,"age":30})",             // repeated
                           });
}

TEST(JsonSchemaGrammar, PropertiesKeepTheSchemaOrder) {
  // ordered_json keeps the written order; nlohmann::json sorts keys, so its order is sorted.
  const Compiled compiled = compile_schema(
      R"({"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"integer"}},
          "required":["z","a"],"additionalProperties":false})");
  expect_accepts(compiled, {R"({"z":1,"a":2})"});
  expect_rejects(compiled, {R"({"a":2,"z":1})"});

  Result<std::string> sorted = json_schema_to_gbnf(
      nlohmann::json::parse(R"({"type":"object","properties":{"z":{"type":"integer"},
                                "a":{"type":"integer"}},"required":["z","a"],
                                "additionalProperties":false})"),
      JsonGrammarOptions{});
  ASSERT_TRUE(sorted.ok()) << sorted.error().message;
  Result<Grammar> grammar = parse_gbnf(*sorted);
  ASSERT_TRUE(grammar.ok()) << grammar.error().message;
  const auto shared = std::make_shared<const Grammar>(std::move(grammar).value());
  EXPECT_TRUE(grammar_accepts(shared, R"({"a":2,"z":1})"));
  EXPECT_FALSE(grammar_accepts(shared, R"({"z":1,"a":2})"));
}

// Every subset of four properties, in order: accepted exactly when it holds the required one.
TEST(JsonSchemaGrammar, OptionalChainsAcceptEverySubsetInOrder) {
  for (int required_index = -1; required_index < 4; ++required_index) {
    ordered_json schema = {{"type", "object"}, {"additionalProperties", false}};
    const std::vector<std::string> names = {"a", "b", "c", "d"};
    for (const std::string& name : names) schema["properties"][name] = {{"type", "integer"}};
    if (required_index >= 0) schema["required"] = {names[required_index]};
    const Compiled compiled = compile_schema(schema.dump());
    for (int mask = 0; mask < 16; ++mask) {
      ordered_json value = ordered_json::object();
      for (int i = 0; i < 4; ++i)
        if (mask & (1 << i)) value[names[i]] = i;
      const bool expected = required_index < 0 || (mask & (1 << required_index));
      EXPECT_EQ(compiled.accepts(value.dump()), expected)
          << value.dump() << " with required " << required_index << "\n"
          << compiled.gbnf;
    }
  }
}

TEST(JsonSchemaGrammar, AdditionalPropertiesFollowTheListedOnesUnderOtherNames) {
  // Absent: any extra member, but never under a listed name (its value would go unchecked).
  const Compiled open =
      compile_schema(R"({"type":"object","properties":{"ab":{"type":"integer"}}})");
  expect_accepts(open, {"{}", R"({"ab":1})", R"({"ab":1,"a":"x"})", R"({"abc":[1]})",
                        R"({"b":null,"":{}})", R"({"a\"b":1})"});
  expect_rejects(open, {R"({"ab":"x"})", R"({"zz":1,"ab":"x"})", R"({"ab":1,"ab":"x"})"});

  const Compiled typed = compile_schema(
      R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],
          "additionalProperties":{"type":"string"}})");
  expect_accepts(typed, {R"({"id":1})", R"({"id":1,"x":"s","y":"t"})"});
  expect_rejects(typed, {R"({"id":1,"x":2})", R"({"x":"s"})", R"({"id":1,"id":"s"})"});

  const Compiled map =
      compile_schema(R"({"type":"object","additionalProperties":{"type":"integer"}})");
  expect_accepts(map, {"{}", R"({"x":1,"y":2})"});
  expect_rejects(map, {R"({"x":"1"})"});

  // A required name that the properties do not list takes the additionalProperties schema.
  const Compiled required_extra = compile_schema(
      R"({"type":"object","required":["k"],"additionalProperties":{"type":"boolean"}})");
  expect_accepts(required_extra, {R"({"k":true})", R"({"k":false,"j":true})"});
  expect_rejects(required_extra, {"{}", R"({"k":1})", R"({"j":true})"});
}

TEST(JsonSchemaGrammar, FlexibleWhitespaceIsBounded) {
  const Compiled compiled = compile_schema(kPersonSchema, JsonWhitespace::FLEXIBLE);
  expect_accepts(compiled, {R"({"name":"Al","age":30})", R"({ "name" : "Al" , "age" : 30 })",
                            "{\n  \"name\": \"Al\",\n  \"age\": 30,\n  \"tags\": [ \"x\" ]\n}",
                            "{\n\n\t\"name\":\"Al\",\"age\":30,\"tags\":[]}",
                            R"({"name":"Al","age":1,"tags":[ ]})"});
  // A space, or one or two newlines and an indent of at most 20: no more.
  expect_rejects(compiled, {" {\"name\":\"Al\",\"age\":30}",  // nothing before the value
                            "{\n" + std::string(21, ' ') + "\"name\":\"Al\",\"age\":30}",
                            "{  \"name\":\"Al\",\"age\":30}", "{\t\"name\":\"Al\",\"age\":30}",
                            "{\n\n\n\"name\":\"Al\",\"age\":30}", R"({"name" :"A l" ,"age":3 0})"});
  const Compiled compact = compile_schema(kPersonSchema);
  expect_rejects(compact, {R"({ "name":"Al","age":30})", R"({"name": "Al","age":30})"});
}

TEST(JsonSchemaGrammar, StringLengthsCountCharacters) {
  const Compiled compiled = compile_schema(R"({"type":"string","minLength":2,"maxLength":3})");
  expect_accepts(compiled, {R"("ab")", R"("abc")", R"("a\nb")", R"("\u0041\"")",
                            "\"\xC3\xA9\xC3\xA9\"", "\"\xF0\x9F\x98\x80x\"", R"("\ud83d\ude00x")"});
  expect_rejects(compiled, {R"("a")", R"("abcd")", R"("\n")", "\"\xC3\xA9\"", R"("")"});
  const Compiled empty_only = compile_schema(R"({"type":"string","maxLength":0})");
  expect_accepts(empty_only, {R"("")"});
  expect_rejects(empty_only, {R"("a")"});
}

// Integers in a range: every value over a span around the bounds, against the arithmetic.
struct IntegerCase {
  const char* bounds;
  std::optional<int64_t> lo, hi;  // the inclusive range the bounds mean
};

TEST(JsonSchemaGrammar, IntegerRangesAreExact) {
  const std::vector<IntegerCase> cases = {
      {R"("minimum":0,"maximum":255)", 0, 255},
      {R"("minimum":-40,"maximum":100)", -40, 100},
      {R"("minimum":17)", 17, std::nullopt},
      {R"("minimum":0)", 0, std::nullopt},
      {R"("minimum":-25)", -25, std::nullopt},
      {R"("maximum":-3)", std::nullopt, -3},
      {R"("maximum":1234)", std::nullopt, 1234},
      {R"("exclusiveMinimum":5,"exclusiveMaximum":10)", 6, 9},
      {R"("minimum":2.5,"maximum":7.5)", 3, 7},
      {R"("exclusiveMinimum":-2.5,"exclusiveMaximum":-0.5)", -2, -1},
      {R"("minimum":100,"maximum":100)", 100, 100},
      {R"("minimum":-1000,"maximum":-7)", -1000, -7},
      {R"("minimum":99,"maximum":1001)", 99, 1001},
      {R"("minimum":123456789,"maximum":123457000)", 123456789, 123457000},
      {R"("minimum":-5,"exclusiveMaximum":0)", -5, -1},
      {R"("minimum":3,"exclusiveMinimum":3)", 4, std::nullopt},
  };
  for (const IntegerCase& c : cases) {
    const Compiled compiled = compile_schema(std::string(R"({"type":"integer",)") + c.bounds + "}");
    ASSERT_TRUE(compiled.grammar) << c.bounds;
    std::vector<int64_t> values;
    for (std::optional<int64_t> bound : {c.lo, c.hi})
      if (bound)
        for (int64_t v = *bound - 1100; v <= *bound + 1100; ++v) values.push_back(v);
    for (int64_t big : {int64_t{0}, int64_t{1000000}, int64_t{-1000000}, int64_t{99999999999},
                        int64_t{-99999999999}})
      values.push_back(big);
    for (int64_t v : values) {
      const bool expected = (!c.lo || v >= *c.lo) && (!c.hi || v <= *c.hi);
      ASSERT_EQ(compiled.accepts(std::to_string(v)), expected) << v << " with " << c.bounds << "\n"
                                                               << compiled.gbnf;
    }
    expect_rejects(compiled, {"007", "-0" + std::to_string(c.lo.value_or(5)), "1.0", "+1"});
  }
}

// Numbers in a range: quarters over a span around the bounds, in several spellings.
TEST(JsonSchemaGrammar, NumberRangesAreExact) {
  struct Case {
    const char* bounds;
    double lo;
    bool lo_exclusive;
    double hi;
    bool hi_exclusive;
  };
  const double inf = INFINITY;
  const std::vector<Case> cases = {
      {R"("minimum":0,"maximum":1)", 0, false, 1, false},
      {R"("exclusiveMinimum":0,"maximum":10)", 0, true, 10, false},
      {R"("minimum":-2,"maximum":3)", -2, false, 3, false},
      {R"("minimum":-1)", -1, false, inf, false},
      {R"("exclusiveMaximum":2)", -inf, false, 2, true},
      {R"("exclusiveMinimum":-3,"exclusiveMaximum":-1)", -3, true, -1, true},
      {R"("minimum":0,"exclusiveMaximum":1.0e0,"maximum":5)", 0, false, 1, true},
      {R"("minimum":4,"maximum":4)", 4, false, 4, false},
      {R"("minimum":-1,"maximum":0)", -1, false, 0, false},
  };
  for (const Case& c : cases) {
    const Compiled compiled = compile_schema(std::string(R"({"type":"number",)") + c.bounds + "}");
    ASSERT_TRUE(compiled.grammar) << c.bounds;
    for (int quarters = -28; quarters <= 28; ++quarters) {
      const double v = quarters / 4.0;
      const bool expected =
          (c.lo_exclusive ? v > c.lo : v >= c.lo) && (c.hi_exclusive ? v < c.hi : v <= c.hi);
      std::vector<std::string> spellings;
      char text[32];
      std::snprintf(text, sizeof text, "%.2f", v);
      spellings.push_back(text);
      std::snprintf(text, sizeof text, "%.5f", v);
      spellings.push_back(text);
      if (quarters % 4 == 0) spellings.push_back(std::to_string(quarters / 4));
      for (const std::string& spelling : spellings) {
        if (spelling == "-0.00" || spelling == "-0.00000") continue;  // -0 is 0; spelled below
        ASSERT_EQ(compiled.accepts(spelling), expected) << spelling << " with " << c.bounds << "\n"
                                                        << compiled.gbnf;
      }
    }
    expect_rejects(compiled, {"1e0", "00.5", ".5", "1."});
  }
}

TEST(JsonSchemaGrammar, DateTimeFormats) {
  const Compiled date = compile_schema(R"({"type":"string","format":"date"})");
  expect_accepts(date, {R"("2024-02-29")", R"("2023-02-28")", R"("2000-02-29")", R"("2024-12-31")",
                        R"("2024-04-30")", R"("0001-01-01")"});
  expect_rejects(date, {R"("2023-02-29")", R"("1900-02-29")", R"("2024-13-01")", R"("2024-00-10")",
                        R"("2024-04-31")", R"("2024-1-01")", R"("2024-01-00")", R"("2024-01-32")",
                        "2024-01-01"});
  const Compiled time = compile_schema(R"({"type":"string","format":"time"})");
  expect_accepts(time, {R"("12:34:56Z")", R"("23:59:59.123+05:30")", R"("00:00:00-12:00")"});
  expect_rejects(time, {R"("24:00:00Z")", R"("12:60:00Z")", R"("12:34:56")", R"("12:34Z")",
                        R"("12:34:56+5:30")"});
  const Compiled date_time = compile_schema(R"({"type":"string","format":"date-time"})");
  expect_accepts(date_time, {R"("2024-01-15T10:00:00Z")", R"("2024-02-29T23:59:59.5+01:00")"});
  expect_rejects(date_time, {R"("2024-01-15 10:00:00Z")", R"("2024-01-15T10:00:00")"});
}

TEST(JsonSchemaGrammar, UuidAndEmailFormats) {
  const Compiled uuid = compile_schema(R"({"type":"string","format":"uuid"})");
  expect_accepts(uuid, {R"("123e4567-e89b-12d3-a456-426614174000")",
                        R"("ABCDEF00-0000-0000-0000-000000000000")"});
  expect_rejects(
      uuid, {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400")",
             R"("g23e4567-e89b-12d3-a456-426614174000")"});
  const Compiled email = compile_schema(R"({"type":"string","format":"email"})");
  expect_accepts(email,
                 {R"("a@example.com")", R"("first.last+tag@mail.example.co")", R"("x_y@a-b.io")"});
  expect_rejects(email, {R"("a@b")", R"("@x.com")", R"("a..b@x.com")", R"("a@-x.com")",
                         R"("a b@x.com")", R"("a@x..com")", R"("a@x.com-")"});
}

TEST(JsonSchemaGrammar, PatternMatchesTheDecodedStringWithSearchSemantics) {
  const Compiled anchored = compile_schema(R"({"type":"string","pattern":"^[a-z]+\\d{2}$"})");
  expect_accepts(anchored, {R"("abc12")", R"("z00")"});
  expect_rejects(anchored, {R"("abc1")", R"("ABC12")", R"("abc123")", R"("12")"});
  const Compiled unanchored = compile_schema(R"({"type":"string","pattern":"ab"})");
  expect_accepts(unanchored, {R"("ab")", R"("xxabyy")", R"("\nab\"")"});
  expect_rejects(unanchored, {R"("a")", R"("xxa b")", R"("")"});
  const Compiled quote = compile_schema(R"({"type":"string","pattern":"^a\"b\\\\$"})");
  expect_accepts(quote, {R"("a\"b\\")"});
  expect_rejects(quote, {R"("a"b\")", R"("ab")"});
  const Compiled dot = compile_schema(R"({"type":"string","pattern":"^a.b$"})");
  expect_accepts(dot, {R"("a\tb")", R"("a\"b")",
                       "\"a\xC3\xA9"
                       "b\""});
  expect_rejects(dot, {R"("a\nb")", R"("ab")"});
}

TEST(JsonSchemaGrammar, Arrays) {
  const Compiled bounded =
      compile_schema(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})");
  expect_accepts(bounded, {"[1,2]", "[1,2,3]"});
  expect_rejects(bounded, {"[1]", "[1,2,3,4]", "[]", R"([1,"a"])", "[1,,2]"});

  const Compiled tuple = compile_schema(
      R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})");
  expect_accepts(tuple, {"[]", R"(["a"])", R"(["a",1])"});
  expect_rejects(tuple, {R"(["a",1,2])", "[1]", R"([1,"a"])"});

  const Compiled open_tuple = compile_schema(
      R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"minItems":1,
          "items":{"type":"null"}})");
  expect_accepts(open_tuple, {R"(["a"])", R"(["a",1])", R"(["a",1,null,null])"});
  expect_rejects(open_tuple, {"[]", R"(["a",null])", R"(["a",1,2])"});

  // Draft-7 tuples: a list-valued `items`.
  const Compiled draft7 = compile_schema(R"({"type":"array","items":[{"type":"boolean"}],
                                             "minItems":1})");
  expect_accepts(draft7, {"[true]", R"([false,"anything"])"});
  expect_rejects(draft7, {"[]", "[1]"});
}

TEST(JsonSchemaGrammar, EnumAndConst) {
  const Compiled colors = compile_schema(R"({"enum":["red","green",1,null,{"a":[1,2]},"q\"t"]})");
  expect_accepts(colors, {R"("red")", R"("green")", "1", "null", R"({"a":[1,2]})", R"("q\"t")"});
  expect_rejects(colors, {R"("blue")", "2", R"({"a":[1]})", R"("Red")"});
  const Compiled typed = compile_schema(R"({"type":"string","enum":["a",1]})");
  expect_accepts(typed, {R"("a")"});
  expect_rejects(typed, {"1"});
  const Compiled constant = compile_schema(R"({"const":"fixed"})");
  expect_accepts(constant, {R"("fixed")"});
  expect_rejects(constant, {R"("fixed ")"});
}

TEST(JsonSchemaGrammar, AnyOfAndOneOf) {
  const Compiled any = compile_schema(
      R"({"anyOf":[{"type":"string","maxLength":2},{"type":"integer","minimum":0}]})");
  expect_accepts(any, {R"("ab")", "5", "0"});
  expect_rejects(any, {R"("abc")", "-1", "null"});
  // Sibling keywords apply to every branch.
  const Compiled siblings = compile_schema(
      R"({"type":"object","properties":{"kind":{"type":"string"}},"required":["kind"],
          "oneOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},
                   {"properties":{"b":{"type":"boolean"}},"required":["b"]}]})");
  expect_accepts(siblings, {R"({"kind":"x","a":1})", R"({"kind":"x","b":true})"});
  expect_rejects(siblings, {R"({"kind":"x"})", R"({"a":1})", R"({"kind":"x","a":true})"});
  // additionalProperties false beside the branches forbids what only the branches list (JSON
  // Schema's semantics): no value satisfies that.
  expect_error_names(
      R"({"type":"object","properties":{"kind":{"type":"string"}},"additionalProperties":false,
          "anyOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]}]})",
      "required property 'a' at # cannot be satisfied", "#");
}

TEST(JsonSchemaGrammar, AllOfMergesObjectsAndBounds) {
  const Compiled merged = compile_schema(
      R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                   {"properties":{"b":{"type":"string"}},"required":["b"]}]})");
  expect_accepts(merged, {R"({"a":1,"b":"x"})", R"({"a":1,"b":"x","c":null})"});
  expect_rejects(merged, {R"({"a":1})", R"({"b":"x"})", R"({"a":"1","b":"x"})"});

  // additionalProperties of one side constrains the properties only the other side lists.
  const Compiled closed = compile_schema(
      R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},
                    "additionalProperties":false},
                   {"properties":{"b":{"type":"string"}}}]})");
  expect_accepts(closed, {"{}", R"({"a":1})"});
  expect_rejects(closed, {R"({"a":1,"b":"x"})", R"({"b":"x"})"});

  const Compiled bounds = compile_schema(
      R"({"allOf":[{"type":"integer","minimum":0},{"maximum":9},{"type":["integer","string"]}]})");
  expect_accepts(bounds, {"0", "9"});
  expect_rejects(bounds, {"-1", "10", R"("s")"});

  const Compiled single = compile_schema(R"({"allOf":[{"type":"boolean"}]})");
  expect_accepts(single, {"true"});
  expect_rejects(single, {"1"});
}

TEST(JsonSchemaGrammar, RefWithSiblingKeywords) {
  const Compiled compiled = compile_schema(
      R"({"$defs":{"count":{"type":"integer","minimum":0}},"$ref":"#/$defs/count","maximum":5})");
  expect_accepts(compiled, {"0", "5"});
  expect_rejects(compiled, {"-1", "6"});
}

const char* const kTreeSchema = R"({
  "$defs": {
    "node": {
      "type": "object",
      "properties": {
        "value": {"type": "integer"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}
      },
      "required": ["value", "children"],
      "additionalProperties": false
    }
  },
  "$ref": "#/$defs/node"
})";

TEST(JsonSchemaGrammar, RecursiveRefs) {
  const Compiled tree = compile_schema(kTreeSchema);
  expect_accepts(
      tree,
      {R"({"value":1,"children":[]})",
       R"({"value":1,"children":[{"value":2,"children":[]},{"value":3,"children":[{"value":4,"children":[]}]}]})"});
  expect_rejects(tree, {R"({"value":1})", R"({"value":1,"children":[{"value":2}]})",
                        R"({"value":1,"children":[{"value":2,"children":[{"children":[]}]}]})",
                        R"({"value":1,"children":[1]})"});

  const Compiled linked = compile_schema(
      R"({"type":"object","properties":{"next":{"$ref":"#"}},"additionalProperties":false})");
  expect_accepts(linked, {"{}", R"({"next":{}})", R"({"next":{"next":{"next":{}}}})"});
  expect_rejects(linked, {R"({"next":1})", R"({"next":{"other":{}}})"});

  const Compiled definitions = compile_schema(
      R"({"definitions":{"a b":{"type":"string"},"x/y":{"type":"integer"}},"type":"array",
          "prefixItems":[{"$ref":"#/definitions/a%20b"},{"$ref":"#/definitions/x~1y"}]})");
  expect_accepts(definitions, {R"(["s",1])"});
  expect_rejects(definitions, {R"([1,1])", R"(["s","t"])"});
}

// Random values near each schema: the grammar accepts exactly those the validator accepts.
TEST(JsonSchemaGrammar, AgreesWithAReferenceValidator) {
  // The person without its email format (the validator does not check formats).
  ordered_json person = ordered_json::parse(kPersonSchema);
  person["properties"]["email"].erase("format");
  expect_agrees_with_validator(person.dump());
  expect_agrees_with_validator(person.dump(), JsonWhitespace::FLEXIBLE);
  expect_agrees_with_validator(kTreeSchema);
  expect_agrees_with_validator(R"({
    "type": "object",
    "properties": {
      "id": {"type": "integer", "minimum": -3, "exclusiveMaximum": 12},
      "score": {"type": "number", "minimum": -1, "maximum": 2},
      "kind": {"enum": ["a", "b", 3]},
      "note": {"type": ["string", "null"], "maxLength": 2},
      "pair": {"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "string"}],
               "items": false, "minItems": 1}
    },
    "required": ["kind"],
    "additionalProperties": {"type": "integer", "maximum": 2}
  })");
  expect_agrees_with_validator(R"({
    "anyOf": [
      {"type": "object", "properties": {"a": {"type": "string", "minLength": 2}},
       "required": ["a"], "additionalProperties": false},
      {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 2, "maxItems": 4},
      {"type": "string", "pattern": "^x+$"}
    ]
  })");
}

// ---------------------------------------------------------------------------------------------
// Errors name the keyword and the path.

TEST(JsonSchemaGrammar, RefusesUnsupportedKeywordsByNameAndPath) {
  EXPECT_EQ(schema_error(R"({"type":"object","properties":{"user":{"type":"object",
                            "minProperties":1}}})"),
            "unsupported JSON Schema keyword 'minProperties' at #/properties/user");
  EXPECT_EQ(schema_error(R"({"type":"array","items":{"uniqueItems":true}})"),
            "unsupported JSON Schema keyword 'uniqueItems' at #/items");
  EXPECT_EQ(schema_error(R"({"$defs":{"a/b":{"patternProperties":{}}},"$ref":"#/$defs/a~1b"})"),
            "unsupported JSON Schema keyword 'patternProperties' at #/$defs/a~1b");
  EXPECT_EQ(schema_error(R"({"anyOf":[{"type":"string"},{"not":{}}]})"),
            "unsupported JSON Schema keyword 'not' at #/anyOf/1");
  EXPECT_EQ(schema_error(R"({"type":"string","format":"ipv4"})"),
            "unsupported JSON Schema format 'ipv4' at #");
}

TEST(JsonSchemaGrammar, RefusesMalformedValuesByNameAndPath) {
  EXPECT_EQ(schema_error(R"({"properties":{"name":{"type":"string","minLength":-1}}})"),
            "'minLength' at #/properties/name must be a non-negative integer");
  EXPECT_EQ(schema_error(R"({"type":"strng"})"),
            "'type' at # must be a type name or a list of type names");
  EXPECT_EQ(schema_error(R"({"type":"object","required":"a"})"),
            "'required' at # must be a list of property names");
  EXPECT_EQ(schema_error(R"({"anyOf":[]})"), "'anyOf' at # must be a non-empty list of schemas");
  EXPECT_EQ(schema_error(R"({"maximum":"3"})"), "'maximum' at # must be a number");
  EXPECT_EQ(schema_error(R"({"items":{"maxItems":1.5}})"),
            "'maxItems' at #/items must be a non-negative integer");
  EXPECT_EQ(schema_error(R"({"type":"array","items":[1]})"),
            "'items' at # must be a schema or a list of schemas");
  EXPECT_EQ(schema_error("3"), "the schema at # must be an object or a boolean");
}

TEST(JsonSchemaGrammar, RefusesUnsatisfiableSchemas) {
  expect_error_names(R"({"properties":{"n":{"type":"integer","minimum":5,"maximum":3}},
                        "required":["n"],"type":"object"})",
                     "no value satisfies the bounds ('minimum', 'maximum'", "#/properties/n");
  expect_error_names(R"({"type":"integer","exclusiveMinimum":3,"exclusiveMaximum":4})",
                     "no value satisfies the bounds", "#");
  expect_error_names(R"({"type":"object","properties":{"c":{"enum":[]}},"required":["c"]})",
                     "no value satisfies 'enum'", "#/properties/c");
  expect_error_names(R"({"type":"array","minItems":3,"maxItems":2})",
                     "no array satisfies 'minItems' 3", "#");
  expect_error_names(R"({"type":"array","prefixItems":[{"type":"null"}],"items":false,
                        "minItems":2})",
                     "no array satisfies 'minItems' 2", "#");
  expect_error_names(R"({"type":"string","minLength":4,"maxLength":2})",
                     "no string satisfies 'minLength' 4 and 'maxLength' 2", "#");
  expect_error_names("false", "no value satisfies the schema", "#");
  // A branch is named by its own keyword (it was "#/anyOf/0" for a oneOf).
  expect_error_names(R"({"oneOf":[false,false]})", "no value satisfies the schema", "#/oneOf/0");
  expect_error_names(R"({"allOf":[{"type":"string"},{"type":"integer"}]})",
                     "no value satisfies the schema", "#");
  expect_error_names(R"({"type":"object","properties":{"a":false},"required":["a"]})",
                     "required property 'a'", "#");
  expect_error_names(R"({"type":"object","required":["k"],"additionalProperties":false})",
                     "required property 'k' at # is not allowed by 'additionalProperties'", "#");
  // Unsatisfiable parts that may be left out are left out.
  const Compiled partial = compile_schema(
      R"({"type":"object","properties":{"a":false,"b":{"type":"integer"}},
          "additionalProperties":false})");
  expect_accepts(partial, {"{}", R"({"b":1})"});
  expect_rejects(partial, {R"({"a":1})", R"({"a":1,"b":1})"});
  const Compiled nullable =
      compile_schema(R"({"type":["integer","null"],"minimum":5,"maximum":3})");
  expect_accepts(nullable, {"null"});
  expect_rejects(nullable, {"4"});
}

TEST(JsonSchemaGrammar, RefusesFormsItCannotMakeExact) {
  expect_error_names(R"({"type":"number","minimum":0.5})", "non-integer 'minimum' (0.5)", "#");
  expect_error_names(R"({"type":"integer","maximum":1e30})", "'maximum' at # is outside", "#");
  expect_error_names(R"({"properties":{"s":{"type":"string","pattern":"a","maxLength":3}}})",
                     "'pattern' together with 'maxLength'", "#/properties/s");
  expect_error_names(R"({"type":"string","format":"date","minLength":3})",
                     "'format' together with 'minLength'", "#");
  expect_error_names(R"({"enum":["a","bb"],"maxLength":1})", "'enum' together with 'maxLength'",
                     "#");
  expect_error_names(R"({"allOf":[{"pattern":"a"},{"pattern":"b"}]})",
                     "combines two different 'pattern' values", "#");
  expect_error_names(R"j({"type":"string","pattern":"(?=a)"})j",
                     "regex: unsupported construct 'lookahead (?=' at offset 0", "#");
}

TEST(JsonSchemaGrammar, RefusesUnresolvableRefs) {
  expect_error_names(R"({"properties":{"a":{"$ref":"#/$defs/missing"}}})",
                     "unresolvable '$ref' '#/$defs/missing'", "#/properties/a");
  expect_error_names(R"({"$ref":"other.json#/x"})", "'$ref' 'other.json#/x'", "#");
  expect_error_names(R"({"$ref":"#anchor"})", "'$ref' '#anchor'", "#");
  // A $ref cycle with nothing in between is nesting without end.
  expect_error_names(R"({"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"}],"type":"string"}},
                        "$ref":"#/$defs/a"})",
                     "nested deeper than", "#/$defs/a");
}

// A $id below the root starts a new base URI: "#" inside it is that subschema, not the root.
// Before, such $refs resolved against the root, so the grammar accepted
// {"n":{"next":{"n":{}}}}, which Ajv rejects (next must be the "n" schema, which allows no "n").
TEST(JsonSchemaGrammar, RefusesRefsUnderANestedId) {
  expect_error_names(R"({"type":"object","required":["n"],"properties":{"n":{
                        "$id":"http://example.com/n.json","type":"object",
                        "additionalProperties":false,"properties":{"v":{"type":"integer"},
                        "next":{"$ref":"#"}}}}})",
                     "unsupported '$ref' '#' at #/properties/n/properties/next: it is inside the "
                     "schema at #/properties/n, whose '$id' changes the base URI",
                     "#/properties/n");
  expect_error_names(R"({"$defs":{"a":{"$id":"a.json","items":{"$ref":"#/$defs/b"}}},
                        "$ref":"#/$defs/a"})",
                     "'$ref' '#/$defs/b' at #/$defs/a/items", "#/$defs/a,");
  // A $id at the root, a plain-name fragment $id, and $id-like data are no base change.
  const Compiled compiled = compile_schema(
      R"({"$id":"http://example.com/root.json","$defs":{"i":{"type":"integer"}},"type":"object",
          "properties":{"a":{"$id":"#frag","items":{"$ref":"#/$defs/i"}},
                        "$id":{"$ref":"#/$defs/i"},"e":{"enum":[{"$id":"x.json","$ref":"#"}]}},
          "examples":[{"$id":"y","$ref":"#"}]})");
  expect_accepts(compiled, {R"({"a":[1],"$id":2,"e":{"$id":"x.json","$ref":"#"}})"});
  expect_rejects(compiled, {R"({"a":["x"]})", R"({"$id":"x"})"});
}

TEST(JsonSchemaGrammar, RefusesPastTheLimitsQuickly) {
  // Nesting: 1000 levels are refused at the limit, not walked. (The server refuses bodies nested
  // past 64 levels before parsing them; deeper documents than this overflow the JSON library's
  // own recursive copies under AddressSanitizer's larger frames.)
  std::string deep;
  for (int i = 0; i < 1000; ++i) deep += R"({"type":"array","items":)";
  deep += "{}";
  for (int i = 0; i < 1000; ++i) deep += "}";
  JsonGrammarOptions options;
  const std::string message = schema_error(deep, options);
  EXPECT_NE(message.find("nests deeper than 64 levels"), std::string::npos) << message;

  expect_error_names(
      R"({"type":"object","properties":{"s":{"type":"string","maxLength":100000000}}})",
      "'maxLength' 100000000", "#/properties/s");
  expect_error_names(R"({"type":"array","minItems":5000000})", "'minItems' 5000000", "#");

  // allOf lists of references that double at each level: refused on the work budget.
  ordered_json doubling = {{"$ref", "#/$defs/a0"}};
  for (int i = 0; i < 24; ++i) {
    const std::string next = "#/$defs/a" + std::to_string(i + 1);
    doubling["$defs"]["a" + std::to_string(i)] = {{"allOf", {{{"$ref", next}}, {{"$ref", next}}}}};
  }
  doubling["$defs"]["a24"] = {{"type", "integer"}};
  EXPECT_NE(schema_error(doubling.dump()).find("takes more than 100000 steps"), std::string::npos);

  // The text budget is checked while building: a wide schema fails on it.
  options.limits.max_gbnf_bytes = 4096;
  ordered_json wide = {{"type", "object"}};
  for (int i = 0; i < 2000; ++i)
    wide["properties"]["p" + std::to_string(i)] = {{"type", "object"},
                                                   {"properties", {{"x", {{"type", "integer"}}}}}};
  EXPECT_NE(schema_error(wide.dump(), options).find("exceeds 4096 bytes"), std::string::npos);
}

TEST(JsonSchemaGrammar, DraftFourExclusiveBounds) {
  const Compiled compiled = compile_schema(
      R"({"type":"integer","minimum":1,"exclusiveMinimum":true,"maximum":4,"exclusiveMaximum":false})");
  expect_accepts(compiled, {"2", "4"});
  expect_rejects(compiled, {"1", "5"});
}

TEST(JsonObjectGrammar, AcceptsAnyObject) {
  for (JsonWhitespace whitespace : {JsonWhitespace::COMPACT, JsonWhitespace::FLEXIBLE}) {
    JsonGrammarOptions options;
    options.whitespace = whitespace;
    Result<Grammar> grammar = parse_gbnf(json_object_gbnf(options));
    ASSERT_TRUE(grammar.ok()) << grammar.error().message;
    const auto shared = std::make_shared<const Grammar>(std::move(grammar).value());
    for (const char* text : {"{}", R"({"a":[1,{"b":null}],"c":"\u00e9"})", R"({"":-1.5e3})"})
      EXPECT_TRUE(grammar_accepts(shared, text)) << text;
    for (const char* text : {"[]", R"("x")", "{", R"({"a"})", R"({a:1})"})
      EXPECT_FALSE(grammar_accepts(shared, text)) << text;
    EXPECT_EQ(grammar_accepts(shared, R"({ "a" : 1 })"), whitespace == JsonWhitespace::FLEXIBLE);
  }
}

}  // namespace
}  // namespace trellis
