#!/usr/bin/env bash
# README command 1: install what is missing, build Release, run the main job on the default model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
make run
