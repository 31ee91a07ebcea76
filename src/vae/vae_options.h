/*
 * vae_options.h — how a VAE run keeps its activations, what it reports to
 * an observer, and what it measures (shared by the VAE face, vae.h, and the
 * streaming engine, vae_stream.h).
 */
#ifndef FX_VAE_OPTIONS_H
#define FX_VAE_OPTIONS_H

#include <stddef.h>

/* How the stored activations are kept. AUTO: with FLUX_PRECISION=f32 all
 * in f32 (exact); in the default mode bf16 at the two largest resolutions
 * (full and half: where the memory is; the bf16 dot products round the conv
 * inputs to bf16 anyway) and f32 below, which fits the same arena as all-bf16
 * (the real VAE: 512 MiB at 1024²; all-f32 would need 1 GiB). */
typedef enum fx_vae_storage { FX_VAE_STORAGE_AUTO = 0, FX_VAE_STORAGE_F32, FX_VAE_STORAGE_BF16 } fx_vae_storage;


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

#endif
