/*
 * vae_file.h — a single-file FLUX.2 VAE (flux_load_options.vae_file, CLI
 * --vae), shown to the model code as a weight set with the diffusers names
 * (diffusers autoencoder_kl_flux2.py).
 *
 * Accepted files (safetensors or GGUF, detected from the names; a
 * "first_stage_model." or "vae." prefix is stripped, tensors without it
 * ignored):
 *   - diffusers names (encoder.down_blocks.N.resnets.M.*): used as they are.
 *   - BFL / LDM names, as black-forest-labs/flux2 src/flux2/autoencoder.py
 *     writes them (flux2-vae.safetensors, ComfyUI's vae/ file, BFL's
 *     full_encoder_small_decoder.safetensors), mapped without copying:
 *       encoder.down.I.block.J.*        → encoder.down_blocks.I.resnets.J.*
 *       encoder.down.I.downsample.conv  → encoder.down_blocks.I.downsamplers.0.conv
 *       decoder.up.I.block.J.*          → decoder.up_blocks.(L−1−I).resnets.J.*
 *       decoder.up.I.upsample.conv      → decoder.up_blocks.(L−1−I).upsamplers.0.conv
 *         (LDM numbers the decoder levels from the full-resolution end,
 *          diffusers from the latent end; L = the decoder's level count)
 *       ….nin_shortcut                  → ….conv_shortcut
 *       {en,de}coder.mid.block_{1,2}    → ….mid_block.resnets.{0,1}
 *       {en,de}coder.mid.attn_1.{norm,q,k,v,proj_out}
 *                                       → ….mid_block.attentions.0.{group_norm,
 *                                          to_q,to_k,to_v,to_out.0}, the 1×1
 *                                          conv weights [C, C, 1, 1] seen as
 *                                          [C, C]
 *       {en,de}coder.norm_out           → ….conv_norm_out
 *       encoder.quant_conv / decoder.post_quant_conv → quant_conv / post_quant_conv
 *       bn.*, {en,de}coder.conv_{in,out}.*  unchanged
 *     Any other name is an error naming it.
 * The widths of each side come from the shapes (fx_vae_config_derive), so
 * a narrower decoder (FLUX.2-small-decoder) loads like the full one.
 */
#ifndef FX_VAE_FILE_H
#define FX_VAE_FILE_H

#include "src/base/log.h"
#include "weight_set.h"

/* Open `path` as a VAE weight set with diffusers names. use_mmap as in
 * fx_tensor_file_open. Errors: those of fx_wset_open; FLUX_ERR_MODEL for a
 * file that is not a VAE, a BFL name outside the table or a mix of both
 * namings. */
fx_wset *fx_vae_file_open(const char *path, int use_mmap, const fx_logger *log, fx_err *err);

/* The diffusers name of one BFL VAE tensor (prefix already stripped) into
 * out, with `levels` decoder levels. Returns 1 (mapped), 2 (mapped, and the
 * tensor is a 1×1 attention conv to be seen as a matrix) or 0 (not a
 * FLUX.2 VAE name). */
int fx_vae_bfl_name(const char *bfl, int levels, char *out, size_t size);

#endif
