/*
 * x86.h — the x86 intrinsics for the per-ISA kernel files. Kernel files
 * include this instead of <immintrin.h>: the native build gets the
 * compiler's intrinsics unchanged (their ISA comes from the Makefile
 * pattern rules: *_avx2.c, *_avx512.c, ...), the emulation build
 * (FX_X86_EMULATED, make X86EMU=1) gets portable C implementations of the
 * same names, so every x86 kernel runs on any host (x86_simde.h).
 */
#ifndef FX_X86_H
#define FX_X86_H

#if defined(FX_X86_EMULATED)
#include "simd/common/x86_simde.h"
#else
#include <immintrin.h>
#endif

#endif
