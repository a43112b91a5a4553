#include "model/quantize_model.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "quant/quant.h"

namespace trellis {
namespace {

// Rows quantized at a time (in parallel, then written in order): about this many output bytes.
constexpr uint64_t kChunkBytes = uint64_t{4} << 20;

// The output type of each input tensor.
Result<std::vector<DType>> plan_types(const GgufFile& file, QuantMix mix, bool with_importance) {
  Result<std::string> arch = file.get_string("general.architecture");
  if (!arch.ok()) return arch.error();
  Result<int64_t> n_layer = file.get_int(*arch + ".block_count");
  if (!n_layer.ok()) return n_layer.error();
  const bool tied_output = file.find_tensor("output.weight") == nullptr;
  std::vector<DType> types;
  for (const GgufTensor& t : file.tensors()) {
    if (!quant_mix_quantizes(t.name, static_cast<int>(t.shape.size()))) {
      types.push_back(t.type);
      continue;
    }
    const DType to =
        quant_mix_type(mix, t.name, t.shape[0], *n_layer, tied_output, with_importance);
    if (to != t.type && !is_float_dtype(t.type)) {
      return Error{file.name() + ": tensor '" + t.name + "' is already " +
                   std::string(dtype_name(t.type)) +
                   "; quantize from a file of F32, F16 or BF16 weights"};
    }
    types.push_back(to);
  }
  return types;
}

// The importance of a tensor's columns ([n_mat][cols]: one row per expert of a stacked expert
// tensor), empty when the matrix has none; an error when its shape does not fit the tensor.
Result<std::vector<float>> importance_of(const Imatrix* imatrix, const GgufTensor& t) {
  if (imatrix == nullptr) return std::vector<float>{};
  std::optional<std::vector<float>> found = imatrix->importance(t.name);
  if (!found) return std::vector<float>{};
  const auto cols = static_cast<size_t>(t.shape[0]);
  const size_t n_mat = found->size() / cols;
  if (found->size() % cols != 0 || n_mat == 0 || t.n_rows() % static_cast<int64_t>(n_mat) != 0) {
    return Error{"the importance matrix of '" + t.name + "' has " +
                 std::to_string(found->size()) + " values, which do not fit its " +
                 std::to_string(cols) + " columns"};
  }
  return std::move(*found);
}

// Rows [begin, end) of t, from its type to `to`, into out; `importance` as importance_of's.
void convert_rows(const GgufTensor& t, DType to, int64_t begin, int64_t end, uint8_t* out,
                  const std::vector<float>& importance, ThreadPool& pool) {
  const int64_t cols = t.shape[0];
  const uint64_t in_stride = *row_bytes(t.type, cols);
  const uint64_t out_stride = *row_bytes(to, cols);
  const int64_t n_mat = static_cast<int64_t>(importance.size()) / cols;
  pool.parallel_for(end - begin, 1, [&](int64_t first, int64_t last) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = first; r < last; ++r) {
      const int64_t at = begin + r;
      dequantize_row(t.type, t.data + static_cast<uint64_t>(at) * in_stride, row.data(), cols);
      const float* weights =
          n_mat == 0 ? nullptr : importance.data() + (at / (t.n_rows() / n_mat)) * cols;
      quantize_row_weighted(to, row.data(), out + static_cast<uint64_t>(r) * out_stride, cols,
                            weights);
    }
  });
}

Status write_tensor(GgufWriter& writer, const GgufTensor& t, DType to,
                    const std::vector<float>& importance, ThreadPool& pool,
                    std::vector<uint8_t>& buffer) {
  if (to == t.type) return writer.write_tensor_data(t.bytes());
  const uint64_t out_stride = *row_bytes(to, t.shape[0]);
  const int64_t per_chunk = std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / out_stride));
  for (int64_t begin = 0; begin < t.n_rows(); begin += per_chunk) {
    const int64_t end = std::min(t.n_rows(), begin + per_chunk);
    buffer.resize(static_cast<size_t>(end - begin) * out_stride);
    convert_rows(t, to, begin, end, buffer.data(), importance, pool);
    TRELLIS_TRY(writer.write_tensor_data(buffer));
  }
  return {};
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  return std::filesystem::equivalent(a, b, error);
}

}  // namespace

Result<QuantizeTotals> quantize_model(const std::string& input, const std::string& output,
                                      QuantMix mix, ThreadPool& pool,
                                      const std::function<void(const QuantizedTensor&)>& on_tensor,
                                      const Imatrix* imatrix, const std::string& imatrix_file) {
  if (mix == QuantMix::MXFP4_MOE) return Error{"mxfp4_moe is written by model synth only"};
  if (same_file(input, output)) return Error{output + ": the output is the input file"};
  Result<GgufFile> file = GgufFile::open(input);
  if (!file.ok()) return file.error();
  Result<std::vector<DType>> types = plan_types(*file, mix, imatrix != nullptr);
  if (!types.ok()) return types.error();

  GgufWriter writer;
  writer.copy_metadata(*file, "");
  if (file->has("general.alignment"))
    writer.set_alignment(static_cast<uint32_t>(file->alignment()));
  writer.set("general.file_type", GgufValue{quant_mix_file_type(mix)});
  writer.set("general.quantization_version", GgufValue{uint32_t{2}});
  if (imatrix != nullptr) {  // the keys llama-quantize writes
    writer.set("quantize.imatrix.file", GgufValue{imatrix_file});
    if (!imatrix->datasets.empty())
      writer.set("quantize.imatrix.dataset", GgufValue{imatrix->datasets.front()});
    writer.set("quantize.imatrix.entries_count",
               GgufValue{static_cast<int32_t>(imatrix->entries.size())});
    writer.set("quantize.imatrix.chunks_count", GgufValue{static_cast<int32_t>(imatrix->chunk_count)});
  }
  const std::vector<GgufTensor>& tensors = file->tensors();
  QuantizeTotals totals;
  for (size_t i = 0; i < tensors.size(); ++i) {
    Result<uint64_t> bytes = writer.add_tensor(tensors[i].name, (*types)[i], tensors[i].shape);
    if (!bytes.ok()) return bytes.error();
  }
  Status status = writer.begin(output);
  std::vector<uint8_t> buffer;
  for (size_t i = 0; status.ok() && i < tensors.size(); ++i) {
    const GgufTensor& t = tensors[i];
    const DType to = (*types)[i];
    Result<std::vector<float>> importance = importance_of(to != t.type ? imatrix : nullptr, t);
    if (!importance.ok()) {
      status = importance.error();
      break;
    }
    status = write_tensor(writer, t, to, *importance, pool, buffer);
    file->release_pages(t.bytes());
    const uint64_t bytes_out = *row_bytes(to, t.shape[0]) * static_cast<uint64_t>(t.n_rows());
    totals.bytes_in += t.n_bytes;
    totals.bytes_out += bytes_out;
    totals.n_quantized += to != t.type ? 1 : 0;
    ++totals.n_tensors;
    if (status.ok() && on_tensor) {
      on_tensor(QuantizedTensor{t.name, t.type, to, t.n_bytes, bytes_out, !importance->empty()});
    }
  }
  if (status.ok()) status = writer.finish();
  if (!status.ok()) {
    std::remove(output.c_str());
    return status.error();
  }
  return totals;
}

}  // namespace trellis
