#include "cluster/layer_split.h"

#include <algorithm>
#include <limits>
#include <string>

#include "model/model_hparams.h"

namespace trellis {
namespace {

// The layer index of a tensor named blk.<i>.<...>, or -1.
int64_t block_index(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4) return -1;
  int64_t il = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    il = il * 10 + (name[i] - '0');
  }
  return il;
}

std::vector<LayerRange> ranges_from_bounds(const std::vector<int64_t>& bounds) {
  std::vector<LayerRange> ranges;
  const size_t n = bounds.size() - 1;
  for (size_t s = 0; s < n; ++s) ranges.push_back({bounds[s], bounds[s + 1], s == 0, s == n - 1});
  return ranges;
}

}  // namespace

ModelWeightBytes weight_bytes(const GgufFile& file, int64_t n_layer) {
  ModelWeightBytes bytes;
  bytes.layers.assign(static_cast<size_t>(n_layer), 0);
  const bool tied = file.find_tensor("output.weight") == nullptr;
  for (const GgufTensor& t : file.tensors()) {
    const int64_t il = block_index(t.name);
    if (il >= 0 && il < n_layer) {
      bytes.layers[static_cast<size_t>(il)] += t.n_bytes;
    } else if (t.name == "output.weight" || t.name == "output_norm.weight") {
      bytes.output += t.n_bytes;
    } else if (t.name == "token_embd.weight" && tied) {
      bytes.output += t.n_bytes;  // it is the output head too
    }
  }
  return bytes;
}

uint64_t stage_bytes(const ModelWeightBytes& bytes, const LayerRange& range) {
  uint64_t total = 0;
  for (int64_t il = range.begin; il < range.end; ++il) total += bytes.layers[static_cast<size_t>(il)];
  if (range.last) total += bytes.output;
  return total;
}

Result<std::vector<LayerRange>> balanced_split(const ModelWeightBytes& bytes, int n_stages) {
  const auto n = static_cast<int64_t>(bytes.layers.size());
  if (n_stages < 1 || n_stages > n) {
    return Error{"cannot split " + std::to_string(n) + " layers into " +
                 std::to_string(n_stages) + " stages (each needs at least one layer)"};
  }
  // cost[s][i]: the least possible largest stage when stages 0..s-1 hold layers [0, i).
  // Stage s of n_stages holding [i, j) weighs its layers plus the first/last stage extras.
  const uint64_t inf = std::numeric_limits<uint64_t>::max();
  const auto S = static_cast<size_t>(n_stages);
  std::vector<std::vector<uint64_t>> cost(S + 1, std::vector<uint64_t>(static_cast<size_t>(n) + 1, inf));
  std::vector<std::vector<int64_t>> cut(S + 1, std::vector<int64_t>(static_cast<size_t>(n) + 1, 0));
  cost[0][0] = 0;
  for (size_t s = 1; s <= S; ++s) {
    for (int64_t j = static_cast<int64_t>(s); j <= n; ++j) {
      for (int64_t i = static_cast<int64_t>(s) - 1; i < j; ++i) {
        if (cost[s - 1][static_cast<size_t>(i)] == inf) continue;
        const LayerRange stage{i, j, s == 1, s == S};
        const uint64_t worst = std::max(cost[s - 1][static_cast<size_t>(i)], stage_bytes(bytes, stage));
        if (worst < cost[s][static_cast<size_t>(j)]) {
          cost[s][static_cast<size_t>(j)] = worst;
          cut[s][static_cast<size_t>(j)] = i;
        }
      }
    }
  }
  std::vector<int64_t> bounds(S + 1);
  bounds[S] = n;
  for (size_t s = S; s > 0; --s) bounds[s - 1] = cut[s][static_cast<size_t>(bounds[s])];
  return ranges_from_bounds(bounds);
}

Result<std::vector<LayerRange>> split_by_counts(const std::vector<int64_t>& counts,
                                                int64_t n_layer) {
  std::vector<int64_t> bounds{0};
  for (int64_t c : counts) {
    if (c < 1) return Error{"every stage needs at least one layer"};
    bounds.push_back(bounds.back() + c);
  }
  if (counts.empty() || bounds.back() != n_layer) {
    return Error{"the layer counts add up to " + std::to_string(bounds.back()) +
                 ", but the model has " + std::to_string(n_layer) + " layers"};
  }
  return ranges_from_bounds(bounds);
}

Result<std::vector<LayerRange>> split_layers(const GgufFile& file, int n_stages,
                                             const std::vector<int64_t>& counts) {
  Result<ModelHParams> hp = read_model_hparams(file);
  if (!hp.ok()) return hp.error();
  if (!counts.empty()) {
    if (static_cast<int>(counts.size()) != n_stages) {
      return Error{"--layers-per-rank gives " + std::to_string(counts.size()) +
                   " stages, but the job has " + std::to_string(n_stages) + " ranks"};
    }
    return split_by_counts(counts, hp->n_layer);
  }
  return balanced_split(weight_bytes(file, hp->n_layer), n_stages);
}

}  // namespace trellis
