#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need, when they are missing.
# Safe to run repeatedly: it calls apt-get only if something is absent.
set -euo pipefail

packages=(
  build-essential make cmake git pkg-config ca-certificates
  libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev
  libboost1.81-dev  # Boost.Beast and Asio: the HTTP server
  openmpi-bin libopenmpi-dev  # `--pipeline`: a model's layers split over MPI ranks
  curl nodejs npm  # the server's tests drive it with curl and the `openai` npm client
  chromium  # the chat page's browser test (headless, driven by puppeteer-core)
  clang libclang-rt-dev
  g++-aarch64-linux-gnu qemu-user-static
  gnuplot-nox  # PNG plots of `trellis bench` (optional: without it the benches only warn)
)

# Tools that may come from elsewhere (a NodeSource nodejs bundles npm and conflicts with Debian's
# npm package): present when their command is.
declare -A commands=([nodejs]=node [npm]=npm [curl]=curl [chromium]=chromium)

missing=()
for p in "${packages[@]}"; do
  if [ -n "${commands[$p]:-}" ] && command -v "${commands[$p]}" >/dev/null; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
