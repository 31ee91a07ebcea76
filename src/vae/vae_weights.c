/*
 * vae_weights.c — the VAE's layers from the weight set (vae_weights.h):
 * conv and linear weights are views into the mapped file, biases and norm
 * affines small f32 copies.
 */
#include "vae_weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static flux_status load_conv(fx_wset *w, const char *prefix, int cin, int cout, int k, vae_conv *c, fx_err *err) {
    char name[FX_ST_MAX_NAME];
    c->cin = cin, c->cout = cout, c->k = k;
    snprintf(name, sizeof name, "%s.weight", prefix);
    TRY(fx_wset_conv(w, name, cout, cin, k, k, &c->w, err));
    return fx_wset_vecf(w, &c->bias, cout, err, "%s.bias", prefix);
}

static flux_status load_norm(fx_wset *w, const char *prefix, int channels, vae_norm *n, fx_err *err) {
    n->channels = channels;
    TRY(fx_wset_vecf(w, &n->gamma, channels, err, "%s.weight", prefix));
    return fx_wset_vecf(w, &n->beta, channels, err, "%s.bias", prefix);
}

static flux_status load_resnet(fx_wset *w, const char *prefix, int cin, int cout, vae_resnet *r, fx_err *err) {
    char p[160];
    r->cin = cin, r->cout = cout;
    snprintf(p, sizeof p, "%s.norm1", prefix);
    TRY(load_norm(w, p, cin, &r->norm1, err));
    snprintf(p, sizeof p, "%s.conv1", prefix);
    TRY(load_conv(w, p, cin, cout, 3, &r->conv1, err));
    snprintf(p, sizeof p, "%s.norm2", prefix);
    TRY(load_norm(w, p, cout, &r->norm2, err));
    snprintf(p, sizeof p, "%s.conv2", prefix);
    TRY(load_conv(w, p, cout, cout, 3, &r->conv2, err));
    if (cin != cout) {
        snprintf(p, sizeof p, "%s.conv_shortcut", prefix);
        TRY(load_conv(w, p, cin, cout, 1, &r->shortcut, err));
    }
    return FLUX_OK;
}

static flux_status load_attn(fx_wset *w, const char *prefix, int c, vae_attn *a, fx_err *err) {
    static const char *const proj[4] = {"to_q", "to_k", "to_v", "to_out.0"};
    fx_weight *wt[4] = {&a->q, &a->k, &a->v, &a->out};
    float **bias[4] = {&a->bq, &a->bk, &a->bv, &a->bout};
    char p[160];
    a->channels = c;
    snprintf(p, sizeof p, "%s.group_norm", prefix);
    TRY(load_norm(w, p, c, &a->norm, err));
    for (int i = 0; i < 4; i++) {
        TRY(fx_wset_linearf(w, wt[i], c, c, err, "%s.%s.weight", prefix, proj[i]));
        TRY(fx_wset_vecf(w, bias[i], c, err, "%s.%s.bias", prefix, proj[i]));
    }
    return FLUX_OK;
}

static flux_status load_mid(fx_wset *w, const char *side, int c, int attn, vae_mid *m, fx_err *err) {
    char p[96];
    snprintf(p, sizeof p, "%s.mid_block.resnets.0", side);
    TRY(load_resnet(w, p, c, c, &m->res[0], err));
    if ((m->has_attn = attn)) {
        snprintf(p, sizeof p, "%s.mid_block.attentions.0", side);
        TRY(load_attn(w, p, c, &m->attn, err));
    }
    snprintf(p, sizeof p, "%s.mid_block.resnets.1", side);
    return load_resnet(w, p, c, c, &m->res[1], err);
}

/* Encoder: level i has layers_per_block resnets (enc[i−1] → enc[i] first)
 * and a stride-2 downsampler except the last. */
static flux_status load_encoder(fx_wset *w, const fx_vae_config *c, vae_half *e, fx_err *err) {
    const int L = c->levels, *ch = c->block_out_channels;
    char p[128];
    TRY(load_conv(w, "encoder.conv_in", c->in_channels, ch[0], 3, &e->conv_in, err));
    for (int i = 0; i < L; i++) {
        vae_level *lv = &e->level[i];
        lv->n_res = c->layers_per_block;
        if (!(lv->res = calloc((size_t)lv->n_res, sizeof *lv->res)))
            return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (VAE encoder)");
        for (int j = 0; j < lv->n_res; j++) {
            snprintf(p, sizeof p, "encoder.down_blocks.%d.resnets.%d", i, j);
            TRY(load_resnet(w, p, j ? ch[i] : i ? ch[i - 1] : ch[0], ch[i], &lv->res[j], err));
        }
        if ((lv->has_sample = i < L - 1)) {
            snprintf(p, sizeof p, "encoder.down_blocks.%d.downsamplers.0.conv", i);
            TRY(load_conv(w, p, ch[i], ch[i], 3, &lv->sample, err));
        }
    }
    TRY(load_mid(w, "encoder", ch[L - 1], c->mid_block_add_attention, &e->mid, err));
    TRY(load_norm(w, "encoder.conv_norm_out", ch[L - 1], &e->norm_out, err));
    return load_conv(w, "encoder.conv_out", ch[L - 1], 2 * c->latent_channels, 3, &e->conv_out, err);
}

/* Decoder: channels reversed; level i has layers_per_block + 1 resnets and a
 * nearest ×2 upsampler except the last. */
static flux_status load_decoder(fx_wset *w, const fx_vae_config *c, vae_half *d, fx_err *err) {
    const int L = c->levels;
    int ch[FX_VAE_MAX_LEVELS];
    for (int i = 0; i < L; i++) ch[i] = c->decoder_block_out_channels[L - 1 - i];
    char p[128];
    TRY(load_conv(w, "decoder.conv_in", c->latent_channels, ch[0], 3, &d->conv_in, err));
    TRY(load_mid(w, "decoder", ch[0], c->mid_block_add_attention, &d->mid, err));
    for (int i = 0; i < L; i++) {
        vae_level *lv = &d->level[i];
        lv->n_res = c->layers_per_block + 1;
        if (!(lv->res = calloc((size_t)lv->n_res, sizeof *lv->res)))
            return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (VAE decoder)");
        for (int j = 0; j < lv->n_res; j++) {
            snprintf(p, sizeof p, "decoder.up_blocks.%d.resnets.%d", i, j);
            TRY(load_resnet(w, p, j ? ch[i] : i ? ch[i - 1] : ch[0], ch[i], &lv->res[j], err));
        }
        if ((lv->has_sample = i < L - 1)) {
            snprintf(p, sizeof p, "decoder.up_blocks.%d.upsamplers.0.conv", i);
            TRY(load_conv(w, p, ch[i], ch[i], 3, &lv->sample, err));
        }
    }
    TRY(load_norm(w, "decoder.conv_norm_out", ch[L - 1], &d->norm_out, err));
    return load_conv(w, "decoder.conv_out", ch[L - 1], c->out_channels, 3, &d->conv_out, err);
}

static void free_conv(vae_conv *c) { free(c->bias); }
static void free_norm(vae_norm *n) { free(n->gamma), free(n->beta); }
static void free_resnet(vae_resnet *r) {
    free_norm(&r->norm1), free_norm(&r->norm2);
    free_conv(&r->conv1), free_conv(&r->conv2), free_conv(&r->shortcut);
}
static void free_half(vae_half *h, int levels) {
    free_conv(&h->conv_in), free_conv(&h->conv_out), free_norm(&h->norm_out);
    for (int i = 0; i < levels; i++) {
        if (h->level[i].res)
            for (int j = 0; j < h->level[i].n_res; j++) free_resnet(&h->level[i].res[j]);
        free(h->level[i].res);
        free_conv(&h->level[i].sample);
    }
    free_resnet(&h->mid.res[0]), free_resnet(&h->mid.res[1]);
    vae_attn *a = &h->mid.attn;
    free_norm(&a->norm);
    free(a->bq), free(a->bk), free(a->bv), free(a->bout);
}

void vae_model_free(vae_model *v) {
    free_half(&v->enc, v->c.levels);
    free_half(&v->dec, v->c.levels);
    free_conv(&v->quant), free_conv(&v->post_quant);
}

static flux_status check_config(const fx_vae_config *c, fx_err *err) {
    if (c->levels < 1 || c->levels > FX_VAE_MAX_LEVELS)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "vae/config.json: %d levels, expected 1..%d", c->levels,
                       FX_VAE_MAX_LEVELS);
    if (c->norm_num_groups < 1 || c->norm_num_groups > VAE_MAX_GROUPS)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "vae/config.json: norm_num_groups %d, expected 1..%d",
                       c->norm_num_groups, VAE_MAX_GROUPS);
    for (int i = 0; i < c->levels; i++)
        if (c->block_out_channels[i] % c->norm_num_groups || c->decoder_block_out_channels[i] % c->norm_num_groups)
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "vae/config.json: channels of level %d are not a multiple of norm_num_groups %d", i,
                           c->norm_num_groups);
    if (c->layers_per_block < 1)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "vae/config.json: layers_per_block %d, expected >= 1",
                       c->layers_per_block);
    return FLUX_OK;
}

flux_status vae_model_load(fx_wset *w, const fx_vae_config *c, vae_model *v, fx_err *err) {
    v->c = *c;
    const int lat = v->c.latent_channels;
    TRY(check_config(&v->c, err));
    TRY(load_encoder(w, &v->c, &v->enc, err));
    TRY(load_decoder(w, &v->c, &v->dec, err));
    if ((v->has_quant = v->c.use_quant_conv)) TRY(load_conv(w, "quant_conv", 2 * lat, 2 * lat, 1, &v->quant, err));
    if ((v->has_post_quant = v->c.use_post_quant_conv))
        TRY(load_conv(w, "post_quant_conv", lat, lat, 1, &v->post_quant, err));
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* FLOP counts                                                              */
/* ------------------------------------------------------------------------ */

double vae_conv_flops(const vae_conv *c, double pixels) {
    return 2.0 * pixels * c->cout * (double)c->cin * c->k * c->k;
}

static double resnet_flops(const vae_resnet *r, double px) {
    double f = vae_conv_flops(&r->conv1, px) + vae_conv_flops(&r->conv2, px);
    return r->cin != r->cout ? f + vae_conv_flops(&r->shortcut, px) : f;
}

static double mid_flops(const vae_mid *m, double px) {
    double f = resnet_flops(&m->res[0], px) + resnet_flops(&m->res[1], px);
    if (m->has_attn) {
        double c = m->attn.channels;
        f += 4 * 2.0 * px * c * c + 4.0 * px * px * c; /* q, k, v, out; QKᵀ and PV */
    }
    return f;
}

double vae_model_decode_flops(const vae_model *v, int h8, int w8) {
    double px = (double)h8 * w8, f = 0;
    const vae_half *d = &v->dec;
    if (v->has_post_quant) f += vae_conv_flops(&v->post_quant, px);
    f += vae_conv_flops(&d->conv_in, px) + mid_flops(&d->mid, px);
    for (int i = 0; i < v->c.levels; i++) {
        for (int j = 0; j < d->level[i].n_res; j++) f += resnet_flops(&d->level[i].res[j], px);
        if (d->level[i].has_sample) px *= 4, f += vae_conv_flops(&d->level[i].sample, px);
    }
    return f + vae_conv_flops(&d->conv_out, px);
}

double vae_model_encode_flops(const vae_model *v, int height, int width) {
    double px = (double)height * width, f = 0;
    const vae_half *e = &v->enc;
    f += vae_conv_flops(&e->conv_in, px);
    for (int i = 0; i < v->c.levels; i++) {
        for (int j = 0; j < e->level[i].n_res; j++) f += resnet_flops(&e->level[i].res[j], px);
        if (e->level[i].has_sample) px /= 4, f += vae_conv_flops(&e->level[i].sample, px);
    }
    f += mid_flops(&e->mid, px) + vae_conv_flops(&e->conv_out, px);
    return v->has_quant ? f + vae_conv_flops(&v->quant, px) : f;
}
