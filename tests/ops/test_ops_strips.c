/*
 * test_ops_strips.c — the seam's host strips (ops.h) on the CPU backend,
 * what the VAE's strip executor runs on:
 *  - fx_op_conv2d_rows over a weight packed once (fx_ops_conv_weight_rows)
 *    gives, strip by strip from input-row windows, exactly fx_op_conv2d's
 *    output (plain and upsampling, stride 2); the packed form is counted
 *    (as activations: a layer's working copy) while registered and freed by
 *    fx_ops_weight_free;
 *  - fx_op_rows_store / fx_op_rows_load move rows between dense f32 and a
 *    pitched bf16 tensor (rounding to bf16 only, bytes between rows
 *    untouched) and a planar one (exact transposition); the residual adds
 *    the stored rows; the GroupNorm sums of the stored rows and the
 *    normalisation with the statistics from them agree with fx_op_groupnorm
 *    (1e-5: double sums in other chunks);
 *  - buffers wrapping host memory are not freed by fx_buf_free.
 * Two threads, so the row ops run as parallel regions.
 */
#include "tests/test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "simd/kernels.h"
#include "src/ops/ops.h"

typedef struct host {
    fx_kctx kc;
    fx_mem_stats mem;
    fx_ops *ops;
    fx_test_rng rng;
} host;

static int host_open(host *h, uint64_t seed) {
    memset(h, 0, sizeof *h);
    fx_test_rng_seed(&h->rng, seed);
    fx_kctx_init(&h->kc, fx_kernels_get(FX_ISA_SCALAR, 0), 2, fx_scratch_new(2));
    fx_mem_stats_init(&h->mem);
    fx_err err = {0};
    fx_ops_opts o = {.backend = "cpu", .device = -1, .mem = &h->mem};
    CHECK_MSG(fx_ops_open(&o, &h->kc, &h->ops, &err) == FLUX_OK, "%s", err.msg);
    return h->ops != NULL;
}

static void host_close(host *h) {
    fx_ops_close(h->ops);
    fx_scratch_free(h->kc.scratch);
}

/* The whole of host memory p (n floats) as a buffer. */
static fx_buf *wrap(host *h, void *p, int64_t n) {
    fx_buf *b = NULL;
    fx_err err = {0};
    CHECK_MSG(fx_buf_wrap(h->ops, p, n, "test", &b, &err) == FLUX_OK, "%s", err.msg);
    return b;
}

TEST(ops_strips_conv_rows_match_conv2d) {
    host h;
    REQUIRE(host_open(&h, 41));
    fx_test_rng *r = &h.rng;
    fx_err err = {0};
    const int hh = 11, ww = 6, cin = 8, cout = 16;
    float *x = malloc(sizeof(float) * hh * ww * cin), bias[16];
    fx_test_fill_uniform(r, x, (size_t)hh * ww * cin, 1.0f);
    fx_test_fill_uniform(r, bias, 16, 0.3f);
    uint16_t *wb = malloc(sizeof(uint16_t) * cout * cin * 9);
    for (int i = 0; i < cout * cin * 9; i++) wb[i] = fx_f32_to_bf16_bits(0.2f * fx_test_rng_uniform(r));
    const fx_weight w = {.data = wb, .dtype = FX_DTYPE_BF16, .n = cout, .k = cin * 9, .ld = cin * 9};
    fx_buf *xb = wrap(&h, x, (int64_t)hh * ww * cin), *bb = wrap(&h, bias, 16);
    const fx_op_epi epi = {FX_EPI_STORE, fx_vec(bb, 0), fx_none};
    const int modes[3][3] = {{1, 1, 0}, {1, 1, 1}, {2, 0, 0}}; /* stride, symmetric pad, upsample */
    for (int m = 0; m < 3; m++) {
        const int s = modes[m][0], p = modes[m][1];
        fx_conv2d_geom g = {hh, ww, cin, cout, 3, 3, s, p, p, 1, 1, modes[m][2]};
        int ho, wo;
        fx_conv2d_out_size(&g, &ho, &wo);
        const int64_t n = (int64_t)ho * wo * cout;
        float *want = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
        fx_buf *wantb = wrap(&h, want, n), *gotb = wrap(&h, got, n);
        fx_opw plain, packed;
        REQUIRE(fx_ops_conv_weight(h.ops, &g, &w, "conv", &plain, &err) == FLUX_OK);
        REQUIRE(fx_op_conv2d(h.ops, &g, fx_vec(xb, 0), &plain, &epi, fx_vec(wantb, 0), &err) == FLUX_OK);
        CHECK_MSG(fx_ops_conv_weight_rows(h.ops, &g, &w, "conv", &packed, &err) == FLUX_OK, "%s", err.msg);
        CHECK(packed.state != NULL && h.mem.cur[FX_MEM_ACTIVATIONS] > 0 && h.mem.cur[FX_MEM_WEIGHT_FORMS] == 0);
        for (int r0 = 0; r0 < ho; r0 += 3) { /* strips of 3 rows from their input windows */
            const int r1 = r0 + 3 < ho ? r0 + 3 : ho;
            int in0, in1;
            fx_conv2d_input_rows(&g, r0, r1, &in0, &in1);
            CHECK_MSG(fx_op_conv2d_rows(h.ops, &g, fx_vec(xb, (int64_t)in0 * ww * cin), in0, in1 - in0, &packed, &epi,
                                        fx_vec(gotb, (int64_t)r0 * wo * cout), r0, r1, &err) == FLUX_OK,
                      "%s", err.msg);
        }
        CHECK_MSG(!memcmp(want, got, sizeof(float) * n), "mode %d: strips differ from the whole conv", m);
        /* a plain registration has no packed form */
        CHECK_EQ_INT(fx_op_conv2d_rows(h.ops, &g, fx_vec(xb, 0), 0, hh, &plain, &epi, fx_vec(gotb, 0), 0, 1, &err),
                     FLUX_ERR_INVALID_ARG);
        fx_ops_weight_free(h.ops, &packed);
        fx_ops_weight_free(h.ops, &plain);
        CHECK(packed.state == NULL && h.mem.cur[FX_MEM_ACTIVATIONS] == 0);
        fx_buf_free(h.ops, wantb), fx_buf_free(h.ops, gotb);
        free(want), free(got);
    }
    fx_buf_free(h.ops, xb), fx_buf_free(h.ops, bb);
    x[0] = 1.0f; /* still ours after fx_buf_free */
    free(x), free(wb);
    host_close(&h);
}

/* The first i where got[i] != add[i] + bf16(src[i]) (add NULL: 0), or n.
 * Early-exit loops on purpose: gcc 12's aarch64 vectorizer crashes (ICE in
 * vect_transform_reduction) on the &= reduction form of these checks. */
static int64_t first_not_bf16_of(const float *got, const float *src, const float *add, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (got[i] != (add ? add[i] : 0.0f) + fx_bf16_bits_to_f32(fx_f32_to_bf16_bits(src[i]))) return i;
    return n;
}

TEST(ops_strips_rows_store_load_groupnorm) {
    host h;
    REQUIRE(host_open(&h, 43));
    fx_test_rng *r = &h.rng;
    fx_err err = {0};
    enum { H = 9, W = 40, C = 32, G = 4, PITCH = W * C + 24 };
    const int64_t n = (int64_t)H * W * C;
    float *src = malloc(sizeof(float) * n), *keep = malloc(sizeof(float) * n), *back = malloc(sizeof(float) * n);
    uint16_t *stored = malloc(sizeof(uint16_t) * H * PITCH);
    float gamma[C], beta[C];
    fx_test_fill_uniform(r, src, (size_t)n, 2.0f);
    fx_test_fill_uniform(r, gamma, C, 1.0f);
    fx_test_fill_uniform(r, beta, C, 0.5f);
    memcpy(keep, src, sizeof(float) * n);
    memset(stored, 0xab, sizeof(uint16_t) * H * PITCH);
    fx_buf *sb = wrap(&h, src, n), *bk = wrap(&h, back, n);
    const fx_rows t = {stored, FX_DTYPE_BF16, H, W, C, PITCH, 0};

    /* store with sums, in two calls; load back */
    double sums[2 * G] = {0};
    REQUIRE(fx_op_rows_store(h.ops, &t, 0, 4, fx_vec(sb, 0), 0, G, sums, &err) == FLUX_OK);
    REQUIRE(fx_op_rows_store(h.ops, &t, 4, H, fx_vec(sb, 4 * W * C), 0, G, sums, &err) == FLUX_OK);
    REQUIRE(fx_op_rows_load(h.ops, &t, 0, H, NULL, 1, fx_vec(bk, 0), &err) == FLUX_OK);
    CHECK_MSG(first_not_bf16_of(back, src, NULL, n) == n, "bf16 rows: not the rounded source");
    int64_t pad_written = 0;
    for (int y = 0; y < H; y++)
        for (int i = W * C; i < PITCH; i++)
            if (stored[(int64_t)y * PITCH + i] != 0xabab) pad_written++;
    CHECK_MSG(pad_written == 0, "%lld bytes between rows were written", (long long)pad_written);
    double want0 = 0;
    for (int64_t p = 0; p < (int64_t)H * W; p++)
        for (int c = 0; c < C / G; c++) want0 += src[p * C + c];
    CHECK_NEAR(sums[0], want0, 1e-9 * (fabs(want0) + 1) * n);

    /* the statistics from the sums normalise as fx_op_groupnorm does (its own statistics) */
    float mean[G], rstd[G];
    fx_ops_groupnorm_finish((int64_t)H * W, C, G, sums, 1e-6f, mean, rstd);
    const fx_op_gn gn = {G, mean, rstd, gamma, beta, 1};
    float *ref = malloc(sizeof(float) * n), *gam = gamma, *bet = beta;
    fx_buf *rb = wrap(&h, ref, n), *gb = wrap(&h, gam, C), *btb = wrap(&h, bet, C);
    REQUIRE(fx_op_groupnorm(h.ops, (int64_t)H * W, C, G, fx_vec(sb, 0), fx_vec(gb, 0), fx_vec(btb, 0), 1e-6f, 1,
                            fx_vec(rb, 0), &err) == FLUX_OK);
    memcpy(back, src, sizeof(float) * n); /* the sums are of the f32 rows given to the store */
    REQUIRE(fx_op_rows_load(h.ops, &t, 0, H, &gn, 0, fx_vec(bk, 0), &err) == FLUX_OK);
    int64_t far = 0;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(back[i] - ref[i]) < 1e-5)) far++;
    CHECK_MSG(far == 0, "GroupNorm with given statistics: %lld values differ by 1e-5 or more", (long long)far);

    /* residual: src += stored rows, src keeps the sum */
    memcpy(src, keep, sizeof(float) * n);
    REQUIRE(fx_op_rows_store(h.ops, &t, 0, H, fx_vec(sb, 0), 1, 0, NULL, &err) == FLUX_OK);
    CHECK_MSG(first_not_bf16_of(src, keep, keep, n) == n, "residual rows");

    /* planar [C, H, W]: an exact transposition both ways */
    float *planar = malloc(sizeof(float) * n);
    const fx_rows pt = {planar, FX_DTYPE_F32, H, W, C, 0, 1};
    REQUIRE(fx_op_rows_store(h.ops, &pt, 0, H, fx_vec(sb, 0), 0, 0, NULL, &err) == FLUX_OK);
    CHECK(planar[(int64_t)5 * H * W + 2 * W + 7] == src[((int64_t)2 * W + 7) * C + 5]);
    REQUIRE(fx_op_rows_load(h.ops, &pt, 0, H, NULL, 1, fx_vec(bk, 0), &err) == FLUX_OK);
    CHECK(!memcmp(back, src, sizeof(float) * n));

    /* bad rows are an error naming the op */
    CHECK_EQ_INT(fx_op_rows_load(h.ops, &t, 3, H + 1, NULL, 1, fx_vec(bk, 0), &err), FLUX_ERR_INVALID_ARG);
    CHECK_MSG(strstr(err.msg, "rows_load") != NULL, "%s", err.msg);

    fx_buf_free(h.ops, sb), fx_buf_free(h.ops, bk), fx_buf_free(h.ops, rb), fx_buf_free(h.ops, gb);
    fx_buf_free(h.ops, btb);
    free(src), free(keep), free(back), free(stored), free(ref), free(planar);
    host_close(&h);
}
