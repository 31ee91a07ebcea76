/*
 * gemm.c — fx_gemm_linear, the product of fx_linear: the BLIS-style driver
 * shared by every ISA (fx_linear itself, in linear.c, adds the layer's terms).
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

#include "simd/quant/quant.h"
#include "simd/rowops/rowops.h"

/* Per-thread staging buffer for partial sums (accumulating modes with
 * several K blocks): at most this many bytes, which bounds the column
 * chunk. */
enum { STAGE_BYTES = 4 << 20 };

static int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }
static int64_t ceil_div(int64_t v, int64_t a) { return (v + a - 1) / a; }

/* ------------------------------------------------------------------------ */
/* Block-typed weights: expansion into the element type of a path          */
/* ------------------------------------------------------------------------ */

/* How a block-typed weight enters the f32 / bf16 machinery (gemm.h): the
 * path's ordinary F32 / BF16 packing, a GEMV or a tile driver then reads
 * the expanded rows (a bf16 target in one pass when the table has a direct
 * bf16 dequantizer: the same values as dequantize, then round). */
fx_gemm_expander fx_gemm_expander_for(const fx_kctx *kc, const fx_weight *w, fx_dtype target) {
    const fx_dtype t = w->dtype;
    fx_gemm_expander e = {fx_quant_dequant_fn(kc->k, t), NULL, NULL, fx_dtype_block(t), fx_dtype_block_bytes(t),
                          fx_dtype_is_scaled(t) ? w->scale : 0.0f, NULL, NULL, 0};
    if (w->scales) e.w = w, e.base = w->data, e.rb = fx_dtype_row_bytes(t, w->ld);
    if (target == FX_DTYPE_BF16)
        e.to_bf16 = fx_row_table(kc)->f32_to_bf16, e.dequant_bf16 = fx_quant_dequant_bf16_fn(kc->k, t);
    return e;
}

void fx_gemm_expand_rows(const fx_gemm_expander *e, int rows, int64_t cols, const char *src, int64_t src_rb,
                         void *dst, int64_t ldd, float *tmp) {
    for (int r = 0; r < rows; r++) {
        const uint8_t *p = (const uint8_t *)src + r * src_rb;
        float *f = e->to_bf16 ? tmp : (float *)dst + r * ldd;
        if (e->to_bf16 && e->dequant_bf16 && !fx_weight_scaled(e->scale) && !e->w) {
            e->dequant_bf16(p, cols / e->block, (uint16_t *)dst + r * ldd);
            continue;
        }
        e->dequant(p, cols / e->block, f);
        if (e->w) { /* side scales: the row and column of p in the weight */
            const int64_t off = (const char *)p - e->base;
            fx_weight_values(e->w, off / e->rb, off % e->rb / (int64_t)e->block_bytes * e->block, cols, f);
        } else {
            fx_weight_scale_row(e->scale, cols, f);
        }
        if (e->to_bf16) e->to_bf16(cols, tmp, (uint16_t *)dst + r * ldd);
    }
}

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

/* Rows of W expanded per GEMV call: every output is its own chain in each
 * kernel, so expanding in groups changes nothing in the results. */
enum { GEMV_ROWS = 4 };

/* GEMV of a block-typed weight: each thread expands GEMV_ROWS rows of W at a
 * time (target type of `gemv`) into its slice of buf and runs `gemv` on
 * them, its outputs shifted to those rows. */
static void linear_gemv_blocks(const fx_gemm_expander *e, fx_gemv_fn gemv, fx_dtype target, int threads, int64_t m,
                               const float *x, int64_t ldx, const uint16_t *xb, const fx_weight *w, float *y,
                               int64_t ldy, const fx_epilogue *epi, char *buf, size_t per_thread) {
    const int64_t n = w->n, k = w->k, rb = fx_dtype_row_bytes(w->dtype, w->ld);
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        int tid = fx_thread_id(), nt = fx_thread_count();
        int64_t units = ceil_div(n, 16);
        int64_t n0 = units * tid / nt * 16, n1 = units * (tid + 1) / nt * 16;
        if (n1 > n) n1 = n;
        char *rows_buf = buf + (size_t)tid * per_thread;
        float *tmp = (float *)(void *)(rows_buf + (size_t)GEMV_ROWS * (size_t)k * 4);
        for (int64_t j = n0; j < n1; j += GEMV_ROWS) {
            const int rows = (int)(n1 - j < GEMV_ROWS ? n1 - j : GEMV_ROWS);
            fx_gemm_expand_rows(e, rows, k, (const char *)w->data + j * rb, rb, rows_buf, k, tmp);
            const fx_weight tw = {.data = rows_buf, .dtype = target, .n = rows, .k = k, .ld = k};
            fx_epilogue te = *epi;
            if (te.bias) te.bias += j;
            if (te.gate) te.gate += j;
            gemv(m, 0, rows, k, x, ldx, xb, &tw, y + j, ldy, &te);
        }
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
    int64_t ldw;        /* elements */
    fx_dtype wdtype;    /* stored dtype (may be a block type) */
    int64_t w_rb;       /* bytes between weight rows */
    const fx_gemm_expander *ex; /* block-typed weights: expansion before packing */
    size_t e_bytes;     /* per-thread expansion buffer (rows × K block + f32 row) */
    float *y;
    int64_t ldy;
    const fx_epilogue *epi;
    int64_t kcb;        /* K block: <= p->kc, balanced over k */
    int64_t ncb;        /* column chunk: p->nc, less when staging */
    int staged;         /* partial sums in a staging buffer */
    int split_cols;     /* threads own column ranges (else row ranges) */
    size_t a_bytes, b_bytes, s_bytes; /* per-thread scratch parts (+ e_bytes) */
    char *base;
} gemm_plan;

/* Software prefetch of the W rows the next micro-panel will read, spread
 * over the microkernel calls of the current one (see fx_gemm_prefetch). */
/* Address of weight row j, column pc (pc at a block boundary). */
static const char *w_at(const gemm_plan *pl, int64_t j, int64_t pc) {
    return pl->w + j * pl->w_rb + fx_dtype_row_bytes(pl->wdtype, pc);
}

static void w_prefetch_init(fx_gemm_prefetch *pf, const gemm_plan *pl, int64_t j, int cols, int64_t pc,
                            int64_t kcur, int calls) {
    pf->row = NULL;
    if (cols <= 0) return;
    const char *start = w_at(pl, j, pc);
    uintptr_t mis = (uintptr_t)start & 63;
    pf->row = start - mis;
    pf->row_bytes = pl->w_rb;
    pf->rows_left = cols - 1;
    pf->lines = (int)((mis + (size_t)fx_dtype_row_bytes(pl->wdtype, kcur) + 63) / 64);
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

    char *abuf = pl->base + (size_t)tid * (pl->a_bytes + pl->b_bytes + pl->s_bytes + pl->e_bytes);
    char *bbuf = abuf + pl->a_bytes;
    float *stage = (float *)(void *)(bbuf + pl->b_bytes);
    char *ebuf = bbuf + pl->b_bytes + pl->s_bytes;
    float *etmp = (float *)(void *)(ebuf + (size_t)p->nr * (size_t)pl->kcb * (pl->ex && pl->ex->to_bf16 ? 2 : 4));
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
                    if (pl->ex) { /* blocks → the path's element type, then its packing */
                        fx_gemm_expand_rows(pl->ex, ncols, kcur, w_at(pl, j, pc), pl->w_rb, ebuf, kcur, etmp);
                        pl->pack_w(p, ncols, kcur, ebuf, kcur, bbuf);
                    } else {
                        pl->pack_w(p, ncols, kcur, w_at(pl, j, pc), pl->ldw, bbuf);
                    }
                    /* the next micro-panel: next columns, else the next K block */
                    fx_gemm_prefetch pf = {0};
                    if (j + nr < jc + cols)
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
static int linear_blocked(const fx_kctx *kc, const fx_gemm_path *p, int threads, int64_t m,
                          const float *x, int64_t ldx, const fx_weight *w, float *y, int64_t ldy,
                          const fx_epilogue *epi) {
    gemm_plan pl = {0};
    fx_gemm_expander ex;
    pl.p = p;
    pl.m = m, pl.n = w->n, pl.k = w->k;
    pl.x = x, pl.ldx = ldx;
    pl.w = w->data, pl.ldw = w->ld, pl.wdtype = w->dtype;
    pl.w_rb = fx_dtype_row_bytes(w->dtype, w->ld);
    if (fx_dtype_is_expanded(w->dtype)) { /* expanded to what the path packs */
        const fx_dtype target = p->elem == 2 ? FX_DTYPE_BF16 : FX_DTYPE_F32; /* = fx_gemm_expand_target */
        ex = fx_gemm_expander_for(kc, w, target);
        pl.ex = &ex;
        pl.pack_w = p->pack_w[target];
    } else {
        pl.pack_w = p->pack_w[w->dtype];
    }
    pl.y = y, pl.ldy = ldy;
    pl.epi = epi;
    /* K blocks of equal size (multiples of 32, or of the weight's block):
     * fewer partial-sum passes. The blocking never changes the results:
     * every element is one chain over k. */
    const int64_t nkb = ceil_div(pl.k, p->kc);
    pl.kcb = round_up(ceil_div(pl.k, nkb), pl.ex ? (pl.ex->block > 32 ? pl.ex->block : 32) : 32);
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
    if (pl.ex) /* nr expanded rows of one K block, and one f32 row for a bf16 target */
        pl.e_bytes = (size_t)round_up((int64_t)p->nr * pl.kcb * (pl.ex->to_bf16 ? 2 : 4) +
                                          (pl.ex->to_bf16 ? pl.kcb * 4 : 0) + FX_GEMM_PACK_SLACK, 64);
    size_t total = (size_t)threads * (pl.a_bytes + pl.b_bytes + pl.s_bytes + pl.e_bytes);
    if (!kc->scratch || fx_scratch_reserve(kc->scratch, 0, total)) return -1;
    pl.base = fx_scratch_shared(kc->scratch);
#pragma omp parallel num_threads(threads) if (threads > 1)
    gemm_thread(&pl, fx_thread_id(), fx_thread_count());
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Entry point                                                              */
/* ------------------------------------------------------------------------ */

fx_dtype fx_gemm_expand_target(const fx_gemm_kernels *g) {
    return g->path[FX_DTYPE_BF16]->elem == 2 ? FX_DTYPE_BF16 : FX_DTYPE_F32; /* bf16 pairs or AMX tiles */
}

void fx_gemm_linear(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_weight *w, float *y,
                    int64_t ldy, const fx_epilogue *epi) {
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

    /* block types and fp8: expanded (fp8 never runs W8A8: its values are
     * not int8-representable per channel, and it is as fast as bf16) */
    const int blocks = fx_dtype_is_expanded(w->dtype);
    if (m <= FX_GEMV_MAX_M) {
        const uint16_t *xb = NULL;
        const int want_xb = (w->dtype == FX_DTYPE_BF16 || blocks) && g->gemv_bf16_dot;
        /* shared scratch: X in bf16 [m][round_up(k, 32)], then for block
         * types per-thread room for GEMV_ROWS expanded rows + one f32 row */
        const size_t xb_bytes = want_xb ? (size_t)round_up(m * round_up(k, 32) * 2, 64) : 0;
        const size_t per_thread = blocks ? (size_t)round_up((GEMV_ROWS + 1) * k * 4, 64) : 0;
        const int have = kc->scratch && (xb_bytes || per_thread) &&
                         !fx_scratch_reserve(kc->scratch, 0, xb_bytes + (size_t)threads * per_thread);
        if (want_xb && have) { /* X rounded to bf16 once, zero-padded */
            int64_t kp = round_up(k, 32);
            uint16_t *xbw = fx_scratch_shared(kc->scratch);
            for (int64_t i = 0; i < m; i++)
                for (int64_t q = 0; q < kp; q++) xbw[i * kp + q] = q < k ? fx_f32_to_bf16_bits(x[i * ldx + q]) : 0;
            xb = xbw;
        }
        if (blocks) { /* expanded GEMV_ROWS rows at a time */
            const fx_dtype target = fx_gemm_expand_target(g);
            const fx_gemm_expander e = fx_gemm_expander_for(kc, w, target);
            if (have)
                linear_gemv_blocks(&e, g->gemv[target], target, threads, m, x, ldx, xb, w, y, ldy, epi,
                                   (char *)fx_scratch_shared(kc->scratch) + xb_bytes, per_thread);
            else /* no scratch: the portable GEMV reads blocks itself */
                linear_gemv(fx_gemv_c, threads, m, x, ldx, NULL, w, y, ldy, epi);
            return;
        }
        if (xb || !(w->dtype == FX_DTYPE_BF16 && g->gemv_bf16_dot))
            linear_gemv(g->gemv[w->dtype], threads, m, x, ldx, xb, w, y, ldy, epi);
        else /* no scratch: the portable GEMV needs none */
            linear_gemv(fx_gemv_c, threads, m, x, ldx, NULL, w, y, ldy, epi);
        return;
    }
    /* block types and fp8 take the path of bf16 weights (expanded to its
     * element type inside the packing step), or the table's tile driver,
     * as bf16 weights do */
    int failed;
    if (g->tiles && (blocks || w->dtype == FX_DTYPE_BF16))
        failed = g->tiles->linear(g->tiles, kc, threads, m, x, ldx, w, y, ldy, epi);
    else
        failed = linear_blocked(kc, g->path[blocks ? FX_DTYPE_BF16 : w->dtype], threads, m, x, ldx, w, y, ldy, epi);
    if (failed)
        /* No scratch memory: the portable GEMV, FX_GEMV_MAX_M rows at a time. */
        for (int64_t i = 0; i < m; i += FX_GEMV_MAX_M)
            linear_gemv(fx_gemv_c, threads, m - i < FX_GEMV_MAX_M ? m - i : FX_GEMV_MAX_M,
                        x + i * ldx, ldx, NULL, w, y + i * ldy, ldy, epi);
}
