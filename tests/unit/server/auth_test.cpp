// Bearer tokens, constant-time key checks and the cache namespaces that keys and salts select.
#include "server/auth.h"

#include <gtest/gtest.h>

namespace trellis {
namespace {

TEST(AuthTest, BearerTokenParsing) {
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("bearer  abc "), "abc");
  EXPECT_EQ(bearer_token("BEARER sk-1.2_3"), "sk-1.2_3");
  EXPECT_EQ(bearer_token("Basic abc"), std::nullopt);
  EXPECT_EQ(bearer_token("Bearer"), std::nullopt);
  EXPECT_EQ(bearer_token("Bearer   "), std::nullopt);
  EXPECT_EQ(bearer_token(""), std::nullopt);
}

TEST(AuthTest, ConstantTimeEqualIsEquality) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("secret", "secret"));
  EXPECT_FALSE(constant_time_equal("secret", "secreT"));
  EXPECT_FALSE(constant_time_equal("secret", "secret2"));
  EXPECT_FALSE(constant_time_equal("secret", ""));
  EXPECT_FALSE(constant_time_equal(std::string("a\0b", 3), std::string("a\0c", 3)));
  EXPECT_FALSE(constant_time_equal("abc", std::string("abc\0", 4)));
  EXPECT_TRUE(api_key_accepted({"k1", "k2"}, "k2"));
  EXPECT_FALSE(api_key_accepted({"k1", "k2"}, "k3"));
  EXPECT_FALSE(api_key_accepted({}, "k1"));
}

TEST(AuthTest, NamespacesSeparateKeysAndSalts) {
  const std::optional<std::string> none;
  EXPECT_EQ(cache_namespace_for(CacheIsolation::NONE, "alice", none), "");
  EXPECT_EQ(cache_namespace_for(CacheIsolation::NONE, "alice", "s"),
            cache_namespace_for(CacheIsolation::NONE, "bob", "s"))
      << "without isolation only the salt counts";
  const std::string alice = cache_namespace_for(CacheIsolation::KEY, "alice", none);
  const std::string bob = cache_namespace_for(CacheIsolation::KEY, "bob", none);
  EXPECT_NE(alice, bob);
  EXPECT_EQ(alice, cache_namespace_for(CacheIsolation::KEY, "alice", none)) << "stable";
  EXPECT_EQ(alice.find("alice"), std::string::npos) << "the key itself is not stored";
  EXPECT_NE(cache_namespace_for(CacheIsolation::KEY, "alice", "s"), alice);
  EXPECT_NE(cache_namespace_for(CacheIsolation::KEY, "alice", "s"),
            cache_namespace_for(CacheIsolation::KEY, "bob", "s"));
  // A salt cannot spell another key's namespace: the key part always comes first.
  const std::string salt_like_bob = bob.substr(bob.find(':') + 1);
  EXPECT_NE(cache_namespace_for(CacheIsolation::KEY, "alice", salt_like_bob), bob);
  EXPECT_NE(cache_namespace_for(CacheIsolation::KEY, "", none),
            cache_namespace_for(CacheIsolation::KEY, "x", none));
}

}  // namespace
}  // namespace trellis
