/*
 * image_resize.h — Lanczos (a = 3) resampling of 8-bit images, bit-exact
 * with Pillow's Image.resize(..., Image.LANCZOS) (libImaging/Resample.c),
 * which the official klein pipeline uses to cap reference images at 1024²
 * pixels (diffusers pipeline_flux2_klein.py, image_processor.py).
 *
 * Pillow's semantics, reproduced here:
 *   - separable: a horizontal pass over the source rows the vertical pass
 *     needs, then a vertical pass; each pass is skipped when its size does
 *     not change;
 *   - per output sample x: scale = in/out, fs = max(scale, 1) (the kernel is
 *     stretched by the downscale factor, never shrunk), support = 3·fs,
 *     centre = (x + 0.5)·scale, taps i in [int(centre − support + 0.5),
 *     int(centre + support + 0.5)) clipped to the image, weight
 *     L((i − centre + 0.5)/fs) with L(t) = sinc(t)·sinc(t/3) on [−3, 3),
 *     weights divided by their sum (in double);
 *   - weights rounded to fixed point with 22 fraction bits (away from zero),
 *     each output = (2^21 + Σ w_i·p_i) >> 22 clamped to 0..255: so the
 *     intermediate image between the passes is rounded to uint8, as in PIL.
 * All channels of a pixel use the same weights. Integer results: identical
 * for any thread count and ISA.
 */
#ifndef FX_IMAGE_RESIZE_H
#define FX_IMAGE_RESIZE_H

#include <stdint.h>

#include "src/base/error.h"

/* src [sh, sw, ch] interleaved 8-bit → dst [dh, dw, ch] (ch 1..4, all sizes
 * >= 1). Errors: bad sizes (FLUX_ERR_INVALID_ARG), out of memory. */
flux_status fx_resize_lanczos(const uint8_t *src, int sw, int sh, int ch, uint8_t *dst, int dw, int dh,
                              fx_err *err);

#endif
