#!/usr/bin/env bash
# README command 1: install what is missing, build Release, run the main job on the default model.
# Usage: scripts/run.sh [MODEL.gguf]   (a real model instead of the built-in default one)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
make run ${1:+MODEL="$1"}
