#include "bench/structured_schemas.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "grammar/gbnf.h"
#include "grammar/json_schema_grammar.h"

namespace trellis::bench {

namespace structured_schema_detail {
namespace {

// A person: bounded strings (so that even a model of random weights finishes the object in about
// a hundred tokens), an integer range, an optional email by pattern, a nested object with a
// pattern, an array of bounded strings. Properties in the order a model would write them.
constexpr const char* kPerson = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 24},
    "age": {"type": "integer", "minimum": 0, "maximum": 130},
    "email": {"type": "string", "pattern": "^[a-z0-9._]{1,16}@[a-z0-9]{1,12}\\.(com|org|net)$"},
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string", "maxLength": 32},
        "city": {"type": "string", "maxLength": 24},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
        "country": {"type": "string", "minLength": 2, "maxLength": 2}
      },
      "required": ["street", "city", "zip"],
      "additionalProperties": false
    },
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 4}
  },
  "required": ["name", "age", "address", "tags"],
  "additionalProperties": false
})";

// An order line: mostly enums and numeric ranges (the grammars that branch on every digit).
constexpr const char* kOrder = R"({
  "type": "object",
  "properties": {
    "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
    "category": {"enum": ["electronics", "books", "clothing", "home", "garden", "toys",
                         "sports", "grocery", "automotive", "health"]},
    "status": {"enum": ["pending", "paid", "shipped", "delivered", "returned", "cancelled"]},
    "priority": {"enum": [1, 2, 3, "urgent", null]},
    "quantity": {"type": "integer", "minimum": 1, "maximum": 999},
    "unit_price": {"type": "number", "minimum": 0, "maximum": 100000},
    "discount_percent": {"type": "integer", "minimum": 0, "maximum": 90},
    "rating": {"type": "integer", "minimum": 1, "maximum": 5},
    "temperature_c": {"type": "integer", "minimum": -40, "maximum": 85},
    "gift": {"type": "boolean"},
    "shipping": {
      "type": "object",
      "properties": {
        "method": {"enum": ["ground", "air", "sea", "pickup"]},
        "weight_grams": {"type": "integer", "minimum": 1, "maximum": 50000},
        "zone": {"type": "integer", "minimum": 1, "maximum": 12}
      },
      "required": ["method", "weight_grams"],
      "additionalProperties": false
    }
  },
  "required": ["sku", "category", "status", "quantity", "unit_price", "rating", "shipping"],
  "additionalProperties": false
})";

// A recursive tree: each node's children are nodes again ($ref into $defs).
constexpr const char* kTree = R"({
  "$defs": {
    "node": {
      "type": "object",
      "properties": {
        "name": {"type": "string", "maxLength": 24},
        "weight": {"type": "integer", "minimum": 0, "maximum": 1000},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 4}
      },
      "required": ["name", "children"],
      "additionalProperties": false
    }
  },
  "$ref": "#/$defs/node"
})";

std::vector<NamedSchema> make_schemas() {
  return {{"person", nlohmann::ordered_json::parse(kPerson)},
          {"order", nlohmann::ordered_json::parse(kOrder)},
          {"tree", nlohmann::ordered_json::parse(kTree)}};
}

// The suite files below `dir`, in path order.
std::vector<std::filesystem::path> suite_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().extension() == ".json") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace
}  // namespace structured_schema_detail

const std::vector<NamedSchema>& structured_bench_schemas() {
  static const std::vector<NamedSchema> schemas = structured_schema_detail::make_schemas();
  return schemas;
}

const NamedSchema& person_schema() {
  return structured_bench_schemas()[0];
}

Result<std::vector<NamedSchema>> load_schema_suite(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Error{dir + ": not a folder"};
  std::vector<NamedSchema> schemas;
  for (const fs::path& file : structured_schema_detail::suite_files(dir)) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::ordered_json groups =
        nlohmann::ordered_json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (!groups.is_array()) return Error{file.string() + ": not a JSON array of test groups"};
    const std::string name = fs::relative(file, dir, ec).string();
    for (size_t i = 0; i < groups.size(); ++i) {
      if (!groups[i].is_object() || !groups[i].contains("schema")) {
        return Error{file.string() + ": group " + std::to_string(i) + " has no \"schema\""};
      }
      schemas.push_back({name + "#" + std::to_string(i), groups[i]["schema"]});
    }
  }
  return schemas;
}

Result<Grammar> compile_json_schema(const nlohmann::ordered_json& schema) {
  const JsonGrammarOptions options;
  Result<std::string> gbnf = json_schema_to_gbnf(schema, options);
  if (!gbnf.ok()) return gbnf.error();
  return parse_gbnf(*gbnf, options.limits);
}

}  // namespace trellis::bench
