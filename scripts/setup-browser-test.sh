#!/usr/bin/env bash
# Installs `puppeteer-core` (a driver for an installed Chromium; it downloads no browser) that
# tests/browser/chat_page_check.mjs drives the chat page with.
# Usage: scripts/setup-browser-test.sh [DIR]   (default: build/node)
# The package lands in DIR/node_modules/puppeteer-core. Safe to run repeatedly: it does nothing
# when the package is already there. Without npm or without Chromium, or when the install fails
# (no network), it says so and exits 0: the browser test then skips with a message naming this
# script (scripts/install-deps.sh installs chromium, nodejs and npm).
set -euo pipefail

dir="${1:-build/node}"
if [ -f "$dir/node_modules/puppeteer-core/package.json" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "setup-browser-test: npm not found; skipping (scripts/install-deps.sh installs it)" >&2
  exit 0
fi
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  echo "setup-browser-test: chromium not found; skipping (scripts/install-deps.sh installs it)" >&2
  exit 0
fi
mkdir -p "$dir"
echo "setup-browser-test: installing puppeteer-core into $dir"
# PUPPETEER_SKIP_DOWNLOAD: use the system's Chromium, never fetch one.
if ! PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix "$dir" puppeteer-core@24 --no-audit --no-fund \
    --loglevel=error; then
  echo "setup-browser-test: npm install failed; the chat page's browser test will be skipped" >&2
fi
