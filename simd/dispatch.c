/*
 * dispatch.c — CPU feature detection and the per-ISA kernel tables.
 *
 * Levels: scalar → avx2 (AVX2+FMA+F16C) → avx512 (F/BW/VL/DQ) →
 * avx512bf16 (+AVX512_BF16) on x86-64; scalar → neon on aarch64. The tables
 * are const data; a context picks one (possibly lowered by FLUX_ISA or
 * forced to f32 math by FLUX_PRECISION=f32) and keeps a pointer to it.
 */
#include "simd/common/table.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

/* ---- CPU features -------------------------------------------------------- */

typedef struct cpu_features {
    int avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512dq, avx512bf16, avx512vnni, avxvnni;
    int os_avx, os_avx512; /* the OS saves ymm / zmm state (XCR0) */
    int neon;
} cpu_features;

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>

static cpu_features cpu_detect(void) {
    cpu_features f = {0};
    unsigned a, b, c, d, max = __get_cpuid_max(0, NULL);
    if (max < 1 || !__get_cpuid(1, &a, &b, &c, &d)) return f;
    f.fma = (c >> 12) & 1, f.f16c = (c >> 29) & 1;
    if ((c >> 27) & 1) { /* OSXSAVE: XCR0 says which register state the OS saves */
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        f.os_avx = (lo & 0x6) == 0x6;
        f.os_avx512 = f.os_avx && (lo & 0xe0) == 0xe0;
    }
    if (max >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f.avx2 = (b >> 5) & 1, f.avx512f = (b >> 16) & 1, f.avx512dq = (b >> 17) & 1;
        f.avx512bw = (b >> 30) & 1, f.avx512vl = (b >> 31) & 1, f.avx512vnni = (c >> 11) & 1;
        unsigned sub = a;
        if (sub >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            f.avxvnni = (a >> 4) & 1, f.avx512bf16 = (a >> 5) & 1;
        }
    }
    return f;
}
#elif defined(__aarch64__)
static cpu_features cpu_detect(void) {
    cpu_features f = {0};
    f.neon = 1; /* Advanced SIMD is mandatory on aarch64 */
    return f;
}
#else
static cpu_features cpu_detect(void) {
    cpu_features f = {0};
    return f;
}
#endif

/* Levels need the OS state too: AVX2 level = AVX2 + FMA + F16C with ymm
 * state; AVX-512 = F/BW/VL/DQ with zmm state; + AVX512_BF16. */
static fx_isa isa_from_features(const cpu_features *f) {
#if defined(__x86_64__) || defined(_M_X64)
    int avx2 = f->os_avx && f->avx2 && f->fma && f->f16c;
    int avx512 = avx2 && f->os_avx512 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq;
    if (avx512 && f->avx512bf16) return FX_ISA_AVX512BF16;
    if (avx512) return FX_ISA_AVX512;
    if (avx2) return FX_ISA_AVX2;
    return FX_ISA_SCALAR;
#elif defined(__aarch64__)
    return f->neon ? FX_ISA_NEON : FX_ISA_SCALAR;
#else
    (void)f;
    return FX_ISA_SCALAR;
#endif
}

fx_isa fx_isa_detect(void) {
    cpu_features f = cpu_detect();
    return isa_from_features(&f);
}

/* Tables: each kernel family publishes FX_<AREA>_TABLE_<ISA> in its header;
 * an unpublished entry is NULL and the family's scalar table is used. */
#include "simd/attention/attention.h"
#include "simd/gemm/gemm.h"
#include "simd/quant/quant.h"
#include "simd/rowops/rowops.h"

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
#ifndef FX_QUANT_TABLE_AVX2
#define FX_QUANT_TABLE_AVX2 NULL
#endif
#ifndef FX_QUANT_TABLE_AVX512
#define FX_QUANT_TABLE_AVX512 NULL
#endif
#ifndef FX_QUANT_TABLE_AVX512BF16
#define FX_QUANT_TABLE_AVX512BF16 NULL
#endif
#ifndef FX_QUANT_TABLE_NEON
#define FX_QUANT_TABLE_NEON NULL
#endif

/* [isa][force_f32]: the f32-forced avx512bf16 table uses the avx512 GEMM and
 * attention (bf16 weights widened to f32, FMA only). */
static const fx_kernels tables[FX_ISA_COUNT][2] = {
    [FX_ISA_SCALAR] = {
        {FX_ISA_SCALAR, 0, "scalar", FX_GEMM_TABLE_SCALAR, FX_ATTN_TABLE_SCALAR, FX_ROW_TABLE_SCALAR,
         FX_QUANT_TABLE_SCALAR},
        {FX_ISA_SCALAR, 0, "scalar", FX_GEMM_TABLE_SCALAR, FX_ATTN_TABLE_SCALAR, FX_ROW_TABLE_SCALAR,
         FX_QUANT_TABLE_SCALAR}},
    [FX_ISA_AVX2] = {
        {FX_ISA_AVX2, 0, "avx2", FX_GEMM_TABLE_AVX2, FX_ATTN_TABLE_AVX2, FX_ROW_TABLE_AVX2, FX_QUANT_TABLE_AVX2},
        {FX_ISA_AVX2, 0, "avx2", FX_GEMM_TABLE_AVX2, FX_ATTN_TABLE_AVX2, FX_ROW_TABLE_AVX2, FX_QUANT_TABLE_AVX2}},
    [FX_ISA_AVX512] = {
        {FX_ISA_AVX512, 0, "avx512", FX_GEMM_TABLE_AVX512, FX_ATTN_TABLE_AVX512, FX_ROW_TABLE_AVX512,
         FX_QUANT_TABLE_AVX512},
        {FX_ISA_AVX512, 0, "avx512", FX_GEMM_TABLE_AVX512, FX_ATTN_TABLE_AVX512, FX_ROW_TABLE_AVX512,
         FX_QUANT_TABLE_AVX512}},
    [FX_ISA_AVX512BF16] = {
        {FX_ISA_AVX512BF16, 1, "avx512bf16", FX_GEMM_TABLE_AVX512BF16, FX_ATTN_TABLE_AVX512BF16,
         FX_ROW_TABLE_AVX512, FX_QUANT_TABLE_AVX512BF16},
        {FX_ISA_AVX512BF16, 0, "avx512bf16 (f32 math)", FX_GEMM_TABLE_AVX512, FX_ATTN_TABLE_AVX512,
         FX_ROW_TABLE_AVX512, FX_QUANT_TABLE_AVX512BF16}},
    [FX_ISA_NEON] = {
        {FX_ISA_NEON, 0, "neon", FX_GEMM_TABLE_NEON, FX_ATTN_TABLE_NEON, FX_ROW_TABLE_NEON, FX_QUANT_TABLE_NEON},
        {FX_ISA_NEON, 0, "neon", FX_GEMM_TABLE_NEON, FX_ATTN_TABLE_NEON, FX_ROW_TABLE_NEON, FX_QUANT_TABLE_NEON}},
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

/* Append to buf[*len..size) like snprintf, tracking the total needed. */
static void put(char *buf, size_t size, size_t *len, const char *fmt, ...) FX_PRINTF(4, 5);
static void put(char *buf, size_t size, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*len < size ? buf + *len : NULL, *len < size ? size - *len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) *len += (size_t)n;
}

size_t fx_kernels_describe(const fx_kernels *k, char *buf, size_t size) {
    cpu_features f = cpu_detect();
    fx_isa best = isa_from_features(&f);
    size_t len = 0;
    if (size) buf[0] = 0;
#if defined(__x86_64__) || defined(_M_X64)
    const struct { const char *name; int on; } feat[] = {
        {"avx2", f.avx2},         {"fma", f.fma},           {"f16c", f.f16c},
        {"avx512f", f.avx512f},   {"avx512bw", f.avx512bw}, {"avx512vl", f.avx512vl},
        {"avx512dq", f.avx512dq}, {"avx512_bf16", f.avx512bf16}, {"avx512_vnni", f.avx512vnni},
        {"avx_vnni", f.avxvnni},
    };
    put(buf, size, &len, "cpu:      x86-64 with");
    for (size_t i = 0; i < sizeof feat / sizeof feat[0]; i++)
        if (feat[i].on) put(buf, size, &len, " %s", feat[i].name);
    put(buf, size, &len, "\n          absent:");
    int none = 1;
    for (size_t i = 0; i < sizeof feat / sizeof feat[0]; i++)
        if (!feat[i].on) put(buf, size, &len, " %s", feat[i].name), none = 0;
    put(buf, size, &len, "%s; OS saves %s state\n", none ? " none" : "",
        f.os_avx512 ? "ymm+zmm" : f.os_avx ? "ymm (no zmm)" : "no ymm");
#elif defined(__aarch64__)
    put(buf, size, &len, "cpu:      aarch64 with neon (Advanced SIMD)\n");
#else
    put(buf, size, &len, "cpu:      no SIMD level this build knows\n");
#endif
    put(buf, size, &len, "best ISA: %s\n", fx_isa_name(best));
    put(buf, size, &len, "kernels:  %s (bf16 dot products: %s)\n", k->name, k->bf16_dot ? "yes" : "no");
    if (k->isa != best) {
        const char *env = getenv("FLUX_ISA");
        if (env && !strcmp(env, fx_isa_name(k->isa)))
            put(buf, size, &len, "          lowered from %s by FLUX_ISA=%s\n", fx_isa_name(best), env);
        else
            put(buf, size, &len, "          lowered from %s by the isa option\n", fx_isa_name(best));
    }
    if (k->isa == FX_ISA_AVX512BF16 && !k->bf16_dot) {
        const char *env = getenv("FLUX_PRECISION");
        put(buf, size, &len, "          bf16 dot products off: %s\n",
            env && !strcmp(env, "f32") ? "FLUX_PRECISION=f32" : "precision option f32");
    }
    if (k->gemm) {
        char g[512];
        fx_gemm_describe(k->gemm, g, sizeof g);
        put(buf, size, &len, "%s", g);
    } else {
        put(buf, size, &len, "gemm:     scalar (no table for %s)\n", fx_isa_name(k->isa));
    }
    if (k->attn)
        put(buf, size, &len, "attention: %s (%d query rows x %d keys per tile)\n", k->attn->name,
            k->attn->qt, k->attn->kt);
    else
        put(buf, size, &len, "attention: scalar (no table for %s)\n", fx_isa_name(k->isa));
    put(buf, size, &len, "row ops:  %s\n", k->row ? k->row->name : "scalar (no table)");
    put(buf, size, &len, "quant:    %s block expansion\n", k->quant ? k->quant->name : "scalar");
    return len;
}

void fx_kctx_init(fx_kctx *kc, const fx_kernels *k, int threads, fx_scratch *s) {
    kc->k = k;
#ifdef _OPENMP
    kc->threads = threads > 0 ? threads : omp_get_max_threads();
#else
    kc->threads = threads > 0 ? threads : 1;
#endif
    kc->scratch = s;
    kc->int8 = 0;
}
