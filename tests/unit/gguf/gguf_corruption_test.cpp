// Malformed GGUF input is rejected with a clear message naming the file, never a crash or an
// out-of-bounds read (the sanitizer build checks the latter).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "gguf/gguf_file.h"
#include "test_support.h"

namespace trellis {
namespace {

// Builds raw GGUF bytes field by field, so each test can break exactly one thing.
class GgufBytes {
 public:
  GgufBytes& u8(uint8_t v) { return raw(&v, 1); }
  GgufBytes& u32(uint32_t v) { return raw(&v, 4); }
  GgufBytes& u64(uint64_t v) { return raw(&v, 8); }
  GgufBytes& str(const std::string& s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  GgufBytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return u32(kGgufMagic).u32(version).u64(n_tensors).u64(n_kv);
  }
  GgufBytes& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(4).u32(v); }
  // One tensor info: name, dims, type, offset.
  GgufBytes& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                    uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  GgufBytes& pad_to(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(0);
    return *this;
  }
  GgufBytes& zeros(size_t n) {
    bytes.insert(bytes.end(), n, 0);
    return *this;
  }
  std::vector<uint8_t> bytes;

 private:
  GgufBytes& raw(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
  }
};

// Parses and expects failure with a message that names the file and contains `fragment`.
void expect_rejected(const std::vector<uint8_t>& bytes, const std::string& fragment) {
  Result<GgufFile> file = GgufFile::parse(bytes, "bad.gguf");
  ASSERT_FALSE(file.ok()) << "accepted a file that should fail with: " << fragment;
  EXPECT_EQ(file.error().message.rfind("bad.gguf: ", 0), 0u) << file.error().message;
  EXPECT_NE(file.error().message.find(fragment), std::string::npos)
      << "message '" << file.error().message << "' lacks '" << fragment << "'";
}

TEST(GgufCorruption, ValidHandBuiltFileIsAccepted) {
  GgufBytes b;
  b.header(1, 1).kv_u32("general.alignment", 32).tensor("t", {8}, 0, 0).pad_to(32).zeros(32);
  Result<GgufFile> file = GgufFile::parse(b.bytes, "ok.gguf");
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->tensors()[0].n_bytes, 32u);
}

TEST(GgufCorruption, HeaderProblems) {
  expect_rejected({}, "file too small");
  expect_rejected(GgufBytes().u32(0x12345678).u32(3).u64(0).u64(0).bytes, "bad magic");
  expect_rejected(GgufBytes().header(0, 0, 1).bytes, "version 1 is not supported");
  expect_rejected(GgufBytes().header(0, 0, 99).bytes, "unsupported GGUF version 99");
  expect_rejected(GgufBytes().header(0, 0, 0x03000000).bytes, "big-endian");
  expect_rejected(GgufBytes().u32(kGgufMagic).u32(3).u64(0).bytes, "truncated file");
  expect_rejected(GgufBytes().header(0, 1u << 30).bytes, "metadata count");
  expect_rejected(GgufBytes().header(~0ull, 0).bytes, "tensor count");
}

TEST(GgufCorruption, MetadataProblems) {
  expect_rejected(GgufBytes().header(0, 1).u64(1000).zeros(20).bytes,
                  "metadata key length 1000 runs past");
  expect_rejected(GgufBytes().header(0, 1).str("k").u32(13).u32(0).bytes, "unknown value type 13");
  expect_rejected(GgufBytes().header(0, 1).str("k").u32(8).u64(~0ull).bytes, "string value length");
  expect_rejected(GgufBytes().header(0, 1).str("k").u32(9).u32(4).u64(1ull << 40).bytes,
                  "array length");
  expect_rejected(GgufBytes().header(0, 1).str("k").u32(9).u32(77).u64(1).bytes,
                  "unknown array item type 77");
  expect_rejected(GgufBytes().header(0, 1).str("k").u32(7).u8(2).bytes, "invalid bool");
  expect_rejected(GgufBytes().header(0, 2).kv_u32("k", 1).kv_u32("k", 2).bytes,
                  "duplicate metadata key 'k'");
  expect_rejected(GgufBytes().header(0, 1).kv_u32("general.alignment", 24).bytes,
                  "not a power of two");
  // Arrays of arrays nested deeper than any real file.
  GgufBytes deep;
  deep.header(0, 1).str("k").u32(9);
  for (int i = 0; i < 20; ++i) deep.u32(9).u64(1);
  deep.u32(4).u64(0);
  expect_rejected(deep.bytes, "nested too deeply");
}

TEST(GgufCorruption, TensorInfoProblems) {
  auto one_tensor = [](std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    GgufBytes b;
    b.header(1, 0).tensor("t", std::move(dims), type, offset).pad_to(32).zeros(64);
    return b.bytes;
  };
  expect_rejected(one_tensor({8}, 200, 0), "unknown tensor type 200");
  expect_rejected(one_tensor({8, 1, 1, 1, 1}, 0, 0), "5 dimensions");
  expect_rejected(one_tensor({1ull << 40, 1ull << 40}, 0, 0), "absurd dimensions");
  expect_rejected(one_tensor({~0ull}, 0, 0), "absurd dimensions");
  expect_rejected(one_tensor({20}, 2, 0), "not a multiple of the q4_0 block size");
  expect_rejected(one_tensor({8}, 0, 16), "not aligned");
  expect_rejected(one_tensor({1000}, 0, 0), "runs past the end of the file");
  expect_rejected(one_tensor({8}, 0, 1ull << 62), "runs past the end of the file");

  GgufBytes dup;
  dup.header(2, 0).tensor("t", {8}, 0, 0).tensor("t", {8}, 0, 32).pad_to(32).zeros(64);
  expect_rejected(dup.bytes, "duplicate tensor name 't'");
  GgufBytes overlap;
  overlap.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad_to(32).zeros(96);
  expect_rejected(overlap.bytes, "overlap");
  GgufBytes no_data;
  no_data.header(1, 0).tensor("t", {8}, 0, 0);
  expect_rejected(no_data.bytes, "tensor data section is missing");
  expect_rejected(GgufBytes().header(1, 0).str("t").u32(1).u64(8).u32(0).bytes, "truncated file");
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// End of the last tensor's data: truncating the file anywhere before it must fail.
uint64_t end_of_tensor_data(const GgufFile& file) {
  uint64_t end = file.data_offset();
  for (const GgufTensor& t : file.tensors())
    end = std::max(end, file.data_offset() + t.offset + t.n_bytes);
  return end;
}

TEST(GgufCorruption, EveryTruncationOfARealModelIsRejected) {
  TRELLIS_REQUIRE_SHARED();
  std::vector<uint8_t> bytes = read_file(testing::shared_dir() + "/models/stories260K.gguf");
  Result<GgufFile> whole = GgufFile::parse(bytes, "stories260K.gguf");
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  uint64_t needed = end_of_tensor_data(*whole);
  ASSERT_EQ(needed, bytes.size());
  // Every length inside the header and the first tensors, then a stride through the data.
  int rejected = 0;
  for (uint64_t length = 0; length < needed;
       length += (length < whole->data_offset() + 4096 ? 1 : 997)) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(length));
    Result<GgufFile> file = GgufFile::parse(prefix, "cut.gguf");
    ASSERT_FALSE(file.ok()) << "truncation to " << length << " bytes was accepted";
    ASSERT_EQ(file.error().message.rfind("cut.gguf: ", 0), 0u);
    ++rejected;
  }
  EXPECT_GT(rejected, 14000);
}

TEST(GgufCorruption, EveryByteOfARealHeaderCanBeCorruptedSafely) {
  TRELLIS_REQUIRE_SHARED();
  std::vector<uint8_t> bytes = read_file(testing::shared_dir() + "/models/stories260K.gguf");
  Result<GgufFile> whole = GgufFile::parse(bytes, "stories260K.gguf");
  ASSERT_TRUE(whole.ok());
  const uint64_t header_size = whole->data_offset();
  int rejected = 0;
  int accepted = 0;
  std::vector<uint8_t> copy = bytes;
  for (uint64_t i = 0; i < header_size; ++i) {
    for (uint8_t replacement :
         {uint8_t{0x00}, uint8_t{0xFF}, static_cast<uint8_t>(bytes[i] ^ 0x80)}) {
      if (replacement == bytes[i]) continue;
      copy[i] = replacement;
      Result<GgufFile> file = GgufFile::parse(copy, "flip.gguf");
      if (file.ok()) {
        // A change that still parses must still describe tensors inside the file.
        for (const GgufTensor& t : file->tensors()) {
          ASSERT_LE(t.data + t.n_bytes, copy.data() + copy.size());
        }
        ++accepted;
      } else {
        ASSERT_EQ(file.error().message.rfind("flip.gguf: ", 0), 0u);
        ++rejected;
      }
    }
    copy[i] = bytes[i];
  }
  // Both outcomes occur: flipping a length or type is fatal, flipping text or a float is not.
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(accepted, 1000);
}

TEST(GgufCorruption, OpeningMissingOrSpecialFilesFailsCleanly) {
  Result<GgufFile> missing = GgufFile::open("/nonexistent/model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("/nonexistent/model.gguf"), std::string::npos);
  EXPECT_FALSE(GgufFile::open("/tmp").ok());
}

}  // namespace
}  // namespace trellis
