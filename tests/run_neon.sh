#!/usr/bin/env bash
# run_neon.sh — cross-build for aarch64 (NEON) with gcc-aarch64-linux-gnu and
# run the kernel tests under qemu-aarch64-static.
#
# Every library and test source is cross-compiled (so x86-only code anywhere
# in the tree breaks this run), then a kernel-only test binary is linked
# statically from test_main + tests/kernels/test_kernel_*.c + libflux.a: kernels need
# only libm and libgomp, so no aarch64 libpng is required.
# Without the tools: reports every kernel test as skipped (as failed under
# CI=true, where nothing may be skipped), so the closing line counts them.
set -u
cd "$(dirname "$0")/.."
CROSS=${CROSS_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64-static}
if ! command -v "$CROSS" >/dev/null || ! command -v "$QEMU" >/dev/null; then
    # the kernel tests the cross binary would run: TEST(...) in
    # tests/kernels/test_kernel_*.c, less those only the x86 emulation builds
    n=$(awk '/^#if/ { depth++; if ($0 ~ /FX_X86_EMULATED/ && !emu) emu = depth }
             /^#endif/ { if (emu == depth) emu = 0; depth-- }
             /^TEST\(/ && !emu { n++ } END { print n + 0 }' tests/kernels/test_kernel_*.c)
    echo "neon: $CROSS or $QEMU not installed (apt-get install gcc-aarch64-linux-gnu qemu-user-static): $n tests not run"
    if [ "${CI:-}" = "true" ]; then echo "0 passed, $n failed, 0 skipped"; exit 1; fi
    echo "0 passed, 0 failed, $n skipped"; exit 0
fi
BUILD=build/aarch64
mkdir -p "$BUILD"
TEST_OBJS=$(for f in tests/*.c tests/*/*.c; do [ "${f#tests/fuzz/}" = "$f" ] && [ "${f#tests/vulkan/}" = "$f" ] || continue; echo "$BUILD/obj/${f%.c}.o"; done)
KERNEL_OBJS="$BUILD/obj/tests/test_main.o $(for f in tests/kernels/test_kernel_*.c; do echo "$BUILD/obj/${f%.c}.o"; done)"
start=$(date +%s)
# A fixed plain variant, whatever the calling make's variables (make SANITIZE=1
# test passes SANITIZE=1 down in MAKEFLAGS; the static cross link has no
# sanitizer runtimes): objects of another variant are built afresh.
VARIANT="SANITIZE=0 PROFILE=0 NATIVE=0 OPENMP=1"
if [ "$(cat "$BUILD/variant" 2>/dev/null)" != "$VARIANT" ]; then rm -rf "$BUILD"; mkdir -p "$BUILD"; fi
echo "$VARIANT" >"$BUILD/variant"
if ! make -s -j2 $VARIANT CC="$CROSS" BUILD="$BUILD" OUT="$BUILD" "$BUILD/libflux.a" $TEST_OBJS >"$BUILD.log" 2>&1 ||
   ! "$CROSS" -static -fopenmp $KERNEL_OBJS "$BUILD/libflux.a" -lm -o "$BUILD/flux-kernel-tests" >>"$BUILD.log" 2>&1; then
    grep -v 'dlopen' "$BUILD.log"
    echo "neon: cross build failed (log: $BUILD.log)"
    echo "0 passed, 1 failed, 0 skipped"; exit 1
fi
built=$(date +%s)
echo "neon: cross build $((built - start)) s; running kernel tests under $QEMU (~1000x slower than native)"
# Kernel tests only (they use small shapes on aarch64, see tests/kernel_isas.h).
OMP_NUM_THREADS=2 "$QEMU" "$BUILD/flux-kernel-tests" ${NEON_TESTS:-kernel_}
rc=$?
echo "neon: tests took $(( $(date +%s) - built )) s under qemu"
exit $rc
