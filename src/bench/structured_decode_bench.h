// `trellis bench structured`, parts 3 and 4: what a JSON schema constraint costs decoding in the
// engine, and what jump-forward gives back.
//
// Two engines on the model, identical but for EngineConfig::jump_forward (off, on). Requests are
// greedy, on a fixed prompt (request i ends with its own index, so the batch's outputs differ):
//   free          free text, EOS ignored, engine "off", as long as each constrained output
//   constrained   the person schema (structured_schemas.h), jump-forward off: every token sampled
//                 through the mask
//   jump-forward  the same requests on engine "on": forced runs appended as one prefill chunk
//   free (JF)     free text as long as each jump-forward output (jump-forward changes the tokens,
//                 so its outputs may be longer or shorter than the constrained ones)
// An uncounted run of the constrained requests on each engine fills that engine's mask cache for
// the grammar (as a server's first requests with a schema do: the figures are the steady state
// after them) and gives the outputs' lengths, which the free requests then generate exactly, so
// that each compares with free text of as many decode steps. Then, per batch size B (B requests
// submitted at once), `repeats` cycles of the four runs, in alternating order (the order above,
// then the reverse), so that drift on a noisy machine falls on every mode alike; ratios are taken
// within a cycle and their median reported.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/observer.h"
#include "bench/stats.h"
#include "engine/engine.h"

namespace trellis::bench {

struct DecodeBenchOptions {
  std::string model_path;
  // The base configuration; both engines get at least max(batch_sizes) running sequences, and a
  // context of 512 + max_tokens when it is 0.
  EngineConfig engine;
  std::vector<int32_t> batch_sizes = {1, 8};
  int32_t max_tokens = 96;  // the constrained requests' cap
  int32_t repeats = 3;      // cycles per batch size
  std::string prompt =
      "Write the record of a fictional customer as JSON: name, age, email, postal address and a "
      "few tags.";
};

// One mode at one batch size, over the cycles.
struct DecodeModeStats {
  Stats tokens_per_s;           // a run's generated tokens after each request's first, per second
                                // from the first request's first token to the last one's end
  Stats request_ms;             // a run's mean end-to-end time per request (submission to end)
  double generated_tokens = 0;  // per run, all requests (mean over cycles)
  double forced_tokens = 0;     // of those, appended by jump-forward (EngineStats)
  double engine_steps = 0;      // forward passes per run (EngineStats::n_steps)
};

struct DecodeBatchResult {
  int32_t batch_size = 0;
  DecodeModeStats free_text;
  DecodeModeStats constrained;
  DecodeModeStats jump_forward;
  DecodeModeStats free_jump_lengths;  // free text as long as the jump-forward outputs
  // Medians over cycles of the ratio within a cycle.
  double constrained_speed_ratio = 0;  // constrained / free tokens/s
  double jump_forward_time_ratio = 0;  // jump-forward / constrained request time
  double jump_forward_free_ratio = 0;  // jump-forward / free (JF lengths) request time
};

struct DecodeBenchResult {
  int n_threads = 0;
  int32_t n_vocab = 0;
  std::vector<int32_t> prompt_tokens;  // per request
  std::vector<int32_t> lengths;        // tokens each constrained request generated (calibration)
  std::vector<int32_t> jump_forward_lengths;  // the same with jump-forward
  int32_t n_complete = 0;     // calibration requests the grammar completed (finish reason STOP)
  int32_t n_valid_json = 0;   // of those, outputs that parse as JSON
  std::string sample_output;  // the first calibration request's text
  std::vector<DecodeBatchResult> batches;
};

// Errors: a bad count, the engine, a failed request. Progress: "decode warm-up" (the uncounted
// runs), then "decode B=N" with one unit per cycle.
Result<DecodeBenchResult> run_decode_bench(const DecodeBenchOptions& options,
                                           const Observer& observer);

}  // namespace trellis::bench
