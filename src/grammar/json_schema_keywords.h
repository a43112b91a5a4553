// The JSON Schema keywords the schema compiler knows, the checks of their values, and JSON
// pointer paths for error messages.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/result.h"

namespace trellis {

// Schemas are read as ordered_json so that properties keep the order the schema gave them.
using SchemaJson = nlohmann::ordered_json;

// Keywords that do not constrain a value (title, description, ...).
bool is_annotation_keyword(std::string_view key);
// Keywords that constrain a value: everything known but the annotations and $defs/definitions.
bool is_constraining_keyword(std::string_view key);

// Every keyword of `schema` (an object) is known and its value well formed. Errors name the
// keyword and `path`: "unsupported JSON Schema keyword 'minProperties' at #/properties/user",
// "'minLength' at #/properties/name must be a non-negative integer".
Status check_schema_keywords(const SchemaJson& schema, const std::string& path);

// Whether `schema` (an object) has a constraining keyword other than those in `except`.
bool has_constraints_besides(const SchemaJson& schema,
                             std::initializer_list<std::string_view> except);

// `path` extended by one JSON pointer token (~ and / escaped).
std::string child_path(const std::string& path, std::string_view token);

// A count keyword's value, checked before by check_schema_keywords().
int64_t count_keyword(const SchemaJson& schema, const char* key);

// `value` as compact JSON text; invalid UTF-8 in strings is replaced rather than thrown about.
std::string compact_json(const SchemaJson& value);

}  // namespace trellis
