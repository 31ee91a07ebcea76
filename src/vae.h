/*
 * vae.h — the AutoencoderKLFlux2 decoder and encoder (spec §5).
 *
 * Owned by the VAE module (src/vae*.c). Interfaces use the channel-major
 * layouts of the reference (and of the golden files); inside, the VAE runs
 * channels-last ([pixels, channels]) through fx_conv2d / fx_groupnorm.
 */
#ifndef FX_VAE_H
#define FX_VAE_H

#include "ctx.h"

typedef struct fx_vae fx_vae;

/* Build the VAE from ctx->model (weight views + small f32 tensors). */
flux_status fx_vae_load(flux_ctx *ctx, fx_vae **out);
void fx_vae_free(fx_vae *v);

/* z: [latent_channels, h8, w8] (after BN de-normalisation and unpatchify,
 * i.e. the golden decoder_in.npy) → image [3, 8·h8, 8·w8], raw decoder
 * output (≈ [−1, 1], not clamped). */
flux_status fx_vae_decode(flux_ctx *ctx, fx_vae *v, const float *z, int h8, int w8, float *image);

/* image: [3, H, W] in [−1, 1] (H, W multiples of 8·patch) → mean of the
 * posterior [latent_channels, H/8, W/8] (after quant_conv; golden mean.npy). */
flux_status fx_vae_encode(flux_ctx *ctx, fx_vae *v, const float *image, int height, int width,
                          float *mean);

#endif
