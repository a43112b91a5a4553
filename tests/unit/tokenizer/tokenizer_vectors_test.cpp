// llama.cpp's tokenizer test vectors: every vocab in shared/tokenizer-vectors (SentencePiece,
// byte-level BPE, WordPiece) and every model in shared/models with .inp/.out files.
//
// .inp: cases separated by "\n__ggml_vocab_test__\n", the file ending with one (46 cases).
// .out: one line per case, each id preceded by a space; tokenized with add_special = false and
// parse_special = false.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace trellis {
namespace {

namespace fs = std::filesystem;

struct VectorFile {
  std::string name;  // test name: the file stem without "ggml-vocab-", '-' and '.' as '_'
  std::string gguf_path;
};

// Shown by GoogleTest (and CTest) in place of the struct's bytes.
void PrintTo(const VectorFile& file, std::ostream* out) {
  *out << file.gguf_path;
}

std::string test_name(std::string stem) {
  if (stem.rfind("ggml-vocab-", 0) == 0) stem = stem.substr(11);
  for (char& c : stem) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return stem;
}

// Every .gguf with .inp and .out beside it, sorted; one placeholder when ../shared is absent so
// that the suite still instantiates (and skips).
std::vector<VectorFile> vector_files() {
  std::vector<VectorFile> files;
  if (testing::have_shared_dir()) {
    for (const char* dir : {"tokenizer-vectors", "models"}) {
      fs::path folder = fs::path(testing::shared_dir()) / dir;
      if (!fs::is_directory(folder)) continue;
      for (const auto& entry : fs::directory_iterator(folder)) {
        const fs::path& path = entry.path();
        if (path.extension() != ".gguf") continue;
        if (!fs::exists(path.string() + ".inp") || !fs::exists(path.string() + ".out")) continue;
        files.push_back({test_name(path.stem().string()), path.string()});
      }
    }
    std::sort(files.begin(), files.end(),
              [](const VectorFile& a, const VectorFile& b) { return a.name < b.name; });
  }
  if (files.empty()) files.push_back({"shared_dir_absent", ""});
  return files;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Splits as llama.cpp's test-tokenizer-0: no empty case after the trailing separator.
std::vector<std::string> read_cases(const std::string& path) {
  const std::string separator = "\n__ggml_vocab_test__\n";
  const std::string text = read_file(path);
  std::vector<std::string> cases;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = text.find(separator, pos);
    if (next == std::string::npos) {
      cases.push_back(text.substr(pos));
      break;
    }
    cases.push_back(text.substr(pos, next - pos));
    pos = next + separator.size();
  }
  return cases;
}

std::vector<std::vector<TokenId>> read_expected(const std::string& path) {
  std::vector<std::vector<TokenId>> lines;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream numbers(line);
    std::vector<TokenId> ids;
    TokenId id;
    while (numbers >> id) ids.push_back(id);
    lines.push_back(std::move(ids));
  }
  return lines;
}

// The case text with control characters and non-ASCII bytes escaped, for failure messages.
std::string printable(const std::string& text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "\"";
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7F) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;  // printable ASCII and UTF-8 bytes, which the terminal renders
    }
  }
  return out + "\"";
}

std::string ids_text(const std::vector<TokenId>& ids) {
  std::string out;
  for (TokenId id : ids) out.append(" ").append(std::to_string(id));
  return out.empty() ? "(none)" : out;
}

class TokenizerVectorsTest : public ::testing::TestWithParam<VectorFile> {
 protected:
  // Loads the vocab and tokenizer of the parameter's file, or skips without ../shared.
  void SetUp() override {
    TRELLIS_REQUIRE_SHARED();
    const VectorFile& param = GetParam();
    ASSERT_FALSE(param.gguf_path.empty());
    Result<GgufFile> file = GgufFile::open(param.gguf_path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    Result<Vocab> vocab = load_vocab(*file);
    ASSERT_TRUE(vocab.ok()) << vocab.error().message;
    Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(*vocab));
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
    tokenizer_ = std::move(*tokenizer);
    cases_ = read_cases(param.gguf_path + ".inp");
    expected_ = read_expected(param.gguf_path + ".out");
    ASSERT_EQ(cases_.size(), expected_.size()) << "cases in .inp vs lines in .out";
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<std::string> cases_;
  std::vector<std::vector<TokenId>> expected_;
};

TEST_P(TokenizerVectorsTest, EncodeMatchesEveryCase) {
  EXPECT_EQ(cases_.size(), 46u);
  size_t n_passed = 0;
  for (size_t i = 0; i < cases_.size(); ++i) {
    std::vector<TokenId> ids = tokenizer_->encode(cases_[i], /*add_special=*/false,
                                                  /*parse_special=*/false);
    if (ids == expected_[i]) {
      ++n_passed;
      continue;
    }
    size_t first_diff = 0;
    while (first_diff < ids.size() && first_diff < expected_[i].size() &&
           ids[first_diff] == expected_[i][first_diff]) {
      ++first_diff;
    }
    ADD_FAILURE() << "case " << i << " " << printable(cases_[i]) << "\n  expected"
                  << ids_text(expected_[i]) << "\n  actual  " << ids_text(ids)
                  << "\n  first difference at token " << first_diff;
  }
  RecordProperty("cases_passed", static_cast<int>(n_passed));
  std::cout << "[ vectors  ] " << GetParam().name << ": " << n_passed << "/" << cases_.size()
            << " cases pass\n";
}

// decode(encode(text)) gives the text back. SPM keeps the dummy prefix: " " + text when
// add_space_prefix and the text is not empty. That holds when every character is a token or has
// byte tokens (true for these vocabs) and no CONTROL/UNKNOWN token is produced, since decode()
// concatenates pieces and strips nothing. Byte-level BPE is lossless: exactly the text.
TEST_P(TokenizerVectorsTest, DecodeOfEncodeRestoresTheText) {
  if (tokenizer_->vocab().kind == TokenizerKind::WORDPIECE) {
    // WordPiece is lossy (lowercase, no accents, whitespace collapsed): what holds is that the
    // decoded text encodes to the same tokens, wherever no word became the unknown token.
    int checked = 0;
    for (size_t i = 0; i < cases_.size(); ++i) {
      const std::vector<TokenId> ids = tokenizer_->encode(cases_[i], false, false);
      if (std::find(ids.begin(), ids.end(), tokenizer_->vocab().unk_id) != ids.end()) continue;
      EXPECT_EQ(tokenizer_->encode(tokenizer_->decode(ids), false, false), ids)
          << "case " << i << " " << printable(cases_[i]);
      ++checked;
    }
    EXPECT_GT(checked, 30);
    return;
  }
  const bool prefix =
      tokenizer_->vocab().kind == TokenizerKind::SPM && tokenizer_->vocab().add_space_prefix;
  for (size_t i = 0; i < cases_.size(); ++i) {
    const std::string& text = cases_[i];
    std::vector<TokenId> ids = tokenizer_->encode(text, false, false);
    std::string expected = (prefix && !text.empty()) ? std::string(" ").append(text) : text;
    EXPECT_EQ(tokenizer_->decode(ids), expected) << "case " << i << " " << printable(text);
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, TokenizerVectorsTest, ::testing::ValuesIn(vector_files()),
                         [](const ::testing::TestParamInfo<VectorFile>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace trellis
