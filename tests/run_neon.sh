#!/usr/bin/env bash
# run_neon.sh — cross-build the kernel tests for aarch64 (NEON) with
# gcc-aarch64-linux-gnu and run them under qemu-aarch64-static.
# Without the tools: reports one skipped test, or one failure under CI=true.
set -u
cd "$(dirname "$0")/.."
CROSS=${CROSS_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64-static}
if ! command -v "$CROSS" >/dev/null || ! command -v "$QEMU" >/dev/null; then
    echo "neon: $CROSS or $QEMU not installed (apt-get install gcc-aarch64-linux-gnu qemu-user-static)"
    if [ "${CI:-}" = "true" ]; then echo "0 passed, 1 failed, 0 skipped"; exit 1; fi
    echo "0 passed, 0 failed, 1 skipped"; exit 0
fi
BUILD=build/aarch64
if ! make -s CC="$CROSS" BUILD="$BUILD" OUT="$BUILD" LDFLAGS="-static -fopenmp" "$BUILD/flux-tests" >"$BUILD.log" 2>&1; then
    cat "$BUILD.log"
    echo "neon: cross build failed"
    echo "0 passed, 1 failed, 0 skipped"; exit 1
fi
# Kernel tests only: the emulator is ~1000x slower than the host.
OMP_NUM_THREADS=2 "$QEMU" "$BUILD/flux-tests" ${NEON_TESTS:-kernel_}
