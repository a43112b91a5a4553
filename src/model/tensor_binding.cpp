#include "model/tensor_binding.h"

#include <functional>
#include <numeric>

#include "quant/quant.h"

namespace trellis {

Result<const GgufTensor*> find_tensor(const GgufFile& file, const std::string& name,
                                      std::vector<int64_t> shape) {
  const GgufTensor* t = file.find_tensor(name);
  if (t == nullptr) return Error{file.name() + ": missing tensor '" + name + "'"};
  // Trailing dimensions of 1 are equivalent to absent ones.
  std::vector<int64_t> actual = t->shape;
  while (actual.size() > shape.size() && actual.back() == 1) actual.pop_back();
  if (actual != shape) {
    auto str = [](const std::vector<int64_t>& s) {
      std::string out = "[";
      for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
      return out + "]";
    };
    return Error{file.name() + ": tensor '" + name + "' has shape " + str(t->shape) +
                 ", expected " + str(shape)};
  }
  return t;
}

Result<WeightView> bind_matrix(const GgufFile& file, const std::string& name, int64_t n_in,
                               int64_t n_out) {
  Result<const GgufTensor*> t = find_tensor(file, name, {n_in, n_out});
  if (!t.ok()) return t.error();
  if (!matmul_supports((*t)->type)) {
    return Error{file.name() + ": tensor '" + name + "' has type " +
                 std::string(dtype_name((*t)->type)) + ", which matmul does not support"};
  }
  return WeightView{(*t)->type, (*t)->data, n_in, n_out};
}

Result<std::vector<float>> bind_values(const GgufFile& file, const std::string& name,
                                       const std::vector<int64_t>& shape) {
  Result<const GgufTensor*> t = find_tensor(file, name, shape);
  if (!t.ok()) return t.error();
  if (!can_dequantize((*t)->type) || !row_bytes((*t)->type, shape[0]).has_value()) {
    return Error{file.name() + ": tensor '" + name + "' has unsupported type " +
                 std::string(dtype_name((*t)->type))};
  }
  const int64_t n_rows = static_cast<int64_t>(
      std::accumulate(shape.begin() + 1, shape.end(), int64_t{1}, std::multiplies<>()));
  const uint64_t stride = *row_bytes((*t)->type, shape[0]);
  std::vector<float> values(static_cast<size_t>(shape[0] * n_rows));
  for (int64_t r = 0; r < n_rows; ++r) {
    dequantize_row((*t)->type, static_cast<const uint8_t*>((*t)->data) + r * stride,
                   values.data() + r * shape[0], shape[0]);
  }
  return values;
}

Result<std::vector<float>> bind_vector(const GgufFile& file, const std::string& name, int64_t n) {
  return bind_values(file, name, {n});
}

PackedBytes pack_matmul_weights(const GgufFile& file, const std::vector<WeightView*>& weights) {
  const KernelIsa isa = best_kernel_isa();
  std::vector<WeightView*> packable;
  size_t total = 0;
  for (WeightView* w : weights) {
    if (!weight_packable(isa, *w)) continue;
    packable.push_back(w);
    total += packed_weight_bytes(*w);
  }
  if (packable.empty()) return nullptr;
  PackedBytes packed = allocate_packed_bytes(total);
  if (packed == nullptr) return nullptr;  // no memory for a copy: the kernels read the rows
  uint8_t* dst = packed.get();
  for (WeightView* w : packable) {
    const uint64_t rows_bytes = *row_bytes(w->type, w->n_in) * static_cast<uint64_t>(w->n_out);
    const std::span<const uint8_t> rows(static_cast<const uint8_t*>(w->data), rows_bytes);
    const size_t bytes = packed_weight_bytes(*w);
    *w = pack_weight(isa, *w, dst);
    dst += bytes;
    // Released matrix by matrix, so that the peak holds one matrix twice, not the model.
    file.release_pages(rows);
  }
  return packed;
}

}  // namespace trellis
