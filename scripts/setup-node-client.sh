#!/usr/bin/env bash
# Installs the npm packages the node checks of the tests use into DIR/node_modules:
#   openai@4              the official client that tests/node/openai_client_check.mjs drives
#                         `trellis serve` with
#   ajv@8, ajv-formats@3  the independent JSON Schema validator of tests/node/ajv_validate.mjs,
#                         which checks the outputs of structured generation
#                         (json_schema_suite_test)
# Usage: scripts/setup-node-client.sh [DIR]   (default: build/node)
# Safe to run repeatedly: it installs only the packages that are not there yet (none, the second
# time). Without npm, or when the install fails (no network), it says so and exits 0: the tests
# that need a package then skip with a message naming this script.
set -euo pipefail

dir="${1:-build/node}"
# name -> what `npm install` gets: a package counts as present when its package.json is there.
declare -A specs=([openai]=openai@4 [ajv]=ajv@8 [ajv-formats]=ajv-formats@3)
missing=()
for name in openai ajv ajv-formats; do
  [ -f "$dir/node_modules/$name/package.json" ] || missing+=("${specs[$name]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v npm >/dev/null 2>&1; then
  echo "setup-node-client: npm not found; skipping (scripts/install-deps.sh installs it)" >&2
  exit 0
fi
mkdir -p "$dir"
echo "setup-node-client: installing ${missing[*]} into $dir"
if ! npm install --prefix "$dir" "${missing[@]}" --no-audit --no-fund --loglevel=error; then
  echo "setup-node-client: npm install failed; the tests that need them will be skipped" >&2
fi
