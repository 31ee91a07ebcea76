/*
 * vae_whole.h — the executor of the VAE network on whole tensors through
 * the backend seam (vae_whole.c): what runs when the context's backend
 * keeps activations off the host (a Vulkan device); the strip-streaming
 * executor (vae_stream.h) runs them in host memory otherwise.
 */
#ifndef FX_VAE_WHOLE_H
#define FX_VAE_WHOLE_H

#include "vae_exec.h"

/* The layers put on a backend (on first use, kept until freed). */
typedef struct vae_whole_cache vae_whole_cache;
vae_whole_cache *vae_whole_cache_new(fx_ops *ops);
void vae_whole_cache_free(vae_whole_cache *c);

/* Run the network of base (decoder or encoder: input, output, observer)
 * on ctx->ops. */
flux_status vae_whole_run_net(flux_ctx *ctx, vae_whole_cache *cache, const vae_exec *base);

#endif
