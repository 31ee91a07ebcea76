/*
 * conv2d.c — 2-D convolution for the VAE through the GEMM (fx_linear).
 *
 * Channels-last, batch 1: x [h, w, cin] → y [ho, wo, cout], weight as stored
 * [cout, cin, kh, kw] = an fx_weight [cout, cin·kh·kw]. The weight is first
 * reordered (exactly, same dtype) to [cout, kh, kw, cin] in a scratch slot:
 * cout·cin·kh·kw element moves per call, nothing next to the GEMM's
 * rows·wo·cout·cin·kh·kw multiply-adds. With that order each im2col row is
 * kh·kw contiguous copies of cin floats (or zeros for padding). Each strip
 * of output rows is lowered to col [rows·wo, kh·kw·cin], then
 *     y[strip] (op)= col · W'ᵀ (+ bias)   — one fx_linear call.
 * The strip height depends only on the geometry (col stays under
 * IM2COL_BUDGET bytes, at least one output row), so memory is bounded at
 * 1024² and results do not depend on the thread count.
 *
 * Nearest ×2 upsampling and asymmetric zero padding are folded into the
 * im2col indexing: the upsampled, padded input is never materialised.
 * A 1×1, stride-1, unpadded, non-upsampled conv is a plain fx_linear on x.
 */
#include "dispatch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef IM2COL_BUDGET
#define IM2COL_BUDGET ((size_t)4 << 20) /* L3-resident strips measured fastest */
#endif

static int geom_ok(const fx_conv2d_geom *g) {
    return g->h > 0 && g->w > 0 && g->cin > 0 && g->cout > 0 && g->kh > 0 && g->kw > 0 &&
           g->stride > 0 && g->pad_top >= 0 && g->pad_left >= 0 && g->pad_bottom >= 0 &&
           g->pad_right >= 0;
}

void fx_conv2d_out_size(const fx_conv2d_geom *g, int *ho, int *wo) {
    *ho = *wo = 0;
    if (!geom_ok(g)) return;
    int64_t hh = (int64_t)g->h << (g->upsample2x ? 1 : 0);
    int64_t ww = (int64_t)g->w << (g->upsample2x ? 1 : 0);
    int64_t nh = hh + g->pad_top + g->pad_bottom - g->kh;
    int64_t nw = ww + g->pad_left + g->pad_right - g->kw;
    if (nh < 0 || nw < 0) return;
    *ho = (int)(nh / g->stride + 1);
    *wo = (int)(nw / g->stride + 1);
}

/* col rows for output pixels [pix0, pix0 + npix) (pixel = oy·wo + ox),
 * columns in (ky, kx, ci) order. */
static void im2col(const fx_kctx *kc, const fx_conv2d_geom *g, const float *x, int wo,
                   int64_t pix0, int64_t npix, float *col) {
    const int up = g->upsample2x ? 1 : 0;
    const int64_t hh = (int64_t)g->h << up, ww = (int64_t)g->w << up;
    const int64_t cin = g->cin, kdim = cin * g->kh * g->kw;
    const size_t row = sizeof(float) * (size_t)cin;
    int threads = kc && kc->threads > 0 ? kc->threads : 1;
    if (npix * kdim < 65536) threads = 1;
    (void)threads; /* unused without OpenMP */
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < npix; i++) {
        int64_t pix = pix0 + i, oy = pix / wo, ox = pix % wo;
        float *dst = col + i * kdim;
        for (int ky = 0; ky < g->kh; ky++) {
            int64_t iy = oy * g->stride - g->pad_top + ky; /* in the upsampled frame */
            for (int kx = 0; kx < g->kw; kx++, dst += cin) {
                int64_t ix = ox * g->stride - g->pad_left + kx;
                if (iy < 0 || iy >= hh || ix < 0 || ix >= ww) memset(dst, 0, row);
                else memcpy(dst, x + ((iy >> up) * g->w + (ix >> up)) * cin, row);
            }
        }
    }
}

/* w [cout, cin, kk] (row stride ld) → dst [cout, kk, cin]; 2- or 4-byte
 * elements, moved bit for bit. */
#define REORDER(T)                                                                     \
    for (int64_t co = 0; co < w->n; co++) {                                            \
        const T *s = (const T *)w->data + co * w->ld;                                   \
        T *o = (T *)dst + co * w->k;                                                   \
        for (int k = 0; k < kk; k++)                                                   \
            for (int ci = 0; ci < cin; ci++) o[(int64_t)k * cin + ci] = s[(int64_t)ci * kk + k]; \
    }
static void reorder_weight(const fx_weight *w, int cin, int kk, size_t es, void *dst) {
    if (es == 2) REORDER(uint16_t)
    else REORDER(uint32_t)
}
#undef REORDER

void fx_conv2d(const fx_kctx *kc, const fx_conv2d_geom *g, const float *x, const fx_weight *w,
               const fx_epilogue *epi, float *y, int row0, int row1) {
    int ho, wo;
    fx_conv2d_out_size(g, &ho, &wo);
    const int64_t kdim = (int64_t)g->cin * g->kh * g->kw;
    if (ho <= 0 || wo <= 0 || w->n != g->cout || w->k != kdim) return; /* out of contract */
    if (row1 <= 0 || row1 > ho) row1 = ho;
    if (row0 < 0) row0 = 0;
    if (row0 >= row1) return;

    if (kdim == g->cin && g->stride == 1 && !g->upsample2x && !g->pad_top && !g->pad_left &&
        !g->pad_bottom && !g->pad_right) { /* 1×1: x already is the matrix */
        fx_linear(kc, (int64_t)(row1 - row0) * wo, x + (int64_t)row0 * g->w * g->cin, g->cin, w,
                  y + (int64_t)row0 * wo * g->cout, g->cout, epi);
        return;
    }

    const int kk = g->kh * g->kw;
    const size_t es = fx_dtype_size(w->dtype), wbytes = (size_t)w->n * (size_t)kdim * es;
    void *owned_w = NULL;
    void *wr = kc && kc->scratch ? fx_scratch_slot_get(kc->scratch, FX_SLOT_CONVW, wbytes) : NULL;
    if (!wr) wr = owned_w = malloc(wbytes);

    size_t row_bytes = sizeof(float) * (size_t)wo * (size_t)kdim;
    int strip = (int)(IM2COL_BUDGET / row_bytes);
    if (strip < 1) strip = 1;
    if (strip > row1 - row0) strip = row1 - row0;
    size_t bytes = row_bytes * (size_t)strip;
    void *owned = NULL;
    float *col = kc && kc->scratch ? fx_scratch_slot_get(kc->scratch, FX_SLOT_IM2COL, bytes) : NULL;
    if (!col) col = owned = malloc(bytes);
    if (!col || !wr || !es) { /* no memory: a visible NaN result, never a crash */
        for (int64_t i = (int64_t)row0 * wo * g->cout; i < (int64_t)row1 * wo * g->cout; i++)
            y[i] = NAN;
        free(owned);
        free(owned_w);
        return;
    }
    reorder_weight(w, g->cin, kk, es, wr);
    const fx_weight wt = {wr, w->dtype, w->n, kdim, kdim};
    for (int r = row0; r < row1; r += strip) {
        int rows = row1 - r < strip ? row1 - r : strip;
        int64_t pix0 = (int64_t)r * wo, npix = (int64_t)rows * wo;
        im2col(kc, g, x, wo, pix0, npix, col);
        fx_linear(kc, npix, col, kdim, &wt, y + pix0 * g->cout, g->cout, epi);
    }
    free(owned);
    free(owned_w);
}
