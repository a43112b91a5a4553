// `trellis serve` with several models (--models-dir, -m NAME=FILE): each loads on first use, the
// least recently used unloads beyond --models-max, a model unloaded and loaded again answers
// exactly as before, a file that fails to load fails only its own requests, unknown models get a
// 404 naming the others, and the metrics carry a model label.
#include <gtest/gtest.h>

#include <fstream>

#include "cli_server.h"

namespace trellis::testing {
namespace {

using namespace cli_server;

// A folder of models: two tiny generators (different weights), an encoder, and a broken file.
std::string models_dir() {
  const std::string dir = temp_dir() + "/hub-models";
  if (fs::exists(dir + "/enc.gguf")) return dir;
  fs::create_directories(dir);
  const std::string cli = TRELLIS_CLI_PATH;
  for (const auto& [name, seed] : {std::pair{"alpha", 5}, std::pair{"beta", 6}}) {
    const CommandResult synth = run_shell(cli + " model synth --preset tiny --type q8_0 --seed " +
                                          std::to_string(seed) + " -o " + dir + "/" + name +
                                          ".gguf 2>&1");
    EXPECT_EQ(synth.exit_code, 0) << synth.output;
  }
  std::ofstream(dir + "/broken.gguf") << "GGUF but not really";
  std::ofstream(dir + "/notes.txt") << "not a model";
  const CommandResult enc = run_shell(cli + " model synth --arch bert --preset tiny --type q8_0 " +
                                      "--seed 3 -o " + dir + "/enc.gguf 2>&1");
  EXPECT_EQ(enc.exit_code, 0) << enc.output;
  return dir;
}

std::unique_ptr<Server> serve(const std::vector<std::string>& args, const std::string& name,
                              std::string& error) {
  std::vector<std::string> argv = {TRELLIS_CLI_PATH, "serve", "--port", "0", "-t", "1",
                                   "--chat-template", "chatml"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto server = Server::command(argv, name, "listening on http://");
  error = server->start();
  return server;
}

json complete(Server& server, const std::string& model) {
  const json body = {{"model", model}, {"prompt", "Once upon a time"}, {"max_tokens", 8},
                     {"temperature", 0}};
  const HttpResult reply = curl("POST", server.url("/v1/completions"), body.dump());
  EXPECT_EQ(reply.status, 200) << reply.body;
  return reply.json_body();
}

std::map<std::string, bool> loaded(Server& server) {
  std::map<std::string, bool> out;
  const json models = curl("GET", server.url("/v1/models")).json_body();
  for (const json& m : models["data"])
    out[m["id"].get<std::string>()] = m["loaded"].get<bool>();
  return out;
}

TEST(ServerModels, LoadsOnFirstUseAndUnloadsTheLeastRecentlyUsed) {
  REQUIRE_CURL();
  std::string error;
  auto server = serve({"--models-dir", models_dir(), "--models-max", "2"}, "hub", error);
  ASSERT_EQ(error, "");

  const json models = curl("GET", server->url("/v1/models")).json_body();
  ASSERT_EQ(models["data"].size(), 4u) << models.dump();  // notes.txt is not a model
  EXPECT_EQ(models["data"][0]["id"], "alpha");
  EXPECT_EQ(models["data"][0]["kind"], "generation");
  EXPECT_EQ(models["data"][2]["kind"], "");  // broken: not readable
  EXPECT_EQ(models["data"][3]["kind"], "embedding");
  EXPECT_EQ(loaded(*server), (std::map<std::string, bool>{
                                 {"alpha", false}, {"beta", false}, {"broken", false}, {"enc", false}}));

  const json first = complete(*server, "alpha");
  EXPECT_EQ(first["model"], "alpha");
  const json other = complete(*server, "beta");
  EXPECT_EQ(other["model"], "beta");
  EXPECT_NE(first["choices"][0]["text"], other["choices"][0]["text"]);  // two different models
  const HttpResult embedded = curl("POST", server->url("/v1/embeddings"),
                                   json{{"model", "enc"}, {"input", "hello"}}.dump());
  EXPECT_EQ(embedded.status, 200) << embedded.body;
  EXPECT_EQ(loaded(*server), (std::map<std::string, bool>{
                                 {"alpha", false}, {"beta", true}, {"broken", false}, {"enc", true}}));
  EXPECT_NE(server->log().find("unloaded alpha"), std::string::npos) << server->log();

  // Loaded again, the model answers token for token as before.
  EXPECT_EQ(complete(*server, "alpha")["choices"][0]["text"], first["choices"][0]["text"]);
  EXPECT_EQ(loaded(*server)["beta"], false);

  const std::string metrics = curl("GET", server->url("/metrics")).body;
  EXPECT_NE(metrics.find("trellis:model_unloads_total 2"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("{model=\"alpha\""), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("{model=\"enc\""), std::string::npos) << metrics;

  // SIGTERM unloads every model and exits cleanly.
  ASSERT_TRUE(server->process().send_signal(SIGTERM));
  EXPECT_EQ(server->process().wait_exit(kExitDeadline), 0) << server->log();
}

TEST(ServerModels, BadModelsFailOnlyTheirOwnRequests) {
  REQUIRE_CURL();
  std::string error;
  auto server = serve({"--models-dir", models_dir()}, "hub-bad", error);
  ASSERT_EQ(error, "");
  const HttpResult broken = curl("POST", server->url("/v1/completions"),
                                 json{{"model", "broken"}, {"prompt", "x"}}.dump());
  EXPECT_EQ(broken.status, 500);
  EXPECT_NE(broken.body.find("`broken` failed to load"), std::string::npos) << broken.body;
  complete(*server, "alpha");
  const HttpResult unknown = curl("POST", server->url("/v1/completions"),
                                  json{{"model", "gamma"}, {"prompt", "x"}}.dump());
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.find("`alpha`, `beta`, `broken`, `enc`"), std::string::npos)
      << unknown.body;
  const HttpResult chat_to_encoder =
      curl("POST", server->url("/v1/chat/completions"),
           json{{"model", "enc"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}}.dump());
  EXPECT_EQ(chat_to_encoder.status, 400);
  EXPECT_NE(chat_to_encoder.body.find("does not serve /v1/chat/completions"), std::string::npos)
      << chat_to_encoder.body;
  EXPECT_EQ(curl("POST", server->url("/v1/completions"), json{{"prompt", "x"}}.dump()).status, 400);
}

TEST(ServerModels, NamedModelsOnTheCommandLine) {
  REQUIRE_CURL();
  const std::string dir = models_dir();
  std::string error;
  auto server = serve({"-m", "one=" + dir + "/alpha.gguf", "-m", dir + "/beta.gguf"}, "hub-named",
                      error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(complete(*server, "one")["model"], "one");
  EXPECT_EQ(complete(*server, "beta")["model"], "beta");
}

TEST(ServerModels, CommandLineMistakesExitWithOneLine) {
  const std::string dir = models_dir();
  const std::string cli = std::string(TRELLIS_CLI_PATH) + " serve --port 0 ";
  const CommandResult twice =
      run_shell(cli + "-m alpha=" + dir + "/beta.gguf --models-dir " + dir + " 2>&1");
  EXPECT_EQ(twice.exit_code, 1);
  EXPECT_NE(twice.output.find("the model name 'alpha' is given twice"), std::string::npos)
      << twice.output;
  const std::string empty = temp_dir() + "/hub-empty";
  fs::create_directories(empty);
  const CommandResult none = run_shell(cli + "--models-dir " + empty + " 2>&1");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.output.find("no .gguf files there"), std::string::npos) << none.output;
  const CommandResult missing = run_shell(cli + "-m a=/nonexistent.gguf -m b=" + dir +
                                          "/alpha.gguf 2>&1");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("/nonexistent.gguf"), std::string::npos) << missing.output;
  const CommandResult bad_name = run_shell(cli + "-m 'a b=" + dir + "/alpha.gguf' 2>&1");
  EXPECT_EQ(bad_name.exit_code, 1);
  EXPECT_NE(bad_name.output.find("may hold only"), std::string::npos) << bad_name.output;
  const CommandResult memory =
      run_shell(cli + "--models-dir " + dir + " --models-memory lots 2>&1");
  EXPECT_EQ(memory.exit_code, 1);
  EXPECT_NE(memory.output.find("--models-memory"), std::string::npos) << memory.output;
}

}  // namespace
}  // namespace trellis::testing
