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
cmake --build "$build" -j"$(nproc)" --target gguf_reader_fuzz block_record_fuzz grammar_fuzz >/dev/null
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
# The constraint compilers (GBNF, JSON schema, regex) and the automaton: a quarter of the time,
# seeded with a few inputs of each kind.
grammar_corpus=$(mktemp -d)
trap 'rm -rf "$corpus" "$record_corpus" "$grammar_corpus"' EXIT
printf '\000root ::= "a" [b-z]* ("x" | "y"){1,3}\000abz' > "$grammar_corpus/gbnf"
printf '\001{"type":"object","properties":{"a":{"type":"integer","minimum":3}},"required":["a"]}\000{"a":12}' \
  > "$grammar_corpus/schema"
printf '\002[A-Z]{2}-[0-9]+(x|yz)?\000AB-12' > "$grammar_corpus/regex"
"$build/fuzz/grammar_fuzz" -max_total_time="$(( (seconds + 3) / 4 ))" -max_len=4096 \
  -rss_limit_mb=2048 -print_final_stats=1 "$grammar_corpus" 2>&1 | tail -n 12
