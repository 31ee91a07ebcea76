/*
 * latents.h — moving latents between the VAE and the transformer
 * (BFL flux2 sampling.py; diffusers pipeline_flux2_klein.py).
 *
 *   VAE latent z [C, 2h, 2w] (C = 32)
 *     patchify  → [4C, h, w], channel c' = 4c + 2·pi + pj holds z[c][2y+pi][2x+pj]
 *     BN-normalise per channel c': (z − mean) / sqrt(var + eps)
 *     pack      → tokens [h·w, 4C], token n = y·w + x   (what the transformer reads)
 * and back (unpack, de-normalise, unpatchify) after sampling. General patch
 * sizes (ph, pw) from the VAE config; klein uses 2×2. eps is the VAE's
 * batch_norm_eps (1e-4).
 */
#ifndef FX_LATENTS_H
#define FX_LATENTS_H

#include <stdint.h>

/* [c, h, w] → tokens [h·w, c] with row stride ld (>= c). */
void fx_latents_pack(const float *chw, int c, int h, int w, float *tokens, int64_t ld);
/* tokens [h·w, c] (row stride ld) → [c, h, w]. */
void fx_latents_unpack(const float *tokens, int64_t ld, int c, int h, int w, float *chw);

/* z [c, h·ph, w·pw] → out [c·ph·pw, h, w]. */
void fx_patchify(const float *z, int c, int h, int w, int ph, int pw, float *out);
/* p [c·ph·pw, h, w] → out [c, h·ph, w·pw]. */
void fx_unpatchify(const float *p, int c, int h, int w, int ph, int pw, float *out);

/* In place on x [c, hw]: x = x·sqrt(var + eps) + mean (de-normalise) or
 * x = (x − mean)/sqrt(var + eps) (normalise), per channel. Computed in
 * double per element, rounded once. */
void fx_bn_denormalize(float *x, int c, int64_t hw, const float *mean, const float *var, float eps);
void fx_bn_normalize(float *x, int c, int64_t hw, const float *mean, const float *var, float eps);

/* img2img / inpainting on packed tokens (diffusers FlowMatchEulerDiscreteScheduler.scale_noise and
 * Flux2KleinInpaintPipeline's denoising loop), in float32 as there:
 *   fx_latents_noised: out = σ·noise + (1 − σ)·x0            [n floats]
 *   fx_latents_blend:  x = (1 − m_t)·keep + m_t·x per token t  [tokens, c]
 *     (m [tokens] broadcast over the c channels of a token) */
void fx_latents_noised(const float *x0, const float *noise, float sigma, int64_t n, float *out);
void fx_latents_blend(float *x, const float *keep, const float *m, int64_t tokens, int c);
/* Decoder output [3, H, W] (≈ [−1, 1]) → interleaved RGB8 [H, W, 3] with the
 * diffusers rounding round(clamp(x/2 + 0.5, 0, 1)·255), ties to even as torch.round
 * (NaN → 0). */
void fx_image_to_rgb8(const float *chw, int height, int width, uint8_t *rgb);

#endif
