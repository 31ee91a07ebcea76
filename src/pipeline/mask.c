/*
 * mask.c — the inpainting mask on the token grid (mask.h).
 */
#include "mask.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/image/image.h"
#include "src/image/image_resize.h"

/* PIL convert("L") of one pixel of `ch` channels (mask.h step 2). */
static uint8_t luma(const uint8_t *p, int ch) {
    if (ch < 3) return p[0];
    return (uint8_t)(((uint32_t)p[0] * 19595u + (uint32_t)p[1] * 38470u + (uint32_t)p[2] * 7471u + 0x8000u) >> 16);
}

flux_status fx_mask_from_image(const flux_image *img, flux_mask_source how, const char *name, flux_image **out,
                               fx_err *err) {
    *out = NULL;
    const int ch = img->channels, has_alpha = ch == 2 || ch == 4;
    const size_t n = (size_t)img->width * (size_t)img->height;
    if (how != FLUX_MASK_GRAY && how != FLUX_MASK_TRANSPARENT && how != FLUX_MASK_A1111)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: unknown mask convention %d", name, (int)how);
    if (how == FLUX_MASK_TRANSPARENT && !has_alpha)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "%s: the mask has no transparency (no alpha channel or tRNS chunk); the area to edit is "
                       "given by fully transparent pixels",
                       name);
    int use_alpha = how == FLUX_MASK_TRANSPARENT;
    for (size_t i = 0; how == FLUX_MASK_A1111 && has_alpha && !use_alpha && i < n; i++)
        use_alpha = img->data[i * (size_t)ch + (size_t)ch - 1] != 255; /* A1111: getextrema()[-1] != (255, 255) */
    flux_image *m = how == FLUX_MASK_GRAY ? flux_image_new(img->width, img->height, ch)
                                          : flux_image_new(img->width, img->height, 1);
    if (!m) return fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory (mask)", name);
    if (how == FLUX_MASK_GRAY) {
        memcpy(m->data, img->data, n * (size_t)ch);
    } else {
        for (size_t i = 0; i < n; i++) {
            const uint8_t *p = img->data + i * (size_t)ch;
            const uint8_t a = has_alpha ? p[ch - 1] : 255;
            if (how == FLUX_MASK_TRANSPARENT) m->data[i] = a == 0 ? 255 : 0;
            else m->data[i] = (use_alpha ? a : luma(p, ch)) > 128 ? 255 : 0;
        }
    }
    if (how == FLUX_MASK_TRANSPARENT && !memchr(m->data, 255, n)) {
        flux_image_free(m);
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "%s: the mask has no fully transparent pixel (alpha 0), so nothing would be edited", name);
    }
    *out = m;
    return FLUX_OK;
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

/* OpenCV's 8-bit fixed-point Gaussian kernel of k taps (mask.h step 0) into v[k]. */
static void blur_kernel(int k, double sigma, int32_t *v) {
    const int c = (k - 1) / 2;
    const double scale = -0.125 / (sigma * sigma); /* x = 2·(i − c), so x²·scale = −(i − c)²/(2σ²) */
    double sum = 0;
    for (int i = 0; i < c; i++) sum += exp((double)((2 * i + 1 - k) * (2 * i + 1 - k)) * scale);
    const double mul = 1.0 / (sum * 2.0 + 1.0);
    double e = 0;
    int32_t total = 0;
    for (int i = 0; i < c; i++) {
        const double adj = exp((double)((2 * i + 1 - k) * (2 * i + 1 - k)) * scale) * mul * 256.0 + e;
        const int32_t r = (int32_t)nearbyint(adj); /* cvRound: nearest, ties to even */
        e = adj - (double)r;
        v[i] = v[k - 1 - i] = r;
        total += r;
    }
    v[c] = 256 - 2 * total;
}

/* OpenCV BORDER_REFLECT_101 (borderInterpolate): ... 2 1 | 0 1 2 ... n−1 | n−2 ... */
static int reflect101(int p, int n) {
    if (n == 1) return 0;
    while (p < 0 || p >= n) p = p < 0 ? -p : 2 * (n - 1) - p;
    return p;
}

/* One pass along rows (stride 1, count n) of `lines` lines (stride ls). */
static void blur_pass(uint8_t *g, int n, int lines, size_t step, size_t ls, const int32_t *v, int k, uint8_t *line) {
    const int c = (k - 1) / 2;
    for (int l = 0; l < lines; l++) {
        uint8_t *p = g + (size_t)l * ls;
        for (int i = 0; i < n; i++) line[i] = p[(size_t)i * step];
        for (int i = 0; i < n; i++) {
            int64_t acc = 128;
            for (int j = 0; j < k; j++) acc += (int64_t)v[j] * line[reflect101(i + j - c, n)];
            acc >>= 8;
            p[(size_t)i * step] = (uint8_t)(acc > 255 ? 255 : acc);
        }
    }
}

flux_status fx_mask_blur(uint8_t *g, int w, int h, double sigma_x, double sigma_y, fx_err *err) {
    const double sig[2] = {sigma_x, sigma_y};
    for (int axis = 0; axis < 2; axis++) {
        if (!(sig[axis] >= 0 && sig[axis] <= FX_MASK_MAX_BLUR))
            return fx_fail(err, FLUX_ERR_INVALID_ARG, "mask blur %s must be in 0..%d, got %g", axis ? "y" : "x",
                           FX_MASK_MAX_BLUR, sig[axis]);
        if (sig[axis] == 0) continue;
        const int k = 2 * (int)(2.5 * sig[axis] + 0.5) + 1, n = axis ? h : w;
        int32_t *v = malloc((size_t)k * sizeof *v);
        uint8_t *line = malloc((size_t)n);
        if (!v || !line) {
            free(v), free(line);
            return fx_fail(err, FLUX_ERR_NOMEM, "mask: out of memory (blur)");
        }
        blur_kernel(k, sig[axis], v);
        if (axis == 0) blur_pass(g, w, h, 1, (size_t)w, v, k, line);
        else blur_pass(g, h, w, (size_t)w, 1, v, k, line);
        free(v), free(line);
    }
    return FLUX_OK;
}

flux_status fx_mask_tokens(const flux_image *mask, const fx_mask_rules *rules, int width, int height, int unit,
                           float **out, fx_err *err) {
    static const fx_mask_rules none = {0, 0, 0};
    if (!rules) rules = &none;
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
    flux_status st = FLUX_OK;
    if (rules->invert || rules->blur_x || rules->blur_y) { /* step 0 */
        if (!(gray = malloc(src_n))) return fx_fail(err, FLUX_ERR_NOMEM, "mask: out of memory");
        for (size_t i = 0; i < src_n; i++) {
            const uint8_t l = luma(mask->data + i * (size_t)ch, ch);
            gray[i] = rules->invert ? (uint8_t)(255 - l) : l;
        }
        src = gray;
        ch = 1;
        st = fx_mask_blur(gray, mask->width, mask->height, rules->blur_x, rules->blur_y, err);
    }
    if (!st && (mask->width != width || mask->height != height)) { /* step 1 */
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
