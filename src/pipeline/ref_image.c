/*
 * ref_image.c — reference image pre-processing (ref_image.h).
 */
#include "ref_image.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/image/codecs.h"
#include "src/image/image_resize.h"

flux_status fx_ref_geometry(int w, int h, int unit, const char *what, fx_ref_geom *g, fx_err *err) {
    memset(g, 0, sizeof *g);
    if (unit < 1) return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: bad size unit %d", what, unit);
    if (!fx_image_size_ok(w, h))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: size %dx%d is invalid or too large (limit %d per side, %lld pixels)",
                       what, w, h, FX_IMAGE_MAX_SIDE, (long long)FX_IMAGE_MAX_PIXELS);
    const int min_side = FX_REF_MIN_SIDE > unit ? FX_REF_MIN_SIDE : unit;
    if (w < min_side || h < min_side)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: %dx%d is too small: both sides must be at least %d pixels", what, w,
                       h, min_side);
    if ((int64_t)w > (int64_t)FX_REF_MAX_ASPECT * h || (int64_t)h > (int64_t)FX_REF_MAX_ASPECT * w)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: %dx%d has an aspect ratio of %.1f:1; at most %d:1 is accepted", what,
                       w, h, w > h ? (double)w / h : (double)h / w, FX_REF_MAX_ASPECT);
    g->src_w = g->scaled_w = w;
    g->src_h = g->scaled_h = h;
    if ((int64_t)w * h > FX_REF_MAX_AREA) {
        /* diffusers _resize_to_target_area: Python float math, truncation */
        const double s = sqrt((double)FX_REF_MAX_AREA / ((double)w * (double)h));
        g->scaled_w = (int)(w * s);
        g->scaled_h = (int)(h * s);
    }
    g->width = g->scaled_w / unit * unit;
    g->height = g->scaled_h / unit * unit;
    g->crop_x = (g->scaled_w - g->width) / 2;
    g->crop_y = (g->scaled_h - g->height) / 2;
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

flux_status fx_ref_prepare_rgb8(const flux_image *img, int unit, const char *what, fx_ref_geom *g, uint8_t **out,
                                fx_err *err) {
    *out = NULL;
    if (!img || !img->data || img->channels < 1 || img->channels > 4)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: not a valid image (%s)", what,
                       !img ? "NULL" : !img->data ? "no pixel data" : "channels must be 1..4");
    flux_status st = fx_ref_geometry(img->width, img->height, unit, what, g, err);
    if (st) return st;
    uint8_t *rgb = NULL, *scaled = NULL, *crop = NULL;
    if ((st = to_rgb8(img, what, &rgb, err))) return st;
    if (g->scaled_w != g->src_w || g->scaled_h != g->src_h) {
        if (!(scaled = malloc((size_t)g->scaled_w * (size_t)g->scaled_h * 3))) {
            st = fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory (resize to %dx%d)", what, g->scaled_w, g->scaled_h);
        } else if (!(st = fx_resize_lanczos(rgb, g->src_w, g->src_h, 3, scaled, g->scaled_w, g->scaled_h, err))) {
            free(rgb);
            rgb = scaled;
            scaled = NULL;
        }
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
    free(scaled);
    return st;
}

flux_status fx_ref_prepare(const flux_image *img, int unit, const char *what, fx_ref_geom *g, float **out,
                           fx_err *err) {
    *out = NULL;
    uint8_t *rgb;
    flux_status st = fx_ref_prepare_rgb8(img, unit, what, g, &rgb, err);
    if (st) return st;
    const size_t hw = (size_t)g->width * (size_t)g->height;
    float *x = malloc(hw * 3 * sizeof *x);
    if (!x) {
        free(rgb);
        return fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory (%dx%d pixels)", what, g->width, g->height);
    }
    /* diffusers: float32 p / 255, then 2·x − 1 (2·x is exact) */
    for (size_t i = 0; i < hw; i++)
        for (size_t c = 0; c < 3; c++) x[c * hw + i] = 2.0f * ((float)rgb[i * 3 + c] / 255.0f) - 1.0f;
    free(rgb);
    *out = x;
    return FLUX_OK;
}
