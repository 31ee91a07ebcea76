/*
 * test_vk_rowops.c — the row, elementwise, RoPE, group-norm and conversion
 * operations on the device against the CPU scalar kernels.
 *
 * Tolerances, max|y − y_cpu| <= tol · max(1, max|y_cpu|):
 *   rmsnorm, layernorm_modulate, qk_norm_rope      1e-5  (f32 tree sums vs
 *       the CPU's double sums; inversesqrt within 2 ulp)
 *   silu, swiglu, groupnorm apply (+ SiLU)         1e-5  (exp within a few ulp)
 *   gated_add                                      0     (one product and add)
 *   softmax                                        1e-5
 *   groupnorm mean/rstd                            2e-5 relative (f32 chunk
 *       merges vs double sums), also with a mean 100× the spread; applied
 *       to values near 800 (ulp 6e-5) the output may differ by an ulp of
 *       the mean times rstd: 1e-4 there
 *   conversions                                    bit-exact, every bf16 and
 *       f16 pattern and f32 edge cases (NaN, inf, subnormals, ties)
 */
#include "vk_test.h"

#include <string.h>

#define TOL 1e-5

typedef struct rowops_env {
    fx_vk *vk;
    fx_kctx kc;
    fx_test_rng r;
} rowops_env;

static int env_open(rowops_env *e, uint64_t max_binding, int gpu_tuning) {
    e->vk = vkt_open_limits(FX_VK_GEMM_AUTO, max_binding, gpu_tuning);
    if (!e->vk) return 0;
    vkt_kctx(&e->kc);
    fx_test_rng_seed(&e->r, 42);
    return 1;
}

static void env_close(rowops_env *e) {
    vkt_kctx_free(&e->kc);
    vkt_close(e->vk);
}

/* Run a device op on a copy of host (n floats) and compare with want. */
#define DEVICE_RESULT(env, host, n, name, call, want, tol)                                                 \
    do {                                                                                                   \
        fx_vk_buf *b_ = vkt_upload((env)->vk, host, n, name);                                              \
        if (!b_) break;                                                                                    \
        fx_err err_ = {0};                                                                                 \
        flux_status st_ = (call);                                                                          \
        CHECK_MSG(st_ == FLUX_OK, "%s: %s", name, err_.msg);                                               \
        float *got_ = st_ == FLUX_OK ? vkt_download((env)->vk, b_, 0, n) : NULL;                           \
        if (got_) vkt_check_close(name, got_, want, n, tol);                                               \
        free(got_);                                                                                        \
        fx_vk_buf_free((env)->vk, b_);                                                                     \
    } while (0)

static void norms(rowops_env *e) {
    const int64_t rows = 7, cols = 300, ld = 303;
    const size_t n = (size_t)(rows * ld);
    float *x = vkt_random(&e->r, n, 3.0f), *w = vkt_random(&e->r, (size_t)cols, 1.0f);
    float *shift = vkt_random(&e->r, (size_t)cols, 1.0f), *scale = vkt_random(&e->r, (size_t)cols, 1.0f);
    fx_vk_buf *bw = vkt_upload(e->vk, w, (size_t)cols, "w"), *bs = vkt_upload(e->vk, shift, (size_t)cols, "shift");
    fx_vk_buf *bc = vkt_upload(e->vk, scale, (size_t)cols, "scale");
    float *want = malloc(n * 4);
    if (bw && bs && bc) {
        /* rmsnorm in place, with and without weight */
        memcpy(want, x, n * 4);
        fx_rmsnorm(&e->kc, rows, cols, want, ld, w, 1e-6f, want, ld);
        DEVICE_RESULT(e, x, n, "rmsnorm",
                      fx_vk_rmsnorm(e->vk, rows, cols, (fx_vk_mat){b_, 0, ld}, (fx_vk_vec){bw, 0}, 1e-6f,
                                    (fx_vk_mat){b_, 0, ld}, &err_), want, TOL);
        memcpy(want, x, n * 4);
        fx_rmsnorm(&e->kc, rows - 1, 37, want + 5, ld, NULL, 1e-5f, want + 5, ld);
        DEVICE_RESULT(e, x, n, "rmsnorm no weight, offset view",
                      fx_vk_rmsnorm(e->vk, rows - 1, 37, (fx_vk_mat){b_, 5, ld}, (fx_vk_vec){0}, 1e-5f,
                                    (fx_vk_mat){b_, 5, ld}, &err_), want, TOL);
        memcpy(want, x, n * 4);
        fx_layernorm_modulate(&e->kc, rows, cols, want, ld, shift, scale, 1e-6f, want, ld);
        DEVICE_RESULT(e, x, n, "layernorm_modulate",
                      fx_vk_layernorm_modulate(e->vk, rows, cols, (fx_vk_mat){b_, 0, ld}, (fx_vk_vec){bs, 0},
                                               (fx_vk_vec){bc, 0}, 1e-6f, (fx_vk_mat){b_, 0, ld}, &err_), want, TOL);
        /* softmax with a large spread */
        memcpy(want, x, n * 4);
        for (size_t i = 0; i < n; i++) want[i] *= 10.0f;
        float *x10 = malloc(n * 4);
        memcpy(x10, want, n * 4);
        fx_softmax_rows(&e->kc, rows, 257, want, ld);
        DEVICE_RESULT(e, x10, n, "softmax",
                      fx_vk_softmax_rows(e->vk, rows, 257, (fx_vk_mat){b_, 0, ld}, &err_), want, TOL);
        free(x10);
    }
    fx_vk_buf_free(e->vk, bw), fx_vk_buf_free(e->vk, bs), fx_vk_buf_free(e->vk, bc);
    free(x), free(w), free(shift), free(scale), free(want);
}

static void elementwise(rowops_env *e) {
    const int64_t rows = 5, cols = 77, ld = 80;
    const size_t n = (size_t)(rows * ld);
    float *x = vkt_random(&e->r, n, 8.0f), *up = vkt_random(&e->r, n, 2.0f), *g = vkt_random(&e->r, (size_t)cols, 1.0f);
    float *want = malloc(n * 4);
    fx_vk_buf *bu = vkt_upload(e->vk, up, n, "up"), *bg = vkt_upload(e->vk, g, (size_t)cols, "gate");
    if (bu && bg) {
        memcpy(want, x, n * 4);
        fx_silu(&e->kc, (int64_t)n - 3, want + 3);
        DEVICE_RESULT(e, x, n, "silu", fx_vk_silu(e->vk, (int64_t)n - 3, (fx_vk_vec){b_, 3}, &err_), want, TOL);
        memcpy(want, x, n * 4);
        fx_swiglu(&e->kc, rows, cols, want, ld, up, ld, want, ld);
        DEVICE_RESULT(e, x, n, "swiglu (out = gate)",
                      fx_vk_swiglu(e->vk, rows, cols, (fx_vk_mat){b_, 0, ld}, (fx_vk_mat){bu, 0, ld},
                                   (fx_vk_mat){b_, 0, ld}, &err_), want, TOL);
        memcpy(want, x, n * 4);
        fx_gated_add(&e->kc, rows, cols, want, ld, g, up, ld);
        DEVICE_RESULT(e, x, n, "gated_add",
                      fx_vk_gated_add(e->vk, rows, cols, (fx_vk_mat){b_, 0, ld}, (fx_vk_vec){bg, 0},
                                      (fx_vk_mat){bu, 0, ld}, &err_), want, 0.0);
        memcpy(want, x, n * 4);
        fx_gated_add(&e->kc, rows, cols, want, ld, NULL, up, ld);
        DEVICE_RESULT(e, x, n, "add (no gate)",
                      fx_vk_gated_add(e->vk, rows, cols, (fx_vk_mat){b_, 0, ld}, (fx_vk_vec){0},
                                      (fx_vk_mat){bu, 0, ld}, &err_), want, 0.0);
    }
    fx_vk_buf_free(e->vk, bu), fx_vk_buf_free(e->vk, bg);
    free(x), free(up), free(g), free(want);
}

static void qk_norm_rope(rowops_env *e) {
    /* FLUX-like 3 axes (interleaved), Qwen-like 1 axis (half-split), and a
     * table that rotates fewer dims than the head, applied from row 3 of
     * the table (a view, as the image stream uses the joint table). */
    static const struct {
        fx_rope_layout layout;
        int n_axes, dims[3], head_dim, heads;
        double theta;
        int64_t row0;
        int norm;
    } cfg[] = {
        {FX_ROPE_INTERLEAVED, 3, {8, 12, 12}, 32, 3, 2000.0, 0, 1},
        {FX_ROPE_HALF_SPLIT, 1, {16}, 16, 4, 1e6, 0, 1},
        {FX_ROPE_INTERLEAVED, 2, {4, 8}, 20, 2, 10000.0, 3, 0},
        {FX_ROPE_HALF_SPLIT, 1, {12}, 16, 2, 1e4, 3, 1},
    };
    for (size_t ci = 0; ci < sizeof cfg / sizeof cfg[0]; ci++) {
        const int64_t seq = 11, rows = 9; /* rows past the view's table rows get the norm only */
        int32_t *pos = malloc(sizeof(int32_t) * (size_t)(cfg[ci].n_axes * seq));
        for (int64_t i = 0; i < cfg[ci].n_axes * seq; i++) pos[i] = (int32_t)(i * 7 % 23) - 3;
        fx_rope_table t;
        fx_err err = {0};
        REQUIRE_MSG(fx_rope_table_init(&t, pos, seq, cfg[ci].n_axes, cfg[ci].dims, cfg[ci].theta, cfg[ci].layout,
                                       &err) == FLUX_OK, "%s", err.msg);
        const int hd = cfg[ci].head_dim, heads = cfg[ci].heads;
        const int64_t ld = (int64_t)heads * hd + 3;
        const size_t n = (size_t)(rows * ld);
        float *x = vkt_random(&e->r, n, 2.0f), *w = vkt_random(&e->r, (size_t)hd, 1.0f), *want = malloc(n * 4);
        memcpy(want, x, n * 4);
        fx_rope_table view = t;
        const int64_t r0 = cfg[ci].row0;
        view.cos += r0 * (t.rot_dim / 2), view.sin += r0 * (t.rot_dim / 2), view.seq -= r0;
        fx_qk_norm_rope(&e->kc, want, ld, rows, heads, hd, cfg[ci].norm ? w : NULL, 1e-6f, &view);
        fx_vk_rope dr;
        fx_vk_buf *bw = vkt_upload(e->vk, w, (size_t)hd, "norm w");
        if (bw && fx_vk_rope_upload(e->vk, &t, &dr, &err) == FLUX_OK) {
            char name[64];
            snprintf(name, sizeof name, "qk_norm_rope %s %d", cfg[ci].layout ? "half-split" : "interleaved",
                     (int)ci);
            DEVICE_RESULT(e, x, n, name,
                          fx_vk_qk_norm_rope(e->vk, (fx_vk_mat){b_, 0, ld}, rows, heads, hd,
                                             (fx_vk_vec){cfg[ci].norm ? bw : NULL, 0}, 1e-6f, &dr, r0, &err_),
                          want, TOL);
            fx_vk_rope_free(e->vk, &dr);
        } else {
            CHECK_MSG(0, "rope upload: %s", err.msg);
        }
        fx_vk_buf_free(e->vk, bw);
        fx_rope_table_free(&t);
        free(pos), free(x), free(w), free(want);
    }
}

static void groupnorm(rowops_env *e, double offset) {
    const int64_t pixels = 700; /* three partial chunks of 256 pixels */
    const int channels = 32, groups = 8;
    const size_t n = (size_t)pixels * channels;
    float *x = vkt_random(&e->r, n, 1.0f);
    for (size_t i = 0; i < n; i++) x[i] += (float)(offset * (1 + (int)(i % channels) / 4));
    float *gamma = vkt_random(&e->r, (size_t)channels, 1.0f), *beta = vkt_random(&e->r, (size_t)channels, 1.0f);
    float mean[8], rstd[8], want_stats[16];
    fx_groupnorm_stats(&e->kc, pixels, channels, groups, x, 1e-6f, mean, rstd);
    memcpy(want_stats, mean, sizeof mean);
    memcpy(want_stats + 8, rstd, sizeof rstd);
    float *want = malloc(n * 4);
    fx_groupnorm(&e->kc, pixels, channels, groups, x, gamma, beta, 1e-6f, 1, want);

    fx_vk_buf *bx = vkt_upload(e->vk, x, n, "x"), *bs = vkt_upload(e->vk, NULL, 16, "stats");
    fx_vk_buf *bg = vkt_upload(e->vk, gamma, (size_t)channels, "gamma"), *bb = vkt_upload(e->vk, beta, (size_t)channels, "beta");
    fx_vk_buf *by = vkt_upload(e->vk, NULL, n, "y");
    fx_err err = {0};
    if (bx && bs && bg && bb && by) {
        CHECK(fx_vk_groupnorm_stats(e->vk, pixels, channels, groups, (fx_vk_vec){bx, 0}, 1e-6f, (fx_vk_vec){bs, 0},
                                    &err) == FLUX_OK);
        float *got = vkt_download(e->vk, bs, 0, 16);
        if (got) {
            /* relative per value: mean and rstd have their own scales */
            double worst = 0;
            for (int i = 0; i < 16; i++) {
                double rel = fabs(got[i] - want_stats[i]) / fabs(want_stats[i]);
                if (!(rel <= worst)) worst = rel;
            }
            printf("    groupnorm stats (mean offset %g): max rel err %.3g (tol 2e-5)\n", offset, worst);
            CHECK(worst <= 2e-5);
        }
        free(got);
        CHECK(fx_vk_groupnorm(e->vk, pixels, channels, groups, (fx_vk_vec){bx, 0}, (fx_vk_vec){bg, 0},
                              (fx_vk_vec){bb, 0}, 1e-6f, 1, (fx_vk_vec){by, 0}, &err) == FLUX_OK);
        got = vkt_download(e->vk, by, 0, n);
        if (got) vkt_check_close(offset ? "groupnorm + silu (large mean)" : "groupnorm + silu", got, want, n,
                                 offset ? 1e-4 : TOL);
        free(got);
        /* apply without affine, no SiLU, in place, with the device stats */
        float *want2 = malloc(n * 4);
        fx_groupnorm_apply(&e->kc, pixels, channels, groups, x, mean, rstd, NULL, NULL, 0, want2);
        CHECK(fx_vk_groupnorm_apply(e->vk, pixels, channels, groups, (fx_vk_vec){bx, 0}, (fx_vk_vec){bs, 0},
                                    (fx_vk_vec){0}, (fx_vk_vec){0}, 0, (fx_vk_vec){bx, 0}, &err) == FLUX_OK);
        got = vkt_download(e->vk, bx, 0, n);
        if (got) vkt_check_close("groupnorm apply in place", got, want2, n, offset ? 1e-4 : TOL);
        free(got), free(want2);
    }
    fx_vk_buf_free(e->vk, bx), fx_vk_buf_free(e->vk, bs), fx_vk_buf_free(e->vk, bg), fx_vk_buf_free(e->vk, bb);
    fx_vk_buf_free(e->vk, by);
    free(x), free(gamma), free(beta), free(want);
}

static void rowops_all(uint64_t max_binding, int gpu_tuning) {
    rowops_env e;
    if (!env_open(&e, max_binding, gpu_tuning)) return;
    norms(&e);
    elementwise(&e);
    qk_norm_rope(&e);
    groupnorm(&e, 0.0);
    groupnorm(&e, 100.0);
    vkt_check_passes(e.vk, "row ops", 15, max_binding, 40);
    env_close(&e);
}

TEST(vk_rowops) { rowops_all(0, 0); }
/* The GPU workgroup sizes (256-wide reductions and grids). */
TEST(vk_rowops_gpu_workgroups) { rowops_all(0, 1); }
/* 4 KiB bindings: every operation in passes of rows / chunks. */
TEST(vk_rowops_split_bindings) { rowops_all(4096, 0); }

/* ------------------------------------------------------------------------ */
/* Conversions, bit-exact                                                   */
/* ------------------------------------------------------------------------ */

static fx_vk_buf *raw_upload(fx_vk *vk, const void *p, size_t bytes) {
    fx_vk_buf *b = NULL;
    fx_err err = {0};
    if (fx_vk_buf_new(vk, bytes, "raw", &b, &err) != FLUX_OK || fx_vk_upload(vk, b, 0, p, bytes, &err) != FLUX_OK)
        fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
    return b;
}

TEST(vk_convert_exact) {
    fx_vk *vk = vkt_open(NULL);
    if (!vk) return;
    fx_err err = {0};
    /* every 16-bit pattern, widened from element offset 2 */
    const size_t nh = 65536;
    uint16_t *h = malloc((nh + 2) * 2);
    for (size_t i = 0; i < nh; i++) h[i + 2] = (uint16_t)i;
    h[0] = h[1] = 0;
    fx_vk_buf *bh = raw_upload(vk, h, (nh + 2) * 2), *bf = vkt_upload(vk, NULL, nh, "f32");
    uint32_t *got = malloc(nh * 4);
    for (int f16 = 0; f16 < 2 && bh && bf; f16++) {
        CHECK(fx_vk_convert(vk, (int64_t)nh, bh, 2, f16 ? FX_DTYPE_F16 : FX_DTYPE_BF16, bf, 0, FX_DTYPE_F32, &err) ==
              FLUX_OK);
        CHECK(fx_vk_download(vk, bf, 0, got, nh * 4, &err) == FLUX_OK);
        size_t bad = 0;
        for (size_t i = 0; i < nh; i++) {
            float want = f16 ? fx_f16_bits_to_f32((uint16_t)i) : fx_bf16_bits_to_f32((uint16_t)i);
            bad += got[i] != fx_f32_bits(want);
        }
        printf("    %s -> f32: %zu of 65536 patterns differ\n", f16 ? "f16" : "bf16", bad);
        CHECK_EQ_INT(bad, 0);
    }
    /* narrowing: edge cases plus random bit patterns, odd count */
    const size_t nf = 20001;
    uint32_t *fb = malloc(nf * 4);
    const uint32_t edge[] = {0, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00001u, 0xffa00000u, 0x00000001u,
                             0x007fffffu, 0x00800000u, 0x33000000u, 0x33000001u, 0x387fe000u, 0x38800000u,
                             0x477ff000u, 0x477fefffu, 0x3f808000u, 0x3f818000u, 0x3f800fffu, 0x3f801000u,
                             0x3f803000u, 0x7f7fffffu};
    fx_test_rng r;
    fx_test_rng_seed(&r, 9);
    for (size_t i = 0; i < nf; i++)
        fb[i] = i < sizeof edge / sizeof edge[0] ? edge[i] : (uint32_t)fx_test_rng_u64(&r);
    fx_vk_buf *bs = raw_upload(vk, fb, nf * 4), *bd = raw_upload(vk, h, (nf + 1) * 2);
    uint16_t *out = malloc((nf + 1) * 2);
    for (int f16 = 0; f16 < 2 && bs && bd; f16++) {
        CHECK(fx_vk_convert(vk, (int64_t)nf, bs, 0, FX_DTYPE_F32, bd, 0, f16 ? FX_DTYPE_F16 : FX_DTYPE_BF16, &err) ==
              FLUX_OK);
        CHECK(fx_vk_download(vk, bd, 0, out, (nf + 1) * 2, &err) == FLUX_OK);
        size_t bad = 0;
        for (size_t i = 0; i < nf; i++) {
            float v = fx_bits_f32(fb[i]);
            bad += out[i] != (f16 ? fx_f32_to_f16_bits(v) : fx_f32_to_bf16_bits(v));
        }
        printf("    f32 -> %s: %zu of %zu values differ\n", f16 ? "f16" : "bf16", bad, nf);
        CHECK_EQ_INT(bad, 0);
        CHECK_EQ_INT(out[nf], h[nf]); /* the odd count leaves the next element alone */
    }
    fx_vk_buf_free(vk, bh), fx_vk_buf_free(vk, bf), fx_vk_buf_free(vk, bs), fx_vk_buf_free(vk, bd);
    free(h), free(got), free(fb), free(out);
    vkt_close(vk);
}
