// gpt-oss's tools: the functions a request offers, written as the TypeScript namespace its
// harmony format puts in the developer message:
//
//   # Tools
//
//   ## functions
//
//   namespace functions {
//
//   // DESCRIPTION
//   type NAME = (_: {
//   // PROPERTY DESCRIPTION
//   PROPERTY?: TYPE, // default: VALUE
//   }) => any;
//
//   } // namespace functions
//
// A property is optional (`?`) unless the schema requires it; TYPE is string, number, boolean,
// null, an array (T[]), a union (A | B, from a list of types, enum values, anyOf or oneOf) or a
// nested object literal; a schema it cannot name is `any`. A function without properties is
// `type NAME = () => any;`.
#pragma once

#include <span>
#include <string>

#include "server/tool_call_grammar.h"

namespace trellis {

std::string harmony_tools_text(std::span<const RequestTool> tools);

}  // namespace trellis
