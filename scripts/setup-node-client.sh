#!/usr/bin/env bash
# Installs the official `openai` npm client (v4) that tests/node/openai_client_check.mjs drives
# against `trellis serve`. Usage: scripts/setup-node-client.sh [DIR]   (default: build/node)
# The package lands in DIR/node_modules/openai. Safe to run repeatedly: it does nothing when the
# client is already there. Without npm, or when the install fails (no network), it says so and
# exits 0: the test that needs the client then skips with a message naming this script.
set -euo pipefail

dir="${1:-build/node}"
if [ -f "$dir/node_modules/openai/package.json" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "setup-node-client: npm not found; skipping (scripts/install-deps.sh installs it)" >&2
  exit 0
fi
mkdir -p "$dir"
echo "setup-node-client: installing openai@4 into $dir"
if ! npm install --prefix "$dir" openai@4 --no-audit --no-fund --loglevel=error; then
  echo "setup-node-client: npm install failed; the openai client test will be skipped" >&2
fi
