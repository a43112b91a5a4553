// `trellis bench spec`: what speculative decoding gains where drafts hit, and what it costs where
// drafts are seldom found or nothing matches, as decode tokens/s with speculation on and off.
//
// Each workload runs on an engine of its own whose speculation uses the workload's source; its
// "off" runs are the same requests opting out (EngineRequest::speculate), alternating with the
// "on" runs, repetition by repetition, so both see the same engine, cache and machine state.
//
//   regenerate  the same prompts again: an unmeasured first run puts the answers in the prefix
//               cache, the measured runs draft them from there (source prefix_cache)
//   agent       the same prompts again in a new cache namespace each time, as another user's
//               identical call: the tree cannot serve them, the n-gram pool (which learnt the
//               first run's answers) drafts them (source ngram_pool)
//   miss        prompts that repeat a span of their own (source prompt_lookup): it drafts where
//               the output's last tokens occurred before, which a random-weight model's output
//               seldom does, so this mostly measures what looking for drafts costs
//   free        fresh prompts sampled at temperature 1 with every source on: nothing to draft
//               but what the output happens to repeat; the cost of leaving speculation on
//   draft       fresh greedy prompts, drafted by the draft model alone (EngineConfig::draft_model,
//               required): what its guesses gain or cost at the acceptance rate they reach (the
//               target's own file agrees by construction, another model mostly does not)
//
// Random-weight models do not copy their input, so the copy workloads repeat the model's own
// earlier outputs: greedy, the measured answer is the first run's. Per batch size B, B requests
// start together; decode tokens/s = B * (n_gen - 1) / (last end - last first token).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/observer.h"
#include "bench/stats.h"
#include "engine/engine.h"

namespace trellis::bench {

struct SpecBenchOptions {
  std::string model_path;
  // The base configuration: the bench turns the prefix cache on, chooses the speculation per
  // workload and, when the context is 0, sets it to fit the prompt and the answer.
  EngineConfig engine;
  int32_t n_prompt = 64;
  int32_t n_gen = 128;
  int32_t reps = 3;
  std::vector<int32_t> batch_sizes{1, 8};
  // "draft" too when the engine has a draft model.
  std::vector<std::string> workloads{"regenerate", "agent", "miss", "free"};
  uint64_t seed = 1;
};

struct SpecRow {
  std::string workload;
  int32_t batch = 0;
  Stats off_tokens_per_s;  // decode, over reps
  Stats on_tokens_per_s;
  Stats speedup;            // on / off, rep by rep
  int64_t n_generated = 0;  // by the "on" runs
  int64_t n_drafted = 0;    // draft tokens they verified
  int64_t n_accepted = 0;   // of those, kept
};

// Errors: an unknown workload, a size that is not positive, the engine, a failed request.
// Progress: one stage per workload and batch size, 2 * reps runs each.
Result<std::vector<SpecRow>> run_spec_bench(const SpecBenchOptions& options,
                                            const Observer& observer);

}  // namespace trellis::bench
