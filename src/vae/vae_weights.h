/*
 * vae_weights.h — the VAE's layers as weight views (never copied; biases
 * and norm affines read to f32) and their FLOP counts (vae_weights.c).
 */
#ifndef FX_VAE_WEIGHTS_H
#define FX_VAE_WEIGHTS_H

#include "src/formats/weight_set.h"
#include "src/model/config.h"

/* GroupNorm groups we support (the statistics are fixed-size arrays). */
#define VAE_MAX_GROUPS 512

/* ------------------------------------------------------------------------ */
/* Weights                                                                  */
/* ------------------------------------------------------------------------ */

/* One conv layer: the stored weight view, its bias (f32) and geometry
 * (h, w are filled in per use). */
typedef struct vae_conv {
    fx_weight w;         /* [cout, cin·kh·kw] */
    float *bias;         /* [cout] */
    int cin, cout, k;    /* k×k kernel */
} vae_conv;

typedef struct vae_norm {
    float *gamma, *beta; /* [channels] */
    int channels;
} vae_norm;

typedef struct vae_resnet {
    vae_norm norm1, norm2;
    vae_conv conv1, conv2;
    vae_conv shortcut;   /* 1×1, present when cin != cout (shortcut.w.data != NULL) */
    int cin, cout;
} vae_resnet;

typedef struct vae_attn {
    vae_norm norm;
    fx_weight q, k, v, out; /* [C, C] */
    float *bq, *bk, *bv, *bout;
    int channels;
} vae_attn;

typedef struct vae_level {
    vae_resnet *res;     /* resnets of the level */
    int n_res;
    vae_conv sample;     /* up- or downsampler conv (absent at the last level) */
    int has_sample;
} vae_level;

typedef struct vae_mid {
    vae_resnet res[2];
    vae_attn attn;
    int has_attn;
} vae_mid;

typedef struct vae_half {
    vae_conv conv_in, conv_out;
    vae_level level[FX_VAE_MAX_LEVELS];
    vae_mid mid;
    vae_norm norm_out;
} vae_half;

/* Both halves of the autoencoder with the config they were built from. */
typedef struct vae_model {
    fx_vae_config c;
    vae_half enc, dec;
    vae_conv quant, post_quant; /* 1×1 (quant_conv, post_quant_conv), optional */
    int has_quant, has_post_quant;
} vae_model;

/* Check the config (levels, groups, channels) and build every layer from
 * the weight set; on failure err names the tensor and m may be partly
 * built (vae_model_free it). */
flux_status vae_model_load(fx_wset *w, const fx_vae_config *c, vae_model *m, fx_err *err);
void vae_model_free(vae_model *m);

/* Multiply-adds ×2 of one conv over `pixels` output pixels; of a decode of
 * a [latent, h8, w8] latent; of an encode of a [3, height, width] image. */
double vae_conv_flops(const vae_conv *c, double pixels);
double vae_model_decode_flops(const vae_model *m, int h8, int w8);
double vae_model_encode_flops(const vae_model *m, int height, int width);

#endif
