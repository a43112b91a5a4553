#!/usr/bin/env bash
# README command 1: install what building and running needs (not the test tools), build the
# `trellis` binary alone (Release), run the main job on the default model and a short benchmark of
# the prefix cache. scripts/test.sh installs and builds everything.
# Usage: scripts/run.sh [MODEL.gguf]            (a real model instead of the built-in default one)
#        scripts/run.sh serve [SERVE FLAGS...]   (the OpenAI-compatible server instead; once the
#                                                model is loaded it prints the chat page's
#                                                address, http://127.0.0.1:8080/ by default)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
elapsed() { echo "$(($(date +%s) - start))s"; }

scripts/install-deps.sh run
echo "== packages ready ($(elapsed) since start); building build/cli/trellis"
make --no-print-directory cli
echo "== build/cli/trellis built ($(elapsed) since start)"
# The pipeline over several processes needs MPI at build time; the first run leaves it out.
if ! command -v mpicxx >/dev/null 2>&1; then
  echo "note: built without MPI, so \`--pipeline\` is off; to get it: install openmpi-bin and" \
    "libopenmpi-dev (scripts/test.sh does), then run this again"
fi

if [ "${1:-}" = serve ]; then
  shift
  exec build/cli/trellis serve "$@"
fi
make --no-print-directory demo ${1:+MODEL="$1"}
echo "== done ($(elapsed) since start)"
