/*
 * amx_selftest.c — one small GEMM through the AMX table before it is
 * trusted (run once per process by dispatch.c when the CPU's facts say AMX
 * is usable).
 *
 * CPUID, XCR0 and the OS grant can all say yes on a machine whose tiles do
 * not work as documented (a hypervisor that exposes the bits without the
 * state, a wrong palette): the first tile instruction would then raise
 * SIGILL/SIGSEGV or give wrong numbers. The test runs fx_linear on the
 * table with small integers (exact in bf16, sums exact in f32), shapes
 * with an edge in every dimension, under a signal guard; any fault or any
 * difference from the integer reference turns AMX off. Where the CPU has
 * AMX-INT8, the table's int8 kernel (TDPBSSD tiles) runs too, on the same
 * integers as a Q8_0 weight, and must equal the scalar int8 kernel bit
 * for bit (both follow one contract, gemm.h).
 */
#include "simd/amx_selftest.h"

#include "simd/common/cpu.h"
#include "simd/gemm/gemm_int8.h"

#include <stdio.h>
#include <string.h>

enum { M = 37, N = 40, K = 96 };

enum { Q8_0_BLOCK_BYTES = 34 }; /* f16 scale + 32 int8 */

typedef struct selftest {
    const fx_kernels *k;
    float x[M * K], y[M * N];
    uint16_t w[N * K];
    int int8; /* also the int8 kernel: */
    uint8_t wq[N * K / 32 * Q8_0_BLOCK_BYTES];
    float y8[M * N], y8_ref[M * N];
    int int8_failed; /* scratch memory missing */
} selftest;

static int run(void *arg) {
    selftest *t = arg;
    fx_scratch *s = fx_scratch_new(1);
    if (!s) return -2;
    fx_kctx kc;
    fx_kctx_init(&kc, t->k, 1, s);
    const fx_weight w = {.data = t->w, .dtype = FX_DTYPE_BF16, .n = N, .k = K, .ld = K};
    fx_linear(&kc, M, t->x, K, &w, t->y, N, NULL);
    if (t->int8) {
        const fx_weight wq = {.data = t->wq, .dtype = FX_DTYPE_Q8_0, .n = N, .k = K, .ld = K};
        const fx_gemm_int8 *p = t->k->gemm->int8(fx_cpu_facts_get(), M);
        t->int8_failed = fx_linear_int8(&kc, p, M, t->x, K, &wq, NULL, t->y8, N, NULL) ||
                         fx_linear_int8(&kc, &fx_gemm_int8_scalar, M, t->x, K, &wq, NULL, t->y8_ref, N, NULL);
    }
    fx_scratch_free(s);
    return 0;
}

int fx_amx_selftest(const fx_kernels *k, char *why, size_t size) {
    static selftest t; /* once per process, under the dispatch's pthread_once */
    memset(&t, 0, sizeof t);
    t.k = k;
    for (int i = 0; i < M; i++)
        for (int q = 0; q < K; q++) t.x[i * K + q] = (float)((i * 7 + q * 3) % 9 - 4);
    for (int j = 0; j < N; j++)
        for (int q = 0; q < K; q++) t.w[j * K + q] = fx_f32_to_bf16_bits((float)((j * 5 + q) % 7 - 3));
    t.int8 = fx_cpu_facts_get()->amx_int8 && k->gemm && k->gemm->int8;
    for (int b = 0; b < N * K / 32; b++) { /* scale 1.0 (f16 0x3c00), the same integers as w */
        uint8_t *blk = t.wq + b * Q8_0_BLOCK_BYTES;
        blk[0] = 0x00, blk[1] = 0x3c;
        for (int e = 0; e < 32; e++) {
            const int j = b / (K / 32), q = b % (K / 32) * 32 + e;
            blk[2 + e] = (uint8_t)(int8_t)((j * 5 + q) % 7 - 3);
        }
    }
    int sig = 0;
    const int rc = fx_amx_os_guarded(run, &t, &sig);
    if (sig) {
        snprintf(why, size, "signal %d (%s) in the tile kernels", sig, sig == 4 ? "SIGILL" : sig == 11 ? "SIGSEGV" : "?");
        return 0;
    }
    if (rc) {
        snprintf(why, size, "no memory for the self-test");
        return 0;
    }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int want = 0;
            for (int q = 0; q < K; q++) want += ((i * 7 + q * 3) % 9 - 4) * ((j * 5 + q) % 7 - 3);
            if (t.y[i * N + j] != (float)want) {
                snprintf(why, size, "a %dx%dx%d GEMM gave y[%d,%d] = %g instead of %d", M, N, K, i, j,
                         (double)t.y[i * N + j], want);
                return 0;
            }
        }
    if (t.int8_failed) {
        snprintf(why, size, "no memory for the int8 self-test");
        return 0;
    }
    for (int i = 0; t.int8 && i < M * N; i++)
        if (memcmp(&t.y8[i], &t.y8_ref[i], 4)) {
            snprintf(why, size, "the int8 tile GEMM gave y[%d,%d] = %.9g, the scalar int8 kernel %.9g", i / N, i % N,
                     (double)t.y8[i], (double)t.y8_ref[i]);
            return 0;
        }
    return 1;
}
