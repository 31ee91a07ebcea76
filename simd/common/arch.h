/*
 * arch.h — which kernel families this build compiles: FX_X86 for the
 * x86-64 files (*_avx2.c, *_avx512.c, *_avx512bf16.c, *_amx.c), FX_ARM for
 * the aarch64 ones (*_neon.c).
 *
 * The x86 emulation build (make X86EMU=1, FX_X86_EMULATED) compiles the
 * x86 files on any host against portable emulations of the intrinsics
 * (simd/common/x86.h) and of the AMX tiles (simd/common/amx.h), so the
 * AVX-512 and AMX code is tested on machines that cannot run it.
 */
#ifndef FX_ARCH_H
#define FX_ARCH_H

#if defined(FX_X86_EMULATED) || defined(__x86_64__) || defined(_M_X64)
#define FX_X86 1
#else
#define FX_X86 0
#endif

#if defined(__aarch64__) && !defined(FX_X86_EMULATED)
#define FX_ARM 1
#else
#define FX_ARM 0
#endif

/* x where this build compiles the x86 (FX_IF_X86) or aarch64 (FX_IF_ARM)
 * files, else NULL: a kernel table entry that does not exist here. */
#if FX_X86
#define FX_IF_X86(x) (x)
#else
#define FX_IF_X86(x) NULL
#endif
#if FX_ARM
#define FX_IF_ARM(x) (x)
#else
#define FX_IF_ARM(x) NULL
#endif

#endif
