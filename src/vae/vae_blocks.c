/*
 * vae_blocks.c — the VAE's blocks on stored tensors (BFL flux2 autoencoder.py; diffusers autoencoder_kl_flux2.py):
 *
 *   resnet     h = conv1(silu(GN1(x)));  out = skip(x) + conv2(silu(GN2(h)))
 *   attention  t = GN(x); q, k, v = t·Wᵀ + b; o = softmax(q·kᵀ/√C)·v;
 *              out = o·W_outᵀ + b_out + x          (1 head of dim C)
 *   resample   nearest ×2 + conv 3×3 (decoder), or zero pad right/bottom +
 *              conv 3×3 stride 2 (encoder)
 *
 * Each block reads its input from a level region (row slot layout, see
 * vae_stream.h) and writes its output back into it; the statistics of
 * every output are accumulated while it is written.
 */
#include "vae_blocks.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* out (x part of the level, cout channels) = resnet(in): `in` is the x part
 * with cin channels and its statistics; h goes to the h part. */
flux_status vb_resnet(vs_run *r, const vae_resnet *b, const vs_level *lv, const vs_stats *in_stats,
                      vs_stats *out_stats, const char *name) {
    const vs_tensor in = vs_level_part(lv, 0, b->cin);
    vs_tensor h = vs_level_part(lv, b->cout, b->cout), out = vs_level_part(lv, 0, b->cout);
    vs_stats *hs = &r->stats[1];
    vs_stats_init(hs, b->cout, r->groups);

    /* pass 1: h = conv1(silu(GN1(in))) (+ the shortcut of the raw rows, which
     * lands in row slots still holding unread input rows: one strip late) */
    vs_conv op1 = {0};
    op1.src = &in, op1.gn = in_stats, op1.norm = &b->norm1, op1.conv = &b->conv1;
    op1.stride = 1, op1.pad_top = op1.pad_left = op1.pad_bottom = op1.pad_right = 1;
    op1.dst = h, op1.dst_stats = hs;
    if (b->cin != b->cout) op1.side = &b->shortcut, op1.side_dst = out, op1.delay = 1;
    flux_status st = vs_run_conv(r, &op1);
    if (st) return st;
    vs_stats_finish(r, hs);

    /* pass 2: out = skip + conv2(silu(GN2(h))), in place over the skip */
    vs_conv op2 = {0};
    op2.src = &h, op2.gn = hs, op2.norm = &b->norm2, op2.conv = &b->conv2;
    op2.stride = 1, op2.pad_top = op2.pad_left = op2.pad_bottom = op2.pad_right = 1;
    op2.dst = out, op2.dst_stats = out_stats, op2.residual = 1;
    vs_stats_init(out_stats, b->cout, r->groups);
    if ((st = vs_run_conv(r, &op2))) return st;
    vs_stats_finish(r, out_stats);
    vs_observe(r, name, &out, NULL, NULL);
    return FLUX_OK;
}

/* x (x part, C channels) += attention(GN(x)); q/k/v: 3·pixels·C floats. */
flux_status vb_attention(vs_run *r, const vae_attn *a, const vs_level *lv, vs_stats *stats, float *qkv,
                         const char *name) {
    const int C = a->channels;
    const vs_tensor x = vs_level_part(lv, 0, C);
    const int64_t P = (int64_t)x.h * x.w;
    float *q = qkv, *k = qkv + P * C, *v = qkv + 2 * P * C;
    int rows = r->strip_pixels / x.w > 0 ? r->strip_pixels / x.w : 1;
    const fx_epilogue eq = {FX_EPI_STORE, a->bq, NULL}, ek = {FX_EPI_STORE, a->bk, NULL},
                      ev = {FX_EPI_STORE, a->bv, NULL}, eo = {FX_EPI_STORE, a->bout, NULL};
    float *t = vs_buf(r, 0, sizeof(float) * (size_t)rows * x.w * C);
    float *o = vs_buf(r, 1, sizeof(float) * (size_t)rows * x.w * C);
    if (!t || !o) return fx_fail(r->err, FLUX_ERR_NOMEM, "out of memory (VAE attention)");

    for (int y0 = 0; y0 < x.h; y0 += rows) {
        int y1 = y0 + rows < x.h ? y0 + rows : x.h;
        int64_t n = (int64_t)(y1 - y0) * x.w, p0 = (int64_t)y0 * x.w;
        vs_load_rows(r, &x, y0, y1, t);
        fx_groupnorm_apply(r->kc, n, C, r->groups, t, stats->mean, stats->rstd, a->norm.gamma, a->norm.beta, 0, t);
        fx_linear(r->kc, n, t, C, &a->q, q + p0 * C, C, &eq);
        fx_linear(r->kc, n, t, C, &a->k, k + p0 * C, C, &ek);
        fx_linear(r->kc, n, t, C, &a->v, v + p0 * C, C, &ev);
    }
    fx_attn_args args = {0};
    args.sq = args.sk = P;
    args.hq = args.hkv = 1;
    args.d = C;
    args.q = q, args.ldq = C;
    args.k = k, args.ldk = C;
    args.v = v, args.ldv = C;
    args.o = q, args.ldo = C; /* in place over q */
    args.scale = (float)(1.0 / sqrt((double)C));
    flux_status st = fx_attention(r->kc, &args, r->err);
    if (st) return st;

    vs_stats_init(stats, C, r->groups);
    for (int y0 = 0; y0 < x.h; y0 += rows) {
        int y1 = y0 + rows < x.h ? y0 + rows : x.h;
        int64_t n = (int64_t)(y1 - y0) * x.w, p0 = (int64_t)y0 * x.w;
        fx_linear(r->kc, n, q + p0 * C, C, &a->out, o, C, &eo);
        vs_load_rows(r, &x, y0, y1, t);
        fx_gated_add(r->kc, n, C, o, C, NULL, t, C);
        vs_stats_add(r, stats, n, o);
        vs_store_rows(r, &x, y0, y1, o);
    }
    vs_stats_finish(r, stats);
    vs_observe(r, name, &x, NULL, NULL);
    return FLUX_OK;
}

/* The level input `dst` (with its statistics) = resample(x part of `from`):
 * nearest ×2 + conv (up), or pad right/bottom + conv stride 2 (down). */
flux_status vb_resample(vs_run *r, const vae_conv *c, const vs_level *from, const vs_level *to, int up,
                        vs_stats *dst_stats, const char *name) {
    const vs_tensor src = vs_level_part(from, 0, c->cin);
    vs_conv op = {0};
    op.src = &src, op.conv = c;
    if (up) op.stride = 1, op.upsample = 1, op.pad_top = op.pad_left = op.pad_bottom = op.pad_right = 1;
    else op.stride = 2, op.pad_bottom = op.pad_right = 1; /* Downsample2D: F.pad(x, (0, 1, 0, 1)) */
    op.dst = vs_level_part(to, 0, c->cout);
    op.dst_stats = dst_stats;
    op.delay = 1; /* the next level may share memory with this one */
    vs_stats_init(dst_stats, c->cout, r->groups);
    flux_status st = vs_run_conv(r, &op);
    if (st) return st;
    vs_stats_finish(r, dst_stats);
    vs_observe(r, name, &op.dst, NULL, NULL);
    return FLUX_OK;
}

/* dst = conv_out(silu(GN_out(x part))), observed as <side>.conv_norm_out
 * (the GroupNorm output) and <side>.conv_out. */
flux_status vb_conv_out(vs_run *r, const vae_norm *norm, const vae_conv *c, const vs_level *lv,
                        const vs_stats *stats, const vs_tensor *dst, const char *side) {
    const vs_tensor x = vs_level_part(lv, 0, c->cin);
    char name[64];
    snprintf(name, sizeof name, "%s.conv_norm_out", side);
    vs_observe(r, name, &x, stats, norm);
    vs_conv op = {0};
    op.src = &x, op.gn = stats, op.norm = norm, op.conv = c;
    op.stride = 1, op.pad_top = op.pad_left = op.pad_bottom = op.pad_right = 1;
    op.dst = *dst;
    flux_status st = vs_run_conv(r, &op);
    if (st) return st;
    snprintf(name, sizeof name, "%s.conv_out", side);
    vs_observe(r, name, dst, NULL, NULL);
    return FLUX_OK;
}
