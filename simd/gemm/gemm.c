/*
 * gemm.c — fx_linear: the BLIS-style driver shared by every ISA.
 *
 *   Y[m, n] (op)= X[m, k] · W[n, k]ᵀ (+ bias)
 *
 * The loops, packing and threading are described in gemm.h; this file only
 * picks the path for the weight dtype, lays out the scratch, and walks the
 * blocks. The per-ISA files provide packing routines and microkernels.
 *
 * Threads: each owns a range of whole NR column panels (or of whole MR
 * rows when n is narrow) and packs its own A panel and B micro-panels, so
 * the parallel region has no barrier at all.
 */
#include "gemm.h"

#include <stdlib.h>

/* Per-thread staging buffer for partial sums (accumulating modes with
 * several K blocks): at most this many bytes, which bounds the column
 * chunk. */
enum { STAGE_BYTES = 4 << 20 };

static int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }
static int64_t ceil_div(int64_t v, int64_t a) { return (v + a - 1) / a; }
static size_t weight_elem_size(fx_dtype t) { return t == FX_DTYPE_F32 ? 4 : 2; }

/* ------------------------------------------------------------------------ */
/* Degenerate and fallback cases                                            */
/* ------------------------------------------------------------------------ */

/* k == 0: X·Wᵀ is all zeros, only the epilogue remains. */
static void linear_k0(int64_t m, int64_t n, float *y, int64_t ldy, const fx_epilogue *epi) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) fx_gemm_epi_scalar(epi, j, 0.0f, y + i * ldy + j);
}

/* ------------------------------------------------------------------------ */
/* GEMV (m <= FX_GEMV_MAX_M): split the outputs over threads                */
/* ------------------------------------------------------------------------ */

static void linear_gemv(fx_gemv_fn gemv, int threads, int64_t m, const float *x, int64_t ldx,
                        const uint16_t *xb, const fx_weight *w, float *y, int64_t ldy,
                        const fx_epilogue *epi) {
    const int64_t n = w->n;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        int tid = fx_thread_id(), nt = fx_thread_count();
        /* contiguous output ranges in multiples of 16 rows of W */
        int64_t units = ceil_div(n, 16);
        int64_t n0 = units * tid / nt * 16, n1 = units * (tid + 1) / nt * 16;
        if (n1 > n) n1 = n;
        if (n0 < n1) gemv(m, n0, n1, w->k, x, ldx, xb, w, y, ldy, epi);
    }
}

/* ------------------------------------------------------------------------ */
/* The blocked GEMM                                                         */
/* ------------------------------------------------------------------------ */

typedef struct gemm_plan {
    const fx_gemm_path *p;
    fx_gemm_pack_w_fn pack_w;
    int64_t m, n, k;
    const float *x;
    int64_t ldx;
    const char *w;      /* bytes */
    int64_t ldw;
    size_t welem;       /* bytes per stored weight element */
    float *y;
    int64_t ldy;
    const fx_epilogue *epi;
    const char *wpack;  /* the whole weight packed (fx_packcache), or NULL */
    size_t wpanel;      /* bytes per packed panel of NR outputs */
    int64_t kcb;        /* K block: <= p->kc, balanced over k */
    int64_t ncb;        /* column chunk: p->nc, less when staging */
    int staged;         /* partial sums in a staging buffer */
    int split_cols;     /* threads own column ranges (else row ranges) */
    size_t a_bytes, b_bytes, s_bytes; /* per-thread scratch parts */
    char *base;
} gemm_plan;

/* Software prefetch of the W rows the next micro-panel will read, spread
 * over the microkernel calls of the current one (see fx_gemm_prefetch). */
static void w_prefetch_init(fx_gemm_prefetch *pf, const gemm_plan *pl, int64_t j, int cols, int64_t pc,
                            int64_t kcur, int calls) {
    pf->row = NULL;
    if (cols <= 0) return;
    const char *start = pl->w + ((size_t)j * (size_t)pl->ldw + (size_t)pc) * pl->welem;
    uintptr_t mis = (uintptr_t)start & 63;
    pf->row = start - mis;
    pf->row_bytes = pl->ldw * (int64_t)pl->welem;
    pf->rows_left = cols - 1;
    pf->lines = (int)((mis + (size_t)kcur * pl->welem + 63) / 64);
    pf->line = 0;
    pf->per_call = (int)ceil_div((int64_t)cols * pf->lines, calls > 0 ? calls : 1);
}

/* Thread tid's block of the output: rows [r0, r1), columns [c0, c1). */
static void gemm_thread(const gemm_plan *pl, int tid, int nt) {
    const fx_gemm_path *p = pl->p;
    const int mr = p->mr, nr = p->nr;
    int64_t r0 = 0, r1 = pl->m, c0 = 0, c1 = pl->n;
    if (pl->split_cols) {
        const int64_t panels = ceil_div(pl->n, nr);
        c0 = panels * tid / nt * nr, c1 = panels * (tid + 1) / nt * nr;
        if (c1 > pl->n) c1 = pl->n;
    } else {
        const int64_t tiles = ceil_div(pl->m, mr);
        r0 = tiles * tid / nt * mr, r1 = tiles * (tid + 1) / nt * mr;
        if (r1 > pl->m) r1 = pl->m;
    }
    if (r0 >= r1 || c0 >= c1) return;
    if (p->thread_begin) p->thread_begin();

    char *abuf = pl->base + (size_t)tid * (pl->a_bytes + pl->b_bytes + pl->s_bytes);
    char *bbuf = abuf + pl->a_bytes;
    float *stage = (float *)(void *)(bbuf + pl->b_bytes);
    const fx_epilogue *e = pl->epi;
    /* row super-blocks of balanced size, whole micro-rows */
    const int64_t nmb = ceil_div(r1 - r0, p->mc);
    const int64_t mcb = round_up(ceil_div(r1 - r0, nmb), mr);

    const int64_t ncb = pl->ncb;
    for (int64_t mb = r0; mb < r1; mb += mcb) {
        const int64_t rows = r1 - mb < mcb ? r1 - mb : mcb;
        const int tiles = (int)ceil_div(rows, mr);
        for (int64_t jc = c0; jc < c1; jc += ncb) {
            const int64_t cols = c1 - jc < ncb ? c1 - jc : ncb;
            for (int64_t pc = 0; pc < pl->k; pc += pl->kcb) {
                const int64_t kcur = pl->k - pc < pl->kcb ? pl->k - pc : pl->kcb;
                const int64_t ksteps = ceil_div(kcur, p->kpair);
                const size_t apanel = (size_t)ksteps * mr * p->kpair * p->elem;
                const int first = pc == 0, last = pc + kcur == pl->k;
                p->pack_x(p, rows, kcur, pl->x + mb * pl->ldx + pc, pl->ldx, abuf);
                for (int64_t j = jc; j < jc + cols; j += nr) {
                    const int ncols = (int)(jc + cols - j < nr ? jc + cols - j : nr);
                    const char *bpanel = bbuf;
                    if (pl->wpack) /* K block pc of the packed panel, read in place */
                        bpanel = pl->wpack + (size_t)(j / nr) * pl->wpanel +
                                 (size_t)(pc / p->kpair) * (size_t)(nr * p->kpair * p->elem);
                    else
                        pl->pack_w(p, ncols, kcur, pl->w + ((size_t)j * (size_t)pl->ldw + (size_t)pc) * pl->welem,
                                   pl->ldw, bbuf);
                    /* the next micro-panel: next columns, else the next K block
                     * (packed weights are contiguous: the hardware prefetches) */
                    fx_gemm_prefetch pf = {0};
                    if (pl->wpack)
                        pf.row = NULL;
                    else if (j + nr < jc + cols)
                        w_prefetch_init(&pf, pl, j + nr, (int)(jc + cols - j - nr < nr ? jc + cols - j - nr : nr),
                                        pc, kcur, tiles);
                    else if (pc + kcur < pl->k)
                        w_prefetch_init(&pf, pl, jc, (int)(cols < nr ? cols : nr), pc + kcur,
                                        pl->k - pc - kcur < pl->kcb ? pl->k - pc - kcur : pl->kcb, tiles);
                    else
                        pf.row = NULL;
                    for (int64_t ir = 0; ir < rows; ir += mr) {
                        const int64_t i = mb + ir;
                        fx_gemm_tile t;
                        t.m = (int)(rows - ir < mr ? rows - ir : mr);
                        t.n = ncols;
                        t.first = first;
                        t.last = last;
                        t.mode = e->mode;
                        t.bias = e->bias ? e->bias + j : NULL;
                        t.gate = e->gate ? e->gate + j : NULL;
                        t.pf = &pf;
                        float *yt = pl->y + i * pl->ldy + j;
                        if (!pl->staged) {
                            t.c = yt, t.ldc = pl->ldy;
                            t.partial = yt, t.ldp = pl->ldy;
                        } else {
                            float *st = stage + ir * ncb + (j - jc);
                            t.partial = st, t.ldp = ncb;
                            if (last) t.c = yt, t.ldc = pl->ldy;
                            else t.c = st, t.ldc = ncb;
                        }
                        p->kernel(ksteps, abuf + (size_t)(ir / mr) * apanel, bpanel, &t);
                        if (!p->kernel_prefetches)
                            for (int q = 0; q < pf.per_call; q++) fx_gemm_prefetch_one(&pf);
                    }
                }
            }
        }
    }
    if (p->thread_end) p->thread_end();
}

/* Lay out the shared scratch and run; returns -1 if scratch is unavailable. */
static int linear_blocked(const fx_kctx *kc, const fx_gemm_path *p, const void *wpack, int threads, int64_t m,
                          const float *x, int64_t ldx, const fx_weight *w, float *y, int64_t ldy,
                          const fx_epilogue *epi) {
    gemm_plan pl = {0};
    pl.p = p;
    pl.wpack = wpack;
    pl.wpanel = wpack ? fx_gemm_packed_panel_bytes(p, w->k) : 0;
    pl.pack_w = p->pack_w[w->dtype];
    pl.m = m, pl.n = w->n, pl.k = w->k;
    pl.x = x, pl.ldx = ldx;
    pl.w = w->data, pl.ldw = w->ld, pl.welem = weight_elem_size(w->dtype);
    pl.y = y, pl.ldy = ldy;
    pl.epi = epi;
    /* K blocks of equal size (multiples of 32): fewer partial-sum passes */
    const int64_t nkb = ceil_div(pl.k, p->kc);
    pl.kcb = round_up(ceil_div(pl.k, nkb), 32);
    pl.staged = epi->mode != FX_EPI_STORE && pl.k > pl.kcb;
    pl.split_cols = ceil_div(pl.n, p->nr) >= 2 * threads;
    const int64_t kcp = round_up(pl.kcb, p->kpair);
    /* + FX_GEMM_PACK_SLACK: packers may store past the last micro-panel */
    pl.a_bytes = (size_t)round_up(round_up(p->mc, p->mr) * kcp * p->elem + FX_GEMM_PACK_SLACK, 64);
    pl.b_bytes = (size_t)round_up((int64_t)p->nr * kcp * p->elem + FX_GEMM_PACK_SLACK, 64);
    pl.ncb = p->nc;
    if (pl.staged) { /* staging [mc][ncb] f32 per thread, at most STAGE_BYTES */
        int64_t fit = STAGE_BYTES / ((int64_t)round_up(p->mc, p->mr) * 4) / p->nr * p->nr;
        if (fit < pl.ncb) pl.ncb = fit > p->nr ? fit : p->nr;
    }
    pl.s_bytes = pl.staged ? (size_t)round_up(round_up(p->mc, p->mr) * pl.ncb * 4, 64) : 0;
    size_t total = (size_t)threads * (pl.a_bytes + pl.b_bytes + pl.s_bytes);
    if (!kc->scratch || fx_scratch_reserve(kc->scratch, 0, total)) return -1;
    pl.base = fx_scratch_shared(kc->scratch);
#pragma omp parallel num_threads(threads) if (threads > 1)
    gemm_thread(&pl, fx_thread_id(), fx_thread_count());
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Entry point                                                              */
/* ------------------------------------------------------------------------ */

void fx_linear(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_weight *w,
               float *y, int64_t ldy, const fx_epilogue *epi) {
    static const fx_epilogue store = {FX_EPI_STORE, NULL, NULL};
    if (!epi) epi = &store;
    const int64_t n = w->n, k = w->k;
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        linear_k0(m, n, y, ldy, epi);
        return;
    }
    const fx_gemm_kernels *g = kc->k && kc->k->gemm ? kc->k->gemm : &fx_gemm_scalar;
    int threads = kc->threads > 0 ? kc->threads : 1;
    if (2.0 * (double)m * (double)n * (double)k < FX_GEMM_SERIAL_FLOPS) threads = 1;

    if (m <= FX_GEMV_MAX_M) {
        const uint16_t *xb = NULL;
        if (w->dtype == FX_DTYPE_BF16 && g->gemv_bf16_dot) {
            /* X rounded to bf16 once: [m][round_up(k, 32)] zero-padded */
            int64_t kp = round_up(k, 32);
            if (kc->scratch && !fx_scratch_reserve(kc->scratch, 0, (size_t)(m * kp) * 2)) {
                uint16_t *xbw = fx_scratch_shared(kc->scratch);
                for (int64_t i = 0; i < m; i++)
                    for (int64_t q = 0; q < kp; q++)
                        xbw[i * kp + q] = q < k ? fx_f32_to_bf16_bits(x[i * ldx + q]) : 0;
                xb = xbw;
            }
        }
        if (xb || !(w->dtype == FX_DTYPE_BF16 && g->gemv_bf16_dot))
            linear_gemv(g->gemv[w->dtype], threads, m, x, ldx, xb, w, y, ldy, epi);
        else /* no scratch: the portable GEMV needs none */
            linear_gemv(fx_gemv_c, threads, m, x, ldx, NULL, w, y, ldy, epi);
        return;
    }
    const fx_gemm_path *p = g->path[w->dtype];
    const void *wpack = p->prepack ? fx_packcache_get(kc->packs, p, w, kc->threads > 0 ? kc->threads : 1) : NULL;
    if (linear_blocked(kc, p, wpack, threads, m, x, ldx, w, y, ldy, epi))
        /* No scratch memory: the portable GEMV, FX_GEMV_MAX_M rows at a time. */
        for (int64_t i = 0; i < m; i += FX_GEMV_MAX_M)
            linear_gemv(fx_gemv_c, threads, m - i < FX_GEMV_MAX_M ? m - i : FX_GEMV_MAX_M,
                        x + i * ldx, ldx, NULL, w, y + i * ldy, ldy, epi);
}
