// llama.cpp's tokenizer test vectors (made with HF tokenizers) for every byte-level BPE vocab in
// ../shared/tokenizer-vectors: exact token ids, and lossless decoding.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gguf/gguf_file.h"
#include "test_support.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/vocab.h"

namespace trellis {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Cases are separated by (and the file ends with) "\n__ggml_vocab_test__\n".
std::vector<std::string> read_cases(const std::string& path) {
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::string data = read_file(path);
  std::vector<std::string> cases;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t next = data.find(separator, pos);
    if (next == std::string::npos) {
      cases.push_back(data.substr(pos));
      break;
    }
    cases.push_back(data.substr(pos, next - pos));
    pos = next + separator.size();
  }
  return cases;
}

// One line per case; each id is preceded by a space.
std::vector<std::vector<TokenId>> read_expected(const std::string& path) {
  std::vector<std::vector<TokenId>> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<TokenId> ids;
    TokenId id = 0;
    while (fields >> id) ids.push_back(id);
    out.push_back(std::move(ids));
  }
  return out;
}

std::string ids_to_string(const std::vector<TokenId>& ids) {
  std::string out;
  for (TokenId id : ids) {
    out += ' ';
    out += std::to_string(id);
  }
  return out;
}

class BpeVectorsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(BpeVectorsTest, MatchesReferenceIdsAndDecodesLosslessly) {
  TRELLIS_REQUIRE_SHARED();
  const std::string base =
      testing::shared_dir() + "/tokenizer-vectors/ggml-vocab-" + GetParam() + ".gguf";

  Result<GgufFile> file = GgufFile::open(base);
  ASSERT_TRUE(file.ok()) << file.error().message;
  Result<Vocab> vocab = load_vocab(*file);
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  ASSERT_EQ(vocab->kind, TokenizerKind::BPE);
  Result<std::unique_ptr<Tokenizer>> tokenizer = make_bpe_tokenizer(std::move(vocab).value());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;

  std::vector<std::string> cases = read_cases(base + ".inp");
  std::vector<std::vector<TokenId>> expected = read_expected(base + ".out");
  ASSERT_EQ(cases.size(), 46u);
  ASSERT_EQ(expected.size(), cases.size());

  int n_passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<TokenId> ids = (*tokenizer)
                                   ->encode(cases[i], /*add_special=*/false,
                                            /*parse_special=*/false);
    EXPECT_EQ(ids_to_string(ids), ids_to_string(expected[i])) << "case " << i << ": " << cases[i];
    std::string decoded;
    for (TokenId id : ids) decoded += (*tokenizer)->token_to_piece(id, /*render_special=*/false);
    EXPECT_EQ(decoded, cases[i]) << "case " << i << " does not decode to its text";
    if (ids == expected[i] && decoded == cases[i]) ++n_passed;
  }
  std::cout << GetParam() << ": " << n_passed << "/" << cases.size() << " cases pass\n";
}

// encode is const and shares no scratch state, so concurrent calls agree with a serial one.
TEST(BpeVectorsConcurrencyTest, ConcurrentEncodesAgree) {
  TRELLIS_REQUIRE_SHARED();
  const std::string base = testing::shared_dir() + "/tokenizer-vectors/ggml-vocab-llama-bpe.gguf";
  Result<GgufFile> file = GgufFile::open(base);
  ASSERT_TRUE(file.ok()) << file.error().message;
  Result<Vocab> vocab = load_vocab(*file);
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  Result<std::unique_ptr<Tokenizer>> tokenizer = make_bpe_tokenizer(std::move(vocab).value());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;

  std::string text;
  for (const std::string& c : read_cases(base + ".inp")) text += c;
  const std::vector<TokenId> expected = (*tokenizer)->encode(text, true, true);
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < mismatches.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        if ((*tokenizer)->encode(text, true, true) != expected) ++mismatches[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int count : mismatches) EXPECT_EQ(count, 0);
}

INSTANTIATE_TEST_SUITE_P(AllBpeVocabs, BpeVectorsTest,
                         ::testing::Values("llama-bpe", "qwen2", "gpt-2", "deepseek-llm",
                                           "deepseek-coder", "falcon", "mpt", "starcoder",
                                           "refact"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace trellis
