#include "server/output_constraint.h"

#include <algorithm>

#include "grammar/gbnf.h"
#include "grammar/regex_grammar.h"

namespace trellis {

namespace {

std::string cache_key(const OutputConstraint& c) {
  std::string key(1, static_cast<char>('0' + static_cast<int>(c.kind)));
  switch (c.kind) {
    case OutputConstraint::Kind::JSON_OBJECT:
      break;
    case OutputConstraint::Kind::JSON_SCHEMA:
      key += c.schema.dump();
      break;
    case OutputConstraint::Kind::GBNF:
    case OutputConstraint::Kind::REGEX:
      key += c.text;
      break;
    case OutputConstraint::Kind::CHOICE:
      for (const std::string& choice : c.choices)
        key += std::to_string(choice.size()) + ":" + choice;
      break;
  }
  return key;
}

}  // namespace

Result<std::string> ConstraintCompiler::to_gbnf(const OutputConstraint& c) const {
  switch (c.kind) {
    case OutputConstraint::Kind::JSON_OBJECT:
      return json_object_gbnf(options_);
    case OutputConstraint::Kind::JSON_SCHEMA:
      return json_schema_to_gbnf(c.schema, options_);
    case OutputConstraint::Kind::GBNF:
      return c.text;
    case OutputConstraint::Kind::REGEX:
      return regex_to_gbnf(c.text, "root", options_.limits);
    case OutputConstraint::Kind::CHOICE:
      return choice_gbnf(c.choices);
  }
  return Error{"unknown constraint"};
}

ApiResult<std::shared_ptr<const Grammar>> ConstraintCompiler::compile(const OutputConstraint& c) {
  const std::string key = cache_key(c);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it =
        std::find_if(cache_.begin(), cache_.end(), [&](const Entry& e) { return e.key == key; });
    if (it != cache_.end()) {
      cache_.splice(cache_.begin(), cache_, it);
      return cache_.front().grammar;
    }
  }
  // Compiled outside the lock: a large schema does not hold up other requests.
  Result<std::string> gbnf = to_gbnf(c);
  if (!gbnf.ok()) return invalid_request_error(c.param + ": " + gbnf.error().message, c.param);
  Result<Grammar> grammar = parse_gbnf(*gbnf, options_.limits);
  if (!grammar.ok())
    return invalid_request_error(c.param + ": " + grammar.error().message, c.param);
  auto shared = std::make_shared<const Grammar>(std::move(grammar).value());
  std::lock_guard<std::mutex> lock(mutex_);
  cache_.push_front({key, shared});
  if (cache_.size() > max_cached_) cache_.pop_back();
  return shared;
}

}  // namespace trellis
