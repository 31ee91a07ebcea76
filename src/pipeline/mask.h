/*
 * mask.h — the inpainting mask on the target token grid, as diffusers'
 * Flux2KleinInpaintPipeline prepares it (pipeline_flux2_klein_inpaint.py:
 * the mask_processor, a Flux2ImageProcessor with do_normalize=False,
 * do_binarize=True, do_convert_grayscale=True, and prepare_mask_latents):
 *
 *   0. (ours, for A1111's inpainting_mask_invert) invert: the mask to gray
 *      (step 2's rule) at its own size, then 255 − v, as A1111's
 *      ImageOps.invert of its "L" mask; the steps below then see a gray image.
 *   1. resize to the processed image size W × H with PIL Lanczos in the
 *      mask's own channels (VaeImageProcessor.resize, resize_mode
 *      "default"; no resize when the size already matches);
 *   2. gray: PIL convert("L"): L = (19595·R + 38470·G + 7471·B + 2^15) >> 16
 *      (Pillow libImaging/Convert.c, L24); gray (+ alpha) takes its first
 *      channel; alpha is ignored;
 *   3. binarize: float32 L / 255 >= 0.5 → 1 else 0, i.e. L >= 128
 *      (VaeImageProcessor.binarize);
 *   4. torch.nn.functional.interpolate(mode="bilinear", align_corners=False)
 *      from H × W pixels to the H/16 × W/16 token grid (prepare_mask_latents):
 *      source coordinate (d + 0.5)·16 − 0.5 = 16·d + 7.5, so each token is
 *      the mean of the 2 × 2 pixels (16·y + 7..8, 16·x + 7..8): values in
 *      {0, 1/4, 1/2, 3/4, 1}. 1 = repaint (white), 0 = keep (black).
 * A 4-channel mask resized in step 1 is resized as 4 plain channels (PIL
 * would premultiply alpha first); files read by flux_image_load have no
 * alpha, so this only concerns library callers passing RGBA pixels.
 */
#ifndef FX_MASK_H
#define FX_MASK_H

#include "flux.h"
#include "src/base/error.h"

/* mask (1..4 channels, any size) → *out = malloc'd [height/unit · width/unit]
 * floats, token n = y·(width/unit) + x. width, height: the processed image
 * size (multiples of unit). */
flux_status fx_mask_tokens(const flux_image *mask, int invert, int width, int height, int unit, float **out,
                           fx_err *err);

#endif
