// The engine's side of a pipeline, without MPI: a pipeline of n "stages" in this process (it
// computes a step when it is sent and hands its logits back when collected, so up to n steps are
// in flight as over MPI). Outputs equal the plain engine's bit for bit with n steps in flight; a
// stage failure ends every request with the error, refuses later submissions, releases every
// block and is reported once. Runs under the sanitizers (the MPI tests cannot).
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model_presets.h"
#include "model/synth_model.h"
#include "test_support.h"

namespace trellis {
namespace {

// Holds the whole model (local_layers: all) and computes each step as it is launched.
class InProcessPipeline final : public Pipeline {
 public:
  InProcessPipeline(int n_stages, int fail_at_collect)
      : n_stages_(n_stages), fail_at_collect_(fail_at_collect) {}

  int n_stages() const override { return n_stages_; }
  Result<LayerRange> local_layers(const GgufFile& file) override {
    Result<ModelHParams> hp = read_model_hparams(file);
    if (!hp.ok()) return hp.error();
    return LayerRange::all(hp->n_layer);
  }
  Status begin_engine(const PipelineSetup&) override { return {}; }
  Status launch(const Model& model, const ForwardBatch& batch, KvStorage& kv, Workspace& ws,
                ThreadPool& pool, std::vector<BlockCopy>& copies) override {
    EXPECT_LT(static_cast<int>(in_flight_.size()), n_stages_) << "more steps in flight than stages";
    EXPECT_FALSE(failed_) << "a step launched after a stage failed";
    copies.clear();  // made already, in the one storage
    std::vector<float>& logits = in_flight_.emplace_back(
        batch.output_rows.size() * static_cast<size_t>(model.hparams().n_vocab));
    model.forward(batch, kv, ws, pool, logits.data());
    return {};
  }
  Status collect(const Model&, float* logits) override {
    if (in_flight_.empty()) return Error{"nothing in flight"};
    if (before_collect) before_collect();
    if (fail_at_collect_ > 0 && ++n_collects_ >= fail_at_collect_) {
      failed_ = true;
      return Error{"stage 1 stopped answering"};  // and never answers again
    }
    std::memcpy(logits, in_flight_.front().data(), in_flight_.front().size() * sizeof(float));
    in_flight_.pop_front();
    return {};
  }
  void end_engine() override {}
  std::vector<StageStats> stage_stats() const override { return {}; }

  std::function<void()> before_collect;  // runs on the engine's loop thread

 private:
  int n_stages_;
  int fail_at_collect_;  // 0: never
  int n_collects_ = 0;
  bool failed_ = false;
  std::deque<std::vector<float>> in_flight_;
};

const std::string& model_path() {
  static const std::string path = [] {
    std::string p = testing::temp_dir() + "/engine-pipeline.gguf";
    SynthOptions options{*find_model_preset("tiny"), DType::Q8_0, 4, "", p, 1, false};
    EXPECT_TRUE(synthesize_model(options).ok());
    return p;
  }();
  return path;
}

EngineConfig config(Pipeline* pipeline) {
  EngineConfig c;
  c.n_threads = 1;
  c.n_ctx = 192;
  c.block_size = 16;
  c.scheduler.max_seqs = 6;
  c.scheduler.max_batch_tokens = 48;
  c.pipeline = pipeline;
  return c;
}

std::vector<EngineRequest> requests() {
  std::mt19937 rng(5);
  std::uniform_int_distribution<TokenId> token(3, 1000);
  std::vector<TokenId> shared(30);
  for (TokenId& t : shared) t = token(rng);
  std::vector<EngineRequest> all;
  for (int i = 0; i < 7; ++i) {
    EngineRequest r;
    r.prompt = shared;
    for (int k = 0; k < 2 + 3 * i; ++k) r.prompt.push_back(token(rng));
    r.max_tokens = 9;
    r.ignore_eos = true;
    r.return_logits = true;
    r.sampling.temperature = i % 2 == 0 ? 0.0f : 0.7f;
    r.sampling.seed = 77 + static_cast<uint64_t>(i);
    all.push_back(r);
  }
  return all;
}

std::vector<RequestOutput> run_all(Engine& engine) {
  std::vector<RequestHandle> handles;
  for (const EngineRequest& r : requests()) {
    Result<RequestHandle> h = engine.submit(r);
    EXPECT_TRUE(h.ok());
    if (h.ok()) handles.push_back(*h);
  }
  std::vector<RequestOutput> outputs;
  for (RequestHandle& h : handles) outputs.push_back(h.wait());
  return outputs;
}

void expect_stages_give_the_same_outputs(const std::string& model) {
  std::unique_ptr<Engine> plain = std::move(Engine::create(model, config(nullptr)).value());
  const std::vector<RequestOutput> expected = run_all(*plain);
  EXPECT_EQ(plain->stats().max_steps_in_flight, 1);
  for (int stages : {2, 3}) {
    InProcessPipeline pipeline(stages, 0);
    std::unique_ptr<Engine> split = std::move(Engine::create(model, config(&pipeline)).value());
    const std::vector<RequestOutput> actual = run_all(*split);
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i) {
      EXPECT_EQ(actual[i].tokens, expected[i].tokens) << "request " << i << ", " << stages;
      ASSERT_EQ(actual[i].logits.size(), expected[i].logits.size());
      for (size_t t = 0; t < actual[i].logits.size(); ++t)
        EXPECT_EQ(actual[i].logits[t], expected[i].logits[t]) << "request " << i << " token " << t;
    }
    EXPECT_EQ(split->stats().max_steps_in_flight, stages);
    EXPECT_TRUE(split->check_invariants().ok());
    EXPECT_EQ(split->stats().n_blocks_in_use, 0);
  }
}

TEST(EnginePipeline, StepsInFlightGiveTheSameOutputs) {
  expect_stages_give_the_same_outputs(model_path());
}

// Each stage holds its layers' experts (and gpt-oss's sinks and windows).
TEST(EnginePipeline, AMixtureOfExpertsSplitIntoStagesGivesTheSameOutputs) {
  expect_stages_give_the_same_outputs(testing::tiny_moe_engine_model());
}

TEST(EnginePipeline, AFailedStageEndsEveryRequestAndTheEngine) {
  InProcessPipeline pipeline(2, 6);
  int failures = 0;
  std::string why;
  EngineConfig c = config(&pipeline);
  c.on_failure = [&](const std::string& message) {
    ++failures;
    why = message;
  };
  std::unique_ptr<Engine> engine = std::move(Engine::create(model_path(), c).value());
  // The stage may fail while the requests are still being submitted: a request submitted after
  // that is refused, one submitted before ends with the stage's error (none can finish in the
  // steps before the failure).
  std::vector<RequestHandle> handles;
  for (const EngineRequest& r : requests()) {
    Result<RequestHandle> h = engine->submit(r);
    if (h.ok()) {
      handles.push_back(*h);
    } else {
      EXPECT_NE(h.error().message.find("the engine has stopped"), std::string::npos)
          << h.error().message;
    }
  }
  EXPECT_FALSE(handles.empty());
  for (RequestHandle& h : handles) {
    const RequestOutput out = h.wait();
    EXPECT_EQ(out.finish_reason, FinishReason::ERROR);
    EXPECT_NE(out.error.find("stage 1 stopped answering"), std::string::npos) << out.error;
  }
  EXPECT_EQ(failures, 1);
  EXPECT_NE(why.find("stage 1"), std::string::npos);
  EXPECT_NE(engine->failure(), "");
  Result<RequestHandle> later = engine->submit(requests()[0]);
  ASSERT_FALSE(later.ok());
  EXPECT_NE(later.error().message.find("the engine has stopped"), std::string::npos);
  EXPECT_TRUE(engine->check_invariants().ok());
  EXPECT_EQ(engine->stats().n_blocks_in_use, 0);
}

// A request submitted while the failing step is out (so that it is accepted) reaches the loop
// only after the failure: it ends with the stage's error, and no step is launched for it.
TEST(EnginePipeline, ARequestAcceptedBeforeTheFailureEndsWithoutAStep) {
  InProcessPipeline pipeline(2, 1);
  std::promise<void> collecting;
  std::promise<void> submitted;
  std::shared_future<void> may_fail = submitted.get_future().share();
  bool told = false;
  pipeline.before_collect = [&] {
    if (told) return;  // a second collect would mean a step launched after the failure
    told = true;
    collecting.set_value();
    may_fail.wait();
  };
  std::unique_ptr<Engine> engine =
      std::move(Engine::create(model_path(), config(&pipeline)).value());
  const std::vector<EngineRequest> all = requests();
  Result<RequestHandle> first = engine->submit(all[0]);
  ASSERT_TRUE(first.ok());
  collecting.get_future().wait();
  Result<RequestHandle> second = engine->submit(all[1]);
  submitted.set_value();
  ASSERT_TRUE(second.ok()) << second.error().message;
  for (RequestHandle* h : {&*first, &*second}) {
    const RequestOutput out = h->wait();
    EXPECT_EQ(out.finish_reason, FinishReason::ERROR);
    EXPECT_NE(out.error.find("stage 1 stopped answering"), std::string::npos) << out.error;
  }
  EXPECT_TRUE(engine->check_invariants().ok());
  EXPECT_EQ(engine->stats().n_blocks_in_use, 0);
}

}  // namespace
}  // namespace trellis
