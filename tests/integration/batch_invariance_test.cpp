// A token's logits are bit-identical whether it is computed alone, in a prefill chunk of any size,
// or in a batch with other sequences, with any thread count: the promise that lets the prefix
// cache and continuous batching never change outputs.
#include <gtest/gtest.h>

#include <cstring>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/model_presets.h"
#include "model/synth_model.h"
#include "test_support.h"

namespace trellis {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kBlocksPerSequence = 4;  // 64 positions

struct Harness {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Model> model;
  int64_t n_vocab = 0;

  KvTypes kv_types;

  explicit Harness(DType type, KvTypes kv = {}) : kv_types(kv) {
    std::string path =
        testing::temp_dir() + "/invariance-" + std::string(dtype_name(type)) + ".gguf";
    SynthOptions options{*find_model_preset("tiny"), type, 11, "", path, 2, false};
    Status status = synthesize_model(options);
    EXPECT_TRUE(status.ok()) << status.error().message;
    Result<GgufFile> opened = GgufFile::open(path);
    EXPECT_TRUE(opened.ok());
    file = std::make_unique<GgufFile>(std::move(opened).value());
    Result<std::unique_ptr<Model>> loaded = Model::load(*file);
    EXPECT_TRUE(loaded.ok()) << loaded.error().message;
    model = std::move(loaded).value();
    n_vocab = model->hparams().n_vocab;
  }

  // Runs `chunks` (each: sequence index, first position, count) as consecutive batches, every
  // sequence in its own blocks, and returns the logits of every position of every sequence.
  struct Chunk {
    int seq;
    int32_t begin;
    int32_t count;
  };
  std::vector<std::vector<float>> run(const std::vector<std::vector<TokenId>>& prompts,
                                      const std::vector<std::vector<Chunk>>& batches, int threads) {
    KvStorage kv =
        std::move(KvStorage::create(model->kv_layout(kBlockSize, kv_types),
                                    kBlocksPerSequence * static_cast<int32_t>(prompts.size()))
                      .value());
    Workspace ws(model->hparams(), 64);
    ThreadPool pool(threads);
    std::vector<std::vector<float>> logits(prompts.size());
    for (size_t s = 0; s < prompts.size(); ++s)
      logits[s].resize(prompts[s].size() * static_cast<size_t>(n_vocab));
    for (const std::vector<Chunk>& chunks : batches) {
      ForwardBatch batch;
      std::vector<std::pair<int, int32_t>> owners;  // output row -> (sequence, position)
      // The batch only views the block tables: they live here until the forward pass has run.
      std::vector<std::vector<int32_t>> tables(chunks.size());
      for (size_t i = 0; i < chunks.size(); ++i) {
        const Chunk& c = chunks[i];
        std::vector<int32_t>& table = tables[i];
        for (int32_t b = 0; b < kBlocksPerSequence; ++b)
          table.push_back(c.seq * kBlocksPerSequence + b);
        batch.add_sequence(prompts[static_cast<size_t>(c.seq)].data() + c.begin, c.count, c.begin,
                           table, c.count);
        for (int32_t i = 0; i < c.count; ++i) owners.emplace_back(c.seq, c.begin + i);
      }
      EXPECT_TRUE(model->validate_batch(batch, kv, ws).ok());
      std::vector<float> out(batch.output_rows.size() * static_cast<size_t>(n_vocab));
      model->forward(batch, kv, ws, pool, out.data());
      for (size_t i = 0; i < owners.size(); ++i) {
        auto [seq, pos] = owners[i];
        std::memcpy(logits[static_cast<size_t>(seq)].data() +
                        static_cast<size_t>(pos) * static_cast<size_t>(n_vocab),
                    out.data() + i * static_cast<size_t>(n_vocab),
                    static_cast<size_t>(n_vocab) * sizeof(float));
      }
    }
    return logits;
  }
};

std::vector<TokenId> pseudo_random_tokens(int n, uint32_t seed, int64_t n_vocab) {
  std::vector<TokenId> out;
  for (int i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    out.push_back(static_cast<TokenId>(3 + (seed >> 8) % static_cast<uint32_t>(n_vocab - 3)));
  }
  return out;
}

// Weight type and KV types.
using InvarianceCase = std::pair<DType, KvTypes>;

class BatchInvariance : public ::testing::TestWithParam<InvarianceCase> {};

TEST_P(BatchInvariance, LogitsDoNotDependOnBatchCompositionOrThreads) {
  Harness h(GetParam().first, GetParam().second);
  ASSERT_NE(h.model, nullptr);
  const std::vector<std::vector<TokenId>> prompts = {pseudo_random_tokens(40, 1, h.n_vocab),
                                                     pseudo_random_tokens(25, 2, h.n_vocab)};
  using Chunk = Harness::Chunk;
  // Reference: each prompt alone, one prefill batch, one thread.
  auto alone = h.run(prompts, {{{0, 0, 40}}, {{1, 0, 25}}}, 1);

  // Decode style: one token per batch, the two sequences interleaved in the same batches.
  std::vector<std::vector<Chunk>> decode_steps;
  for (int32_t pos = 0; pos < 40; ++pos) {
    std::vector<Chunk> step = {{0, pos, 1}};
    if (pos < 25) step.push_back({1, pos, 1});
    decode_steps.push_back(step);
  }
  // Mixed: chunks of different sizes, a prefill chunk of one sequence beside another's.
  std::vector<std::vector<Chunk>> mixed = {
      {{0, 0, 7}}, {{1, 0, 3}, {0, 7, 13}}, {{0, 20, 1}, {1, 3, 22}}, {{0, 21, 19}}};

  for (int threads : {1, 2, 3}) {
    for (const auto* schedule : {&decode_steps, &mixed}) {
      auto got = h.run(prompts, *schedule, threads);
      for (size_t s = 0; s < prompts.size(); ++s) {
        ASSERT_EQ(std::memcmp(got[s].data(), alone[s].data(), got[s].size() * sizeof(float)), 0)
            << "sequence " << s << ", " << threads << " threads, "
            << (schedule == &mixed ? "mixed chunks" : "decode steps");
      }
    }
  }
}

// Two sequences share the KV blocks of a common 32-token prefix (read-only): the second computes
// only its own suffix, reading the first's blocks, and gets the same logits as when computed alone.
TEST(SharedPrefixBlocks, ReadingAnotherSequencesBlocksChangesNothing) {
  Harness h(DType::Q8_0);
  ASSERT_NE(h.model, nullptr);
  std::vector<TokenId> a = pseudo_random_tokens(40, 3, h.n_vocab);
  std::vector<TokenId> b(a.begin(), a.begin() + 2 * kBlockSize);  // shares two whole blocks
  std::vector<TokenId> b_suffix = pseudo_random_tokens(10, 4, h.n_vocab);
  b.insert(b.end(), b_suffix.begin(), b_suffix.end());
  const int64_t n_vocab = h.n_vocab;

  // B alone, in blocks of its own.
  auto alone = h.run({b}, {{{0, 0, static_cast<int32_t>(b.size())}}}, 1);

  KvStorage kv = std::move(KvStorage::create(h.model->kv_layout(kBlockSize, KvTypes{}), 8).value());
  Workspace ws(h.model->hparams(), 64);
  ThreadPool pool(2);
  // A fills blocks 0..2; B's table starts with A's blocks 0 and 1, then its own block 5.
  const std::vector<int32_t> first_table = {0, 1, 2};
  const std::vector<int32_t> second_table = {0, 1, 5};
  ForwardBatch first;
  first.add_sequence(a.data(), static_cast<int32_t>(a.size()), 0, first_table, 0);
  h.model->forward(first, kv, ws, pool, nullptr);
  ForwardBatch second;
  const int32_t shared = 2 * kBlockSize;
  second.add_sequence(b.data() + shared, static_cast<int32_t>(b.size()) - shared, shared,
                      second_table, static_cast<int32_t>(b.size()) - shared);
  std::vector<float> logits(static_cast<size_t>(second.n_rows() * n_vocab));
  h.model->forward(second, kv, ws, pool, logits.data());
  const float* expected = alone[0].data() + static_cast<size_t>(shared * n_vocab);
  EXPECT_EQ(std::memcmp(logits.data(), expected, logits.size() * sizeof(float)), 0);
}

// Every weight type with f16 KV, and the quantized KV types (keys and values alike and mixed).
INSTANTIATE_TEST_SUITE_P(
    AllSynthTypes, BatchInvariance,
    ::testing::Values(InvarianceCase{DType::F32, {}}, InvarianceCase{DType::F16, {}},
                      InvarianceCase{DType::BF16, {}}, InvarianceCase{DType::Q8_0, {}},
                      InvarianceCase{DType::Q4_0, {}}, InvarianceCase{DType::Q4_1, {}},
                      InvarianceCase{DType::Q5_0, {}}, InvarianceCase{DType::Q5_1, {}},
                      InvarianceCase{DType::Q4_0, KvTypes::both(KvType::Q8_0)},
                      InvarianceCase{DType::Q4_0, KvTypes::both(KvType::Q4_0)},
                      InvarianceCase{DType::Q8_0, KvTypes{KvType::Q8_0, KvType::Q4_0}}),
    [](const ::testing::TestParamInfo<InvarianceCase>& info) {
      std::string name(dtype_name(info.param.first));
      if (info.param.second != KvTypes{}) {
        name += std::string("_kv_") + kv_type_name(info.param.second.key) + "_" +
                kv_type_name(info.param.second.value);
      }
      return name;
    });

}  // namespace
}  // namespace trellis
