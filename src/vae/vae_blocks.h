/*
 * vae_blocks.h — the VAE's blocks on stored tensors (vae_blocks.c).
 */
#ifndef FX_VAE_BLOCKS_H
#define FX_VAE_BLOCKS_H

#include "vae_stream.h"

/* Blocks (vae_blocks.c). The level's x part holds the block's input and
 * receives its output; statistics are those of the input, then the output. */
flux_status vb_resnet(vs_run *r, const vae_resnet *b, const vs_level *lv, const vs_stats *in_stats,
                      vs_stats *out_stats, const char *name);
flux_status vb_attention(vs_run *r, const vae_attn *a, const vs_level *lv, vs_stats *stats, float *qkv,
                         const char *name);
flux_status vb_resample(vs_run *r, const vae_conv *c, const vs_level *from, const vs_level *to, int up,
                        vs_stats *dst_stats, const char *name);
flux_status vb_conv_out(vs_run *r, const vae_norm *norm, const vae_conv *c, const vs_level *lv,
                        const vs_stats *stats, const vs_tensor *dst, const char *side);

#endif
