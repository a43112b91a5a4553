#!/usr/bin/env bash
# Cross-builds the kernels (scalar + NEON), the quant and base sources they need, and the
# self-contained driver tests/arm/kernel_check.cpp for AArch64, then runs it under qemu: every
# NEON kernel against the scalar reference (matmul bit for bit, attention within a bound), and
# batch invariance.
#
# Needs the Debian packages g++-aarch64-linux-gnu and qemu-user-static (qemu-user also works).
# Without them it says so and exits 0 (skipped). Usage: scripts/arm-check.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."

CXX=${AARCH64_CXX:-aarch64-linux-gnu-g++}
QEMU=""
for candidate in qemu-aarch64-static qemu-aarch64; do
  if command -v "$candidate" >/dev/null 2>&1; then QEMU=$candidate; break; fi
done
if ! command -v "$CXX" >/dev/null 2>&1 || [[ -z "$QEMU" ]]; then
  echo "arm-check: SKIPPED: needs $CXX and qemu-aarch64(-static)" \
       "(Debian: apt-get install g++-aarch64-linux-gnu qemu-user-static)"
  exit 0
fi

OUT=${1:-build-arm}
mkdir -p "$OUT"
sources=(
  src/kernels/kernel_isa.cpp src/kernels/matmul.cpp src/kernels/activation_quant.cpp
  src/kernels/cpu_features.cpp
  src/kernels/generic/*.cpp src/kernels/arm/*.cpp
  src/quant/dequantize.cpp src/quant/quantize.cpp src/quant/quantize_k.cpp src/quant/mxfp4.cpp
  src/quant/quant_table.cpp
  src/kernels/attention.cpp src/kernels/kv_codec.cpp src/kv/kv_storage.cpp
  src/tensor/dtype.cpp src/base/thread_pool.cpp
  tests/arm/kernel_check.cpp
)
# -ffp-contract=off everywhere: the kernels' arithmetic contract forbids fused multiply-adds, and
# AArch64 compilers fuse by default.
flags=(-std=c++20 -O2 -static -pthread -Wall -Wextra -Wpedantic -Werror -ffp-contract=off -Isrc)
echo "arm-check: compiling with $CXX"
"$CXX" "${flags[@]}" "${sources[@]}" -o "$OUT/kernel_check"
echo "arm-check: running under $QEMU"
"$QEMU" "$OUT/kernel_check"
