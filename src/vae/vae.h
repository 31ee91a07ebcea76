/*
 * vae.h — the AutoencoderKLFlux2 decoder and encoder (BFL flux2 autoencoder.py; diffusers autoencoder_kl_flux2.py).
 *
 * The VAE face (vae.c) over its weights (vae_weights.h), the networks
 * written once (vae_net.h) and the two executors that run them
 * (vae_exec.h: strip streaming on the host, vae_stream.h; whole tensors
 * through the backend seam, vae_whole.h). Interfaces use the channel-major
 * layouts of the reference (and of the golden files); inside, the VAE runs
 * channels-last ([pixels, channels]).
 */
#ifndef FX_VAE_H
#define FX_VAE_H

#include "src/model/ctx.h"
#include "vae_options.h"

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

/* How the stored activations are kept (vae_options.h). */
void fx_vae_set_storage(fx_vae *v, fx_vae_storage s);

/* Output pixels per streamed strip (0 = the default, 4096). Results do not
 * depend on it except for the summation order of the GroupNorm statistics;
 * tests use tiny strips to exercise the in-place streaming. */
void fx_vae_set_strip_pixels(fx_vae *v, int pixels);

/* Run on whole tensors through the backend seam (vae_whole.c) even on the
 * CPU backend (tests compare the two plans); a device backend always does. */
void fx_vae_set_whole_tensors(fx_vae *v, int on);

/* Each stage's output to fn (vae_options.h: fx_vae_observer). NULL removes it. */
void fx_vae_set_observer(fx_vae *v, fx_vae_observer fn, void *user);

const fx_vae_stats *fx_vae_last_stats(const fx_vae *v);

/* The layers (vae_weights.h: weight views, biases, norms): for tests that
 * build special networks out of a loaded model. */
struct vae_model *fx_vae_layers(fx_vae *v);

/* Floating-point operations of a decode of a [latent, h8, w8] latent and of
 * an encode of a [3, height, width] image (convs, linear layers, attention). */
double fx_vae_decode_flops(const fx_vae *v, int h8, int w8);
double fx_vae_encode_flops(const fx_vae *v, int height, int width);

#endif
