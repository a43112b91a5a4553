// matmul_gathered gives each job the bits of a plain matmul of its matrix with its rows of x,
// whatever the other jobs, the types mixed in one call, empty jobs, runs instead of gathered
// rows, jobs sharing their rows, and more jobs than one round of the pool takes.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/matmul.h"
#include "quant/quant.h"

namespace trellis {
namespace {

struct Matrix {
  DType type;
  int64_t n_out;
  std::vector<uint8_t> bytes;
  WeightView view(int64_t n_in) const { return WeightView{type, bytes.data(), n_in, n_out}; }
};

Matrix random_matrix(DType type, int64_t n_in, int64_t n_out, std::mt19937& rng) {
  std::normal_distribution<float> value(0.0f, 0.5f);
  const uint64_t row = *row_bytes(type, n_in);
  Matrix m{type, n_out, std::vector<uint8_t>(row * static_cast<uint64_t>(n_out))};
  std::vector<float> values(static_cast<size_t>(n_in));
  for (int64_t o = 0; o < n_out; ++o) {
    for (float& v : values) v = value(rng);
    quantize_row(type, values.data(), m.bytes.data() + row * static_cast<uint64_t>(o), n_in);
  }
  return m;
}

TEST(MatmulGathered, EachJobGetsThePlainMatmulOfItsRows) {
  constexpr int64_t kIn = 256, kRows = 12, kJobs = 70;
  std::mt19937 rng(5);
  std::vector<float> x(static_cast<size_t>(kRows * kIn));
  std::normal_distribution<float> value(0.0f, 1.0f);
  for (float& v : x) v = value(rng);
  const DType types[] = {DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::F32, DType::Q4_0};
  std::vector<Matrix> matrices;
  std::vector<std::vector<int32_t>> rows(kJobs);
  std::vector<std::vector<float>> outs(kJobs);
  std::vector<GatheredMatmulJob> jobs;
  std::uniform_int_distribution<int32_t> any_row(0, kRows - 1);
  for (int64_t j = 0; j < kJobs; ++j) {
    matrices.push_back(random_matrix(types[j % 5], kIn, 16 + 8 * (j % 7), rng));
  }
  for (int64_t j = 0; j < kJobs; ++j) {
    GatheredMatmulJob job;
    job.w = matrices[static_cast<size_t>(j)].view(kIn);
    if (j % 3 == 2) {  // a run of consecutive rows
      job.row_begin = j % kRows / 2;
      job.n_tokens = kRows - job.row_begin - j % 2;
      for (int64_t t = 0; t < job.n_tokens; ++t)
        rows[static_cast<size_t>(j)].push_back(static_cast<int32_t>(job.row_begin + t));
    } else if (j % 3 == 1 && jobs.back().rows != nullptr) {
      // The previous job's rows, by the same pointer (as an expert's gate and up share them).
      rows[static_cast<size_t>(j)] = rows[static_cast<size_t>(j - 1)];
      job.rows = jobs.back().rows;
      job.n_tokens = jobs.back().n_tokens;
    } else {
      const int64_t n = j % 11 == 0 ? 0 : 1 + j % 5;  // some jobs without tokens
      for (int64_t t = 0; t < n; ++t) rows[static_cast<size_t>(j)].push_back(any_row(rng));
      job.rows = rows[static_cast<size_t>(j)].data();
      job.n_tokens = n;
    }
    outs[static_cast<size_t>(j)].assign(static_cast<size_t>(job.n_tokens * job.w.n_out), -1.0f);
    job.out = outs[static_cast<size_t>(j)].data();
    jobs.push_back(job);
  }
  ThreadPool pool(3);
  MatmulScratch scratch;
  matmul_gathered(jobs, x.data(), kRows, pool, scratch);

  MatmulScratch plain_scratch;
  for (int64_t j = 0; j < kJobs; ++j) {
    SCOPED_TRACE("job " + std::to_string(j));
    const std::vector<int32_t>& r = rows[static_cast<size_t>(j)];
    std::vector<float> gathered;
    for (int32_t row : r)
      gathered.insert(gathered.end(), x.begin() + row * kIn, x.begin() + (row + 1) * kIn);
    const WeightView w = jobs[static_cast<size_t>(j)].w;
    std::vector<float> expected(r.size() * static_cast<size_t>(w.n_out));
    matmul(w, gathered.data(), static_cast<int64_t>(r.size()), expected.data(), pool,
           plain_scratch);
    EXPECT_EQ(outs[static_cast<size_t>(j)], expected);
  }
}

}  // namespace
}  // namespace trellis
