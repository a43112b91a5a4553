// Many callers, one embedder: each caller's inputs wait in a queue, and one worker thread runs
// whatever has gathered (up to a token budget) in shared forward passes, so that concurrent
// requests share steps instead of taking turns.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/token_id.h"
#include "embed/embedder.h"

namespace trellis {

class EmbeddingQueue {
 public:
  // `batch_tokens`: the tokens the worker gathers from waiting callers before it runs them (a
  // caller's inputs are never split between runs).
  EmbeddingQueue(Embedder& embedder, int64_t batch_tokens);
  ~EmbeddingQueue();
  EmbeddingQueue(const EmbeddingQueue&) = delete;
  EmbeddingQueue& operator=(const EmbeddingQueue&) = delete;

  // The raw outputs of the inputs (see Embedder::embed); blocks until they are computed.
  // Precondition: every input passes Embedder::check_input (one caller's bad input must not fail
  // the others it shares a batch with). After shutdown(): an error.
  Result<std::vector<std::vector<float>>> embed(std::vector<std::vector<TokenId>> inputs);

  // Stops the worker once the inputs it runs now are done; waiting callers get an error.
  void shutdown();

  int64_t n_batches() const;  // forward calls run so far (for tests and metrics)

 private:
  struct Job {
    std::vector<std::vector<TokenId>> inputs;
    std::promise<Result<std::vector<std::vector<float>>>> done;
  };
  void loop();
  // The jobs to run next: the first waiting one and those after it while they fit batch_tokens.
  std::vector<std::unique_ptr<Job>> take_jobs();

  Embedder& embedder_;
  const int64_t batch_tokens_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Job>> waiting_;
  bool stopping_ = false;
  int64_t n_batches_ = 0;
  std::thread worker_;
};

}  // namespace trellis
