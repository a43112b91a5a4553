#include "server/harmony_tools.h"

#include <algorithm>

namespace trellis {
namespace {

using Json = nlohmann::ordered_json;

std::string typescript_type(const Json& schema, int depth);

// `text` as comment lines: "// " before each of its lines.
std::string comment(const std::string& text) {
  std::string out = "// ";
  for (char c : text) {
    out += c;
    if (c == '\n') out += "// ";
  }
  return out + "\n";
}

// "A | B | ..." of the types of `schemas`.
std::string union_of(const Json& schemas, int depth) {
  std::string out;
  for (const Json& s : schemas) {
    if (!out.empty()) out += " | ";
    out += typescript_type(s, depth);
  }
  return out.empty() ? "any" : out;
}

// The properties of an object schema, one per line with its description above it, as harmony
// lists a function's parameters.
std::string property_lines(const Json& schema, int depth) {
  const Json& properties = schema["properties"];
  const Json required = schema.contains("required") && schema["required"].is_array()
                            ? schema["required"]
                            : Json::array();
  std::string out;
  for (const auto& [name, property] : properties.items()) {
    if (property.is_object() && property.contains("description") &&
        property["description"].is_string()) {
      out += comment(property["description"].get<std::string>());
    }
    const bool is_required = std::find(required.begin(), required.end(), name) != required.end();
    out += name + (is_required ? ": " : "?: ") + typescript_type(property, depth + 1) + ",";
    if (property.is_object() && property.contains("default"))
      out += " // default: " + property["default"].dump();
    out += "\n";
  }
  return out;
}

bool has_properties(const Json& schema) {
  return schema.is_object() && schema.contains("properties") && schema["properties"].is_object() &&
         !schema["properties"].empty();
}

std::string typescript_type(const Json& schema, int depth) {
  if (!schema.is_object() || depth > 8) return "any";
  if (schema.contains("enum") && schema["enum"].is_array()) {
    std::string out;
    for (const Json& value : schema["enum"]) out += (out.empty() ? "" : " | ") + value.dump();
    return out.empty() ? "any" : out;
  }
  if (schema.contains("const")) return schema["const"].dump();
  for (const char* key : {"anyOf", "oneOf"}) {
    if (schema.contains(key) && schema[key].is_array()) return union_of(schema[key], depth);
  }
  if (!schema.contains("type")) return "any";
  const Json& type = schema["type"];
  if (type.is_array()) {
    std::string out;
    for (const Json& t : type) {
      Json one = schema;
      one["type"] = t;
      out += (out.empty() ? "" : " | ") + typescript_type(one, depth);
    }
    return out.empty() ? "any" : out;
  }
  if (!type.is_string()) return "any";
  const std::string name = type.get<std::string>();
  if (name == "string" || name == "boolean" || name == "null") return name;
  if (name == "number" || name == "integer") return "number";
  if (name == "array") {
    if (!schema.contains("items")) return "any[]";
    const std::string item = typescript_type(schema["items"], depth + 1);
    return item.find(' ') == std::string::npos ? item + "[]" : "Array<" + item + ">";
  }
  if (name == "object") {
    return has_properties(schema) ? "{\n" + property_lines(schema, depth) + "}" : "object";
  }
  return "any";
}

}  // namespace

std::string harmony_tools_text(std::span<const RequestTool> tools) {
  std::string out = "# Tools\n\n## functions\n\nnamespace functions {\n\n";
  for (const RequestTool& tool : tools) {
    if (!tool.description.empty()) out += comment(tool.description);
    if (has_properties(tool.parameters)) {
      out += "type " + tool.name + " = (_: {\n" + property_lines(tool.parameters, 0) +
             "}) => any;\n\n";
    } else {
      out += "type " + tool.name + " = () => any;\n\n";
    }
  }
  return out + "} // namespace functions";
}

}  // namespace trellis
