#include "server/embedding_protocol.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

namespace trellis {
namespace {

constexpr int64_t kVocab = 100;

ApiResult<EmbeddingRequest> parse(const std::string& body) {
  return parse_embedding_request(body, 64, kVocab, 8);
}

TEST(EmbeddingProtocol, ReadsEveryInputShape) {
  ApiResult<EmbeddingRequest> one = parse(R"({"input": "hello", "model": "m"})");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->texts, std::vector<std::string>{"hello"});
  EXPECT_EQ(one->model, "m");
  EXPECT_FALSE(one->tokens_given);

  ApiResult<EmbeddingRequest> many = parse(R"({"input": ["a", "b"]})");
  ASSERT_TRUE(many.ok());
  EXPECT_EQ(many->texts, (std::vector<std::string>{"a", "b"}));

  ApiResult<EmbeddingRequest> ids = parse(R"({"input": [1, 2, 3]})");
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(ids->tokens_given);
  EXPECT_EQ(ids->token_inputs, (std::vector<std::vector<TokenId>>{{1, 2, 3}}));

  ApiResult<EmbeddingRequest> id_arrays = parse(R"({"input": [[1], [4, 5]]})");
  ASSERT_TRUE(id_arrays.ok());
  EXPECT_EQ(id_arrays->token_inputs, (std::vector<std::vector<TokenId>>{{1}, {4, 5}}));

  ApiResult<EmbeddingRequest> options = parse(
      R"({"input": "x", "encoding_format": "base64", "dimensions": 16, "truncate": true,
          "user": "u-1"})");
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->encoding, EmbeddingEncoding::BASE64);
  EXPECT_EQ(options->dimensions, 16);
  EXPECT_TRUE(options->truncate);
}

void expect_refused(const std::string& body, const std::string& param) {
  ApiResult<EmbeddingRequest> r = parse(body);
  ASSERT_FALSE(r.ok()) << body;
  EXPECT_EQ(r.error().http_status, 400);
  EXPECT_EQ(r.error().param.value_or(""), param) << r.error().message;
}

TEST(EmbeddingProtocol, RefusesBadRequestsNamingTheField) {
  expect_refused(R"({})", "input");
  expect_refused(R"({"input": []})", "input");
  expect_refused(R"({"input": 5})", "input");
  expect_refused(R"({"input": ["a", 1]})", "input[1]");
  expect_refused(R"({"input": [[1], "a"]})", "input[1]");
  expect_refused(R"({"input": [1, 100]})", "input[1]");  // outside the vocab
  expect_refused(R"({"input": [[1], [2, -1]]})", "input[1][1]");
  expect_refused(R"({"input": ["a","a","a","a","a","a","a","a","a"]})", "input");  // > 8
  expect_refused(R"({"input": "a", "encoding_format": "int8"})", "encoding_format");
  expect_refused(R"({"input": "a", "dimensions": 0})", "dimensions");
  expect_refused(R"({"input": "a", "instruction": "query: "})", "instruction");
  EXPECT_FALSE(parse("not json").ok());
  EXPECT_FALSE(parse(std::string(100, '[') + std::string(100, ']')).ok());
}

TEST(EmbeddingProtocol, ReadsRerankRequestsOfJinaAndCohereShapes) {
  ApiResult<RerankRequest> jina = parse_rerank_request(
      R"({"model": "r", "query": "q", "documents": ["a", "b"], "top_n": 1,
          "return_documents": false})",
      64, 8);
  ASSERT_TRUE(jina.ok());
  EXPECT_EQ(jina->query, "q");
  EXPECT_EQ(jina->documents, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(jina->top_n, 1);
  EXPECT_FALSE(jina->return_documents);

  ApiResult<RerankRequest> cohere =
      parse_rerank_request(R"({"query": "q", "documents": [{"text": "a"}, "b"]})", 64, 8);
  ASSERT_TRUE(cohere.ok());
  EXPECT_EQ(cohere->documents, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(cohere->return_documents);

  for (const char* bad :
       {R"({"documents": ["a"]})", R"({"query": "q", "documents": []})",
        R"({"query": "q", "documents": [1]})", R"({"query": "q", "documents": [{"title": "a"}]})",
        R"({"query": "q", "documents": ["a"], "max_chunks_per_doc": 2})"}) {
    ApiResult<RerankRequest> r = parse_rerank_request(bad, 64, 8);
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(EmbeddingProtocol, Base64HoldsTheLittleEndianFloats) {
  const std::vector<float> values = {1.0f, -2.5f, 0.1f};
  const std::string text = base64_floats(values);
  EXPECT_EQ(text.size(), 16u);  // 12 bytes -> 16 characters
  // Decode by hand.
  auto sextet = [](char c) -> uint32_t {
    if (c >= 'A' && c <= 'Z') return static_cast<uint32_t>(c - 'A');
    if (c >= 'a' && c <= 'z') return static_cast<uint32_t>(c - 'a' + 26);
    if (c >= '0' && c <= '9') return static_cast<uint32_t>(c - '0' + 52);
    return c == '+' ? 62u : 63u;
  };
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < text.size(); i += 4) {
    const uint32_t chunk = sextet(text[i]) << 18 | sextet(text[i + 1]) << 12 |
                           sextet(text[i + 2]) << 6 | sextet(text[i + 3]);
    bytes.push_back(static_cast<uint8_t>(chunk >> 16));
    bytes.push_back(static_cast<uint8_t>(chunk >> 8));
    bytes.push_back(static_cast<uint8_t>(chunk));
  }
  ASSERT_EQ(bytes.size(), 12u);
  std::vector<float> decoded(3);
  std::memcpy(decoded.data(), bytes.data(), 12);
  EXPECT_EQ(decoded, values);
  EXPECT_EQ(base64_floats(std::vector<float>{1.0f}), "AACAPw==");  // 00 00 80 3f
}

TEST(EmbeddingProtocol, ResponsesHaveTheOpenAiAndRerankShapes) {
  const nlohmann::json e =
      nlohmann::json::parse(embeddings_response("m", {{0.5f, 0.25f}}, EmbeddingEncoding::FLOAT, 7));
  EXPECT_EQ(e["object"], "list");
  EXPECT_EQ(e["model"], "m");
  EXPECT_EQ(e["data"][0]["object"], "embedding");
  EXPECT_EQ(e["data"][0]["index"], 0);
  EXPECT_EQ(e["data"][0]["embedding"], nlohmann::json({0.5, 0.25}));
  EXPECT_EQ(e["usage"]["prompt_tokens"], 7);

  RerankRequest request;
  request.documents = {"a", "b"};
  const RerankResult results[] = {{1, 0.75f}, {0, 0.5f}};
  const nlohmann::json r = nlohmann::json::parse(rerank_response("m", request, results, 9));
  EXPECT_EQ(r["results"][0]["index"], 1);
  EXPECT_EQ(r["results"][0]["relevance_score"], 0.75);
  EXPECT_EQ(r["results"][0]["document"]["text"], "b");
  EXPECT_EQ(r["usage"]["total_tokens"], 9);
}

}  // namespace
}  // namespace trellis
