#include "grammar/json_schema_merge.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace trellis {

namespace json_schema_merge_impl {
namespace {

// More alternatives than this from merging anyOf branches pairwise are refused: the product of
// several anyOf lists grows exponentially.
constexpr size_t kMaxAlternatives = 256;
// Flatten and merge steps allowed for one schema (far beyond what real schemas take).
constexpr int64_t kMaxSteps = 100000;

bool is_object_keyword(std::string_view key) {
  return key == "properties" || key == "additionalProperties" || key == "required";
}
bool is_array_keyword(std::string_view key) {
  return key == "prefixItems" || key == "items";
}
bool is_lower_bound(std::string_view key) {
  return key == "minLength" || key == "minItems" || key == "minimum" || key == "exclusiveMinimum";
}
bool is_upper_bound(std::string_view key) {
  return key == "maxLength" || key == "maxItems" || key == "maximum" || key == "exclusiveMaximum";
}

// Every value satisfies `s`: true, or only annotations (an unknown keyword is not "true": the
// schema must reach a keyword check).
bool is_true(const SchemaJson& s) {
  if (s.is_boolean()) return s.get<bool>();
  if (!s.is_object()) return false;
  for (const auto& [key, value] : s.items())
    if (!is_annotation_keyword(key) && key != "$defs" && key != "definitions") return false;
  return true;
}
bool is_false(const SchemaJson& s) {
  return s.is_boolean() && !s.get<bool>();
}
bool has_alternatives(const SchemaJson& s) {
  return s.is_object() && (s.contains("anyOf") || s.contains("oneOf"));
}

// The schema that requires all of `parts`.
SchemaJson all_of(const std::vector<SchemaJson>& parts) {
  std::vector<SchemaJson> kept;
  for (const SchemaJson& part : parts) {
    if (is_false(part)) return false;
    if (!is_true(part)) kept.push_back(part);
  }
  if (kept.empty()) return true;
  if (kept.size() == 1) return kept[0];
  return SchemaJson{{"allOf", kept}};
}

std::vector<std::string> type_names(const SchemaJson& type) {
  std::vector<std::string> names;
  if (type.is_string()) {
    names.push_back(type.get<std::string>());
  } else {
    for (const SchemaJson& t : type) names.push_back(t.get<std::string>());
  }
  return names;
}

// The types both allow (an integer is a number); null when none.
SchemaJson intersect_types(const SchemaJson& a, const SchemaJson& b) {
  std::vector<std::string> both;
  for (const std::string& x : type_names(a)) {
    for (const std::string& y : type_names(b)) {
      std::string common;
      if (x == y) {
        common = x;
      } else if ((x == "integer" && y == "number") || (x == "number" && y == "integer")) {
        common = "integer";
      }
      if (!common.empty() && std::find(both.begin(), both.end(), common) == both.end())
        both.push_back(common);
    }
  }
  if (both.empty()) return nullptr;
  if (both.size() == 1) return both[0];
  return both;
}

// The values `s` allows by enum and const together, or nothing when it has neither.
std::optional<std::vector<SchemaJson>> allowed_values(const SchemaJson& s) {
  std::optional<std::vector<SchemaJson>> values;
  if (s.contains("enum")) values = std::vector<SchemaJson>(s["enum"].begin(), s["enum"].end());
  if (s.contains("const")) {
    const SchemaJson& c = s["const"];
    if (!values) {
      values = std::vector<SchemaJson>{c};
    } else {
      const bool listed = std::find(values->begin(), values->end(), c) != values->end();
      values = listed ? std::vector<SchemaJson>{c} : std::vector<SchemaJson>{};
    }
  }
  return values;
}

// What side `s` says about property `key`: its schema, or its additionalProperties when it does
// not list the key (nothing when that is absent or true).
void add_property_part(const SchemaJson& s, const std::string& key,
                       std::vector<SchemaJson>& parts) {
  if (s.contains("properties") && s["properties"].contains(key)) {
    parts.push_back(s["properties"][key]);
  } else if (s.contains("additionalProperties")) {
    parts.push_back(s["additionalProperties"]);
  }
}

void merge_object_keywords(const SchemaJson& a, const SchemaJson& b, SchemaJson& out) {
  SchemaJson properties = SchemaJson::object();
  for (const SchemaJson* side : {&a, &b}) {
    if (!side->contains("properties")) continue;
    for (const auto& [key, schema] : (*side)["properties"].items()) {
      if (properties.contains(key)) continue;
      std::vector<SchemaJson> parts;
      add_property_part(a, key, parts);
      add_property_part(b, key, parts);
      properties[key] = all_of(parts);
    }
  }
  if (!properties.empty()) out["properties"] = properties;
  SchemaJson required = SchemaJson::array();
  for (const SchemaJson* side : {&a, &b}) {
    if (!side->contains("required")) continue;
    for (const SchemaJson& name : (*side)["required"])
      if (std::find(required.begin(), required.end(), name) == required.end())
        required.push_back(name);
  }
  if (!required.empty()) out["required"] = required;
  std::vector<SchemaJson> extra;
  for (const SchemaJson* side : {&a, &b})
    if (side->contains("additionalProperties")) extra.push_back((*side)["additionalProperties"]);
  if (!extra.empty()) out["additionalProperties"] = all_of(extra);
}

// The schema of array position i on one side.
SchemaJson position_schema(const SchemaJson& s, size_t i) {
  if (s.contains("prefixItems") && i < s["prefixItems"].size()) return s["prefixItems"][i];
  if (s.contains("items")) return s["items"];
  return true;
}

void merge_array_keywords(const SchemaJson& a, const SchemaJson& b, SchemaJson& out) {
  const size_t n = std::max(a.contains("prefixItems") ? a["prefixItems"].size() : 0,
                            b.contains("prefixItems") ? b["prefixItems"].size() : 0);
  SchemaJson prefix = SchemaJson::array();
  for (size_t i = 0; i < n; ++i)
    prefix.push_back(all_of({position_schema(a, i), position_schema(b, i)}));
  if (n > 0) out["prefixItems"] = prefix;
  std::vector<SchemaJson> items;
  for (const SchemaJson* side : {&a, &b})
    if (side->contains("items")) items.push_back((*side)["items"]);
  if (!items.empty()) out["items"] = all_of(items);
}

bool number_less(const SchemaJson& x, const SchemaJson& y) {
  return x.get<double>() < y.get<double>();
}

}  // namespace
}  // namespace json_schema_merge_impl

Result<ResolvedRef> resolve_schema_ref(const SchemaJson& root, const std::string& ref,
                                       const std::string& at) {
  const std::string where = "'$ref' '" + ref + "' at " + at;
  if (ref.empty() || ref[0] != '#')
    return Error{"unresolvable " + where +
                 ": only references within the schema ('#...') are "
                 "supported"};
  // Percent-decoding first (a URI fragment), then the JSON pointer's own ~1 and ~0 escapes.
  std::string fragment;
  for (size_t i = 1; i < ref.size(); ++i) {
    auto hex = [](char c) {
      return std::isxdigit(static_cast<unsigned char>(c))
                 ? (std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c | 0x20) - 'a' + 10)
                 : -1;
    };
    if (ref[i] == '%' && i + 2 < ref.size() && hex(ref[i + 1]) >= 0 && hex(ref[i + 2]) >= 0) {
      fragment += static_cast<char>(hex(ref[i + 1]) * 16 + hex(ref[i + 2]));
      i += 2;
    } else {
      fragment += ref[i];
    }
  }
  if (!fragment.empty() && fragment[0] != '/')
    return Error{"unsupported " + where + ": anchors are not supported, only JSON pointers"};
  const SchemaJson* node = &root;
  std::string path = "#";
  size_t pos = fragment.empty() ? std::string::npos : 1;
  while (pos != std::string::npos) {
    const size_t slash = fragment.find('/', pos);
    std::string token = fragment.substr(pos, slash == std::string::npos ? slash : slash - pos);
    pos = slash == std::string::npos ? slash : slash + 1;
    std::string key;
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
        key += token[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        key += token[i];
      }
    }
    path = child_path(path, key);
    if (node->is_object() && node->contains(key)) {
      node = &(*node)[key];
    } else if (node->is_array() && !key.empty() &&
               key.find_first_not_of("0123456789") == std::string::npos && key.size() < 10 &&
               std::stoul(key) < node->size()) {
      node = &(*node)[std::stoul(key)];
    } else {
      return Error{"unresolvable " + where + ": no such location"};
    }
  }
  if (!node->is_object() && !node->is_boolean())
    return Error{"unresolvable " + where + ": the location holds no schema"};
  return ResolvedRef{node, path};
}

Status check_ref_bases(const SchemaJson& root) {
  // Breadth-first over the structured values, each entry knowing its parent, so that a path is
  // spelled out only for an error (spelling every path would cost depth^2 on a deep document).
  struct Entry {
    const SchemaJson* node;
    int64_t parent;    // index into `entries`; -1 for the root
    std::string key;   // the pointer token under the parent
    bool is_map;       // an object of schemas (properties, $defs, ...), not a schema
    int64_t id_entry;  // the innermost entry below the root with a base-changing $id; -1: none
  };
  std::vector<Entry> entries = {{&root, -1, "", false, -1}};
  auto path_of = [&](int64_t index) {
    std::vector<const std::string*> tokens;
    for (int64_t i = index; i > 0; i = entries[i].parent) tokens.push_back(&entries[i].key);
    std::string path = "#";
    for (auto it = tokens.rbegin(); it != tokens.rend(); ++it) path = child_path(path, **it);
    return path;
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    const SchemaJson& node = *entries[i].node;
    const bool is_map = entries[i].is_map;
    int64_t id_entry = entries[i].id_entry;
    if (node.is_object() && !is_map) {
      const auto id = node.find("$id");
      const bool new_base =
          i > 0 && id != node.end() && id->is_string() && !id->get<std::string>().starts_with('#');
      if (new_base) id_entry = static_cast<int64_t>(i);
      const auto ref = node.find("$ref");
      if (id_entry >= 0 && ref != node.end() && ref->is_string())
        return Error{"unsupported '$ref' '" + ref->get<std::string>() + "' at " + path_of(i) +
                     ": it is inside the schema at " + path_of(id_entry) +
                     ", whose '$id' changes the base URI (references resolve against the root "
                     "schema only)"};
    }
    if (node.is_object()) {
      for (const auto& [key, value] : node.items()) {
        if (!value.is_structured()) continue;
        if (!is_map && (key == "enum" || key == "const" || key == "examples" || key == "default"))
          continue;
        const bool child_is_map = !is_map && (key == "properties" || key == "$defs" ||
                                              key == "definitions" || key == "patternProperties" ||
                                              key == "dependencies" || key == "dependentSchemas");
        entries.push_back({&value, static_cast<int64_t>(i), key, child_is_map, id_entry});
      }
    } else if (node.is_array()) {
      for (size_t k = 0; k < node.size(); ++k)
        if (node[k].is_structured())
          entries.push_back(
              {&node[k], static_cast<int64_t>(i), std::to_string(k), false, id_entry});
    }
  }
  return {};
}

Result<SchemaJson> normalize_schema(const SchemaJson& schema, const std::string& path) {
  if (!schema.is_object()) return schema;
  SchemaJson out = schema;
  for (const char* side : {"Minimum", "Maximum"}) {
    const std::string exclusive = std::string("exclusive") + side;
    std::string inclusive = side;
    inclusive[0] = static_cast<char>(std::tolower(inclusive[0]));
    if (!out.contains(exclusive) || !out[exclusive].is_boolean()) continue;
    if (out[exclusive].get<bool>() && out.contains(inclusive)) {
      out[exclusive] = out[inclusive];
      out.erase(inclusive);
    } else {
      out.erase(exclusive);
    }
  }
  if (out.contains("items") && out["items"].is_array()) {
    if (out.contains("prefixItems"))
      return Error{"'items' at " + path + " must be a schema when 'prefixItems' is given"};
    out["prefixItems"] = out["items"];
    out.erase("items");
  }
  return out;
}

Status SchemaMerger::take_step(const std::string& path) {
  if (++n_steps_ <= json_schema_merge_impl::kMaxSteps) return {};
  return Error{"merging 'allOf', '$ref' and 'anyOf' at " + path + " takes more than " +
               std::to_string(json_schema_merge_impl::kMaxSteps) + " steps"};
}

Result<SchemaJson> SchemaMerger::flatten(const SchemaJson& schema, const std::string& path,
                                         int depth) {
  TRELLIS_TRY(take_step(path));
  if (depth > max_depth_)
    return Error{"'$ref' or 'allOf' nested deeper than " + std::to_string(max_depth_) + " at " +
                 path};
  if (!schema.is_object()) return schema;
  TRELLIS_TRY(check_schema_keywords(schema, path));
  SchemaJson own = SchemaJson::object();
  for (const auto& [key, value] : schema.items())
    if (is_constraining_keyword(key) && key != "$ref" && key != "allOf") own[key] = value;
  std::vector<SchemaJson> parts;
  if (schema.contains("$ref")) {
    ResolvedRef target;
    TRELLIS_ASSIGN(target, resolve_schema_ref(root_, schema["$ref"].get<std::string>(), path));
    SchemaJson part;
    TRELLIS_ASSIGN(part, flatten(*target.schema, target.path, depth + 1));
    parts.push_back(std::move(part));
  }
  if (schema.contains("allOf")) {
    const SchemaJson& list = schema["allOf"];
    for (size_t i = 0; i < list.size(); ++i) {
      SchemaJson part;
      TRELLIS_ASSIGN(
          part,
          flatten(list[i], child_path(child_path(path, "allOf"), std::to_string(i)), depth + 1));
      parts.push_back(std::move(part));
    }
  }
  parts.push_back(std::move(own));
  SchemaJson merged = parts[0];
  for (size_t i = 1; i < parts.size(); ++i)
    TRELLIS_ASSIGN(merged, merge(merged, parts[i], path, depth + 1));
  return merged;
}

Result<std::vector<SchemaJson>> SchemaMerger::expand(const SchemaJson& schema,
                                                     const std::string& path, int depth) {
  using namespace json_schema_merge_impl;
  if (!has_alternatives(schema)) return std::vector<SchemaJson>{schema};
  const char* key = schema.contains("anyOf") ? "anyOf" : "oneOf";
  SchemaJson rest = schema;
  rest.erase(key);
  const SchemaJson& branches = schema[key];
  if (is_true(rest)) return std::vector<SchemaJson>(branches.begin(), branches.end());
  std::vector<SchemaJson> out;
  for (size_t i = 0; i < branches.size(); ++i) {
    const std::string branch_path = child_path(child_path(path, key), std::to_string(i));
    SchemaJson branch, merged;
    TRELLIS_ASSIGN(branch, flatten(branches[i], branch_path, depth + 1));
    TRELLIS_ASSIGN(merged, merge(rest, branch, path, depth + 1));
    std::vector<SchemaJson> more;
    TRELLIS_ASSIGN(more, expand(merged, path, depth + 1));
    for (SchemaJson& m : more)
      if (!is_false(m)) out.push_back(std::move(m));
    if (out.size() > kMaxAlternatives)
      return Error{"'" + std::string(key) + "' at " + path + " expands to more than " +
                   std::to_string(kMaxAlternatives) + " alternatives"};
  }
  return out;
}

Result<SchemaJson> SchemaMerger::merge(const SchemaJson& a, const SchemaJson& b,
                                       const std::string& path, int depth) {
  using namespace json_schema_merge_impl;
  if (depth > max_depth_)
    return Error{"'$ref' or 'allOf' nested deeper than " + std::to_string(max_depth_) + " at " +
                 path};
  TRELLIS_TRY(take_step(path));
  if (is_false(a) || is_false(b)) return SchemaJson(false);
  if (is_true(a)) return b;
  if (is_true(b)) return a;
  if (!has_alternatives(a) && !has_alternatives(b)) return merge_plain(a, b, path);
  // (x1 | x2) & (y1 | y2) = x1&y1 | x1&y2 | x2&y1 | x2&y2
  std::vector<SchemaJson> xs, ys, out;
  TRELLIS_ASSIGN(xs, expand(a, path, depth + 1));
  TRELLIS_ASSIGN(ys, expand(b, path, depth + 1));
  for (const SchemaJson& x : xs) {
    for (const SchemaJson& y : ys) {
      SchemaJson fx, fy, m;
      TRELLIS_ASSIGN(fx, flatten(x, path, depth + 1));
      TRELLIS_ASSIGN(fy, flatten(y, path, depth + 1));
      TRELLIS_ASSIGN(m, merge(fx, fy, path, depth + 1));
      if (is_false(m)) continue;
      if (has_alternatives(m)) {
        std::vector<SchemaJson> more;
        TRELLIS_ASSIGN(more, expand(m, path, depth + 1));
        out.insert(out.end(), more.begin(), more.end());
      } else {
        out.push_back(std::move(m));
      }
      if (out.size() > kMaxAlternatives)
        return Error{"'allOf' at " + path + " expands to more than " +
                     std::to_string(kMaxAlternatives) + " alternatives"};
    }
  }
  if (out.empty()) return SchemaJson(false);
  if (out.size() == 1) return out[0];
  return SchemaJson{{"anyOf", out}};
}

Result<SchemaJson> SchemaMerger::merge_plain(const SchemaJson& a_in, const SchemaJson& b_in,
                                             const std::string& path) {
  using namespace json_schema_merge_impl;
  SchemaJson a, b;
  TRELLIS_ASSIGN(a, normalize_schema(a_in, path));
  TRELLIS_ASSIGN(b, normalize_schema(b_in, path));
  SchemaJson out = SchemaJson::object();
  for (const auto& [key, value] : a.items())
    if (is_constraining_keyword(key) && !is_object_keyword(key) && !is_array_keyword(key))
      out[key] = value;
  for (const auto& [key, value] : b.items()) {
    if (!is_constraining_keyword(key) || is_object_keyword(key) || is_array_keyword(key)) continue;
    if (key == "enum" || key == "const") continue;  // below
    if (!out.contains(key)) {
      out[key] = value;
      continue;
    }
    SchemaJson& mine = out[key];
    if (key == "type") {
      mine = intersect_types(mine, value);
      if (mine.is_null()) return SchemaJson(false);
    } else if (is_lower_bound(key)) {
      if (number_less(mine, value)) mine = value;
    } else if (is_upper_bound(key)) {
      if (number_less(value, mine)) mine = value;
    } else if (mine != value) {  // pattern, format
      return Error{"'allOf' at " + path + " combines two different '" + key +
                   "' values, which is not supported"};
    }
  }
  std::optional<std::vector<SchemaJson>> values_a = allowed_values(a), values_b = allowed_values(b);
  if (values_a || values_b) {
    std::vector<SchemaJson> values = values_a ? *values_a : *values_b;
    if (values_a && values_b)
      std::erase_if(values, [&](const SchemaJson& v) {
        return std::find(values_b->begin(), values_b->end(), v) == values_b->end();
      });
    if (values.empty()) return SchemaJson(false);
    out.erase("const");
    out["enum"] = values;
  }
  merge_object_keywords(a, b, out);
  merge_array_keywords(a, b, out);
  return out;
}

}  // namespace trellis
