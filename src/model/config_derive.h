/*
 * config_derive.h — the configs of a model given as files without a folder
 * (flux --transformer T --text-encoder TE --vae V): every dimension read
 * from a tensor shape, the rest the FLUX.2-klein constants below, each
 * with its public source. The sets carry the diffusers / Hugging Face
 * names (single_file.h, qwen3_file.h, vae_file.h map the others). Each
 * derivation fails with FLUX_ERR_MODEL naming the file and the tensor it
 * needed; the tensor tables of model_check.c then check every shape.
 */
#ifndef FX_CONFIG_DERIVE_H
#define FX_CONFIG_DERIVE_H

#include "config.h"
#include "src/formats/weight_set.h"

/* FLUX.2 constants not visible in any shape.
 * Transformer (diffusers transformer_flux2.py defaults; the klein-4b /
 * klein-9b configs of diffusers scripts/convert_flux2_to_diffusers.py):
 * rope_theta 2000, eps 1e-6, timestep sinusoid width from the shape, and
 * the head split into four equal RoPE axes (axes_dims_rope [32, 32, 32, 32]
 * for head_dim 128). */
#define FX_FLUX2_ROPE_THETA 2000.0
#define FX_FLUX2_EPS 1e-6
/* Qwen3-4B / Qwen3-8B config.json (huggingface.co/Qwen/Qwen3-4B, -8B):
 * rope_theta 1e6, rms_norm_eps 1e-6, max_position_embeddings 40960. A GGUF
 * file's qwen3.rope.freq_base / qwen3.attention.layer_norm_rms_epsilon win. */
#define FX_QWEN3_ROPE_THETA 1e6
#define FX_QWEN3_RMS_EPS 1e-6
#define FX_QWEN3_MAX_POSITIONS 40960
/* VAE (black-forest-labs/flux2 src/flux2/autoencoder.py: GroupNorm(32,
 * eps 1e-6), BatchNorm eps 1e-4 over 2×2 patches of the latent). */
#define FX_FLUX2_VAE_GROUPS 32
#define FX_FLUX2_VAE_PATCH 2
#define FX_FLUX2_VAE_BN_EPS 1e-4

flux_status fx_dit_config_derive(const fx_wset *w, fx_dit_config *c, fx_err *err);
flux_status fx_qwen3_config_derive(const fx_wset *w, fx_qwen3_config *c, fx_err *err);
/* Each side's widths from its own tensors: a decoder narrower than the
 * encoder (FLUX.2-small-decoder) gives decoder_block_out_channels. */
flux_status fx_vae_config_derive(const fx_wset *w, fx_vae_config *c, fx_err *err);
/* The klein scheduler (FLUX.2-klein scheduler/scheduler_config.json:
 * FlowMatchEulerDiscreteScheduler, use_dynamic_shifting true, exponential
 * time shift, shift 3.0, base_shift 0.5, max_shift 1.15,
 * base_image_seq_len 256, max_image_seq_len 4096, 1000 train steps). */
void fx_sched_config_klein(fx_sched_config *c);

#endif
