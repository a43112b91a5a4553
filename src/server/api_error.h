// Errors as the OpenAI API reports them: an HTTP status plus the JSON body
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// and ApiResult<T>, the expected-style result of everything in the server that a client can get
// wrong (it carries an ApiError where base/result.h's Result carries a plain Error).
#pragma once

#include <cassert>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "base/result.h"

namespace trellis {

// The `type` strings of OpenAI-compatible servers; each has its usual HTTP status (see the
// factory functions below).
enum class ApiErrorType {
  INVALID_REQUEST,  // "invalid_request_error", 400
  AUTHENTICATION,   // "authentication_error", 401
  NOT_FOUND,        // "not_found_error", 404
  RATE_LIMIT,       // "rate_limit_error", 429
  SERVER,           // "server_error", 500 (503 when overloaded)
};

// The wire name, e.g. "invalid_request_error".
const char* api_error_type_name(ApiErrorType type);

struct ApiError {
  int http_status = 400;
  // Shown to the client as is: names the offending field and what was expected.
  std::string message;
  ApiErrorType type = ApiErrorType::INVALID_REQUEST;
  // The request field at fault, as a path: "max_tokens", "messages[2].content[0].type".
  std::optional<std::string> param;
  // A machine-readable code, e.g. "model_not_found"; absent for most errors.
  std::optional<std::string> code;
};

// 400 invalid_request_error naming `param` (pass std::nullopt when no single field is at fault).
ApiError invalid_request_error(std::string message, std::optional<std::string> param);
// 401 authentication_error with code "invalid_api_key".
ApiError authentication_error(std::string message);
// 404 not_found_error (an unknown route or model; pass code "model_not_found" for the latter).
ApiError not_found_error(std::string message, std::optional<std::string> code = std::nullopt);
// 429 rate_limit_error.
ApiError rate_limit_error(std::string message);
// `http_status` (500 by default, 503 for "try again later") server_error.
ApiError server_error(std::string message, int http_status = 500);

// {"error": {"message", "type", "param", "code"}}; an absent param or code is null, as OpenAI
// sends it.
nlohmann::json error_json(const ApiError& error);

// Either a value of T or an ApiError. Works with TRELLIS_TRY inside functions that return an
// ApiResult of any type.
template <typename T>
using ApiResult = Result<T, ApiError>;

}  // namespace trellis
