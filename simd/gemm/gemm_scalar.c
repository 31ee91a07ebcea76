/*
 * gemm_scalar.c — portable GEMM pieces: the packing routines for any MR/NR,
 * the scalar 4×16 microkernel, the scalar GEMV, and the scalar table (the
 * reference every other ISA is tested against).
 *
 * Packed layouts (see gemm.h):
 *   A micro-panel  [ksteps][MR][kpair]   rows of X, zero-padded
 *   B micro-panel  [ksteps][NR][kpair]   rows of W (= output columns)
 * with kpair = 1 (f32 elements) or 2 (bf16 pairs (k, k+1) for vdpbf16ps).
 */
#include "gemm.h"

#include <stdio.h>

/* ------------------------------------------------------------------------ */
/* Packing                                                                  */
/* ------------------------------------------------------------------------ */

void fx_gemm_pack_x_f32_c(const fx_gemm_path *p, int64_t mc, int64_t kc, const float *x,
                          int64_t ldx, void *dst) {
    const int mr = p->mr;
    float *d = dst;
    for (int64_t i0 = 0; i0 < mc; i0 += mr) {
        int rows = (int)(mc - i0 < mr ? mc - i0 : mr);
        for (int64_t k = 0; k < kc; k++) {
            int i = 0;
            for (; i < rows; i++) d[i] = x[(i0 + i) * ldx + k];
            for (; i < mr; i++) d[i] = 0.0f;
            d += mr;
        }
    }
}

void fx_gemm_pack_x_bf16pair_c(const fx_gemm_path *p, int64_t mc, int64_t kc, const float *x,
                               int64_t ldx, void *dst) {
    const int mr = p->mr;
    const int64_t kp = (kc + 1) / 2;
    uint16_t *d = dst;
    for (int64_t i0 = 0; i0 < mc; i0 += mr) {
        int rows = (int)(mc - i0 < mr ? mc - i0 : mr);
        for (int64_t q = 0; q < kp; q++) {
            int i = 0;
            for (; i < rows; i++) {
                const float *row = x + (i0 + i) * ldx;
                d[2 * i] = fx_f32_to_bf16_bits(row[2 * q]);
                d[2 * i + 1] = 2 * q + 1 < kc ? fx_f32_to_bf16_bits(row[2 * q + 1]) : 0;
            }
            for (; i < mr; i++) d[2 * i] = d[2 * i + 1] = 0;
            d += 2 * mr;
        }
    }
}

/* B panels with kpair = 1: element (k, j) of a micro-panel at d[k*NR + j]. */
#define PACK_W_WIDEN(fname, type, conv)                                                   \
    void fname(const fx_gemm_path *p, int64_t nc, int64_t kc, const void *w, int64_t ldw, \
               void *dst) {                                                               \
        const int nr = p->nr;                                                             \
        const type *src = w;                                                              \
        float *d = dst;                                                                   \
        for (int64_t j0 = 0; j0 < nc; j0 += nr) {                                         \
            int cols = (int)(nc - j0 < nr ? nc - j0 : nr);                                \
            for (int j = 0; j < cols; j++) {                                              \
                const type *row = src + (j0 + j) * ldw;                                   \
                for (int64_t k = 0; k < kc; k++) d[k * nr + j] = conv(row[k]);            \
            }                                                                             \
            for (int j = cols; j < nr; j++)                                               \
                for (int64_t k = 0; k < kc; k++) d[k * nr + j] = 0.0f;                    \
            d += kc * nr;                                                                 \
        }                                                                                 \
    }

#define CONV_F32(v) (v)
PACK_W_WIDEN(fx_gemm_pack_w_f32_c, float, CONV_F32)
PACK_W_WIDEN(fx_gemm_pack_w_f16_c, uint16_t, fx_f16_bits_to_f32)
PACK_W_WIDEN(fx_gemm_pack_w_bf16_c, uint16_t, fx_bf16_bits_to_f32)

void fx_gemm_pack_w_bf16pair_c(const fx_gemm_path *p, int64_t nc, int64_t kc, const void *w,
                               int64_t ldw, void *dst) {
    const int nr = p->nr;
    const int64_t kp = (kc + 1) / 2;
    const uint16_t *src = w;
    uint16_t *d = dst;
    for (int64_t j0 = 0; j0 < nc; j0 += nr) {
        int cols = (int)(nc - j0 < nr ? nc - j0 : nr);
        for (int j = 0; j < nr; j++) {
            const uint16_t *row = j < cols ? src + (j0 + j) * ldw : NULL;
            for (int64_t q = 0; q < kp; q++) {
                uint16_t *e = d + (q * nr + j) * 2;
                e[0] = row ? row[2 * q] : 0;
                e[1] = row && 2 * q + 1 < kc ? row[2 * q + 1] : 0;
            }
        }
        d += kp * nr * 2;
    }
}

/* ------------------------------------------------------------------------ */
/* Scalar microkernel: 4×16, f32                                            */
/* ------------------------------------------------------------------------ */

enum { SC_MR = 4, SC_NR = 16 };

static void kernel_4x16(int64_t ks, const void *a_, const void *b_, const fx_gemm_tile *t) {
    const float *a = a_, *b = b_;
    float acc[SC_MR][SC_NR];
    for (int i = 0; i < SC_MR; i++)
        for (int j = 0; j < SC_NR; j++)
            acc[i][j] = !t->first && i < t->m && j < t->n ? t->partial[i * t->ldp + j] : 0.0f;
    for (int64_t k = 0; k < ks; k++, a += SC_MR, b += SC_NR)
        for (int i = 0; i < SC_MR; i++)
            for (int j = 0; j < SC_NR; j++) acc[i][j] += a[i] * b[j];
    for (int i = 0; i < t->m; i++) {
        float *c = t->c + i * t->ldc;
        if (!t->last) {
            for (int j = 0; j < t->n; j++) c[j] = acc[i][j];
            continue;
        }
        for (int j = 0; j < t->n; j++) {
            float v = acc[i][j] + (t->bias ? t->bias[j] : 0.0f);
            if (t->mode == FX_EPI_STORE) c[j] = v;
            else if (t->mode == FX_EPI_ACCUMULATE) c[j] += v;
            else c[j] += t->gate[j] * v;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Scalar GEMV: y[i, j] for i < m, j in [n0, n1); one f32 chain per element */
/* ------------------------------------------------------------------------ */

void fx_gemv_c(int64_t m, int64_t n0, int64_t n1, int64_t k, const float *x, int64_t ldx,
               const uint16_t *xb, const fx_weight *w, float *y, int64_t ldy,
               const fx_epilogue *epi) {
    (void)xb;
    for (int64_t j = n0; j < n1; j++) {
        for (int64_t i = 0; i < m; i++) {
            const float *xr = x + i * ldx;
            float acc = 0.0f;
            if (w->dtype == FX_DTYPE_F32) {
                const float *wr = (const float *)w->data + j * w->ld;
                for (int64_t q = 0; q < k; q++) acc += xr[q] * wr[q];
            } else if (w->dtype == FX_DTYPE_BF16) {
                const uint16_t *wr = (const uint16_t *)w->data + j * w->ld;
                for (int64_t q = 0; q < k; q++) acc += xr[q] * fx_bf16_bits_to_f32(wr[q]);
            } else if (w->dtype == FX_DTYPE_F16) {
                const uint16_t *wr = (const uint16_t *)w->data + j * w->ld;
                for (int64_t q = 0; q < k; q++) acc += xr[q] * fx_f16_bits_to_f32(wr[q]);
            } else { /* block type or fp8: one block at a time, same chain as its f32 expansion */
                const int64_t bl = fx_dtype_block(w->dtype);
                const size_t bb = fx_dtype_block_bytes(w->dtype);
                const uint8_t *wr = (const uint8_t *)w->data + fx_dtype_row_bytes(w->dtype, j * w->ld);
                float blk[256];
                for (int64_t q0 = 0; q0 < k; q0 += bl, wr += bb) {
                    fx_dequantize_row(w->dtype, wr, bl, blk);
                    fx_weight_values(w, j, q0, bl, blk); /* fp8: its scales */
                    for (int64_t q = 0; q < bl; q++) acc += xr[q0 + q] * blk[q];
                }
            }
            fx_gemm_epi_scalar(epi, j, acc, y + i * ldy + j);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The scalar table                                                         */
/* ------------------------------------------------------------------------ */

static const fx_gemm_path scalar_f32 = {
    .name = "scalar f32 4x16",
    .mr = SC_MR, .nr = SC_NR,
    .kc = 256, .mc = 64, .nc = 1024,
    .kpair = 1, .elem = 4,
    .pack_x = fx_gemm_pack_x_f32_c,
    .pack_w = {fx_gemm_pack_w_f32_c, fx_gemm_pack_w_f16_c, fx_gemm_pack_w_bf16_c},
    .kernel = kernel_4x16,
};

const fx_gemm_kernels fx_gemm_scalar = {
    .name = "scalar",
    .path = {&scalar_f32, &scalar_f32, &scalar_f32},
    .gemv = {fx_gemv_c, fx_gemv_c, fx_gemv_c},
    .gemv_bf16_dot = 0,
};

size_t fx_gemm_describe(const fx_gemm_kernels *g, char *buf, size_t size) {
    static const char *const dtype[3] = {"f32", "f16", "bf16"};
    size_t len = 0;
    for (int dt = 0; dt < 3; dt++) {
        const fx_gemm_path *p = g->path[dt];
        const char *lead = dt == 0 ? "linear:  " : "         ";
        int n;
        if (dt == FX_DTYPE_BF16 && g->tiles) /* a tile driver: also the GGUF block types */
            n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0,
                         "%s %-4s weights %s (kc %d mc %d nc %d panels of 32 rows; also GGUF block types); "
                         "m <= %d: gemv\n",
                         lead, dtype[dt], g->tiles->name, g->tiles->kc, g->tiles->mc, g->tiles->nc, FX_GEMV_MAX_M);
        else
            n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0,
                         "%s %-4s weights %s (kc %d mc %d nc %d); m <= %d: gemv\n", lead, dtype[dt], p->name, p->kc,
                         p->mc, p->nc, FX_GEMV_MAX_M);
        if (n > 0) len += (size_t)n;
    }
    return len;
}
