#include "server/api_error.h"

namespace trellis {

const char* api_error_type_name(ApiErrorType type) {
  switch (type) {
    case ApiErrorType::INVALID_REQUEST:
      return "invalid_request_error";
    case ApiErrorType::AUTHENTICATION:
      return "authentication_error";
    case ApiErrorType::NOT_FOUND:
      return "not_found_error";
    case ApiErrorType::RATE_LIMIT:
      return "rate_limit_error";
    case ApiErrorType::SERVER:
      return "server_error";
  }
  assert(false && "unknown ApiErrorType");
  return "server_error";
}

ApiError invalid_request_error(std::string message, std::optional<std::string> param) {
  return ApiError{400, std::move(message), ApiErrorType::INVALID_REQUEST, std::move(param),
                  std::nullopt};
}

ApiError authentication_error(std::string message) {
  return ApiError{401, std::move(message), ApiErrorType::AUTHENTICATION, std::nullopt,
                  "invalid_api_key"};
}

ApiError not_found_error(std::string message, std::optional<std::string> code) {
  return ApiError{404, std::move(message), ApiErrorType::NOT_FOUND, std::nullopt, std::move(code)};
}

ApiError rate_limit_error(std::string message) {
  return ApiError{429, std::move(message), ApiErrorType::RATE_LIMIT, std::nullopt, std::nullopt};
}

ApiError server_error(std::string message, int http_status) {
  return ApiError{http_status, std::move(message), ApiErrorType::SERVER, std::nullopt,
                  std::nullopt};
}

nlohmann::json error_json(const ApiError& error) {
  nlohmann::json body = {
      {"message", error.message},
      {"type", api_error_type_name(error.type)},
      {"param", nullptr},
      {"code", nullptr},
  };
  if (error.param) body["param"] = *error.param;
  if (error.code) body["code"] = *error.code;
  return {{"error", std::move(body)}};
}

}  // namespace trellis
