/*
 * vae_net.c — the AutoencoderKLFlux2 networks, written once (BFL flux2
 * autoencoder.py; diffusers autoencoder_kl_flux2.py) over the layers of an
 * executor (vae_exec.h):
 *
 *   resnet     h = conv1(silu(GN1(x)));  out = skip(x) + conv2(silu(GN2(h)))
 *              (skip: x, or a 1×1 shortcut when the channels change)
 *   attention  x += (softmax(q·kᵀ/√C)·v)·W_outᵀ + b_out,  q k v = GN(x)·Wᵀ + b
 *   resample   nearest ×2 + conv 3×3 (decoder), zero pad right/bottom +
 *              conv 3×3 stride 2 (encoder)
 *
 *   decoder    z [lat, h8, w8] → post_quant_conv (1×1) → conv_in → mid
 *              (resnet, attention, resnet) → up block i = 0..L−1: resnets,
 *              then (i < L−1) upsample → GroupNorm → SiLU → conv_out
 *              → image [3, 8·h8, 8·w8]
 *   encoder    image [3, H, W] → conv_in → down block i = 0..L−1: resnets,
 *              then (i < L−1) downsample → mid → GroupNorm → SiLU →
 *              conv_out → quant_conv (1×1) → mean = the first lat channels
 *
 * Every stage's output goes to the observer under its diffusers name.
 */
#include "vae_net.h"

#include <stdio.h>

static flux_status layer(vae_exec *ex, const vae_layer *l) { return ex->impl->conv(ex, l); }

static flux_status observe(vae_exec *ex, const char *name, int slot, int channels, const vae_norm *norm) {
    return ex->observer ? ex->impl->observe(ex, name, slot, channels, norm) : FLUX_OK;
}

static flux_status resnet(vae_exec *ex, const vae_resnet *b, const char *name) {
    const vae_layer l1 = {.conv = &b->conv1, .src = VAE_X, .dst = VAE_H, .norm = &b->norm1,
                          .shortcut = b->cin != b->cout ? &b->shortcut : NULL};
    const vae_layer l2 = {.conv = &b->conv2, .src = VAE_H, .dst = VAE_X, .norm = &b->norm2, .residual = 1};
    TRY(layer(ex, &l1));
    TRY(layer(ex, &l2));
    return observe(ex, name, VAE_X, b->cout, NULL);
}

static flux_status mid_block(vae_exec *ex, const vae_mid *mid, const char *side) {
    char name[96];
    snprintf(name, sizeof name, "%s.mid_block.resnets.0", side);
    TRY(resnet(ex, &mid->res[0], name));
    if (mid->has_attn) {
        TRY(ex->impl->attention(ex, &mid->attn));
        snprintf(name, sizeof name, "%s.mid_block.attentions.0", side);
        TRY(observe(ex, name, VAE_X, mid->attn.channels, NULL));
    }
    snprintf(name, sizeof name, "%s.mid_block.resnets.1", side);
    return resnet(ex, &mid->res[1], name);
}

/* The resnets of level i, then its resampler (up: +1, down: −1). */
static flux_status level(vae_exec *ex, const vae_level *lv, int i, const char *blocks, const char *sampler, int dir) {
    char name[96];
    for (int j = 0; j < lv->n_res; j++) {
        snprintf(name, sizeof name, "%s.%d.resnets.%d", blocks, i, j);
        TRY(resnet(ex, &lv->res[j], name));
    }
    if (!lv->has_sample) return FLUX_OK;
    const vae_layer l = {.conv = &lv->sample, .src = VAE_X, .dst = VAE_X, .resample = dir};
    TRY(layer(ex, &l));
    snprintf(name, sizeof name, "%s.%d.%s.0", blocks, i, sampler);
    return observe(ex, name, VAE_X, lv->sample.cout, NULL);
}

/* dst = conv_out(silu(GN_out(x))), observed as <side>.conv_norm_out (the
 * GroupNorm output) and <side>.conv_out. */
static flux_status conv_out(vae_exec *ex, const vae_half *hf, int dst, const char *side) {
    char name[64];
    snprintf(name, sizeof name, "%s.conv_norm_out", side);
    TRY(observe(ex, name, VAE_X, hf->conv_out.cin, &hf->norm_out));
    const vae_layer l = {.conv = &hf->conv_out, .src = VAE_X, .dst = dst, .norm = &hf->norm_out};
    TRY(layer(ex, &l));
    snprintf(name, sizeof name, "%s.conv_out", side);
    return observe(ex, name, dst, hf->conv_out.cout, NULL);
}

static flux_status checkpoint(vae_exec *ex, int sub, int subtotal) { return ex->impl->checkpoint(ex, sub, subtotal); }

flux_status vae_net_decode(vae_exec *ex) {
    const vae_model *v = ex->m;
    const vae_half *d = &v->dec;
    const int L = v->c.levels;
    if (v->has_post_quant) {
        const vae_layer l = {.conv = &v->post_quant, .src = VAE_EDGE, .dst = VAE_EDGE};
        TRY(layer(ex, &l));
        TRY(observe(ex, "post_quant_conv", VAE_EDGE, v->post_quant.cout, NULL));
    }
    const vae_layer in = {.conv = &d->conv_in, .src = VAE_EDGE, .dst = VAE_X};
    TRY(layer(ex, &in));
    TRY(observe(ex, "decoder.conv_in", VAE_X, d->conv_in.cout, NULL));
    TRY(mid_block(ex, &d->mid, "decoder"));
    TRY(checkpoint(ex, 1, L + 2)); /* stages: mid block, L up blocks, output */
    for (int i = 0; i < L; i++) {
        TRY(level(ex, &d->level[i], i, "decoder.up_blocks", "upsamplers", +1));
        TRY(checkpoint(ex, 2 + i, L + 2));
    }
    TRY(conv_out(ex, d, VAE_OUT, "decoder"));
    return checkpoint(ex, L + 2, L + 2);
}

flux_status vae_net_encode(vae_exec *ex) {
    const vae_model *v = ex->m;
    const vae_half *e = &v->enc;
    const int L = v->c.levels;
    const vae_layer in = {.conv = &e->conv_in, .src = VAE_EDGE, .dst = VAE_X};
    TRY(layer(ex, &in));
    TRY(observe(ex, "encoder.conv_in", VAE_X, e->conv_in.cout, NULL));
    for (int i = 0; i < L; i++) {
        TRY(level(ex, &e->level[i], i, "encoder.down_blocks", "downsamplers", -1));
        TRY(checkpoint(ex, 1 + i, L + 2)); /* stages: L down blocks, mid block, output */
    }
    TRY(mid_block(ex, &e->mid, "encoder"));
    TRY(checkpoint(ex, L + 1, L + 2));
    TRY(conv_out(ex, e, VAE_EDGE, "encoder"));
    if (v->has_quant) {
        const vae_layer l = {.conv = &v->quant, .src = VAE_EDGE, .dst = VAE_EDGE};
        TRY(layer(ex, &l));
        TRY(observe(ex, "quant_conv", VAE_EDGE, v->quant.cout, NULL));
    }
    /* the mean: the first lat channels of the moments */
    TRY(ex->impl->output(ex, VAE_EDGE, v->c.latent_channels));
    return checkpoint(ex, L + 2, L + 2);
}
