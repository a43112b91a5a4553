#include "cluster/mpi_pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>

#include "base/process_memory.h"
#include "cluster/layer_split.h"
#include "cluster/step_message.h"

namespace trellis {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<uint8_t> word_bytes(const std::vector<int32_t>& words) {
  std::vector<uint8_t> bytes(words.size() * sizeof(int32_t));
  std::memcpy(bytes.data(), words.data(), bytes.size());
  return bytes;
}

class MpiPipeline final : public Pipeline {
 public:
  MpiPipeline(MpiTransport& transport, const PipelineOptions& options)
      : transport_(transport), options_(options) {
    stats_.resize(static_cast<size_t>(transport.size()));
    for (int r = 0; r < transport.size(); ++r) stats_[static_cast<size_t>(r)].rank = r;
  }

  int n_stages() const override { return transport_.size(); }

  Result<LayerRange> local_layers(const GgufFile& file) override {
    Result<std::vector<LayerRange>> ranges =
        split_layers(file, transport_.size(), options_.layers_per_rank);
    if (!ranges.ok()) return ranges.error();
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t r = 0; r < ranges->size(); ++r) stats_[r].layers = (*ranges)[r];
    return ranges->front();
  }

  Status begin_engine(const PipelineSetup& setup) override {
    if (!failure_.empty()) return Error{failure_};
    broadcast({static_cast<int32_t>(StageCommand::SETUP), setup.n_blocks, setup.block_size,
               static_cast<int32_t>(setup.kv_types.key), static_cast<int32_t>(setup.kv_types.value),
               setup.max_rows, setup.n_ctx});
    return {};
  }

  void end_engine() override {
    if (failure_.empty()) broadcast({static_cast<int32_t>(StageCommand::END)});
  }

  Status launch(const Model& model, const ForwardBatch& batch, KvStorage& kv, Workspace& ws,
                ThreadPool& pool, std::vector<BlockCopy>& copies) override {
    if (!failure_.empty()) return Error{failure_};
    words_.clear();
    encode_step(batch, copies, micro_batches_for(batch.n_rows()), words_);
    copies.clear();
    broadcast(words_);
    TRELLIS_TRY(decode_step(std::span<const int32_t>(words_).subspan(1), kv.n_blocks(),
                            ws.max_rows(), step_));
    double busy = 0;
    uint64_t sent = 0;
    const auto n_embd = static_cast<size_t>(model.hparams().n_embd);
    std::vector<size_t>& outputs = in_flight_.emplace_back();
    for (MicroBatch& mb : step_.micro) {
      const Clock::time_point start = Clock::now();
      model.forward(mb.batch, kv, ws, pool, nullptr);
      busy += std::chrono::duration<double>(Clock::now() - start).count();
      const size_t n = static_cast<size_t>(mb.batch.n_rows()) * n_embd * sizeof(float);
      std::vector<uint8_t> rows(n);
      std::memcpy(rows.data(), ws.x.data(), n);
      sent += n;
      transport_.send(1, MessageTag::HIDDEN, std::move(rows));
      outputs.push_back(mb.batch.output_rows.size());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    StageStats& mine = stats_.front();
    mine.busy_s += busy;
    mine.bytes_sent += sent;
    mine.peak_rss = peak_rss_bytes();
    ++mine.n_steps;
    return {};
  }

  Status collect(const Model& model, float* logits) override {
    if (!failure_.empty()) return Error{failure_};
    if (in_flight_.empty()) return Error{"no step in flight"};
    const Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(options_.timeout_s));
    Status collected = collect_oldest(model, logits, deadline);
    in_flight_.pop_front();
    if (!collected.ok()) failure_ = collected.error().message;
    return collected;
  }

  // Every micro-batch streams each stage's weights once more, so cutting a step pays only when
  // its rows cost compute rather than weight traffic: default, one micro-batch per
  // kRowsPerMicroBatch rows, at most one per stage (a decode step of a few sequences stays whole).
  int32_t micro_batches_for(int32_t n_rows) const {
    if (options_.micro_batches > 0) return options_.micro_batches;
    return std::clamp(n_rows / kRowsPerMicroBatch, 1, n_stages());
  }
  static constexpr int32_t kRowsPerMicroBatch = 32;

  std::vector<StageStats> stage_stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  void broadcast(const std::vector<int32_t>& words) {
    for (int r = 1; r < n_stages(); ++r) transport_.send(r, MessageTag::CONTROL, word_bytes(words));
  }

  // The logits of each micro-batch of the oldest step from the last stage, then every stage's
  // report of it.
  Status collect_oldest(const Model& model, float* logits, Clock::time_point deadline) {
    const int last = n_stages() - 1;
    const auto n_vocab = static_cast<size_t>(model.hparams().n_vocab);
    size_t out_row = 0;
    for (const size_t n_out : in_flight_.front()) {
      if (!transport_.receive(last, MessageTag::LOGITS, message_, deadline).ok())
        return Error{missed_deadline(last, "send its logits", options_.timeout_s)};
      if (message_.size() != n_out * n_vocab * sizeof(float))
        return Error{"logits of the wrong size from rank " + std::to_string(last)};
      if (n_out > 0) std::memcpy(logits + out_row * n_vocab, message_.data(), message_.size());
      out_row += n_out;
    }
    for (int r = 1; r <= last; ++r) {
      if (!transport_.receive(r, MessageTag::REPORT, message_, deadline).ok())
        return Error{missed_deadline(r, "report the end of its step", options_.timeout_s)};
      StageStats report;
      if (!decode_stage_stats(message_, report) || report.rank != r)
        return Error{"a malformed report from rank " + std::to_string(r)};
      std::lock_guard<std::mutex> lock(mutex_);
      stats_[static_cast<size_t>(r)] = report;
    }
    return {};
  }

  MpiTransport& transport_;
  PipelineOptions options_;
  std::vector<int32_t> words_;
  std::vector<uint8_t> message_;
  DecodedStep step_;
  // Per step in flight, oldest first: its micro-batches' output row counts.
  std::deque<std::vector<size_t>> in_flight_;
  std::string failure_;  // set once a stage failed: every later call fails the same way
  mutable std::mutex mutex_;
  std::vector<StageStats> stats_;  // under mutex_
};

}  // namespace

std::unique_ptr<Pipeline> make_mpi_pipeline(MpiTransport& transport,
                                            const PipelineOptions& options) {
  return std::make_unique<MpiPipeline>(transport, options);
}

void shut_down_stages(MpiTransport& transport) {
  const std::vector<int32_t> words{static_cast<int32_t>(StageCommand::SHUTDOWN)};
  for (int r = 1; r < transport.size(); ++r)
    transport.send(r, MessageTag::CONTROL, word_bytes(words));
  if (!transport.flush(Clock::now() + std::chrono::seconds(10)).ok()) transport.abort(1);
  transport.finalize();
}

}  // namespace trellis
