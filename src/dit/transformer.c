/*
 * transformer.c — the FLUX.2 transformer: weight views, runs (layout,
 * RoPE table, workspace) and the forward pass (BFL flux2 model.py; diffusers transformer_flux2.py):
 *
 *   temb = W2·silu(W1·sinusoid(1000σ)); s = silu(temb)
 *   modulation M_img, M_txt, M_single, M_final = W·s    (once per step)
 *   h = [context_embedder(E) ; x_embedder(X) ; x_embedder(refs)]
 *   double blocks → single blocks → AdaLN(final) → proj_out on target rows
 *
 * The blocks themselves are in dit_blocks.c; the row layout is described
 * in transformer.h.
 */
#include "dit_internal.h"
#include "src/model/model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Weights                                                                  */
/* ------------------------------------------------------------------------ */

/* The view `out` of rows [row0, row0 + n) of the linear weight `name`
 * [rows, cols] (nothing copied), listed in t->linears so that adapters can
 * be attached to it (dit_adapters.c). */
static flux_status view_rows(fx_dit *t, fx_wset *w, fx_opw *out, int64_t rows, int64_t cols, int64_t row0, int64_t n,
                             fx_err *err, const char *name) {
    if (n == rows) TRY(fx_wset_linear(w, name, rows, cols, &out->w, err));
    else TRY(fx_wset_linear_rows(w, name, rows, cols, row0, n, &out->w, err));
    if (t->n_linears == FX_DIT_LINEARS(&t->c))
        return fx_fail(err, FLUX_ERR_INTERNAL, "transformer: more linear views than FX_DIT_LINEARS (%s)", name);
    fx_dit_linear *l = &t->linears[t->n_linears++];
    l->w = &out->w;
    l->op = out;
    l->row0 = row0;
    snprintf(l->tensor, sizeof l->tensor, "%s", name);
    return FLUX_OK;
}

/* view_rows of the whole tensor named by a printf format. */
static flux_status view(fx_dit *t, fx_wset *w, fx_opw *out, int64_t rows, int64_t cols, fx_err *err, const char *fmt,
                        ...) FX_PRINTF(7, 8);
static flux_status view(fx_dit *t, fx_wset *w, fx_opw *out, int64_t rows, int64_t cols, fx_err *err, const char *fmt,
                        ...) {
    char name[FX_ST_MAX_NAME];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return view_rows(t, w, out, rows, cols, 0, rows, err, name);
}

static flux_status load_double(fx_dit *t, fx_wset *w, int i, fx_dit_double_w *b, fx_err *err) {
    const fx_dit_config *c = &t->c;
    const int64_t d = c->hidden, m = c->mlp_hidden, hd = c->head_dim;
    static const char *q[2] = {"attn.add_q_proj", "attn.to_q"}, *k[2] = {"attn.add_k_proj", "attn.to_k"},
                      *v[2] = {"attn.add_v_proj", "attn.to_v"}, *o[2] = {"attn.to_add_out", "attn.to_out.0"},
                      *nq[2] = {"attn.norm_added_q", "attn.norm_q"}, *nk[2] = {"attn.norm_added_k", "attn.norm_k"},
                      *ff[2] = {"ff_context", "ff"};
    for (int s = 0; s < 2; s++) {
        TRY(view(t, w, &b->q[s], d, d, err, "transformer_blocks.%d.%s.weight", i, q[s]));
        TRY(view(t, w, &b->k[s], d, d, err, "transformer_blocks.%d.%s.weight", i, k[s]));
        TRY(view(t, w, &b->v[s], d, d, err, "transformer_blocks.%d.%s.weight", i, v[s]));
        TRY(view(t, w, &b->out[s], d, d, err, "transformer_blocks.%d.%s.weight", i, o[s]));
        TRY(view(t, w, &b->ff_in[s], 2 * m, d, err, "transformer_blocks.%d.%s.linear_in.weight", i, ff[s]));
        TRY(view(t, w, &b->ff_out[s], d, m, err, "transformer_blocks.%d.%s.linear_out.weight", i, ff[s]));
        TRY(fx_model_vecf(t->ops, w, hd, &b->norm_q[s], err, "transformer_blocks.%d.%s.weight", i, nq[s]));
        TRY(fx_model_vecf(t->ops, w, hd, &b->norm_k[s], err, "transformer_blocks.%d.%s.weight", i, nk[s]));
    }
    return FLUX_OK;
}

static flux_status load_single(fx_dit *t, fx_wset *w, int j, fx_dit_single_w *b, fx_err *err) {
    const fx_dit_config *c = &t->c;
    const int64_t d = c->hidden, m = c->mlp_hidden, hd = c->head_dim;
    char fused[FX_ST_MAX_NAME];
    snprintf(fused, sizeof fused, "single_transformer_blocks.%d.attn.to_qkv_mlp_proj.weight", j);
    /* the fused projection as two row views: [Q K V] and [G P] */
    TRY(view_rows(t, w, &b->qkv, 3 * d + 2 * m, d, 0, 3 * d, err, fused));
    TRY(view_rows(t, w, &b->mlp_in, 3 * d + 2 * m, d, 3 * d, 2 * m, err, fused));
    TRY(view(t, w, &b->out, d, d + m, err, "single_transformer_blocks.%d.attn.to_out.weight", j));
    TRY(fx_model_vecf(t->ops, w, hd, &b->norm_q, err, "single_transformer_blocks.%d.attn.norm_q.weight", j));
    TRY(fx_model_vecf(t->ops, w, hd, &b->norm_k, err, "single_transformer_blocks.%d.attn.norm_k.weight", j));
    return FLUX_OK;
}

/* Put every linear view on the backend (a device uploads them once here).
 * --precision int8 on the CPU: views mapped from a file get their int8
 * form (where the type wants one), which replaces the blocks: their pages
 * are released (they come back from the file if anything reads them). In
 * memory (--no-mmap, --quant) the blocks stay and run per call, so the
 * form is never held beside them. */
static flux_status register_weights(fx_dit *t, const fx_wset *w, fx_err *err) {
    for (int i = 0; i < t->n_linears; i++) {
        fx_dit_linear *l = &t->linears[i];
        char name[FX_ST_MAX_NAME + 32];
        snprintf(name, sizeof name, "%s (rows %lld..)", l->tensor, (long long)l->row0);
        TRY(fx_ops_weight(t->ops, l->w, name, l->op, err));
        if (fx_wset_weight_mapped(w, l->w) && fx_ops_weight_int8_form(t->ops, l->op)) fx_wset_weight_dontneed(w, l->w);
    }
    return FLUX_OK;
}

static flux_status load_all(fx_dit *t, fx_wset *w, fx_err *err) {
    const fx_dit_config *c = &t->c;
    const int64_t d = c->hidden;
    TRY(view(t, w, &t->x_embedder, d, c->in_channels, err, "x_embedder.weight"));
    TRY(view(t, w, &t->context_embedder, d, c->text_dim, err, "context_embedder.weight"));
    TRY(view(t, w, &t->t_linear_1, d, c->timestep_dim, err, "time_guidance_embed.timestep_embedder.linear_1.weight"));
    TRY(view(t, w, &t->t_linear_2, d, d, err, "time_guidance_embed.timestep_embedder.linear_2.weight"));
    TRY(view(t, w, &t->mod_img, 6 * d, d, err, "double_stream_modulation_img.linear.weight"));
    TRY(view(t, w, &t->mod_txt, 6 * d, d, err, "double_stream_modulation_txt.linear.weight"));
    TRY(view(t, w, &t->mod_single, 3 * d, d, err, "single_stream_modulation.linear.weight"));
    TRY(view_rows(t, w, &t->norm_out_scale, 2 * d, d, 0, d, err, "norm_out.linear.weight"));
    TRY(view_rows(t, w, &t->norm_out_shift, 2 * d, d, d, d, err, "norm_out.linear.weight"));
    TRY(view(t, w, &t->proj_out, c->out_channels, d, err, "proj_out.weight"));
    for (int i = 0; i < c->double_blocks; i++) TRY(load_double(t, w, i, &t->dbl[i], err));
    for (int j = 0; j < c->single_blocks; j++) TRY(load_single(t, w, j, &t->sgl[j], err));
    return register_weights(t, w, err);
}

void fx_dit_free(fx_dit *t) {
    if (!t) return;
    for (int i = 0; i < t->n_linears; i++) fx_ops_weight_free(t->ops, t->linears[i].op);
    if (t->dbl)
        for (int i = 0; i < t->c.double_blocks; i++)
            for (int s = 0; s < 2; s++) fx_buf_free(t->ops, t->dbl[i].norm_q[s]), fx_buf_free(t->ops, t->dbl[i].norm_k[s]);
    if (t->sgl)
        for (int j = 0; j < t->c.single_blocks; j++) fx_buf_free(t->ops, t->sgl[j].norm_q), fx_buf_free(t->ops, t->sgl[j].norm_k);
    free(t->dbl);
    free(t->sgl);
    free(t->linears);
    free(t->deltas);
    free(t->dora_gates);
    free(t);
}

flux_status fx_dit_load(flux_ctx *ctx, fx_dit **out) {
    *out = NULL;
    if (!ctx->model || !ctx->model->transformer_w) return fx_fail(&ctx->err, FLUX_ERR_STATE, "no model is loaded");
    fx_dit *t = calloc(1, sizeof *t);
    if (!t) return fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory (transformer)");
    t->c = ctx->model->dit;
    t->ops = ctx->ops;
    t->dbl = calloc((size_t)(t->c.double_blocks > 0 ? t->c.double_blocks : 1), sizeof *t->dbl);
    t->sgl = calloc((size_t)(t->c.single_blocks > 0 ? t->c.single_blocks : 1), sizeof *t->sgl);
    t->linears = calloc((size_t)FX_DIT_LINEARS(&t->c), sizeof *t->linears);
    flux_status st = !t->dbl || !t->sgl || !t->linears
                         ? fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory (transformer blocks)")
                                        : load_all(t, ctx->model->transformer_w, &ctx->err);
    if (st) {
        fx_dit_free(t);
        return st;
    }
    *out = t;
    return FLUX_OK;
}

flux_status fx_dit_get(flux_ctx *ctx, fx_dit **out) {
    if (!ctx->transformer) TRY(fx_dit_load(ctx, &ctx->transformer));
    *out = ctx->transformer;
    return FLUX_OK;
}

const fx_dit_config *fx_dit_cfg(const fx_dit *d) { return &d->c; }

/* ------------------------------------------------------------------------ */
/* Runs                                                                     */
/* ------------------------------------------------------------------------ */

#define ALIGN_FLOATS 16 /* 64 bytes */

static int64_t align_up(int64_t n) { return (n + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS; }

static int64_t mod_floats(const fx_dit_config *c) {
    /* e [tdim], t1, temb, s [d], M_img, M_txt [6d], M_single [3d], M_final [2d] */
    return align_up(c->timestep_dim) + 3 * align_up(c->hidden) + align_up(6 * (int64_t)c->hidden) * 2 +
           align_up(3 * (int64_t)c->hidden) + align_up(2 * (int64_t)c->hidden);
}

static int64_t layout_tokens(const fx_dit_layout *lay, int64_t *n_img) {
    int64_t n = 0;
    for (int k = 0; k < lay->n_images; k++) n += (int64_t)lay->grid_h[k] * lay->grid_w[k];
    *n_img = n;
    return lay->text_len + n;
}

static flux_status check_layout(const fx_dit_layout *lay, fx_err *err) {
    if (lay->batch < 1 || lay->batch > 4096)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "transformer: batch must be in 1..4096, got %d", lay->batch);
    if (lay->text_len < 1 || lay->text_len > 65536)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "transformer: text length must be in 1..65536, got %d",
                       lay->text_len);
    if (lay->n_images < 1 || lay->n_images > FX_DIT_MAX_IMAGES)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "transformer: %d images (target + references), expected 1..%d",
                       lay->n_images, FX_DIT_MAX_IMAGES);
    for (int k = 0; k < lay->n_images; k++)
        if (lay->grid_h[k] < 1 || lay->grid_w[k] < 1 || lay->grid_h[k] > 65536 || lay->grid_w[k] > 65536)
            return fx_fail(err, FLUX_ERR_INVALID_ARG, "transformer: image %d has a %dx%d token grid", k,
                           lay->grid_h[k], lay->grid_w[k]);
    return FLUX_OK;
}

int64_t fx_dit_run_bytes(const fx_dit *d, const fx_dit_layout *lay) {
    const fx_dit_config *c = &d->c;
    int64_t n_img, S = layout_tokens(lay, &n_img), R = S * lay->batch;
    int64_t ldu = 4 * (int64_t)c->hidden + 2 * (int64_t)c->mlp_hidden;
    int64_t io = R * (c->in_channels > c->text_dim ? c->in_channels : c->text_dim) * 2; /* io buffer + host staging, at most */
    int64_t floats = align_up(R * c->hidden) * 2 + align_up(R * ldu) + mod_floats(c) + io;
    int64_t rope = R * (c->head_dim / 2) * 2 + (int64_t)FX_DIT_ROPE_AXES * R;
    return (floats + rope) * (int64_t)sizeof(float);
}

void fx_dit_run_free(fx_dit_run *r) {
    if (!r) return;
    fx_ops_rope_free(r->ops, &r->rope);
    fx_rope_table_free(&r->rope_table);
    fx_buf_free(r->ops, r->h);
    fx_buf_free(r->ops, r->h0);
    fx_buf_free(r->ops, r->u);
    fx_buf_free(r->ops, r->mod);
    fx_buf_free(r->ops, r->io);
    free(r->host);
    free(r);
}

void fx_dit_run_set_observer(fx_dit_run *r, fx_dit_observer fn, void *user) {
    r->observe = fn;
    r->observe_user = user;
}

/* Position ids of every row (axis-major [4][R]): text (0, 0, 0, l), target
 * (0, y, x, 0), reference k (10·k, y, x, 0) — BFL flux2 model.py; diffusers transformer_flux2.py; diffusers pipeline_flux2_klein.py, image_processor.py */
static flux_status build_rope(fx_dit_run *r) {
    const fx_dit_config *c = &r->d->c;
    int32_t *pos = calloc((size_t)(FX_DIT_ROPE_AXES * r->R), sizeof *pos);
    if (!pos) return fx_fail(&r->ctx->err, FLUX_ERR_NOMEM, "out of memory (RoPE positions of %lld rows)", (long long)r->R);
    for (int64_t t = 0; t < r->S; t++) {
        int32_t p[FX_DIT_ROPE_AXES] = {0, 0, 0, 0};
        if (t < r->L) {
            p[3] = (int32_t)t;
        } else {
            int k = 0;
            while (k + 1 < r->lay.n_images && t >= r->img_token0[k + 1]) k++;
            int64_t i = t - r->img_token0[k];
            p[0] = 10 * k;
            p[1] = (int32_t)(i / r->lay.grid_w[k]);
            p[2] = (int32_t)(i % r->lay.grid_w[k]);
        }
        for (int64_t b = 0; b < r->B; b++)
            for (int a = 0; a < FX_DIT_ROPE_AXES; a++) pos[a * r->R + fx_dit_row(r, t, b)] = p[a];
    }
    flux_status st = fx_rope_table_init(&r->rope_table, pos, r->R, FX_DIT_ROPE_AXES, c->axes_dims, c->rope_theta,
                                        FX_ROPE_INTERLEAVED, &r->ctx->err);
    free(pos);
    if (!st) st = fx_rope_table_check(&r->rope_table, r->R, c->head_dim, &r->ctx->err);
    if (!st) st = fx_ops_rope(r->ops, &r->rope_table, &r->rope, &r->ctx->err);
    return st;
}

static int64_t max3(int64_t a, int64_t b, int64_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

flux_status fx_dit_run_new(flux_ctx *ctx, fx_dit *d, const fx_dit_layout *lay, fx_dit_run **out) {
    *out = NULL;
    TRY(check_layout(lay, &ctx->err));
    const fx_dit_config *c = &d->c;
    fx_dit_run *r = calloc(1, sizeof *r);
    if (!r) return fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory (transformer run)");
    r->ctx = ctx;
    r->d = d;
    r->ops = d->ops;
    r->lay = *lay;
    r->B = lay->batch;
    r->L = lay->text_len;
    r->N = (int64_t)lay->grid_h[0] * lay->grid_w[0];
    r->S = layout_tokens(lay, &r->n_img);
    r->R = r->S * r->B;
    r->ldu = 4 * (int64_t)c->hidden + 2 * (int64_t)c->mlp_hidden;
    for (int k = 0, t = (int)r->L; k < lay->n_images; t += lay->grid_h[k] * lay->grid_w[k], k++) r->img_token0[k] = t;

    /* io: the noisy tokens in, the velocity out, an embedding or reference in */
    int64_t n_ref = 0;
    for (int k = 1; k < lay->n_images; k++) n_ref = (int64_t)lay->grid_h[k] * lay->grid_w[k] > n_ref ? (int64_t)lay->grid_h[k] * lay->grid_w[k] : n_ref;
    r->io_floats = max3(r->B * r->N * (c->in_channels > c->out_channels ? c->in_channels : c->out_channels),
                        r->L * c->text_dim, n_ref * c->in_channels);
    int64_t nh = r->R * c->hidden, nu = r->R * r->ldu, nm = mod_floats(c);
    r->mem_bytes = (size_t)(2 * nh + nu + nm + r->io_floats) * sizeof(float);
    fx_err *err = &ctx->err;
    flux_status st = fx_buf_new(r->ops, nh, "transformer residual stream", &r->h, err);
    if (!st) st = fx_buf_new(r->ops, nh, "transformer projected text/references", &r->h0, err);
    if (!st) st = fx_buf_new(r->ops, nu, "transformer workspace", &r->u, err);
    if (!st) st = fx_buf_new(r->ops, nm, "transformer modulation", &r->mod, err);
    if (!st) st = fx_buf_new(r->ops, r->io_floats, "transformer input/output", &r->io, err);
    if (!st && !(r->host = malloc((size_t)r->io_floats * sizeof(float))))
        st = fx_fail(err, FLUX_ERR_NOMEM, "out of memory: transformer host staging of %.1f MB",
                     (double)r->io_floats * 4e-6);
    if (!st) st = build_rope(r);
    if (st) {
        fx_dit_run_free(r);
        return st;
    }
    fx_log(&ctx->log, 2, "flux: transformer run: %lld sequence(s) x %lld tokens (%lld text, %lld image), workspace %.1f MB on %s",
           (long long)r->B, (long long)r->S, (long long)r->L, (long long)r->n_img, (double)r->mem_bytes / 1e6,
           fx_ops_name(r->ops));
    *out = r;
    return FLUX_OK;
}

/* Copy the rows of tokens [t0, t0 + n) of sequence `from` to sequence `to` in x [R, d]. */
static flux_status copy_sequence_rows(fx_dit_run *r, fx_buf *x, int64_t t0, int64_t n, int64_t from, int64_t to) {
    const int64_t d = r->d->c.hidden;
    fx_view src = {x, fx_dit_row(r, t0, from) * d, r->B * d}, dst = {x, fx_dit_row(r, t0, to) * d, r->B * d};
    return fx_op_copy(r->ops, n, d, src, dst, &r->ctx->err);
}

/* x [rows, cols] (host, contiguous) into the io buffer, then y (rows ld_y
 * apart) = x · Wᵀ. */
static flux_status project_host(fx_dit_run *r, int64_t rows, const float *x, const fx_opw *w, fx_view y) {
    fx_err *err = &r->ctx->err;
    TRY(fx_buf_write(r->ops, r->io, 0, x, rows * w->w.k, err));
    fx_view xin = {r->io, 0, w->w.k};
    return fx_op_linear(r->ops, rows, xin, w, y, NULL, err);
}

flux_status fx_dit_run_set_text(fx_dit_run *r, const float *const *emb) {
    const fx_dit *t = r->d;
    const int64_t d = t->c.hidden;
    for (int64_t b = 0; b < r->B; b++) {
        if (!emb[b]) return fx_fail(&r->ctx->err, FLUX_ERR_INVALID_ARG, "transformer: no text embeddings for sequence %lld", (long long)b);
        int64_t same = -1;
        for (int64_t e = 0; e < b && same < 0; e++)
            if (emb[e] == emb[b]) same = e;
        fx_view y = {r->h0, b * d, r->B * d};
        if (same >= 0) TRY(copy_sequence_rows(r, r->h0, 0, r->L, same, b));
        else TRY(project_host(r, r->L, emb[b], &t->context_embedder, y));
    }
    r->text_set = 1;
    return FLUX_OK;
}

flux_status fx_dit_run_set_image(fx_dit_run *r, int k, const float *tokens) {
    const fx_dit *t = r->d;
    const int64_t d = t->c.hidden;
    if (k < 1 || k >= r->lay.n_images)
        return fx_fail(&r->ctx->err, FLUX_ERR_INVALID_ARG, "transformer: reference image %d of %d", k, r->lay.n_images - 1);
    int64_t t0 = r->img_token0[k], n = (int64_t)r->lay.grid_h[k] * r->lay.grid_w[k];
    fx_view y = {r->h0, fx_dit_row(r, t0, 0) * d, r->B * d};
    TRY(project_host(r, n, tokens, &t->x_embedder, y));
    for (int64_t b = 1; b < r->B; b++) TRY(copy_sequence_rows(r, r->h0, t0, n, 0, b));
    r->images_set |= 1u << k;
    return FLUX_OK;
}

double fx_dit_run_flops(const fx_dit_run *r) {
    const fx_dit_config *c = &r->d->c;
    double d = c->hidden, m = c->mlp_hidden, R = (double)r->R, S = (double)r->S, B = (double)r->B;
    double block = 2.0 * R * d * (4.0 * d + 3.0 * m) + 4.0 * B * S * S * d;
    double io = 2.0 * B * (double)r->N * d * (double)(c->in_channels + c->out_channels);
    double mod = 2.0 * d * (c->timestep_dim + d + 17.0 * d);
    return block * (c->double_blocks + c->single_blocks) + io + mod;
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                  */
/* ------------------------------------------------------------------------ */

/* Rows [row0, row0 + rows) of every sequence of x [R, d] to the observer. */
static flux_status observe_rows(fx_dit_run *r, const char *name, fx_buf *x, int64_t row0, int64_t rows) {
    if (!r->observe) return FLUX_OK;
    const int64_t d = r->d->c.hidden;
    int64_t per = r->io_floats / d; /* rows the host staging holds */
    for (int64_t b = 0; b < r->B; b++) {
        float *rowsb = NULL;
        int64_t n = rows * d;
        /* sequence b's rows are B apart: read them into one contiguous block */
        float *tmp = rows <= per ? r->host : (rowsb = malloc((size_t)n * sizeof(float)));
        if (!tmp) return fx_fail(&r->ctx->err, FLUX_ERR_NOMEM, "out of memory (observing %s)", name);
        flux_status st = FLUX_OK;
        for (int64_t i = 0; i < rows && !st; i++)
            st = fx_buf_read(r->ops, x, fx_dit_row(r, row0 + i, b) * d, tmp + i * d, d, &r->ctx->err);
        if (!st) r->observe(r->observe_user, name, (int)b, tmp, rows, d, d);
        free(rowsb);
        TRY(st);
    }
    return FLUX_OK;
}

/* temb and the four modulation vectors of this σ (BFL flux2 model.py; diffusers transformer_flux2.py). */
static flux_status modulation(fx_dit_run *r, float sigma, fx_dit_mod *m) {
    const fx_dit *t = r->d;
    const fx_dit_config *c = &t->c;
    fx_ops *ops = r->ops;
    fx_err *err = &r->ctx->err;
    const int64_t d = c->hidden;
    /* offsets in the modulation buffer */
    int64_t e = 0, t1 = e + align_up(c->timestep_dim), temb = t1 + align_up(d), s = temb + align_up(d);
    int64_t m_img = s + align_up(d), m_txt = m_img + align_up(6 * d), m_sgl = m_txt + align_up(6 * d);
    int64_t m_fin = m_sgl + align_up(3 * d);
    fx_view row = {r->mod, 0, 0};

    fx_timestep_embedding(1000.0 * (double)sigma, c->timestep_dim, r->host);
    TRY(fx_buf_write(ops, r->mod, e, r->host, c->timestep_dim, err));
    TRY(fx_op_linear(ops, 1, fx_at(row, 0, e), &t->t_linear_1, fx_at(row, 0, t1), NULL, err));
    TRY(fx_op_silu(ops, d, fx_at(row, 0, t1), err));
    TRY(fx_op_linear(ops, 1, fx_at(row, 0, t1), &t->t_linear_2, fx_at(row, 0, temb), NULL, err));
    if (r->observe) {
        TRY(fx_buf_read(ops, r->mod, temb, r->host, d, err));
        for (int64_t b = 0; b < r->B; b++) r->observe(r->observe_user, "time_guidance_embed", (int)b, r->host, 1, d, d);
    }
    TRY(fx_op_copy(ops, 1, d, fx_at(row, 0, temb), fx_at(row, 0, s), err));
    TRY(fx_op_silu(ops, d, fx_at(row, 0, s), err));
    fx_view sv = fx_at(row, 0, s);
    TRY(fx_op_linear(ops, 1, sv, &t->mod_img, fx_at(row, 0, m_img), NULL, err));
    TRY(fx_op_linear(ops, 1, sv, &t->mod_txt, fx_at(row, 0, m_txt), NULL, err));
    TRY(fx_op_linear(ops, 1, sv, &t->mod_single, fx_at(row, 0, m_sgl), NULL, err));
    TRY(fx_op_linear(ops, 1, sv, &t->norm_out_scale, fx_at(row, 0, m_fin), NULL, err));
    TRY(fx_op_linear(ops, 1, sv, &t->norm_out_shift, fx_at(row, 0, m_fin + d), NULL, err));
    m->img = fx_at(row, 0, m_img);
    m->txt = fx_at(row, 0, m_txt);
    m->single = fx_at(row, 0, m_sgl);
    m->final_scale = fx_at(row, 0, m_fin); /* diffusers order: scale, then shift */
    m->final_shift = fx_at(row, 0, m_fin + d);
    return FLUX_OK;
}

/* After a block: run what is recorded (progress reports finished work),
 * then the context's checkpoint (progress, cancel). */
static flux_status block_done(fx_dit_run *r, int done, int total) {
    TRY(fx_ops_sync(r->ops, &r->ctx->err));
    return fx_ctx_checkpoint(r->ctx, done, total);
}

flux_status fx_dit_forward(fx_dit_run *r, const float *x, float sigma, float *v) {
    const fx_dit *t = r->d;
    const fx_dit_config *c = &t->c;
    fx_ops *ops = r->ops;
    const int64_t d = c->hidden, B = r->B, L = r->L, N = r->N;
    fx_err *err = &r->ctx->err;
    if (!r->text_set) return fx_fail(err, FLUX_ERR_STATE, "transformer: text embeddings not set");
    for (int k = 1; k < r->lay.n_images; k++)
        if (!(r->images_set >> k & 1u)) return fx_fail(err, FLUX_ERR_STATE, "transformer: reference %d not set", k);

    fx_dit_mod mod;
    TRY(modulation(r, sigma, &mod));

    /* h = [text | target | refs]: text and references from h0, target projected now. */
    int64_t tgt0 = fx_dit_row(r, L, 0), tgt1 = fx_dit_row(r, L + N, 0);
    fx_view h0 = {r->h0, 0, d};
    TRY(fx_op_copy(ops, tgt0, d, h0, fx_dit_h(r, 0), err));
    TRY(fx_op_copy(ops, r->R - tgt1, d, fx_at(h0, tgt1, 0), fx_dit_h(r, tgt1), err));
    TRY(fx_buf_write(ops, r->io, 0, x, B * N * c->in_channels, err));
    for (int64_t b = 0; b < B; b++) {
        fx_view xb = {r->io, b * N * c->in_channels, c->in_channels}, hb = fx_dit_h(r, fx_dit_row(r, L, b));
        hb.ld = B * d;
        TRY(fx_op_linear(ops, N, xb, &t->x_embedder, hb, NULL, err));
    }
    TRY(observe_rows(r, "context_embedder", r->h, 0, L));
    TRY(observe_rows(r, "x_embedder", r->h, L, r->n_img));

    const int n_blocks = c->double_blocks + c->single_blocks;
    char name[64];
    for (int i = 0; i < c->double_blocks; i++) {
        TRY(fx_dit_double_block(r, &t->dbl[i], &mod));
        if (r->observe) {
            snprintf(name, sizeof name, "transformer_blocks.%d.img", i);
            TRY(observe_rows(r, name, r->h, L, r->n_img));
            snprintf(name, sizeof name, "transformer_blocks.%d.txt", i);
            TRY(observe_rows(r, name, r->h, 0, L));
        }
        TRY(block_done(r, i + 1, n_blocks));
    }
    for (int j = 0; j < c->single_blocks; j++) {
        TRY(fx_dit_single_block(r, &t->sgl[j], &mod));
        if (r->observe) {
            snprintf(name, sizeof name, "single_transformer_blocks.%d", j);
            TRY(observe_rows(r, name, r->h, 0, r->S));
        }
        TRY(block_done(r, c->double_blocks + j + 1, n_blocks));
    }

    /* Final layer on the target rows only (text and references dropped). */
    fx_view a = fx_dit_u(r, 0, 3 * d);
    TRY(fx_op_layernorm_modulate(ops, tgt1 - tgt0, d, fx_dit_h(r, tgt0), mod.final_shift, mod.final_scale, c->eps,
                                 fx_at(a, tgt0, 0), err));
    for (int64_t b = 0; b < B; b++) {
        fx_view ab = fx_at(a, fx_dit_row(r, L, b), 0), vb = {r->io, b * N * c->out_channels, c->out_channels};
        ab.ld = B * r->ldu;
        TRY(fx_op_linear(ops, N, ab, &t->proj_out, vb, NULL, err));
    }
    TRY(fx_buf_read(ops, r->io, 0, v, B * N * c->out_channels, err));
    if (r->observe)
        for (int64_t b = 0; b < B; b++)
            r->observe(r->observe_user, "proj_out", (int)b, v + b * N * c->out_channels, N, c->out_channels,
                       c->out_channels);
    return FLUX_OK;
}
