/*
 * mask.h — the inpainting mask on the target token grid, as diffusers'
 * Flux2KleinInpaintPipeline prepares it (pipeline_flux2_klein_inpaint.py:
 * the mask_processor, a Flux2ImageProcessor with do_normalize=False,
 * do_binarize=True, do_convert_grayscale=True, and prepare_mask_latents):
 *
 *   0. (ours, for AUTOMATIC1111's inpainting_mask_invert and mask_blur, in
 *      A1111's order: modules/processing.py, StableDiffusionProcessingImg2Img.init)
 *      when inverting or blurring, the mask is first made gray (step 2's rule)
 *      at its own size; invert: 255 − v (ImageOps.invert of the "L" mask);
 *      blur: cv2.GaussianBlur(mask, (k, 1), σx) then (1, k') with σy, where
 *      k = 2·int(2.5·σ + 0.5) + 1 — OpenCV's bit-exact 8-bit path
 *      (imgproc/src/smooth.dispatch.cpp): kernel w_i = exp(−(i − c)²/(2σ²)),
 *      c = (k − 1)/2, normalised to sum 1 in double, turned into 8-bit fixed
 *      point by error diffusion from the outside in (v_i = round-half-even(
 *      256·w_i + e), e = 256·w_i + e − v_i; the centre takes 256 − Σ others),
 *      out = (Σ v_i·p[reflect101(x + i − c)] + 128) >> 8. The steps below
 *      then see a gray image.
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

/* mask (1..4 channels, any size) with rules (NULL: none) → *out = malloc'd [height/unit · width/unit]
 * floats, token n = y·(width/unit) + x. width, height: the processed image
 * size (multiples of unit). */
typedef struct fx_mask_rules {
    int invert;             /* step 0: 255 − gray */
    double blur_x, blur_y;  /* step 0: A1111 mask_blur_x / _y (σ in pixels, 0 = none) */
} fx_mask_rules;

/* A client's mask by its convention (flux.h flux_mask_source) → *out: img
 * itself copied (FLUX_MASK_GRAY) or a 1-channel 0/255 image. */
flux_status fx_mask_from_image(const flux_image *img, flux_mask_source how, const char *name, flux_image **out,
                               fx_err *err);

/* The largest σ accepted (A1111's slider goes to 64). */
#define FX_MASK_MAX_BLUR 64

flux_status fx_mask_tokens(const flux_image *mask, const fx_mask_rules *rules, int width, int height, int unit,
                           float **out, fx_err *err);

/* Step 0's blur alone, in place on a gray image g [h, w] (σx then σy; 0 = that pass is skipped). */
flux_status fx_mask_blur(uint8_t *g, int w, int h, double sigma_x, double sigma_y, fx_err *err);

#endif
