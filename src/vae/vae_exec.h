/*
 * vae_exec.h — what the VAE network (vae_net.c, written once) asks of the
 * engine that runs it: conv layers and the mid attention on the tensors of
 * the current level, observation and progress. Two executors implement it:
 *
 *   vae_stream.c  host memory: every layer streamed strip by strip (a few
 *                 output rows), GroupNorm statistics gathered while a tensor
 *                 is written, level regions in bf16 where the plan says so —
 *                 what bounds the memory at large sizes (the CPU backend;
 *                 through the seam's host strips, ops.h)
 *   vae_whole.c   whole channels-last tensors through the seam (a device
 *                 backend, which has no host strips, or tests on the CPU)
 * Both compute through fx_op_* only.
 *
 * Tensors are named by slot: VAE_X (the running activation of the current
 * level), VAE_H (a resnet's inner tensor), VAE_EDGE (the network's f32
 * input or output side: the latent before conv_in, the moments after
 * conv_out) and VAE_OUT (the caller's planar output).
 */
#ifndef FX_VAE_EXEC_H
#define FX_VAE_EXEC_H

#include "src/model/ctx.h"
#include "vae_options.h"
#include "vae_weights.h"

enum { VAE_X, VAE_H, VAE_EDGE, VAE_OUT };

/* dst (op)= conv(act(src)) with act = GroupNorm(norm) + SiLU, or none. */
typedef struct vae_layer {
    const vae_conv *conv;
    int src, dst;               /* slots */
    const vae_norm *norm;       /* GN + SiLU of src (its statistics), or NULL */
    int resample;               /* +1 nearest ×2 + conv, −1 pad right/bottom + conv stride 2:
                                   dst is the next level's VAE_X */
    int residual;               /* dst += conv(...) (dst holds the skip) */
    const vae_conv *shortcut;   /* 1×1 of the raw src: the next layer's skip in VAE_X (cout channels) */
} vae_layer;

typedef struct vae_exec vae_exec;
typedef struct vae_exec_impl {
    flux_status (*conv)(vae_exec *, const vae_layer *);
    /* x += attention(GN(x)) on VAE_X */
    flux_status (*attention)(vae_exec *, const vae_attn *);
    /* The observer (if any) gets slot's tensor, GroupNorm(norm) applied when norm. */
    flux_status (*observe)(vae_exec *, const char *name, int slot, int channels, const vae_norm *norm);
    /* The first `channels` channels of slot, planar, into the output. */
    flux_status (*output)(vae_exec *, int slot, int channels);
    /* Progress after stage sub of subtotal (syncs a device). */
    flux_status (*checkpoint)(vae_exec *, int sub, int subtotal);
} vae_exec_impl;

/* One decode or encode (an executor embeds it first). */
struct vae_exec {
    const vae_exec_impl *impl;
    const vae_model *m;
    int encoder;                /* 1: the encoder half runs */
    const float *in;            /* planar input: z [lat, h8, w8] or image [3, H, W] */
    int in_h, in_w;
    float *out;                 /* planar output: image [3, ·, ·] or mean [lat, ·, ·] */
    fx_vae_observer observer;
    void *observer_user;
};

#endif
