/*
 * kernel_isas.h — helpers shared by the row-op / conversion / RoPE / conv2d
 * kernel tests: the list of ISAs this CPU runs, a kernel context per
 * (ISA, threads), and element-wise comparisons.
 *
 * An ISA whose fx_kernels_get() returns NULL is "not this CPU" (or not
 * compiled for this architecture), not a skip; each test prints the ISAs it
 * ran so the log shows what was covered.
 */
#ifndef FX_TEST_KERNEL_ISAS_H
#define FX_TEST_KERNEL_ISAS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simd/kernels.h"
#include "tests/test.h"

/* Under qemu (aarch64 cross build) everything is ~1000x slower. */
#if defined(__aarch64__)
#define KT_SMALL 1
#else
#define KT_SMALL 0
#endif

/* The emulation build (X86EMU) must run every x86 level: a level lost to
 * the AMX self-test (a broken tile kernel) would otherwise just drop out
 * of the lists below. Elsewhere a missing level is "not this CPU". */
static inline void kt_check_levels(void) {
#if defined(FX_X86_EMULATED)
    for (int i = FX_ISA_AVX2; i <= FX_ISA_AMX; i++) {
        char why[512];
        CHECK_MSG(fx_isa_check((fx_isa)i, why, sizeof why), "emulated %s does not run: %s", fx_isa_name((fx_isa)i),
                  why);
    }
#endif
}

typedef struct kt_isas {
    int n;
    const fx_kernels *k[2 * FX_ISA_COUNT];
} kt_isas;

/* Every table this CPU runs, and with f32_variants also the f32-forced
 * table where it differs (bf16 dot products off: matters for fx_linear
 * users such as conv2d). Prints "    <test>: isas scalar avx2 ...". */
static inline kt_isas kt_isas_list(const char *test, int f32_variants) {
    kt_isas l = {0};
    kt_check_levels();
    char line[256];
    int len = snprintf(line, sizeof line, "    %s: isas", test);
    for (int i = 0; i < FX_ISA_COUNT; i++)
        for (int f = 0; f < 1 + (f32_variants != 0); f++) {
            const fx_kernels *k = fx_kernels_get((fx_isa)i, f);
            if (!k) continue;
            if (f && fx_kernels_uses_bf16_dot(k) == fx_kernels_uses_bf16_dot(fx_kernels_get((fx_isa)i, 0)))
                continue; /* same math as the default table */
            l.k[l.n++] = k;
            if (len < (int)sizeof line)
                len += snprintf(line + len, sizeof line - (size_t)len, " %s%s", fx_isa_name((fx_isa)i),
                                f ? "(f32)" : "");
        }
    printf("%s\n", line);
    fflush(stdout);
    return l;
}

static inline const char *kt_name(const fx_kernels *k) { return fx_isa_name(fx_kernels_isa(k)); }

/* A context with its own scratch (free with kt_ctx_free). */
static inline fx_kctx kt_ctx(const fx_kernels *k, int threads) {
    fx_kctx kc;
    fx_kctx_init(&kc, k, threads, fx_scratch_new(threads));
    return kc;
}
static inline void kt_ctx_free(fx_kctx *kc) { fx_scratch_free(kc->scratch); }

static inline const fx_kernels *kt_scalar(void) { return fx_kernels_get(FX_ISA_SCALAR, 0); }

static inline float *kt_alloc(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    if (!p) abort();
    return p;
}

/* max over i of |a − b| / (|b| + floor): a per-element relative error with
 * an absolute floor for values near 0. NaN mismatch = inf. */
static inline double kt_rel_elem(const float *a, const float *b, size_t n, double floor) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) {
            if (isnan(a[i]) != isnan(b[i])) return INFINITY;
            continue;
        }
        if (a[i] == b[i]) continue;
        double d = fabs((double)a[i] - b[i]) / (fabs((double)b[i]) + floor);
        if (d > m) m = d;
    }
    return m;
}

/* Same with a double reference. */
static inline double kt_rel_elem_d(const float *a, const double *b, size_t n, double floor) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (fabs(b[i]) + floor);
        if (d > m || d != d) m = d;
    }
    return m;
}

/* Index of the first bitwise difference, or -1. */
static inline long kt_bitdiff(const void *a, const void *b, size_t n, size_t elem) {
    const unsigned char *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (memcmp(x + i * elem, y + i * elem, elem)) return (long)i;
    return -1;
}

#endif
