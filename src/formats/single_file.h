/*
 * single_file.h — single-file transformer checkpoints (flux_load_options.
 * transformer_file, CLI --transformer): the official BFL file
 * (flux-2-klein-4b.safetensors) and ComfyUI files, shown to the model code
 * as a weight set with the diffusers names (transformer_flux2.py).
 *
 * Layouts (detected from the names):
 *   - ComfyUI prefix: every transformer tensor named
 *     "model.diffusion_model.<name>"; the prefix is stripped and tensors
 *     without it (VAE / text-encoder parts of an all-in-one file) are
 *     ignored.
 *   - BFL names (BFL flux2 model.py names, as diffusers convert_flux2_to_diffusers.py maps them): mapped at load time without copying a byte:
 *       img_in / txt_in / time_in.{in,out}_layer  → x_embedder / context_embedder /
 *                                                  timestep_embedder.linear_{1,2}
 *       *_modulation*.lin                        → *_modulation*.linear
 *       double_blocks.i.{img,txt}_attn.qkv       → rows [0,d) [d,2d) [2d,3d) as
 *                                                  to_{q,k,v} / add_{q,k,v}_proj
 *       ….norm.{query,key}_norm.scale            → norm_{q,k} / norm_added_{q,k}
 *       ….proj, ….{img,txt}_mlp.{0,2}            → to_out.0 / to_add_out, ff / ff_context
 *       single_blocks.j.linear1 / linear2 / norm → to_qkv_mlp_proj / to_out / norm_{q,k}
 *       final_layer.adaLN_modulation.1           → norm_out.linear with the halves
 *                                                  swapped (BFL: shift, scale;
 *                                                  diffusers: scale, shift)
 *       final_layer.linear                       → proj_out
 *     guidance_in.* (absent in klein; present in launch-era files) is
 *     ignored; any other name is an error naming it.
 *   - diffusers names in one file: used as they are.
 * Row splits are row ranges of the fused tensor and the swap is two ranges
 * (weight_set.h views), so the checkpoint stays mmap'd and untouched. The
 * shapes are then checked by fx_check_dit_weights like a folder's.
 */
#ifndef FX_SINGLE_FILE_H
#define FX_SINGLE_FILE_H

#include "src/base/log.h"
#include "weight_set.h"

#define FX_COMFYUI_PREFIX "model.diffusion_model."

typedef enum fx_ckpt_layout {
    FX_CKPT_DIFFUSERS = 0,
    FX_CKPT_BFL
} fx_ckpt_layout;

typedef struct fx_single_file_info {
    fx_ckpt_layout layout;
    int prefixed;       /* names carried the ComfyUI prefix */
    size_t mapped;      /* tensors in the resulting set */
    size_t ignored;     /* guidance_in.* and, with the prefix, unprefixed tensors */
} fx_single_file_info;

/* Open `path` (a .safetensors file, or a sharded .safetensors.index.json)
 * as a transformer weight set with diffusers names. info may be NULL; log
 * (may be NULL) receives verbose messages. use_mmap as in fx_tensor_file_open.
 * Errors: those of fx_wset_open; FLUX_ERR_MODEL for a file that is not a
 * FLUX.2 transformer, an unknown BFL tensor name, a fused qkv whose rows are
 * not a multiple of 3 or a final layer with an odd row count. */
fx_wset *fx_single_file_open(const char *path, int use_mmap, const fx_logger *log, fx_single_file_info *info,
                             fx_err *err);

/* The diffusers name(s) and row ranges of one BFL tensor, for the loader,
 * tests and tools. `name` is the BFL name without prefix, `src` the name in
 * the file (stored in the ranges), rows its first dimension. Returns the
 * number of targets (1, or 3 for a fused qkv), 0 for a name that is not
 * part of the klein transformer, -1 for one that is ignored
 * (guidance_in.*), -2 when rows cannot be split (qkv not a multiple of 3,
 * odd final layer). */
typedef struct fx_bfl_target {
    char name[160];
    fx_wset_range ranges[2];
    int n_ranges;
} fx_bfl_target;
/* The same on an opened set (e.g. fx_wset_open_memory), which the result
 * owns from here on (closed on failure too); messages name its display. */
fx_wset *fx_single_file_wrap(fx_wset *base, const fx_logger *log, fx_single_file_info *info, fx_err *err);

int fx_bfl_map_name(const char *name, const char *src, int64_t rows, fx_bfl_target targets[3]);

/* The reverse: the BFL tensor (name as fx_bfl_map_name takes it) that holds
 * the diffusers tensor `diffusers` ("transformer_blocks.0.attn.to_k.weight"
 * → "double_blocks.0.img_attn.qkv.weight"), into bfl. Returns 1, or 0 when
 * it has no BFL counterpart (or bfl is too small). LoRA files name their
 * modules either way (src/adapters/lora.c). */
int fx_bfl_name_of(const char *diffusers, char *bfl, size_t size);

#endif
