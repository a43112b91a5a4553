#!/usr/bin/env bash
# README command 1: install what is missing, build Release, run the main job on the default model
# and a short benchmark of the prefix cache (its plot lands in bench-results/readme-phi/).
# Usage: scripts/run.sh [MODEL.gguf]            (a real model instead of the built-in default one)
#        scripts/run.sh serve [SERVE FLAGS...]   (the OpenAI-compatible server instead; once the
#                                                model is loaded it prints the chat page's
#                                                address, http://127.0.0.1:8080/ by default)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [ "${1:-}" = serve ]; then
  shift
  make build
  exec build/cli/trellis serve "$@"
fi
make run ${1:+MODEL="$1"}
