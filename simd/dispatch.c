/*
 * dispatch.c — CPU feature detection and the per-ISA kernel tables.
 *
 * Levels: scalar → avx2 (AVX2+FMA+F16C) → avx512 (F/BW/VL/DQ) →
 * avx512bf16 (+AVX512_BF16) on x86-64; scalar → neon on aarch64. The tables
 * are const data; a context picks one (possibly lowered by FLUX_ISA or
 * forced to f32 math by FLUX_PRECISION=f32) and keeps a pointer to it.
 */
#include "dispatch.h"

#include <stdio.h>
#include <string.h>

static const char *const isa_names[FX_ISA_COUNT] = {"scalar", "avx2", "avx512", "avx512bf16",
                                                    "neon"};

const char *fx_isa_name(fx_isa isa) {
    return (unsigned)isa < FX_ISA_COUNT ? isa_names[isa] : "unknown";
}

int fx_isa_parse(const char *name) {
    for (int i = 0; i < FX_ISA_COUNT; i++)
        if (!strcmp(name, isa_names[i])) return i;
    return -1;
}

#if defined(__x86_64__) || defined(_M_X64)
static int cpu_has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
static int cpu_has_avx512(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
static int cpu_has_avx512bf16(void) {
    /* CPUID.(EAX=7,ECX=1):EAX bit 5; the OS-state check is covered by avx512f. */
    unsigned a = 7, b = 0, c = 1, d = 0;
    __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    return cpu_has_avx512() && ((a >> 5) & 1u);
}
#endif

fx_isa fx_isa_detect(void) {
#if defined(__x86_64__) || defined(_M_X64)
    if (cpu_has_avx512bf16()) return FX_ISA_AVX512BF16;
    if (cpu_has_avx512()) return FX_ISA_AVX512;
    if (cpu_has_avx2()) return FX_ISA_AVX2;
    return FX_ISA_SCALAR;
#elif defined(__aarch64__)
    return FX_ISA_NEON;
#else
    return FX_ISA_SCALAR;
#endif
}

/* Tables: each kernel family publishes FX_<AREA>_TABLE_<ISA> in its header;
 * an unpublished entry is NULL and the family's scalar table is used. */
#include "attention.h"
#include "gemm.h"
#include "rowops.h"

#ifndef FX_GEMM_TABLE_SCALAR
#define FX_GEMM_TABLE_SCALAR NULL
#endif
#ifndef FX_GEMM_TABLE_AVX2
#define FX_GEMM_TABLE_AVX2 NULL
#endif
#ifndef FX_GEMM_TABLE_AVX512
#define FX_GEMM_TABLE_AVX512 NULL
#endif
#ifndef FX_GEMM_TABLE_AVX512BF16
#define FX_GEMM_TABLE_AVX512BF16 NULL
#endif
#ifndef FX_GEMM_TABLE_NEON
#define FX_GEMM_TABLE_NEON NULL
#endif
#ifndef FX_ATTN_TABLE_SCALAR
#define FX_ATTN_TABLE_SCALAR NULL
#endif
#ifndef FX_ATTN_TABLE_AVX2
#define FX_ATTN_TABLE_AVX2 NULL
#endif
#ifndef FX_ATTN_TABLE_AVX512
#define FX_ATTN_TABLE_AVX512 NULL
#endif
#ifndef FX_ATTN_TABLE_AVX512BF16
#define FX_ATTN_TABLE_AVX512BF16 NULL
#endif
#ifndef FX_ATTN_TABLE_NEON
#define FX_ATTN_TABLE_NEON NULL
#endif
#ifndef FX_ROW_TABLE_SCALAR
#define FX_ROW_TABLE_SCALAR NULL
#endif
#ifndef FX_ROW_TABLE_AVX2
#define FX_ROW_TABLE_AVX2 NULL
#endif
#ifndef FX_ROW_TABLE_AVX512
#define FX_ROW_TABLE_AVX512 NULL
#endif
#ifndef FX_ROW_TABLE_NEON
#define FX_ROW_TABLE_NEON NULL
#endif

/* [isa][force_f32]: the f32-forced avx512bf16 table uses the avx512 GEMM and
 * attention (bf16 weights widened to f32, FMA only). */
static const fx_kernels tables[FX_ISA_COUNT][2] = {
    [FX_ISA_SCALAR] = {
        {FX_ISA_SCALAR, 0, "scalar", FX_GEMM_TABLE_SCALAR, FX_ATTN_TABLE_SCALAR, FX_ROW_TABLE_SCALAR},
        {FX_ISA_SCALAR, 0, "scalar", FX_GEMM_TABLE_SCALAR, FX_ATTN_TABLE_SCALAR, FX_ROW_TABLE_SCALAR}},
    [FX_ISA_AVX2] = {
        {FX_ISA_AVX2, 0, "avx2", FX_GEMM_TABLE_AVX2, FX_ATTN_TABLE_AVX2, FX_ROW_TABLE_AVX2},
        {FX_ISA_AVX2, 0, "avx2", FX_GEMM_TABLE_AVX2, FX_ATTN_TABLE_AVX2, FX_ROW_TABLE_AVX2}},
    [FX_ISA_AVX512] = {
        {FX_ISA_AVX512, 0, "avx512", FX_GEMM_TABLE_AVX512, FX_ATTN_TABLE_AVX512, FX_ROW_TABLE_AVX512},
        {FX_ISA_AVX512, 0, "avx512", FX_GEMM_TABLE_AVX512, FX_ATTN_TABLE_AVX512, FX_ROW_TABLE_AVX512}},
    [FX_ISA_AVX512BF16] = {
        {FX_ISA_AVX512BF16, 1, "avx512bf16", FX_GEMM_TABLE_AVX512BF16, FX_ATTN_TABLE_AVX512BF16,
         FX_ROW_TABLE_AVX512},
        {FX_ISA_AVX512BF16, 0, "avx512bf16 (f32 math)", FX_GEMM_TABLE_AVX512, FX_ATTN_TABLE_AVX512,
         FX_ROW_TABLE_AVX512}},
    [FX_ISA_NEON] = {
        {FX_ISA_NEON, 0, "neon", FX_GEMM_TABLE_NEON, FX_ATTN_TABLE_NEON, FX_ROW_TABLE_NEON},
        {FX_ISA_NEON, 0, "neon", FX_GEMM_TABLE_NEON, FX_ATTN_TABLE_NEON, FX_ROW_TABLE_NEON}},
};

const fx_kernels *fx_kernels_get(fx_isa isa, int force_f32) {
    if ((unsigned)isa >= FX_ISA_COUNT) return NULL;
    fx_isa best = fx_isa_detect();
    if (isa != FX_ISA_SCALAR) {
        if (best == FX_ISA_NEON && isa != FX_ISA_NEON) return NULL;
        if (best != FX_ISA_NEON && (isa == FX_ISA_NEON || isa > best)) return NULL;
    }
    return &tables[isa][force_f32 ? 1 : 0];
}

fx_isa fx_kernels_isa(const fx_kernels *k) { return k->isa; }

int fx_kernels_uses_bf16_dot(const fx_kernels *k) { return k->bf16_dot; }

size_t fx_kernels_describe(const fx_kernels *k, char *buf, size_t size) {
    fx_isa best = fx_isa_detect();
    return (size_t)snprintf(buf, size,
                            "cpu:      best supported ISA %s\n"
                            "kernels:  %s (bf16 dot products: %s)\n",
                            fx_isa_name(best), k->name, k->bf16_dot ? "yes" : "no");
}

void fx_kctx_init(fx_kctx *kc, const fx_kernels *k, int threads, fx_scratch *s) {
    kc->k = k;
    kc->threads = threads > 0 ? threads : 1;
    kc->scratch = s;
}
