#include "bench/requests.h"

namespace trellis::bench {

EngineRequest greedy_request(std::vector<TokenId> prompt, int32_t max_tokens) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  return r;
}

Status output_status(const RequestOutput& out) {
  if (out.finish_reason == FinishReason::ERROR) return Error{out.error};
  return {};
}

}  // namespace trellis::bench
