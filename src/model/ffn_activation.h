// The gated FFN's activation, gate = act(gate, up), shared by the dense FFN and the experts.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "model/architecture.h"

namespace trellis {

// gate[i] = act(gate[i], up[i]) for i < n, by the family's `activation` (SwiGLU, GeGLU or
// gpt-oss's clamped SwiGLU). Element by element, so any split gives the same bits; on every
// thread, because a batch's n_rows x n_ff exponentials on one thread leave the others idle for a
// tenth of a decode step of 8 sequences.
void activate_ffn(FfnActivation activation, float* gate, const float* up, int64_t n,
                  ThreadPool& pool);

}  // namespace trellis
