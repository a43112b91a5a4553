// An encoder's attention: every row of one input attends to all of that input's rows (no causal
// mask, no KV cache). One (input, head) pair at a time, as two matrix products through the matmul
// kernels: the input's keys of the head are the weight rows of the scores' product, its values,
// transposed, those of the output's. Query rows go in chunks, so that a long input's scores take
// a chunk x length buffer, not length x length. An input's results do not depend on the other
// inputs of the batch.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/matmul.h"

namespace trellis {

// What one thread needs for any input of up to max_len rows and heads of head_dim.
class EncoderAttentionScratch {
 public:
  EncoderAttentionScratch(int64_t max_len, int64_t head_dim);

  std::vector<float> keys;     // [len][head_dim]
  std::vector<float> values;   // [head_dim][len], transposed
  std::vector<float> queries;  // [chunk][head_dim]
  std::vector<float> scores;   // [chunk][len]
  std::vector<float> out;      // [chunk][head_dim]
  ThreadPool pool{1};          // the products run on the thread that owns the scratch
  MatmulScratch matmul;
};

// The rows' q, k, v and out are n_embd floats apart; head h is at h * head_dim of each. Writes,
// for rows [begin, end) of one input and head h:
//   out[r][h] = sum_j softmax_j(q[r][h] . k[j][h] * scale) v[j][h],  j in [begin, end)
// Precondition: end - begin <= the scratch's max_len.
struct EncoderAttentionInput {
  const float* q;
  const float* k;
  const float* v;
  float* out;
  int64_t n_embd;
  int64_t head_dim;
  float scale;
};
void encoder_attend_head(const EncoderAttentionInput& in, int32_t begin, int32_t end, int64_t h,
                         EncoderAttentionScratch& scratch);

}  // namespace trellis
