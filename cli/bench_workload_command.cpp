// `trellis bench workload NAME`: the four synthetic workloads of the SGLang paper, each run three
// times on a fresh engine: with the prefix cache off, on with FCFS admission, on with LPM. Reports
// the cache hit rate (cached prompt tokens / prompt tokens), generation throughput and request
// latency, and checks that the three runs produced the same tokens (greedy, or sampled with fixed
// seeds: the engine's outputs do not depend on the cache, the batch or the admission order).
// The prompts come from workload_generators.h.
//
//   agents           --groups G --per-group N --prefix-len P --suffix-len S: G groups of N
//                    requests; a group shares a P-token "tool description"; the groups' requests
//                    arrive interleaved, all at once, so admission order decides how often a
//                    group's prefix is still cached.
//   few-shot         --shots K --shot-len L --questions Q --suffix-len S: Q requests submitted at
//                    once, each = the same K example blocks of L tokens + a question of S tokens.
//   multi-turn       --sessions N --turns T --prefix-len P --suffix-len S: N chat sessions run
//                    concurrently, each T turns one after another; turn t + 1's prompt = turn t's
//                    prompt + its output + an S-token user turn (the first = a shared P-token
//                    system prompt + a user turn). Latency is per turn.
//   tree-of-thought  --trees R --depth d --branch b --temp T --seed X: R root questions (shared
//                    P-token system prompt + S tokens), sampled; each finished node of depth < d
//                    branches into b children that continue its history (Engine::fork of the
//                    finished request), breadth first. Latency is per node.
//
// -D is the tokens generated per request (turn, node). The tree-of-thought's cache-off run does
// not call fork: fork shares the parent's KV blocks even with the cache off (and counts them as
// cached tokens), so that run submits each branch as a request of its own with the seed fork
// would give it, which makes it the no-reuse baseline.
//
// --reps R runs each configuration R times after one unrecorded warm-up run; a row then holds the
// means over the repetitions (with the spread of throughput and mean latency) and the latency
// percentiles over all of them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_report.h"
#include "bench_support.h"
#include "commands.h"
#include "generator_options.h"
#include "sample/rng.h"
#include "workload_generators.h"

namespace trellis::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct WorkloadArgs {
  GeneratorOptions generator;
  std::string name;
  WorkloadSizes sizes;
  int32_t reps = 1;
  bool json = false;
  std::string out;  // results folder; empty: bench-results/workload-<name>-<timestamp>
};

// One configuration of the engine: the three runs of every workload.
struct Variant {
  const char* label;
  bool cache_on;
  SchedulePolicy policy;
};
constexpr Variant kVariants[] = {{"cache off", false, SchedulePolicy::FCFS},
                                 {"cache on, fcfs", true, SchedulePolicy::FCFS},
                                 {"cache on, lpm", true, SchedulePolicy::LPM}};

// The figures of one run (one repetition of one variant).
struct RunFigures {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  double wall_ms = 0;
  int64_t generated = 0;
  std::vector<double> latencies_ms;           // one per request (chat turn, tree node)
  std::vector<std::vector<TokenId>> outputs;  // in an order fixed by the workload, not by timing
  double scheduler_ms_per_step = 0;           // the scheduler's own planning cost

  void add(const RequestOutput& out) {
    prompt_tokens += out.stats.n_prompt_tokens;
    cached_tokens += out.stats.n_cached_tokens;
    generated += out.stats.n_generated_tokens;
    latencies_ms.push_back(out.stats.total_ms);
    outputs.push_back(out.tokens);
  }
  double hit_rate() const {
    return prompt_tokens > 0 ? static_cast<double>(cached_tokens) / prompt_tokens : 0;
  }
  double tokens_per_s() const { return wall_ms > 0 ? generated * 1000.0 / wall_ms : 0; }
};

Status checked(const RequestOutput& out) {
  if (out.finish_reason == FinishReason::ERROR) return Error{out.error};
  return {};
}

// agents, few-shot: every request submitted at once, outputs in submission order.
Status run_all_at_once(Engine& engine, std::vector<EngineRequest> requests, RunFigures& figures) {
  std::vector<RequestHandle> handles;
  for (EngineRequest& r : requests) {
    Result<RequestHandle> h = engine.submit(std::move(r));
    if (!h.ok()) return h.error();
    handles.push_back(*h);
  }
  for (RequestHandle& h : handles) {
    const RequestOutput& out = h.wait();
    TRELLIS_TRY(checked(out));
    figures.add(out);
  }
  return {};
}

// multi-turn: one thread per session (its turns one after another); outputs session by session,
// turn by turn.
Status run_chat_sessions(Engine& engine, const std::vector<ChatSession>& sessions,
                         RunFigures& figures) {
  std::vector<std::vector<RequestOutput>> turns(sessions.size());
  std::vector<Status> results(sessions.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < sessions.size(); ++i) {
    threads.emplace_back([&, i] {
      const ChatSession& session = sessions[i];
      EngineRequest request = session.first;
      for (size_t t = 0;; ++t) {
        Result<RequestHandle> h = engine.submit(request);
        if (!h.ok()) {
          results[i] = h.error();
          return;
        }
        const RequestOutput& out = h->wait();
        if (Status s = checked(out); !s.ok()) {
          results[i] = s;
          return;
        }
        turns[i].push_back(out);
        if (t == session.user_turns.size()) return;
        // The next prompt: the history so far (prompt + answer) + the next user turn.
        request.prompt.insert(request.prompt.end(), out.tokens.begin(), out.tokens.end());
        request.prompt.insert(request.prompt.end(), session.user_turns[t].begin(),
                              session.user_turns[t].end());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& s : results) TRELLIS_TRY(s);
  for (const std::vector<RequestOutput>& session : turns) {
    for (const RequestOutput& out : session) figures.add(out);
  }
  return {};
}

// tree-of-thought: the nodes are waited for breadth first over all trees (a node's children are
// submitted as soon as it is done, while later nodes still run); outputs in that order. With
// `use_fork` the children are Engine::fork branches of the finished node, else plain requests for
// the node's history with the seeds fork would give them.
Status run_thought_trees(Engine& engine, const WorkloadSizes& sizes, bool use_fork,
                         RunFigures& figures) {
  struct Node {
    RequestHandle handle;
    std::vector<TokenId> prompt;
    int32_t tree = 0;
    int32_t index = 0;  // breadth-first number inside its tree (see thought_seed)
    int32_t depth = 0;
  };
  std::deque<Node> queue;
  std::vector<EngineRequest> roots = tree_of_thought_roots(sizes, engine.model().hparams().n_vocab);
  for (size_t tree = 0; tree < roots.size(); ++tree) {
    std::vector<TokenId> prompt = roots[tree].prompt;
    Result<RequestHandle> h = engine.submit(std::move(roots[tree]));
    if (!h.ok()) return h.error();
    queue.push_back({*h, std::move(prompt), static_cast<int32_t>(tree), 0, 0});
  }
  while (!queue.empty()) {
    Node node = std::move(queue.front());
    queue.pop_front();
    const RequestOutput& out = node.handle.wait();
    TRELLIS_TRY(checked(out));
    figures.add(out);
    if (node.depth == sizes.depth) continue;
    const EngineRequest params = thought_branch_params(sizes, node.tree, node.index);
    std::vector<TokenId> history = node.prompt;
    history.insert(history.end(), out.tokens.begin(), out.tokens.end());
    std::vector<RequestHandle> children;
    if (use_fork) {
      Result<std::vector<RequestHandle>> forked = engine.fork(node.handle, sizes.branch, params);
      if (!forked.ok()) return forked.error();
      children = std::move(forked).value();
    } else {
      for (int32_t i = 0; i < sizes.branch; ++i) {
        EngineRequest child = params;
        child.prompt = history;
        child.sampling.seed = derive_seed(params.sampling.seed, static_cast<uint64_t>(i));
        Result<RequestHandle> h = engine.submit(std::move(child));
        if (!h.ok()) return h.error();
        children.push_back(*h);
      }
    }
    for (int32_t i = 0; i < sizes.branch; ++i) {
      queue.push_back({children[static_cast<size_t>(i)], history, node.tree,
                       node.index * sizes.branch + 1 + i, node.depth + 1});
    }
  }
  return {};
}

Result<RunFigures> run_once(WorkloadArgs& args, Workload workload, const Variant& variant) {
  std::unique_ptr<Engine> engine = args.generator.open_engine([&](EngineConfig& config) {
    config.prefix_cache.enabled = variant.cache_on;
    config.scheduler.policy = variant.policy;
    if (config.n_ctx == 0) config.n_ctx = max_sequence_tokens(workload, args.sizes);
  });
  if (!engine) return Error{"cannot start the engine"};
  const int64_t n_vocab = engine->model().hparams().n_vocab;
  RunFigures figures;
  const Clock::time_point start = Clock::now();
  switch (workload) {
    case Workload::AGENTS:
      TRELLIS_TRY(run_all_at_once(*engine, agents_requests(args.sizes, n_vocab), figures));
      break;
    case Workload::FEW_SHOT:
      TRELLIS_TRY(run_all_at_once(*engine, few_shot_requests(args.sizes, n_vocab), figures));
      break;
    case Workload::MULTI_TURN:
      TRELLIS_TRY(run_chat_sessions(*engine, multi_turn_sessions(args.sizes, n_vocab), figures));
      break;
    case Workload::TREE_OF_THOUGHT:
      TRELLIS_TRY(run_thought_trees(*engine, args.sizes, variant.cache_on, figures));
      break;
  }
  figures.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  const EngineStats stats = engine->stats();
  figures.scheduler_ms_per_step = stats.n_steps > 0 ? stats.scheduler_ms / stats.n_steps : 0;
  return figures;
}

// One row of the report: a variant's repetitions summed up.
nlohmann::json summary_row(const Variant& variant, const std::vector<RunFigures>& reps) {
  std::vector<double> tokens_per_s, latency_means, hit_rates, walls, scheduler_ms, all_latencies;
  int64_t prompt_tokens = 0, cached_tokens = 0;
  for (const RunFigures& r : reps) {
    tokens_per_s.push_back(r.tokens_per_s());
    latency_means.push_back(stats(r.latencies_ms).mean);
    walls.push_back(r.wall_ms);
    scheduler_ms.push_back(r.scheduler_ms_per_step);
    all_latencies.insert(all_latencies.end(), r.latencies_ms.begin(), r.latencies_ms.end());
    prompt_tokens += r.prompt_tokens;
    cached_tokens += r.cached_tokens;
  }
  const auto n = static_cast<int64_t>(reps.size());
  nlohmann::json row = {{"run", variant.label},
                        {"prompt_tokens", prompt_tokens / n},
                        {"cached_tokens", cached_tokens / n},
                        {"hit_rate", prompt_tokens > 0 ? static_cast<double>(cached_tokens) /
                                                             static_cast<double>(prompt_tokens)
                                                       : 0.0},
                        {"generation_tokens_per_s", stats(tokens_per_s).mean},
                        {"latency_ms_mean", stats(latency_means).mean},
                        {"latency_ms_p50", percentile(all_latencies, 0.5)},
                        {"latency_ms_p99", percentile(all_latencies, 0.99)},
                        {"wall_ms", stats(walls).mean},
                        {"scheduler_ms_per_step", stats(scheduler_ms).mean}};
  if (reps.size() > 1) {
    row["reps"] = reps.size();
    row["generation_tokens_per_s_stddev"] = stats(tokens_per_s).stddev;
    row["latency_ms_mean_stddev"] = stats(latency_means).stddev;
  }
  return row;
}

// The sizes the workload reads, for the record.
nlohmann::json sizes_json(Workload workload, const WorkloadSizes& s) {
  nlohmann::json j = {{"suffix_len", s.suffix_len}, {"D", s.decode_len}};
  switch (workload) {
    case Workload::AGENTS:
      j.update({{"groups", s.n_groups}, {"per_group", s.per_group}, {"prefix_len", s.prefix_len}});
      break;
    case Workload::FEW_SHOT:
      j.update({{"shots", s.n_shots}, {"shot_len", s.shot_len}, {"questions", s.n_questions}});
      break;
    case Workload::MULTI_TURN:
      j.update({{"sessions", s.n_sessions}, {"turns", s.n_turns}, {"prefix_len", s.prefix_len}});
      break;
    case Workload::TREE_OF_THOUGHT:
      j.update({{"trees", s.n_trees},
                {"depth", s.depth},
                {"branch", s.branch},
                {"prefix_len", s.prefix_len},
                {"temperature", s.temperature},
                {"seed", s.seed}});
      break;
  }
  return j;
}

// results.csv: one row per run (with the spread columns when there were repetitions).
CsvTable results_table(const nlohmann::json& record) {
  std::vector<std::string> header = {"run",
                                     "prompt_tokens",
                                     "cached_tokens",
                                     "hit_rate",
                                     "generation_tokens_per_s",
                                     "latency_ms_mean",
                                     "latency_ms_p50",
                                     "latency_ms_p99",
                                     "wall_ms",
                                     "scheduler_ms_per_step"};
  if (record["runs"].front().contains("reps")) {
    header.insert(header.end(),
                  {"reps", "generation_tokens_per_s_stddev", "latency_ms_mean_stddev"});
  }
  return csv_table(record["runs"], std::move(header));
}

void print_table(const WorkloadArgs& args, Workload workload, const nlohmann::json& rows) {
  std::printf("workload %s: %s, model %s\n", args.name.c_str(),
              describe(workload, args.sizes).c_str(), args.generator.model.c_str());
  if (args.reps > 1) {
    std::printf("%d repetitions after a warm-up run: means, +- sample standard deviation\n",
                args.reps);
  }
  std::printf(
      "| run | hit rate | cached / prompt tokens | gen tokens/s | latency mean | p50 | p99 | "
      "scheduler ms/step |\n|---|---|---|---|---|---|---|---|\n");
  for (const nlohmann::json& row : rows) {
    char spread[64] = "";
    if (row.contains("reps")) {
      std::snprintf(spread, sizeof spread, " +- %.2f",
                    row["generation_tokens_per_s_stddev"].get<double>());
    }
    std::printf("| %s | %.3f | %lld / %lld | %.2f%s | %.0f ms | %.0f ms | %.0f ms | %.3f |\n",
                row["run"].get<std::string>().c_str(), row["hit_rate"].get<double>(),
                row["cached_tokens"].get<long long>(), row["prompt_tokens"].get<long long>(),
                row["generation_tokens_per_s"].get<double>(), spread,
                row["latency_ms_mean"].get<double>(), row["latency_ms_p50"].get<double>(),
                row["latency_ms_p99"].get<double>(), row["scheduler_ms_per_step"].get<double>());
  }
}

constexpr const char* kForkNote =
    "the cache-off run submits each branch as its own request (with the seed fork gives it): "
    "fork shares the parent's blocks even with the cache off, which would count as cached tokens";

int run_workload_command(WorkloadArgs& args) {
  const std::optional<Workload> workload = parse_workload(args.name);
  if (!workload) {
    std::fprintf(stderr, "error: unknown workload '%s' (available: %s)\n", args.name.c_str(),
                 workload_names().c_str());
    return 1;
  }
  if (Status ok = check_sizes(*workload, args.sizes); !ok.ok()) {
    std::fprintf(stderr, "error: %s\n", ok.error().message.c_str());
    return 1;
  }
  if (args.reps < 1) {
    std::fprintf(stderr, "error: --reps must be at least 1\n");
    return 1;
  }
  if (args.reps > 1) {  // warm-up: caches, page faults and thread start-up, not recorded
    if (Result<RunFigures> r = run_once(args, *workload, kVariants[0]); !r.ok()) {
      std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
      return 1;
    }
  }
  nlohmann::json rows = nlohmann::json::array();
  bool identical = true;
  std::vector<std::vector<TokenId>> reference;
  for (const Variant& v : kVariants) {
    std::vector<RunFigures> reps;
    for (int32_t rep = 0; rep < args.reps; ++rep) {
      Result<RunFigures> r = run_once(args, *workload, v);
      if (!r.ok()) {
        std::fprintf(stderr, "error: %s: %s\n", v.label, r.error().message.c_str());
        return 1;
      }
      if (reference.empty()) reference = r->outputs;
      identical &= r->outputs == reference;
      reps.push_back(std::move(r).value());
    }
    rows.push_back(summary_row(v, reps));
  }
  nlohmann::json record = {
      {"bench", "workload"},       {"workload", args.name}, {"machine", machine_json()},
      {"commit", source_commit()}, {"runs", rows},          {"outputs_identical", identical},
      {"reps", args.reps}};
  record.update(sizes_json(*workload, args.sizes));
  if (*workload == Workload::TREE_OF_THOUGHT) record["note"] = kForkNote;
  Result<nlohmann::json> model = model_file_json(args.generator.model);
  record["model"] = model.ok() ? *model : nlohmann::json{{"path", args.generator.model}};
  if (Result<std::string> written =
          write_results(args.out, "workload-" + args.name, record, results_table(record));
      !written.ok()) {
    std::fprintf(stderr, "error: %s\n", written.error().message.c_str());
    return 1;
  }
  if (args.json) {
    std::printf("%s\n", record.dump().c_str());
  } else {
    print_table(args, *workload, rows);
    if (*workload == Workload::TREE_OF_THOUGHT) std::printf("note: %s\n", kForkNote);
    std::printf("outputs: %s\n", identical ? "identical" : "DIFFERENT");
  }
  if (!identical) {
    std::fprintf(stderr, "error: outputs differ between the runs\n");
    return 1;
  }
  return 0;
}

}  // namespace

void add_bench_workload_command(CLI::App& bench, int& exit_code) {
  CLI::App* cmd = bench.add_subcommand(
      "workload",
      "A synthetic multi-request workload (agents, few-shot, multi-turn, tree-of-thought): cache "
      "off, on with FCFS, on with LPM");
  auto args = std::make_shared<WorkloadArgs>();
  WorkloadSizes& s = args->sizes;
  args->generator.add_to(*cmd, /*model_required=*/false);
  args->generator.add_scheduler_options(*cmd);
  cmd->add_option("name", args->name, "Workload: " + workload_names())->required();
  cmd->add_option("--prefix-len", s.prefix_len,
                  "Shared prefix tokens: agents, per group; multi-turn and tree-of-thought, the "
                  "system prompt")
      ->capture_default_str();
  cmd->add_option("--suffix-len", s.suffix_len,
                  "Own tokens per request: agents' task, few-shot question, multi-turn user "
                  "turn, tree-of-thought question")
      ->capture_default_str();
  cmd->add_option("-D", s.decode_len, "Tokens generated per request (chat turn, tree node)")
      ->capture_default_str();
  cmd->add_option("--groups", s.n_groups, "agents: prefix groups")->capture_default_str();
  cmd->add_option("--per-group", s.per_group, "agents: requests per group")->capture_default_str();
  cmd->add_option("--shots", s.n_shots, "few-shot: example blocks in the shared prefix")
      ->capture_default_str();
  cmd->add_option("--shot-len", s.shot_len, "few-shot: tokens per example")->capture_default_str();
  cmd->add_option("--questions", s.n_questions, "few-shot: questions, submitted at once")
      ->capture_default_str();
  cmd->add_option("--sessions", s.n_sessions, "multi-turn: concurrent chat sessions")
      ->capture_default_str();
  cmd->add_option("--turns", s.n_turns, "multi-turn: turns per session, one after another")
      ->capture_default_str();
  cmd->add_option("--trees", s.n_trees, "tree-of-thought: root questions, one tree each")
      ->capture_default_str();
  cmd->add_option("--depth", s.depth, "tree-of-thought: levels below the root")
      ->capture_default_str();
  cmd->add_option("--branch", s.branch, "tree-of-thought: children per node")
      ->capture_default_str();
  cmd->add_option("--temp", s.temperature, "tree-of-thought: sampling temperature (> 0)")
      ->capture_default_str();
  cmd->add_option("--seed", s.seed, "tree-of-thought: sampling seed")->capture_default_str();
  cmd->add_option("--reps", args->reps,
                  "Runs per configuration (more than 1: after a warm-up run, with spread)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_option("--out", args->out,
                  "Folder for results.json and results.csv (default bench-results/workload-...)");
  cmd->callback([&exit_code, args] { exit_code = run_workload_command(*args); });
}

}  // namespace trellis::cli
