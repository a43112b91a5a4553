// SHA-256 against the published test vectors (FIPS 180-4 examples and NIST's long message),
// streamed in every split, and over a file.
#include "base/sha256.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "test_support.h"

namespace trellis {
namespace {

std::string hash_of(std::string_view text) {
  Sha256 h;
  h.update(text);
  return h.finish_hex();
}

TEST(Sha256Test, PublishedVectors) {
  EXPECT_EQ(hash_of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hash_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hash_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hash_of(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, AnySplitOfTheInputGivesTheSameDigest) {
  std::string text;
  for (int i = 0; i < 300; ++i) text.push_back(static_cast<char>('a' + i % 26));
  const std::string whole = hash_of(text);
  for (size_t cut = 0; cut <= text.size(); cut += 7) {
    for (size_t step : {1u, 13u, 64u, 65u}) {
      Sha256 h;
      h.update(std::string_view(text).substr(0, cut));
      for (size_t i = cut; i < text.size(); i += step)
        h.update(std::string_view(text).substr(i, step));
      EXPECT_EQ(h.finish_hex(), whole) << cut << " " << step;
    }
  }
}

TEST(Sha256Test, HashesAFileAndNamesAMissingOne) {
  const std::string path = testing::temp_dir() + "/abc.txt";
  std::ofstream(path) << "abc";
  Result<std::string> digest = sha256_file(path);
  ASSERT_TRUE(digest.ok());
  EXPECT_EQ(*digest, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Result<std::string> missing = sha256_file(path + ".absent");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("abc.txt.absent: cannot open"), std::string::npos);
}

}  // namespace
}  // namespace trellis
