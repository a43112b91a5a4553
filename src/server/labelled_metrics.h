// Several services' /metrics texts as one exposition: each sample gains a label naming its source
// (model="qwen3"), and each family is written once, its HELP and TYPE first, then the samples of
// every source in the order the sources are given. (Prometheus refuses a family whose HELP/TYPE
// lines appear twice, so the texts cannot simply be concatenated.)
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trellis {

// `sources`: (label value, exposition text) pairs; `label`: the label's name. Families keep the
// order of their first appearance.
std::string merge_labelled_metrics(std::string_view label,
                                   const std::vector<std::pair<std::string, std::string>>& sources);

}  // namespace trellis
