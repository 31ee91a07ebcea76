/*
 * vae.h — the AutoencoderKLFlux2 decoder and encoder (spec §5).
 *
 * Owned by the VAE module (src/vae*.c). Interfaces use the channel-major
 * layouts of the reference (and of the golden files); inside, the VAE runs
 * channels-last ([pixels, channels]) through fx_conv2d / fx_groupnorm.
 */
#ifndef FX_VAE_H
#define FX_VAE_H

#include "src/model/ctx.h"

typedef struct fx_vae fx_vae;

/* Build the VAE from ctx->model (weight views + small f32 tensors). */
flux_status fx_vae_load(flux_ctx *ctx, fx_vae **out);
void fx_vae_free(fx_vae *v);
/* The VAE of the context, built on first use (ctx->vae). */
flux_status fx_vae_get(flux_ctx *ctx, fx_vae **out);

/* z: [latent_channels, h8, w8] (after BN de-normalisation and unpatchify,
 * i.e. the golden decoder_in.npy) → image [3, 8·h8, 8·w8], raw decoder
 * output (≈ [−1, 1], not clamped). */
flux_status fx_vae_decode(flux_ctx *ctx, fx_vae *v, const float *z, int h8, int w8, float *image);

/* image: [3, H, W] in [−1, 1] (H, W multiples of 8·patch) → mean of the
 * posterior [latent_channels, H/8, W/8] (after quant_conv; golden mean.npy). */
flux_status fx_vae_encode(flux_ctx *ctx, fx_vae *v, const float *image, int height, int width,
                          float *mean);

/* ---- memory, diagnostics ---------------------------------------------- */

/* How the stored activations are kept. AUTO: with FLUX_PRECISION=f32 all
 * in f32 (exact); in the default mode bf16 at the two largest resolutions
 * (full and half: where the memory is; the bf16 dot products round the conv
 * inputs to bf16 anyway) and f32 below, which fits the same arena as all-bf16
 * (the real VAE: 512 MiB at 1024²; all-f32 would need 1 GiB). */
typedef enum fx_vae_storage { FX_VAE_STORAGE_AUTO = 0, FX_VAE_STORAGE_F32, FX_VAE_STORAGE_BF16 } fx_vae_storage;
void fx_vae_set_storage(fx_vae *v, fx_vae_storage s);

/* Output pixels per streamed strip (0 = the default, 4096). Results do not
 * depend on it except for the summation order of the GroupNorm statistics;
 * tests use tiny strips to exercise the in-place streaming. */
void fx_vae_set_strip_pixels(fx_vae *v, int pixels);

/* Called with each stage's output as a planar f32 array [channels, height,
 * width], named like the diffusers modules (the golden internals_decode/ and
 * internals_encode/ files): "post_quant_conv", "decoder.conv_in",
 * "decoder.mid_block.resnets.0", "decoder.mid_block.attentions.0", ...,
 * "decoder.up_blocks.I.resnets.J", "decoder.up_blocks.I.upsamplers.0",
 * "decoder.conv_norm_out" (GroupNorm output before SiLU), "decoder.conv_out";
 * "encoder.*" likewise, "quant_conv" (mean and log-variance). Costs a full
 * f32 copy per stage: for tests. NULL removes it. */
typedef void (*fx_vae_observer)(void *user, const char *name, const float *chw, int channels, int height,
                                int width);
void fx_vae_set_observer(fx_vae *v, fx_vae_observer fn, void *user);

/* Measured by the last decode/encode. Activation memory = the arena (level
 * regions, attention Q/K/V) + strip buffers + packed conv weights + small
 * temporaries; the caller's input and output arrays are not counted. */
typedef struct fx_vae_stats {
    size_t arena_bytes;   /* stored activations */
    size_t peak_bytes;    /* all activation memory at its peak */
    double seconds;
    double flops;         /* multiply-add = 2 */
    double conv_seconds;  /* inside the 3×3 conv GEMMs (fx_conv2d_packed) */
    double conv_flops;    /*   and their flops */
    double pack_seconds;  /* packing conv weights (once per layer) */
    double load_seconds;  /* loading strips: dtype conversion, GroupNorm + SiLU, shortcut */
    double store_seconds; /* writing strips: residual, statistics, dtype conversion */
} fx_vae_stats;
const fx_vae_stats *fx_vae_last_stats(const fx_vae *v);

/* Floating-point operations of a decode of a [latent, h8, w8] latent and of
 * an encode of a [3, height, width] image (convs, linear layers, attention). */
double fx_vae_decode_flops(const fx_vae *v, int h8, int w8);
double fx_vae_encode_flops(const fx_vae *v, int height, int width);

#endif
