/*
 * test_vk_ops.c — the backend seam (src/ops): every fx_op_* on the Vulkan
 * backend against the same call on the CPU backend with the scalar
 * kernels, through the seam's own buffers, views and weights (what the
 * model stages call). Tolerance 1e-4 of max(1, max|want|) (f32
 * accumulation both sides; exp and rsqrt differ by a few ulp on the device).
 * The Vulkan side runs under the validation layer (when installed; under
 * CI=true it must be) and fails on any validation error.
 */
#include "vk_test.h"

#include "src/ops/ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define TOL 1e-4

typedef struct pair {
    fx_kctx kc;
    fx_ops *cpu, *dev;
} pair;

/* Both backends; 0 (skipped or failed) without a Vulkan device. */
static int open_pair(pair *p, uint64_t max_binding) {
    memset(p, 0, sizeof *p);
    vkt_kctx(&p->kc);
    fx_err err = {0};
    fx_ops_opts co = {.backend = "cpu", .device = -1};
    if (fx_ops_open(&co, &p->kc, &p->cpu, &err) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "CPU backend: %s", err.msg);
        return 0;
    }
    const char *dev = getenv("FLUX_VK_DEVICE");
    fx_ops_opts vo = {.backend = "vulkan", .device = dev && *dev ? atoi(dev) : -1, .validation = 1,
                      .max_binding_bytes = max_binding};
    if (fx_ops_open(&vo, &p->kc, &p->dev, &err) != FLUX_OK) {
        char reason[FX_ERR_MSG_MAX + 32];
        snprintf(reason, sizeof reason, "no Vulkan device: %s", err.msg);
        fx_test_skip(reason);
        return 0;
    }
    CHECK(!strcmp(fx_ops_backend(p->dev), "vulkan"));
    return 1;
}

static void close_pair(pair *p) {
    if (p->dev) {
        fx_err err = {0};
        if (fx_ops_sync(p->dev, &err) != FLUX_OK) fx_test_fail(__FILE__, __LINE__, "sync: %s", err.msg);
        const char *first;
        int n = fx_ops_device_errors(p->dev, &first);
        if (n) fx_test_fail(__FILE__, __LINE__, "%d Vulkan validation error(s), first: %s", n, first);
    }
    fx_ops_close(p->dev);
    fx_ops_close(p->cpu);
    vkt_kctx_free(&p->kc);
}

/* The same data in a buffer of each backend. */
typedef struct twin {
    fx_buf *c, *d;
    int64_t n;
} twin;

static twin twin_new(pair *p, const float *host, int64_t n, const char *what) {
    twin t = {NULL, NULL, n};
    fx_err err = {0};
    float *zeros = host ? NULL : calloc((size_t)n, sizeof(float));
    if (!host) host = zeros;
    if (fx_ops_vector(p->cpu, host, n, what, &t.c, &err) || fx_ops_vector(p->dev, host, n, what, &t.d, &err))
        fx_test_fail(__FILE__, __LINE__, "%s: %s", what, err.msg);
    free(zeros);
    return t;
}

static twin twin_random(pair *p, fx_test_rng *r, int64_t n, float scale, const char *what) {
    float *h = vkt_random(r, (size_t)n, scale);
    twin t = twin_new(p, h, n, what);
    free(h);
    return t;
}

static void twin_free(pair *p, twin *t) {
    fx_buf_free(p->cpu, t->c);
    fx_buf_free(p->dev, t->d);
}

static fx_view vc(twin t, int64_t off, int64_t ld) { return (fx_view){t.c, off, ld}; }
static fx_view vd(twin t, int64_t off, int64_t ld) { return (fx_view){t.d, off, ld}; }

/* Both buffers read back and compared over all their floats. */
static void twin_check(pair *p, twin t, const char *what, double tol) {
    float *want = malloc((size_t)t.n * sizeof(float)), *got = malloc((size_t)t.n * sizeof(float));
    fx_err err = {0};
    if (!want || !got || fx_buf_read(p->cpu, t.c, 0, want, t.n, &err) || fx_buf_read(p->dev, t.d, 0, got, t.n, &err))
        fx_test_fail(__FILE__, __LINE__, "%s: read back: %s", what, err.msg);
    else
        vkt_check_close(what, got, want, (size_t)t.n, tol);
    free(want);
    free(got);
}

static void ok(flux_status st, const fx_err *err, const char *what) {
    if (st) fx_test_fail(__FILE__, __LINE__, "%s: %s", what, err->msg);
}

/* A bf16 weight [n, k] (host copy kept for the CPU side). */
static uint16_t *bf16_weight(fx_test_rng *r, int64_t n, int64_t k) {
    float *f = vkt_random(r, (size_t)(n * k), 0.5f);
    uint16_t *w = malloc((size_t)(n * k) * sizeof *w);
    for (int64_t i = 0; i < n * k; i++) w[i] = fx_f32_to_bf16_bits(f[i]);
    free(f);
    return w;
}

/* The host factors of the adapter-term chain of linear_cases (k = 72). */
typedef struct term_factors {
    float *a, *b, *dw, *w1, *w1f, *c, *w2a;
    uint16_t *w2;
} term_factors;

static void factors_new(fx_test_rng *r, int64_t k, term_factors *f) {
    f->a = vkt_random(r, (size_t)5 * k, 0.5f), f->b = vkt_random(r, (size_t)20 * 5, 0.5f);
    f->dw = vkt_random(r, (size_t)31 * k, 0.2f);
    f->w1 = vkt_random(r, 4 * 3, 0.5f), f->w1f = vkt_random(r, 5 * 3, 0.5f), f->c = vkt_random(r, 5 * 3, 0.5f);
    f->w2a = vkt_random(r, 3 * 24, 0.5f);
    f->w2 = bf16_weight(r, 6, 24);
}

static float *dup_floats(const float *x, size_t n) {
    float *y = malloc(n * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

static void factors_copy(const term_factors *f, int64_t k, term_factors *g) {
    g->a = dup_floats(f->a, (size_t)5 * k), g->b = dup_floats(f->b, 100), g->dw = dup_floats(f->dw, (size_t)31 * k);
    g->w1 = dup_floats(f->w1, 12), g->w1f = dup_floats(f->w1f, 15), g->c = dup_floats(f->c, 15);
    g->w2a = dup_floats(f->w2a, 72);
    g->w2 = malloc(6 * 24 * sizeof *g->w2);
    memcpy(g->w2, f->w2, 6 * 24 * sizeof *g->w2);
}

static void fill_nan(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}

static void factors_poison(term_factors *f, int64_t k) {
    fill_nan(f->a, (size_t)5 * k), fill_nan(f->b, 100), fill_nan(f->dw, (size_t)31 * k), fill_nan(f->w1, 12);
    fill_nan(f->w1f, 15), fill_nan(f->c, 15), fill_nan(f->w2a, 72);
    memset(f->w2, 0xff, 6 * 24 * sizeof *f->w2); /* bf16 NaN */
}

static void factors_free(term_factors *f) {
    free(f->a), free(f->b), free(f->dw), free(f->w1), free(f->w1f), free(f->c), free(f->w2a), free(f->w2);
}

/* t[0..3] chained: a low-rank term on output columns [3, 23), a dense one
 * on [10, 41), a LoKr with a whole W2 on [30, 47) (its rows 5.. of W1 ⊗ W2:
 * W1 [4, 3], W2 [6, 24] bf16) and one with W2 = c·a on [0, 20) (rows 2..,
 * W1 [5, 3], c [5, 3], a [3, 24]); x rows are ld apart, not k (the LoKr
 * copy). */
static void chain(const term_factors *f, int64_t k, fx_delta t[4]) {
    t[0] = (fx_delta){.kind = FX_DELTA_LOWRANK, .scale = 0.7f, .row0 = 3, .rows = 20,
                      .a = {.data = f->a, .dtype = FX_DTYPE_F32, .n = 5, .k = k, .ld = k},
                      .b = {.data = f->b, .dtype = FX_DTYPE_F32, .n = 20, .k = 5, .ld = 5}, .next = &t[1]};
    t[1] = (fx_delta){.kind = FX_DELTA_DENSE, .scale = -0.6f, .row0 = 10, .rows = 31,
                      .a = {.data = f->dw, .dtype = FX_DTYPE_F32, .n = 31, .k = k, .ld = k}, .next = &t[2]};
    t[2] = (fx_delta){.kind = FX_DELTA_KRON, .scale = 1.3f, .row0 = 30, .rows = 17, .kron_skip = 5,
                      .a = {.data = f->w2, .dtype = FX_DTYPE_BF16, .n = 6, .k = 24, .ld = 24},
                      .b = {.data = f->w1, .dtype = FX_DTYPE_F32, .n = 4, .k = 3, .ld = 3}, .next = &t[3]};
    t[3] = (fx_delta){.kind = FX_DELTA_KRON, .scale = 0.8f, .row0 = 0, .rows = 20, .kron_skip = 2,
                      .a = {.data = f->w2a, .dtype = FX_DTYPE_F32, .n = 3, .k = 24, .ld = 24},
                      .b = {.data = f->w1f, .dtype = FX_DTYPE_F32, .n = 5, .k = 3, .ld = 3},
                      .c = {.data = f->c, .dtype = FX_DTYPE_F32, .n = 5, .k = 3, .ld = 3}};
}

static void linear_cases(uint64_t max_binding) {
    pair p;
    if (!open_pair(&p, max_binding)) return close_pair(&p);
    fx_test_rng r = {7};
    fx_err err = {0};
    const int64_t m = 37, k = 72, n = 50, ld = k + n + 8; /* x and y: column slices of one matrix */
    uint16_t *wh = bf16_weight(&r, n, k);
    fx_weight w = {.data = wh, .dtype = FX_DTYPE_BF16, .n = n, .k = k, .ld = k};
    fx_opw wc, wd;
    ok(fx_ops_weight(p.cpu, &w, "w", &wc, &err), &err, "weight cpu");
    ok(fx_ops_weight(p.dev, &w, "w", &wd, &err), &err, "weight dev");
    twin u = twin_random(&p, &r, m * ld, 1.0f, "u");
    twin bias = twin_random(&p, &r, n, 0.3f, "bias"), gate = twin_random(&p, &r, n, 1.0f, "gate");
    /* store into columns [k + 8, k + 8 + n) of the rows x lives in */
    ok(fx_op_linear(p.cpu, m, vc(u, 0, ld), &wc, vc(u, k + 8, ld), NULL, &err), &err, "linear cpu");
    ok(fx_op_linear(p.dev, m, vd(u, 0, ld), &wd, vd(u, k + 8, ld), NULL, &err), &err, "linear dev");
    twin_check(&p, u, "linear store (column slices of one matrix)", TOL);
    for (int mode = FX_EPI_ACCUMULATE; mode <= FX_EPI_GATED_ACCUMULATE; mode++) {
        fx_op_epi ec = {mode, vc(bias, 0, 0), vc(gate, 0, 0)}, ed = {mode, vd(bias, 0, 0), vd(gate, 0, 0)};
        ok(fx_op_linear(p.cpu, m, vc(u, 0, ld), &wc, vc(u, k + 8, ld), &ec, &err), &err, "linear cpu");
        ok(fx_op_linear(p.dev, m, vd(u, 0, ld), &wd, vd(u, k + 8, ld), &ed, &err), &err, "linear dev");
        twin_check(&p, u, mode == FX_EPI_ACCUMULATE ? "linear accumulate + bias" : "linear gated accumulate + bias",
                   TOL);
    }
    /* adapter terms (LoRA / LyCORIS), chained, through every epilogue; the
     * device's host factors are a copy (poisoned below) */
    term_factors fc, fdv;
    factors_new(&r, k, &fc);
    factors_copy(&fc, k, &fdv);
    fx_delta tc[4], td[4];
    chain(&fc, k, tc), chain(&fdv, k, td);
    char why[160];
    for (const fx_delta *d = tc; d; d = d->next) CHECK_MSG(!fx_delta_check(d, n, k, why, sizeof why), "%s", why);
    fx_ops_weight_set_terms(p.cpu, &wc, tc), fx_ops_weight_set_terms(p.dev, &wd, td);
    for (int mode = FX_EPI_STORE; mode <= FX_EPI_GATED_ACCUMULATE; mode++) {
        fx_op_epi ec = {mode, vc(bias, 0, 0), vc(gate, 0, 0)}, ed = {mode, vd(bias, 0, 0), vd(gate, 0, 0)};
        ok(fx_op_linear(p.cpu, m, vc(u, 0, ld), &wc, vc(u, k + 8, ld), &ec, &err), &err, "linear + terms cpu");
        ok(fx_op_linear(p.dev, m, vd(u, 0, ld), &wd, vd(u, k + 8, ld), &ed, &err), &err, "linear + terms dev");
        twin_check(&p, u, mode == FX_EPI_STORE ? "linear + LoRA, LoKr terms, store" : mode == FX_EPI_ACCUMULATE ?
                   "linear + LoRA, LoKr terms, accumulate" : "linear + LoRA, LoKr terms, gated accumulate", TOL);
    }
    /* the terms change (rescaled, the dense one removed): the device keeps
     * the factors it has (its host copies are NaN from now on, so an upload
     * would show) with the new scales: the CPU's result, and bit for bit
     * that of a fresh registration of the changed terms */
    tc[0].scale = td[0].scale = -1.9f, tc[2].scale = td[2].scale = 0.25f;
    tc[0].next = &tc[2], td[0].next = &td[2];
    fx_ops_weight_set_terms(p.cpu, &wc, tc), fx_ops_weight_set_terms(p.dev, &wd, td);
    factors_poison(&fdv, k);
    fx_opw fresh;
    ok(fx_ops_weight(p.dev, &w, "w fresh", &fresh, &err), &err, "weight dev");
    fx_ops_weight_set_terms(p.dev, &fresh, tc);
    twin u2 = twin_new(&p, NULL, m * ld, "u2");
    float *h = malloc((size_t)(m * ld) * sizeof *h), *h2 = malloc((size_t)(m * ld) * sizeof *h2);
    ok(fx_buf_read(p.dev, u.d, 0, h, m * ld, &err), &err, "read u");
    ok(fx_buf_write(p.dev, u2.d, 0, h, m * ld, &err), &err, "write u2");
    fx_op_epi ec = {FX_EPI_GATED_ACCUMULATE, vc(bias, 0, 0), vc(gate, 0, 0)};
    fx_op_epi ed = {FX_EPI_GATED_ACCUMULATE, vd(bias, 0, 0), vd(gate, 0, 0)};
    ok(fx_op_linear(p.cpu, m, vc(u, 0, ld), &wc, vc(u, k + 8, ld), &ec, &err), &err, "changed terms cpu");
    ok(fx_op_linear(p.dev, m, vd(u, 0, ld), &wd, vd(u, k + 8, ld), &ed, &err), &err, "changed terms dev");
    ok(fx_op_linear(p.dev, m, vd(u2, 0, ld), &fresh, vd(u2, k + 8, ld), &ed, &err), &err, "fresh terms dev");
    twin_check(&p, u, "linear + resident terms rescaled, one removed", TOL);
    ok(fx_buf_read(p.dev, u.d, 0, h, m * ld, &err), &err, "read u");
    ok(fx_buf_read(p.dev, u2.d, 0, h2, m * ld, &err), &err, "read u2");
    CHECK_MSG(!memcmp(h, h2, (size_t)(m * ld) * sizeof *h), "resident terms after a change differ from fresh ones");
    free(h), free(h2);
    twin_free(&p, &u2);
    fx_ops_weight_free(p.dev, &fresh);
    fx_ops_weight_set_terms(p.cpu, &wc, NULL), fx_ops_weight_set_terms(p.dev, &wd, NULL);
    factors_free(&fc), factors_free(&fdv);
    /* overlapping x and y are refused, not raced */
    CHECK_EQ_INT(fx_op_linear(p.dev, m, vd(u, 0, ld), &wd, vd(u, 4, ld), NULL, &err), FLUX_ERR_INVALID_ARG);
    /* a view past its buffer names it */
    CHECK_EQ_INT(fx_op_linear(p.dev, m + 1, vd(u, 0, ld), &wd, vd(u, k + 8, ld), NULL, &err), FLUX_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "u") != NULL);
    fx_ops_weight_free(p.dev, &wd);
    twin_free(&p, &u), twin_free(&p, &bias), twin_free(&p, &gate);
    free(wh);
    close_pair(&p);
}

TEST(vk_ops_linear_matches_cpu) { linear_cases(0); }

/* A 4 KiB binding limit: every operand is bound as several windows. */
TEST(vk_ops_linear_windows_match_cpu) { linear_cases(4096); }

TEST(vk_ops_attention_matches_cpu) {
    pair p;
    if (!open_pair(&p, 0)) return close_pair(&p);
    fx_test_rng r = {11};
    fx_err err = {0};
    const int64_t sq = 19, sk = 23;
    const int hq = 4, hkv = 2, d = 16;
    const int64_t ld = (int64_t)(hq + 2 * hkv + hq) * d; /* [q | k | v | o] per row, as the text encoder */
    twin u = twin_random(&p, &r, sk * ld, 1.0f, "qkvo");
    uint8_t mask[23];
    for (int j = 0; j < sk; j++) mask[j] = j < 17; /* right padding */
    fx_buf *mc, *md;
    ok(fx_ops_mask(p.cpu, mask, sk, &mc, &err), &err, "mask cpu");
    ok(fx_ops_mask(p.dev, mask, sk, &md, &err), &err, "mask dev");
    for (int causal = 0; causal < 2; causal++) {
        fx_op_attn ac = {.sq = sq, .sk = sk, .hq = hq, .hkv = hkv, .d = d, .q = vc(u, 0, ld),
                         .k = vc(u, hq * d, ld), .v = vc(u, (hq + hkv) * d, ld), .o = vc(u, (hq + 2 * hkv) * d, ld),
                         .scale = 0.25f, .causal = causal, .causal_offset = 4, .key_mask = mc};
        fx_op_attn ad = ac;
        ad.q = vd(u, 0, ld), ad.k = vd(u, hq * d, ld), ad.v = vd(u, (hq + hkv) * d, ld);
        ad.o = vd(u, (hq + 2 * hkv) * d, ld), ad.key_mask = md;
        ok(fx_op_attention(p.cpu, &ac, &err), &err, "attention cpu");
        ok(fx_op_attention(p.dev, &ad, &err), &err, "attention dev");
        twin_check(&p, u, causal ? "attention causal + key mask, GQA" : "attention key mask, GQA", TOL);
    }
    fx_buf_free(p.cpu, mc), fx_buf_free(p.dev, md);
    twin_free(&p, &u);
    close_pair(&p);
}

TEST(vk_ops_norms_rope_activations_match_cpu) {
    pair p;
    if (!open_pair(&p, 0)) return close_pair(&p);
    fx_test_rng r = {13};
    fx_err err = {0};
    const int64_t rows = 21, cols = 96, ld = 2 * cols + 8;
    const int heads = 3, hd = 32;
    twin x = twin_random(&p, &r, rows * ld, 2.0f, "x");
    twin wv = twin_random(&p, &r, cols, 1.0f, "w");
    twin sh = twin_random(&p, &r, cols, 0.5f, "shift"), sc = twin_random(&p, &r, cols, 0.5f, "scale");

    ok(fx_op_rmsnorm(p.cpu, rows, cols, vc(x, 0, ld), vc(wv, 0, 0), 1e-6f, vc(x, cols, ld), &err), &err, "cpu");
    ok(fx_op_rmsnorm(p.dev, rows, cols, vd(x, 0, ld), vd(wv, 0, 0), 1e-6f, vd(x, cols, ld), &err), &err, "dev");
    twin_check(&p, x, "rmsnorm", TOL);
    ok(fx_op_layernorm_modulate(p.cpu, rows, cols, vc(x, 0, ld), vc(sh, 0, 0), vc(sc, 0, 0), 1e-6f, vc(x, cols, ld),
                                &err), &err, "cpu");
    ok(fx_op_layernorm_modulate(p.dev, rows, cols, vd(x, 0, ld), vd(sh, 0, 0), vd(sc, 0, 0), 1e-6f, vd(x, cols, ld),
                                &err), &err, "dev");
    twin_check(&p, x, "layernorm_modulate", TOL);

    /* RoPE table of 30 rows (3 axes), applied from table row 6 on */
    int32_t pos[3 * 30];
    for (int i = 0; i < 90; i++) pos[i] = (i * 7) % 23;
    int axes[3] = {8, 12, 12};
    fx_rope_table t;
    ok(fx_rope_table_init(&t, pos, 30, 3, axes, 10000.0, FX_ROPE_INTERLEAVED, &err), &err, "rope table");
    fx_oprope rc, rd;
    ok(fx_ops_rope(p.cpu, &t, &rc, &err), &err, "rope cpu");
    ok(fx_ops_rope(p.dev, &t, &rd, &err), &err, "rope dev");
    twin nq = twin_random(&p, &r, hd, 1.0f, "norm_q");
    ok(fx_op_qk_norm_rope(p.cpu, vc(x, 0, ld), rows, heads, hd, vc(nq, 0, 0), 1e-6f, &rc, 6, &err), &err, "cpu");
    ok(fx_op_qk_norm_rope(p.dev, vd(x, 0, ld), rows, heads, hd, vd(nq, 0, 0), 1e-6f, &rd, 6, &err), &err, "dev");
    twin_check(&p, x, "qk_norm_rope (table rows 6..)", TOL);
    CHECK_EQ_INT(fx_op_qk_norm_rope(p.dev, vd(x, 0, ld), rows, heads, hd, fx_none, 1e-6f, &rd, 10, &err),
                 FLUX_ERR_INVALID_ARG); /* rows past the table */

    ok(fx_op_swiglu(p.cpu, rows, cols, vc(x, 0, ld), vc(x, cols, ld), vc(x, 0, ld), &err), &err, "cpu");
    ok(fx_op_swiglu(p.dev, rows, cols, vd(x, 0, ld), vd(x, cols, ld), vd(x, 0, ld), &err), &err, "dev");
    twin_check(&p, x, "swiglu", TOL);
    ok(fx_op_gated_add(p.cpu, rows, cols, vc(x, 0, ld), vc(sc, 0, 0), vc(x, cols, ld), &err), &err, "cpu");
    ok(fx_op_gated_add(p.dev, rows, cols, vd(x, 0, ld), vd(sc, 0, 0), vd(x, cols, ld), &err), &err, "dev");
    twin_check(&p, x, "gated_add", TOL);
    ok(fx_op_silu(p.cpu, 3 * cols, vc(x, 5, 0), &err), &err, "cpu");
    ok(fx_op_silu(p.dev, 3 * cols, vd(x, 5, 0), &err), &err, "dev");
    twin_check(&p, x, "silu", TOL);
    /* strided copy between column blocks of fresh data: exact */
    twin cp = twin_random(&p, &r, rows * ld, 1.0f, "copy");
    ok(fx_op_copy(p.cpu, rows, cols - 3, vc(cp, 1, ld), vc(cp, cols + 2, ld), &err), &err, "cpu");
    ok(fx_op_copy(p.dev, rows, cols - 3, vd(cp, 1, ld), vd(cp, cols + 2, ld), &err), &err, "dev");
    twin_check(&p, cp, "copy (strided rows)", 0.0);
    twin_free(&p, &cp);

    fx_ops_rope_free(p.dev, &rd);
    fx_rope_table_free(&t);
    twin_free(&p, &x), twin_free(&p, &wv), twin_free(&p, &sh), twin_free(&p, &sc), twin_free(&p, &nq);
    close_pair(&p);
}

TEST(vk_ops_groupnorm_conv2d_match_cpu) {
    pair p;
    if (!open_pair(&p, 0)) return close_pair(&p);
    fx_test_rng r = {17};
    fx_err err = {0};
    const int hh = 9, ww = 7, cin = 8, cout = 12;
    twin x = twin_random(&p, &r, (int64_t)hh * ww * cin, 1.5f, "x");
    twin gm = twin_random(&p, &r, cin, 1.0f, "gamma"), bt = twin_random(&p, &r, cin, 0.5f, "beta");
    twin y = twin_new(&p, NULL, (int64_t)hh * ww * cin, "y");
    ok(fx_op_groupnorm(p.cpu, hh * ww, cin, 4, vc(x, 0, 0), vc(gm, 0, 0), vc(bt, 0, 0), 1e-6f, 1, vc(y, 0, 0), &err),
       &err, "cpu");
    ok(fx_op_groupnorm(p.dev, hh * ww, cin, 4, vd(x, 0, 0), vd(gm, 0, 0), vd(bt, 0, 0), 1e-6f, 1, vd(y, 0, 0), &err),
       &err, "dev");
    twin_check(&p, y, "groupnorm + silu", TOL);
    /* the host strips are the CPU's: the device says so (the VAE then runs whole tensors) */
    fx_buf *wrapped = NULL;
    float host_row[4];
    CHECK_EQ_INT(fx_buf_wrap(p.dev, host_row, 4, "host row", &wrapped, &err), FLUX_ERR_UNSUPPORTED);
    CHECK(wrapped == NULL && !fx_ops_on_host(p.dev));

    for (int up = 0; up < 2; up++) {
        fx_conv2d_geom g = {.h = hh, .w = ww, .cin = cin, .cout = cout, .kh = 3, .kw = 3, .stride = 1,
                            .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .upsample2x = up};
        int ho, wo;
        fx_conv2d_out_size(&g, &ho, &wo);
        uint16_t *wh = bf16_weight(&r, cout, (int64_t)cin * 9);
        fx_weight w = {.data = wh, .dtype = FX_DTYPE_BF16, .n = cout, .k = (int64_t)cin * 9, .ld = (int64_t)cin * 9};
        fx_opw wc, wd;
        ok(fx_ops_conv_weight(p.cpu, &g, &w, "conv", &wc, &err), &err, "conv weight cpu");
        ok(fx_ops_conv_weight(p.dev, &g, &w, "conv", &wd, &err), &err, "conv weight dev");
        twin b = twin_random(&p, &r, cout, 0.2f, "bias");
        twin out = twin_random(&p, &r, (int64_t)ho * wo * cout, 1.0f, "out");
        fx_op_epi ec = {FX_EPI_ACCUMULATE, vc(b, 0, 0), fx_none}, ed = {FX_EPI_ACCUMULATE, vd(b, 0, 0), fx_none};
        ok(fx_op_conv2d(p.cpu, &g, vc(x, 0, 0), &wc, &ec, vc(out, 0, 0), &err), &err, "conv cpu");
        ok(fx_op_conv2d(p.dev, &g, vd(x, 0, 0), &wd, &ed, vd(out, 0, 0), &err), &err, "conv dev");
        twin_check(&p, out, up ? "conv2d 3x3 upsample x2 + bias + residual" : "conv2d 3x3 + bias + residual", TOL);
        fx_ops_weight_free(p.dev, &wd);
        twin_free(&p, &b), twin_free(&p, &out);
        free(wh);
    }
    twin_free(&p, &x), twin_free(&p, &gm), twin_free(&p, &bt), twin_free(&p, &y);
    close_pair(&p);
}
