/*
 * mask.c — the inpainting mask on the token grid (mask.h).
 */
#include "mask.h"

#include <stdlib.h>
#include <string.h>

#include "src/image/image.h"
#include "src/image/image_resize.h"

/* PIL convert("L") of one pixel of `ch` channels (mask.h step 2). */
static uint8_t luma(const uint8_t *p, int ch) {
    if (ch < 3) return p[0];
    return (uint8_t)(((uint32_t)p[0] * 19595u + (uint32_t)p[1] * 38470u + (uint32_t)p[2] * 7471u + 0x8000u) >> 16);
}

/* torch bilinear (align_corners=False) source taps of output index d: i0, i1, weight of i1. */
static void bilinear_taps(int d, int in, int out, int *i0, int *i1, float *w1) {
    const float scale = (float)in / (float)out;
    float src = scale * ((float)d + 0.5f) - 0.5f;
    if (src < 0) src = 0;
    *i0 = (int)src;
    *i1 = *i0 + (*i0 < in - 1);
    *w1 = src - (float)*i0;
}

flux_status fx_mask_tokens(const flux_image *mask, int invert, int width, int height, int unit, float **out,
                           fx_err *err) {
    *out = NULL;
    if (!mask || !mask->data || mask->channels < 1 || mask->channels > 4)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "mask: not a valid image (%s)",
                       !mask ? "NULL" : !mask->data ? "no pixel data" : "channels must be 1..4");
    if (!fx_image_size_ok(mask->width, mask->height))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "mask: size %dx%d is invalid", mask->width, mask->height);
    const size_t src_n = (size_t)mask->width * (size_t)mask->height, dst_n = (size_t)width * (size_t)height;
    int ch = mask->channels;
    const uint8_t *src = mask->data;
    uint8_t *gray = NULL, *sized = NULL;
    if (invert) { /* step 0 */
        if (!(gray = malloc(src_n))) return fx_fail(err, FLUX_ERR_NOMEM, "mask: out of memory");
        for (size_t i = 0; i < src_n; i++) gray[i] = (uint8_t)(255 - luma(mask->data + i * (size_t)ch, ch));
        src = gray;
        ch = 1;
    }
    flux_status st = FLUX_OK;
    if (mask->width != width || mask->height != height) { /* step 1 */
        if (!(sized = malloc(dst_n * (size_t)ch))) st = fx_fail(err, FLUX_ERR_NOMEM, "mask: out of memory");
        else st = fx_resize_lanczos(src, mask->width, mask->height, ch, sized, width, height, err);
        src = sized;
    }
    const int gh = height / unit, gw = width / unit;
    float *m = st ? NULL : malloc((size_t)gh * (size_t)gw * sizeof *m);
    if (!st && !m) st = fx_fail(err, FLUX_ERR_NOMEM, "mask: out of memory");
    for (int y = 0; !st && y < gh; y++) { /* steps 2-4 at the four taps of each token */
        int y0, y1, x0, x1;
        float wy, wx;
        bilinear_taps(y, height, gh, &y0, &y1, &wy);
        for (int x = 0; x < gw; x++) {
            bilinear_taps(x, width, gw, &x0, &x1, &wx);
            float b[4];
            const int ys[2] = {y0, y1}, xs[2] = {x0, x1};
            for (int k = 0; k < 4; k++) {
                const uint8_t *p = src + ((size_t)ys[k >> 1] * (size_t)width + (size_t)xs[k & 1]) * (size_t)ch;
                b[k] = (float)luma(p, ch) / 255.0f >= 0.5f ? 1.0f : 0.0f;
            }
            /* torch: h0lambda·(w0lambda·v00 + w1lambda·v01) + h1lambda·(w0lambda·v10 + w1lambda·v11) */
            m[(size_t)y * (size_t)gw + (size_t)x] =
                (1.0f - wy) * ((1.0f - wx) * b[0] + wx * b[1]) + wy * ((1.0f - wx) * b[2] + wx * b[3]);
        }
    }
    free(gray);
    free(sized);
    if (st) {
        free(m);
        return st;
    }
    *out = m;
    return FLUX_OK;
}
