/*
 * vae_decoder.c — the decoder (BFL flux2 autoencoder.py; diffusers autoencoder_kl_flux2.py) and its storage plan.
 *
 *   z [lat, h8, w8] → post_quant_conv (1×1) → conv_in → mid (resnet,
 *   attention, resnet) → up block i = 0..L−1: resnets, then (i < L−1) nearest
 *   ×2 + conv → GroupNorm → SiLU → conv_out → image [3, 8·h8, 8·w8]
 *
 * Storage plan. Level i (resolution h8·2^i × w8·2^i) keeps its tensors in a
 * region of row slots [x part | h part], pitch max(cin, 2·cout)·width. The
 * last (largest) level's region sits at the start of the arena, the level
 * before it at the end, and so on alternately, so each upsample writes the
 * next level from one end while it reads the previous one from the other.
 * Where the two overlap (the last transition, when the arena is exactly the
 * size of the largest level), the writes trail the reads: the arena is made
 * just large enough for that (vs_stream_gap). The mid block's attention
 * Q, K, V (f32) sit on the other side of level 0. For the real VAE the arena
 * is the largest level: 256 channels at full resolution, i.e. 512 MiB at
 * 1024² in bf16.
 */
#include "vae_nets.h"

#include "vae_blocks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void plan(const vae_model *v, int h8, int w8, const fx_dtype *dt, int strip_pixels, vs_plan *p) {
    const vae_half *d = &v->dec;
    const int L = v->c.levels;
    int at_end[FX_VAE_MAX_LEVELS];
    size_t A = 0;
    memset(p, 0, sizeof *p);
    for (int i = 0; i < L; i++) {
        vs_plan_level(p, i, &d->level[i].res[0], dt[i], h8 << i, w8 << i);
        at_end[i] = (L - 1 - i) % 2;
        if (p->bytes[i] > A) A = p->bytes[i];
    }
    const int C0 = d->mid.res[0].cout;
    p->qkv_bytes = d->mid.has_attn ? vs_round64(3 * sizeof(float) * (size_t)h8 * (size_t)w8 * (size_t)C0) : 0;
    if (p->bytes[0] + p->qkv_bytes > A) A = p->bytes[0] + p->qkv_bytes;
    for (int i = 0; i + 1 < L; i++) {
        size_t need;
        if (!at_end[i]) { /* start → end: disjoint */
            need = p->bytes[i] + p->bytes[i + 1];
        } else { /* end → start: the writes may trail the reads */
            const vs_level *a = &p->lv[i], *b = &p->lv[i + 1];
            const vae_conv *up = &d->level[i].sample;
            const int64_t ea = dt[i] == FX_DTYPE_BF16 ? 2 : 4, eb = dt[i + 1] == FX_DTYPE_BF16 ? 2 : 4;
            fx_conv2d_geom g = {a->h, a->w, up->cin, up->cout, 3, 3, 1, 1, 1, 1, 1, 1};
            int64_t gap = vs_stream_gap(&g, strip_pixels, a->pitch * ea, b->pitch * eb, (int64_t)b->w * up->cout * eb);
            need = gap > 0 ? p->bytes[i] + vs_round64((size_t)gap) : p->bytes[i];
        }
        if (need > A) A = need;
    }
    p->arena = A;
    for (int i = 0; i < L; i++) p->off[i] = at_end[i] ? A - p->bytes[i] : 0;
    p->qkv_off = at_end[0] ? 0 : A - p->qkv_bytes;
}

flux_status vd_decode(vs_run *r, const float *z, int h8, int w8, float *image) {
    const vae_model *v = r->m;
    const vae_half *d = &v->dec;
    const int L = v->c.levels, lat = v->c.latent_channels;
    const int64_t P = (int64_t)h8 * w8;
    char name[96];
    vs_plan p;
    fx_dtype dt[FX_VAE_MAX_LEVELS];
    for (int i = 0; i < L; i++) dt[i] = vs_storage_dtype(r, 1 << (L - 1 - i));
    plan(v, h8, w8, dt, r->strip_pixels, &p);
    TRY(vs_arena_alloc(r, p.arena));
    for (int i = 0; i < L; i++) p.lv[i].base = r->arena + p.off[i];

    /* z → channels-last [P, lat] → post_quant_conv */
    float *zt = malloc(2 * sizeof(float) * (size_t)P * (size_t)lat);
    if (!zt) return fx_fail(r->err, FLUX_ERR_NOMEM, "out of memory (VAE latent)");
    vs_account(r, (ptrdiff_t)(2 * sizeof(float) * (size_t)P * (size_t)lat));
    float *zq = zt + P * lat;
    const vs_tensor zin = {(void *)z, FX_DTYPE_F32, h8, w8, lat, 0, 1};
    vs_load_rows(r, &zin, 0, h8, zt);
    vs_tensor zc = {zt, FX_DTYPE_F32, h8, w8, lat, (int64_t)w8 * lat, 0};
    if (v->has_post_quant) {
        const fx_epilogue e = {FX_EPI_STORE, v->post_quant.bias, NULL};
        fx_linear(r->kc, P, zt, lat, &v->post_quant.w, zq, lat, &e);
        zc.data = zq;
        vs_observe(r, "post_quant_conv", &zc, NULL, NULL);
    }

    /* conv_in → level 0 */
    vs_stats *st = &r->stats[0];
    vs_stats_init(st, d->conv_in.cout, r->groups);
    vs_conv op = {0};
    op.src = &zc, op.conv = &d->conv_in;
    op.stride = 1, op.pad_top = op.pad_left = op.pad_bottom = op.pad_right = 1;
    op.dst = vs_level_part(&p.lv[0], 0, d->conv_in.cout), op.dst_stats = st;
    flux_status s = vs_run_conv(r, &op);
    free(zt);
    vs_account(r, -(ptrdiff_t)(2 * sizeof(float) * (size_t)P * (size_t)lat));
    TRY(s);
    vs_stats_finish(r, st);
    vs_observe(r, "decoder.conv_in", &op.dst, NULL, NULL);

    /* mid block at level 0 */
    TRY(vb_resnet(r, &d->mid.res[0], &p.lv[0], st, st, "decoder.mid_block.resnets.0"));
    if (d->mid.has_attn)
        TRY(vb_attention(r, &d->mid.attn, &p.lv[0], st, (float *)(void *)(r->arena + p.qkv_off),
                         "decoder.mid_block.attentions.0"));
    TRY(vb_resnet(r, &d->mid.res[1], &p.lv[0], st, st, "decoder.mid_block.resnets.1"));
    TRY(vs_checkpoint(r, 1, L + 2)); /* stages: mid block, L up blocks, output */

    /* up blocks */
    for (int i = 0; i < L; i++) {
        for (int j = 0; j < d->level[i].n_res; j++) {
            snprintf(name, sizeof name, "decoder.up_blocks.%d.resnets.%d", i, j);
            TRY(vb_resnet(r, &d->level[i].res[j], &p.lv[i], st, st, name));
        }
        if (d->level[i].has_sample) {
            snprintf(name, sizeof name, "decoder.up_blocks.%d.upsamplers.0", i);
            TRY(vb_resample(r, &d->level[i].sample, &p.lv[i], &p.lv[i + 1], 1, st, name));
        }
        TRY(vs_checkpoint(r, 2 + i, L + 2));
    }

    /* GroupNorm → SiLU → conv_out → the planar image */
    const vs_tensor out = {image, FX_DTYPE_F32, p.lv[L - 1].h, p.lv[L - 1].w, d->conv_out.cout, 0, 1};
    TRY(vb_conv_out(r, &d->norm_out, &d->conv_out, &p.lv[L - 1], st, &out, "decoder"));
    return vs_checkpoint(r, L + 2, L + 2);
}
