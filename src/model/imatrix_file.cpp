#include "model/imatrix_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace trellis {
namespace {

constexpr std::string_view kSums = ".in_sum2";
constexpr std::string_view kCounts = ".counts";

std::vector<double> read_f32(const GgufTensor& t) {
  std::vector<double> values(static_cast<size_t>(t.n_elements));
  for (size_t i = 0; i < values.size(); ++i) {
    float v;
    std::memcpy(&v, t.data + 4 * i, 4);
    values[i] = v;
  }
  return values;
}

Status write_f32(GgufWriter& writer, const std::vector<double>& values) {
  std::vector<float> floats(values.begin(), values.end());
  return writer.write_tensor_data(std::span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(floats.data()), floats.size() * 4));
}

}  // namespace

std::optional<std::vector<float>> Imatrix::importance(const std::string& name) const {
  const auto it = entries.find(name);
  if (it == entries.end()) return std::nullopt;
  const ImatrixEntry& e = it->second;
  std::vector<float> mean(e.sums.size(), 1.0f);
  // Rows past the sums (an entry built inconsistently in memory; a file's are checked) keep 1.
  const size_t n_mat =
      e.n_cols > 0 ? std::min(e.counts.size(), e.sums.size() / static_cast<size_t>(e.n_cols)) : 0;
  for (size_t m = 0; m < n_mat; ++m) {
    if (!(e.counts[m] > 0)) continue;
    for (int64_t c = 0; c < e.n_cols; ++c) {
      const size_t i = m * static_cast<size_t>(e.n_cols) + static_cast<size_t>(c);
      mean[i] = static_cast<float>(e.sums[i] / e.counts[m]);
    }
  }
  return mean;
}

Result<Imatrix> read_imatrix(const std::string& path) {
  Result<GgufFile> file = GgufFile::open(path);
  if (!file.ok()) {
    return Error{file.error().message +
                 " (an importance matrix must be a GGUF file; llama.cpp's legacy .dat form can be "
                 "converted with llama-imatrix --in-file FILE.dat -o FILE.gguf)"};
  }
  Result<std::string> type = file->get_string_or("general.type", "");
  if (!type.ok() || *type != "imatrix")
    return Error{path + ": not an importance matrix (general.type is not \"imatrix\")"};
  Imatrix out;
  if (Result<const GgufArray*> datasets = file->get_array("imatrix.datasets"); datasets.ok()) {
    for (const GgufValue& v : (*datasets)->items)
      if (const auto* s = std::get_if<std::string>(&v.storage)) out.datasets.push_back(*s);
  }
  Result<int64_t> chunk_count = file->get_int_or("imatrix.chunk_count", 0);
  Result<int64_t> chunk_size = file->get_int_or("imatrix.chunk_size", 0);
  if (!chunk_count.ok()) return chunk_count.error();
  if (!chunk_size.ok()) return chunk_size.error();
  out.chunk_count = static_cast<uint32_t>(*chunk_count);
  out.chunk_size = static_cast<uint32_t>(*chunk_size);
  for (const GgufTensor& t : file->tensors()) {
    const bool sums = t.name.ends_with(kSums);
    if (!sums && !t.name.ends_with(kCounts)) continue;
    if (t.type != DType::F32) return Error{path + ": tensor '" + t.name + "' is not F32"};
    const std::string name =
        t.name.substr(0, t.name.size() - (sums ? kSums.size() : kCounts.size()));
    ImatrixEntry& entry = out.entries[name];
    std::vector<double> values = read_f32(t);
    for (double v : values) {
      if (!std::isfinite(v) || v < 0)
        return Error{path + ": tensor '" + t.name + "' holds a negative or non-finite value"};
    }
    if (sums) {
      entry.n_cols = t.shape.empty() ? 0 : t.shape[0];
      entry.sums = std::move(values);
    } else {
      entry.counts = std::move(values);
    }
  }
  for (const auto& [name, entry] : out.entries) {
    if (entry.sums.empty() || entry.counts.empty() || entry.n_cols <= 0 ||
        entry.sums.size() != entry.counts.size() * static_cast<size_t>(entry.n_cols)) {
      return Error{path + ": the sums and counts of '" + name + "' do not match"};
    }
  }
  return out;
}

Status write_imatrix(const Imatrix& imatrix, const std::string& path) {
  GgufWriter writer;
  writer.set("general.type", GgufValue{std::string("imatrix")});
  writer.set("imatrix.datasets", gguf_string_array(imatrix.datasets));
  writer.set("imatrix.chunk_count", GgufValue{imatrix.chunk_count});
  writer.set("imatrix.chunk_size", GgufValue{imatrix.chunk_size});
  // std::map: names in sorted order, as llama.cpp writes them.
  for (const auto& [name, e] : imatrix.entries) {
    const auto n_mat = static_cast<int64_t>(e.counts.size());
    TRELLIS_TRY(writer.add_tensor(name + std::string(kSums), DType::F32, {e.n_cols, n_mat}));
    TRELLIS_TRY(writer.add_tensor(name + std::string(kCounts), DType::F32, {1, n_mat}));
  }
  TRELLIS_TRY(writer.begin(path));
  for (const auto& [name, e] : imatrix.entries) {
    TRELLIS_TRY(write_f32(writer, e.sums));
    TRELLIS_TRY(write_f32(writer, e.counts));
  }
  return writer.finish();
}

}  // namespace trellis
