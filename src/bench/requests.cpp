#include "bench/requests.h"

namespace trellis::bench {

Status output_status(const RequestOutput& out) {
  if (out.finish_reason == FinishReason::ERROR) return Error{out.error};
  return {};
}

}  // namespace trellis::bench
