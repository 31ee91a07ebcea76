/*
 * gemm.c — fx_linear: the BLIS-style driver shared by every ISA.
 *
 *   Y[m, n] (op)= X[m, k] · W[n, k]ᵀ (+ bias)
 *
 * The loops, packing and threading are described in gemm.h; this file only
 * picks the path for the weight dtype, lays out the scratch, and walks the
 * blocks. The per-ISA files provide packing routines and microkernels.
 *
 * Threads: a tm × tn grid over the tiles of each block (tm row groups of
 * whole MR micro-rows, tn groups of whole NR micro-panels). The B panel is
 * packed cooperatively into one of two shared buffers (double buffering:
 * one barrier per K block); every thread packs its own A block.
 */
#include "gemm.h"

#include <stdlib.h>

/* Staging buffer for partial sums in the accumulating modes: at most this
 * many bytes, which bounds the row super-block MM. */
enum { STAGE_BYTES = 8 << 20 };
/* Below this many flops one thread does the whole product. */
#define SERIAL_FLOPS 2e6

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
    int64_t mm;         /* row super-block */
    int staged;         /* partial sums in the staging buffer */
    size_t a_bytes, b_bytes;
    char *bbuf[2];      /* shared B panels */
    char *abuf;         /* per-thread A blocks, a_bytes apart */
    float *stage;       /* [mm][nc] partial sums */
} gemm_plan;

/* One thread's part of one K block: rows [r0, r1) and micro-panels
 * [jp0, jp1) of the current NC block. */
static void gemm_block(const gemm_plan *pl, int tid, const char *bpanel, int64_t jc, int64_t nc,
                       int64_t mm0, int64_t pc, int64_t kcur, int64_t r0, int64_t r1, int64_t jp0,
                       int64_t jp1) {
    const fx_gemm_path *p = pl->p;
    const int mr = p->mr, nr = p->nr;
    const int64_t ksteps = ceil_div(kcur, p->kpair);
    const size_t apanel = (size_t)ksteps * mr * p->kpair * p->elem;
    const size_t bpanel_sz = (size_t)ksteps * nr * p->kpair * p->elem;
    char *abuf = pl->abuf + (size_t)tid * pl->a_bytes;
    const int first = pc == 0, last = pc + kcur == pl->k;
    const fx_epilogue *e = pl->epi;
    const int64_t ldst = p->nc;

    for (int64_t ic = r0; ic < r1; ic += p->mc) {
        int64_t mc = r1 - ic < p->mc ? r1 - ic : p->mc;
        p->pack_x(p, mc, kcur, pl->x + ic * pl->ldx + pc, pl->ldx, abuf);
        for (int64_t jp = jp0; jp < jp1; jp++) {
            const int64_t j = jc + jp * nr; /* first output column of the tile */
            const int ncols = (int)(jc + nc - j < nr ? jc + nc - j : nr);
            const char *b = bpanel + (size_t)jp * bpanel_sz;
            for (int64_t ir = 0; ir < mc; ir += mr) {
                const int64_t i = ic + ir;
                fx_gemm_tile t;
                t.m = (int)(mc - ir < mr ? mc - ir : mr);
                t.n = ncols;
                t.first = first;
                t.last = last;
                t.mode = e->mode;
                t.bias = e->bias ? e->bias + j : NULL;
                t.gate = e->gate ? e->gate + j : NULL;
                float *yt = pl->y + i * pl->ldy + j;
                if (!pl->staged) {
                    t.c = yt, t.ldc = pl->ldy;
                    t.partial = yt, t.ldp = pl->ldy;
                } else {
                    float *st = pl->stage + (i - mm0) * ldst + (j - jc);
                    t.partial = st, t.ldp = ldst;
                    if (last) t.c = yt, t.ldc = pl->ldy;
                    else t.c = st, t.ldc = ldst;
                }
                p->kernel(ksteps, abuf + (size_t)(ir / mr) * apanel, b, &t);
            }
        }
    }
}

static void gemm_run(const gemm_plan *pl, int threads) {
    const fx_gemm_path *p = pl->p;
    const int mr = p->mr, nr = p->nr;
    /* Split rows when there are enough micro-rows, otherwise columns. */
    const int split_rows = ceil_div(pl->m, mr) >= 2 * threads;

#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        const int tid = fx_thread_id(), nt = fx_thread_count();
        const int tm = split_rows ? nt : 1, tn = split_rows ? 1 : nt;
        const int trow = split_rows ? tid : 0, tcol = split_rows ? 0 : tid;
        int iter = 0;
        for (int64_t jc = 0; jc < pl->n; jc += p->nc) {
            const int64_t nc = pl->n - jc < p->nc ? pl->n - jc : p->nc;
            const int64_t panels = ceil_div(nc, nr);
            const int64_t jp0 = panels * tcol / tn, jp1 = panels * (tcol + 1) / tn;
            for (int64_t mm0 = 0; mm0 < pl->m; mm0 += pl->mm) {
                const int64_t mmn = pl->m - mm0 < pl->mm ? pl->m - mm0 : pl->mm;
                const int64_t mt = ceil_div(mmn, mr);
                int64_t r0 = mm0 + mt * trow / tm * mr, r1 = mm0 + mt * (trow + 1) / tm * mr;
                if (r1 > mm0 + mmn) r1 = mm0 + mmn;
                for (int64_t pc = 0; pc < pl->k; pc += p->kc, iter++) {
                    const int64_t kcur = pl->k - pc < p->kc ? pl->k - pc : p->kc;
                    const size_t bpanel_sz =
                        (size_t)ceil_div(kcur, p->kpair) * nr * p->kpair * p->elem;
                    char *bp = pl->bbuf[iter & 1];
                    /* cooperative packing of the B panel, by micro-panels */
                    const int64_t q0 = panels * tid / nt, q1 = panels * (tid + 1) / nt;
                    if (q0 < q1) {
                        int64_t cols = (q1 * nr < nc ? q1 * nr : nc) - q0 * nr;
                        pl->pack_w(p, cols, kcur,
                                   pl->w + ((size_t)(jc + q0 * nr) * pl->ldw + pc) * pl->welem,
                                   pl->ldw, bp + (size_t)q0 * bpanel_sz);
                    }
#pragma omp barrier
                    if (r0 < r1 && jp0 < jp1)
                        gemm_block(pl, tid, bp, jc, nc, mm0, pc, kcur, r0, r1, jp0, jp1);
                }
            }
        }
    }
}

/* Lay out the shared scratch and run; returns -1 if scratch is unavailable. */
static int linear_blocked(const fx_kctx *kc, const fx_gemm_path *p, int threads, int64_t m,
                          const float *x, int64_t ldx, const fx_weight *w, float *y, int64_t ldy,
                          const fx_epilogue *epi) {
    gemm_plan pl = {0};
    pl.p = p;
    pl.pack_w = p->pack_w[w->dtype];
    pl.m = m, pl.n = w->n, pl.k = w->k;
    pl.x = x, pl.ldx = ldx;
    pl.w = w->data, pl.ldw = w->ld, pl.welem = weight_elem_size(w->dtype);
    pl.y = y, pl.ldy = ldy;
    pl.epi = epi;
    pl.staged = epi->mode != FX_EPI_STORE && pl.k > p->kc;
    pl.mm = m;
    if (pl.staged) {
        int64_t rows = STAGE_BYTES / ((int64_t)p->nc * 4) / p->mc * p->mc;
        pl.mm = rows < p->mc ? p->mc : rows;
        if (pl.mm > m) pl.mm = m;
    }
    const int64_t kcp = round_up(p->kc, p->kpair);
    /* + 64: the packers may store a full vector past a micro-panel's end */
    pl.a_bytes = (size_t)round_up(round_up(p->mc, p->mr) * kcp * p->elem + 64, 64);
    pl.b_bytes = (size_t)round_up(round_up(p->nc, p->nr) * kcp * p->elem, 64);
    size_t stage_bytes = pl.staged ? (size_t)round_up(pl.mm * p->nc * 4, 64) : 0;
    size_t total = 2 * pl.b_bytes + (size_t)threads * pl.a_bytes + stage_bytes;
    if (!kc->scratch || fx_scratch_reserve(kc->scratch, 0, total)) return -1;
    char *base = fx_scratch_shared(kc->scratch);
    pl.bbuf[0] = base;
    pl.bbuf[1] = base + pl.b_bytes;
    pl.abuf = base + 2 * pl.b_bytes;
    pl.stage = (float *)(void *)(pl.abuf + (size_t)threads * pl.a_bytes);
    gemm_run(&pl, threads);
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
    if (2.0 * (double)m * (double)n * (double)k < SERIAL_FLOPS) threads = 1;

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
    if (linear_blocked(kc, g->path[w->dtype], threads, m, x, ldx, w, y, ldy, epi))
        /* No scratch memory: the portable GEMV, FX_GEMV_MAX_M rows at a time. */
        for (int64_t i = 0; i < m; i += FX_GEMV_MAX_M)
            linear_gemv(fx_gemv_c, threads, m - i < FX_GEMV_MAX_M ? m - i : FX_GEMV_MAX_M,
                        x + i * ldx, ldx, NULL, w, y + i * ldy, ldy, epi);
}
