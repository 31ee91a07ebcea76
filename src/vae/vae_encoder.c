/*
 * vae_encoder.c — the encoder (BFL flux2 autoencoder.py; diffusers autoencoder_kl_flux2.py) and its storage plan.
 *
 *   image [3, H, W] → conv_in → down block i = 0..L−1: resnets, then
 *   (i < L−1) zero pad right/bottom + conv 3×3 stride 2 → mid (resnet,
 *   attention, resnet) → GroupNorm → SiLU → conv_out → quant_conv (1×1)
 *   → mean = the first latent_channels channels of the moments
 *
 * Storage plan. Level i (H/2^i × W/2^i) keeps its tensors in a region of
 * row slots [x part | h part], pitch max(cin, 2·cout)·width, all at the
 * start of the arena: each downsample writes the next (smaller) level over
 * the rows of this one it has already read (checked by vs_stream_gap; a
 * level that does not fit that way goes after the previous one). Q, K, V of
 * the mid attention follow the last level. For the real VAE the arena is the
 * first level: 2 × 128 channels at full resolution.
 */
#include "vae_nets.h"

#include "vae_blocks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void plan(const vae_model *v, int height, int width, const fx_dtype *dt, int strip_pixels, vs_plan *p) {
    const vae_half *e = &v->enc;
    const int L = v->c.levels;
    memset(p, 0, sizeof *p);
    for (int i = 0; i < L; i++) {
        vs_plan_level(p, i, &e->level[i].res[0], dt[i], height >> i, width >> i);
        const vs_level *l = &p->lv[i];
        const int64_t es = dt[i] == FX_DTYPE_BF16 ? 2 : 4;
        if (i > 0) { /* in place over level i − 1 when the writes trail the reads */
            const vs_level *a = &p->lv[i - 1];
            const vae_conv *down = &e->level[i - 1].sample;
            const int64_t ea = dt[i - 1] == FX_DTYPE_BF16 ? 2 : 4;
            fx_conv2d_geom g = {a->h, a->w, down->cin, down->cout, 3, 3, 2, 0, 0, 1, 1, 0};
            int64_t gap = vs_stream_gap(&g, strip_pixels, a->pitch * ea, l->pitch * es, (int64_t)l->w * down->cout * es);
            p->off[i] = gap <= 0 ? p->off[i - 1] : p->off[i - 1] + p->bytes[i - 1];
        }
        if (p->off[i] + p->bytes[i] > p->arena) p->arena = p->off[i] + p->bytes[i];
    }
    const int C = e->mid.res[0].cout;
    const vs_level *last = &p->lv[L - 1];
    p->qkv_bytes = e->mid.has_attn ? vs_round64(3 * sizeof(float) * (size_t)last->h * (size_t)last->w * (size_t)C) : 0;
    p->qkv_off = p->off[L - 1] + p->bytes[L - 1];
    if (p->qkv_off + p->qkv_bytes > p->arena) p->arena = p->qkv_off + p->qkv_bytes;
}

flux_status ve_encode(vs_run *r, const float *image, int height, int width, float *mean) {
    const vae_model *v = r->m;
    const vae_half *e = &v->enc;
    const int L = v->c.levels, lat = v->c.latent_channels;
    char name[96];
    vs_plan p;
    fx_dtype dt[FX_VAE_MAX_LEVELS];
    for (int i = 0; i < L; i++) dt[i] = vs_storage_dtype(r, 1 << i);
    plan(v, height, width, dt, r->strip_pixels, &p);
    TRY(vs_arena_alloc(r, p.arena));
    for (int i = 0; i < L; i++) p.lv[i].base = r->arena + p.off[i];

    /* conv_in → level 0 */
    vs_stats *st = &r->stats[0];
    vs_stats_init(st, e->conv_in.cout, r->groups);
    const vs_tensor img = {(void *)image, FX_DTYPE_F32, height, width, e->conv_in.cin, 0, 1};
    vs_conv op = {0};
    op.src = &img, op.conv = &e->conv_in;
    op.stride = 1, op.pad_top = op.pad_left = op.pad_bottom = op.pad_right = 1;
    op.dst = vs_level_part(&p.lv[0], 0, e->conv_in.cout), op.dst_stats = st;
    TRY(vs_run_conv(r, &op));
    vs_stats_finish(r, st);
    vs_observe(r, "encoder.conv_in", &op.dst, NULL, NULL);

    /* down blocks */
    for (int i = 0; i < L; i++) {
        for (int j = 0; j < e->level[i].n_res; j++) {
            snprintf(name, sizeof name, "encoder.down_blocks.%d.resnets.%d", i, j);
            TRY(vb_resnet(r, &e->level[i].res[j], &p.lv[i], st, st, name));
        }
        if (e->level[i].has_sample) {
            snprintf(name, sizeof name, "encoder.down_blocks.%d.downsamplers.0", i);
            TRY(vb_resample(r, &e->level[i].sample, &p.lv[i], &p.lv[i + 1], 0, st, name));
        }
        TRY(vs_checkpoint(r, 1 + i, L + 2)); /* stages: L down blocks, mid block, output */
    }

    /* mid block at the last level */
    const vs_level *top = &p.lv[L - 1];
    TRY(vb_resnet(r, &e->mid.res[0], top, st, st, "encoder.mid_block.resnets.0"));
    if (e->mid.has_attn)
        TRY(vb_attention(r, &e->mid.attn, top, st, (float *)(void *)(r->arena + p.qkv_off),
                         "encoder.mid_block.attentions.0"));
    TRY(vb_resnet(r, &e->mid.res[1], top, st, st, "encoder.mid_block.resnets.1"));
    TRY(vs_checkpoint(r, L + 1, L + 2));

    /* GroupNorm → SiLU → conv_out → quant_conv → mean */
    const int64_t P = (int64_t)top->h * top->w, M = 2 * lat;
    size_t mbytes = 2 * sizeof(float) * (size_t)(P * M);
    float *mom = malloc(mbytes);
    if (!mom) return fx_fail(r->err, FLUX_ERR_NOMEM, "out of memory (VAE moments)");
    vs_account(r, (ptrdiff_t)mbytes);
    vs_tensor moments = {mom, FX_DTYPE_F32, top->h, top->w, (int)M, M * top->w, 0};
    flux_status s = vb_conv_out(r, &e->norm_out, &e->conv_out, top, st, &moments, "encoder");
    if (!s && v->has_quant) {
        const fx_epilogue ep = {FX_EPI_STORE, v->quant.bias, NULL};
        fx_linear(r->kc, P, mom, M, &v->quant.w, mom + P * M, M, &ep);
        moments.data = mom + P * M;
        vs_observe(r, "quant_conv", &moments, NULL, NULL);
    }
    if (!s) { /* mean: channels [0, lat) → planar [lat, h, w] */
        const float *m = moments.data;
        for (int c = 0; c < lat; c++)
            for (int64_t i = 0; i < P; i++) mean[c * P + i] = m[i * M + c];
    }
    free(mom);
    vs_account(r, -(ptrdiff_t)mbytes);
    return s ? s : vs_checkpoint(r, L + 2, L + 2);
}
