#!/usr/bin/env bash
# run_x86emu.sh — the x86 kernel tests for every x86 ISA (avx2, avx512,
# avx512bf16, amx) on any host, through emulation:
#   AVX-512 / AVX512-BF16 intrinsics  SIMDe (libsimde-dev) + our shim
#                                     (simd/common/x86_simde.h)
#   AMX tiles                         our plain-C tile emulator
#                                     (simd/common/amx_emu.c)
# The library is built with make X86EMU=1 (the same kernel sources, no ISA
# flags, FX_X86_EMULATED), where the CPU detection reports an emulated
# Sapphire Rapids-like CPU so every x86 table runs. Two stages, one closing
# line with their sum:
#   kernels   test_main + tests/kernels/test_kernel_*.c + libflux.a, 2 threads
#   end to end  the golden text-to-image case in default precision (the amx
#             table: tile GEMMs reading the weights in place, tile attention, tile
#             convs) and batch = single runs, through the emulated flux CLI
#             and library (X86EMU_PIPELINE=0 skips this stage)
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
# A fixed plain variant, whatever the calling make's variables: make
# SANITIZE=1 test passes SANITIZE=1 down in MAKEFLAGS, and the kernel-test
# link below is a plain one (the sanitized suite covers the native build).
VARIANT="SANITIZE=0 PROFILE=0 NATIVE=0"
KERNEL_OBJS="$BUILD/obj/tests/test_main.o $(for f in tests/kernels/test_kernel_*.c; do echo "$BUILD/obj/${f%.c}.o"; done)"
start=$(date +%s)
if ! make -s -j2 CC="$CC" $VARIANT X86EMU=1 BUILD="$BUILD" OUT="$BUILD" "$BUILD/libflux.a" $KERNEL_OBJS >"$BUILD.log" 2>&1 ||
   ! "$CC" -fopenmp $KERNEL_OBJS "$BUILD/libflux.a" -lm -lpthread -o "$BUILD/flux-kernel-tests" >>"$BUILD.log" 2>&1; then
    cat "$BUILD.log"
    echo "x86emu: build failed (log: $BUILD.log)"
    echo "0 passed, 1 failed, 0 skipped"; exit 1
fi
built=$(date +%s)
echo "x86emu: build $((built - start)) s; running the kernel tests on emulated AVX-512 and AMX"
log=$(mktemp)
OMP_NUM_THREADS=2 "$BUILD/flux-kernel-tests" ${X86EMU_TESTS:-kernel_} | tee "$log"
counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
if [ "${X86EMU_PIPELINE:-1}" != 0 ] && [ -z "${X86EMU_TESTS:-}" ]; then
    echo "x86emu: end to end (golden case, default precision, amx table)"
    if make -s -j2 CC="$CC" $VARIANT X86EMU=1 BUILD="$BUILD" OUT="$BUILD" "$BUILD/flux" "$BUILD/flux-tests" tools \
        >>"$BUILD.log" 2>&1; then
        FLUX_BIN=$PWD/$BUILD/flux FLUX_TOOLS=$PWD/$BUILD/tools OMP_NUM_THREADS=2 \
            "$BUILD/flux-tests" pipeline_golden_t2i_default pipeline_batch_equals_single_runs | tee "$log"
        more=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    else
        tail -20 "$BUILD.log"
        more="0 passed, 1 failed, 0 skipped"
    fi
    counts="$counts|$more"
fi
rm -f "$log"
echo "x86emu: tests took $(( $(date +%s) - built )) s"
# one closing line: the sum of the stages
echo "$counts" | tr '|' '\n' | awk -F'[ ,]+' '{p+=$1; f+=$3; s+=$5} END {printf "%d passed, %d failed, %d skipped\n", p, f, s; exit f > 0}'
