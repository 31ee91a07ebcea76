/*
 * dump.h — `--dump DIR` (flux_params.dump_dir): NumPy .npy files of every
 * stage of a generation, for checking against the reference pipeline.
 *
 *   tokens.npy           int32 [512]        prompt ids, padded (prompt runs only)
 *   attention_mask.npy   int32 [512]        1 = real token (prompt runs only)
 *   text_embeddings.npy  f32 [512, D]       what the transformer reads
 *   noise.npy            f32 [128, h, w]    initial latents
 *   sigmas.npy           f32 [steps + 1]    σ_0 = 1 … σ_S = 0
 *   velocity_000.npy …   f32 [h·w, 128]     velocity of each step (after CFG)
 *   latents.npy          f32 [128, h, w]    final packed latents, before BN
 *                                           de-normalisation
 *   decoded.npy          f32 [3, H, W]      VAE output before clamping
 *   refK_image.npy       f32 [3, H_K, W_K]  reference K after pre-processing, in [−1, 1]
 *   refK_latents.npy     f32 [128, h_K, w_K] its BN-normalised latents (as
 *                                           the golden out/refK_latents.npy)
 *
 * h = H/16, w = W/16. With a batch, the files describe the first image.
 * Every file is written atomically (npy.h); the directory must exist.
 */
#ifndef FX_DUMP_H
#define FX_DUMP_H

#include <stdint.h>

#include "src/base/error.h"

/* dir/name ← data of the given shape. dir NULL = nothing to do (FLUX_OK). */
flux_status fx_dump_f32(const char *dir, const char *name, const float *data, int ndim, const int64_t *shape,
                        fx_err *err);
flux_status fx_dump_i32(const char *dir, const char *name, const int32_t *data, int ndim, const int64_t *shape,
                        fx_err *err);

/* The per-stage files above. */
flux_status fx_dump_tokens(const char *dir, const int32_t *ids, const uint8_t *mask, int n, fx_err *err);
flux_status fx_dump_velocity(const char *dir, int step, const float *v, int64_t tokens, int channels, fx_err *err);
/* [c, h, w] arrays: "noise.npy", "latents.npy", "decoded.npy". */
flux_status fx_dump_chw(const char *dir, const char *name, const float *x, int c, int h, int w, fx_err *err);

#endif
