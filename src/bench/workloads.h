// The synthetic workloads of `trellis bench workload` (after the four workloads of the SGLang
// paper): seeded token sequences (bench_tokens), so every run of a workload sees the same prompts
// and, sampling included, must produce the same tokens whatever the cache and the policy.
//
// The generators only build prompts and sampling parameters; workload_bench.h submits them (all
// at once, per chat session, or per tree level) and measures.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/engine.h"

namespace trellis::bench {

enum class Workload { AGENTS, FEW_SHOT, MULTI_TURN, TREE_OF_THOUGHT };

// "agents, few-shot, multi-turn, tree-of-thought"
std::string workload_names();
std::optional<Workload> parse_workload(std::string_view name);
std::string_view workload_name(Workload workload);

// Every size of every workload; each workload reads the fields its comment names.
struct WorkloadSizes {
  int32_t n_groups = 4;      // agents: prefix groups
  int32_t per_group = 6;     // agents: requests per group
  int32_t prefix_len = 256;  // agents: each group's prefix; multi-turn, tree-of-thought: the
                             // system prompt that all sessions / trees share
  int32_t suffix_len = 32;   // a request's own tokens: an agent's task, a few-shot question, a
                             // user turn of a chat, a tree's root question
  int32_t decode_len = 16;   // tokens generated per request (per chat turn, per tree node)
  int32_t n_shots = 5;       // few-shot: example blocks in the shared prefix
  int32_t shot_len = 48;     // few-shot: tokens per example block
  int32_t n_questions = 16;  // few-shot: requests, all submitted at once
  int32_t n_sessions = 4;    // multi-turn: chat sessions running concurrently
  int32_t n_turns = 4;       // multi-turn: turns per session, one after another
  int32_t n_trees = 2;       // tree-of-thought: root questions, one tree each
  int32_t depth = 2;         // tree-of-thought: levels below the root
  int32_t branch = 2;        // tree-of-thought: children per node
  double temperature = 0.8;  // tree-of-thought: sampling temperature (> 0, seeded)
  uint64_t seed = 1;         // tree-of-thought: the seed every node's seed derives from
};

// An error naming the first size the workload reads that is out of range.
Status check_sizes(Workload workload, const WorkloadSizes& sizes);
// The longest sequence (prompt + generated tokens) one request of the workload reaches.
int32_t max_sequence_tokens(Workload workload, const WorkloadSizes& sizes);
// One line describing the workload's shape, for the text report.
std::string describe(Workload workload, const WorkloadSizes& sizes);

// agents: n_groups groups of per_group greedy requests; a group's requests share its prefix_len
// token "tool description" and add suffix_len tokens of their own. Arrival order interleaves the
// groups (g0, g1, ..., g0, g1, ...).
std::vector<EngineRequest> agents_requests(const WorkloadSizes& sizes, int64_t n_vocab);

// few-shot: n_questions greedy requests = the same n_shots example blocks (shot_len tokens each,
// one long shared prefix) + a question of suffix_len tokens of its own.
std::vector<EngineRequest> few_shot_requests(const WorkloadSizes& sizes, int64_t n_vocab);

// multi-turn: one chat session. Turn 0's prompt is `first` (the shared system prompt + the first
// user turn); turn t + 1's prompt is turn t's prompt + turn t's generated tokens + user_turns[t].
struct ChatSession {
  EngineRequest first;                           // greedy, decode_len tokens
  std::vector<std::vector<TokenId>> user_turns;  // [n_turns - 1][suffix_len]
};
std::vector<ChatSession> multi_turn_sessions(const WorkloadSizes& sizes, int64_t n_vocab);

// tree-of-thought: the roots, one per tree: the shared system prompt + a question of its own,
// sampled at `temperature` with seed derive_seed(seed, tree).
std::vector<EngineRequest> tree_of_thought_roots(const WorkloadSizes& sizes, int64_t n_vocab);
// The nodes of a tree are numbered breadth first: the root is 0, child i of node k is
// k * branch + 1 + i. The sampling seed of node k's branches (derive_seed(root seed, k + 1));
// branch i samples with derive_seed(thought_seed(...), i), as Engine::fork gives it.
uint64_t thought_seed(const WorkloadSizes& sizes, int32_t tree, int32_t node);
// The number of child `i` (in [0, branch)) of node `node`: node * branch + 1 + i.
int32_t thought_child(const WorkloadSizes& sizes, int32_t node, int32_t i);
// The parameters of node `node`'s branches (their prompt is the node's history, set by the
// caller or by Engine::fork).
EngineRequest thought_branch_params(const WorkloadSizes& sizes, int32_t tree, int32_t node);
// Nodes of one tree: 1 + branch + branch^2 + ... + branch^depth.
int64_t thought_tree_nodes(const WorkloadSizes& sizes);

}  // namespace trellis::bench
