// A model split over the ranks of an MPI job gives exactly what one process gives. Started as
//   mpirun -np N pipeline_mpi_test --arch A
// every rank synthesizes the same tiny model of family A (deterministic: the same bytes on each);
// ranks 1 .. N-1 hold their stages, rank 0 runs the tests below, each comparing engines on the
// pipeline (with several micro-batch counts, and as many decode steps in flight as there are
// stages, each with its own group of sequences) with an engine that holds the whole model: tokens
// equal, logits bit for bit, for greedy and seeded sampling, cache on and off, the shared-prefix
// workloads of `bench workload`, fork, preemption in a small pool, and cancellation.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/workloads.h"
#include "cluster/mpi_pipeline.h"
#include "cluster/mpi_transport.h"
#include "cluster/stage_worker.h"
#include "engine/engine.h"
#include "model/model_presets.h"
#include "model/synth_model.h"

namespace trellis {
namespace {

MpiTransport* g_transport = nullptr;
std::string g_model_path;
constexpr int32_t kContext = 256;

struct Outcome {
  std::vector<TokenId> tokens;
  std::vector<std::vector<float>> logits;
  FinishReason finish = FinishReason::NONE;
};

EngineConfig base_config(bool cache) {
  EngineConfig config;
  config.n_threads = 1;
  config.n_ctx = kContext;
  config.block_size = 16;
  config.prefix_cache.enabled = cache;
  config.scheduler.max_seqs = 8;
  config.scheduler.max_batch_tokens = 64;  // prompts go in several chunks
  return config;
}

std::unique_ptr<Engine> open(EngineConfig config) {
  Result<std::unique_ptr<Engine>> engine = Engine::create(g_model_path, config);
  EXPECT_TRUE(engine.ok()) << engine.error().message;
  return engine.ok() ? std::move(engine).value() : nullptr;
}

// An engine on `pipeline` (which must outlive it) with `config`.
std::unique_ptr<Engine> open_split(Pipeline& pipeline, EngineConfig config) {
  config.pipeline = &pipeline;
  return open(config);
}

// The same requests, all submitted at once (so that they batch and share prefixes).
std::vector<Outcome> run_all(Engine& engine, std::vector<EngineRequest> requests) {
  std::vector<RequestHandle> handles;
  for (EngineRequest& r : requests) {
    r.return_logits = true;
    Result<RequestHandle> h = engine.submit(r);
    EXPECT_TRUE(h.ok()) << h.error().message;
    if (h.ok()) handles.push_back(*h);
  }
  std::vector<Outcome> outcomes;
  for (RequestHandle& h : handles) {
    const RequestOutput& out = h.wait();
    EXPECT_NE(out.finish_reason, FinishReason::ERROR) << out.error;
    outcomes.push_back(Outcome{out.tokens, out.logits, out.finish_reason});
  }
  return outcomes;
}

void expect_same(const std::vector<Outcome>& expected, const std::vector<Outcome>& actual,
                 const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i].tokens, actual[i].tokens) << what << ", request " << i;
    ASSERT_EQ(expected[i].logits.size(), actual[i].logits.size()) << what << ", request " << i;
    for (size_t t = 0; t < expected[i].logits.size(); ++t) {
      const std::vector<float>& a = expected[i].logits[t];
      const std::vector<float>& b = actual[i].logits[t];
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << what << ", request " << i << ", token " << t << ": logits differ";
    }
  }
}

// Prompts over three shared prefixes of random lengths; half greedy, half seeded sampling.
std::vector<EngineRequest> mixed_requests(int64_t n_vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<TokenId> token(3, static_cast<TokenId>(n_vocab - 1));
  std::vector<std::vector<TokenId>> prefixes;
  for (int g = 0; g < 3; ++g) {
    std::vector<TokenId> p(static_cast<size_t>(20 + 23 * g));
    for (TokenId& t : p) t = token(rng);
    prefixes.push_back(p);
  }
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 8; ++i) {
    EngineRequest r;
    r.prompt = prefixes[static_cast<size_t>(i % 3)];
    for (int k = 0; k < 3 + 5 * i; ++k) r.prompt.push_back(token(rng));
    r.max_tokens = 10;
    r.ignore_eos = true;
    if (i % 2 == 0) {
      r.sampling.temperature = 0;
    } else {
      r.sampling.temperature = 0.9f;
      r.sampling.seed = 1000 + static_cast<uint64_t>(i);
    }
    requests.push_back(r);
  }
  return requests;
}

// Pipelines over every rank with 1, 2 and 3 micro-batches per step.
std::vector<std::unique_ptr<Pipeline>> pipelines() {
  std::vector<std::unique_ptr<Pipeline>> all;
  for (int32_t micro : {1, 2, 3})
    all.push_back(make_mpi_pipeline(*g_transport, PipelineOptions{{}, micro, 60}));
  return all;
}

class PipelineTest : public ::testing::Test {
 protected:
  int64_t n_vocab() {
    std::unique_ptr<Engine> e = open(base_config(true));
    return e ? e->model().hparams().n_vocab : 0;
  }
};

TEST_F(PipelineTest, GreedyAndSeededCacheOnAndOff) {
  const std::vector<EngineRequest> requests = mixed_requests(n_vocab(), 7);
  for (bool cache : {false, true}) {
    std::unique_ptr<Engine> local = open(base_config(cache));
    ASSERT_NE(local, nullptr);
    const std::vector<Outcome> expected = run_all(*local, requests);
    local.reset();
    for (std::unique_ptr<Pipeline>& p : pipelines()) {
      std::unique_ptr<Engine> split = open_split(*p, base_config(cache));
      ASSERT_NE(split, nullptr);
      // Twice: the second round finds the first one's prefixes in the cache (when it is on).
      for (int round = 0; round < 2; ++round) {
        expect_same(expected, run_all(*split, requests),
                    std::string(cache ? "cache on" : "cache off") + ", round " +
                        std::to_string(round));
      }
      EXPECT_TRUE(split->check_invariants().ok());
      EXPECT_EQ(split->stats().n_blocks_in_use, 0);
      // Decode steps overlapped: one group of sequences in each stage.
      EXPECT_EQ(split->stats().max_steps_in_flight, g_transport->size());
      if (cache) {
        EXPECT_GT(split->stats().n_blocks_acquired, 0);
      }
    }
  }
}

TEST_F(PipelineTest, SharedPrefixWorkloads) {
  bench::WorkloadSizes sizes;
  sizes.n_groups = 2;
  sizes.per_group = 3;
  sizes.prefix_len = 40;
  sizes.suffix_len = 9;
  sizes.decode_len = 6;
  sizes.n_shots = 3;
  sizes.shot_len = 17;
  sizes.n_questions = 5;
  const int64_t V = n_vocab();
  for (const std::vector<EngineRequest>& requests :
       {bench::agents_requests(sizes, V), bench::few_shot_requests(sizes, V)}) {
    std::unique_ptr<Engine> local = open(base_config(true));
    ASSERT_NE(local, nullptr);
    const std::vector<Outcome> expected = run_all(*local, requests);
    local.reset();
    std::unique_ptr<Pipeline> p = make_mpi_pipeline(*g_transport, PipelineOptions{});
    std::unique_ptr<Engine> split = open_split(*p, base_config(true));
    ASSERT_NE(split, nullptr);
    expect_same(expected, run_all(*split, requests), "workload");
    EXPECT_GT(split->stats().n_blocks_acquired, 0);
  }
}

std::vector<std::vector<TokenId>> fork_tokens(Engine& engine, const EngineRequest& request) {
  Result<std::vector<RequestHandle>> branches = engine.fork(request, 3);
  EXPECT_TRUE(branches.ok());
  std::vector<std::vector<TokenId>> tokens;
  if (!branches.ok()) return tokens;
  for (RequestHandle& h : *branches) tokens.push_back(h.wait().tokens);
  return tokens;
}

TEST_F(PipelineTest, Fork) {
  EngineRequest request = mixed_requests(n_vocab(), 11)[1];  // a seeded one
  request.max_tokens = 12;
  std::unique_ptr<Engine> local = open(base_config(true));
  ASSERT_NE(local, nullptr);
  const auto expected = fork_tokens(*local, request);
  local.reset();
  std::unique_ptr<Pipeline> p = make_mpi_pipeline(*g_transport, PipelineOptions{});
  std::unique_ptr<Engine> split = open_split(*p, base_config(true));
  ASSERT_NE(split, nullptr);
  EXPECT_EQ(expected, fork_tokens(*split, request));
  EXPECT_EQ(expected.size(), 3u);
}

TEST_F(PipelineTest, PreemptionInASmallPool) {
  std::vector<EngineRequest> requests = mixed_requests(n_vocab(), 13);
  for (EngineRequest& r : requests) r.max_tokens = 40;
  auto small = [] {
    EngineConfig config = base_config(true);
    config.kv_tokens = 160;  // 10 blocks: far less than the requests need at once
    config.n_ctx = 144;
    return config;
  };
  std::unique_ptr<Engine> local = open(small());
  ASSERT_NE(local, nullptr);
  const std::vector<Outcome> expected = run_all(*local, requests);
  local.reset();
  std::unique_ptr<Pipeline> p = make_mpi_pipeline(*g_transport, PipelineOptions{{}, 2, 60});
  std::unique_ptr<Engine> split = open_split(*p, small());
  ASSERT_NE(split, nullptr);
  expect_same(expected, run_all(*split, requests), "small pool");
  EXPECT_GT(split->stats().n_preemptions, 0);
  EXPECT_GT(split->stats().n_blocks_evicted, 0);
  EXPECT_TRUE(split->check_invariants().ok());
  EXPECT_EQ(split->stats().n_blocks_in_use, 0);
}

TEST_F(PipelineTest, CancellationReleasesEveryBlock) {
  std::vector<EngineRequest> requests = mixed_requests(n_vocab(), 17);
  std::unique_ptr<Pipeline> p = make_mpi_pipeline(*g_transport, PipelineOptions{});
  std::unique_ptr<Engine> split = open_split(*p, base_config(true));
  ASSERT_NE(split, nullptr);
  EngineRequest endless = requests[0];
  endless.max_tokens = kContext - static_cast<int32_t>(endless.prompt.size());
  Result<RequestHandle> h = split->submit(endless);
  ASSERT_TRUE(h.ok());
  std::string text;
  ASSERT_TRUE(h->next_text(text));  // running
  h->cancel();
  EXPECT_EQ(h->wait().finish_reason, FinishReason::CANCELLED);
  EXPECT_TRUE(split->check_invariants().ok());
  EXPECT_EQ(split->stats().n_blocks_in_use, 0);
  // The stages go on as before.
  std::unique_ptr<Engine> local = open(base_config(true));
  ASSERT_NE(local, nullptr);
  requests.resize(3);
  expect_same(run_all(*local, requests), run_all(*split, requests), "after a cancellation");
}

TEST_F(PipelineTest, StagesReportTheirLayersAndWork) {
  std::unique_ptr<Pipeline> p = make_mpi_pipeline(*g_transport, PipelineOptions{});
  std::unique_ptr<Engine> split = open_split(*p, base_config(true));
  ASSERT_NE(split, nullptr);
  run_all(*split, mixed_requests(split->model().hparams().n_vocab, 19));
  const std::vector<StageStats> stages = p->stage_stats();
  ASSERT_EQ(static_cast<int>(stages.size()), g_transport->size());
  int64_t next_layer = 0;
  for (const StageStats& s : stages) {
    EXPECT_EQ(s.layers.begin, next_layer);  // contiguous, in rank order, none empty
    EXPECT_GT(s.layers.end, s.layers.begin);
    next_layer = s.layers.end;
    EXPECT_GT(s.n_steps, 0);
    EXPECT_GT(s.busy_s, 0);
    EXPECT_GT(s.bytes_sent, 0u);
    EXPECT_GT(s.peak_rss, 0u);
  }
  EXPECT_EQ(next_layer, split->model().hparams().n_layer);
  EXPECT_TRUE(stages.front().layers.first);
  EXPECT_TRUE(stages.back().layers.last);
}

Status synthesize(const std::string& arch, const std::string& path) {
  Result<ModelPreset> preset = preset_for_arch(*find_model_preset("tiny"), arch);
  if (!preset.ok()) return preset.error();
  SynthOptions options{*preset, DType::Q8_0, 3, "", path, 1, false};
  return synthesize_model(options);
}

}  // namespace
}  // namespace trellis

int main(int argc, char** argv) {
  using namespace trellis;
  std::string arch = "llama";
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--arch") arch = argv[i + 1];
  }
  Result<MpiTransport*> transport = MpiTransport::init(&argc, &argv);
  if (!transport.ok()) {
    std::fprintf(stderr, "%s\n", transport.error().message.c_str());
    return 1;
  }
  g_transport = *transport;
  // Each rank writes its own copy: synthesis is deterministic, so the files are identical.
  char dir[] = "/tmp/trellis-pipeline-XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  g_model_path = std::string(dir) + "/tiny-" + arch + ".gguf";
  if (Status made = synthesize(arch, g_model_path); !made.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", g_transport->rank(), made.error().message.c_str());
    g_transport->abort(1);
  }
  int code = 0;
  if (g_transport->rank() != 0) {
    code = run_stage_worker(*g_transport, g_model_path, 1, PipelineOptions{});
  } else {
    ::testing::InitGoogleTest(&argc, argv);
    code = RUN_ALL_TESTS();
    shut_down_stages(*g_transport);
  }
  std::remove(g_model_path.c_str());
  rmdir(dir);
  return code;
}
