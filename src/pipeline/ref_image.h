/*
 * ref_image.h — pre-processing of reference images for img2img and
 * multi-reference generation, as the official klein pipeline does it
 * (diffusers Flux2KleinPipeline + Flux2ImageProcessor: pipeline_flux2_klein.py, image_processor.py):
 *
 *   1. RGB: gray is replicated, alpha is dropped (PIL convert("RGB"); the
 *      image loader already does this for files).
 *   2. Checks: each side >= FX_REF_MIN_SIDE and aspect ratio <= 8:1.
 *   3. Area cap: when width·height > 1024², resize with Lanczos (Pillow-exact,
 *      image_resize.h) to int(w·s) × int(h·s), s = sqrt(1024² / (w·h)).
 *   4. Centre crop (no resize) to multiples of `unit` (16 = VAE factor 8 ×
 *      patch 2): left = (w − w16) / 2, top = (h − h16) / 2, floored, as
 *      Flux2ImageProcessor._resize_and_crop.
 *   5. Pixels to [−1, 1] as diffusers in float32: 2·(p / 255) − 1.
 *
 * Deliberate differences from diffusers (documented limits):
 *   - minimum side 16 px (one latent patch) instead of diffusers' 64: the
 *     model math is defined for any multiple of 16, and the golden cases
 *     use 32-px references. The aspect-ratio limit (8:1) is the same.
 *   - RGB conversion happens before the resize. Pillow resizes RGBA images
 *     with premultiplied alpha and palette images with nearest-neighbour
 *     before the pipeline's convert("RGB"); we always resize the RGB
 *     pixels with Lanczos. Identical for RGB and gray images, which is what
 *     the image loader produces.
 * The largest image accepted is the loader's (16384 per side, 2^28 pixels);
 * after the cap a reference is at most 1024² pixels (4096 tokens).
 *
 * The source image of img2img / inpainting (flux_params.init_image) is
 * pre-processed as diffusers' Flux2KleinInpaintPipeline.__call__ does
 * ("2. Preprocess image", pipeline_flux2_klein_inpaint.py): step 3 as
 * above, then the size floored to multiples of `unit` and the image
 * *stretched* to it (VaeImageProcessor.preprocess with resize_mode
 * "default": PIL Lanczos resize to the floored size, skipped when the size
 * is already right) instead of centre-cropped; no aspect-ratio limit and
 * sides of at least `unit` (diffusers checks neither).
 */
#ifndef FX_REF_IMAGE_H
#define FX_REF_IMAGE_H

#include "flux.h"
#include "src/base/error.h"

#define FX_REF_MIN_SIDE 16
#define FX_REF_MAX_ASPECT 8
#define FX_REF_MAX_AREA (1024 * 1024)

typedef struct fx_ref_geom {
    int src_w, src_h;         /* as given */
    int scaled_w, scaled_h;   /* after the area cap (= src when not capped) */
    int crop_x, crop_y;       /* top-left corner of the centre crop */
    int width, height;        /* processed size: multiples of unit */
    int stretch;              /* 1: the init image, resized (not cropped) to width × height */
} fx_ref_geom;

/* The processed geometry of a w×h reference; `what` names it in errors
 * ("reference 2 (600x40)": "... aspect ratio 15.0:1 exceeds 8:1"). Errors:
 * FLUX_ERR_INVALID_ARG for a side below the minimum, an extreme aspect
 * ratio, or a size the image loader would not accept. */
flux_status fx_ref_geometry(int w, int h, int unit, const char *what, fx_ref_geom *g, fx_err *err);

/* The processed geometry of a w×h init image (stretch = 1, no crop). */
flux_status fx_init_geometry(int w, int h, int unit, const char *what, fx_ref_geom *g, fx_err *err);

/* Pre-process img (1..4 channels) into *out = malloc'd pixels
 * [3, g->height, g->width] in [−1, 1] (steps 1–5 above); *g receives its
 * geometry (fx_ref_geometry). fx_init_prepare: the same for the init image
 * (fx_init_geometry: stretched, not cropped). */
flux_status fx_ref_prepare(const flux_image *img, int unit, const char *what, fx_ref_geom *g, float **out,
                           fx_err *err);
flux_status fx_init_prepare(const flux_image *img, int unit, const char *what, fx_ref_geom *g, float **out,
                            fx_err *err);

/* Steps 1–4 only: the processed RGB8 image [g->height, g->width, 3] into
 * *out (malloc'd); fx_init_prepare_rgb8 for the init image. For tests. */
flux_status fx_ref_prepare_rgb8(const flux_image *img, int unit, const char *what, fx_ref_geom *g, uint8_t **out,
                                fx_err *err);
flux_status fx_init_prepare_rgb8(const flux_image *img, int unit, const char *what, fx_ref_geom *g, uint8_t **out,
                                 fx_err *err);

#endif
