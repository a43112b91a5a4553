// The text requests are routed by: prompts as they are, conversations that extend their earlier
// turns' text, and URLs of replicas.
#include "router/routing_text.h"

#include <gtest/gtest.h>

#include "router/upstream_call.h"

namespace trellis {
namespace {

using json = nlohmann::json;

TEST(RoutingText, CompletionPromptsAsTheyAre) {
  EXPECT_EQ(completion_routing_text(json{{"prompt", "Once upon"}}), "Once upon");
  EXPECT_EQ(completion_routing_text(json{{"prompt", {"a", "b"}}}), "a\nb\n");
  EXPECT_EQ(completion_routing_text(json{{"prompt", {1, 22, 333}}}), "1,22,333,");
  EXPECT_EQ(completion_routing_text(json{{"prompt", 7}}), "");
  EXPECT_EQ(completion_routing_text(json::object()), "");
}

TEST(RoutingText, TokenPromptsSharePrefixesLikeTheirIds) {
  const std::string shorter = completion_routing_text(json{{"prompt", {1, 2}}});
  const std::string longer = completion_routing_text(json{{"prompt", {1, 2, 3}}});
  const std::string other = completion_routing_text(json{{"prompt", {1, 23}}});
  EXPECT_EQ(longer.rfind(shorter, 0), 0u);
  EXPECT_NE(other.rfind(shorter, 0), 0u);  // "1,23," does not start with "1,2,"
}

TEST(RoutingText, AConversationExtendsItsEarlierTurns) {
  json turn1 = {{"messages",
                 {{{"role", "system"}, {"content", "Be brief."}},
                  {{"role", "user"}, {"content", "Hi"}}}}};
  json turn2 = turn1;
  turn2["messages"].push_back({{"role", "assistant"}, {"content", "Hello."}});
  turn2["messages"].push_back({{"role", "user"}, {"content", "More"}});
  const std::string t1 = chat_routing_text(turn1);
  const std::string t2 = chat_routing_text(turn2);
  EXPECT_EQ(t2.rfind(t1, 0), 0u);
  EXPECT_GT(t2.size(), t1.size());
  EXPECT_NE(t1.find("Be brief."), std::string::npos);
}

TEST(RoutingText, ContentPartsAndBoundaries) {
  json parts = {{"messages",
                 {{{"role", "user"},
                   {"content",
                    {{{"type", "text"}, {"text", "ab"}}, {{"type", "image_url"}}, {{"text", "c"}}}}}}}};
  EXPECT_EQ(chat_routing_text(parts), std::string("user\x1e" "abc\x1f"));
  // "ab" + "c" in one message is not the same text as "a" then "bc" in two.
  json one = {{"messages", {{{"role", "user"}, {"content", "abc"}}}}};
  json two = {{"messages",
               {{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", "bc"}}}}};
  EXPECT_NE(chat_routing_text(one), chat_routing_text(two));
  EXPECT_EQ(chat_routing_text(json{{"messages", "nope"}}), "");
}

TEST(ReplicaUrl, ParsesHostAndPort) {
  Result<ReplicaAddress> a = parse_replica_url("http://127.0.0.1:8081");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8081);
  EXPECT_EQ(a->url(), "http://127.0.0.1:8081");
  Result<ReplicaAddress> b = parse_replica_url("http://node-2/");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "node-2");
  EXPECT_EQ(b->port, 80);
}

TEST(ReplicaUrl, RejectsWhatItCannotReach) {
  for (const char* bad : {"https://x:1", "x:80", "http://:80", "http://x:0", "http://x:70000",
                          "http://x:80/v1", "http://x:8a"}) {
    Result<ReplicaAddress> r = parse_replica_url(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
    }
  }
}

}  // namespace
}  // namespace trellis
