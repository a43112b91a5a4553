#include "cluster/stage_worker.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/process_memory.h"
#include "base/thread_pool.h"
#include "cluster/layer_split.h"
#include "cluster/stage_stats.h"
#include "cluster/step_message.h"
#include "gguf/gguf_file.h"
#include "model/model.h"

namespace trellis {
namespace {

using Clock = std::chrono::steady_clock;

// Whether a setup message's word names a KvType.
bool is_kv_type(int32_t word) {
  return word >= static_cast<int32_t>(KvType::F16) && word <= static_cast<int32_t>(KvType::Q4_0);
}

std::vector<int32_t> as_words(const std::vector<uint8_t>& bytes) {
  std::vector<int32_t> words(bytes.size() / sizeof(int32_t));
  std::memcpy(words.data(), bytes.data(), words.size() * sizeof(int32_t));
  return words;
}

std::vector<uint8_t> as_bytes(const float* values, size_t n) {
  std::vector<uint8_t> bytes(n * sizeof(float));
  if (n > 0) std::memcpy(bytes.data(), values, bytes.size());
  return bytes;
}

// What an engine on rank 0 needs this stage to hold: created by SETUP, dropped by END.
struct StageEngine {
  StageEngine(KvStorage storage, const ModelHParams& hp, int32_t max_rows)
      : kv(std::move(storage)), ws(hp, max_rows) {}
  KvStorage kv;
  Workspace ws;
};

class StageWorker {
 public:
  StageWorker(MpiTransport& transport, const PipelineOptions& options, int n_threads)
      : transport_(transport), options_(options), pool_(n_threads) {}

  Status load(const std::string& path) {
    Result<GgufFile> file = GgufFile::open(path);
    if (!file.ok()) return file.error();
    file_ = std::make_unique<GgufFile>(std::move(file).value());
    Result<std::vector<LayerRange>> ranges =
        split_layers(*file_, transport_.size(), options_.layers_per_rank);
    if (!ranges.ok()) return ranges.error();
    stats_.rank = transport_.rank();
    stats_.layers = (*ranges)[static_cast<size_t>(transport_.rank())];
    Result<std::unique_ptr<Model>> model = Model::load(*file_, stats_.layers);
    if (!model.ok()) return model.error();
    model_ = std::move(model).value();
    return {};
  }

  // Follows commands until SHUTDOWN.
  Status run() {
    std::vector<uint8_t> message;
    for (;;) {
      TRELLIS_TRY(transport_.receive(0, MessageTag::CONTROL, message, Clock::time_point::max()));
      const std::vector<int32_t> words = as_words(message);
      if (words.empty()) return Error{"empty command from rank 0"};
      const std::span<const int32_t> args = std::span<const int32_t>(words).subspan(1);
      switch (static_cast<StageCommand>(words[0])) {
        case StageCommand::SETUP:
          TRELLIS_TRY(setup(args));
          break;
        case StageCommand::STEP:
          TRELLIS_TRY(step(args));
          break;
        case StageCommand::END:
          engine_.reset();
          break;
        case StageCommand::SHUTDOWN:
          return {};
        default:
          return Error{"unknown command " + std::to_string(words[0]) + " from rank 0"};
      }
    }
  }

 private:
  Status setup(std::span<const int32_t> args) {
    // n_blocks, block_size, key type, value type, max_rows, n_ctx
    if (args.size() != 6 || args[0] < 2 || args[1] < 1 || !is_kv_type(args[2]) ||
        !is_kv_type(args[3]) || args[4] < 1) {
      return Error{"malformed setup message"};
    }
    const KvTypes types{static_cast<KvType>(args[2]), static_cast<KvType>(args[3])};
    engine_.reset();
    Result<KvStorage> kv = KvStorage::create(model_->kv_layout(args[1], types), args[0]);
    if (!kv.ok()) return kv.error();
    engine_ = std::make_unique<StageEngine>(std::move(kv).value(), model_->hparams(), args[4]);
    engine_->ws.attention_scratch.reserve(pool_.size(), engine_->kv.layout(),
                                          model_->hparams().n_head, args[5],
                                          engine_->ws.max_rows());
    model_->set_context_length(args[5]);
    return {};
  }

  Status step(std::span<const int32_t> words) {
    if (!engine_) return Error{"a step before the setup"};
    KvStorage& kv = engine_->kv;
    Workspace& ws = engine_->ws;
    TRELLIS_TRY(decode_step(words, kv.n_blocks(), ws.max_rows(), step_));
    for (const BlockCopy& c : step_.copies) {
      if (c.n_slots > kv.layout().block_size) return Error{"malformed block copy"};
      kv.copy_block(c.src, c.dst, c.n_slots);
    }
    const Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(options_.timeout_s));
    const int rank = transport_.rank();
    const auto n_embd = static_cast<size_t>(model_->hparams().n_embd);
    const auto n_vocab = static_cast<size_t>(model_->hparams().n_vocab);
    const bool last = stats_.layers.last;
    std::vector<uint8_t> hidden;
    for (MicroBatch& mb : step_.micro) {
      const auto n_rows = static_cast<size_t>(mb.batch.n_rows());
      if (Status got = transport_.receive(rank - 1, MessageTag::HIDDEN, hidden, deadline);
          !got.ok()) {
        return Error{missed_deadline(rank - 1, "send its hidden rows", options_.timeout_s)};
      }
      if (hidden.size() != n_rows * n_embd * sizeof(float))
        return Error{"hidden rows of the wrong size from rank " + std::to_string(rank - 1)};
      std::memcpy(ws.x.data(), hidden.data(), hidden.size());
      const size_t n_out = mb.batch.output_rows.size();
      std::vector<uint8_t> out(last ? n_out * n_vocab * sizeof(float) : 0);
      const Clock::time_point start = Clock::now();
      model_->forward(mb.batch, kv, ws, pool_, reinterpret_cast<float*>(out.data()));
      stats_.busy_s += std::chrono::duration<double>(Clock::now() - start).count();
      if (!last) out = as_bytes(ws.x.data(), n_rows * n_embd);
      stats_.bytes_sent += out.size();
      transport_.send(last ? 0 : rank + 1, last ? MessageTag::LOGITS : MessageTag::HIDDEN,
                      std::move(out));
    }
    ++stats_.n_steps;
    stats_.peak_rss = peak_rss_bytes();
    transport_.send(0, MessageTag::REPORT, encode_stage_stats(stats_));
    return {};
  }

  MpiTransport& transport_;
  PipelineOptions options_;
  ThreadPool pool_;
  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<StageEngine> engine_;
  DecodedStep step_;
  StageStats stats_;
};

}  // namespace

int run_stage_worker(MpiTransport& transport, const std::string& model_path, int n_threads,
                     const PipelineOptions& options) {
  StageWorker worker(transport, options, n_threads);
  Status status = worker.load(model_path);
  if (status.ok()) status = worker.run();
  if (!status.ok()) {
    std::fprintf(stderr, "error: pipeline stage on rank %d: %s; ending the job\n", transport.rank(),
                 status.error().message.c_str());
    transport.abort(1);
  }
  // Whatever is still queued (the last report) goes out before MPI closes.
  (void)transport.flush(Clock::now() + std::chrono::seconds(5));
  transport.finalize();
  return 0;
}

}  // namespace trellis
