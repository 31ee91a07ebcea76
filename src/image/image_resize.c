/*
 * image_resize.c — Pillow-exact Lanczos resampling of 8-bit images
 * (image_resize.h). Two separable passes with fixed-point weights.
 */
#include "image_resize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LANCZOS_A 3.0
/* Fixed-point fraction bits of the weights: 32 − 8 (pixel) − 2 (headroom
 * for negative lobes and sums above 1), as Pillow. */
#define WEIGHT_BITS 22

/* The taps of one pass: output sample o reads count[o] inputs starting at
 * first[o] with weights w[o·ksize ...]. */
typedef struct taps {
    int ksize;
    int *first, *count;
    int32_t *w;
} taps;

static double sinc(double x) {
    if (x == 0.0) return 1.0;
    x *= M_PI;
    return sin(x) / x;
}

/* Lanczos kernel with a = 3 on the half-open [−3, 3) as Pillow. */
static double lanczos(double x) {
    return -LANCZOS_A <= x && x < LANCZOS_A ? sinc(x) * sinc(x / LANCZOS_A) : 0.0;
}

static void taps_free(taps *t) {
    free(t->first);
    free(t->count);
    free(t->w);
}

/* Weights for resampling n_in samples to n_out (the whole line: Pillow's
 * box (0, n_in)). The expressions keep Pillow's order of operations so the
 * doubles (and hence the rounded weights) are the same. */
static flux_status make_taps(int n_in, int n_out, taps *t, fx_err *err) {
    memset(t, 0, sizeof *t);
    const double scale = (double)n_in / n_out;
    const double fs = scale < 1.0 ? 1.0 : scale; /* stretch the kernel when shrinking */
    const double support = LANCZOS_A * fs, inv_fs = 1.0 / fs;
    t->ksize = (int)ceil(support) * 2 + 1;
    double *k = malloc((size_t)t->ksize * sizeof *k);
    t->first = malloc((size_t)n_out * sizeof *t->first);
    t->count = malloc((size_t)n_out * sizeof *t->count);
    t->w = calloc((size_t)n_out * (size_t)t->ksize, sizeof *t->w);
    if (!k || !t->first || !t->count || !t->w) {
        free(k);
        taps_free(t);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (Lanczos weights for %d -> %d samples)", n_in, n_out);
    }
    for (int o = 0; o < n_out; o++) {
        const double center = (o + 0.5) * scale;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > n_in) hi = n_in;
        const int n = hi - lo;
        double sum = 0.0;
        for (int i = 0; i < n; i++) {
            k[i] = lanczos((i + lo - center + 0.5) * inv_fs);
            sum += k[i];
        }
        int32_t *w = t->w + (size_t)o * (size_t)t->ksize;
        for (int i = 0; i < n; i++) {
            double v = sum != 0.0 ? k[i] / sum : k[i];
            /* round half away from zero; the product by 2^22 is exact */
            w[i] = (int32_t)(v < 0 ? -0.5 + v * (1 << WEIGHT_BITS) : 0.5 + v * (1 << WEIGHT_BITS));
        }
        t->first[o] = lo;
        t->count[o] = n;
    }
    free(k);
    return FLUX_OK;
}

/* (2^21 + Σ w·p) >> 22, clamped to 0..255. */
static uint8_t to_u8(int64_t acc) {
    if (acc < 0) return 0;
    acc >>= WEIGHT_BITS;
    return (uint8_t)(acc > 255 ? 255 : acc);
}

/* Horizontal pass: rows [row0, row0 + rows) of src [.., sw, ch] → dst [rows, dw, ch]. */
static void pass_h(const uint8_t *src, int sw, int ch, int row0, int rows, const taps *t, uint8_t *dst, int dw) {
    for (int y = 0; y < rows; y++) {
        const uint8_t *in = src + (size_t)(row0 + y) * (size_t)sw * (size_t)ch;
        uint8_t *out = dst + (size_t)y * (size_t)dw * (size_t)ch;
        for (int x = 0; x < dw; x++) {
            const int32_t *w = t->w + (size_t)x * (size_t)t->ksize;
            const uint8_t *p = in + (size_t)t->first[x] * (size_t)ch;
            for (int c = 0; c < ch; c++) {
                int64_t acc = 1 << (WEIGHT_BITS - 1);
                for (int i = 0; i < t->count[x]; i++) acc += (int64_t)p[(size_t)i * (size_t)ch + (size_t)c] * w[i];
                out[(size_t)x * (size_t)ch + (size_t)c] = to_u8(acc);
            }
        }
    }
}

/* Vertical pass: src [.., w, ch] whose row 0 is source row row0 → dst [dh, w, ch]. */
static void pass_v(const uint8_t *src, int w, int ch, int row0, const taps *t, uint8_t *dst, int dh) {
    const size_t stride = (size_t)w * (size_t)ch;
    for (int y = 0; y < dh; y++) {
        const int32_t *wt = t->w + (size_t)y * (size_t)t->ksize;
        const uint8_t *in = src + (size_t)(t->first[y] - row0) * stride;
        uint8_t *out = dst + (size_t)y * stride;
        for (size_t e = 0; e < stride; e++) {
            int64_t acc = 1 << (WEIGHT_BITS - 1);
            for (int i = 0; i < t->count[y]; i++) acc += (int64_t)in[(size_t)i * stride + e] * wt[i];
            out[e] = to_u8(acc);
        }
    }
}

flux_status fx_resize_lanczos(const uint8_t *src, int sw, int sh, int ch, uint8_t *dst, int dw, int dh,
                              fx_err *err) {
    if (!src || !dst || sw < 1 || sh < 1 || dw < 1 || dh < 1 || ch < 1 || ch > 4)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "resize: bad arguments (%dx%d x %d channels -> %dx%d)", sw, sh, ch,
                       dw, dh);
    const int need_h = dw != sw, need_v = dh != sh;
    if (!need_h && !need_v) {
        memcpy(dst, src, (size_t)sw * (size_t)sh * (size_t)ch);
        return FLUX_OK;
    }
    taps tv, th;
    flux_status st = make_taps(sh, dh, &tv, err);
    if (st) return st;
    if (!need_h) {
        pass_v(src, sw, ch, 0, &tv, dst, dh);
        taps_free(&tv);
        return FLUX_OK;
    }
    if ((st = make_taps(sw, dw, &th, err))) {
        taps_free(&tv);
        return st;
    }
    /* Only the source rows the vertical pass reads go through the horizontal one. */
    const int row0 = need_v ? tv.first[0] : 0;
    const int rows = need_v ? tv.first[dh - 1] + tv.count[dh - 1] - row0 : sh;
    if (!need_v) {
        pass_h(src, sw, ch, 0, sh, &th, dst, dw);
    } else {
        uint8_t *tmp = malloc((size_t)rows * (size_t)dw * (size_t)ch);
        if (!tmp) {
            st = fx_fail(err, FLUX_ERR_NOMEM, "out of memory (resize buffer %dx%d)", dw, rows);
        } else {
            pass_h(src, sw, ch, row0, rows, &th, tmp, dw);
            pass_v(tmp, dw, ch, row0, &tv, dst, dh);
            free(tmp);
        }
    }
    taps_free(&tv);
    taps_free(&th);
    return st;
}
