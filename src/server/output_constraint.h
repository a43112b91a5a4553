// What a request constrains its output to (response_format, grammar, regex, choice and the
// aliases other servers' clients send), and its compilation to a Grammar, cached by source so
// that the requests of an agent that sends the same schema every turn share one grammar (and the
// engine's token masks for it).
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/json_schema_grammar.h"
#include "server/api_error.h"

namespace trellis {

struct OutputConstraint {
  enum class Kind { JSON_OBJECT, JSON_SCHEMA, GBNF, REGEX, CHOICE };
  Kind kind = Kind::JSON_OBJECT;
  nlohmann::ordered_json schema;     // JSON_SCHEMA, its properties in the client's order
  std::string text;                  // GBNF, REGEX
  std::vector<std::string> choices;  // CHOICE: at least one
  // The request field it came from ("response_format.json_schema.schema", "grammar"): the param
  // of a 400 when it does not compile.
  std::string param;
};

class ConstraintCompiler {
 public:
  explicit ConstraintCompiler(JsonGrammarOptions options, size_t max_cached = 64)
      : options_(std::move(options)), max_cached_(max_cached) {}

  // The grammar of `constraint`, compiled once per distinct source. A 400 naming the param when
  // it does not compile (a keyword outside the subset with its path, a syntax error, an empty
  // language, past the limits). Thread-safe.
  ApiResult<std::shared_ptr<const Grammar>> compile(const OutputConstraint& constraint);

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const Grammar> grammar;
  };
  Result<std::string> to_gbnf(const OutputConstraint& constraint) const;

  JsonGrammarOptions options_;
  size_t max_cached_;
  std::mutex mutex_;
  std::list<Entry> cache_;  // most recently used first
};

}  // namespace trellis
