#include "server/embedding_protocol.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include "server/json_fields.h"

namespace trellis {
namespace {

// A field not in `known` is refused by name: accepting it silently would answer another question.
ApiResult<bool> refuse_unknown_fields(const OrderedJson& body,
                                      std::span<const std::string_view> known) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return invalid_request_error(
          it.key() + " is not supported (this endpoint reads " + list + ")", it.key());
    }
  }
  return true;
}

// One input given as token ids: every item an id of the vocab.
std::optional<std::vector<TokenId>> read_token_array(FieldReader& reader, const OrderedJson& array,
                                                     const std::string& path, int64_t n_vocab) {
  std::vector<TokenId> tokens;
  tokens.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    std::optional<int64_t> id =
        reader.integer_value(array[i], path + "[" + std::to_string(i) + "]", 0, n_vocab - 1);
    if (!id) return std::nullopt;
    tokens.push_back(static_cast<TokenId>(*id));
  }
  return tokens;
}

// input: "text" | ["text", ...] | [id, ...] | [[id, ...], ...]; never empty.
void read_input(FieldReader& reader, const OrderedJson& input, int64_t n_vocab, int64_t max_inputs,
                EmbeddingRequest& request) {
  const char* kExpected =
      "a string, an array of strings, an array of token ids or an array of "
      "arrays of token ids";
  if (input.is_string()) {
    request.texts.push_back(input.get<std::string>());
    return;
  }
  if (!input.is_array()) {
    reader.type_error("input", kExpected, input);
    return;
  }
  if (input.empty()) {
    reader.fail("input must not be empty", "input");
    return;
  }
  if (static_cast<int64_t>(input.size()) > max_inputs) {
    reader.fail("input has " + std::to_string(input.size()) + " items, more than the " +
                    std::to_string(max_inputs) + " a request may hold",
                "input");
    return;
  }
  if (input[0].is_number()) {  // one input of token ids
    request.tokens_given = true;
    if (auto tokens = read_token_array(reader, input, "input", n_vocab)) {
      request.token_inputs.push_back(std::move(*tokens));
    }
    return;
  }
  request.tokens_given = input[0].is_array();
  for (size_t i = 0; i < input.size() && !reader.failed(); ++i) {
    const std::string path = "input[" + std::to_string(i) + "]";
    const OrderedJson& item = input[i];
    if (request.tokens_given && item.is_array()) {
      if (auto tokens = read_token_array(reader, item, path, n_vocab)) {
        request.token_inputs.push_back(std::move(*tokens));
      }
    } else if (!request.tokens_given && item.is_string()) {
      request.texts.push_back(item.get<std::string>());
    } else {
      reader.type_error(path, request.tokens_given ? "an array of token ids" : "a string", item);
    }
  }
}

}  // namespace

ApiResult<EmbeddingRequest> parse_embedding_request(std::string_view body_text,
                                                    int32_t max_json_depth, int64_t n_vocab,
                                                    int64_t max_inputs) {
  ApiResult<OrderedJson> body = parse_body(body_text, max_json_depth);
  if (!body.ok()) return body.error();
  static constexpr std::array<std::string_view, 6> kKnown = {
      "input", "model", "encoding_format", "dimensions", "user", "truncate"};
  TRELLIS_TRY(refuse_unknown_fields(*body, kKnown));
  FieldReader reader;
  EmbeddingRequest request;
  request.model = reader.string(*body, "model").value_or("");
  const std::string encoding = reader.string(*body, "encoding_format").value_or("float");
  request.dimensions = reader.integer(*body, "dimensions", 1, kInt32Max);
  request.truncate = reader.boolean(*body, "truncate").value_or(false);
  reader.string(*body, "user");  // an end-user id for abuse monitoring: accepted, not used
  const OrderedJson* input = reader.find(*body, "input");
  if (reader.failed()) return reader.take_error();
  if (input == nullptr) return invalid_request_error("input is required", "input");
  read_input(reader, *input, n_vocab, max_inputs, request);
  if (reader.failed()) return reader.take_error();
  if (encoding == "base64") {
    request.encoding = EmbeddingEncoding::BASE64;
  } else if (encoding != "float") {
    return invalid_request_error("encoding_format must be float or base64, got '" + encoding + "'",
                                 "encoding_format");
  }
  return request;
}

ApiResult<RerankRequest> parse_rerank_request(std::string_view body_text, int32_t max_json_depth,
                                              int64_t max_inputs) {
  ApiResult<OrderedJson> body = parse_body(body_text, max_json_depth);
  if (!body.ok()) return body.error();
  static constexpr std::array<std::string_view, 6> kKnown = {
      "model", "query", "documents", "top_n", "return_documents", "truncate"};
  TRELLIS_TRY(refuse_unknown_fields(*body, kKnown));
  FieldReader reader;
  RerankRequest request;
  request.model = reader.string(*body, "model").value_or("");
  std::optional<std::string> query = reader.string(*body, "query");
  request.top_n = reader.integer(*body, "top_n", 1, kInt32Max);
  request.return_documents = reader.boolean(*body, "return_documents").value_or(true);
  request.truncate = reader.boolean(*body, "truncate").value_or(false);
  const OrderedJson* documents = reader.find(*body, "documents");
  if (reader.failed()) return reader.take_error();
  if (!query) return invalid_request_error("query is required (a string)", "query");
  request.query = std::move(*query);
  if (documents == nullptr || !documents->is_array() || documents->empty()) {
    return invalid_request_error("documents must be a non-empty array of strings", "documents");
  }
  if (static_cast<int64_t>(documents->size()) > max_inputs) {
    return invalid_request_error("documents has " + std::to_string(documents->size()) +
                                     " items, more than the " + std::to_string(max_inputs) +
                                     " a request may hold",
                                 "documents");
  }
  for (size_t i = 0; i < documents->size(); ++i) {
    const OrderedJson& doc = (*documents)[i];
    const std::string path = "documents[" + std::to_string(i) + "]";
    // Cohere's and Jina's clients may send {"text": ...} objects.
    if (doc.is_object()) {
      std::optional<std::string> text = reader.string(doc, "text", path + ".text");
      if (reader.failed()) return reader.take_error();
      if (!text) return invalid_request_error(path + ".text is required", path + ".text");
      request.documents.push_back(std::move(*text));
    } else if (doc.is_string()) {
      request.documents.push_back(doc.get<std::string>());
    } else {
      reader.type_error(path, "a string or an object with text", doc);
      return reader.take_error();
    }
  }
  return request;
}

std::string base64_floats(std::span<const float> values) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits = std::bit_cast<uint32_t>(values[i]);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<uint8_t>(bits >> (8 * b));
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t chunk = (uint32_t{bytes[i]} << 16) |
                           (i + 1 < bytes.size() ? uint32_t{bytes[i + 1]} << 8 : 0) |
                           (i + 2 < bytes.size() ? uint32_t{bytes[i + 2]} : 0);
    out += kAlphabet[(chunk >> 18) & 63];
    out += kAlphabet[(chunk >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(chunk >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[chunk & 63] : '=';
  }
  return out;
}

std::string embeddings_response(const std::string& model,
                                const std::vector<std::vector<float>>& vectors,
                                EmbeddingEncoding encoding, int64_t n_prompt_tokens) {
  nlohmann::json data = nlohmann::json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    nlohmann::json item = {{"object", "embedding"}, {"index", i}};
    if (encoding == EmbeddingEncoding::BASE64) {
      item["embedding"] = base64_floats(vectors[i]);
    } else {
      item["embedding"] = vectors[i];
    }
    data.push_back(std::move(item));
  }
  const nlohmann::json out = {
      {"object", "list"},
      {"data", std::move(data)},
      {"model", model},
      {"usage", {{"prompt_tokens", n_prompt_tokens}, {"total_tokens", n_prompt_tokens}}}};
  return out.dump();
}

std::string rerank_response(const std::string& model, const RerankRequest& request,
                            std::span<const RerankResult> results, int64_t n_prompt_tokens) {
  nlohmann::json items = nlohmann::json::array();
  for (const RerankResult& r : results) {
    nlohmann::json item = {{"index", r.index}, {"relevance_score", r.relevance_score}};
    if (request.return_documents) {
      item["document"] = {{"text", request.documents[static_cast<size_t>(r.index)]}};
    }
    items.push_back(std::move(item));
  }
  const nlohmann::json out = {
      {"object", "list"},
      {"model", model},
      {"results", std::move(items)},
      {"usage", {{"prompt_tokens", n_prompt_tokens}, {"total_tokens", n_prompt_tokens}}}};
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace trellis
