/*
 * dit_blocks.c — the double-stream and single-stream blocks of the FLUX.2
 * transformer (spec §3.6, §3.7) over the interleaved rows of a run
 * (transformer.h). All heavy math goes through simd/kernels.h.
 *
 * Shapes below are per row; "rows" is always a contiguous row range of the
 * run covering every sequence (text rows [0, L·B), image rows [L·B, S·B)).
 * U columns: Q [0,d) K [d,2d) V [2d,3d) O [3d,4d) G [4d,4d+m) P [4d+m,4d+2m).
 */
#include "dit_internal.h"

#include <math.h>

/* Q/K/V columns of U after the projections: per-head RMSNorm, then RoPE. */
static void qk_norm_rope(fx_dit_run *r, int64_t row0, int64_t rows, const float *norm_q, const float *norm_k) {
    const fx_dit_config *c = &r->d->c;
    const fx_kctx *kc = &r->ctx->kc;
    fx_rope_table t = fx_dit_rope_rows(r, row0, rows);
    float *q = r->u + row0 * r->ldu;
    fx_qk_norm_rope(kc, q, r->ldu, rows, c->heads, c->head_dim, norm_q, c->eps, &t);
    fx_qk_norm_rope(kc, q + c->hidden, r->ldu, rows, c->heads, c->head_dim, norm_k, c->eps, &t);
}

flux_status fx_dit_attention(fx_dit_run *r) {
    const fx_dit_config *c = &r->d->c;
    const int64_t d = c->hidden;
    for (int64_t b = 0; b < r->B; b++) {
        float *base = r->u + b * r->ldu; /* sequence b: rows b, b + B, ... */
        fx_attn_args a = {
            .sq = r->S, .sk = r->S, .hq = c->heads, .hkv = c->heads, .d = c->head_dim,
            .q = base, .ldq = r->B * r->ldu,
            .k = base + d, .ldk = r->B * r->ldu,
            .v = base + 2 * d, .ldv = r->B * r->ldu,
            .o = base + 3 * d, .ldo = r->B * r->ldu,
            .scale = (float)(1.0 / sqrt((double)c->head_dim)),
        };
        flux_status st = fx_attention(&r->ctx->kc, &a, &r->ctx->err);
        if (st) return st;
    }
    return FLUX_OK;
}

/* Y[rows] += gate ⊙ (X · Wᵀ) */
static void gated_linear(const fx_kctx *kc, int64_t rows, const float *x, int64_t ldx, const fx_weight *w,
                         float *y, int64_t ldy, const float *gate) {
    fx_epilogue epi = {.mode = FX_EPI_GATED_ACCUMULATE, .gate = gate};
    fx_linear(kc, rows, x, ldx, w, y, ldy, &epi);
}

/* SwiGLU MLP of one stream on rows [row0, row0 + rows), AdaLN included:
 * h += gate2 ⊙ ((silu(G) ⊙ P) · W_outᵀ) with [G | P] = AdaLN(h) · W_inᵀ. */
static void mlp(fx_dit_run *r, int64_t row0, int64_t rows, const fx_weight *w_in, const fx_weight *w_out,
                const float *shift, const float *scale, const float *gate) {
    const fx_dit_config *c = &r->d->c;
    const fx_kctx *kc = &r->ctx->kc;
    const int64_t d = c->hidden, m = c->mlp_hidden, ldu = r->ldu;
    float *h = r->h + row0 * d, *u = r->u + row0 * ldu;
    float *a = u + 3 * d, *g = u + 4 * d, *p = g + m;
    fx_layernorm_modulate(kc, rows, d, h, d, shift, scale, c->eps, a, ldu);
    fx_linear(kc, rows, a, ldu, w_in, g, ldu, NULL);
    fx_swiglu(kc, rows, m, g, ldu, p, ldu, g, ldu);
    gated_linear(kc, rows, g, ldu, w_out, h, d, gate);
}

flux_status fx_dit_double_block(fx_dit_run *r, const fx_dit_double_w *w, const fx_dit_mod *mod) {
    const fx_dit_config *c = &r->d->c;
    const fx_kctx *kc = &r->ctx->kc;
    const int64_t d = c->hidden, ldu = r->ldu;
    const int64_t row0[2] = {0, r->L * r->B};
    const int64_t rows[2] = {r->L * r->B, r->n_img * r->B};
    const float *mv[2] = {mod->txt, mod->img};

    /* 1–3: AdaLN, Q K V projections, QK-RMSNorm and RoPE per stream. */
    for (int s = 0; s < 2; s++) {
        float *h = r->h + row0[s] * d, *u = r->u + row0[s] * ldu;
        float *a = u + 3 * d;
        fx_layernorm_modulate(kc, rows[s], d, h, d, mv[s] + 0 * d, mv[s] + 1 * d, c->eps, a, ldu);
        fx_linear(kc, rows[s], a, ldu, &w->q[s], u, ldu, NULL);
        fx_linear(kc, rows[s], a, ldu, &w->k[s], u + d, ldu, NULL);
        fx_linear(kc, rows[s], a, ldu, &w->v[s], u + 2 * d, ldu, NULL);
        qk_norm_rope(r, row0[s], rows[s], w->norm_q[s], w->norm_k[s]);
    }
    /* 4–5: joint attention of each sequence over [text; image]. */
    flux_status st = fx_dit_attention(r);
    if (st) return st;
    /* 6–7: output projections with gated residual adds. */
    for (int s = 0; s < 2; s++)
        gated_linear(kc, rows[s], r->u + row0[s] * ldu + 3 * d, ldu, &w->out[s], r->h + row0[s] * d, d,
                     mv[s] + 2 * d);
    /* 8: SwiGLU MLP per stream. */
    for (int s = 0; s < 2; s++)
        mlp(r, row0[s], rows[s], &w->ff_in[s], &w->ff_out[s], mv[s] + 3 * d, mv[s] + 4 * d, mv[s] + 5 * d);
    return FLUX_OK;
}

flux_status fx_dit_single_block(fx_dit_run *r, const fx_dit_single_w *w, const fx_dit_mod *mod) {
    const fx_dit_config *c = &r->d->c;
    const fx_kctx *kc = &r->ctx->kc;
    const int64_t d = c->hidden, m = c->mlp_hidden, ldu = r->ldu, R = r->R;
    const float *shift = mod->single, *scale = mod->single + d, *gate = mod->single + 2 * d;
    float *u = r->u, *a = u + 3 * d, *g = u + 4 * d;

    fx_layernorm_modulate(kc, R, d, r->h, d, shift, scale, c->eps, a, ldu);
    /* The fused projection, as two row slices of one weight: [Q K V] and [G P]. */
    fx_linear(kc, R, a, ldu, &w->qkv, u, ldu, NULL);
    fx_linear(kc, R, a, ldu, &w->mlp_in, g, ldu, NULL);
    qk_norm_rope(r, 0, R, w->norm_q, w->norm_k);
    flux_status st = fx_dit_attention(r); /* O overwrites the consumed AdaLN output */
    if (st) return st;
    fx_swiglu(kc, R, m, g, ldu, g + m, ldu, g, ldu);
    /* h += gate ⊙ ([O | silu(G)⊙P] · W_outᵀ), one GEMM over d + m inputs. */
    gated_linear(kc, R, u + 3 * d, ldu, &w->out, r->h, d, gate);
    return FLUX_OK;
}
