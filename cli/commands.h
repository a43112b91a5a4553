// Subcommands of the `trellis` binary. Each registers itself on the app; its callback stores the
// process exit code in `exit_code` (0 on success, 1 on a user-facing error already printed).
#pragma once

#include <CLI/CLI.hpp>

namespace trellis::cli {

void add_model_commands(CLI::App& app, int& exit_code);
// `model imatrix`, under the `model` command.
void add_imatrix_command(CLI::App& model, int& exit_code);
void add_tokenize_commands(CLI::App& app, int& exit_code);
void add_demo_command(CLI::App& app, int& exit_code);
void add_generate_command(CLI::App& app, int& exit_code);
// `trellis embed`: embeddings or rerank scores from an encoder file.
void add_embed_command(CLI::App& app, int& exit_code);
void add_logits_command(CLI::App& app, int& exit_code);
void add_bench_commands(CLI::App& app, int& exit_code);
void add_serve_command(CLI::App& app, int& exit_code);
// `trellis route`: the cache-aware router over replicas.
void add_route_command(CLI::App& app, int& exit_code);
// `trellis bench phi`, registered under the `bench` subcommand.
void add_bench_phi_command(CLI::App& bench, int& exit_code);
// `trellis bench workload NAME`.
void add_bench_workload_command(CLI::App& bench, int& exit_code);
// `trellis bench server`: concurrent chat clients over HTTP, cache off vs on.
void add_bench_server_command(CLI::App& bench, int& exit_code);
// `trellis bench block-size`.
void add_bench_block_size_command(CLI::App& bench, int& exit_code);
// `trellis bench router`: chat sessions through the router under each policy.
void add_bench_router_command(CLI::App& bench, int& exit_code);
// `trellis bench restart`: TTFT cold, hot and warm from the disk tier after a restart.
void add_bench_restart_command(CLI::App& bench, int& exit_code);
// `trellis bench structured`: token masks, schema compiles, constrained decoding, jump-forward.
void add_bench_structured_command(CLI::App& bench, int& exit_code);
// `trellis bench spec`: decode tokens/s with speculative decoding on and off.
void add_bench_spec_command(CLI::App& bench, int& exit_code);
// `trellis bench embed`: embedding / rerank throughput of servers side by side.
void add_bench_embed_command(CLI::App& bench, int& exit_code);
// `trellis bench kv-types`: logit error, greedy agreement and room of each KV type.
void add_bench_kv_types_command(CLI::App& bench, int& exit_code);

}  // namespace trellis::cli
