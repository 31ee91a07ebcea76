/*
 * gemm.c — fx_gemm_linear, the product of fx_linear: the BLIS-style driver
 * shared by every ISA (fx_linear itself, in linear.c, adds the layer's terms).
 *
 *   Y[m, n] (op)= X[m, k] · W[n, k]ᵀ (+ bias)
 *
 * The loops, packing and threading are described in gemm.h; this file only
 * picks the path for the weight dtype, lays out the scratch, and provides
 * the float paths' hooks on the GEMM nest (gemm_nest.h), which walks the
 * blocks. The per-ISA files provide packing routines and microkernels.
 *
 * Threads: each owns a range of whole NR column panels (or of whole MR
 * rows when n is narrow) and packs its own A panel and B micro-panels, so
 * the parallel region has no barrier at all.
 */
#include "gemm.h"
#include "gemm_nest.h"

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
/* The blocked GEMM: the float paths' hooks on the nest (gemm_nest.h)       */
/* ------------------------------------------------------------------------ */

typedef struct gemm_plan {
    const fx_gemm_path *p;
    fx_gemm_pack_w_fn pack_w;
    int64_t k;
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
    size_t a_bytes, b_bytes, s_bytes; /* per-thread scratch parts (+ e_bytes) */
} gemm_plan;

/* A thread's buffers and the state its hooks share. */
typedef struct gemm_state {
    char *abuf, *bbuf, *ebuf;
    float *stage, *etmp;
    int64_t ksteps;        /* of the current K block */
    size_t apanel;         /* bytes per A micro-panel */
    fx_gemm_prefetch pf;   /* the next micro-panel's W rows */
} gemm_state;
FX_GEMM_STATE_FITS(gemm_state);

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
    fx_gemm_prefetch_rows(pf, w_at(pl, j, pc), pl->w_rb, cols, (size_t)fx_dtype_row_bytes(pl->wdtype, kcur));
    pf->per_call = (int)ceil_div((int64_t)cols * pf->lines, calls > 0 ? calls : 1);
}

static void float_begin(const void *ctx, fx_gemm_thread *t) {
    const gemm_plan *pl = ctx;
    gemm_state *s = (gemm_state *)(void *)t->state;
    if (pl->p->thread_begin) pl->p->thread_begin();
    s->abuf = t->scratch;
    s->bbuf = s->abuf + pl->a_bytes;
    s->stage = (float *)(void *)(s->bbuf + pl->b_bytes);
    s->ebuf = s->bbuf + pl->b_bytes + pl->s_bytes;
    s->etmp = (float *)(void *)(s->ebuf + (size_t)pl->p->nr * (size_t)pl->kcb * (pl->ex && pl->ex->to_bf16 ? 2 : 4));
}

static void float_end(const void *ctx, fx_gemm_thread *t) {
    const gemm_plan *pl = ctx;
    (void)t;
    if (pl->p->thread_end) pl->p->thread_end();
}

/* X rows of the M block, K block → the A panel. */
static void float_pass(const void *ctx, fx_gemm_thread *t, const fx_gemm_pass *q) {
    const gemm_plan *pl = ctx;
    const fx_gemm_path *p = pl->p;
    gemm_state *s = (gemm_state *)(void *)t->state;
    s->ksteps = ceil_div(q->kcur, p->kpair);
    s->apanel = (size_t)s->ksteps * p->mr * p->kpair * p->elem;
    p->pack_x(p, q->m1 - q->m0, q->kcur, pl->x + q->m0 * pl->ldx + q->pc, pl->ldx, s->abuf);
}

/* Weight rows [j, j + NR) of the K block → the B micro-panel; the next
 * micro-panel (next columns, else the next K block) prefetched meanwhile. */
static void float_panel(const void *ctx, fx_gemm_thread *t, const fx_gemm_pass *q, int64_t j) {
    const gemm_plan *pl = ctx;
    const fx_gemm_path *p = pl->p;
    gemm_state *s = (gemm_state *)(void *)t->state;
    const int nr = p->nr;
    const int64_t jc = q->n0, cols = q->n1 - q->n0, pc = q->pc, kcur = q->kcur;
    const int ncols = (int)(jc + cols - j < nr ? jc + cols - j : nr);
    const int tiles = (int)ceil_div(q->m1 - q->m0, p->mr);
    if (pl->ex) { /* blocks → the path's element type, then its packing */
        fx_gemm_expand_rows(pl->ex, ncols, kcur, w_at(pl, j, pc), pl->w_rb, s->ebuf, kcur, s->etmp);
        pl->pack_w(p, ncols, kcur, s->ebuf, kcur, s->bbuf);
    } else {
        pl->pack_w(p, ncols, kcur, w_at(pl, j, pc), pl->ldw, s->bbuf);
    }
    fx_gemm_prefetch *pf = &s->pf;
    *pf = (fx_gemm_prefetch){0};
    if (j + nr < jc + cols)
        w_prefetch_init(pf, pl, j + nr, (int)(jc + cols - j - nr < nr ? jc + cols - j - nr : nr), pc, kcur, tiles);
    else if (pc + kcur < pl->k)
        w_prefetch_init(pf, pl, jc, (int)(cols < nr ? cols : nr), pc + kcur,
                        pl->k - pc - kcur < pl->kcb ? pl->k - pc - kcur : pl->kcb, tiles);
    else
        pf->row = NULL;
}

/* The microkernel on the MR × NR tile at (i, j): partial sums in Y (store)
 * or in the staging buffer (accumulating modes), the epilogue on the last
 * K block. */
static void float_tile(const void *ctx, fx_gemm_thread *t, const fx_gemm_pass *q, int64_t i, int64_t j) {
    const gemm_plan *pl = ctx;
    const fx_gemm_path *p = pl->p;
    gemm_state *s = (gemm_state *)(void *)t->state;
    const fx_epilogue *e = pl->epi;
    const int64_t ir = i - q->m0, rows = q->m1 - q->m0;
    fx_gemm_tile tl;
    tl.m = (int)(rows - ir < p->mr ? rows - ir : p->mr);
    tl.n = (int)(q->n1 - j < p->nr ? q->n1 - j : p->nr);
    tl.first = q->first;
    tl.last = q->last;
    tl.mode = e->mode;
    tl.bias = e->bias ? e->bias + j : NULL;
    tl.gate = e->gate ? e->gate + j : NULL;
    tl.pf = &s->pf;
    float *yt = pl->y + i * pl->ldy + j;
    if (!pl->staged) {
        tl.c = yt, tl.ldc = pl->ldy;
        tl.partial = yt, tl.ldp = pl->ldy;
    } else {
        float *st = s->stage + ir * pl->ncb + (j - q->n0);
        tl.partial = st, tl.ldp = pl->ncb;
        if (q->last) tl.c = yt, tl.ldc = pl->ldy;
        else tl.c = st, tl.ldc = pl->ncb;
    }
    p->kernel(s->ksteps, s->abuf + (size_t)(ir / p->mr) * s->apanel, s->bbuf, &tl);
    if (!p->kernel_prefetches)
        for (int f = 0; f < s->pf.per_call; f++) fx_gemm_prefetch_one(&s->pf);
}

/* Plan the blocks and the scratch and run the nest; returns -1 if scratch
 * is unavailable. */
static int linear_blocked(const fx_kctx *kc, const fx_gemm_path *p, int threads, int64_t m,
                          const float *x, int64_t ldx, const fx_weight *w, float *y, int64_t ldy,
                          const fx_epilogue *epi) {
    gemm_plan pl = {0};
    fx_gemm_expander ex;
    pl.p = p;
    pl.k = w->k;
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
    /* M outer (the A panel of a row super-block is reused by every column
     * chunk's micro-panels), W micro-panels outer in the micro loops */
    fx_gemm_nest nest = {
        .m = m, .n = w->n, .k = pl.k,
        .mu = p->mr, .nu = p->nr,
        .mc = p->mc, .nc = pl.ncb / p->nr, .kc = pl.kcb,
        .ctx = &pl,
        .begin = float_begin, .end = float_end,
        .pass = float_pass, .panel = float_panel, .tile = float_tile,
        .thread_bytes = pl.a_bytes + pl.b_bytes + pl.s_bytes + pl.e_bytes,
    };
    if (fx_gemm_nest_reserve(kc, &nest, threads)) return -1;
    fx_gemm_nest_run(&nest, threads);
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
