#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need, when they are missing.
# Safe to run repeatedly: it calls apt-get only if something is absent.
set -euo pipefail

packages=(
  build-essential make cmake git pkg-config ca-certificates curl nodejs
  libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev nlohmann-json3-dev libcli11-dev
  clang libclang-rt-dev
  g++-aarch64-linux-gnu qemu-user-static
  gnuplot-nox  # PNG plots of `trellis bench` (optional: without it the benches only warn)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
