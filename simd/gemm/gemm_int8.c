/*
 * gemm_int8.c — the W8A8 GEMM for block-typed weights (kc->int8): the
 * driver, the activation quantizer and the scalar reference kernel.
 *
 *   1. X [m, k] → int8 codes and a scale per row (s = max|x|/127, code =
 *      x·(127/max|x|) rounded to nearest even), packed once into A tiles
 *      [k/4][MR][4], or [k/32][MR][32] for kernels that want whole rows of
 *      a block (rows past m are zero, scale 0);
 *   2. threads own contiguous ranges of NR-column panels; per panel the
 *      weight rows are converted to int8 + per-32 scales
 *      (fx_weight_to_int8) and packed into B [k/32][8][NR][4] + [k/32][NR];
 *   3. per row tile one kernel call runs the whole K (no K blocking: a
 *      panel of NR·k bytes stays in L2), so no partial sums are kept.
 * Every output element is computed by one fixed sequence of integer dots
 * and f32 fused multiply-adds in block order, whatever the tiling, ISA or
 * thread count: results are bit-identical across all of them.
 */
#include "gemm.h"

#include <math.h>
#include <string.h>

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

static inline int rne(float v) { /* round half to even, |v| <= 2^22 (exact here: |v| <= 127) */
    float t = v + 12582912.0f;
    uint32_t u;
    memcpy(&u, &t, 4);
    return (int)(u & 0x007fffffu) - 0x00400000;
}

/* ------------------------------------------------------------------------ */
/* Scalar reference kernel: any MR×NR the layout is packed for              */
/* ------------------------------------------------------------------------ */

enum { SC_MR = 4, SC_NR = 16 };

/* The epilogue on v = acc·s of column j (shared by every ISA's kernel). */
static inline void epi(const fx_int8_tile *t, int i, int j, float acc) {
    float v = acc * t->sa[i];
    if (t->bias) v = v + t->bias[j];
    float *c = t->c + i * t->ldc + j;
    if (t->mode == FX_EPI_STORE) *c = v;
    else if (t->mode == FX_EPI_ACCUMULATE) *c = *c + v;
    else *c = fmaf(t->gate[j], v, *c);
}

static void kernel_scalar(int64_t nb, const int8_t *a, const int8_t *b, const float *bs, const fx_int8_tile *t) {
    float acc[SC_MR][SC_NR] = {{0}};
    for (int64_t blk = 0; blk < nb; blk++, a += 32 * SC_MR, b += 32 * SC_NR, bs += SC_NR) {
        int32_t dot[SC_MR][SC_NR] = {{0}};
        for (int q = 0; q < 8; q++)
            for (int i = 0; i < SC_MR; i++)
                for (int j = 0; j < SC_NR; j++)
                    for (int e = 0; e < 4; e++)
                        dot[i][j] += (int32_t)a[(q * SC_MR + i) * 4 + e] * (int32_t)b[(q * SC_NR + j) * 4 + e];
        for (int i = 0; i < SC_MR; i++)
            for (int j = 0; j < SC_NR; j++) acc[i][j] = fmaf((float)dot[i][j], bs[j], acc[i][j]);
    }
    for (int i = 0; i < t->m; i++)
        for (int j = 0; j < t->n; j++) epi(t, i, j, acc[i][j]);
}

const fx_gemm_int8 fx_gemm_int8_scalar = {"scalar int8 4x16", SC_MR, SC_NR, kernel_scalar, 0, NULL, NULL};

/* ------------------------------------------------------------------------ */
/* Driver                                                                   */
/* ------------------------------------------------------------------------ */

/* Row i of X → codes into the A tiles (lane i % MR of tile i / MR), scale;
 * kq: bytes of a row kept together (4: quads, 32: whole blocks). */
static void quantize_row(const float *x, int64_t k, int mr, int kq, int8_t *tile, int lane, float *scale) {
    float amax = 0.0f;
    for (int64_t q = 0; q < k; q++) amax = fabsf(x[q]) > amax ? fabsf(x[q]) : amax;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    *scale = amax / 127.0f;
    for (int64_t q = 0; q < k; q++) {
        int v = rne(x[q] * inv);
        tile[(q / kq * mr + lane) * kq + q % kq] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
}

/* Weight rows [j0, j0 + cols) → B panel quads and scales (zero past cols);
 * qrow/drow: one converted row. */
static void pack_b(const fx_kctx *kc, const fx_weight *w, int64_t j0, int cols, int nr, int8_t *bq, float *bsc,
                   int8_t *qrow, float *drow) {
    const int64_t k = w->k, nb = k / 32, rb = fx_dtype_row_bytes(w->dtype, w->ld);
    for (int j = 0; j < nr; j++) {
        if (j < cols) fx_weight_to_int8(kc, w->dtype, (const char *)w->data + (j0 + j) * rb, k, qrow, drow);
        for (int64_t b = 0; b < nb; b++) {
            bsc[b * nr + j] = j < cols ? drow[b] : 0.0f;
            for (int q = 0; q < 8; q++) {
                int8_t *o = bq + ((b * 8 + q) * nr + j) * 4;
                if (j < cols) memcpy(o, qrow + b * 32 + q * 4, 4);
                else memset(o, 0, 4);
            }
        }
    }
}

int fx_linear_int8(const fx_kctx *kc, const fx_gemm_int8 *p, int64_t m, const float *x, int64_t ldx,
                   const fx_weight *w, float *y, int64_t ldy, const fx_epilogue *epi_) {
    static const fx_epilogue store = {FX_EPI_STORE, NULL, NULL};
    const fx_epilogue *e = epi_ ? epi_ : &store;
    if (!p) {
        const fx_gemm_kernels *g = kc->k ? kc->k->gemm : NULL;
        p = g && g->int8 ? g->int8(fx_cpu_facts_get(), m) : &fx_gemm_int8_scalar;
    }
    const int mr = p->mr, nr = p->nr, kq = p->a_rows ? 32 : 4;
    const int64_t n = w->n, k = w->k, nb = k / 32, tiles = ceil_div(m, mr), panels = ceil_div(n, nr);
    int threads = kc->threads > 0 ? kc->threads : 1;
    if (threads > panels) threads = (int)panels;
    if (2.0 * (double)m * (double)n * (double)k < FX_GEMM_SERIAL_FLOPS) threads = 1;
    /* shared: A tiles + row scales; per thread: B panel + scales + one converted row */
    const size_t a_bytes = (size_t)round_up(tiles * mr * k, 64), s_bytes = (size_t)round_up(tiles * mr * 4, 64);
    const size_t per = (size_t)round_up((int64_t)nr * k + nb * nr * 4 + k + nb * 4, 64);
    if (!kc->scratch || fx_scratch_reserve(kc->scratch, 0, a_bytes + s_bytes + (size_t)threads * per)) return -1;
    char *base = fx_scratch_shared(kc->scratch);
    int8_t *A = (int8_t *)base;
    float *sa = (float *)(void *)(base + a_bytes);
    char *bufs = base + a_bytes + s_bytes;
    const int qthreads = m * k >= 65536 ? (kc->threads > 0 ? kc->threads : 1) : 1;
    (void)qthreads; /* unused without OpenMP */
#pragma omp parallel for schedule(static) num_threads(qthreads) if (qthreads > 1)
    for (int64_t t = 0; t < tiles; t++) {
        int8_t *tile = A + t * mr * k;
        for (int lane = 0; lane < mr; lane++) {
            const int64_t i = t * mr + lane;
            if (i < m) {
                quantize_row(x + i * ldx, k, mr, kq, tile, lane, sa + i);
            } else { /* padding rows: zero codes, zero scale */
                sa[i] = 0.0f;
                for (int64_t q = 0; q < k / kq; q++) memset(tile + (q * mr + lane) * kq, 0, (size_t)kq);
            }
        }
    }
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        const int tid = fx_thread_id(), nt = fx_thread_count();
        const int64_t p0 = panels * tid / nt, p1 = panels * (tid + 1) / nt;
        char *mine = bufs + (size_t)tid * per;
        int8_t *bq = (int8_t *)mine, *qrow = bq + nr * k + nb * nr * 4;
        float *bsc = (float *)(void *)(bq + nr * k), *drow = (float *)(void *)(qrow + k);
        if (p->thread_begin && p0 < p1) p->thread_begin();
        for (int64_t pn = p0; pn < p1; pn++) {
            const int64_t j0 = pn * nr;
            const int cols = (int)(n - j0 < nr ? n - j0 : nr);
            pack_b(kc, w, j0, cols, nr, bq, bsc, qrow, drow);
            for (int64_t t = 0; t < tiles; t++) {
                fx_int8_tile tl = {y + t * mr * ldy + j0, ldy, (int)(m - t * mr < mr ? m - t * mr : mr), cols,
                                   sa + t * mr, e->mode, e->bias ? e->bias + j0 : NULL, e->gate ? e->gate + j0 : NULL};
                p->kernel(nb, A + t * mr * k, bq, bsc, &tl);
            }
        }
        if (p->thread_end && p0 < p1) p->thread_end();
    }
    return 0;
}
