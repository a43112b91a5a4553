#include "bench/structured_report.h"

#include <cstdarg>
#include <cstdio>
#include <filesystem>

namespace trellis::bench {

namespace structured_report_detail {
namespace {

using nlohmann::json;

// Appends printf-style text to `out`.
[[gnu::format(printf, 2, 3)]] void put(std::string& out, const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  if (n > 0) out.append(buffer, std::min(static_cast<size_t>(n), sizeof buffer - 1));
}

std::string str(const json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

double num(const json& v) {
  return v.is_number() ? v.get<double>() : 0.0;
}

void put_mask_line(std::string& out, const std::string& vocab, const std::string& schema,
                   const char* kind, const json& t) {
  put(out,
      "| %s | %s | %s %lld | %lld | %.4f | %.4f | %.3f | %.3f | %lld | %lld | %lld | %s | %.3f |\n",
      vocab.c_str(), schema.c_str(), kind, static_cast<long long>(num(t["requests"])),
      static_cast<long long>(num(t["steps"])), num(t["mean_ms"]), num(t["p50_ms"]),
      num(t["p99_ms"]), num(t["max_ms"]), static_cast<long long>(num(t["computed"])),
      static_cast<long long>(num(t["hits"])), static_cast<long long>(num(t["final"])),
      t["meets_targets"].get<bool>() ? "ok" : "MISSED", num(t["apply_mean_ms"]));
}

void put_masks(std::string& out, const json& masks, const json& config, const std::string& cpu) {
  const auto n_requests = static_cast<long long>(num(config["mask_requests"]));
  put(out, "\n1. Token mask per decode step, cold and warm cache (CPU: %s)\n", cpu.c_str());
  put(out,
      "   targets: mean <= %.1f ms, p99 <= %.0f ms; per (vocab, schema) one TokenGrammar, "
      "%lld simulated requests (1 cold, %lld warm), at most %lld tokens each\n",
      num(masks["target_mean_ms"]), num(masks["target_p99_ms"]), n_requests, n_requests - 1,
      static_cast<long long>(num(config["mask_max_tokens"])));
  out +=
      "   apply ms: the mean time to copy a logits row and mask it, the engine's further work per "
      "request and step\n";
  for (const json& v : masks["vocabs"]) {
    put(out, "   %s: %lld tokens, %lld trie nodes (trie built in %.1f ms)\n",
        std::filesystem::path(str(v["path"])).filename().c_str(),
        static_cast<long long>(num(v["tokens"])), static_cast<long long>(num(v["trie_nodes"])),
        num(v["trie_build_ms"]));
  }
  put(out,
      "| vocab | schema | requests | steps | mean ms | p50 ms | p99 ms | max ms | computed | "
      "hits | final | target | apply ms "
      "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const json& r : masks["rows"]) {
    put_mask_line(out, str(r["vocab"]), str(r["schema"]), "cold", r["cold"]);
    if (num(r["warm"]["requests"]) > 0) put_mask_line(out, "", "", "warm", r["warm"]);
  }
}

void put_compile(std::string& out, const json& c, const std::string& cpu) {
  put(out, "\n2. Schema compile time, json_schema_to_gbnf + parse_gbnf (CPU: %s)\n", cpu.c_str());
  const long long n_own = static_cast<long long>(c["own"].size());
  const std::string suite = str(c["suite_dir"]);
  put(out, "   %lld schemas (%lld own%s%s): %lld compiled, %lld refused (not timed)\n",
      static_cast<long long>(num(c["schemas"])), n_own, suite.empty() ? "" : " + suite ",
      suite.c_str(), static_cast<long long>(num(c["compiled"])),
      static_cast<long long>(num(c["refused"])));
  put(out, "   compiled: median %.3f ms, p90 %.3f ms, worst %.3f ms (%s)\n", num(c["median_ms"]),
      num(c["p90_ms"]), num(c["worst_ms"]), str(c["worst_schema"]).c_str());
  out += "   own:";
  for (const json& t : c["own"]) put(out, " %s %.3f ms;", str(t["schema"]).c_str(), num(t["ms"]));
  out += "\n";
  if (!c["refusals"].empty()) out += "   most common refusals:\n";
  for (const json& r : c["refusals"]) {
    put(out, "   %5lld  %s\n", static_cast<long long>(num(r["count"])), str(r["reason"]).c_str());
  }
}

void put_throughput(std::string& out, const json& d, const json& config, const std::string& cpu,
                    const std::string& model) {
  put(out,
      "\n3. Decode throughput, person schema (jump-forward off) vs free text, greedy (CPU: %s)\n",
      cpu.c_str());
  put(out, "   model %s, %lld threads, vocab %lld; constrained max_tokens %lld, %lld cycles\n",
      model.c_str(), static_cast<long long>(num(d["threads"])),
      static_cast<long long>(num(d["vocab"])), static_cast<long long>(num(config["max_tokens"])),
      static_cast<long long>(num(config["repeats"])));
  put(out,
      "   tokens per request: constrained %s, with jump-forward %s (free text generates as many); "
      "%lld of %zu completed by the grammar, %lld of those valid JSON\n",
      d["lengths"].dump().c_str(), d["jump_forward_lengths"].dump().c_str(),
      static_cast<long long>(num(d["complete"])), d["lengths"].size(),
      static_cast<long long>(num(d["valid_json"])));
  std::string sample = str(d["sample_output"]);
  if (sample.size() > 240) sample = sample.substr(0, 240) + "...";
  out += "   request 1 wrote: " + sample + "\n";
  put(out,
      "| B | free tok/s | constrained tok/s | constrained / free (median of pairs) |\n"
      "|---|---|---|---|\n");
  for (const json& b : d["batches"]) {
    put(out, "| %lld | %.2f ± %.2f | %.2f ± %.2f | %.3f |\n",
        static_cast<long long>(num(b["batch_size"])), num(b["free"]["tokens_per_s"]),
        num(b["free"]["tokens_per_s_stddev"]), num(b["constrained"]["tokens_per_s"]),
        num(b["constrained"]["tokens_per_s_stddev"]), num(b["constrained_speed_ratio"]));
  }
}

void put_jump_forward(std::string& out, const json& d, const std::string& cpu) {
  put(out, "\n4. Jump-forward on vs off, person schema (per run of B requests; CPU: %s)\n",
      cpu.c_str());
  put(out,
      "| B | mode | ms/request | ms/token | engine steps | tokens | forced | tok/s |\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (const json& b : d["batches"]) {
    const auto batch = static_cast<long long>(num(b["batch_size"]));
    const std::pair<const char*, const char*> modes[] = {
        {"free", "free text, constrained lengths"},
        {"constrained", "constrained, JF off"},
        {"jump_forward", "constrained, JF on"},
        {"free_jump_lengths", "free text, JF lengths"}};
    for (const auto& [key, label] : modes) {
      const json& m = b[key];
      const double tokens_per_request = num(m["generated_tokens"]) / static_cast<double>(batch);
      put(out, "| %lld | %s | %.1f ± %.1f | %.2f | %.0f | %.0f | %.0f | %.2f |\n", batch, label,
          num(m["request_ms"]), num(m["request_ms_stddev"]),
          tokens_per_request > 0 ? num(m["request_ms"]) / tokens_per_request : 0.0,
          num(m["engine_steps"]), num(m["generated_tokens"]), num(m["forced_tokens"]),
          num(m["tokens_per_s"]));
    }
  }
  for (const json& b : d["batches"]) {
    put(out,
        "   B=%lld, request time (medians of cycles): JF on / JF off %.3f (outputs of different "
        "lengths), JF on / free text of the same lengths %.3f\n",
        static_cast<long long>(num(b["batch_size"])), num(b["jump_forward_time_ratio"]),
        num(b["jump_forward_free_ratio"]));
  }
}

}  // namespace
}  // namespace structured_report_detail

std::string structured_report(const nlohmann::json& record) {
  namespace d = structured_report_detail;
  const nlohmann::json& machine = record["machine"];
  const std::string cpu = d::str(machine["cpu"]);
  const nlohmann::json& results = record["results"];
  const nlohmann::json& config = record["config"];
  std::string out;
  d::put(out, "structured outputs on %s (%lld logical cores), commit %s\n", cpu.c_str(),
         static_cast<long long>(d::num(machine["logical_cores"])),
         d::str(record["commit"]).c_str());
  if (results.contains("masks")) d::put_masks(out, results["masks"], config, cpu);
  if (results.contains("compile")) d::put_compile(out, results["compile"], cpu);
  if (results.contains("decode")) {
    const std::string model = d::str(record["model"]["path"]);
    d::put_throughput(out, results["decode"], config, cpu, model);
    d::put_jump_forward(out, results["decode"], cpu);
  }
  for (const nlohmann::json& note : results["notes"]) out += "note: " + d::str(note) + "\n";
  return out;
}

}  // namespace trellis::bench
