/*
 * ops.c — choosing the backend from the list and forwarding every
 * operation to it (ops_internal.h). Storage bounds are checked here, once
 * for every backend, so a wrong view is an error naming the buffer, not a
 * stray write on any side.
 */
#include "ops_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The backends, in the order --backend auto tries them: a device first,
 * the CPU (which always opens) last. A new backend adds its line here. */
static const fx_backend *const backends[] = {
    &fx_backend_vulkan,
    &fx_backend_cpu,
};
enum { NBACKENDS = sizeof backends / sizeof backends[0] };

struct fx_ops {
    const fx_backend *be;
    void *ctx;                  /* the backend's, from be->open */
    const fx_kctx *kc;
};

static const fx_backend *backend_named(const char *name) {
    for (int i = 0; i < NBACKENDS; i++)
        if (!strcmp(backends[i]->name, name)) return backends[i];
    return NULL;
}

static flux_status opened(const fx_backend *be, void *ctx, const fx_kctx *kc, fx_ops **out, fx_err *err) {
    fx_ops *ops = calloc(1, sizeof *ops);
    if (!ops) {
        be->close(ctx);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (backend)");
    }
    ops->be = be, ops->ctx = ctx, ops->kc = kc;
    *out = ops;
    return FLUX_OK;
}

flux_status fx_ops_open(const fx_ops_opts *o, const fx_kctx *kc, fx_ops **out, fx_err *err) {
    *out = NULL;
    const char *want = o->backend && *o->backend ? o->backend : "auto";
    void *ctx = NULL;
    if (strcmp(want, "auto")) {
        const fx_backend *be = backend_named(want);
        if (!be) {
            char names[128] = "auto";
            for (int i = 0; i < NBACKENDS; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), ", %s", backends[i]->name);
            return fx_fail(err, FLUX_ERR_INVALID_ARG, "--backend %s: not a backend (%s)", want, names);
        }
        fx_err berr = {0};
        flux_status st = be->open(o, kc, 0, &ctx, &berr);
        if (st) return fx_fail(err, st, "--backend %s: %s", want, berr.msg);
        fx_log(o->log, 1, "flux: backend %s", be->describe(ctx));
        return opened(be, ctx, kc, out, err);
    }
    char skipped[2 * FX_ERR_MSG_MAX] = ""; /* why the backends before the one chosen did not open */
    flux_status st = FLUX_ERR_UNSUPPORTED;
    for (int i = 0; i < NBACKENDS; i++) {
        fx_err berr = {0};
        st = backends[i]->open(o, kc, 1, &ctx, &berr);
        if (st == FLUX_OK) {
            if (skipped[0]) fx_log(o->log, 1, "flux: backend auto: running on %s (%s)", backends[i]->title, skipped);
            else fx_log(o->log, 1, "flux: backend %s", backends[i]->describe(ctx));
            return opened(backends[i], ctx, kc, out, err);
        }
        snprintf(skipped + strlen(skipped), sizeof skipped - strlen(skipped), "%s%s", skipped[0] ? "; " : "",
                 berr.msg);
    }
    return fx_fail(err, st, "no backend opened: %s", skipped);
}

void fx_ops_close(fx_ops *ops) {
    if (!ops) return;
    ops->be->close(ops->ctx);
    free(ops);
}

const char *fx_ops_backend(const fx_ops *ops) { return ops->be->name; }
int fx_ops_on_host(const fx_ops *ops) { return ops->be->host_memory; }
const char *fx_ops_name(const fx_ops *ops) { return ops->be->describe(ops->ctx); }
const fx_kctx *fx_ops_kctx(const fx_ops *ops) { return ops->kc; }

void fx_ops_inject_device_lost(fx_ops *ops) {
    if (ops->be->inject_device_lost) ops->be->inject_device_lost(ops->ctx);
}

int fx_ops_device_errors(const fx_ops *ops, const char **first) {
    if (first) *first = "";
    return ops->be->device_errors ? ops->be->device_errors(ops->ctx, first) : 0;
}

/* The devices of every backend that lists some, in the list's order (count:
 * all of them, out: the first max); an error only when none could list
 * (the last reason). */
flux_status fx_ops_list_devices(fx_device_desc *out, int max, int *count, fx_err *err) {
    *count = 0;
    int listed = 0, filled = 0;
    flux_status st = FLUX_ERR_UNSUPPORTED;
    fx_err last = {0};
    for (int i = 0; i < NBACKENDS; i++) {
        if (!backends[i]->list_devices) continue;
        int n = 0;
        fx_err_clear(&last);
        st = backends[i]->list_devices(out + filled, max - filled, &n, &last);
        if (st) continue;
        listed = 1;
        *count += n;
        filled += n < max - filled ? n : max - filled;
    }
    if (listed) return FLUX_OK;
    return fx_fail(err, st, "%s", last.msg[0] ? last.msg : "no backend lists devices");
}

/* ------------------------------------------------------------------------ */
/* Storage                                                                  */
/* ------------------------------------------------------------------------ */

flux_status fx_buf_new(fx_ops *ops, int64_t floats, const char *what, fx_buf **out, fx_err *err) {
    *out = NULL;
    if (floats < 0) return fx_fail(err, FLUX_ERR_INVALID_ARG, "buffer %s: %lld floats", what, (long long)floats);
    fx_buf *b = calloc(1, sizeof *b);
    if (!b) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (%s)", what);
    b->n = floats;
    snprintf(b->what, sizeof b->what, "%s", what ? what : "a buffer");
    flux_status st = ops->be->buf_alloc(ops->ctx, b, err);
    if (st) {
        free(b);
        return st;
    }
    *out = b;
    return FLUX_OK;
}

void fx_buf_free(fx_ops *ops, fx_buf *b) {
    if (!b) return;
    if (!b->wrapped) ops->be->buf_free(ops->ctx, b);
    free(b);
}

int64_t fx_buf_floats(const fx_buf *b) { return b ? b->n : 0; }

static flux_status check_span(const fx_buf *b, int64_t off, int64_t n, const char *op, fx_err *err) {
    if (!b) return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: no buffer", op);
    if (off < 0 || n < 0 || off > b->n || n > b->n - off)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: floats [%lld, %lld) outside %s (%lld floats)", op,
                       (long long)off, (long long)(off + n), b->what, (long long)b->n);
    return FLUX_OK;
}

/* Rows [rows, cols] of view t inside its buffer (an absent optional view passes). */
static flux_status check_view(const char *op, const char *name, fx_view t, int64_t rows, int64_t cols, int optional,
                              fx_err *err) {
    if (rows <= 0 || cols <= 0) return FLUX_OK;
    if (!t.b) {
        if (optional) return FLUX_OK;
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: %s is required", op, name);
    }
    if (rows > 1 && t.ld < cols)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: %s: ld %lld < %lld columns", op, name, (long long)t.ld,
                       (long long)cols);
    char what[96];
    snprintf(what, sizeof what, "%s: %s", op, name);
    return check_span(t.b, t.off, (rows - 1) * (rows > 1 ? t.ld : 0) + cols, what, err);
}

flux_status fx_buf_write(fx_ops *ops, fx_buf *b, int64_t off, const float *src, int64_t n, fx_err *err) {
    TRY(check_span(b, off, n, "write", err));
    return ops->be->write(ops->ctx, b, off, src, n, err);
}

flux_status fx_buf_read(fx_ops *ops, const fx_buf *b, int64_t off, float *dst, int64_t n, fx_err *err) {
    TRY(check_span(b, off, n, "read", err));
    return ops->be->read(ops->ctx, b, off, dst, n, err);
}

flux_status fx_op_copy(fx_ops *ops, int64_t rows, int64_t cols, fx_view src, fx_view dst, fx_err *err) {
    TRY(check_view("copy", "source", src, rows, cols, 0, err));
    TRY(check_view("copy", "destination", dst, rows, cols, 0, err));
    if (rows <= 0 || cols <= 0) return FLUX_OK;
    return ops->be->copy(ops->ctx, rows, cols, src, dst, err);
}

flux_status fx_ops_sync(fx_ops *ops, fx_err *err) { return ops->be->sync(ops->ctx, err); }

flux_status fx_ops_weight(fx_ops *ops, const fx_weight *w, const char *name, fx_opw *out, fx_err *err) {
    out->w = *w;
    out->state = NULL;
    return ops->be->weight_prepare(ops->ctx, NULL, out, name, err);
}

flux_status fx_ops_conv_weight(fx_ops *ops, const fx_conv2d_geom *g, const fx_weight *w, const char *name,
                               fx_opw *out, fx_err *err) {
    out->w = *w;
    out->state = NULL;
    return ops->be->weight_prepare(ops->ctx, g, out, name, err);
}

void fx_ops_weight_free(fx_ops *ops, fx_opw *w) {
    if (!ops || !w) return;
    ops->be->weight_release(ops->ctx, w);
    w->state = NULL;
}

int fx_ops_weight_int8_form(fx_ops *ops, fx_opw *w) {
    return ops->be->weight_int8_form ? ops->be->weight_int8_form(ops->ctx, w) : 0;
}

void fx_ops_weight_set_terms(fx_ops *ops, fx_opw *w, const fx_delta *terms) {
    w->w.delta = terms;
    if (ops->be->weight_terms) ops->be->weight_terms(ops->ctx, w);
}

flux_status fx_ops_vector(fx_ops *ops, const float *host, int64_t n, const char *name, fx_buf **out, fx_err *err) {
    TRY(fx_buf_new(ops, n, name, out, err));
    flux_status st = fx_buf_write(ops, *out, 0, host, n, err);
    if (st) {
        fx_buf_free(ops, *out);
        *out = NULL;
    }
    return st;
}

flux_status fx_ops_mask(fx_ops *ops, const uint8_t *mask, int64_t n, fx_buf **out, fx_err *err) {
    int64_t floats = (n + 3) / 4;
    float *words = calloc((size_t)(floats ? floats : 1), sizeof(float));
    if (!words) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (key mask)");
    memcpy(words, mask, (size_t)n); /* the bytes, carried in float-sized words */
    flux_status st = fx_ops_vector(ops, words, floats, "key mask", out, err);
    free(words);
    return st;
}

flux_status fx_ops_rope(fx_ops *ops, const fx_rope_table *t, fx_oprope *out, fx_err *err) {
    out->t = *t;
    out->state = NULL;
    return ops->be->rope_prepare(ops->ctx, out, err);
}

void fx_ops_rope_free(fx_ops *ops, fx_oprope *r) {
    if (!ops || !r) return;
    ops->be->rope_release(ops->ctx, r);
    r->state = NULL;
}

/* ------------------------------------------------------------------------ */
/* Operations                                                               */
/* ------------------------------------------------------------------------ */

static flux_status check_epi(const char *op, const fx_op_epi *epi, int64_t n, fx_err *err) {
    if (!epi) return FLUX_OK;
    TRY(check_view(op, "bias", epi->bias, 1, n, 1, err));
    return check_view(op, "gate", epi->gate, 1, n, epi->mode != FX_EPI_GATED_ACCUMULATE, err);
}

flux_status fx_op_linear(fx_ops *ops, int64_t m, fx_view x, const fx_opw *w, fx_view y, const fx_op_epi *epi,
                         fx_err *err) {
    TRY(check_view("linear", "x", x, m, w->w.k, 0, err));
    TRY(check_view("linear", "y", y, m, w->w.n, 0, err));
    TRY(check_epi("linear", epi, w->w.n, err));
    if (m <= 0) return FLUX_OK;
    return ops->be->linear(ops->ctx, m, x, w, y, epi, err);
}

flux_status fx_op_attention(fx_ops *ops, const fx_op_attn *a, fx_err *err) {
    TRY(check_view("attention", "q", a->q, a->sq, (int64_t)a->hq * a->d, 0, err));
    TRY(check_view("attention", "k", a->k, a->sk, (int64_t)a->hkv * a->d, 0, err));
    TRY(check_view("attention", "v", a->v, a->sk, (int64_t)a->hkv * a->d, 0, err));
    TRY(check_view("attention", "o", a->o, a->sq, (int64_t)a->hq * a->d, 0, err));
    if (a->key_mask && a->key_mask->n * 4 < a->sk)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "attention: key mask of %lld bytes for %lld keys",
                       (long long)a->key_mask->n * 4, (long long)a->sk);
    return ops->be->attention(ops->ctx, a, err);
}

flux_status fx_op_qk_norm_rope(fx_ops *ops, fx_view x, int64_t rows, int heads, int head_dim, fx_view norm_w,
                               float eps, const fx_oprope *rope, int64_t rope_row0, fx_err *err) {
    TRY(check_view("qk_norm_rope", "x", x, rows, (int64_t)heads * head_dim, 0, err));
    TRY(check_view("qk_norm_rope", "norm weight", norm_w, 1, head_dim, 1, err));
    if (rope && (rope_row0 < 0 || rope_row0 + rows > rope->t.seq))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "qk_norm_rope: rows [%lld, %lld) outside the RoPE table (%lld rows)",
                       (long long)rope_row0, (long long)(rope_row0 + rows), (long long)rope->t.seq);
    return ops->be->qk_norm_rope(ops->ctx, x, rows, heads, head_dim, norm_w, eps, rope, rope_row0, err);
}

flux_status fx_op_rmsnorm(fx_ops *ops, int64_t rows, int64_t cols, fx_view x, fx_view w, float eps, fx_view y,
                          fx_err *err) {
    TRY(check_view("rmsnorm", "x", x, rows, cols, 0, err));
    TRY(check_view("rmsnorm", "y", y, rows, cols, 0, err));
    TRY(check_view("rmsnorm", "weight", w, 1, cols, 1, err));
    return ops->be->rmsnorm(ops->ctx, rows, cols, x, w, eps, y, err);
}

flux_status fx_op_layernorm_modulate(fx_ops *ops, int64_t rows, int64_t cols, fx_view x, fx_view shift,
                                     fx_view scale, float eps, fx_view y, fx_err *err) {
    TRY(check_view("layernorm_modulate", "x", x, rows, cols, 0, err));
    TRY(check_view("layernorm_modulate", "y", y, rows, cols, 0, err));
    TRY(check_view("layernorm_modulate", "shift", shift, 1, cols, 0, err));
    TRY(check_view("layernorm_modulate", "scale", scale, 1, cols, 0, err));
    return ops->be->layernorm_modulate(ops->ctx, rows, cols, x, shift, scale, eps, y, err);
}

flux_status fx_op_silu(fx_ops *ops, int64_t n, fx_view x, fx_err *err) {
    TRY(check_view("silu", "x", x, 1, n, 0, err));
    return ops->be->silu(ops->ctx, n, x, err);
}

flux_status fx_op_swiglu(fx_ops *ops, int64_t rows, int64_t cols, fx_view gate, fx_view up, fx_view out,
                         fx_err *err) {
    TRY(check_view("swiglu", "gate", gate, rows, cols, 0, err));
    TRY(check_view("swiglu", "up", up, rows, cols, 0, err));
    TRY(check_view("swiglu", "out", out, rows, cols, 0, err));
    return ops->be->swiglu(ops->ctx, rows, cols, gate, up, out, err);
}

flux_status fx_op_gated_add(fx_ops *ops, int64_t rows, int64_t cols, fx_view y, fx_view gate, fx_view x,
                            fx_err *err) {
    TRY(check_view("gated_add", "y", y, rows, cols, 0, err));
    TRY(check_view("gated_add", "x", x, rows, cols, 0, err));
    TRY(check_view("gated_add", "gate", gate, 1, cols, 1, err));
    return ops->be->gated_add(ops->ctx, rows, cols, y, gate, x, err);
}

flux_status fx_op_groupnorm(fx_ops *ops, int64_t pixels, int channels, int groups, fx_view x, fx_view gamma,
                            fx_view beta, float eps, int fuse_silu, fx_view y, fx_err *err) {
    TRY(check_view("groupnorm", "x", x, 1, pixels * channels, 0, err));
    TRY(check_view("groupnorm", "y", y, 1, pixels * channels, 0, err));
    TRY(check_view("groupnorm", "gamma", gamma, 1, channels, 1, err));
    TRY(check_view("groupnorm", "beta", beta, 1, channels, 1, err));
    if (groups <= 0 || channels % groups)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "groupnorm: %d channels in %d groups", channels, groups);
    return ops->be->groupnorm(ops->ctx, pixels, channels, groups, x, gamma, beta, eps, fuse_silu, y, err);
}

flux_status fx_op_conv2d(fx_ops *ops, const fx_conv2d_geom *g, fx_view x, const fx_opw *w, const fx_op_epi *epi,
                         fx_view y, fx_err *err) {
    int ho, wo;
    fx_conv2d_out_size(g, &ho, &wo);
    TRY(check_view("conv2d", "x", x, 1, (int64_t)g->h * g->w * g->cin, 0, err));
    TRY(check_view("conv2d", "y", y, 1, (int64_t)ho * wo * g->cout, 0, err));
    TRY(check_epi("conv2d", epi, g->cout, err));
    return ops->be->conv2d(ops->ctx, g, x, w, epi, y, err);
}

/* ------------------------------------------------------------------------ */
/* Host strips                                                              */
/* ------------------------------------------------------------------------ */

static flux_status no_strips(const fx_ops *ops, const char *op, fx_err *err) {
    return fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s: the %s backend keeps no tensors in host memory", op, ops->be->name);
}

flux_status fx_buf_wrap(fx_ops *ops, void *host, int64_t floats, const char *what, fx_buf **out, fx_err *err) {
    *out = NULL;
    if (!ops->be->wrap) return no_strips(ops, "wrap", err);
    if (!host || floats < 0) return fx_fail(err, FLUX_ERR_INVALID_ARG, "wrap %s: no memory", what ? what : "a buffer");
    fx_buf *b = calloc(1, sizeof *b);
    if (!b) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (%s)", what);
    b->n = floats;
    b->wrapped = 1;
    snprintf(b->what, sizeof b->what, "%s", what ? what : "a buffer");
    flux_status st = ops->be->wrap(ops->ctx, b, host, err);
    if (st) {
        free(b);
        return st;
    }
    *out = b;
    return FLUX_OK;
}

static flux_status check_rows(const char *op, const fx_rows *t, int y0, int y1, fx_err *err) {
    if (!t || !t->data || (t->dtype != FX_DTYPE_F32 && t->dtype != FX_DTYPE_BF16) ||
        (t->planar && t->dtype != FX_DTYPE_F32) || t->w < 0 || t->c < 0 ||
        (!t->planar && t->pitch < (int64_t)t->w * t->c))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: bad stored tensor", op);
    if (y0 < 0 || y1 < y0 || y1 > t->h)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: rows %d..%d outside %d rows", op, y0, y1 - 1, t->h);
    return FLUX_OK;
}

static flux_status check_gn(const char *op, const fx_op_gn *gn, int channels, fx_err *err) {
    if (!gn) return FLUX_OK;
    if (gn->groups <= 0 || channels % gn->groups || !gn->mean || !gn->rstd)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: %d channels in %d groups", op, channels, gn->groups);
    return FLUX_OK;
}

flux_status fx_op_rows_load(fx_ops *ops, const fx_rows *t, int y0, int y1, const fx_op_gn *gn, int load, fx_view dst,
                            fx_err *err) {
    if (!ops->be->rows_load) return no_strips(ops, "rows_load", err);
    TRY(check_rows("rows_load", t, y0, y1, err));
    TRY(check_gn("rows_load", gn, t->c, err));
    TRY(check_view("rows_load", "dst", dst, 1, (int64_t)(y1 - y0) * t->w * t->c, 0, err));
    if (y1 == y0) return FLUX_OK;
    return ops->be->rows_load(ops->ctx, t, y0, y1, gn, load, dst, err);
}

flux_status fx_op_rows_store(fx_ops *ops, const fx_rows *t, int y0, int y1, fx_view src, int residual, int groups,
                             double *sums, fx_err *err) {
    if (!ops->be->rows_store) return no_strips(ops, "rows_store", err);
    TRY(check_rows("rows_store", t, y0, y1, err));
    TRY(check_view("rows_store", "src", src, 1, (int64_t)(y1 - y0) * t->w * t->c, 0, err));
    if (groups > 0 && (!sums || t->c % groups))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "rows_store: %d channels in %d groups", t->c, groups);
    if (y1 == y0) return FLUX_OK;
    return ops->be->rows_store(ops->ctx, t, y0, y1, src, residual, groups > 0 ? groups : 0, sums, err);
}

flux_status fx_op_groupnorm_sums(fx_ops *ops, int64_t pixels, int channels, int groups, fx_view x, double *sums,
                                 fx_err *err) {
    if (!ops->be->groupnorm_sums) return no_strips(ops, "groupnorm_sums", err);
    TRY(check_view("groupnorm_sums", "x", x, 1, pixels * channels, 0, err));
    if (groups <= 0 || channels % groups || !sums)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "groupnorm_sums: %d channels in %d groups", channels, groups);
    if (pixels <= 0) return FLUX_OK;
    return ops->be->groupnorm_sums(ops->ctx, pixels, channels, groups, x, sums, err);
}

void fx_ops_groupnorm_finish(int64_t pixels, int channels, int groups, const double *sums, float eps, float *mean,
                             float *rstd) {
    fx_groupnorm_finish(pixels, channels, groups, sums, eps, mean, rstd);
}

flux_status fx_op_groupnorm_apply(fx_ops *ops, int64_t pixels, int channels, const fx_op_gn *gn, fx_view x, fx_view y,
                                  fx_err *err) {
    if (!ops->be->groupnorm_apply) return no_strips(ops, "groupnorm_apply", err);
    if (!gn) return fx_fail(err, FLUX_ERR_INVALID_ARG, "groupnorm_apply: no statistics");
    TRY(check_gn("groupnorm_apply", gn, channels, err));
    TRY(check_view("groupnorm_apply", "x", x, 1, pixels * channels, 0, err));
    TRY(check_view("groupnorm_apply", "y", y, 1, pixels * channels, 0, err));
    if (pixels <= 0) return FLUX_OK;
    return ops->be->groupnorm_apply(ops->ctx, pixels, channels, gn, x, y, err);
}

flux_status fx_ops_conv_weight_rows(fx_ops *ops, const fx_conv2d_geom *g, const fx_weight *w, const char *name,
                                    fx_opw *out, fx_err *err) {
    out->w = *w;
    out->state = NULL;
    if (!ops->be->weight_rows_prepare) return no_strips(ops, "conv2d_rows", err);
    return ops->be->weight_rows_prepare(ops->ctx, g, out, name, err);
}

flux_status fx_op_conv2d_rows(fx_ops *ops, const fx_conv2d_geom *g, fx_view x, int x_row0, int x_rows,
                              const fx_opw *w, const fx_op_epi *epi, fx_view y, int row0, int row1, fx_err *err) {
    if (!ops->be->conv2d_rows) return no_strips(ops, "conv2d_rows", err);
    int ho, wo;
    fx_conv2d_out_size(g, &ho, &wo);
    if (x_rows < 0 || row0 < 0 || row1 < row0 || row1 > ho)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "conv2d_rows: rows %d..%d of %d", row0, row1 - 1, ho);
    TRY(check_view("conv2d_rows", "x", x, 1, (int64_t)(x_rows > 0 ? x_rows : 1) * g->w * g->cin, 0, err));
    TRY(check_view("conv2d_rows", "y", y, 1, (int64_t)(row1 - row0) * wo * g->cout, 0, err));
    TRY(check_epi("conv2d_rows", epi, g->cout, err));
    if (row1 == row0) return FLUX_OK;
    return ops->be->conv2d_rows(ops->ctx, g, x, x_row0, x_rows, w, epi, y, row0, row1, err);
}
