#!/usr/bin/env bash
# README command 2: install what is missing, build, run every test (also under ASan+UBSan), fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
make test
