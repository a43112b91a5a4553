#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time.
# Usage: scripts/fuzz.sh [SECONDS]   (default 60). Skips with a message when clang is missing.
set -euo pipefail
seconds=${1:-60}
cd "$(dirname "$0")/.."
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found, skipping"
  exit 0
fi
build=build-fuzz
CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRELLIS_BUILD_FUZZ=ON \
  -DTRELLIS_BUILD_TESTS=OFF -DTRELLIS_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target gguf_reader_fuzz block_record_fuzz >/dev/null
# Seed corpus: the models the tests already use, when present, plus a generated tiny model.
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp fuzz/corpus/* "$corpus"/ 2>/dev/null || true
for f in ../shared/models/stories260K.gguf; do [ -f "$f" ] && cp "$f" "$corpus"/; done
"$build/fuzz/gguf_reader_fuzz" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
  -print_final_stats=1 "$corpus" 2>&1 | tail -n 12
# The disk tier's block records: a tenth of the time (a small, flat format).
record_corpus=$(mktemp -d)
trap 'rm -rf "$corpus" "$record_corpus"' EXIT
"$build/fuzz/block_record_fuzz" -max_total_time="$(( (seconds + 9) / 10 ))" -max_len=4096 \
  -rss_limit_mb=2048 -print_final_stats=1 "$record_corpus" 2>&1 | tail -n 12
