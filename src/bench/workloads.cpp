#include "bench/workloads.h"

#include <array>
#include <cstdio>

#include "bench/bench_tokens.h"
#include "bench/requests.h"
#include "sample/rng.h"

namespace trellis::bench {
namespace {

// The bench_tokens seeds of each workload's pieces lie in ranges of their own, so no two pieces
// of a workload (or of two workloads) share tokens by accident.
constexpr uint32_t kAgentsPrefixSeed = 50;    // + group
constexpr uint32_t kAgentsSuffixSeed = 9000;  // + request index
constexpr uint32_t kShotSeed = 20000;         // + shot
constexpr uint32_t kQuestionSeed = 30000;     // + question
constexpr uint32_t kChatSystemSeed = 40000;
constexpr uint32_t kChatTurnSeed = 50000;  // + session * n_turns + turn
constexpr uint32_t kThoughtSystemSeed = 60000;
constexpr uint32_t kThoughtQuestionSeed = 70000;  // + tree

constexpr std::array<std::pair<std::string_view, Workload>, 4> kWorkloads = {{
    {"agents", Workload::AGENTS},
    {"few-shot", Workload::FEW_SHOT},
    {"multi-turn", Workload::MULTI_TURN},
    {"tree-of-thought", Workload::TREE_OF_THOUGHT},
}};

std::vector<TokenId> concat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

std::string workload_names() {
  std::string names;
  for (const auto& [name, workload] : kWorkloads) {
    if (!names.empty()) names += ", ";
    names += name;
  }
  return names;
}

std::optional<Workload> parse_workload(std::string_view name) {
  for (const auto& [n, workload] : kWorkloads) {
    if (n == name) return workload;
  }
  return std::nullopt;
}

std::string_view workload_name(Workload workload) {
  for (const auto& [name, w] : kWorkloads) {
    if (w == workload) return name;
  }
  return "?";
}

Status check_sizes(Workload workload, const WorkloadSizes& s) {
  auto positive = [](int32_t value, const char* flag) -> Status {
    if (value <= 0) return Error{std::string(flag) + " must be positive"};
    return {};
  };
  TRELLIS_TRY(positive(s.suffix_len, "--suffix-len"));
  TRELLIS_TRY(positive(s.decode_len, "-D"));
  switch (workload) {
    case Workload::AGENTS:
      TRELLIS_TRY(positive(s.n_groups, "--groups"));
      TRELLIS_TRY(positive(s.per_group, "--per-group"));
      return positive(s.prefix_len, "--prefix-len");
    case Workload::FEW_SHOT:
      TRELLIS_TRY(positive(s.n_shots, "--shots"));
      TRELLIS_TRY(positive(s.shot_len, "--shot-len"));
      return positive(s.n_questions, "--questions");
    case Workload::MULTI_TURN:
      TRELLIS_TRY(positive(s.prefix_len, "--prefix-len"));
      TRELLIS_TRY(positive(s.n_sessions, "--sessions"));
      return positive(s.n_turns, "--turns");
    case Workload::TREE_OF_THOUGHT:
      TRELLIS_TRY(positive(s.prefix_len, "--prefix-len"));
      TRELLIS_TRY(positive(s.n_trees, "--trees"));
      TRELLIS_TRY(positive(s.depth, "--depth"));
      TRELLIS_TRY(positive(s.branch, "--branch"));
      if (!(s.temperature > 0)) return Error{"--temp must be positive (the tree is sampled)"};
      if (thought_tree_nodes(s) > 100000) return Error{"--depth and --branch give too many nodes"};
      return {};
  }
  return {};
}

int32_t max_sequence_tokens(Workload workload, const WorkloadSizes& s) {
  switch (workload) {
    case Workload::AGENTS:
      return s.prefix_len + s.suffix_len + s.decode_len;
    case Workload::FEW_SHOT:
      return s.n_shots * s.shot_len + s.suffix_len + s.decode_len;
    case Workload::MULTI_TURN:
      return s.prefix_len + s.n_turns * (s.suffix_len + s.decode_len);
    case Workload::TREE_OF_THOUGHT:
      return s.prefix_len + s.suffix_len + (s.depth + 1) * s.decode_len;
  }
  return 0;
}

std::string describe(Workload workload, const WorkloadSizes& s) {
  char line[256];
  switch (workload) {
    case Workload::AGENTS:
      std::snprintf(line, sizeof line,
                    "%d groups x %d requests, prefix %d + suffix %d tokens, D=%d", s.n_groups,
                    s.per_group, s.prefix_len, s.suffix_len, s.decode_len);
      break;
    case Workload::FEW_SHOT:
      std::snprintf(line, sizeof line,
                    "%d shots x %d tokens shared + %d questions of %d tokens, D=%d", s.n_shots,
                    s.shot_len, s.n_questions, s.suffix_len, s.decode_len);
      break;
    case Workload::MULTI_TURN:
      std::snprintf(line, sizeof line,
                    "%d sessions x %d turns, system prompt %d + %d tokens per user turn, D=%d per "
                    "turn",
                    s.n_sessions, s.n_turns, s.prefix_len, s.suffix_len, s.decode_len);
      break;
    case Workload::TREE_OF_THOUGHT:
      std::snprintf(line, sizeof line,
                    "%d trees of depth %d, branch %d (%lld nodes each), system prompt %d + "
                    "question %d tokens, D=%d per node, temperature %.2f, seed %llu",
                    s.n_trees, s.depth, s.branch, static_cast<long long>(thought_tree_nodes(s)),
                    s.prefix_len, s.suffix_len, s.decode_len, s.temperature,
                    static_cast<unsigned long long>(s.seed));
      break;
  }
  return line;
}

std::vector<EngineRequest> agents_requests(const WorkloadSizes& s, int64_t n_vocab) {
  std::vector<std::vector<TokenId>> prefixes;
  for (int32_t g = 0; g < s.n_groups; ++g)
    prefixes.push_back(bench_tokens(s.prefix_len, n_vocab, kAgentsPrefixSeed + uint32_t(g)));
  std::vector<EngineRequest> requests;
  for (int32_t i = 0; i < s.per_group; ++i) {
    for (int32_t g = 0; g < s.n_groups; ++g) {  // interleaved arrival
      const auto index = static_cast<uint32_t>(i * s.n_groups + g);
      requests.push_back(
          greedy_request(concat(prefixes[static_cast<size_t>(g)],
                                bench_tokens(s.suffix_len, n_vocab, kAgentsSuffixSeed + index)),
                         s.decode_len));
    }
  }
  return requests;
}

std::vector<EngineRequest> few_shot_requests(const WorkloadSizes& s, int64_t n_vocab) {
  std::vector<TokenId> shots;
  for (int32_t k = 0; k < s.n_shots; ++k)
    shots = concat(std::move(shots), bench_tokens(s.shot_len, n_vocab, kShotSeed + uint32_t(k)));
  std::vector<EngineRequest> requests;
  for (int32_t q = 0; q < s.n_questions; ++q) {
    requests.push_back(greedy_request(
        concat(shots, bench_tokens(s.suffix_len, n_vocab, kQuestionSeed + uint32_t(q))),
        s.decode_len));
  }
  return requests;
}

std::vector<ChatSession> multi_turn_sessions(const WorkloadSizes& s, int64_t n_vocab) {
  const std::vector<TokenId> system = bench_tokens(s.prefix_len, n_vocab, kChatSystemSeed);
  std::vector<ChatSession> sessions;
  for (int32_t i = 0; i < s.n_sessions; ++i) {
    auto turn_tokens = [&](int32_t t) {
      return bench_tokens(s.suffix_len, n_vocab, kChatTurnSeed + uint32_t(i * s.n_turns + t));
    };
    ChatSession session;
    session.first = greedy_request(concat(system, turn_tokens(0)), s.decode_len);
    for (int32_t t = 1; t < s.n_turns; ++t) session.user_turns.push_back(turn_tokens(t));
    sessions.push_back(std::move(session));
  }
  return sessions;
}

std::vector<EngineRequest> tree_of_thought_roots(const WorkloadSizes& s, int64_t n_vocab) {
  const std::vector<TokenId> system = bench_tokens(s.prefix_len, n_vocab, kThoughtSystemSeed);
  std::vector<EngineRequest> roots;
  for (int32_t tree = 0; tree < s.n_trees; ++tree) {
    EngineRequest root = greedy_request(
        concat(system, bench_tokens(s.suffix_len, n_vocab, kThoughtQuestionSeed + uint32_t(tree))),
        s.decode_len);
    root.sampling.temperature = static_cast<float>(s.temperature);
    root.sampling.seed = derive_seed(s.seed, static_cast<uint64_t>(tree));
    roots.push_back(std::move(root));
  }
  return roots;
}

uint64_t thought_seed(const WorkloadSizes& s, int32_t tree, int32_t node) {
  return derive_seed(derive_seed(s.seed, static_cast<uint64_t>(tree)),
                     static_cast<uint64_t>(node) + 1);
}

int32_t thought_child(const WorkloadSizes& s, int32_t node, int32_t i) {
  return node * s.branch + 1 + i;
}

EngineRequest thought_branch_params(const WorkloadSizes& s, int32_t tree, int32_t node) {
  EngineRequest params = greedy_request({}, s.decode_len);
  params.sampling.temperature = static_cast<float>(s.temperature);
  params.sampling.seed = thought_seed(s, tree, node);
  return params;
}

int64_t thought_tree_nodes(const WorkloadSizes& s) {
  int64_t n = 0;
  int64_t level = 1;
  for (int32_t d = 0; d <= s.depth && n <= 1000000; ++d) {
    n += level;
    level *= s.branch;
  }
  return n;
}

}  // namespace trellis::bench
