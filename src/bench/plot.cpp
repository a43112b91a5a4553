#include "bench/plot.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "bench/results.h"

namespace trellis::bench {
namespace {

namespace fs = std::filesystem;

// `text` with every `key` replaced by `value`.
std::string substitute(std::string text, const std::string& key, const std::string& value) {
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

// The opening lines of every script: a PNG terminal this gnuplot has (pngcairo draws antialiased
// lines and UTF-8 text; the libgd png terminal is the fallback), and the output file.
std::string script_header(const std::string& bench, const std::string& png, int width, int height) {
  std::string header =
      R"(# Drawn by `trellis bench @BENCH@`. Redraw (after editing) in this folder with: gnuplot plot.gp
set encoding utf8
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size @SIZE@ noenhanced font 'sans,11'
} else {
  set terminal png size @SIZE@ noenhanced
}
set output @PNG@
set grid
set key box opaque
)";
  header = substitute(header, "@BENCH@", bench);
  header = substitute(header, "@SIZE@", std::to_string(width) + "," + std::to_string(height));
  return substitute(header, "@PNG@", gnuplot_quote(png));
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

double get(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}

// "model NAME" from the record's model object (file name only: the full path is in results.json).
std::string model_name(const nlohmann::json& record) {
  if (!record.contains("model") || !record["model"].contains("path")) return "";
  return fs::path(record["model"]["path"].get<std::string>()).filename().string();
}

// Writes <dir>/<name>.dat and <dir>/plot.gp, runs gnuplot there, checks <dir>/<name>.png and
// returns its path.
Result<std::string> draw(const std::string& dir, const std::string& name, const std::string& data,
                         const std::string& script) {
  const std::string png = name + ".png";
  const std::string dat = name + ".dat";
  if (!write_file(dir + "/" + dat, data).ok() || !write_file(dir + "/plot.gp", script).ok())
    return Error{"cannot write the plot files in " + dir + ": plots skipped"};
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return Error{"gnuplot not found: plots skipped; install gnuplot-nox (the script is " + dir +
                 "/plot.gp)"};
  }
  std::error_code ec;
  fs::remove(dir + "/" + png, ec);  // so that a stale figure is not taken for a new one
  const std::string command = "cd " + shell_quote(dir) + " && gnuplot plot.gp 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return Error{"cannot run gnuplot: plots skipped"};
  std::string output;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  const bool ok = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  while (!output.empty() && output.back() == '\n') output.pop_back();
  if (!ok || !fs::exists(dir + "/" + png, ec))
    return Error{"gnuplot failed on " + dir + "/plot.gp: plots skipped\n" + output};
  return dir + "/" + png;
}

}  // namespace

std::string shell_quote(const std::string& s) {
  std::string quoted = "'";
  for (char c : s) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string gnuplot_quote(const std::string& s) {
  std::string quoted = "'";
  for (char c : s) {
    if (c == '\'') {
      quoted += "''";
    } else if (c == '\n' || c == '\r') {
      quoted += ' ';
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

Result<std::string> plot_phi(const std::string& dir, const nlohmann::json& record) {
  std::string data =
      "# effective_phi  tokens_per_s_off  stddev  tokens_per_s_on  stddev  "
      "allocations_per_op_off  allocations_per_op_on\n";
  for (const nlohmann::json& p : record["points"]) {
    const nlohmann::json& off = p["cache_off"];
    const nlohmann::json& on = p["cache_on"];
    data += number(get(p, "effective_phi")) + " " + number(get(off, "generation_tokens_per_s")) +
            " " + number(get(off, "generation_tokens_per_s_stddev")) + " " +
            number(get(on, "generation_tokens_per_s")) + " " +
            number(get(on, "generation_tokens_per_s_stddev")) + " " +
            number(get(off, "heap_allocations")) + " " + number(get(on, "heap_allocations")) + "\n";
  }
  const std::string title = "bench phi: L=" + record["L"].dump() + " D=" + record["D"].dump() +
                            " N=" + record["N"].dump() + " B=" + record["B"].dump() +
                            " reps=" + record["reps"].dump() + ", " + model_name(record);
  std::string script = script_header("phi", "phi.png", 1200, 750);
  script += "set title " + gnuplot_quote(title) + R"(
set xlabel 'effective φ (shared prefix tokens / prompt tokens)'
set ylabel 'generation tokens/s (all sessions, prefill included)'
set y2label 'heap allocations per op'
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
set offsets graph 0.03, graph 0.03, graph 0.05, 0
set key top left
plot 'phi.dat' using 1:2:3 with yerrorlines lw 2 pt 7 lc rgb '#d62728' title 'tokens/s, cache off', \
     '' using 1:4:5 with yerrorlines lw 2 pt 7 lc rgb '#1f77b4' title 'tokens/s, cache on', \
     '' using 1:6 axes x1y2 with linespoints lw 1 dt 2 pt 6 lc rgb '#d62728' \
        title 'allocations/op, cache off (right axis)', \
     '' using 1:7 axes x1y2 with linespoints lw 1 dt 2 pt 6 lc rgb '#1f77b4' \
        title 'allocations/op, cache on (right axis)'
)";
  return draw(dir, "phi", data, script);
}

Result<std::string> plot_ttft(const std::string& dir, const nlohmann::json& record) {
  std::string data =
      "# effective_phi  ttft_ms_off  stddev  ttft_ms_on  stddev  ideal_ms (off x (1 - phi))\n";
  for (const nlohmann::json& p : record["points"]) {
    const double phi = get(p, "effective_phi");
    const nlohmann::json& off = p["cache_off"];
    const nlohmann::json& on = p["cache_on"];
    data += number(phi) + " " + number(get(off, "ttft_ms")) + " " +
            number(get(off, "ttft_ms_stddev")) + " " + number(get(on, "ttft_ms")) + " " +
            number(get(on, "ttft_ms_stddev")) + " " + number(get(off, "ttft_ms") * (1 - phi)) +
            "\n";
  }
  const std::string title = "bench ttft: L=" + record["L"].dump() + " B=" + record["B"].dump() +
                            " reps=" + record["reps"].dump() + ", " + model_name(record);
  std::string script = script_header("ttft", "ttft.png", 1100, 700);
  script += "set title " + gnuplot_quote(title) + R"(
set xlabel 'effective φ (shared prefix tokens / prompt tokens)'
set ylabel 'time to first token (ms)'
set yrange [0:*]
set offsets graph 0.03, graph 0.03, graph 0.05, 0
set key top right
plot 'ttft.dat' using 1:2:3 with yerrorlines lw 2 pt 7 lc rgb '#d62728' title 'cache off', \
     '' using 1:4:5 with yerrorlines lw 2 pt 7 lc rgb '#1f77b4' title 'cache on', \
     '' using 1:6 with lines lw 1 dt 2 lc rgb '#555555' title 'ideal: cache-off TTFT × (1 − φ)'
)";
  return draw(dir, "ttft", data, script);
}

Result<std::string> plot_block_size(const std::string& dir, const nlohmann::json& record) {
  // One data block per mode (gnuplot `index` 0, 1, 2), rows sorted by B. The two match modes are
  // drawn 4% either side of B so that their error bars do not hide each other.
  const std::vector<std::string> modes = {"token", "block", "off"};
  std::string data =
      "# blocks: index 0 token match, 1 block match, 2 cache off\n"
      "# B  leaves_mean  stddev  cached_tokens_per_probe  ttft_ms_mean  stddev\n";
  std::set<int64_t> sizes;
  for (const std::string& mode : modes) {
    data += "# " + mode + "\n";
    for (const nlohmann::json& s : record["summary"]) {
      if (s["mode"] != mode) continue;
      sizes.insert(s["B"].get<int64_t>());
      data += s["B"].dump() + " " + number(get(s, "leaves_mean")) + " " +
              number(get(s, "leaves_stddev")) + " " + number(get(s, "cached_tokens_mean")) + " " +
              number(get(s, "ttft_ms_mean")) + " " + number(get(s, "ttft_ms_stddev")) + "\n";
    }
    data += "\n\n";
  }
  std::string xtics;
  for (int64_t b : sizes) xtics += (xtics.empty() ? "" : ", ") + std::to_string(b);
  const double lo = sizes.empty() ? 1 : static_cast<double>(*sizes.begin()) / 1.4;
  const double hi = sizes.empty() ? 2 : static_cast<double>(*sizes.rbegin()) * 1.4;
  std::string lengths;
  for (const nlohmann::json& l : record["lengths"])
    lengths += (lengths.empty() ? "" : ",") + l.dump();
  const std::string title = "bench block-size: L=" + lengths +
                            " prompts=" + record["prompts"].dump() +
                            " probes=" + record["N"].dump() + " reps=" + record["reps"].dump() +
                            " (spread over lengths and reps), " + model_name(record);
  std::string script = script_header("block-size", "block-size.png", 1100, 900);
  script += "set multiplot layout 2,1 title " + gnuplot_quote(title) + "\nset xtics (" + xtics +
            ")\nset xrange [" + number(lo) + ":" + number(hi) + "]\n";
  script += R"(set logscale x 2
set yrange [0:*]
set key top left
set ylabel 'probe time to first token (ms)'
plot 'block-size.dat' index 0 using ($1/1.04):5:6 with yerrorlines lw 2 pt 7 lc rgb '#1f77b4' \
        title 'token match', \
     '' index 1 using ($1*1.04):5:6 with yerrorlines lw 2 pt 5 lc rgb '#ff7f0e' \
        title 'block match', \
     '' index 2 using 1:5:6 with yerrorlines lw 1 dt 2 pt 6 lc rgb '#d62728' title 'cache off'
set xlabel 'block size B (tokens per KV block, log2 scale)'
set ylabel 'radix tree leaves after warming'
plot 'block-size.dat' index 0 using ($1/1.04):2:3 with yerrorlines lw 2 pt 7 lc rgb '#1f77b4' \
        title 'token match', \
     '' index 1 using ($1*1.04):2:3 with yerrorlines lw 2 pt 5 lc rgb '#ff7f0e' \
        title 'block match'
unset multiplot
)";
  return draw(dir, "block-size", data, script);
}

}  // namespace trellis::bench
