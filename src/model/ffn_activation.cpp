#include "model/ffn_activation.h"

#include "kernels/ops.h"

namespace trellis {
namespace {

// Elements per claim: a couple of microseconds of vectorized exponentials, enough to repay a
// claim; one token's n_ff splits over two threads at most.
constexpr int64_t kActivationGranule = 4096;

}  // namespace

void activate_ffn(FfnActivation activation, float* gate, const float* up, int64_t n,
                  ThreadPool& pool) {
  pool.parallel_for(n, kActivationGranule, [&](int64_t begin, int64_t end) {
    switch (activation) {
      case FfnActivation::SILU:
        silu_mul_row(gate + begin, up + begin, end - begin);
        break;
      case FfnActivation::GELU_TANH:
        gelu_tanh_mul_row(gate + begin, up + begin, end - begin);
        break;
      case FfnActivation::SWIGLU_OAI:
        swiglu_oai_row(gate + begin, up + begin, end - begin);
        break;
    }
  });
}

}  // namespace trellis
