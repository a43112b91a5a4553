// The matmul dispatch point: picks the ISA variant, quantizes the activations once per token row
// into the scratch, and splits the output rows across the thread pool. Every variant follows the
// arithmetic contract of matmul_internal.h, so the split (by output rows only, each dot product
// on one thread) and the tiling never change a result's bits.
#include "kernels/matmul.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/weight_pack.h"

namespace trellis {
namespace kernels_detail {

size_t act_row_bytes(ActFormat format, int64_t n_in) {
  const ActFormatInfo& info = act_format_info(format);
  return static_cast<size_t>(n_in / info.block_elems) * info.block_bytes;
}

RowKernel table_kernel(const KernelTable& table, DType type) {
  return table.matmul[dtype_index(type)];
}

ActQuantizer table_quantizer(const KernelTable& table, ActFormat format) {
  return table.quantize_act[static_cast<size_t>(format)];
}

}  // namespace kernels_detail

namespace kd = kernels_detail;

namespace {

// Output rows are handed to threads in multiples of this (the largest row tile of any variant),
// so that a thread's range rarely ends in a partial tile; the packed layouts rely on it: a range
// starts at a 16-row group (kQ4_0X16Rows).
constexpr int64_t kRowGranule = 16;
static_assert(kRowGranule % kQ4_0X16Rows == 0 && kRowGranule % kFloatX16Rows == 0);

}  // namespace

uint8_t* MatmulScratch::get(size_t bytes) {
  if (bytes_.size() < bytes) bytes_.resize(bytes);
  return bytes_.data();
}

bool matmul_supports(DType type) {
  return kd::table_kernel(kd::scalar_kernels(), type) != nullptr;
}

void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* out, ThreadPool& pool,
            MatmulScratch& scratch) {
  matmul(best_kernel_isa(), w, x, n_tokens, out, pool, scratch);
}

void matmul(KernelIsa isa, const WeightView& w, const float* x, int64_t n_tokens, float* out,
            ThreadPool& pool, MatmulScratch& scratch) {
  const MatmulJob job{w, out};
  matmul_many(isa, std::span<const MatmulJob>(&job, 1), x, n_tokens, pool, scratch);
}

void matmul_many(std::span<const MatmulJob> jobs, const float* x, int64_t n_tokens,
                 ThreadPool& pool, MatmulScratch& scratch) {
  matmul_many(best_kernel_isa(), jobs, x, n_tokens, pool, scratch);
}

namespace {

int64_t round_up_to_granule(int64_t n) {
  return (n + kRowGranule - 1) / kRowGranule * kRowGranule;
}

kd::RowKernel pick_kernel(const kd::KernelTable& table, const WeightView& w) {
  if (w.layout != WeightLayout::ROWS) {
    kd::RowKernel packed = table.packed[dtype_index(w.type)];
    assert(packed != nullptr && "a packed matrix goes to the variant that packed it");
    return packed;
  }
  kd::RowKernel kernel = kd::table_kernel(table, w.type);
  return kernel != nullptr ? kernel : kd::table_kernel(kd::scalar_kernels(), w.type);
}

kd::ActQuantizer pick_quantizer(const kd::KernelTable& table, kd::ActFormat format) {
  kd::ActQuantizer quantize = kd::table_quantizer(table, format);
  return quantize != nullptr ? quantize : kd::table_quantizer(kd::scalar_kernels(), format);
}

// Where x, quantized in each format some job's weights need (F32 is read as x itself), lies in
// the scratch: n_rows rows per format, one format after the other.
struct ActivationPlan {
  size_t offset[kd::kActFormatCount] = {};
  bool needed[kd::kActFormatCount] = {};
  size_t bytes = 0;
};

template <class Job>
ActivationPlan plan_activations(std::span<const Job> jobs, int64_t n_in, int64_t n_rows) {
  ActivationPlan plan;
  for (const Job& job : jobs) {
    assert(matmul_supports(job.w.type));
    assert(job.w.n_in == n_in && job.w.n_out >= 0);
    const kd::ActFormat format = kd::act_format(job.w.type);
    const auto f = static_cast<size_t>(format);
    if (format == kd::ActFormat::F32 || plan.needed[f]) continue;
    plan.needed[f] = true;
    plan.offset[f] = plan.bytes;
    plan.bytes += kd::act_row_bytes(format, n_in) * static_cast<size_t>(n_rows);
  }
  return plan;
}

// Quantizes the n_rows rows of x into `act` as the plan lays them out, each row in parallel
// (rows are independent).
void quantize_activations(const kd::KernelTable& table, const ActivationPlan& plan, const float* x,
                          int64_t n_in, int64_t n_rows, uint8_t* act, ThreadPool& pool) {
  for (size_t f = 0; f < kd::kActFormatCount; ++f) {
    if (!plan.needed[f]) continue;
    const auto format = static_cast<kd::ActFormat>(f);
    const kd::ActQuantizer quantize = pick_quantizer(table, format);
    const size_t row_bytes_act = kd::act_row_bytes(format, n_in);
    uint8_t* out = act + plan.offset[f];
    pool.parallel_for(n_rows, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        quantize(x + t * n_in, out + static_cast<size_t>(t) * row_bytes_act, n_in);
    });
  }
}

}  // namespace

void matmul_many(KernelIsa isa, std::span<const MatmulJob> jobs, const float* x, int64_t n_tokens,
                 ThreadPool& pool, MatmulScratch& scratch) {
  assert(kernel_isa_supported(isa));
  assert(jobs.size() <= kMaxMatmulJobs);
  assert(n_tokens >= 0);
  if (n_tokens == 0 || jobs.empty()) return;
  const kd::KernelTable& table = kd::isa_table(isa);
  const int64_t n_in = jobs[0].w.n_in;

  // The activations in each format some job needs, quantized once into the scratch.
  const ActivationPlan plan = plan_activations(jobs, n_in, n_tokens);
  uint8_t* act = plan.bytes > 0 ? scratch.get(plan.bytes) : nullptr;
  quantize_activations(table, plan, x, n_in, n_tokens, act, pool);

  // The jobs' rows, one after the other, each starting on a granule (so that a thread's range
  // starts on a tile of its matrix): job j owns [first_row[j], first_row[j] + n_out).
  kd::MatmulArgs args[kMaxMatmulJobs];
  kd::RowKernel kernels[kMaxMatmulJobs];
  int64_t first_row[kMaxMatmulJobs];
  int64_t n_rows = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const WeightView& w = jobs[j].w;
    kd::MatmulArgs& a = args[j];
    a = kd::MatmulArgs{};
    a.type = w.type;
    a.w = static_cast<const uint8_t*>(w.data);
    a.w_row_bytes = static_cast<size_t>(row_bytes(w.type, w.n_in).value());
    a.n_in = n_in;
    a.n_tokens = n_tokens;
    a.out = jobs[j].out;
    a.n_out = w.n_out;
    const kd::ActFormat format = kd::act_format(w.type);
    a.act_row_bytes = kd::act_row_bytes(format, n_in);
    a.act = format == kd::ActFormat::F32 ? reinterpret_cast<const uint8_t*>(x)
                                         : act + plan.offset[static_cast<size_t>(format)];
    kernels[j] = pick_kernel(table, w);
    first_row[j] = n_rows;
    n_rows += round_up_to_granule(w.n_out);
  }
  if (n_rows == 0) return;
  pool.parallel_for(n_rows, kRowGranule, [&](int64_t begin, int64_t end) {
    for (size_t j = 0; j < jobs.size(); ++j) {
      const int64_t row_begin = std::max(begin, first_row[j]) - first_row[j];
      const int64_t row_end = std::min(end - first_row[j], args[j].n_out);
      if (row_begin < row_end) kernels[j](args[j], row_begin, row_end);
    }
  });
}

void matmul_gathered(std::span<const GatheredMatmulJob> jobs, const float* x, int64_t n_x_rows,
                     ThreadPool& pool, MatmulScratch& scratch) {
  matmul_gathered(best_kernel_isa(), jobs, x, n_x_rows, pool, scratch);
}

namespace {

// Jobs per round of the pool: their descriptions live on the stack.
constexpr size_t kGatheredJobsPerRound = 64;

}  // namespace

void matmul_gathered(KernelIsa isa, std::span<const GatheredMatmulJob> jobs, const float* x,
                     int64_t n_x_rows, ThreadPool& pool, MatmulScratch& scratch) {
  assert(kernel_isa_supported(isa));
  if (jobs.empty() || n_x_rows == 0) return;
  const kd::KernelTable& table = kd::isa_table(isa);
  const int64_t n_in = jobs[0].w.n_in;

  // x once in each format some job needs (F32: x itself); then each job's gathered rows after
  // it, so that a job reads its tokens as one run, as matmul does.
  const ActivationPlan plan = plan_activations(jobs, n_in, n_x_rows);
  size_t bytes = plan.bytes;
  const size_t gathered_begin = bytes;
  for (const GatheredMatmulJob& job : jobs) {
    if (job.rows != nullptr) {
      bytes +=
          kd::act_row_bytes(kd::act_format(job.w.type), n_in) * static_cast<size_t>(job.n_tokens);
    }
  }
  uint8_t* act = bytes > 0 ? scratch.get(bytes) : nullptr;
  quantize_activations(table, plan, x, n_in, n_x_rows, act, pool);

  size_t gathered = gathered_begin;
  // The last gathering, reused by a job that takes the same rows in the same format (an
  // expert's gate and up products).
  const int32_t* last_rows = nullptr;
  int64_t last_n = 0;
  kd::ActFormat last_format = kd::ActFormat::F32;
  const uint8_t* last_act = nullptr;
  for (size_t round = 0; round < jobs.size(); round += kGatheredJobsPerRound) {
    const size_t n_jobs = std::min(kGatheredJobsPerRound, jobs.size() - round);
    kd::MatmulArgs args[kGatheredJobsPerRound];
    kd::RowKernel kernels[kGatheredJobsPerRound];
    int64_t first_row[kGatheredJobsPerRound + 1];
    int64_t n_rows = 0;
    for (size_t j = 0; j < n_jobs; ++j) {
      const GatheredMatmulJob& job = jobs[round + j];
      const kd::ActFormat format = kd::act_format(job.w.type);
      const size_t row_bytes_act = kd::act_row_bytes(format, n_in);
      const uint8_t* x_rows = format == kd::ActFormat::F32
                                  ? reinterpret_cast<const uint8_t*>(x)
                                  : act + plan.offset[static_cast<size_t>(format)];
      const uint8_t* job_act = x_rows + static_cast<size_t>(job.row_begin) * row_bytes_act;
      if (job.rows != nullptr && job.rows == last_rows && job.n_tokens == last_n &&
          format == last_format) {
        job_act = last_act;
      } else if (job.rows != nullptr) {
        uint8_t* dst = act + gathered;
        for (int64_t t = 0; t < job.n_tokens; ++t) {
          std::memcpy(dst + static_cast<size_t>(t) * row_bytes_act,
                      x_rows + static_cast<size_t>(job.rows[t]) * row_bytes_act, row_bytes_act);
        }
        job_act = dst;
        gathered += row_bytes_act * static_cast<size_t>(job.n_tokens);
        last_rows = job.rows;
        last_n = job.n_tokens;
        last_format = format;
        last_act = dst;
      }
      kd::MatmulArgs& a = args[j];
      a = kd::MatmulArgs{};
      a.type = job.w.type;
      a.w = static_cast<const uint8_t*>(job.w.data);
      a.w_row_bytes = static_cast<size_t>(row_bytes(job.w.type, n_in).value());
      a.n_in = n_in;
      a.act = job_act;
      a.act_row_bytes = row_bytes_act;
      a.n_tokens = job.n_tokens;
      a.out = job.out;
      a.n_out = job.n_tokens > 0 ? job.w.n_out : 0;  // a job without tokens has no rows to do
      kernels[j] = pick_kernel(table, job.w);
      first_row[j] = n_rows;
      n_rows += round_up_to_granule(a.n_out);
    }
    first_row[n_jobs] = n_rows;
    if (n_rows == 0) continue;
    pool.parallel_for(n_rows, kRowGranule, [&](int64_t begin, int64_t end) {
      // The first job whose rows reach past `begin`, then on while they start before `end`.
      size_t j =
          static_cast<size_t>(std::upper_bound(first_row, first_row + n_jobs, begin) - first_row) -
          1;
      for (; j < n_jobs && first_row[j] < end; ++j) {
        const int64_t row_begin = std::max(begin, first_row[j]) - first_row[j];
        const int64_t row_end = std::min(end - first_row[j], args[j].n_out);
        if (row_begin < row_end) kernels[j](args[j], row_begin, row_end);
      }
    });
  }
}

}  // namespace trellis
