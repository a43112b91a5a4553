#include "bench/spec_bench.h"

#include <algorithm>
#include <array>
#include <memory>
#include <random>
#include <string_view>

namespace trellis::bench {
namespace {

constexpr std::array<std::string_view, 5> kWorkloads{"regenerate", "agent", "miss", "free",
                                                     "draft"};

// The one source a workload measures; "free" runs with every source, as by default (the draft
// model only in its own workload). The draft lengths are the base configuration's.
SpeculationConfig speculation_for(std::string_view workload, SpeculationConfig config) {
  config.sources.fill(true);
  if (workload == "free") return config;
  config.sources.fill(false);
  DraftSource source = DraftSource::PROMPT_LOOKUP;
  if (workload == "regenerate") source = DraftSource::PREFIX_CACHE;
  if (workload == "agent") source = DraftSource::NGRAM_POOL;
  if (workload == "draft") source = DraftSource::DRAFT_MODEL;
  config.sources[static_cast<size_t>(source)] = true;
  return config;
}

// Random ordinary tokens (the low ids of the synthetic vocabularies are control tokens), BOS
// first when the vocabulary has one.
std::vector<TokenId> random_prompt(std::mt19937_64& rng, int32_t n, const Vocab& vocab) {
  const auto top = std::min<int32_t>(static_cast<int32_t>(vocab.size()), 30000);
  std::uniform_int_distribution<TokenId> pick(std::min(100, top - 1), top - 1);
  std::vector<TokenId> prompt;
  if (vocab.bos_id != kNoToken) prompt.push_back(vocab.bos_id);
  while (static_cast<int32_t>(prompt.size()) < n) prompt.push_back(pick(rng));
  return prompt;
}

// A prompt whose second half repeats its first: prompt lookup drafts from it at once.
std::vector<TokenId> repeating_prompt(std::mt19937_64& rng, int32_t n, const Vocab& vocab) {
  std::vector<TokenId> prompt = random_prompt(rng, (n + 1) / 2, vocab);
  const size_t half = prompt.size();
  for (size_t i = 0; static_cast<int32_t>(prompt.size()) < n; ++i)
    prompt.push_back(prompt[i % half]);
  return prompt;
}

EngineRequest request_for(std::vector<TokenId> prompt, int32_t n_gen, bool sampled, uint64_t seed,
                          bool speculate, std::string ns) {
  EngineRequest r = greedy_request(std::move(prompt), n_gen);
  if (sampled) {
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
  }
  r.speculate = speculate;
  r.cache_namespace = std::move(ns);
  return r;
}

struct Measured {
  double tokens_per_s = 0;
  int64_t n_generated = 0;
  int64_t n_drafted = 0;
  int64_t n_accepted = 0;
};

// Submits the requests together and waits for them all.
Result<Measured> run_together(Engine& engine, std::vector<EngineRequest> requests) {
  std::vector<RequestHandle> handles;
  for (EngineRequest& r : requests) {
    Result<RequestHandle> h = engine.submit(std::move(r));
    if (!h.ok()) return h.error();
    handles.push_back(*h);
  }
  Measured m;
  double last_first_token_ms = 0;
  double last_end_ms = 0;
  int64_t n_decoded = 0;
  for (RequestHandle& h : handles) {
    const RequestOutput& out = h.wait();
    if (out.finish_reason == FinishReason::ERROR) return Error{out.error};
    const RequestStats& s = out.stats;
    last_first_token_ms = std::max(last_first_token_ms, s.ttft_ms);
    last_end_ms = std::max(last_end_ms, s.total_ms);
    n_decoded += std::max(0, s.n_generated_tokens - 1);
    m.n_generated += s.n_generated_tokens;
    m.n_drafted += s.n_draft_tokens;
    m.n_accepted += s.n_accepted_tokens;
  }
  const double decode_ms = last_end_ms - last_first_token_ms;
  m.tokens_per_s = decode_ms > 0 ? static_cast<double>(n_decoded) * 1000.0 / decode_ms : 0.0;
  return m;
}

// One workload at one batch size on `engine`: reps pairs of runs, off and on alternating.
Result<SpecRow> measure(Engine& engine, const SpecBenchOptions& options, std::string_view workload,
                        int32_t batch, const Observer& observer) {
  const std::string stage = std::string(workload) + " B=" + std::to_string(batch);
  const Vocab& vocab = engine.tokenizer().vocab();
  const bool sampled = workload == "free";
  // Fresh prompts for every run, so that no run drafts what another generated.
  const bool fresh = sampled || workload == "draft";
  const auto runs = static_cast<uint64_t>(2 * options.reps);
  observer.report_progress(stage, 0, runs);
  SpecRow row;
  row.workload = std::string(workload);
  row.batch = batch;
  std::vector<double> off, on, speedup;
  for (int32_t rep = 0; rep < options.reps; ++rep) {
    std::mt19937_64 rng(options.seed * 1000003u + static_cast<uint64_t>(batch) * 1009u +
                        static_cast<uint64_t>(rep));
    std::vector<std::vector<TokenId>> prompts;
    for (int32_t i = 0; i < batch; ++i) {
      prompts.push_back(workload == "miss" ? repeating_prompt(rng, options.n_prompt, vocab)
                                           : random_prompt(rng, options.n_prompt, vocab));
    }
    const std::string tag = stage + " rep " + std::to_string(rep);
    auto requests = [&](bool speculate, const std::string& ns) {
      std::vector<EngineRequest> batch_requests;
      for (const std::vector<TokenId>& p : prompts) {
        std::vector<TokenId> prompt = fresh ? random_prompt(rng, options.n_prompt, vocab) : p;
        batch_requests.push_back(
            request_for(std::move(prompt), options.n_gen, sampled, rng(), speculate, ns));
      }
      return batch_requests;
    };
    // The first answers, which the regenerate and agent runs repeat.
    if (workload == "regenerate" || workload == "agent") {
      Result<Measured> first = run_together(engine, requests(false, "first " + tag));
      if (!first.ok()) return first.error();
    }
    const bool on_first = rep % 2 == 1;
    for (int k = 0; k < 2; ++k) {
      const bool speculate = (k == 0) == on_first;
      // Regenerate repeats within the first run's namespace; the others take a new one per run.
      const std::string ns =
          workload == "regenerate" ? "first " + tag : (speculate ? "on " : "off ") + tag;
      Result<Measured> m = run_together(engine, requests(speculate, ns));
      if (!m.ok()) return m.error();
      (speculate ? on : off).push_back(m->tokens_per_s);
      if (speculate) {
        row.n_generated += m->n_generated;
        row.n_drafted += m->n_drafted;
        row.n_accepted += m->n_accepted;
      }
      observer.report_progress(stage, static_cast<uint64_t>(2 * rep + k + 1), runs);
    }
    speedup.push_back(off.back() > 0 ? on.back() / off.back() : 0.0);
  }
  row.off_tokens_per_s = stats(off);
  row.on_tokens_per_s = stats(on);
  row.speedup = stats(speedup);
  return row;
}

}  // namespace

Result<std::vector<SpecRow>> run_spec_bench(const SpecBenchOptions& options,
                                            const Observer& observer) {
  if (options.n_prompt < 2 || options.n_gen < 2 || options.reps < 1 ||
      options.batch_sizes.empty()) {
    return Error{
        "bench spec needs a prompt and an answer of at least 2 tokens, reps >= 1 and a "
        "batch size"};
  }
  for (const std::string& w : options.workloads) {
    if (std::find(kWorkloads.begin(), kWorkloads.end(), w) == kWorkloads.end())
      return Error{"unknown workload '" + w + "' (regenerate, agent, miss, free or draft)"};
    if (w == "draft" && options.engine.draft_model.empty())
      return Error{"the draft workload needs a draft model (--draft-model FILE)"};
  }
  const int32_t max_batch =
      *std::max_element(options.batch_sizes.begin(), options.batch_sizes.end());
  if (*std::min_element(options.batch_sizes.begin(), options.batch_sizes.end()) < 1)
    return Error{"batch sizes must be at least 1"};
  std::vector<SpecRow> rows;
  for (const std::string& workload : options.workloads) {
    EngineConfig config = options.engine;
    config.prefix_cache.enabled = true;
    config.speculation = speculation_for(workload, options.engine.speculation);
    if (workload != "draft") config.draft_model.clear();
    if (config.n_ctx == 0) config.n_ctx = options.n_prompt + options.n_gen + 8;
    config.scheduler.max_seqs = std::max(config.scheduler.max_seqs, max_batch);
    config.scheduler.max_batch_tokens =
        std::max(config.scheduler.max_batch_tokens, config.scheduler.max_seqs);
    // Room for a batch running and the answers it repeats, kept cached.
    if (config.kv_bytes == 0 && config.kv_tokens == 0)
      config.kv_tokens = int64_t{config.n_ctx} * (2 * max_batch + 2);
    Result<std::unique_ptr<Engine>> engine = Engine::create(options.model_path, config);
    if (!engine.ok()) return engine.error();
    // Page the weights in before anything is timed.
    Result<RequestOutput> warm = (*engine)->run(greedy_request({1, 2, 3}, 4));
    if (!warm.ok()) return warm.error();
    for (int32_t batch : options.batch_sizes) {
      Result<SpecRow> row = measure(**engine, options, workload, batch, observer);
      if (!row.ok()) return row.error();
      rows.push_back(*row);
    }
  }
  return rows;
}

}  // namespace trellis::bench
