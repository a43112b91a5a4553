// The embedding endpoints of an in-process server on tiny synthesized encoders: every input
// shape gives the embedder's own vectors, errors name their field, rerank orders by score, and
// concurrent clients get the same bits as one alone.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "embed/embedder.h"
#include "model/encoder_synth.h"
#include "server/embedding_service.h"
#include "server_fixture.h"

namespace trellis {
namespace {

using testing::HttpReply;
using json = nlohmann::json;

std::string synth_encoder(Pooling pooling) {
  EncoderSynthOptions options;
  options.preset = find_encoder_preset("tiny");
  options.family = find_encoder_family("bert");
  options.pooling = pooling;
  options.type = DType::Q8_0;
  options.seed = 3;
  options.output_path =
      testing::temp_dir() + "/server-" + std::string(pooling_name(pooling)) + ".gguf";
  options.show_progress = false;
  const Status status = synthesize_encoder(options);
  EXPECT_TRUE(status.ok()) << status.error().message;
  return options.output_path;
}

// The server's embedder belongs to its queue's worker (an Embedder takes one caller at a time):
// the test computes what it expects with a second one opened on the same file.
class EmbeddingServer {
 public:
  explicit EmbeddingServer(Pooling pooling) {
    const std::string path = synth_encoder(pooling);
    Result<std::unique_ptr<Embedder>> served =
        Embedder::open(path, {.n_threads = 1, .max_batch_tokens = 1024});
    EXPECT_TRUE(served.ok()) << served.error().message;
    served_ = std::move(served).value();
    Result<std::unique_ptr<Embedder>> reference = Embedder::open(path, {.n_threads = 1});
    EXPECT_TRUE(reference.ok()) << reference.error().message;
    embedder_ = std::move(reference).value();
    ServerConfig config;
    config.port = 0;
    config.model_id = "enc";
    config.log_requests = false;
    service_ = std::make_unique<EmbeddingService>(*served_, config, 1024);
    server_ = std::make_unique<HttpServer>(config, EmbeddingService::endpoints());
    EXPECT_TRUE(server_->bind().ok());
    thread_ = std::thread([this] { server_->serve(); });
    server_->set_api(*service_);
  }
  ~EmbeddingServer() {
    server_->shutdown();
    thread_.join();
  }
  HttpReply post(const std::string& path, const json& body) const {
    return testing::loopback_post(server_->port(), path, body.dump());
  }
  // The test's own embedder of the same file (not the server's).
  Embedder& embedder() { return *embedder_; }

 private:
  std::unique_ptr<Embedder> served_;
  std::unique_ptr<Embedder> embedder_;
  std::unique_ptr<EmbeddingService> service_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

std::vector<float> floats_of(const json& embedding) {
  return embedding.get<std::vector<float>>();
}

// What the server should send for `text`: the embedder's vector, normalized.
std::vector<float> expected_vector(Embedder& e, const std::string& text) {
  std::vector<std::vector<TokenId>> inputs = {e.tokenize(text)};
  std::vector<float> v = (*e.embed(inputs))[0];
  normalize_l2(v);
  return v;
}

TEST(ServerEmbeddings, EveryInputShapeGivesTheEmbeddersVectors) {
  EmbeddingServer server(Pooling::MEAN);
  Embedder& e = server.embedder();
  const std::vector<float> hello = expected_vector(e, "hello world");
  const std::vector<float> cat = expected_vector(e, "the cat sat on the mat");

  HttpReply one = server.post("/v1/embeddings", {{"input", "hello world"}, {"model", "enc"}});
  ASSERT_EQ(one.status, 200) << one.body;
  const json body = one.json();
  EXPECT_EQ(body["object"], "list");
  EXPECT_EQ(body["model"], "enc");
  EXPECT_EQ(floats_of(body["data"][0]["embedding"]), hello);
  EXPECT_EQ(body["usage"]["prompt_tokens"], e.tokenize("hello world").size());

  HttpReply two =
      server.post("/v1/embeddings", {{"input", {"hello world", "the cat sat on the mat"}}});
  ASSERT_EQ(two.status, 200) << two.body;
  EXPECT_EQ(floats_of(two.json()["data"][0]["embedding"]), hello);
  EXPECT_EQ(floats_of(two.json()["data"][1]["embedding"]), cat);
  EXPECT_EQ(two.json()["data"][1]["index"], 1);

  const std::vector<TokenId> ids = e.tokenize("the cat sat on the mat");
  HttpReply tokens = server.post("/v1/embeddings", {{"input", ids}});
  ASSERT_EQ(tokens.status, 200) << tokens.body;
  EXPECT_EQ(floats_of(tokens.json()["data"][0]["embedding"]), cat);
  HttpReply token_arrays =
      server.post("/v1/embeddings", {{"input", {e.tokenize("hello world"), ids}}});
  ASSERT_EQ(token_arrays.status, 200) << token_arrays.body;
  EXPECT_EQ(floats_of(token_arrays.json()["data"][1]["embedding"]), cat);

  // dimensions: the first values, renormalized.
  HttpReply cut = server.post("/v1/embeddings", {{"input", "hello world"}, {"dimensions", 8}});
  ASSERT_EQ(cut.status, 200) << cut.body;
  const std::vector<float> first8 = floats_of(cut.json()["data"][0]["embedding"]);
  ASSERT_EQ(first8.size(), 8u);
  double norm = 0;
  for (float x : first8) norm += static_cast<double>(x) * x;
  EXPECT_NEAR(norm, 1.0, 1e-5);
  EXPECT_NEAR(first8[0] / first8[1], hello[0] / hello[1], 1e-4);
}

TEST(ServerEmbeddings, BadInputsGet400NamingTheInput) {
  EmbeddingServer server(Pooling::MEAN);
  std::string long_text;
  for (int i = 0; i < 600; ++i) long_text += "word ";
  struct Case {
    json body;
    const char* param;
  };
  const Case cases[] = {
      {{{"input", ""}}, "input"},
      {{{"input", {"fine", ""}}}, "input[1]"},
      {{{"input", {"fine", long_text}}}, "input[1]"},
      {{{"input", {{1, 2}, json::array()}}}, "input[1]"},
      {{{"input", "x"}, {"dimensions", 100000}}, "dimensions"},
      {{{"input", "x"}, {"temperature", 0}}, "temperature"},
  };
  for (const Case& c : cases) {
    HttpReply r = server.post("/v1/embeddings", c.body);
    EXPECT_EQ(r.status, 400) << c.body.dump();
    EXPECT_EQ(r.json()["error"]["param"], c.param) << r.body;
  }
  HttpReply truncated = server.post("/v1/embeddings", {{"input", long_text}, {"truncate", true}});
  EXPECT_EQ(truncated.status, 200) << truncated.body;
  EXPECT_EQ(truncated.json()["usage"]["prompt_tokens"], server.embedder().n_ctx());
  EXPECT_EQ(server.post("/v1/embeddings", {{"input", "x"}, {"model", "other"}}).status, 404);
  EXPECT_EQ(server.post("/v1/rerank", {{"query", "q"}, {"documents", {"a"}}}).status, 400);
}

TEST(ServerEmbeddings, ConcurrentClientsGetTheBitsOfOneAlone) {
  EmbeddingServer server(Pooling::MEAN);
  const std::vector<std::string> texts = {"a short one", "hello world",
                                          "once upon a time there was a little girl",
                                          "the cat sat on the mat", "what is the answer"};
  std::vector<std::vector<float>> alone;
  for (const std::string& t : texts) alone.push_back(expected_vector(server.embedder(), t));
  constexpr int kClients = 8;
  constexpr int kRounds = 6;
  std::vector<std::thread> clients;
  std::atomic<int> mismatches{0};
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int round = 0; round < kRounds; ++round) {
        const size_t i = static_cast<size_t>(c + round) % texts.size();
        HttpReply r =
            server.post("/v1/embeddings", {{"input", {texts[i], texts[(i + 1) % texts.size()]}}});
        if (r.status != 200 || floats_of(r.json()["data"][0]["embedding"]) != alone[i] ||
            floats_of(r.json()["data"][1]["embedding"]) != alone[(i + 1) % texts.size()]) {
          ++mismatches;
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(ServerEmbeddings, RerankOrdersDocumentsByTheModelsScores) {
  EmbeddingServer server(Pooling::RANK);
  Embedder& e = server.embedder();
  const std::string query = "what is the capital of france?";
  const std::vector<std::string> docs = {"hello world", "paris is the capital of france",
                                         "the cat sat on the mat", "a little girl named lily"};
  std::vector<std::vector<TokenId>> pairs;
  for (const std::string& d : docs) pairs.push_back(e.tokenize_pair(query, d));
  const std::vector<std::vector<float>> scores = *e.embed(pairs);

  HttpReply r = server.post("/v1/rerank", {{"query", query}, {"documents", docs}, {"top_n", 3}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json results = r.json()["results"];
  ASSERT_EQ(results.size(), 3u);
  float previous = INFINITY;
  for (const json& item : results) {
    const auto index = item["index"].get<size_t>();
    EXPECT_EQ(item["relevance_score"].get<float>(), scores[index][0]);
    EXPECT_EQ(item["document"]["text"], docs[index]);
    EXPECT_LE(item["relevance_score"].get<float>(), previous);
    previous = item["relevance_score"].get<float>();
  }
  // Cohere's shape: documents as objects, no documents back.
  json objects = json::array();
  for (const std::string& d : docs) objects.push_back({{"text", d}});
  HttpReply cohere = server.post(
      "/v2/rerank", {{"query", query}, {"documents", objects}, {"return_documents", false}});
  ASSERT_EQ(cohere.status, 200) << cohere.body;
  EXPECT_EQ(cohere.json()["results"].size(), docs.size());
  EXPECT_FALSE(cohere.json()["results"][0].contains("document"));
  EXPECT_EQ(server.post("/v1/rerank", {{"query", ""}, {"documents", docs}}).status, 400);
  EXPECT_EQ(server.post("/v1/embeddings", {{"input", "x"}}).status, 400);
}

}  // namespace
}  // namespace trellis
