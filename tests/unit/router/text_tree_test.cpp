// TextTree: longest cached prefix of a text, edge splits, LRU eviction to a byte budget.
#include "router/text_tree.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace trellis {
namespace {

TEST(TextTree, MatchesTheLongestInsertedPrefix) {
  TextTree tree(1 << 20);
  EXPECT_EQ(tree.match("hello"), 0u);
  tree.insert("system: be brief. user: hi");
  tree.insert("system: be brief. user: bye");
  tree.insert("system: be verbose.");
  EXPECT_EQ(tree.match("system: be brief. user: hi there"), 26u);
  EXPECT_EQ(tree.match("system: be brief. user: b"), 25u);
  EXPECT_EQ(tree.match("system: be"), 10u);
  EXPECT_EQ(tree.match("system: be quick"), 11u);
  EXPECT_EQ(tree.match("other"), 0u);
  // Shared prefixes are stored once: "system: be " + "brief. user: " + "hi" + "bye" + "verbose."
  EXPECT_EQ(tree.size_bytes(), std::string("system: be brief. user: hibyeverbose.").size());
}

// Against a brute-force list of what was inserted, under random texts over a small alphabet.
TEST(TextTree, AgreesWithBruteForce) {
  std::mt19937 rng(1);
  TextTree tree(1 << 20);
  std::vector<std::string> inserted;
  auto random_text = [&] {
    std::string s(1 + rng() % 12, 'a');
    for (char& c : s) c = static_cast<char>('a' + rng() % 3);
    return s;
  };
  for (int i = 0; i < 400; ++i) {
    const std::string t = random_text();
    if (rng() % 2 == 0) {
      tree.insert(t);
      inserted.push_back(t);
    }
    size_t expected = 0;
    for (const std::string& s : inserted) {
      size_t n = 0;
      while (n < s.size() && n < t.size() && s[n] == t[n]) ++n;
      expected = std::max(expected, n);
    }
    ASSERT_EQ(tree.match(t), expected) << t;
  }
}

TEST(TextTree, EvictsTheLeastRecentlyUsedToTheBudget) {
  TextTree tree(30);
  tree.insert("aaaaaaaaaa");  // 10 bytes each
  tree.insert("bbbbbbbbbb");
  tree.insert("cccccccccc");
  EXPECT_EQ(tree.match("aaaaaaaaaa"), 10u);  // a is now the most recent
  tree.insert("dddddddddd");                 // over budget: b (least recent) goes
  EXPECT_LE(tree.size_bytes(), 30u);
  EXPECT_EQ(tree.match("bbbbbbbbbb"), 0u);
  EXPECT_EQ(tree.match("aaaaaaaaaa"), 10u);
  EXPECT_EQ(tree.match("dddddddddd"), 10u);
  tree.insert(std::string(100, 'e'));  // longer than the budget: kept cut to it, alone
  EXPECT_EQ(tree.size_bytes(), 30u);
  EXPECT_EQ(tree.match(std::string(100, 'e')), 30u);
}

}  // namespace
}  // namespace trellis
