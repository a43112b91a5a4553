#include "server/json_fields.h"

namespace trellis {
namespace {

struct TooDeep {};

}  // namespace

std::string a_type(const OrderedJson& value) {
  const std::string name = value.type_name();
  const bool vowel = name == "array" || name == "object";
  return (vowel ? "an " : "a ") + name;
}

ApiResult<OrderedJson> parse_body(std::string_view body, int32_t max_depth) {
  OrderedJson value;
  // Called as each value opens: aborts the parse at the first one nested too deep.
  const OrderedJson::parser_callback_t depth_guard =
      [max_depth](int depth, OrderedJson::parse_event_t event, OrderedJson&) {
        if ((event == OrderedJson::parse_event_t::object_start ||
             event == OrderedJson::parse_event_t::array_start) &&
            depth >= max_depth) {
          throw TooDeep{};
        }
        return true;
      };
  try {
    value = OrderedJson::parse(body.begin(), body.end(), depth_guard);
  } catch (const TooDeep&) {
    return invalid_request_error(
        "request body nests arrays or objects deeper than " + std::to_string(max_depth) + " levels",
        std::nullopt);
  } catch (const OrderedJson::parse_error& error) {
    return invalid_request_error(
        "request body is not valid JSON (error at byte " + std::to_string(error.byte) + ")",
        std::nullopt);
  } catch (const OrderedJson::exception& error) {  // a number beyond double range, say 1e400
    return invalid_request_error(
        std::string("request body is not acceptable JSON: ") + error.what(), std::nullopt);
  }
  if (!value.is_object()) {
    return invalid_request_error("request body must be a JSON object, got " + a_type(value),
                                 std::nullopt);
  }
  return value;
}

}  // namespace trellis
