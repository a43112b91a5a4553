#include "bench/workload_bench.h"

#include <unistd.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bench/requests.h"
#include "bench/results.h"
#include "bench/stats.h"
#include "sample/rng.h"

namespace trellis::bench {
namespace {

using Clock = std::chrono::steady_clock;

// One configuration of the engine: the three runs of every workload, and two more with the disk
// tier when the options name a cache directory.
struct Variant {
  const char* label;
  bool cache_on;
  SchedulePolicy policy;
  bool disk_tier = false;
};
constexpr Variant kVariants[] = {{"cache off", false, SchedulePolicy::FCFS},
                                 {"cache on, fcfs", true, SchedulePolicy::FCFS},
                                 {"cache on, lpm", true, SchedulePolicy::LPM}};
constexpr Variant kDiskVariants[] = {
    {"cache on, fcfs, disk tier", true, SchedulePolicy::FCFS, true},
    {"cache on, lpm, disk tier", true, SchedulePolicy::LPM, true}};

// Where the disk-tier run keeps its tier: a fresh folder inside the given directory, so that
// every run starts with an empty tier and nothing else in the directory is touched.
std::string run_tier_dir(const std::string& cache_dir) {
  return (std::filesystem::path(cache_dir) / ("bench-workload-" + std::to_string(::getpid())))
      .string();
}

// The figures of one run (one repetition of one variant).
struct RunFigures {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  double wall_ms = 0;
  int64_t generated = 0;
  std::vector<double> latencies_ms;           // one per request (chat turn, tree node)
  std::vector<std::vector<TokenId>> outputs;  // in an order fixed by the workload, not by timing
  double scheduler_ms_per_step = 0;           // the scheduler's own planning cost
  int64_t disk_cached_tokens = 0;             // of cached_tokens, those read from the disk tier

  void add(const RequestOutput& out) {
    prompt_tokens += out.stats.n_prompt_tokens;
    cached_tokens += out.stats.n_cached_tokens;
    disk_cached_tokens += out.stats.n_disk_cached_tokens;
    generated += out.stats.n_generated_tokens;
    latencies_ms.push_back(out.stats.total_ms);
    outputs.push_back(out.tokens);
  }
  double hit_rate() const {
    return prompt_tokens > 0 ? static_cast<double>(cached_tokens) / prompt_tokens : 0;
  }
  double tokens_per_s() const { return wall_ms > 0 ? generated * 1000.0 / wall_ms : 0; }
};

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
    TRELLIS_TRY(output_status(out));
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
        if (Status s = output_status(out); !s.ok()) {
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
    TRELLIS_TRY(output_status(out));
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
                       thought_child(sizes, node.index, i), node.depth + 1});
    }
  }
  return {};
}

Result<RunFigures> run_once(const WorkloadOptions& options, const Variant& variant) {
  EngineConfig config = options.engine;
  config.prefix_cache.enabled = variant.cache_on;
  config.scheduler.policy = variant.policy;
  config.cache_dir = variant.disk_tier ? run_tier_dir(options.engine.cache_dir) : std::string();
  if (!config.cache_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(config.cache_dir, ec);  // each run starts with an empty tier
  }
  if (config.n_ctx == 0) config.n_ctx = max_sequence_tokens(options.workload, options.sizes);
  Result<std::unique_ptr<Engine>> created = Engine::create(options.model_path, config);
  if (!created.ok()) return created.error();
  Engine& engine = **created;
  const int64_t n_vocab = engine.model().hparams().n_vocab;
  const WorkloadSizes& sizes = options.sizes;
  RunFigures figures;
  const Clock::time_point start = Clock::now();
  switch (options.workload) {
    case Workload::AGENTS:
      TRELLIS_TRY(run_all_at_once(engine, agents_requests(sizes, n_vocab), figures));
      break;
    case Workload::FEW_SHOT:
      TRELLIS_TRY(run_all_at_once(engine, few_shot_requests(sizes, n_vocab), figures));
      break;
    case Workload::MULTI_TURN:
      TRELLIS_TRY(run_chat_sessions(engine, multi_turn_sessions(sizes, n_vocab), figures));
      break;
    case Workload::TREE_OF_THOUGHT:
      TRELLIS_TRY(run_thought_trees(engine, sizes, variant.cache_on, figures));
      break;
  }
  figures.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  const EngineStats stats = engine.stats();
  figures.scheduler_ms_per_step = stats.n_steps > 0 ? stats.scheduler_ms / stats.n_steps : 0;
  created->reset();
  if (!config.cache_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(config.cache_dir, ec);
  }
  return figures;
}

// One row of the report: a variant's repetitions summed up.
nlohmann::json summary_row(const Variant& variant, const std::vector<RunFigures>& reps) {
  std::vector<double> tokens_per_s, latency_means, hit_rates, walls, scheduler_ms, all_latencies;
  int64_t prompt_tokens = 0, cached_tokens = 0, disk_cached_tokens = 0;
  for (const RunFigures& r : reps) {
    disk_cached_tokens += r.disk_cached_tokens;
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
                        {"disk_cached_tokens", disk_cached_tokens / n},
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

constexpr const char* kForkNote =
    "the cache-off run submits each branch as its own request (with the seed fork gives it): "
    "fork shares the parent's blocks even with the cache off, which would count as cached tokens";

}  // namespace

Result<nlohmann::json> run_workload_bench(const WorkloadOptions& options,
                                          const Observer& observer) {
  TRELLIS_TRY(check_sizes(options.workload, options.sizes));
  if (options.reps < 1) return Error{"--reps must be at least 1"};
  if (options.reps > 1) {  // warm-up: caches, page faults and thread start-up, not recorded
    if (Result<RunFigures> r = run_once(options, kVariants[0]); !r.ok()) return r.error();
  }
  nlohmann::json rows = nlohmann::json::array();
  bool identical = true;
  std::vector<std::vector<TokenId>> reference;
  std::vector<Variant> variants(std::begin(kVariants), std::end(kVariants));
  if (!options.engine.cache_dir.empty())
    variants.insert(variants.end(), std::begin(kDiskVariants), std::end(kDiskVariants));
  for (const Variant& v : variants) {
    const auto n_runs = static_cast<uint64_t>(options.reps);
    observer.report_progress(v.label, 0, n_runs);
    std::vector<RunFigures> reps;
    for (int32_t rep = 0; rep < options.reps; ++rep) {
      Result<RunFigures> r = run_once(options, v);
      if (!r.ok()) return Error{std::string(v.label) + ": " + r.error().message};
      observer.report_progress(v.label, static_cast<uint64_t>(rep + 1), n_runs);
      if (reference.empty()) reference = r->outputs;
      identical &= r->outputs == reference;
      reps.push_back(std::move(r).value());
    }
    nlohmann::json row = summary_row(v, reps);
    observer.report_row(row);
    rows.push_back(std::move(row));
  }
  nlohmann::json record = {{"bench", "workload"},
                           {"workload", workload_name(options.workload)},
                           {"runs", rows},
                           {"outputs_identical", identical},
                           {"reps", options.reps}};
  record.update(sizes_json(options.workload, options.sizes));
  record.update(run_facts(options.model_path));
  if (options.workload == Workload::TREE_OF_THOUGHT) record["note"] = kForkNote;
  return record;
}

// results.csv: one row per run (with the spread columns when there were repetitions).
CsvTable workload_results_table(const nlohmann::json& record) {
  std::vector<std::string> header = {"run",
                                     "prompt_tokens",
                                     "cached_tokens",
                                     "hit_rate",
                                     "generation_tokens_per_s",
                                     "latency_ms_mean",
                                     "latency_ms_p50",
                                     "latency_ms_p99",
                                     "wall_ms",
                                     "scheduler_ms_per_step",
                                     "disk_cached_tokens"};
  if (record["runs"].front().contains("reps")) {
    header.insert(header.end(),
                  {"reps", "generation_tokens_per_s_stddev", "latency_ms_mean_stddev"});
  }
  return csv_table(record["runs"], std::move(header));
}

}  // namespace trellis::bench
