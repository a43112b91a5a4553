// `trellis bench kv-types`: what a quantized KV cache costs in accuracy and buys in room.
//
// For each KV type, one engine on the same model (prefix cache off, so every prompt is computed
// in that type); each prompt runs as one greedy request that keeps the logits of every prompt
// position and generates n_gen tokens. Against the baseline type's run of the same prompt:
//   - logit error over the prompt positions (the same tokens in both runs, so the logits compare
//     position by position): the largest |difference| and the root mean square over every
//     position and vocabulary entry, and how often the top token is the same;
//   - greedy agreement: how many of the n_gen generated tokens equal the baseline's before the
//     first that differs (after it the two continue from different texts);
//   - room: KV bytes per token of context, and the tokens a pool of `kv_bytes` holds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/observer.h"
#include "engine/engine.h"

namespace trellis::bench {

struct KvTypeBenchOptions {
  std::string model_path;
  EngineConfig engine;               // its kv_types are replaced by each row's
  std::vector<std::string> prompts;  // texts, encoded with the model's BOS
  std::vector<KvTypes> types;        // the rows
  KvTypes baseline = KvTypes::both(KvType::F16);
  int32_t n_gen = 64;
  int64_t pool_bytes = 256LL << 20;  // the pool whose capacity is reported
};

struct KvTypeRow {
  KvTypes types;
  size_t bytes_per_token = 0;
  int64_t pool_tokens = 0;   // tokens a pool of pool_bytes holds
  double max_abs_error = 0;  // over every prompt position and vocabulary entry
  double rms_error = 0;
  int64_t n_positions = 0;      // prompt positions compared
  int64_t n_top1_same = 0;      // of those, with the baseline's top token
  int64_t n_greedy_agreed = 0;  // generated tokens equal to the baseline's, before a difference
  int64_t n_greedy = 0;         // generated tokens compared (n_gen per prompt)
};

// Errors: no prompts or types, n_gen < 1, an engine that cannot be made (a type the model's heads
// do not fit), a failed request.
Result<std::vector<KvTypeRow>> run_kv_type_bench(const KvTypeBenchOptions& options,
                                                 const Observer& observer);

}  // namespace trellis::bench
