// A self-contained check of the NEON kernels (no GoogleTest, so it cross-builds in seconds and
// runs under qemu-aarch64): every variant this CPU supports against the scalar reference, bit for
// bit, for every weight type (types without a NEON kernel go through the scalar fallback; the
// check prints which is which and fails if a type that must have a NEON kernel lacks one), the
// activation quantizers against the scalar ones, and batch invariance with 1, 2 and 3 threads;
// paged attention against the scalar kernel within 1e-4 for every KV type (windows, sinks and a
// row long enough to be split into pieces included), the same bits with 1, 2 and 3 threads and
// for a row alone.
// Exits 1 on the first mismatch. Run by scripts/arm-check.sh.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "quant/half.h"
#include "quant/quant.h"

namespace trellis {
namespace {

namespace kd = kernels_detail;

int g_failures = 0;
int g_checks = 0;

void check(bool ok, const char* what, DType type, KernelIsa isa, long detail) {
  ++g_checks;
  if (ok) return;
  ++g_failures;
  std::printf("FAIL %s: type %s, isa %s, at %ld\n", what, std::string(dtype_name(type)).c_str(),
              std::string(kernel_isa_name(isa)).c_str(), detail);
}

std::vector<uint8_t> random_weights(DType type, int64_t n_out, int64_t n_in, std::mt19937& rng) {
  const size_t row = static_cast<size_t>(row_bytes(type, n_in).value());
  std::vector<uint8_t> bytes(row * static_cast<size_t>(n_out));
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  if (type == DType::F32 || type == DType::F16 || type == DType::BF16) {
    std::vector<float> values(static_cast<size_t>(n_in));
    for (int64_t o = 0; o < n_out; ++o) {
      for (float& v : values) v = value(rng);
      quantize_row(type, values.data(), bytes.data() + row * static_cast<size_t>(o), n_in);
    }
    return bytes;
  }
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  std::vector<int> scale_offsets = {0};
  if (type == DType::Q4_1 || type == DType::Q5_1 || type == DType::Q4_K || type == DType::Q5_K)
    scale_offsets = {0, 2};
  if (type == DType::Q2_K) scale_offsets = {80, 82};
  if (type == DType::Q3_K) scale_offsets = {108};
  if (type == DType::Q6_K) scale_offsets = {208};
  const size_t block = static_cast<size_t>(dtype_info(type).block_bytes);
  for (size_t b = 0; b < bytes.size() / block; ++b) {
    for (int offset : scale_offsets) {
      const uint16_t h = f32_to_f16(value(rng) * 0.05f);
      std::memcpy(&bytes[b * block + static_cast<size_t>(offset)], &h, 2);
    }
  }
  return bytes;
}

std::vector<float> random_activations(int64_t n, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(n));
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (size_t i = 0; i < x.size(); i += 32) {
    const float scale = std::pow(10.0f, 3.0f * value(rng));
    for (size_t k = i; k < i + 32 && k < x.size(); ++k) x[k] = value(rng) * scale;
  }
  for (size_t i = 0; i < 32 && i < x.size(); ++i)
    x[i] = 0.5f * static_cast<float>(i) - 8.0f;  // ties
  return x;
}

std::vector<float> run(KernelIsa isa, DType type, const std::vector<uint8_t>& w, int64_t n_out,
                       int64_t n_in, const float* x, int64_t n_tokens, int n_threads) {
  ThreadPool pool(n_threads);
  MatmulScratch scratch;
  std::vector<float> out(static_cast<size_t>(n_out * n_tokens), -1.0f);
  matmul(isa, WeightView{type, w.data(), n_in, n_out}, x, n_tokens, out.data(), pool, scratch);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b, long& where) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      where = static_cast<long>(i);
      return false;
    }
  }
  return a.size() == b.size();
}

void check_type(DType type, KernelIsa isa, std::mt19937& rng) {
  const int64_t block = dtype_info(type).block_elems;
  const int64_t shapes[][3] = {
      {1, 1, 1}, {7, 1, 5}, {37, 3, 6}, {13, 8, 17}};  // n_out, blocks, tokens
  for (const auto& s : shapes) {
    const int64_t n_out = s[0], n_in = (block == 1 ? 37 * s[1] : block * s[1]), n_tokens = s[2];
    const auto w = random_weights(type, n_out, n_in, rng);
    const auto x = random_activations(n_in * n_tokens, rng);
    const auto expected = run(KernelIsa::SCALAR, type, w, n_out, n_in, x.data(), n_tokens, 1);
    for (int n_threads : {1, 2, 3}) {
      const auto got = run(isa, type, w, n_out, n_in, x.data(), n_tokens, n_threads);
      long where = -1;
      check(same_bits(got, expected, where), "variant vs scalar", type, isa, where);
      // Batch invariance: each token row equals the row computed alone.
      for (int64_t t = 0; t < n_tokens; ++t) {
        const auto alone = run(isa, type, w, n_out, n_in, x.data() + t * n_in, 1, 1);
        const std::vector<float> row(got.begin() + t * n_out, got.begin() + (t + 1) * n_out);
        check(same_bits(row, alone, where), "batch invariance", type, isa, t * n_out + where);
      }
    }
  }
}

void check_activation_quantizers(std::mt19937& rng) {
  const int64_t n_in = 4 * 256;
  const auto x = random_activations(n_in, rng);
  const kd::KernelTable& scalar = kd::scalar_kernels();
#if defined(__aarch64__)
  const kd::KernelTable& simd = kd::neon_kernels();
  const KernelIsa isa = KernelIsa::NEON;
#else
  const kd::KernelTable& simd = kd::scalar_kernels();
  const KernelIsa isa = KernelIsa::SCALAR;
#endif
  for (const auto format : {kd::ActFormat::Q8_0, kd::ActFormat::Q8_K}) {
    const size_t bytes = kd::act_row_bytes(format, n_in);
    std::vector<uint8_t> expected(bytes), got(bytes);
    const bool q8_0 = format == kd::ActFormat::Q8_0;
    kd::table_quantizer(scalar, format)(x.data(), expected.data(), n_in);
    const kd::ActQuantizer q = kd::table_quantizer(simd, format);
    if (q == nullptr) continue;
    q(x.data(), got.data(), n_in);
    check(std::memcmp(got.data(), expected.data(), bytes) == 0, "activation quantizer",
          q8_0 ? DType::Q8_0 : DType::Q4_K, isa, 0);
  }
}

// Reports, per type, whether `isa` runs its own kernel or the scalar fallback, and fails when a
// type listed in `required` falls back (so a kernel dropped from the table cannot pass as
// "bit-identical to scalar" merely because the scalar kernel ran).
void check_kernel_coverage(KernelIsa isa, const DType* types, int n_types, const DType* required,
                           int n_required) {
  const kd::KernelTable& table = kd::isa_table(isa);
  for (int i = 0; i < n_types; ++i) {
    const bool own = kd::table_kernel(table, types[i]) != nullptr;
    std::printf("  %-5s %s: %s\n", std::string(kernel_isa_name(isa)).c_str(),
                std::string(dtype_name(types[i])).c_str(), own ? "own kernel" : "scalar fallback");
  }
  for (int i = 0; i < n_required; ++i) {
    check(kd::table_kernel(table, required[i]) != nullptr, "own kernel registered", required[i],
          isa, 0);
  }
}

// Paged attention of `rows` (one sequence per row, random K/V written through kv_write) with
// `isa` and with the scalar kernel: within 1e-4 of each other (values in [-1, 1]); the same bits
// with 1, 2 and 3 threads and for each row alone.
void check_attention(KernelIsa isa, KvTypes types, const std::vector<int32_t>& positions,
                     int32_t window, bool with_sinks, std::mt19937& rng) {
  const int64_t n_head = 8, n_kv_heads = 2, head_dim = 64;
  KvLayout layout{1, n_kv_heads, head_dim, 16, types};
  int32_t n_blocks = 0;
  for (int32_t p : positions) n_blocks += p / 16 + 1;
  KvStorage kv = std::move(KvStorage::create(layout, n_blocks).value());
  std::vector<std::vector<int32_t>> tables;
  std::vector<AttentionRow> rows;
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> k(static_cast<size_t>(n_kv_heads * head_dim)), v(k.size());
  int32_t next = 0;
  for (int32_t p : positions) {
    tables.emplace_back();
    for (int32_t b = 0; b <= p / 16; ++b) tables.back().push_back(next++);
  }
  for (size_t s = 0; s < positions.size(); ++s) {
    for (int32_t pos = 0; pos <= positions[s]; ++pos) {
      for (float& x : k) x = value(rng);
      for (float& x : v) x = value(rng);
      kv_write(kv, 0, AttentionRow{pos, tables[s].data()}, k.data(), v.data());
    }
    const int32_t first = window > 0 ? std::max(0, positions[s] - window + 1) : 0;
    rows.push_back(AttentionRow{positions[s], tables[s].data(), first});
  }
  std::vector<float> q(positions.size() * static_cast<size_t>(n_head * head_dim));
  std::uniform_real_distribution<float> query(-3.0f, 3.0f);
  for (float& x : q) x = query(rng);
  std::vector<float> sinks;
  for (int64_t h = 0; with_sinks && h < n_head; ++h) sinks.push_back(value(rng) * 3.0f);
  auto run = [&](KernelIsa which, int n_threads, size_t first_row, size_t n_rows) {
    ThreadPool pool(n_threads);
    AttentionScratch scratch;
    const size_t row_floats = static_cast<size_t>(n_head * head_dim);
    std::vector<float> out(n_rows * row_floats);
    paged_attention(which, kv, 0, rows.data() + first_row, static_cast<int64_t>(n_rows), n_head,
                    q.data() + first_row * row_floats, out.data(), pool, scratch,
                    sinks.empty() ? nullptr : sinks.data());
    return out;
  };
  const std::vector<float> want = run(KernelIsa::SCALAR, 1, 0, rows.size());
  const std::vector<float> got = run(isa, 1, 0, rows.size());
  float worst = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  check(worst <= 1e-4f, "attention against scalar", DType::F32, isa,
        static_cast<long>(worst * 1e7f));
  long where = 0;
  for (int n_threads : {2, 3})
    check(same_bits(run(isa, n_threads, 0, rows.size()), got, where), "attention threads",
          DType::F32, isa, where);
  const size_t row_floats = static_cast<size_t>(n_head * head_dim);
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::vector<float> alone = run(isa, 2, r, 1);
    const std::vector<float> in_batch(got.begin() + static_cast<long>(r * row_floats),
                                      got.begin() + static_cast<long>((r + 1) * row_floats));
    check(same_bits(alone, in_batch, where), "attention alone vs batch", DType::F32, isa, where);
  }
}

void check_attention_kernels(KernelIsa isa, std::mt19937& rng) {
  const KvTypes types[] = {KvTypes::both(KvType::F16), KvTypes::both(KvType::F32),
                           KvTypes::both(KvType::Q8_0), KvTypes::both(KvType::Q4_0),
                           KvTypes{KvType::Q8_0, KvType::F16}};
  for (const KvTypes& t : types) {
    check_attention(isa, t, {40, 0, 77, 15}, 0, false, rng);
    check_attention(isa, t, {100, 5, 33}, 20, true, rng);
  }
  // Longer than kAttentionSplitPositions: computed in pieces.
  check_attention(isa, KvTypes::both(KvType::Q8_0), {1300, 9}, 0, true, rng);
}

}  // namespace
}  // namespace trellis

int main() {
  using namespace trellis;
  std::mt19937 rng(2024);
  const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                         DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                         DType::Q4_K, DType::Q5_K, DType::Q6_K};
  std::printf("best kernel ISA: %s\n", std::string(kernel_isa_name(best_kernel_isa())).c_str());
  // The types the NEON table must cover with its own kernels (checked when NEON runs).
  const DType neon_required[] = {DType::F16,  DType::Q4_0, DType::Q8_0, DType::Q2_K,
                                 DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  const int n_types = static_cast<int>(sizeof(types) / sizeof(types[0]));
  for (KernelIsa isa : {KernelIsa::SCALAR, KernelIsa::AVX2, KernelIsa::NEON}) {
    if (!kernel_isa_supported(isa)) continue;
    if (isa == KernelIsa::NEON) {
      check_kernel_coverage(isa, types, n_types, neon_required,
                            static_cast<int>(sizeof(neon_required) / sizeof(neon_required[0])));
    }
    for (DType type : types) check_type(type, isa, rng);
    if (isa != KernelIsa::SCALAR) check_attention_kernels(isa, rng);
  }
  check_activation_quantizers(rng);
  std::printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
