#include "embed/embedding_queue.h"

namespace trellis {
namespace {

int64_t count_tokens(const std::vector<std::vector<TokenId>>& inputs) {
  int64_t n = 0;
  for (const std::vector<TokenId>& input : inputs) n += static_cast<int64_t>(input.size());
  return n;
}

}  // namespace

EmbeddingQueue::EmbeddingQueue(Embedder& embedder, int64_t batch_tokens)
    : embedder_(embedder), batch_tokens_(batch_tokens), worker_([this] { loop(); }) {}

EmbeddingQueue::~EmbeddingQueue() {
  shutdown();
}

Result<std::vector<std::vector<float>>> EmbeddingQueue::embed(
    std::vector<std::vector<TokenId>> inputs) {
  auto job = std::make_unique<Job>();
  job->inputs = std::move(inputs);
  std::future<Result<std::vector<std::vector<float>>>> result = job->done.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return Error{"the server is shutting down"};
    waiting_.push_back(std::move(job));
  }
  wake_.notify_one();
  return result.get();
}

void EmbeddingQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && !worker_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_one();
  if (worker_.joinable()) worker_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::unique_ptr<Job>& job : waiting_)
    job->done.set_value(Error{"the server is shutting down"});
  waiting_.clear();
}

int64_t EmbeddingQueue::n_batches() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return n_batches_;
}

std::vector<std::unique_ptr<EmbeddingQueue::Job>> EmbeddingQueue::take_jobs() {
  std::vector<std::unique_ptr<Job>> jobs;
  int64_t tokens = 0;
  while (!waiting_.empty()) {
    const int64_t next = count_tokens(waiting_.front()->inputs);
    if (!jobs.empty() && tokens + next > batch_tokens_) break;
    tokens += next;
    jobs.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  return jobs;
}

void EmbeddingQueue::loop() {
  for (;;) {
    std::vector<std::unique_ptr<Job>> jobs;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
      if (stopping_) return;
      jobs = take_jobs();
      ++n_batches_;
    }
    std::vector<std::vector<TokenId>> all;
    for (std::unique_ptr<Job>& job : jobs) {
      for (std::vector<TokenId>& input : job->inputs) all.push_back(std::move(input));
    }
    Result<std::vector<std::vector<float>>> out = embedder_.embed(all);
    size_t next = 0;
    for (std::unique_ptr<Job>& job : jobs) {
      if (!out.ok()) {
        job->done.set_value(out.error());
        continue;
      }
      std::vector<std::vector<float>> mine(job->inputs.size());
      for (std::vector<float>& v : mine) v = std::move((*out)[next++]);
      job->done.set_value(std::move(mine));
    }
  }
}

}  // namespace trellis
