/*
 * dit_blocks.c — the double-stream and single-stream blocks of the FLUX.2
 * transformer (BFL flux2 model.py; diffusers transformer_flux2.py) over the interleaved rows of a run
 * (transformer.h). All math goes through the backend seam (src/ops/ops.h),
 * on whatever the context runs (CPU kernels or a Vulkan device).
 *
 * Shapes below are per row; "rows" is always a contiguous row range of the
 * run covering every sequence (text rows [0, L·B), image rows [L·B, S·B)).
 * U columns: Q [0,d) K [d,2d) V [2d,3d) O [3d,4d) G [4d,4d+m) P [4d+m,4d+2m).
 */
#include "dit_internal.h"

#include <math.h>

/* Q/K/V columns of U after the projections: per-head RMSNorm, then RoPE. */
static flux_status qk_norm_rope(fx_dit_run *r, int64_t row0, int64_t rows, fx_buf *norm_q, fx_buf *norm_k) {
    const fx_dit_config *c = &r->d->c;
    fx_err *err = &r->ctx->err;
    TRY(fx_op_qk_norm_rope(r->ops, fx_dit_u(r, row0, 0), rows, c->heads, c->head_dim, fx_vec(norm_q, 0), c->eps,
                           &r->rope, row0, err));
    return fx_op_qk_norm_rope(r->ops, fx_dit_u(r, row0, c->hidden), rows, c->heads, c->head_dim, fx_vec(norm_k, 0),
                              c->eps, &r->rope, row0, err);
}

flux_status fx_dit_attention(fx_dit_run *r) {
    const fx_dit_config *c = &r->d->c;
    const int64_t d = c->hidden;
    for (int64_t b = 0; b < r->B; b++) {
        fx_view seq = fx_dit_u(r, b, 0); /* sequence b: rows b, b + B, ... */
        seq.ld = r->B * r->ldu;
        fx_op_attn a = {
            .sq = r->S, .sk = r->S, .hq = c->heads, .hkv = c->heads, .d = c->head_dim,
            .q = seq, .k = fx_at(seq, 0, d), .v = fx_at(seq, 0, 2 * d), .o = fx_at(seq, 0, 3 * d),
            .scale = (float)(1.0 / sqrt((double)c->head_dim)),
        };
        TRY(fx_op_attention(r->ops, &a, &r->ctx->err));
    }
    return FLUX_OK;
}

/* y[rows] += gate ⊙ (x · Wᵀ) */
static flux_status gated_linear(fx_dit_run *r, int64_t rows, fx_view x, const fx_opw *w, fx_view y, fx_view gate) {
    fx_op_epi epi = {.mode = FX_EPI_GATED_ACCUMULATE, .gate = gate};
    return fx_op_linear(r->ops, rows, x, w, y, &epi, &r->ctx->err);
}

/* SwiGLU MLP of one stream on rows [row0, row0 + rows), AdaLN included:
 * h += gate2 ⊙ ((silu(G) ⊙ P) · W_outᵀ) with [G | P] = AdaLN(h) · W_inᵀ. */
static flux_status mlp(fx_dit_run *r, int64_t row0, int64_t rows, const fx_opw *w_in, const fx_opw *w_out,
                       fx_view shift, fx_view scale, fx_view gate) {
    const fx_dit_config *c = &r->d->c;
    fx_err *err = &r->ctx->err;
    const int64_t d = c->hidden, m = c->mlp_hidden;
    fx_view h = fx_dit_h(r, row0), a = fx_dit_u(r, row0, 3 * d), g = fx_dit_u(r, row0, 4 * d), p = fx_at(g, 0, m);
    TRY(fx_op_layernorm_modulate(r->ops, rows, d, h, shift, scale, c->eps, a, err));
    TRY(fx_op_linear(r->ops, rows, a, w_in, g, NULL, err));
    TRY(fx_op_swiglu(r->ops, rows, m, g, p, g, err));
    return gated_linear(r, rows, g, w_out, h, gate);
}

flux_status fx_dit_double_block(fx_dit_run *r, const fx_dit_double_w *w, const fx_dit_mod *mod) {
    const fx_dit_config *c = &r->d->c;
    fx_err *err = &r->ctx->err;
    const int64_t d = c->hidden;
    const int64_t row0[2] = {0, r->L * r->B};
    const int64_t rows[2] = {r->L * r->B, r->n_img * r->B};
    const fx_view mv[2] = {mod->txt, mod->img};

    /* 1–3: AdaLN, Q K V projections, QK-RMSNorm and RoPE per stream. */
    for (int s = 0; s < 2; s++) {
        fx_view h = fx_dit_h(r, row0[s]), a = fx_dit_u(r, row0[s], 3 * d);
        TRY(fx_op_layernorm_modulate(r->ops, rows[s], d, h, fx_at(mv[s], 0, 0), fx_at(mv[s], 0, d), c->eps, a, err));
        TRY(fx_op_linear(r->ops, rows[s], a, &w->q[s], fx_dit_u(r, row0[s], 0), NULL, err));
        TRY(fx_op_linear(r->ops, rows[s], a, &w->k[s], fx_dit_u(r, row0[s], d), NULL, err));
        TRY(fx_op_linear(r->ops, rows[s], a, &w->v[s], fx_dit_u(r, row0[s], 2 * d), NULL, err));
        TRY(qk_norm_rope(r, row0[s], rows[s], w->norm_q[s], w->norm_k[s]));
    }
    /* 4–5: joint attention of each sequence over [text; image]. */
    TRY(fx_dit_attention(r));
    /* 6–7: output projections with gated residual adds. */
    for (int s = 0; s < 2; s++)
        TRY(gated_linear(r, rows[s], fx_dit_u(r, row0[s], 3 * d), &w->out[s], fx_dit_h(r, row0[s]),
                         fx_at(mv[s], 0, 2 * d)));
    /* 8: SwiGLU MLP per stream. */
    for (int s = 0; s < 2; s++)
        TRY(mlp(r, row0[s], rows[s], &w->ff_in[s], &w->ff_out[s], fx_at(mv[s], 0, 3 * d), fx_at(mv[s], 0, 4 * d),
                fx_at(mv[s], 0, 5 * d)));
    return FLUX_OK;
}

flux_status fx_dit_single_block(fx_dit_run *r, const fx_dit_single_w *w, const fx_dit_mod *mod) {
    const fx_dit_config *c = &r->d->c;
    fx_err *err = &r->ctx->err;
    const int64_t d = c->hidden, m = c->mlp_hidden, R = r->R;
    fx_view shift = mod->single, scale = fx_at(mod->single, 0, d), gate = fx_at(mod->single, 0, 2 * d);
    fx_view h = fx_dit_h(r, 0), a = fx_dit_u(r, 0, 3 * d), g = fx_dit_u(r, 0, 4 * d);

    TRY(fx_op_layernorm_modulate(r->ops, R, d, h, shift, scale, c->eps, a, err));
    /* The fused projection, as two row slices of one weight: [Q K V] and [G P]. */
    TRY(fx_op_linear(r->ops, R, a, &w->qkv, fx_dit_u(r, 0, 0), NULL, err));
    TRY(fx_op_linear(r->ops, R, a, &w->mlp_in, g, NULL, err));
    TRY(qk_norm_rope(r, 0, R, w->norm_q, w->norm_k));
    TRY(fx_dit_attention(r)); /* O overwrites the consumed AdaLN output */
    TRY(fx_op_swiglu(r->ops, R, m, g, fx_at(g, 0, m), g, err));
    /* h += gate ⊙ ([O | silu(G)⊙P] · W_outᵀ), one GEMM over d + m inputs. */
    return gated_linear(r, R, a, &w->out, h, gate);
}
