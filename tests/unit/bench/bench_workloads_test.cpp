// The synthetic workloads' prompts: exact shapes and lengths, prefixes that are really shared,
// private parts that really differ, determinism, arrival order, the multi-turn turn structure,
// tree-of-thought numbering and seeds, and the size checks.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "bench/bench_tokens.h"
#include "bench/workloads.h"
#include "sample/rng.h"

namespace trellis::bench {
namespace {

constexpr int64_t kVocab = 1000;

using Tokens = std::vector<TokenId>;

Tokens slice(const Tokens& t, size_t begin, size_t end) {
  return Tokens(t.begin() + static_cast<std::ptrdiff_t>(begin),
                t.begin() + static_cast<std::ptrdiff_t>(end));
}

void expect_greedy(const EngineRequest& r, int32_t max_tokens) {
  EXPECT_EQ(r.max_tokens, max_tokens);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_TRUE(r.ignore_eos);
}

TEST(BenchTokensTest, ExactDeterministicIds) {
  // The linear congruential sequence, pinned: results of old runs stay comparable.
  EXPECT_EQ(bench_tokens(5, 1000), (Tokens{332, 463, 65, 974, 703}));
  EXPECT_EQ(bench_tokens(3, 1000, 50), (Tokens{562, 628, 639}));
  EXPECT_EQ(bench_tokens(3, 100, 7), (Tokens{77, 70, 18}));
  EXPECT_EQ(bench_tokens(0, 1000), Tokens{});
  // A longer sequence extends a shorter one; every id is in [3, n_vocab).
  const Tokens long_ids = bench_tokens(500, 10, 3);
  EXPECT_EQ(slice(long_ids, 0, 5), bench_tokens(5, 10, 3));
  for (TokenId id : long_ids) {
    EXPECT_GE(id, 3);
    EXPECT_LT(id, 10);
  }
  EXPECT_NE(bench_tokens(16, kVocab, 1), bench_tokens(16, kVocab, 2));
}

TEST(WorkloadNamesTest, ParseAndName) {
  EXPECT_EQ(workload_names(), "agents, few-shot, multi-turn, tree-of-thought");
  for (Workload w :
       {Workload::AGENTS, Workload::FEW_SHOT, Workload::MULTI_TURN, Workload::TREE_OF_THOUGHT}) {
    EXPECT_EQ(parse_workload(workload_name(w)), w);
  }
  EXPECT_EQ(workload_name(Workload::FEW_SHOT), "few-shot");
  EXPECT_EQ(parse_workload("agent"), std::nullopt);
  EXPECT_EQ(parse_workload(""), std::nullopt);
}

TEST(AgentsTest, ShapesSharingAndArrivalOrder) {
  WorkloadSizes s;
  s.n_groups = 3;
  s.per_group = 2;
  s.prefix_len = 10;
  s.suffix_len = 4;
  s.decode_len = 5;
  const std::vector<EngineRequest> requests = agents_requests(s, kVocab);
  ASSERT_EQ(requests.size(), 6u);
  for (const EngineRequest& r : requests) {
    ASSERT_EQ(r.prompt.size(), 14u);
    expect_greedy(r, 5);
  }
  // Arrival interleaves the groups: request k belongs to group k % 3.
  for (size_t k = 0; k < requests.size(); ++k) {
    for (size_t j = 0; j < requests.size(); ++j) {
      const bool same_group = k % 3 == j % 3;
      EXPECT_EQ(slice(requests[k].prompt, 0, 10) == slice(requests[j].prompt, 0, 10), same_group)
          << k << " vs " << j;
      // Diverges right after the prefix as well, for any two requests.
      if (k != j) {
        EXPECT_NE(slice(requests[k].prompt, 10, 14), slice(requests[j].prompt, 10, 14));
      }
    }
  }
  // Group g's prefix is bench_tokens seed 50 + g; request k's task seed 9000 + k.
  EXPECT_EQ(slice(requests[4].prompt, 0, 10), bench_tokens(10, kVocab, 51));
  EXPECT_EQ(slice(requests[4].prompt, 10, 14), bench_tokens(4, kVocab, 9004));
  // Deterministic.
  const std::vector<EngineRequest> again = agents_requests(s, kVocab);
  for (size_t k = 0; k < requests.size(); ++k) EXPECT_EQ(again[k].prompt, requests[k].prompt);
}

TEST(FewShotTest, SharedShotsAndOwnQuestions) {
  WorkloadSizes s;
  s.n_shots = 3;
  s.shot_len = 5;
  s.n_questions = 4;
  s.suffix_len = 6;
  s.decode_len = 2;
  const std::vector<EngineRequest> requests = few_shot_requests(s, kVocab);
  ASSERT_EQ(requests.size(), 4u);
  Tokens shots;
  for (uint32_t k = 0; k < 3; ++k) {
    const Tokens shot = bench_tokens(5, kVocab, 20000 + k);
    shots.insert(shots.end(), shot.begin(), shot.end());
  }
  std::set<Tokens> questions;
  for (size_t q = 0; q < requests.size(); ++q) {
    ASSERT_EQ(requests[q].prompt.size(), 21u);
    expect_greedy(requests[q], 2);
    EXPECT_EQ(slice(requests[q].prompt, 0, 15), shots);
    questions.insert(slice(requests[q].prompt, 15, 21));
  }
  EXPECT_EQ(questions.size(), 4u);  // every question its own
  EXPECT_NE(slice(shots, 0, 5), slice(shots, 5, 10));
}

TEST(MultiTurnTest, SessionsAndTurns) {
  WorkloadSizes s;
  s.n_sessions = 3;
  s.n_turns = 4;
  s.prefix_len = 8;
  s.suffix_len = 3;
  s.decode_len = 7;
  const std::vector<ChatSession> sessions = multi_turn_sessions(s, kVocab);
  ASSERT_EQ(sessions.size(), 3u);
  const Tokens system = bench_tokens(8, kVocab, 40000);
  std::set<Tokens> user_turns;
  for (size_t i = 0; i < sessions.size(); ++i) {
    const ChatSession& session = sessions[i];
    ASSERT_EQ(session.first.prompt.size(), 11u);
    expect_greedy(session.first, 7);
    EXPECT_EQ(slice(session.first.prompt, 0, 8), system);
    user_turns.insert(slice(session.first.prompt, 8, 11));
    // Turn 0 is in `first`; the other n_turns - 1 come one per later turn.
    ASSERT_EQ(session.user_turns.size(), 3u);
    for (size_t t = 0; t < session.user_turns.size(); ++t) {
      EXPECT_EQ(session.user_turns[t].size(), 3u);
      // Session i's turn t + 1 has seed 50000 + i * n_turns + t + 1.
      EXPECT_EQ(session.user_turns[t],
                bench_tokens(3, kVocab, 50000 + static_cast<uint32_t>(i * 4 + t + 1)));
      user_turns.insert(session.user_turns[t]);
    }
  }
  EXPECT_EQ(user_turns.size(), 12u);  // no two user turns alike
  // The longest sequence: the system prompt + 4 turns of (user + answer).
  EXPECT_EQ(max_sequence_tokens(Workload::MULTI_TURN, s), 8 + 4 * (3 + 7));
}

TEST(TreeOfThoughtTest, RootsNumberingAndSeeds) {
  WorkloadSizes s;
  s.n_trees = 2;
  s.depth = 2;
  s.branch = 3;
  s.prefix_len = 6;
  s.suffix_len = 4;
  s.decode_len = 5;
  s.temperature = 0.7;
  s.seed = 42;
  const std::vector<EngineRequest> roots = tree_of_thought_roots(s, kVocab);
  ASSERT_EQ(roots.size(), 2u);
  for (size_t tree = 0; tree < roots.size(); ++tree) {
    const EngineRequest& root = roots[tree];
    ASSERT_EQ(root.prompt.size(), 10u);
    EXPECT_EQ(slice(root.prompt, 0, 6), bench_tokens(6, kVocab, 60000));
    EXPECT_EQ(slice(root.prompt, 6, 10), bench_tokens(4, kVocab, 70000 + uint32_t(tree)));
    EXPECT_EQ(root.max_tokens, 5);
    EXPECT_TRUE(root.ignore_eos);
    EXPECT_EQ(root.sampling.temperature, 0.7f);
    EXPECT_EQ(root.sampling.seed, derive_seed(42, tree));
  }
  EXPECT_NE(roots[0].prompt, roots[1].prompt);

  EXPECT_EQ(thought_tree_nodes(s), 1 + 3 + 9);
  // Breadth-first numbering: the children of nodes 0, 1, 2, ... in order are 1, 2, 3, ...
  int32_t expected = 1;
  for (int32_t node = 0; node < 4; ++node) {
    for (int32_t i = 0; i < s.branch; ++i) EXPECT_EQ(thought_child(s, node, i), expected++);
  }
  EXPECT_EQ(thought_child(s, 3, 2), 12);  // the last node of depth 2 is node 12 = 13 - 1

  EXPECT_EQ(thought_seed(s, 1, 4), derive_seed(derive_seed(42, 1), 5));
  std::set<uint64_t> seeds;
  for (int32_t tree = 0; tree < 2; ++tree) {
    for (int32_t node = 0; node < 13; ++node) seeds.insert(thought_seed(s, tree, node));
  }
  EXPECT_EQ(seeds.size(), 26u);
  const EngineRequest params = thought_branch_params(s, 1, 4);
  EXPECT_TRUE(params.prompt.empty());
  EXPECT_EQ(params.max_tokens, 5);
  EXPECT_TRUE(params.ignore_eos);
  EXPECT_EQ(params.sampling.temperature, 0.7f);
  EXPECT_EQ(params.sampling.seed, thought_seed(s, 1, 4));
  EXPECT_EQ(max_sequence_tokens(Workload::TREE_OF_THOUGHT, s), 6 + 4 + 3 * 5);
}

TEST(WorkloadSizesTest, TreeNodes) {
  WorkloadSizes s;
  s.depth = 0;
  s.branch = 5;
  EXPECT_EQ(thought_tree_nodes(s), 1);
  s.depth = 3;
  s.branch = 2;
  EXPECT_EQ(thought_tree_nodes(s), 15);
  s.branch = 1;
  EXPECT_EQ(thought_tree_nodes(s), 4);
}

TEST(WorkloadSizesTest, MaxSequenceTokensAndDescription) {
  const WorkloadSizes s;  // the defaults
  EXPECT_EQ(max_sequence_tokens(Workload::AGENTS, s), 256 + 32 + 16);
  EXPECT_EQ(max_sequence_tokens(Workload::FEW_SHOT, s), 5 * 48 + 32 + 16);
  EXPECT_EQ(describe(Workload::AGENTS, s),
            "4 groups x 6 requests, prefix 256 + suffix 32 tokens, D=16");
  EXPECT_EQ(describe(Workload::FEW_SHOT, s),
            "5 shots x 48 tokens shared + 16 questions of 32 tokens, D=16");
}

// The message of check_sizes, or "" when it accepts.
std::string check_message(Workload w, const WorkloadSizes& s) {
  const Status status = check_sizes(w, s);
  return status.ok() ? "" : status.error().message;
}

TEST(WorkloadSizesTest, CheckSizesNamesTheBadSize) {
  const WorkloadSizes ok;
  for (Workload w :
       {Workload::AGENTS, Workload::FEW_SHOT, Workload::MULTI_TURN, Workload::TREE_OF_THOUGHT}) {
    EXPECT_EQ(check_message(w, ok), "") << workload_name(w);
  }
  auto with = [](auto set) {
    WorkloadSizes s;
    set(s);
    return s;
  };
  EXPECT_EQ(check_message(Workload::AGENTS, with([](WorkloadSizes& s) { s.suffix_len = 0; })),
            "--suffix-len must be positive");
  EXPECT_EQ(check_message(Workload::FEW_SHOT, with([](WorkloadSizes& s) { s.decode_len = -1; })),
            "-D must be positive");
  EXPECT_EQ(check_message(Workload::AGENTS, with([](WorkloadSizes& s) { s.n_groups = 0; })),
            "--groups must be positive");
  EXPECT_EQ(check_message(Workload::AGENTS, with([](WorkloadSizes& s) { s.per_group = 0; })),
            "--per-group must be positive");
  EXPECT_EQ(check_message(Workload::AGENTS, with([](WorkloadSizes& s) { s.prefix_len = 0; })),
            "--prefix-len must be positive");
  EXPECT_EQ(check_message(Workload::FEW_SHOT, with([](WorkloadSizes& s) { s.n_shots = 0; })),
            "--shots must be positive");
  EXPECT_EQ(check_message(Workload::FEW_SHOT, with([](WorkloadSizes& s) { s.shot_len = 0; })),
            "--shot-len must be positive");
  EXPECT_EQ(check_message(Workload::FEW_SHOT, with([](WorkloadSizes& s) { s.n_questions = 0; })),
            "--questions must be positive");
  EXPECT_EQ(check_message(Workload::MULTI_TURN, with([](WorkloadSizes& s) { s.n_sessions = 0; })),
            "--sessions must be positive");
  EXPECT_EQ(check_message(Workload::MULTI_TURN, with([](WorkloadSizes& s) { s.n_turns = 0; })),
            "--turns must be positive");
  EXPECT_EQ(check_message(Workload::TREE_OF_THOUGHT, with([](WorkloadSizes& s) { s.n_trees = 0; })),
            "--trees must be positive");
  EXPECT_EQ(check_message(Workload::TREE_OF_THOUGHT, with([](WorkloadSizes& s) { s.depth = 0; })),
            "--depth must be positive");
  EXPECT_EQ(check_message(Workload::TREE_OF_THOUGHT, with([](WorkloadSizes& s) { s.branch = 0; })),
            "--branch must be positive");
  EXPECT_EQ(
      check_message(Workload::TREE_OF_THOUGHT, with([](WorkloadSizes& s) { s.temperature = 0; })),
      "--temp must be positive (the tree is sampled)");
  EXPECT_EQ(check_message(Workload::TREE_OF_THOUGHT, with([](WorkloadSizes& s) {
                            s.depth = 20;
                            s.branch = 2;
                          })),
            "--depth and --branch give too many nodes");
  // A size the workload does not read is not checked.
  EXPECT_EQ(check_message(Workload::AGENTS, with([](WorkloadSizes& s) { s.n_turns = 0; })), "");
  EXPECT_EQ(check_message(Workload::FEW_SHOT, with([](WorkloadSizes& s) { s.prefix_len = 0; })),
            "");
}

}  // namespace
}  // namespace trellis::bench
