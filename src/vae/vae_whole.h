/*
 * vae_whole.h — the VAE on whole tensors through the backend seam
 * (vae_whole.c): what runs when the context's backend keeps activations
 * off the host (a Vulkan device); the strip-streaming engine (vae_stream.h)
 * runs them in host memory otherwise.
 */
#ifndef FX_VAE_WHOLE_H
#define FX_VAE_WHOLE_H

#include "src/model/ctx.h"
#include "vae_options.h"
#include "vae_weights.h"

/* The layers put on a backend (on first use, kept until freed). */
typedef struct vw_cache vw_cache;
vw_cache *vw_cache_new(fx_ops *ops);
void vw_cache_free(vw_cache *c);

/* As fx_vae_decode / fx_vae_encode (vae.h), on ctx->ops. */
flux_status vw_decode(flux_ctx *ctx, vw_cache *cache, const vae_model *v, fx_vae_observer fn, void *user,
                      const float *z, int h8, int w8, float *image);
flux_status vw_encode(flux_ctx *ctx, vw_cache *cache, const vae_model *v, fx_vae_observer fn, void *user,
                      const float *image, int height, int width, float *mean);

#endif
