// PNG figures of benchmark results, drawn by gnuplot.
//
// Each function writes into the results folder `dir`:
//   <name>.dat  the plotted numbers (whitespace-separated columns, described in a header comment)
//   plot.gp     the gnuplot script, with relative paths: `cd DIR && gnuplot plot.gp` redraws it
//   <name>.png  the figure (pngcairo when this gnuplot has it, else the libgd png terminal)
// The figures are a convenience beside results.json/results.csv: each function returns the PNG's
// path, or an error saying why there is none (gnuplot missing or failing, a file not writable),
// which callers report as a warning; nothing is printed here.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"

namespace trellis::bench {

// `bench phi`: generation tokens/s vs effective φ (cache off / on, error bars over reps) on the
// left axis, heap allocations per op (cache off / on) on the right axis. Writes phi.png.
Result<std::string> plot_phi(const std::string& dir, const nlohmann::json& record);

// `bench ttft`: TTFT vs effective φ (cache off / on, error bars over reps) and the ideal
// cache-off TTFT x (1 - φ). Writes ttft.png.
Result<std::string> plot_ttft(const std::string& dir, const nlohmann::json& record);

// `bench block-size`: TTFT (error bars) and radix tree leaves vs block size (log2 axis), both
// match modes, from the record's "summary" rows. Writes block-size.png.
Result<std::string> plot_block_size(const std::string& dir, const nlohmann::json& record);

// `s` as a single-quoted shell word ('it'\''s').
std::string shell_quote(const std::string& s);
// `s` as a single-quoted gnuplot string ('it''s'); newlines become spaces.
std::string gnuplot_quote(const std::string& s);

}  // namespace trellis::bench
