/*
 * test_kernel_int8.c — the int8 GEMM (kc->int8 with block-typed weights):
 * every kernel this machine runs (scalar, AVX2, AVX-VNNI, AVX512-VNNI,
 * AMX-INT8, NEON sdot and widening multiplies) equals, bit for bit, for
 * 1–3 threads and from the weight's form or its blocks converted per call,
 * a plain implementation of the contract in kernels.h; the form holds the
 * codes of the rule (within half a step of the dequantized weights, sums,
 * zero padding); the result stays close to the f32 product; fx_linear and
 * fx_linear_int8w run the int8 GEMM and the weight's terms; F32/BF16
 * weights ignore the mode.
 */
#include "tests/test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_isas.h"
#include "simd/gemm/gemm_int8.h"
#include "simd/kernels.h"
#include "simd/quant/quant.h"

/* Codes and scale of n values by the rule (max|v|/127, round to nearest
 * even, |code| <= 127), plainly. */
static float plain_codes(const float *v, int64_t n, int8_t *q) {
    float amax = 0;
    for (int64_t e = 0; e < n; e++) amax = fabsf(v[e]) > amax ? fabsf(v[e]) : amax;
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    for (int64_t e = 0; e < n; e++) q[e] = (int8_t)nearbyintf(v[e] * inv);
    return amax / 127.0f;
}

/* The contract, plainly: per row of X and of the dequantized W codes and
 * a scale, an exact integer dot, then ((float)dot · sw) · sx, bias,
 * epilogue. */
static void reference(int64_t m, int64_t n, int64_t k, const float *x, const fx_weight *w, const fx_epilogue *e,
                      float *y) {
    int8_t *qw = malloc((size_t)(n * k)), *qx = malloc((size_t)k);
    float *sw = malloc((size_t)n * 4), *row = malloc((size_t)k * 4);
    const int64_t rb = fx_dtype_row_bytes(w->dtype, k);
    for (int64_t j = 0; j < n; j++) {
        fx_dequantize_row(w->dtype, (const char *)w->data + j * rb, k, row);
        sw[j] = plain_codes(row, k, qw + j * k);
    }
    for (int64_t i = 0; i < m; i++) {
        const float sx = plain_codes(x + i * k, k, qx);
        for (int64_t j = 0; j < n; j++) {
            int32_t dot = 0;
            for (int64_t q = 0; q < k; q++) dot += qx[q] * qw[j * k + q];
            float v = (float)dot * sw[j];
            v = v * sx;
            if (e->bias) v = v + e->bias[j];
            float *c = y + i * n + j;
            if (e->mode == FX_EPI_STORE) *c = v;
            else if (e->mode == FX_EPI_ACCUMULATE) *c = *c + v;
            else *c = fmaf(e->gate[j], v, *c);
        }
    }
    free(qw), free(qx), free(sw), free(row);
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
    if (fx_isa_check(FX_ISA_AVX2, why, sizeof why) && f->avxvnni)
        n = add_kernel(out, n, &fx_gemm_int8_avxvnni, "avxvnni");
    else
        printf("    avxvnni int8 kernel not run natively (%s); the x86 emulation suite runs it\n",
               f->avxvnni ? why : "no AVX-VNNI");
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
    CHECK_MSG(n == 5, "the emulated CPU runs scalar, avx2, avxvnni, avx512vnni and amx int8 kernels, got %d", n);
#endif
    return n;
}

TEST(kernel_int8_kernels_equal_the_contract) {
    kern ks[3 * FX_ISA_COUNT + 5];
    int nk = kernels(ks);
    printf("    kernel_int8_kernels_equal_the_contract:");
    for (int i = 0; i < nk; i++) printf(" %s", ks[i].p->name);
    printf("\n");
    fx_test_rng r;
    fx_test_rng_seed(&r, 31);
    static const fx_dtype types[] = {FX_DTYPE_Q8_0, FX_DTYPE_Q4_0, FX_DTYPE_Q5_0, FX_DTYPE_IQ4_NL, FX_DTYPE_Q4_K,
                                     FX_DTYPE_Q6_K, FX_DTYPE_Q3_K, FX_DTYPE_Q5_1};
    /* m, n past every tile size (4, 6, 8, 16, 24, 32 and the AMX halves);
     * k from one block up, and past one 64-byte row chunk */
    static const int64_t shapes[][3] = {{1, 33, 256}, {5, 19, 512}, {9, 70, 256},  {30, 40, 768}, {17, 16, 32},
                                        {33, 47, 96}, {16, 32, 160}, {47, 81, 64}, {25, 9, 1056}};
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            if (KT_SMALL && (s == 3 || s == 7 || s == 8)) continue;
            if (shapes[s][2] % fx_dtype_block(types[ti])) continue; /* K-quants: 256-blocks */
            const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            void *wq = quantized(&r, types[ti], n, k);
            const fx_weight w = {.data = wq, .dtype = types[ti], .n = n, .k = k, .ld = k};
            float *x = kt_alloc((size_t)(m * k)), *bias = kt_alloc((size_t)n), *gate = kt_alloc((size_t)n);
            float *y0 = kt_alloc((size_t)(m * n)), *ref = kt_alloc((size_t)(m * n)), *y = kt_alloc((size_t)(m * n));
            fx_test_fill_uniform(&r, x, (size_t)(m * k), 2.0f);
            x[3] = 0.0f; /* a zero code */
            if (m > 2) memset(x + k, 0, (size_t)k * 4); /* an all-zero row: scale 0 */
            fx_test_fill_uniform(&r, bias, (size_t)n, 1.0f);
            fx_test_fill_uniform(&r, gate, (size_t)n, 1.0f);
            fx_test_fill_uniform(&r, y0, (size_t)(m * n), 1.0f);
            const fx_epilogue e = {(fx_epilogue_mode)((s + ti) % 3), (s + ti) % 2 ? bias : NULL, gate};
            memcpy(ref, y0, (size_t)(m * n) * 4);
            reference(m, n, k, x, &w, &e, ref);
            fx_kctx k1 = kt_ctx(kt_scalar(), 1);
            fx_int8w *form = fx_int8w_new(&k1, &w);
            kt_ctx_free(&k1);
            REQUIRE(form != NULL);
            for (int ki = 0; ki < nk; ki++)
                for (int threads = 1; threads <= 3; threads++)
                    for (int use_form = 0; use_form < 2; use_form++) {
                        fx_kctx kc = kt_ctx(kt_scalar(), threads);
                        memcpy(y, y0, (size_t)(m * n) * 4);
                        CHECK(fx_linear_int8(&kc, ks[ki].p, m, x, k, &w, use_form ? form : NULL, y, n, &e) == 0);
                        long at = kt_bitdiff(y, ref, (size_t)(m * n), 4);
                        CHECK_MSG(at < 0, "%s %s m=%lld n=%lld k=%lld threads=%d %s: y[%ld] %.9g vs %.9g",
                                  ks[ki].label, fx_dtype_name(types[ti]), (long long)m, (long long)n, (long long)k,
                                  threads, use_form ? "form" : "blocks", at, at < 0 ? 0.0 : y[at],
                                  at < 0 ? 0.0 : ref[at]);
                        kt_ctx_free(&kc);
                    }
            fx_int8w_free(form);
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
    const int64_t m = 20, n = 48, k = 1024;
    static const struct { fx_dtype t; double tol; } cases[] = {
        {FX_DTYPE_Q8_0, 0.02}, {FX_DTYPE_Q4_0, 0.02}, {FX_DTYPE_Q4_K, 0.02}, {FX_DTYPE_Q6_K, 0.02}};
    for (int i = 0; i < isas.n; i++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            void *wq = quantized(&r, cases[c].t, n, k);
            const fx_weight w = {.data = wq, .dtype = cases[c].t, .n = n, .k = k, .ld = k};
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
            const fx_weight wf32 = {.data = wf, .dtype = FX_DTYPE_F32, .n = n, .k = k, .ld = k};
            fx_linear(&kc, m, x, k, &wf32, yb, n, NULL);
            kc.int8 = 0;
            fx_linear(&kc, m, x, k, &wf32, ya, n, NULL);
            CHECK(kt_bitdiff(ya, yb, (size_t)(m * n), 4) < 0);
            kt_ctx_free(&kc);
            free(wq), free(x), free(ya), free(yb), free(wf);
        }
}

/* fx_linear in int8 mode runs the int8 GEMM for any m (blocks converted
 * per call); fx_linear_int8w takes the form (the same bits) and adds the
 * weight's terms as fx_linear does; without the mode it is fx_linear. */
TEST(kernel_int8_paths) {
    fx_test_rng r;
    fx_test_rng_seed(&r, 12);
    const int64_t n = 40, k = 256, rank = 4;
    void *wq = quantized(&r, FX_DTYPE_Q8_0, n, k);
    float *fa = kt_alloc((size_t)(rank * k)), *fb = kt_alloc((size_t)(n * rank));
    fx_test_fill_uniform(&r, fa, (size_t)(rank * k), 0.1f);
    fx_test_fill_uniform(&r, fb, (size_t)(n * rank), 0.1f);
    const fx_delta term = {FX_DELTA_LOWRANK, 0.5f, 0, n, {.data = fa, .dtype = FX_DTYPE_F32, .n = rank, .k = k, .ld = k},
                           {.data = fb, .dtype = FX_DTYPE_F32, .n = n, .k = rank, .ld = rank}, {.dtype = FX_DTYPE_F32}, 0, NULL, NULL, NULL};
    const fx_weight w = {.data = wq, .dtype = FX_DTYPE_Q8_0, .n = n, .k = k, .ld = k}, wt = {.data = wq, .dtype = FX_DTYPE_Q8_0, .n = n, .k = k, .ld = k, .delta = &term};
    fx_kctx kc = kt_ctx(fx_kernels_best(0), 2);
    fx_int8w *form = fx_int8w_new(&kc, &w);
    REQUIRE(form != NULL);
    static const int64_t ms[] = {1, 15, 16, 40};
    for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
        const int64_t m = ms[mi];
        float *x = kt_alloc((size_t)(m * k)), *ya = kt_alloc((size_t)(m * n)), *yb = kt_alloc((size_t)(m * n));
        fx_test_fill_uniform(&r, x, (size_t)(m * k), 1.0f);
        kc.int8 = 1;
        fx_linear(&kc, m, x, k, &w, ya, n, NULL);
        CHECK(fx_linear_int8(&kc, &fx_gemm_int8_scalar, m, x, k, &w, NULL, yb, n, NULL) == 0);
        CHECK_MSG(kt_bitdiff(ya, yb, (size_t)(m * n), 4) < 0, "m=%lld: fx_linear in int8 mode is not the int8 GEMM",
                  (long long)m);
        fx_linear_int8w(&kc, m, x, k, &w, form, yb, n, NULL);
        CHECK(kt_bitdiff(ya, yb, (size_t)(m * n), 4) < 0);
        /* with a term: the form's product, then the term as fx_linear adds it */
        fx_linear_int8w(&kc, m, x, k, &wt, form, yb, n, NULL);
        float *t = kt_alloc((size_t)(m * rank));
        kc.int8 = 0;
        fx_linear(&kc, m, x, k, &term.a, t, rank, NULL);
        const fx_weight bs = {.data = fb, .dtype = FX_DTYPE_F32, .n = n, .k = rank, .ld = rank};
        float *yt = kt_alloc((size_t)(m * n));
        fx_linear(&kc, m, t, rank, &bs, yt, n, NULL);
        double worst = 0;
        for (int64_t q = 0; q < m * n; q++) {
            double d = fabs((double)yb[q] - ((double)ya[q] + 0.5 * yt[q]));
            worst = d > worst ? d : worst;
        }
        CHECK_MSG(worst < 1e-5, "m=%lld: the term added %g off", (long long)m, worst);
        /* without the mode: fx_linear */
        fx_linear_int8w(&kc, m, x, k, &wt, form, ya, n, NULL);
        fx_linear(&kc, m, x, k, &wt, yb, n, NULL);
        CHECK(kt_bitdiff(ya, yb, (size_t)(m * n), 4) < 0);
        free(x), free(ya), free(yb), free(t), free(yt);
    }
    fx_int8w_free(form);
    kt_ctx_free(&kc);
    free(wq), free(fa), free(fb);
}

/* The form: per row the rule's codes of the dequantized row (within half
 * a step, |code| <= 127, the extreme at ±127), the code sum, zero codes
 * past k and past n (scale 0). */
TEST(kernel_int8_weight_form) {
    fx_test_rng r;
    fx_test_rng_seed(&r, 8);
    static const fx_dtype types[] = {FX_DTYPE_Q8_0, FX_DTYPE_Q4_0, FX_DTYPE_Q5_0, FX_DTYPE_IQ4_NL, FX_DTYPE_Q4_1,
                                     FX_DTYPE_Q5_1, FX_DTYPE_Q2_K, FX_DTYPE_Q3_K, FX_DTYPE_Q4_K, FX_DTYPE_Q5_K,
                                     FX_DTYPE_Q6_K, FX_DTYPE_IQ4_XS};
    const int64_t n = 5, k = 768;
    float x[768];
    fx_kctx kc = kt_ctx(fx_kernels_best(0), 2);
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const fx_dtype t = types[ti];
        void *wq = quantized(&r, t, n, k);
        memset(wq, 0, (size_t)fx_dtype_row_bytes(t, k)); /* row 0: zeros */
        const fx_weight w = {.data = wq, .dtype = t, .n = n, .k = k, .ld = k};
        fx_int8w *f = fx_int8w_new(&kc, &w);
        REQUIRE(f != NULL);
        CHECK(f->ldq == 768 && f->rows == 32 && f->n == n && f->k == k);
        for (int64_t j = 0; j < f->rows; j++) {
            const int8_t *q = f->q + j * f->ldq;
            if (j >= n || j == 0) {
                int zero = f->scale[j] == 0.0f && f->sum[j] == 0;
                for (int64_t e = 0; e < f->ldq; e++) zero &= q[e] == 0;
                CHECK_MSG(zero, "%s: row %lld is not zero", fx_dtype_name(t), (long long)j);
                continue;
            }
            fx_dequantize_row(t, (const char *)wq + fx_dtype_row_bytes(t, j * k), k, x);
            int32_t sum = 0;
            int extreme = 0;
            for (int64_t e = 0; e < k; e++) {
                const float v = (float)q[e] * f->scale[j];
                CHECK_MSG(fabsf(v - x[e]) <= 0.5001f * f->scale[j], "%s: element %lld: %g vs %g (step %g)",
                          fx_dtype_name(t), (long long)e, v, x[e], f->scale[j]);
                CHECK(q[e] >= -127);
                extreme |= q[e] == 127 || q[e] == -127;
                sum += q[e];
            }
            CHECK(extreme && sum == f->sum[j]);
        }
        fx_int8w_free(f);
        free(wq);
    }
    /* element types (--precision int8 makes their forms too): each row is
     * the rule's codes of its values — fp8 times the weight's scale — also
     * for k not a multiple of 32 (the last k % 32 values one by one) */
    static const fx_dtype elem[] = {FX_DTYPE_F32, FX_DTYPE_F16, FX_DTYPE_BF16, FX_DTYPE_F8_E4M3, FX_DTYPE_F8_E5M2};
    static const int64_t eks[] = {32, 48, 77};
    for (size_t ti = 0; ti < sizeof elem / sizeof *elem; ti++)
        for (size_t ki = 0; ki < sizeof eks / sizeof *eks; ki++) {
            const fx_dtype t = elem[ti];
            const int64_t ek = eks[ki], es = fx_dtype_row_bytes(t, 1);
            uint8_t *wd = malloc((size_t)(3 * ek * es));
            REQUIRE(wd);
            for (int64_t e = 0; e < 3 * ek; e++) { /* finite values of every type */
                const float v = (float)((int)(fx_test_rng_u64(&r) % 2001) - 1000) / 250.0f;
                if (t == FX_DTYPE_F32) memcpy(wd + 4 * e, &v, 4);
                else if (t == FX_DTYPE_F16) { const uint16_t h = fx_f32_to_f16_bits(v); memcpy(wd + 2 * e, &h, 2); }
                else if (t == FX_DTYPE_BF16) { const uint16_t h = fx_f32_to_bf16_bits(v); memcpy(wd + 2 * e, &h, 2); }
                else wd[e] = (uint8_t)(fx_test_rng_u64(&r) >> 56) & 0x77; /* finite in E4M3 and E5M2 */
            }
            fx_weight w = {.data = wd, .dtype = t, .n = 3, .k = ek, .ld = ek};
            w.scale = fx_dtype_is_fp8(t) ? 0.0375f : 0.0f;
            fx_int8w *f = fx_int8w_new(&kc, &w);
            REQUIRE(f != NULL);
            CHECK(f->ldq == (ek + 63) / 64 * 64 && f->rows == 32);
            float row[80];
            int8_t want[80];
            for (int64_t j = 0; j < 3; j++) {
                fx_dequantize_row(t, wd + j * ek * es, ek, row);
                fx_weight_scale_row(w.scale, ek, row);
                float s;
                int32_t sum;
                fx_int8_codes(row, ek, want, &s, &sum);
                int ok = s == f->scale[j] && sum == f->sum[j] && s > 0;
                for (int64_t e = 0; e < ek; e++) {
                    ok &= want[e] == f->q[j * f->ldq + e];
                    ok &= fabsf((float)want[e] * s - row[e]) <= 0.5001f * s; /* within half a step */
                }
                for (int64_t e = ek; e < f->ldq; e++) ok &= f->q[j * f->ldq + e] == 0;
                CHECK_MSG(ok, "%s k=%lld row %lld: not the rule's codes", fx_dtype_name(t), (long long)ek, (long long)j);
            }
            fx_int8w_free(f);
            free(wd);
        }
    fx_kctx modes[3] = {{.int8 = FX_INT8_OFF}, {.int8 = FX_INT8_BLOCKS}, {.int8 = FX_INT8_ALL}};
    CHECK(!fx_int8w_wanted(&modes[0], FX_DTYPE_Q8_0) && !fx_int8w_wanted(&modes[0], FX_DTYPE_BF16));
    CHECK(fx_int8w_wanted(&modes[1], FX_DTYPE_Q8_0) && !fx_int8w_wanted(&modes[1], FX_DTYPE_Q4_K) &&
          !fx_int8w_wanted(&modes[1], FX_DTYPE_BF16) && !fx_int8w_wanted(&modes[1], FX_DTYPE_F8_E4M3));
    CHECK(fx_int8w_wanted(&modes[2], FX_DTYPE_Q8_0) && !fx_int8w_wanted(&modes[2], FX_DTYPE_Q4_K) &&
          fx_int8w_wanted(&modes[2], FX_DTYPE_BF16) && fx_int8w_wanted(&modes[2], FX_DTYPE_F16) &&
          fx_int8w_wanted(&modes[2], FX_DTYPE_F32) && fx_int8w_wanted(&modes[2], FX_DTYPE_F8_E4M3));
    kt_ctx_free(&kc);
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
    const fx_weight w = {.data = wq, .dtype = FX_DTYPE_Q8_0, .n = n, .k = k, .ld = k};
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

/* The one-pass bf16 → int8 converters of the quant tables (to_int8[BF16]:
 * AVX2, AVX-512) against the rule of quant.h on the widened row, bit for
 * bit: codes, scale and sum, for every length 1..100 and the model's
 * 3072 and 9216 (tails of the vector loops), random signs and magnitudes,
 * subnormals, a zero row, and rows holding an infinity or a NaN (zero
 * codes, scale 0). */
TEST(kernel_int8_bf16_rows_equal_the_rule) {
    kt_isas isas = kt_isas_list("kernel_int8_bf16_rows_equal_the_rule", 0);
    fx_test_rng r;
    fx_test_rng_seed(&r, 31);
    enum { MAXN = 9216 };
    uint16_t *h = malloc(MAXN * 2);
    float *x = malloc(MAXN * 4);
    int8_t *qa = malloc(MAXN), *qb = malloc(MAXN);
    REQUIRE(h && x && qa && qb);
    int tables = 0;
    long checked = 0;
    for (int i = 0; i < isas.n; i++) {
        const fx_quant_kernels *qk = isas.k[i]->quant;
        if (!qk || !qk->to_int8[FX_DTYPE_BF16]) continue;
        tables++;
        for (int64_t n = 1; n <= 102; n++)
            for (int kind = 0; kind < 5; kind++) {
                const int64_t len = n == 101 ? 3072 : n == 102 ? MAXN : n;
                for (int64_t e = 0; e < len; e++) {
                    const uint64_t u = fx_test_rng_u64(&r);
                    h[e] = (uint16_t)((u >> 48 & 0x8000) | ((u >> 20) % 0x7f7f)); /* finite, subnormals included */
                    if (kind == 1) h[e] = (uint16_t)(h[e] & 0x807f); /* all subnormal or zero */
                    if (kind == 2) h[e] = e & 1 ? 0x8000 : 0;           /* ±0 */
                }
                if (kind == 3) h[(int64_t)(fx_test_rng_u64(&r) % (uint64_t)len)] = 0xff80; /* -inf */
                if (kind == 4) h[(int64_t)(fx_test_rng_u64(&r) % (uint64_t)len)] = 0x7fc1; /* NaN */
                for (int64_t e = 0; e < len; e++) x[e] = fx_bf16_bits_to_f32(h[e]);
                float sa, sb;
                int32_t suma, sumb;
                fx_int8_codes(x, len, qa, &sa, &suma);
                qk->to_int8[FX_DTYPE_BF16]((const uint8_t *)h, len, qb, &sb, &sumb);
                CHECK_MSG(!memcmp(qa, qb, (size_t)len) && !memcmp(&sa, &sb, 4) && suma == sumb,
                          "%s n=%lld kind %d: codes %s, scale %g vs %g, sum %d vs %d", kt_name(isas.k[i]), (long long)len,
                          kind, memcmp(qa, qb, (size_t)len) ? "differ" : "equal", (double)sa, (double)sb, suma, sumb);
                checked++;
            }
    }
    printf("    %d tables, %ld rows equal the rule bit for bit\n", tables, checked);
    free(h), free(x), free(qa), free(qb);
}
