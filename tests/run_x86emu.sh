#!/usr/bin/env bash
# run_x86emu.sh — the x86 kernel tests for every x86 ISA (avx2, avx512,
# avx512bf16, amx) on any host, through emulation:
#   AVX-512 / AVX512-BF16 intrinsics  SIMDe (libsimde-dev) + our shim
#                                     (simd/common/x86_simde.h)
#   AMX tiles                         our plain-C tile emulator
#                                     (simd/common/amx_emu.c)
# The library is built with make X86EMU=1 (the same kernel sources, no ISA
# flags, FX_X86_EMULATED), where the CPU detection reports an emulated
# Sapphire Rapids-like CPU so every x86 table runs. A kernel-only test
# binary is linked from test_main + tests/kernels/test_kernel_*.c + libflux.a
# and run with 2 threads; tests keep their shapes small under emulation
# (tests/kernels/kernel_isas.h: KT_SMALL).
# Without SIMDe: one skipped test, or one failure under CI=true.
set -u
cd "$(dirname "$0")/.."
CC=${CC:-cc}
if ! printf '#include <simde/x86/avx512.h>\n' | "$CC" -E -x c - >/dev/null 2>&1; then
    echo "x86emu: SIMDe headers not found (apt-get install libsimde-dev, or tools/install_deps.sh --test)"
    if [ "${CI:-}" = "true" ]; then echo "0 passed, 1 failed, 0 skipped"; exit 1; fi
    echo "0 passed, 0 failed, 1 skipped"; exit 0
fi
BUILD=build/x86emu
mkdir -p "$BUILD"
KERNEL_OBJS="$BUILD/obj/tests/test_main.o $(for f in tests/kernels/test_kernel_*.c; do echo "$BUILD/obj/${f%.c}.o"; done)"
start=$(date +%s)
if ! make -s -j2 CC="$CC" X86EMU=1 BUILD="$BUILD" OUT="$BUILD" "$BUILD/libflux.a" $KERNEL_OBJS >"$BUILD.log" 2>&1 ||
   ! "$CC" -fopenmp $KERNEL_OBJS "$BUILD/libflux.a" -lm -lpthread -o "$BUILD/flux-kernel-tests" >>"$BUILD.log" 2>&1; then
    cat "$BUILD.log"
    echo "x86emu: build failed (log: $BUILD.log)"
    echo "0 passed, 1 failed, 0 skipped"; exit 1
fi
built=$(date +%s)
echo "x86emu: build $((built - start)) s; running the kernel tests on emulated AVX-512 and AMX"
OMP_NUM_THREADS=2 "$BUILD/flux-kernel-tests" ${X86EMU_TESTS:-kernel_}
rc=$?
echo "x86emu: tests took $(( $(date +%s) - built )) s"
exit $rc
