#!/usr/bin/env bash
# Installs the Debian packages Trellis needs, when they are missing.
# Usage: scripts/install-deps.sh [run|deb|all]
#   run  what building and running the `trellis` binary needs (scripts/run.sh: the first run)
#   deb  that, plus what building its Debian package needs (`make deb`)
#   all  that, plus what the tests, sanitizers, cross builds, fuzzing and plots need (the default;
#        scripts/test.sh)
# Safe to run repeatedly: it calls apt-get only if something is absent.
set -euo pipefail

set_name="${1:-all}"
case "$set_name" in
  run | deb | all) ;;
  *)
    echo "usage: $0 [run|deb|all]" >&2
    exit 2
    ;;
esac

# Building and running `trellis` (CMake finds these; MPI is optional and comes with `all`: its
# development package pulls in a Fortran compiler, a minute more on a fresh machine).
run_packages=(
  g++ make cmake pkg-config
  libpcre2-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev
  libboost1.81-dev  # Boost.Beast and Asio: the HTTP server
)
# Only the tests and the development tools need these.
test_packages=(
  build-essential ca-certificates
  git  # the source commit recorded in benchmark results
  libgtest-dev libgmock-dev libbenchmark-dev
  openmpi-bin libopenmpi-dev  # `--pipeline`: a model's layers split over MPI ranks
  curl nodejs npm  # the server's tests drive it with curl and the `openai` npm client
  json-schema-test-suite  # structured outputs: the suite's schemas, validated by ajv (npm)
  chromium  # the chat page's browser test (headless, driven by puppeteer-core)
  clang libclang-rt-dev  # fuzzing (libFuzzer)
  g++-aarch64-linux-gnu qemu-user-static  # the NEON kernels, cross-built and run under qemu
  gnuplot-nox  # PNG plots of `trellis bench` (optional: without it the benches only warn)
)
# The Debian package: dpkg-shlibdeps (and the `file` it runs) find the libraries it depends on.
deb_packages=(dpkg-dev file)
packages=("${run_packages[@]}")
[ "$set_name" = all ] && packages+=("${test_packages[@]}" "${deb_packages[@]}")
[ "$set_name" = deb ] && packages+=("${deb_packages[@]}")

# Tools that may come from elsewhere (a NodeSource nodejs bundles npm and conflicts with Debian's
# npm package): present when their command is.
declare -A commands=([nodejs]=node [npm]=npm [curl]=curl [chromium]=chromium [git]=git)

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
# dpkg's unsafe I/O skips an fsync per unpacked file: Boost's 14,000 headers alone then unpack in
# seconds instead of minutes. The cost: a machine that crashes during the install may keep empty
# files of the packages being installed (debootstrap and Debian's container images make the same
# trade); reinstall them if that happens.
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
  -o Dpkg::Options::=--force-unsafe-io "${missing[@]}"
