// The schemas of the official JSON Schema Test Suite (Debian's json-schema-test-suite package)
// against the structured-output path:
//   - every schema either compiles, or is refused with an error that names a keyword and a path
//     (or says that no value satisfies it): what the server answers with a 400;
//   - an instance the suite marks invalid is never a sentence of a compiled schema's grammar
//     (the other direction does not hold: the grammar writes one property order and one
//     spelling of each value);
//   - a random-weight model (the tiny synthetic one) under each compiled schema, greedy and
//     sampled with several seeds, writes only JSON that an independent validator (Ajv, run by
//     tests/node/ajv_validate.mjs) accepts.
// One draft is run: draft2020-12 when the package has it, else draft7, every file but optional/
// (whose format/ files for the supported formats are run too).
//
// Skips, saying why, without the package (scripts/install-deps.sh installs it;
// TRELLIS_JSON_SCHEMA_SUITE names another copy's tests/ folder), and the Ajv check without node
// or the npm packages (scripts/setup-node-client.sh installs ajv and ajv-formats);
// TRELLIS_REQUIRE_NODE_CLIENT=1 turns the latter skip into a failure.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "engine/engine.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_automaton.h"
#include "grammar/json_schema_grammar.h"
#include "test_support.h"

namespace trellis {
namespace {

namespace fs = std::filesystem;
using OJson = nlohmann::ordered_json;

constexpr const char* kDefaultSuiteDir = "/usr/share/json-schema-test-suite/tests";
// The formats the schema compiler supports: their optional/format/ files are run.
constexpr std::array<const char*, 5> kFormatFiles = {"date", "time", "date-time", "uuid", "email"};
constexpr int32_t kMaxTokens = 200;

// One {description, schema, tests} group of a suite file.
struct SuiteGroup {
  std::string file;  // relative to the draft's folder, e.g. "optional/format/date.json"
  std::string description;
  OJson schema;
  OJson tests;  // [{description, data, valid}]
  std::string name() const { return file + ": " + description; }
};

struct Suite {
  std::string draft;  // "draft2020-12" or "draft7"
  std::vector<std::string> files;
  std::vector<SuiteGroup> groups;
  std::string error;  // why the suite could not be read; empty when it was
};

std::string suite_tests_dir() {
  if (const char* env = std::getenv("TRELLIS_JSON_SCHEMA_SUITE")) return env;
  return kDefaultSuiteDir;
}

// The draft's files in sorted order: every *.json of its folder, then the supported formats'.
const Suite& load_suite() {
  static const Suite suite = [] {
    Suite s;
    const fs::path root = suite_tests_dir();
    for (const char* draft : {"draft2020-12", "draft7"}) {
      if (fs::is_directory(root / draft)) {
        s.draft = draft;
        break;
      }
    }
    if (s.draft.empty()) return s;
    const fs::path dir = root / s.draft;
    std::vector<std::string> top;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir))
      if (entry.is_regular_file() && entry.path().extension() == ".json")
        top.push_back(entry.path().filename().string());
    std::sort(top.begin(), top.end());
    s.files = top;
    for (const char* format : kFormatFiles) {
      const std::string file = std::string("optional/format/") + format + ".json";
      if (fs::is_regular_file(dir / file)) s.files.push_back(file);
    }
    for (const std::string& file : s.files) {
      std::ifstream in(dir / file);
      const OJson groups = OJson::parse(in, nullptr, false);
      if (groups.is_discarded() || !groups.is_array()) {
        s.error = "cannot parse " + (dir / file).string();
        return s;
      }
      for (const OJson& group : groups)
        s.groups.push_back({file, group.value("description", ""), group.at("schema"),
                            group.value("tests", OJson::array())});
    }
    return s;
  }();
  return suite;
}

#define REQUIRE_SUITE()                                                                       \
  const Suite& suite = load_suite();                                                          \
  if (suite.draft.empty())                                                                    \
    GTEST_SKIP() << "the JSON Schema Test Suite is absent from " << suite_tests_dir()         \
                 << " (scripts/install-deps.sh installs the json-schema-test-suite package, " \
                    "or set TRELLIS_JSON_SCHEMA_SUITE to a copy's tests/ folder)";            \
  ASSERT_EQ(suite.error, "")

// A schema's grammars in both whitespace styles, or why it was refused.
struct Compiled {
  std::shared_ptr<const Grammar> compact, flexible;
  std::string error;  // from json_schema_to_gbnf (the same for both styles)
  bool ok() const { return error.empty(); }
};

// Compiles `schema`; a GBNF text the compiler produced but parse_gbnf() refuses is a test failure.
Compiled compile_schema(const OJson& schema, const std::string& name) {
  Compiled out;
  for (JsonWhitespace style : {JsonWhitespace::COMPACT, JsonWhitespace::FLEXIBLE}) {
    JsonGrammarOptions options;
    options.whitespace = style;
    Result<std::string> gbnf = json_schema_to_gbnf(schema, options);
    if (!gbnf.ok()) {
      out.error = gbnf.error().message;
      return out;
    }
    Result<Grammar> grammar = parse_gbnf(*gbnf, options.limits);
    if (!grammar.ok()) {
      ADD_FAILURE() << name << ": the compiled GBNF does not parse: " << grammar.error().message
                    << "\n"
                    << *gbnf;
      out.error = "(GBNF parse failure) " + grammar.error().message;
      return out;
    }
    auto shared = std::make_shared<const Grammar>(std::move(grammar).value());
    (style == JsonWhitespace::COMPACT ? out.compact : out.flexible) = std::move(shared);
  }
  return out;
}

// Whether `key` is an object key anywhere inside `value`.
bool has_key_anywhere(const OJson& value, const std::string& key) {
  if (value.is_object()) {
    for (const auto& [k, v] : value.items())
      if (k == key || has_key_anywhere(v, key)) return true;
  } else if (value.is_array()) {
    for (const OJson& item : value)
      if (has_key_anywhere(item, key)) return true;
  }
  return false;
}

// A refusal the server may answer with a 400: it names a quoted keyword (or value) and a '#'
// path, or says that no value satisfies the schema. "" when it does, else what is wrong.
std::string check_refusal(const std::string& message, const OJson& schema) {
  static const std::regex quoted("'[^']+'");
  static const std::regex unsupported("unsupported JSON Schema keyword '([^']+)' at #");
  const bool names_keyword = std::regex_search(message, quoted);
  const bool has_path = message.find('#') != std::string::npos;
  const bool unsatisfiable = message.find("no value satisfies") != std::string::npos;
  if (!(names_keyword && has_path) && !unsatisfiable)
    return "the error names no keyword and path: " + message;
  std::smatch m;
  if (std::regex_search(message, m, unsupported) && !has_key_anywhere(schema, m[1].str()))
    return "the error names a keyword the schema does not have: " + message;
  return "";
}

// The keyword a refusal names, for the summary; "(unsatisfiable)" or "(other)" when none.
std::string refused_keyword(const std::string& message) {
  static const std::regex unsupported("unsupported JSON Schema (keyword|format) '([^']+)'");
  std::smatch m;
  if (std::regex_search(message, m, unsupported)) return m[2].str();
  if (message.find("satisf") != std::string::npos) return "(unsatisfiable)";
  static const std::regex quoted("'([^']+)'");
  if (std::regex_search(message, m, quoted)) return m[1].str();
  return "(other)";
}

// Invalid instances a compiled grammar accepts, known and explained: {file, group description,
// test description, why}. Each must be a documented choice of the subset, not a bug. None in the
// draft7 suite so far: the only ones are under oneOf (read as anyOf), counted apart below.
struct KnownAcceptance {
  const char* file;
  const char* group;
  const char* test;
  const char* reason;
};
constexpr std::array<KnownAcceptance, 0> kKnownAcceptances = {};

const KnownAcceptance* find_known_acceptance(const SuiteGroup& group, const std::string& test) {
  for (const KnownAcceptance& k : kKnownAcceptances)
    if (group.file == k.file && group.description == k.group && test == k.test) return &k;
  return nullptr;
}

// TRELLIS_JSON_SCHEMA_SUITE_VERBOSE=1: print every refusal, every valid instance the grammar
// does not accept as written, every output, and what Ajv said.
bool verbose() {
  const char* env = std::getenv("TRELLIS_JSON_SCHEMA_SUITE_VERBOSE");
  return env != nullptr && std::string(env) == "1";
}

TEST(JsonSchemaSuite, EverySchemaCompilesOrIsRefusedByNameAndInvalidInstancesAreRejected) {
  REQUIRE_SUITE();
  int n_compiled = 0, n_refused = 0, n_invalid_checked = 0, n_valid_rejected = 0,
      n_valid_checked = 0;
  std::map<std::string, int> refused_by_keyword;
  std::vector<std::string> one_of_acceptances, known_acceptances;
  for (const SuiteGroup& group : suite.groups) {
    const Compiled compiled = compile_schema(group.schema, group.name());
    if (!compiled.ok()) {
      ++n_refused;
      ++refused_by_keyword[refused_keyword(compiled.error)];
      if (verbose())
        std::printf("  refused: %s: %s\n", group.name().c_str(), compiled.error.c_str());
      const std::string wrong = check_refusal(compiled.error, group.schema);
      EXPECT_EQ(wrong, "") << group.name() << "\nschema " << group.schema.dump();
      continue;
    }
    ++n_compiled;
    const bool uses_one_of = has_key_anywhere(group.schema, "oneOf");
    for (const OJson& test : group.tests) {
      const std::string text = test.at("data").dump();
      const std::string test_name = test.value("description", "");
      const bool compact = grammar_accepts(compiled.compact, text);
      const bool flexible = grammar_accepts(compiled.flexible, text);
      EXPECT_EQ(compact, flexible) << group.name() << " / " << test_name << ": " << text
                                   << " (the flexible grammar admits every compact text)";
      if (test.at("valid").get<bool>()) {
        ++n_valid_checked;
        if (!compact) ++n_valid_rejected;
        if (!compact && verbose())
          std::printf("  valid, not written so: %s / %s: %s\n", group.name().c_str(),
                      test_name.c_str(), text.c_str());
        continue;
      }
      ++n_invalid_checked;
      if (!compact && !flexible) continue;
      const std::string where = group.name() + " / " + test_name + ": " + text;
      if (uses_one_of) {
        one_of_acceptances.push_back(where);  // oneOf is read as anyOf (documented)
      } else if (const KnownAcceptance* known = find_known_acceptance(group, test_name)) {
        known_acceptances.push_back(where + " (" + known->reason + ")");
      } else {
        ADD_FAILURE() << "the grammar accepts an instance the suite marks invalid: " << where
                      << "\nschema " << group.schema.dump();
      }
    }
  }
  std::string refusals;
  for (const auto& [keyword, count] : refused_by_keyword)
    refusals += (refusals.empty() ? "" : ", ") + keyword + " " + std::to_string(count);
  std::printf(
      "json schema suite (%s, %zu files): %zu schemas, %d compiled, %d refused (%s); invalid "
      "instances checked: %d, accepted by oneOf-as-anyOf: %zu, known: %zu; valid instances the "
      "grammar writes differently (property order, spelling): %d of %d\n",
      suite.draft.c_str(), suite.files.size(), suite.groups.size(), n_compiled, n_refused,
      refusals.c_str(), n_invalid_checked, one_of_acceptances.size(), known_acceptances.size(),
      n_valid_rejected, n_valid_checked);
  for (const std::string& line : one_of_acceptances) std::printf("  oneOf: %s\n", line.c_str());
  for (const std::string& line : known_acceptances) std::printf("  known: %s\n", line.c_str());
  EXPECT_EQ(n_compiled + n_refused, static_cast<int>(suite.groups.size()));
  EXPECT_GT(n_compiled, 0);
}

// ---- Generation, validated by Ajv ----

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The node_modules folder holding ajv and ajv-formats: $TRELLIS_NODE_MODULES, else node/ in this
// binary's build tree (<build>/tests/<binary>), else build/node in the source tree; "" if none.
std::string ajv_node_modules() {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("TRELLIS_NODE_MODULES")) candidates.emplace_back(env);
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(self.parent_path().parent_path() / "node" / "node_modules");
  candidates.push_back(fs::path(TRELLIS_SOURCE_DIR) / "build" / "node" / "node_modules");
  for (const fs::path& dir : candidates)
    if (fs::exists(dir / "ajv" / "package.json") &&
        fs::exists(dir / "ajv-formats" / "package.json"))
      return fs::absolute(dir).string();
  return "";
}

// Why Ajv cannot run here, or empty.
std::string ajv_unavailable() {
  if (testing::run_shell("command -v node >/dev/null 2>&1").exit_code != 0)
    return "node is not installed (scripts/install-deps.sh installs nodejs and npm)";
  if (ajv_node_modules().empty())
    return "the ajv and ajv-formats npm packages are absent: run scripts/setup-node-client.sh "
           "<build>/node (or set TRELLIS_NODE_MODULES to their node_modules folder)";
  return "";
}

bool node_client_required() {
  const char* env = std::getenv("TRELLIS_REQUIRE_NODE_CLIENT");
  return env != nullptr && std::string(env) == "1";
}

std::vector<TokenId> prompt_of(size_t i) {
  std::vector<TokenId> p;
  for (size_t k = 0; k < 16 + i % 7; ++k)
    p.push_back(static_cast<TokenId>(300 + (k * 37 + i * 11) % 700));
  return p;
}

// How the requests of one schema are sampled: greedy, and seeded at temperatures 1.0 and 1.5,
// each under the compact and the flexible-whitespace grammar.
struct Draw {
  float temperature;
  bool flexible;
};
constexpr std::array<Draw, 6> kDraws = {Draw{0.0f, false}, Draw{0.0f, true},  Draw{1.0f, false},
                                        Draw{1.0f, true},  Draw{1.5f, false}, Draw{1.5f, true}};

// The groups of each file to generate for: all of them at full scale; under the sanitizers
// (TRELLIS_TEST_SCALE < 1) an evenly spread part, at least one per file.
std::vector<size_t> sampled_groups(const Suite& suite) {
  std::map<std::string, std::vector<size_t>> by_file;
  for (size_t i = 0; i < suite.groups.size(); ++i) by_file[suite.groups[i].file].push_back(i);
  std::vector<size_t> out;
  for (const auto& [file, indices] : by_file) {
    const int n = static_cast<int>(indices.size());
    const int keep = testing::scaled_count(n, 1);
    for (int k = 0; k < keep; ++k) out.push_back(indices[static_cast<size_t>(k) * n / keep]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(JsonSchemaSuite, RandomModelOutputsUnderEachSchemaValidateWithAjv) {
  if (testing::under_sanitizer())
    GTEST_SKIP() << "the constrained engine runs under the sanitizer in engine_grammar_test and "
                    "server_structured_test; validating outputs is the release run's";
  REQUIRE_SUITE();
  if (std::string why = ajv_unavailable(); !why.empty()) {
    if (node_client_required()) FAIL() << "TRELLIS_REQUIRE_NODE_CLIENT=1, but " << why;
    GTEST_SKIP() << why;
  }
  const fs::path script = fs::path(TRELLIS_SOURCE_DIR) / "tests" / "node" / "ajv_validate.mjs";
  ASSERT_TRUE(fs::exists(script)) << script;

  EngineConfig config;
  config.n_threads = 2;
  config.block_size = 16;
  config.n_ctx = 256;
  config.kv_tokens = 64 * 256;
  config.scheduler.max_seqs = 32;
  Result<std::unique_ptr<Engine>> engine = Engine::create(testing::tiny_engine_model(), config);
  ASSERT_TRUE(engine.ok()) << engine.error().message;

  struct Pending {
    size_t group;
    size_t draw;
    std::shared_ptr<const Grammar> grammar;
    RequestHandle handle;
  };
  const std::vector<size_t> groups = sampled_groups(suite);
  std::vector<Pending> pending;
  std::map<size_t, OJson> cases;  // group index -> {name, schema, outputs}
  int n_schemas = 0, n_compiled = 0, n_refused = 0;
  for (size_t g : groups) {
    ++n_schemas;
    const SuiteGroup& group = suite.groups[g];
    const Compiled compiled = compile_schema(group.schema, group.name());
    if (!compiled.ok()) {
      ++n_refused;
      continue;
    }
    ++n_compiled;
    cases[g] = OJson{{"name", group.name()},
                     {"schema", group.schema},
                     {"draft", suite.draft == "draft7" ? "draft-07" : "2020-12"},
                     {"outputs", OJson::array()}};
    // oneOf is read as anyOf (documented): Ajv validates so, and notes outputs that match several
    // branches.
    if (has_key_anywhere(group.schema, "oneOf")) cases[g]["oneOfAsAnyOf"] = true;
    for (size_t d = 0; d < kDraws.size(); ++d) {
      EngineRequest request;
      request.prompt = prompt_of(g * kDraws.size() + d);
      request.max_tokens = kMaxTokens;
      request.sampling.temperature = kDraws[d].temperature;
      request.sampling.seed = 7000 + g * kDraws.size() + d;
      request.grammar = kDraws[d].flexible ? compiled.flexible : compiled.compact;
      Result<RequestHandle> handle = (*engine)->submit(request);
      ASSERT_TRUE(handle.ok()) << handle.error().message;
      pending.push_back({g, d, request.grammar, std::move(handle).value()});
    }
  }

  int n_validated = 0, n_cut = 0;
  for (Pending& p : pending) {
    const RequestOutput& out = p.handle.wait();
    const std::string where =
        suite.groups[p.group].name() + " (draw " + std::to_string(p.draw) + "): " + out.text;
    if (verbose())
      std::printf("  %s %s\n",
                  out.finish_reason == FinishReason::LENGTH ? "cut:" : "output:", where.c_str());
    if (out.finish_reason == FinishReason::LENGTH) {
      ++n_cut;  // a random model may wander in a long string: a prefix, nothing to validate
      continue;
    }
    ASSERT_EQ(out.finish_reason, FinishReason::STOP) << where << " error: " << out.error;
    EXPECT_TRUE(grammar_accepts(p.grammar, out.text)) << where;
    // The text must be UTF-8 to be JSON at all (the dump below would throw on anything else).
    try {
      (void)OJson(out.text).dump();
    } catch (const nlohmann::json::exception& e) {
      ADD_FAILURE() << "not UTF-8: " << where << " (" << e.what() << ")";
      continue;
    }
    cases[p.group]["outputs"].push_back(out.text);
    ++n_validated;
  }
  EXPECT_EQ((*engine)->stats().n_blocks_in_use, 0);

  OJson input = {{"cases", OJson::array()}};
  for (auto& [g, c] : cases) input["cases"].push_back(std::move(c));
  const std::string path = testing::temp_dir() + "/json_schema_suite_outputs.json";
  {
    std::ofstream file(path);
    file << input.dump();
  }
  const std::string modules = ajv_node_modules();
  const testing::CommandResult run =
      testing::run_shell("TRELLIS_NODE_MODULES=" + shell_quote(modules) + " timeout 120 node " +
                         shell_quote(script.string()) + " " + shell_quote(path) + " 2>&1");
  EXPECT_EQ(run.exit_code, 0) << "ajv rejects outputs the grammar allowed:\n" << run.output;
  const size_t brace = run.output.rfind("\n{");
  const OJson summary = OJson::parse(
      brace == std::string::npos ? run.output : run.output.substr(brace + 1), nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << run.output;
  if (verbose()) std::printf("%s", run.output.c_str());
  EXPECT_EQ(summary.value("outputs", -1), n_validated) << run.output;
  std::printf(
      "json schema suite (%s): %d schemas (of %zu), %d compiled, %d refused; %d outputs "
      "validated by ajv (%d failed; %d match several oneOf branches, read as anyOf), %d cut by "
      "length\n",
      suite.draft.c_str(), n_schemas, suite.groups.size(), n_compiled, n_refused, n_validated,
      summary.value("failed", -1), summary.value("oneOfOverlaps", -1), n_cut);
}

}  // namespace
}  // namespace trellis
