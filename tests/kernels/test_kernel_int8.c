/*
 * test_kernel_int8.c — the W8A8 GEMM (kc->int8 with block-typed weights):
 * every kernel this machine runs (scalar, AVX2, AVX512-VNNI, AMX-INT8,
 * NEON sdot and widening multiplies) equals, bit for bit and for 1–3
 * threads, a plain
 * implementation of the contract in kernels.h; the int8 form of the
 * weights is exact where the format allows and within half a step
 * elsewhere; the result stays close to the f32 product; F32/BF16 weights
 * ignore the mode.
 */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>

#include "kernel_isas.h"
#include "simd/gemm/gemm.h"
#include "simd/kernels.h"

/* The contract, plainly: per row codes and scale, per column block int8
 * weights and scales, block dots, fused accumulation, epilogue. */
static void reference(int64_t m, int64_t n, int64_t k, const float *x, const fx_weight *w, const fx_epilogue *e,
                      float *y) {
    int8_t *qw = malloc((size_t)k), *qx = malloc((size_t)k);
    float *dw = malloc((size_t)(k / 32) * 4);
    const int64_t rb = fx_dtype_row_bytes(w->dtype, k);
    for (int64_t i = 0; i < m; i++) {
        const float *xr = x + i * k;
        float amax = 0;
        for (int64_t q = 0; q < k; q++) amax = fabsf(xr[q]) > amax ? fabsf(xr[q]) : amax;
        float inv = amax > 0 ? 127.0f / amax : 0.0f, s = amax / 127.0f;
        for (int64_t q = 0; q < k; q++) qx[q] = (int8_t)nearbyintf(xr[q] * inv);
        for (int64_t j = 0; j < n; j++) {
            fx_weight_to_int8(NULL, w->dtype, (const char *)w->data + j * rb, k, qw, dw);
            float acc = 0;
            for (int64_t b = 0; b < k / 32; b++) {
                int32_t dot = 0;
                for (int t = 0; t < 32; t++) dot += qx[32 * b + t] * qw[32 * b + t];
                acc = fmaf((float)dot, dw[b], acc);
            }
            float v = acc * s;
            if (e->bias) v = v + e->bias[j];
            float *c = y + i * n + j;
            if (e->mode == FX_EPI_STORE) *c = v;
            else if (e->mode == FX_EPI_ACCUMULATE) *c = *c + v;
            else *c = fmaf(e->gate[j], v, *c);
        }
    }
    free(qw), free(qx), free(dw);
}

static void *quantized(fx_test_rng *r, fx_dtype t, int64_t n, int64_t k) {
    float *w = malloc((size_t)(n * k) * 4);
    for (int64_t i = 0; i < n * k; i++) w[i] = 0.05f * fx_test_rng_normal(r);
    void *q = malloc((size_t)fx_dtype_row_bytes(t, n * k));
    if (fx_dtype_can_quantize(t)) {
        for (int64_t j = 0; j < n; j++) fx_quantize_row(t, w + j * k, k, (char *)q + fx_dtype_row_bytes(t, j * k));
    } else {
        for (int64_t i = 0; i < fx_dtype_row_bytes(t, n * k); i++) ((uint8_t *)q)[i] = (uint8_t)fx_test_rng_u64(r);
        for (int64_t b = 0; b < n * k / fx_dtype_block(t); b++) { /* sane f16 scales */
            uint8_t *blk = (uint8_t *)q + b * (int64_t)fx_dtype_block_bytes(t);
            blk[0] = 0x00, blk[1] = 0x20;
        }
    }
    free(w);
    return q;
}

typedef struct kern {
    const fx_gemm_int8 *p;
    const char *label;
} kern;

/* Every int8 kernel this machine runs: scalar, then each table's choice
 * for few and many rows; on x86 also each x86 kernel the CPU can run by
 * itself (AVX2 on a VNNI machine, ...). A kernel the CPU lacks is named
 * with the reason (the x86 emulation suite runs them all). */
static int add_kernel(kern *out, int n, const fx_gemm_int8 *p, const char *label) {
    for (int i = 0; i < n; i++)
        if (out[i].p == p) return n;
    out[n] = (kern){p, label};
    return n + 1;
}

static int kernels(kern *out) {
    int n = 0;
    n = add_kernel(out, n, &fx_gemm_int8_scalar, "scalar");
    const fx_cpu_facts *f = fx_cpu_facts_get();
    for (int isa = 1; isa < FX_ISA_COUNT; isa++) {
        const fx_kernels *k = fx_kernels_get((fx_isa)isa, 0);
        if (!k || !k->gemm || !k->gemm->int8) continue;
        n = add_kernel(out, n, k->gemm->int8(f, 1), fx_isa_name((fx_isa)isa));
        n = add_kernel(out, n, k->gemm->int8(f, 1 << 20), fx_isa_name((fx_isa)isa));
    }
#if FX_X86
    char why[512];
    if (fx_isa_check(FX_ISA_AVX2, why, sizeof why)) n = add_kernel(out, n, &fx_gemm_int8_avx2_kernel, "avx2");
    if (fx_isa_check(FX_ISA_AVX512, why, sizeof why) && f->avx512vnni)
        n = add_kernel(out, n, &fx_gemm_int8_avx512vnni, "avx512vnni");
    else
        printf("    avx512vnni int8 kernel not run natively (%s); the x86 emulation suite runs it\n",
               f->avx512vnni ? why : "no AVX512_VNNI");
    if (fx_isa_check(FX_ISA_AMX, why, sizeof why) && f->amx_int8) n = add_kernel(out, n, &fx_gemm_int8_amx, "amx");
    else
        printf("    amx int8 kernel not run natively (%s); the x86 emulation suite runs it\n",
               f->amx_int8 ? why : "no AMX-INT8");
#endif
#if defined(__aarch64__)
    n = add_kernel(out, n, &fx_gemm_int8_neon_base, "neon (no sdot)");
#endif
#if defined(FX_X86_EMULATED)
    CHECK_MSG(n == 4, "the emulated CPU runs scalar, avx2, avx512vnni and amx int8 kernels, got %d", n);
#endif
    return n;
}

TEST(kernel_int8_kernels_equal_the_contract) {
    kern ks[3 * FX_ISA_COUNT + 4];
    int nk = kernels(ks);
    printf("    kernel_int8_kernels_equal_the_contract:");
    for (int i = 0; i < nk; i++) printf(" %s", ks[i].p->name);
    printf("\n");
    fx_test_rng r;
    fx_test_rng_seed(&r, 31);
    static const fx_dtype types[] = {FX_DTYPE_Q8_0, FX_DTYPE_Q4_0, FX_DTYPE_Q5_0, FX_DTYPE_IQ4_NL, FX_DTYPE_Q4_K,
                                     FX_DTYPE_Q6_K, FX_DTYPE_Q3_K, FX_DTYPE_Q5_1};
    /* m, n past every tile size (4x16, 8x32, 32x32 and its 16-row /
     * 16-column halves); k from one block up */
    static const int64_t shapes[][3] = {{1, 33, 256}, {5, 19, 512}, {9, 70, 256},  {30, 40, 768},
                                        {17, 16, 32}, {33, 47, 96}, {16, 32, 160}, {47, 81, 64}};
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            if (KT_SMALL && (s == 3 || s == 7)) continue;
            if (fx_dtype_block(types[ti]) > shapes[s][2]) continue; /* K-quants: 256-blocks */
            const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            void *wq = quantized(&r, types[ti], n, k);
            const fx_weight w = {wq, types[ti], n, k, k, NULL};
            float *x = kt_alloc((size_t)(m * k)), *bias = kt_alloc((size_t)n), *gate = kt_alloc((size_t)n);
            float *y0 = kt_alloc((size_t)(m * n)), *ref = kt_alloc((size_t)(m * n)), *y = kt_alloc((size_t)(m * n));
            fx_test_fill_uniform(&r, x, (size_t)(m * k), 2.0f);
            x[3] = 0.0f; /* a zero code */
            fx_test_fill_uniform(&r, bias, (size_t)n, 1.0f);
            fx_test_fill_uniform(&r, gate, (size_t)n, 1.0f);
            fx_test_fill_uniform(&r, y0, (size_t)(m * n), 1.0f);
            const fx_epilogue e = {(fx_epilogue_mode)((s + ti) % 3), (s + ti) % 2 ? bias : NULL, gate};
            memcpy(ref, y0, (size_t)(m * n) * 4);
            reference(m, n, k, x, &w, &e, ref);
            for (int ki = 0; ki < nk; ki++)
                for (int threads = 1; threads <= 3; threads++) {
                    fx_kctx kc = kt_ctx(kt_scalar(), threads);
                    memcpy(y, y0, (size_t)(m * n) * 4);
                    CHECK(fx_linear_int8(&kc, ks[ki].p, m, x, k, &w, y, n, &e) == 0);
                    long at = kt_bitdiff(y, ref, (size_t)(m * n), 4);
                    CHECK_MSG(at < 0, "%s %s m=%lld n=%lld k=%lld threads=%d: y[%ld] %.9g vs %.9g", ks[ki].label,
                              fx_dtype_name(types[ti]), (long long)m, (long long)n, (long long)k, threads, at,
                              at < 0 ? 0.0 : y[at], at < 0 ? 0.0 : ref[at]);
                    kt_ctx_free(&kc);
                }
            free(wq), free(x), free(bias), free(gate), free(y0), free(ref), free(y);
        }
}

/* fx_linear in int8 mode (the table's kernel) against fx_linear in f32
 * math (the level's f32 table: no bf16 rounding of X) on the same block
 * weights: close (activation and weight rounding only). */
TEST(kernel_int8_linear_close_to_f32) {
    kt_isas isas = kt_isas_list("kernel_int8_linear_close_to_f32", 0);
    fx_test_rng r;
    fx_test_rng_seed(&r, 5);
    const int64_t m = 12, n = 48, k = 1024;
    static const struct { fx_dtype t; double tol; } cases[] = {
        {FX_DTYPE_Q8_0, 0.01}, {FX_DTYPE_Q4_0, 0.01}, {FX_DTYPE_Q4_K, 0.02}, {FX_DTYPE_Q6_K, 0.02}};
    for (int i = 0; i < isas.n; i++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            void *wq = quantized(&r, cases[c].t, n, k);
            const fx_weight w = {wq, cases[c].t, n, k, k, NULL};
            float *x = kt_alloc((size_t)(m * k)), *ya = kt_alloc((size_t)(m * n)), *yb = kt_alloc((size_t)(m * n));
            for (int64_t q = 0; q < m * k; q++) x[q] = fx_test_rng_normal(&r);
            /* the f32 side on scalar kernels: a bf16-dot table would round
             * the activations to bf16 there too */
            fx_kctx kf = kt_ctx(fx_kernels_get(FX_ISA_SCALAR, 0), 2);
            fx_linear(&kf, m, x, k, &w, ya, n, NULL);
            kt_ctx_free(&kf);
            fx_kctx kc = kt_ctx(isas.k[i], 2);
            kc.int8 = 1;
            fx_linear(&kc, m, x, k, &w, yb, n, NULL);
            double rel = fx_test_rel_err(yb, ya, (size_t)(m * n));
            CHECK_MSG(rel < cases[c].tol && rel > 0, "%s %s: int8 vs f32 relative error %g", kt_name(isas.k[i]),
                      fx_dtype_name(cases[c].t), rel);
            /* F32 weights ignore the mode */
            float *wf = kt_alloc((size_t)(n * k));
            fx_dequantize_row(cases[c].t, wq, n * k, wf);
            const fx_weight wf32 = {wf, FX_DTYPE_F32, n, k, k, NULL};
            fx_linear(&kc, m, x, k, &wf32, yb, n, NULL);
            kc.int8 = 0;
            fx_linear(&kc, m, x, k, &wf32, ya, n, NULL);
            CHECK(kt_bitdiff(ya, yb, (size_t)(m * n), 4) < 0);
            kt_ctx_free(&kc);
            free(wq), free(x), free(ya), free(yb), free(wf);
        }
}

/* The int8 form of weights: exact for Q8_0 / Q4_0 / Q5_0 / IQ4_NL, within
 * half a step of the dequantized value for the others. */
TEST(kernel_int8_weight_form) {
    fx_test_rng r;
    fx_test_rng_seed(&r, 8);
    static const fx_dtype types[] = {FX_DTYPE_Q8_0, FX_DTYPE_Q4_0, FX_DTYPE_Q5_0, FX_DTYPE_IQ4_NL, FX_DTYPE_Q4_1,
                                     FX_DTYPE_Q5_1, FX_DTYPE_Q2_K, FX_DTYPE_Q3_K, FX_DTYPE_Q4_K, FX_DTYPE_Q5_K,
                                     FX_DTYPE_Q6_K, FX_DTYPE_IQ4_XS, FX_DTYPE_BF16};
    const int64_t k = 512;
    int8_t q[512];
    float d[16], x[512];
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const fx_dtype t = types[ti];
        void *wq = quantized(&r, t, 1, k);
        fx_dequantize_row(t, wq, k, x);
        fx_weight_to_int8(NULL, t, wq, k, q, d);
        const int exact = t == FX_DTYPE_Q8_0 || t == FX_DTYPE_Q4_0 || t == FX_DTYPE_Q5_0 || t == FX_DTYPE_IQ4_NL;
        for (int64_t e = 0; e < k; e++) {
            float v = (float)q[e] * d[e / 32];
            if (exact) CHECK_MSG(v == x[e], "%s: element %lld: %g vs %g", fx_dtype_name(t), (long long)e, v, x[e]);
            else CHECK_MSG(fabsf(v - x[e]) <= 0.5001f * d[e / 32], "%s: element %lld: %g vs %g (step %g)", fx_dtype_name(t),
                           (long long)e, v, x[e], d[e / 32]);
            CHECK(q[e] >= -127);
        }
        free(wq);
    }
}

#if defined(FX_X86_EMULATED)
#include "simd/common/amx_emu.h"

/* The AMX-INT8 kernel releases the tiles it configured (seen on the
 * calling thread of a 1-thread call) and is what the amx table runs from
 * FX_INT8_AMX_MIN_M rows. */
TEST(kernel_int8_amx_releases_tiles) {
    const fx_kernels *amx = fx_kernels_get(FX_ISA_AMX, 0);
    REQUIRE(amx != NULL);
    CHECK(amx->gemm->int8(fx_cpu_facts_get(), FX_INT8_AMX_MIN_M) == &fx_gemm_int8_amx);
    CHECK(amx->gemm->int8(fx_cpu_facts_get(), FX_INT8_AMX_MIN_M - 1) == &fx_gemm_int8_avx512vnni);
    fx_test_rng r;
    fx_test_rng_seed(&r, 77);
    const int64_t m = 40, n = 48, k = 64;
    void *wq = quantized(&r, FX_DTYPE_Q8_0, n, k);
    const fx_weight w = {wq, FX_DTYPE_Q8_0, n, k, k};
    float *x = kt_alloc((size_t)(m * k)), *y = kt_alloc((size_t)(m * n));
    fx_test_fill_uniform(&r, x, (size_t)(m * k), 1.0f);
    fx_kctx kc = kt_ctx(amx, 1);
    kc.int8 = 1;
    fx_linear(&kc, m, x, k, &w, y, n, NULL);
    fx_amx_tilecfg cfg;
    fx_amx_emu_sttilecfg(&cfg);
    CHECK_MSG(cfg.palette == 0, "the int8 GEMM left the tiles configured");
    kt_ctx_free(&kc);
    free(wq), free(x), free(y);
}
#endif
