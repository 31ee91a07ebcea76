/*
 * gemm_int8.c — the int8 (W8A8) GEMM of --precision int8 (kc->int8): the
 * driver, the activation quantizer and the scalar reference kernel.
 *
 *   1. X [m, k] → int8 codes and a scale per row (s = max|x|/127, code =
 *      x·(127/max|x|) rounded to nearest even), packed once per call into
 *      panels of NR tokens [ldq/4][NR][4] (gemm.h), as u8 (code + 128)
 *      for the kernels that want unsigned bytes;
 *   2. (the GEMM nest, gemm_nest.h, with this file's hooks) threads own
 *      contiguous ranges of MR-channel blocks; a thread walks
 *      its range in super-blocks of weight rows that stay in L2 (about
 *      SUPER_BYTES), and for each super-block every token panel, and for
 *      each panel every MR block: the panel stays in L1/L2 across the MR
 *      blocks, the super-block's rows across the panels;
 *   3. the weight rows come from the form (kernels.h fx_int8w, in place)
 *      or, for a weight without one, are converted per super-block into
 *      the thread's scratch (fx_weight_row_to_int8: the same codes);
 *   4. each kernel call runs the whole K for its MR × NR tile: exact int32
 *      sums, then the scales once (fx_int8_epi_c).
 * Every output is one exact integer sum and the same f32 operations,
 * whatever the tiling, ISA or thread count: results are bit-identical
 * across all of them.
 */
#include "gemm_int8.h"
#include "gemm_nest.h"

#include <string.h>


static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

/* Weight rows of one thread's super-block: ~L2 / 4 (the rest holds the X
 * panel and the output). */
#define SUPER_BYTES ((int64_t)256 << 10)
/* Longest K with exact int32 sums: |Σ (code + 128)·w| <= 255·127·K < 2^31. */
#define MAX_K 65536

/* ------------------------------------------------------------------------ */
/* Scalar reference kernel                                                  */
/* ------------------------------------------------------------------------ */

enum { SC_MR = 4, SC_NR = 4 };

static void kernel_scalar(int64_t kq, const int8_t *w, int64_t ldw, const uint8_t *x, const fx_int8_tile *t) {
    int32_t d[SC_MR][SC_NR] = {{0}};
    for (int64_t q = 0; q < kq; q++, x += 4 * SC_NR)
        for (int j = 0; j < SC_MR; j++)
            for (int i = 0; i < SC_NR; i++)
                for (int e = 0; e < 4; e++) d[j][i] += (int32_t)w[j * ldw + 4 * q + e] * (int8_t)x[4 * i + e];
    fx_int8_finish_c(&d[0][0], SC_NR, 0, t);
}

const fx_gemm_int8 fx_gemm_int8_scalar = {"scalar int8 4x4", SC_MR, SC_NR, kernel_scalar, 0, NULL, NULL};

/* ------------------------------------------------------------------------ */
/* Activations                                                              */
/* ------------------------------------------------------------------------ */

/* Row x [k] → codes at lane `lane` of a panel [ldq/4][nr][4] (zero codes
 * past k) and its scale; u8: codes + 128. codes: room for ldq bytes. */
static void quantize_row(const float *x, int64_t k, int64_t ldq, int nr, int lane, int u8, int8_t *codes,
                         uint8_t *panel, float *scale) {
    int32_t sum;
    fx_int8_codes(x, k, codes, scale, &sum);
    memset(codes + k, 0, (size_t)(ldq - k));
    const uint32_t flip = u8 ? 0x80808080u : 0;
    for (int64_t q = 0; q < ldq / 4; q++) {
        uint32_t v;
        memcpy(&v, codes + 4 * q, 4);
        v ^= flip;
        memcpy(panel + (q * nr + lane) * 4, &v, 4);
    }
}

/* Padding token: zero codes (u8: 128), scale 0. */
static void zero_row(int64_t ldq, int nr, int lane, int u8, uint8_t *panel, float *scale) {
    *scale = 0.0f;
    for (int64_t q = 0; q < ldq / 4; q++) memset(panel + (q * nr + lane) * 4, u8 ? 0x80 : 0, 4);
}

/* ------------------------------------------------------------------------ */
/* Driver: the hooks on the nest (gemm_nest.h)                              */
/* ------------------------------------------------------------------------ */

/* Everything the threads share for one call. */
typedef struct int8_plan {
    const fx_kctx *kc;
    const fx_gemm_int8 *p;
    const fx_weight *w;
    const fx_int8w *f;      /* the form, or NULL: rows converted per chunk */
    int64_t m, ldq, kq, sb_rows;
    const uint8_t *X;       /* packed token panels */
    const float *sx;        /* token scales */
    float *y;
    int64_t ldy;
    const fx_epilogue *e;
} int8_plan;

/* A thread's current chunk of weight rows: codes, scales, sums. */
typedef struct int8_state {
    const int8_t *wq;
    const float *ws;
    const int32_t *wsum;
    int64_t j0;
} int8_state;
FX_GEMM_STATE_FITS(int8_state);

/* Rows [j0, j0 + rows) of block-typed w converted into a super-block buffer
 * of `cap` rows (ldq bytes apart; rows past `rows` zero, scale 0). */
static void convert_rows(const fx_kctx *kc, const fx_weight *w, int64_t j0, int64_t rows, int64_t cap, int64_t ldq,
                         int8_t *q, float *scale, int32_t *sum, float *tmp) {
    for (int64_t r = 0; r < cap; r++) {
        int8_t *row = q + r * ldq;
        if (r < rows) {
            fx_weight_row_to_int8(kc, w, j0 + r, tmp, row, scale + r, sum + r);
            memset(row + w->k, 0, (size_t)(ldq - w->k));
        } else {
            memset(row, 0, (size_t)ldq);
            scale[r] = 0.0f, sum[r] = 0;
        }
    }
}

static void int8_begin(const void *ctx, fx_gemm_thread *t) {
    const int8_plan *pl = ctx;
    (void)t;
    if (pl->p->thread_begin) pl->p->thread_begin();
}

static void int8_end(const void *ctx, fx_gemm_thread *t) {
    const int8_plan *pl = ctx;
    (void)t;
    if (pl->p->thread_end) pl->p->thread_end();
}

/* A super-block of weight rows [n0, n1): the form in place, or converted
 * into the thread's scratch (whole MR blocks, zero rows past n1). */
static void int8_chunk(const void *ctx, fx_gemm_thread *t, int64_t n0, int64_t n1) {
    const int8_plan *pl = ctx;
    int8_state *s = (int8_state *)(void *)t->state;
    const int64_t ldq = pl->ldq, sb_rows = pl->sb_rows;
    s->j0 = n0;
    if (pl->f) {
        s->wq = pl->f->q + n0 * ldq, s->ws = pl->f->scale + n0, s->wsum = pl->f->sum + n0;
        return;
    }
    char *mine = t->scratch;
    int8_t *cq = (int8_t *)mine;
    float *cs = (float *)(void *)(mine + sb_rows * ldq);
    int32_t *csum = (int32_t *)(void *)(mine + sb_rows * ldq + sb_rows * 4);
    convert_rows(pl->kc, pl->w, n0, n1 - n0, ceil_div(n1 - n0, pl->p->mr) * pl->p->mr, ldq, cq, cs, csum,
                 (float *)(void *)(mine + sb_rows * ldq + sb_rows * 8));
    s->wq = cq, s->ws = cs, s->wsum = csum;
}

/* The kernel on NR tokens from i0 × MR channels from j: the whole K. */
static void int8_tile(const void *ctx, fx_gemm_thread *t, const fx_gemm_pass *q, int64_t i0, int64_t j) {
    const int8_plan *pl = ctx;
    const int8_state *s = (const int8_state *)(const void *)t->state;
    const fx_gemm_int8 *p = pl->p;
    const fx_epilogue *e = pl->e;
    const int64_t jj = j - s->j0, n = pl->w->n;
    (void)q;
    fx_int8_tile tl = {pl->y + i0 * pl->ldy + j, pl->ldy, (int)(pl->m - i0 < p->nr ? pl->m - i0 : p->nr),
                       (int)(n - j < p->mr ? n - j : p->mr), pl->sx + i0, s->ws + jj, s->wsum + jj, e->mode,
                       e->bias ? e->bias + j : NULL, e->gate ? e->gate + j : NULL};
    p->kernel(pl->kq, s->wq + jj * pl->ldq, pl->ldq, pl->X + i0 * pl->ldq, &tl);
}

int fx_linear_int8(const fx_kctx *kc, const fx_gemm_int8 *p, int64_t m, const float *x, int64_t ldx,
                   const fx_weight *w, const fx_int8w *f, float *y, int64_t ldy, const fx_epilogue *epi_) {
    static const fx_epilogue store = {FX_EPI_STORE, NULL, NULL};
    const fx_epilogue *e = epi_ ? epi_ : &store;
    if (f && (f->n != w->n || f->k != w->k)) f = NULL;
    if (!f && (!fx_dtype_is_block(w->dtype) || w->scales)) return -1; /* NVFP4: weight-only */
    if (w->k > MAX_K) return -1;
    if (m <= 0 || w->n <= 0) return 0;
    if (!p) {
        const fx_gemm_kernels *g = kc->k ? kc->k->gemm : NULL;
        p = g && g->int8 ? g->int8(fx_cpu_facts_get(), m) : &fx_gemm_int8_scalar;
    }
    const int mr = p->mr, nr = p->nr, u8 = p->x_u8;
    const int64_t n = w->n, k = w->k, ldq = round_up(k, 64), kq = ldq / 4;
    const int64_t panels = ceil_div(m, nr), blocks = ceil_div(n, mr);
    int threads = kc->threads > 0 ? kc->threads : 1;
    if (threads > blocks) threads = (int)blocks;
    if (2.0 * (double)m * (double)n * (double)k < FX_GEMM_SERIAL_FLOPS) threads = 1;
    /* super-block: whole MR blocks of weight rows, about SUPER_BYTES */
    int64_t sb_blocks = SUPER_BYTES / (ldq * mr);
    if (sb_blocks < 1) sb_blocks = 1;
    const int64_t sb_rows = sb_blocks * mr;
    /* shared: X panels + token scales + one code row per panel-quantizing
     * thread; per thread (blocks converted per call): a super-block's rows,
     * scales, sums and one f32 row */
    const size_t x_bytes = (size_t)round_up(panels * nr * ldq, 64), s_bytes = (size_t)round_up(panels * nr * 4, 64);
    const int qthreads = m * k >= 65536 ? (kc->threads > 0 ? kc->threads : 1) : 1;
    const size_t c_bytes = (size_t)ldq * (size_t)qthreads;
    int8_plan pl = {kc, p, w, f, m, ldq, kq, sb_rows, NULL, NULL, y, ldy, e};
    /* threads own MR blocks of channels, walked in super-blocks that stay
     * in L2; per super-block every token panel (in L1/L2 across the MR
     * blocks); one M block, and one K block: the kernel runs the whole K
     * (the nest's k is 1) */
    fx_gemm_nest nest = {
        .m = m, .n = n, .k = 1,
        .mu = nr, .nu = mr,
        .mc = m, .nc = sb_blocks, .kc = 1,
        .n_outer = 1, .m_micro_outer = 1, .split_n_only = 1,
        .ctx = &pl,
        .begin = int8_begin, .end = int8_end, .chunk = int8_chunk, .tile = int8_tile,
        .shared_bytes = x_bytes + s_bytes + c_bytes,
        .thread_bytes = f ? 0 : (size_t)round_up(sb_rows * ldq + sb_rows * 8 + k * 4, 64),
    };
    if (fx_gemm_nest_reserve(kc, &nest, threads)) return -1;
    char *base = nest.shared;
    uint8_t *X = (uint8_t *)base;
    float *sx = (float *)(void *)(base + x_bytes);
    int8_t *codes_all = (int8_t *)(base + x_bytes + s_bytes);
    pl.X = X, pl.sx = sx;
    (void)qthreads; /* unused without OpenMP */
#pragma omp parallel num_threads(qthreads) if (qthreads > 1)
    {
        int8_t *codes = codes_all + (size_t)fx_thread_id() * (size_t)ldq;
#pragma omp for schedule(static)
        for (int64_t pn = 0; pn < panels; pn++)
            for (int lane = 0; lane < nr; lane++) {
                const int64_t i = pn * nr + lane;
                uint8_t *panel = X + pn * nr * ldq;
                if (i < m) quantize_row(x + i * ldx, k, ldq, nr, lane, u8, codes, panel, sx + i);
                else zero_row(ldq, nr, lane, u8, panel, sx + i);
            }
    }
    fx_gemm_nest_run(&nest, threads);
    return 0;
}
