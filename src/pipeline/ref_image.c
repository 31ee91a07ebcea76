/*
 * ref_image.c — reference image pre-processing (ref_image.h).
 */
#include "ref_image.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/image/codecs.h"
#include "src/image/image_resize.h"

/* The area cap (diffusers _resize_to_target_area / the inpaint pipeline's
 * "raw_h * raw_w > 1024 * 1024": Python float math, truncation), then the
 * size floored to multiples of unit. */
static void cap_and_floor(int w, int h, int unit, fx_ref_geom *g) {
    g->src_w = g->scaled_w = w;
    g->src_h = g->scaled_h = h;
    if ((int64_t)w * h > FX_REF_MAX_AREA) {
        const double s = sqrt((double)FX_REF_MAX_AREA / ((double)w * (double)h));
        g->scaled_w = (int)(w * s);
        g->scaled_h = (int)(h * s);
    }
    g->width = g->scaled_w / unit * unit;
    g->height = g->scaled_h / unit * unit;
}

static flux_status check_size(int w, int h, int unit, const char *what, fx_err *err) {
    if (unit < 1) return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: bad size unit %d", what, unit);
    if (!fx_image_size_ok(w, h))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: size %dx%d is invalid or too large (limit %d per side, %lld pixels)",
                       what, w, h, FX_IMAGE_MAX_SIDE, (long long)FX_IMAGE_MAX_PIXELS);
    return FLUX_OK;
}

flux_status fx_ref_geometry(int w, int h, int unit, const char *what, fx_ref_geom *g, fx_err *err) {
    memset(g, 0, sizeof *g);
    flux_status st = check_size(w, h, unit, what, err);
    if (st) return st;
    const int min_side = FX_REF_MIN_SIDE > unit ? FX_REF_MIN_SIDE : unit;
    if (w < min_side || h < min_side)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: %dx%d is too small: both sides must be at least %d pixels", what, w,
                       h, min_side);
    if ((int64_t)w > (int64_t)FX_REF_MAX_ASPECT * h || (int64_t)h > (int64_t)FX_REF_MAX_ASPECT * w)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: %dx%d has an aspect ratio of %.1f:1; at most %d:1 is accepted", what,
                       w, h, w > h ? (double)w / h : (double)h / w, FX_REF_MAX_ASPECT);
    cap_and_floor(w, h, unit, g);
    g->crop_x = (g->scaled_w - g->width) / 2;
    g->crop_y = (g->scaled_h - g->height) / 2;
    return FLUX_OK;
}

flux_status fx_init_geometry(int w, int h, int unit, const char *what, fx_ref_geom *g, fx_err *err) {
    memset(g, 0, sizeof *g);
    flux_status st = check_size(w, h, unit, what, err);
    if (st) return st;
    cap_and_floor(w, h, unit, g);
    g->stretch = 1;
    if (g->width < unit || g->height < unit)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "%s: %dx%d is too small: both sides must be at least %d pixels (the size is floored to "
                       "multiples of %d)",
                       what, w, h, unit, unit);
    return FLUX_OK;
}

/* Any 1..4-channel image → interleaved RGB8 (gray replicated, alpha dropped). */
static flux_status to_rgb8(const flux_image *img, const char *what, uint8_t **out, fx_err *err) {
    const size_t n = (size_t)img->width * (size_t)img->height;
    uint8_t *rgb = malloc(n * 3);
    if (!rgb) return fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory (%dx%d RGB)", what, img->width, img->height);
    const int ch = img->channels;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = img->data + i * (size_t)ch;
        for (int c = 0; c < 3; c++) rgb[i * 3 + (size_t)c] = ch >= 3 ? p[c] : p[0];
    }
    *out = rgb;
    return FLUX_OK;
}

/* Lanczos-resize *rgb [h, w, 3] in place of itself to dw × dh (no-op when equal, as PIL). */
static flux_status resize_rgb8(uint8_t **rgb, int w, int h, int dw, int dh, const char *what, fx_err *err) {
    if (dw == w && dh == h) return FLUX_OK;
    uint8_t *scaled = malloc((size_t)dw * (size_t)dh * 3);
    if (!scaled) return fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory (resize to %dx%d)", what, dw, dh);
    flux_status st = fx_resize_lanczos(*rgb, w, h, 3, scaled, dw, dh, err);
    if (st) {
        free(scaled);
        return st;
    }
    free(*rgb);
    *rgb = scaled;
    return FLUX_OK;
}

/* Steps 1-4 with the geometry *g already computed. */
static flux_status prepare_rgb8(const flux_image *img, const char *what, const fx_ref_geom *g, uint8_t **out,
                                fx_err *err) {
    uint8_t *rgb = NULL, *crop = NULL;
    flux_status st = to_rgb8(img, what, &rgb, err);
    if (st) return st;
    if (!(st = resize_rgb8(&rgb, g->src_w, g->src_h, g->scaled_w, g->scaled_h, what, err)) && g->stretch)
        st = resize_rgb8(&rgb, g->scaled_w, g->scaled_h, g->width, g->height, what, err);
    if (!st && g->stretch) {
        *out = rgb;
        return FLUX_OK;
    }
    if (!st && !(crop = malloc((size_t)g->width * (size_t)g->height * 3)))
        st = fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory (%dx%d crop)", what, g->width, g->height);
    if (!st) {
        const size_t row = (size_t)g->width * 3;
        for (int y = 0; y < g->height; y++)
            memcpy(crop + (size_t)y * row, rgb + ((size_t)(g->crop_y + y) * (size_t)g->scaled_w + (size_t)g->crop_x) * 3,
                   row);
        *out = crop;
    }
    free(rgb);
    return st;
}

static flux_status check_image(const flux_image *img, const char *what, fx_err *err) {
    if (!img || !img->data || img->channels < 1 || img->channels > 4)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: not a valid image (%s)", what,
                       !img ? "NULL" : !img->data ? "no pixel data" : "channels must be 1..4");
    return FLUX_OK;
}

flux_status fx_ref_prepare_rgb8(const flux_image *img, int unit, const char *what, fx_ref_geom *g, uint8_t **out,
                                fx_err *err) {
    *out = NULL;
    flux_status st = check_image(img, what, err);
    if (!st) st = fx_ref_geometry(img->width, img->height, unit, what, g, err);
    return st ? st : prepare_rgb8(img, what, g, out, err);
}

flux_status fx_init_prepare_rgb8(const flux_image *img, int unit, const char *what, fx_ref_geom *g, uint8_t **out,
                                 fx_err *err) {
    *out = NULL;
    flux_status st = check_image(img, what, err);
    if (!st) st = fx_init_geometry(img->width, img->height, unit, what, g, err);
    return st ? st : prepare_rgb8(img, what, g, out, err);
}

/* RGB8 [h, w, 3] → [3, h, w] in [−1, 1] as diffusers in float32: 2·(p / 255) − 1 (2·x is exact). Frees rgb. */
static flux_status to_unit_range(uint8_t *rgb, const fx_ref_geom *g, const char *what, float **out, fx_err *err) {
    const size_t hw = (size_t)g->width * (size_t)g->height;
    float *x = malloc(hw * 3 * sizeof *x);
    if (!x) {
        free(rgb);
        return fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory (%dx%d pixels)", what, g->width, g->height);
    }
    for (size_t i = 0; i < hw; i++)
        for (size_t c = 0; c < 3; c++) x[c * hw + i] = 2.0f * ((float)rgb[i * 3 + c] / 255.0f) - 1.0f;
    free(rgb);
    *out = x;
    return FLUX_OK;
}

flux_status fx_ref_prepare(const flux_image *img, int unit, const char *what, fx_ref_geom *g, float **out,
                           fx_err *err) {
    *out = NULL;
    uint8_t *rgb;
    flux_status st = fx_ref_prepare_rgb8(img, unit, what, g, &rgb, err);
    return st ? st : to_unit_range(rgb, g, what, out, err);
}

flux_status fx_init_prepare(const flux_image *img, int unit, const char *what, fx_ref_geom *g, float **out,
                            fx_err *err) {
    *out = NULL;
    uint8_t *rgb;
    flux_status st = fx_init_prepare_rgb8(img, unit, what, g, &rgb, err);
    return st ? st : to_unit_range(rgb, g, what, out, err);
}
