#!/usr/bin/env bash
# Installs the npm packages the node checks of the tests use into DIR/node_modules:
#   openai@4              the official client that tests/node/openai_client_check.mjs drives
#                         `trellis serve` with
#   ajv@8, ajv-formats@3  the independent JSON Schema validator of tests/node/ajv_validate.mjs,
#                         which checks the outputs of structured generation
#                         (json_schema_suite_test)
#   zod@3                 the schema library the clients below take their schemas from
#   ai@4, @ai-sdk/openai-compatible@0.2
#                         the Vercel AI SDK (v4 has maxSteps) and its provider for
#                         OpenAI-compatible servers (0.2 is the line built on ai 4's provider API)
#   @langchain/openai@0.6, @langchain/core@0.3
#                         LangChain's chat model and its core (the 1.x lines need node 22; these
#                         run on node 18 and 20, Debian 12's)
#   (zod and these four drive the server in tests/node/structured_clients_check.mjs, beside openai)
# Usage: scripts/setup-node-client.sh [DIR]   (default: build/node)
# Safe to run repeatedly: it installs only the packages that are not there yet (none, the second
# time). Without npm, or when the install fails (no network), it says so and exits 0: the tests
# that need a package then skip with a message naming this script.
set -euo pipefail

dir="${1:-build/node}"
# name -> what `npm install` gets.
declare -A specs=([openai]=openai@4 [ajv]=ajv@8 [ajv-formats]=ajv-formats@3 [zod]=zod@3
  [ai]=ai@4 [@ai-sdk/openai-compatible]=@ai-sdk/openai-compatible@0.2
  [@langchain/openai]=@langchain/openai@0.6 [@langchain/core]=@langchain/core@0.3)
missing=()
for name in openai ajv ajv-formats zod ai @ai-sdk/openai-compatible @langchain/openai \
    @langchain/core; do
  # Present: its package.json is there with a version of the pinned line (a zod 4 that another
  # package hoisted there does not count as zod@3).
  line="${specs[$name]##*@}"
  manifest="$dir/node_modules/$name/package.json"
  grep -Eq "\"version\": *\"${line//./\\.}\." "$manifest" 2>/dev/null || missing+=("${specs[$name]}")
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
