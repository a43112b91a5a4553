#include "model/imatrix_collector.h"

#include <string_view>

namespace trellis {
namespace {

// The tensor suffixes of each input's matrices.
struct InputMatrices {
  MatmulInput input;
  std::vector<std::string_view> suffixes;
};

const std::vector<InputMatrices>& input_matrices() {
  static const std::vector<InputMatrices> table = {
      {MatmulInput::ATTENTION, {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_qkv.weight"}},
      {MatmulInput::ATTENTION_OUTPUT, {"attn_output.weight"}},
      {MatmulInput::FFN, {"ffn_gate.weight", "ffn_up.weight"}},
      {MatmulInput::FFN_DOWN, {"ffn_down.weight"}},
  };
  return table;
}

}  // namespace

ImatrixCollector::ImatrixCollector(const GgufFile& file) {
  for (const GgufTensor& t : file.tensors()) {
    if (!t.name.starts_with("blk.") || t.shape.size() != 2) continue;
    const size_t dot = t.name.find('.', 4);
    if (dot == std::string::npos || dot == 4 || dot > 12) continue;
    int64_t layer = 0;
    bool digits = true;
    for (size_t i = 4; i < dot; ++i) {
      digits = digits && t.name[i] >= '0' && t.name[i] <= '9';
      layer = layer * 10 + (t.name[i] - '0');
    }
    if (!digits) continue;
    const std::string suffix = t.name.substr(dot + 1);
    for (const InputMatrices& group : input_matrices()) {
      for (std::string_view s : group.suffixes)
        if (suffix == s) names_[{layer, group.input}].push_back(t.name);
    }
  }
}

void ImatrixCollector::observe(int64_t layer, MatmulInput input, const float* rows, int32_t n_rows,
                               int64_t n_cols) {
  const Key key{layer, input};
  if (!names_.contains(key)) return;
  Sums& s = sums_[key];
  if (s.sums.empty()) s.sums.assign(static_cast<size_t>(n_cols), 0.0);
  for (int32_t r = 0; r < n_rows; ++r) {
    const float* row = rows + static_cast<int64_t>(r) * n_cols;
    for (int64_t c = 0; c < n_cols; ++c) s.sums[static_cast<size_t>(c)] += double{row[c]} * row[c];
  }
  s.count += n_rows;
  if (key == sums_.begin()->first) n_rows_ += n_rows;
}

Imatrix ImatrixCollector::take(std::vector<std::string> datasets, uint32_t chunk_count,
                               uint32_t chunk_size) const {
  Imatrix out;
  out.datasets = std::move(datasets);
  out.chunk_count = chunk_count;
  out.chunk_size = chunk_size;
  for (const auto& [key, s] : sums_) {
    for (const std::string& name : names_.at(key)) {
      ImatrixEntry& entry = out.entries[name];
      entry.n_cols = static_cast<int64_t>(s.sums.size());
      entry.sums = s.sums;
      entry.counts = {s.count};
    }
  }
  return out;
}

}  // namespace trellis
