/*
 * transformer.c — the FLUX.2 transformer: weight views, runs (layout,
 * RoPE table, workspace) and the forward pass (spec §3.10):
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ------------------------------------------------------------------------ */
/* Weights                                                                  */
/* ------------------------------------------------------------------------ */

/* Rows [r0, r0 + n) of a linear weight (a view, nothing copied). */
static fx_weight row_slice(const fx_weight *w, int64_t r0, int64_t n) {
    fx_weight s = *w;
    s.data = (const char *)w->data + (size_t)(r0 * w->ld) * fx_dtype_size(w->dtype);
    s.n = n;
    return s;
}

static flux_status load_double(fx_wset *w, const fx_dit_config *c, int i, fx_dit_double_w *b, fx_err *err) {
    const int64_t d = c->hidden, m = c->mlp_hidden, hd = c->head_dim;
    static const char *q[2] = {"attn.add_q_proj", "attn.to_q"}, *k[2] = {"attn.add_k_proj", "attn.to_k"},
                      *v[2] = {"attn.add_v_proj", "attn.to_v"}, *o[2] = {"attn.to_add_out", "attn.to_out.0"},
                      *nq[2] = {"attn.norm_added_q", "attn.norm_q"}, *nk[2] = {"attn.norm_added_k", "attn.norm_k"},
                      *ff[2] = {"ff_context", "ff"};
    for (int s = 0; s < 2; s++) {
        TRY(fx_wset_linearf(w, &b->q[s], d, d, err, "transformer_blocks.%d.%s.weight", i, q[s]));
        TRY(fx_wset_linearf(w, &b->k[s], d, d, err, "transformer_blocks.%d.%s.weight", i, k[s]));
        TRY(fx_wset_linearf(w, &b->v[s], d, d, err, "transformer_blocks.%d.%s.weight", i, v[s]));
        TRY(fx_wset_linearf(w, &b->out[s], d, d, err, "transformer_blocks.%d.%s.weight", i, o[s]));
        TRY(fx_wset_linearf(w, &b->ff_in[s], 2 * m, d, err, "transformer_blocks.%d.%s.linear_in.weight", i, ff[s]));
        TRY(fx_wset_linearf(w, &b->ff_out[s], d, m, err, "transformer_blocks.%d.%s.linear_out.weight", i, ff[s]));
        TRY(fx_wset_vecf(w, &b->norm_q[s], hd, err, "transformer_blocks.%d.%s.weight", i, nq[s]));
        TRY(fx_wset_vecf(w, &b->norm_k[s], hd, err, "transformer_blocks.%d.%s.weight", i, nk[s]));
    }
    return FLUX_OK;
}

static flux_status load_single(fx_wset *w, const fx_dit_config *c, int j, fx_dit_single_w *b, fx_err *err) {
    const int64_t d = c->hidden, m = c->mlp_hidden, hd = c->head_dim;
    fx_weight fused;
    TRY(fx_wset_linearf(w, &fused, 3 * d + 2 * m, d, err, "single_transformer_blocks.%d.attn.to_qkv_mlp_proj.weight",
                        j));
    b->qkv = row_slice(&fused, 0, 3 * d);
    b->mlp_in = row_slice(&fused, 3 * d, 2 * m);
    TRY(fx_wset_linearf(w, &b->out, d, d + m, err, "single_transformer_blocks.%d.attn.to_out.weight", j));
    TRY(fx_wset_vecf(w, &b->norm_q, hd, err, "single_transformer_blocks.%d.attn.norm_q.weight", j));
    TRY(fx_wset_vecf(w, &b->norm_k, hd, err, "single_transformer_blocks.%d.attn.norm_k.weight", j));
    return FLUX_OK;
}

static flux_status load_all(fx_dit *t, fx_wset *w, fx_err *err) {
    const fx_dit_config *c = &t->c;
    const int64_t d = c->hidden;
    TRY(fx_wset_linear(w, "x_embedder.weight", d, c->in_channels, &t->x_embedder, err));
    TRY(fx_wset_linear(w, "context_embedder.weight", d, c->text_dim, &t->context_embedder, err));
    TRY(fx_wset_linear(w, "time_guidance_embed.timestep_embedder.linear_1.weight", d, c->timestep_dim, &t->t_linear_1,
                       err));
    TRY(fx_wset_linear(w, "time_guidance_embed.timestep_embedder.linear_2.weight", d, d, &t->t_linear_2, err));
    TRY(fx_wset_linear(w, "double_stream_modulation_img.linear.weight", 6 * d, d, &t->mod_img, err));
    TRY(fx_wset_linear(w, "double_stream_modulation_txt.linear.weight", 6 * d, d, &t->mod_txt, err));
    TRY(fx_wset_linear(w, "single_stream_modulation.linear.weight", 3 * d, d, &t->mod_single, err));
    TRY(fx_wset_linear_rows(w, "norm_out.linear.weight", 2 * d, d, 0, d, &t->norm_out_scale, err));
    TRY(fx_wset_linear_rows(w, "norm_out.linear.weight", 2 * d, d, d, d, &t->norm_out_shift, err));
    TRY(fx_wset_linear(w, "proj_out.weight", c->out_channels, d, &t->proj_out, err));
    for (int i = 0; i < c->double_blocks; i++) TRY(load_double(w, c, i, &t->dbl[i], err));
    for (int j = 0; j < c->single_blocks; j++) TRY(load_single(w, c, j, &t->sgl[j], err));
    return FLUX_OK;
}

void fx_dit_free(fx_dit *t) {
    if (!t) return;
    if (t->dbl)
        for (int i = 0; i < t->c.double_blocks; i++)
            for (int s = 0; s < 2; s++) free(t->dbl[i].norm_q[s]), free(t->dbl[i].norm_k[s]);
    if (t->sgl)
        for (int j = 0; j < t->c.single_blocks; j++) free(t->sgl[j].norm_q), free(t->sgl[j].norm_k);
    free(t->dbl);
    free(t->sgl);
    free(t);
}

flux_status fx_dit_load(flux_ctx *ctx, fx_dit **out) {
    *out = NULL;
    if (!ctx->model || !ctx->model->transformer_w) return fx_fail(&ctx->err, FLUX_ERR_STATE, "no model is loaded");
    fx_dit *t = calloc(1, sizeof *t);
    if (!t) return fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory (transformer)");
    t->c = ctx->model->dit;
    t->dbl = calloc((size_t)(t->c.double_blocks > 0 ? t->c.double_blocks : 1), sizeof *t->dbl);
    t->sgl = calloc((size_t)(t->c.single_blocks > 0 ? t->c.single_blocks : 1), sizeof *t->sgl);
    flux_status st = !t->dbl || !t->sgl ? fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory (transformer blocks)")
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
    int64_t floats = align_up(R * c->hidden) * 2 + align_up(R * ldu) + mod_floats(c);
    int64_t rope = R * (c->head_dim / 2) * 2 + (int64_t)FX_DIT_ROPE_AXES * R;
    return (floats + rope) * (int64_t)sizeof(float);
}

void fx_dit_run_free(fx_dit_run *r) {
    if (!r) return;
    fx_rope_table_free(&r->rope);
    if (r->mem) munmap(r->mem, r->mem_bytes);
    free(r);
}

void fx_dit_run_set_observer(fx_dit_run *r, fx_dit_observer fn, void *user) {
    r->observe = fn;
    r->observe_user = user;
}

/* Position ids of every row (axis-major [4][R]): text (0, 0, 0, l), target
 * (0, y, x, 0), reference k (10·k, y, x, 0) — spec §3.5, §7. */
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
    flux_status st = fx_rope_table_init(&r->rope, pos, r->R, FX_DIT_ROPE_AXES, c->axes_dims, c->rope_theta,
                                        FX_ROPE_INTERLEAVED, &r->ctx->err);
    free(pos);
    if (!st) st = fx_rope_table_check(&r->rope, r->R, c->head_dim, &r->ctx->err);
    return st;
}

flux_status fx_dit_run_new(flux_ctx *ctx, fx_dit *d, const fx_dit_layout *lay, fx_dit_run **out) {
    *out = NULL;
    TRY(check_layout(lay, &ctx->err));
    const fx_dit_config *c = &d->c;
    fx_dit_run *r = calloc(1, sizeof *r);
    if (!r) return fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory (transformer run)");
    r->ctx = ctx;
    r->d = d;
    r->lay = *lay;
    r->B = lay->batch;
    r->L = lay->text_len;
    r->N = (int64_t)lay->grid_h[0] * lay->grid_w[0];
    r->S = layout_tokens(lay, &r->n_img);
    r->R = r->S * r->B;
    r->ldu = 4 * (int64_t)c->hidden + 2 * (int64_t)c->mlp_hidden;
    for (int k = 0, t = (int)r->L; k < lay->n_images; t += lay->grid_h[k] * lay->grid_w[k], k++) r->img_token0[k] = t;

    int64_t nh = align_up(r->R * c->hidden), nu = align_up(r->R * r->ldu), nm = mod_floats(c);
    r->mem_bytes = (size_t)(2 * nh + nu + nm) * sizeof(float);
    /* Anonymous mapping: page-aligned, zeroed lazily, eligible for huge pages. */
    r->mem = mmap(NULL, r->mem_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r->mem == MAP_FAILED) {
        long long rows = (long long)r->R;
        r->mem = NULL;
        fx_dit_run_free(r);
        return fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory: transformer workspace of %.1f MB (%lld rows)",
                       (double)(2 * nh + nu + nm) * 4e-6, rows);
    }
#ifdef MADV_HUGEPAGE
    madvise(r->mem, r->mem_bytes, MADV_HUGEPAGE);
#endif
    r->h = r->mem;
    r->h0 = r->h + nh;
    r->u = r->h0 + nh;
    r->mod_buf = r->u + nu;
    flux_status st = build_rope(r);
    if (st) {
        fx_dit_run_free(r);
        return st;
    }
    fx_log(&ctx->log, 2, "flux: transformer run: %lld sequence(s) x %lld tokens (%lld text, %lld image), workspace %.1f MB",
           (long long)r->B, (long long)r->S, (long long)r->L, (long long)r->n_img, (double)r->mem_bytes / 1e6);
    *out = r;
    return FLUX_OK;
}

/* Copy the rows of tokens [t0, t0 + n) of sequence `from` to sequence `to` in x [R, d]. */
static void copy_sequence_rows(fx_dit_run *r, float *x, int64_t t0, int64_t n, int64_t from, int64_t to) {
    const int64_t d = r->d->c.hidden;
    for (int64_t t = t0; t < t0 + n; t++)
        memcpy(x + fx_dit_row(r, t, to) * d, x + fx_dit_row(r, t, from) * d, (size_t)d * sizeof(float));
}

flux_status fx_dit_run_set_text(fx_dit_run *r, const float *const *emb) {
    const fx_dit *t = r->d;
    const int64_t d = t->c.hidden;
    for (int64_t b = 0; b < r->B; b++) {
        if (!emb[b]) return fx_fail(&r->ctx->err, FLUX_ERR_INVALID_ARG, "transformer: no text embeddings for sequence %lld", (long long)b);
        int64_t same = -1;
        for (int64_t e = 0; e < b && same < 0; e++)
            if (emb[e] == emb[b]) same = e;
        if (same >= 0) copy_sequence_rows(r, r->h0, 0, r->L, same, b);
        else fx_linear(&r->ctx->kc, r->L, emb[b], t->c.text_dim, &t->context_embedder, r->h0 + b * d, r->B * d, NULL);
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
    fx_linear(&r->ctx->kc, n, tokens, t->c.in_channels, &t->x_embedder, r->h0 + fx_dit_row(r, t0, 0) * d, r->B * d, NULL);
    for (int64_t b = 1; b < r->B; b++) copy_sequence_rows(r, r->h0, t0, n, 0, b);
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

static void observe_rows(fx_dit_run *r, const char *name, const float *x, int64_t row0, int64_t rows) {
    if (!r->observe) return;
    const int64_t d = r->d->c.hidden;
    for (int64_t b = 0; b < r->B; b++)
        r->observe(r->observe_user, name, (int)b, x + fx_dit_row(r, row0, b) * d, rows, d, r->B * d);
}

/* temb and the four modulation vectors of this σ (spec §3.2, §3.3). */
static void modulation(fx_dit_run *r, float sigma, fx_dit_mod *m) {
    const fx_dit *t = r->d;
    const fx_dit_config *c = &t->c;
    const fx_kctx *kc = &r->ctx->kc;
    const int64_t d = c->hidden;
    float *e = r->mod_buf, *t1 = e + align_up(c->timestep_dim), *temb = t1 + align_up(d), *s = temb + align_up(d);
    float *m_img = s + align_up(d), *m_txt = m_img + align_up(6 * d), *m_sgl = m_txt + align_up(6 * d);
    float *m_fin = m_sgl + align_up(3 * d);

    fx_timestep_embedding(1000.0 * (double)sigma, c->timestep_dim, e);
    fx_linear(kc, 1, e, c->timestep_dim, &t->t_linear_1, t1, d, NULL);
    fx_silu(kc, d, t1);
    fx_linear(kc, 1, t1, d, &t->t_linear_2, temb, d, NULL);
    if (r->observe)
        for (int64_t b = 0; b < r->B; b++) r->observe(r->observe_user, "time_guidance_embed", (int)b, temb, 1, d, d);
    memcpy(s, temb, (size_t)d * sizeof(float));
    fx_silu(kc, d, s);
    fx_linear(kc, 1, s, d, &t->mod_img, m_img, 6 * d, NULL);
    fx_linear(kc, 1, s, d, &t->mod_txt, m_txt, 6 * d, NULL);
    fx_linear(kc, 1, s, d, &t->mod_single, m_sgl, 3 * d, NULL);
    fx_linear(kc, 1, s, d, &t->norm_out_scale, m_fin, d, NULL);
    fx_linear(kc, 1, s, d, &t->norm_out_shift, m_fin + d, d, NULL);
    m->img = m_img;
    m->txt = m_txt;
    m->single = m_sgl;
    m->final_scale = m_fin; /* diffusers order: scale, then shift */
    m->final_shift = m_fin + d;
}

flux_status fx_dit_forward(fx_dit_run *r, const float *x, float sigma, float *v) {
    const fx_dit *t = r->d;
    const fx_dit_config *c = &t->c;
    const fx_kctx *kc = &r->ctx->kc;
    const int64_t d = c->hidden, B = r->B, L = r->L, N = r->N;
    fx_err *err = &r->ctx->err;
    if (!r->text_set) return fx_fail(err, FLUX_ERR_STATE, "transformer: text embeddings not set");
    for (int k = 1; k < r->lay.n_images; k++)
        if (!(r->images_set >> k & 1u)) return fx_fail(err, FLUX_ERR_STATE, "transformer: reference %d not set", k);

    fx_dit_mod mod;
    modulation(r, sigma, &mod);

    /* h = [text | target | refs]: text and references from h0, target projected now. */
    int64_t tgt0 = fx_dit_row(r, L, 0), tgt1 = fx_dit_row(r, L + N, 0);
    memcpy(r->h, r->h0, (size_t)(tgt0 * d) * sizeof(float));
    memcpy(r->h + tgt1 * d, r->h0 + tgt1 * d, (size_t)((r->R - tgt1) * d) * sizeof(float));
    for (int64_t b = 0; b < B; b++)
        fx_linear(kc, N, x + b * N * c->in_channels, c->in_channels, &t->x_embedder, r->h + fx_dit_row(r, L, b) * d,
                  B * d, NULL);
    observe_rows(r, "context_embedder", r->h, 0, L);
    observe_rows(r, "x_embedder", r->h, L, r->n_img);

    const int n_blocks = c->double_blocks + c->single_blocks;
    char name[64];
    for (int i = 0; i < c->double_blocks; i++) {
        TRY(fx_dit_double_block(r, &t->dbl[i], &mod));
        if (r->observe) {
            snprintf(name, sizeof name, "transformer_blocks.%d.img", i);
            observe_rows(r, name, r->h, L, r->n_img);
            snprintf(name, sizeof name, "transformer_blocks.%d.txt", i);
            observe_rows(r, name, r->h, 0, L);
        }
        TRY(fx_ctx_checkpoint(r->ctx, i + 1, n_blocks));
    }
    for (int j = 0; j < c->single_blocks; j++) {
        TRY(fx_dit_single_block(r, &t->sgl[j], &mod));
        if (r->observe) {
            snprintf(name, sizeof name, "single_transformer_blocks.%d", j);
            observe_rows(r, name, r->h, 0, r->S);
        }
        TRY(fx_ctx_checkpoint(r->ctx, c->double_blocks + j + 1, n_blocks));
    }

    /* Final layer on the target rows only (text and references dropped). */
    float *a = r->u + 3 * d;
    fx_layernorm_modulate(kc, tgt1 - tgt0, d, r->h + tgt0 * d, d, mod.final_shift, mod.final_scale, c->eps,
                          a + tgt0 * r->ldu, r->ldu);
    for (int64_t b = 0; b < B; b++) {
        float *vb = v + b * N * c->out_channels;
        fx_linear(kc, N, a + fx_dit_row(r, L, b) * r->ldu, B * r->ldu, &t->proj_out, vb, c->out_channels, NULL);
        if (r->observe) r->observe(r->observe_user, "proj_out", (int)b, vb, N, c->out_channels, c->out_channels);
    }
    return FLUX_OK;
}
