/*
 * gemm_amx.c — the AMX-BF16 GEMM of the linear layers (the amx table's
 * tile driver, gemm.h fx_gemm_tiles) and the amx gemm table. bf16 weights
 * are read where they lie (the model's mapping): no packed second copy.
 *
 *   Yᵀ[n][m] = W[n][k] · X[m][k]ᵀ, as 2×2 tiles of TDPBF16PS:
 *   C'[32 n][32 m] f32 (tmm0..3) += A[32 weight rows][32 k] · B[16 pair rows][32 m]
 *     A  tmm4, 5   weight rows 0-15, 16-31 of a 32-row panel, 32 bf16 of k:
 *                  TILELOADD straight from W with the row stride (ld·2 bytes)
 *     B  tmm6, 7   X rows 0-15, 16-31 of a 32-row block as VNNI pairs: row r
 *                  holds, per X row m, the dword (X[m][2r], X[m][2r+1])
 *   per step of 32 k: A0, B0 → C00; B1 → C01; A1 → C10, C11 (loads
 *   interleaved with the TDPs), 32·32·32 MACs from 4 KiB of tile loads.
 *
 * Operands:
 *   B  X rounded to bf16 (RNE, vcvtne2ps2bf16) and packed once per call,
 *      in parallel, into [ceil(m/32)][ceil(k/32)][2][16 pair rows][16 m]
 *      (1 KiB tiles, stride 64 B), zeros past m and past k; all threads
 *      read it (shared scratch: ceil(m/32)·32 · ceil(k/32)·32 · 2 bytes).
 *   A  full 32-row panels, full 32-k steps: the weight rows in place. What
 *      must not be read past the tensor comes from small zero-padded
 *      per-thread copies (garbage · 0 can be NaN, so both sides hold real
 *      zeros there): the K tail (k % 32 != 0) of every panel as one 32×32
 *      tile, and the panel with fewer than 32 rows (n tail) per K block.
 *      GGUF block types: a chunk of panels is expanded once (the shared
 *      dequant → bf16 RNE expansion, the values gemm.c's loops use) into a
 *      per-thread buffer and read from there by every row block of X.
 *   C  the 16×16 f32 tiles are stored to a 4 KiB scratch, transposed in
 *      AVX-512 (16×16 dword transposes) and written with the epilogue of
 *      every path: bias, store / accumulate / gated accumulate
 *      (fx_gemm_write_row). Rows and columns past m and n are computed on
 *      zero padding and never written; a block with <= 16 valid rows of X
 *      or of W skips the second B or A tile.
 *
 * Loops (the GEMM nest, gemm_nest.h, N outer with balanced chunks; this
 * file's hooks: pack_once, chunk, pass, panel, tile. Threads own contiguous
 * ranges of 32-row weight panels, or of 32-row blocks of X when there are
 * fewer than 2 panels per thread):
 *   for jc  chunk of NC panels     (block types: expanded here, whole K)
 *    for mb  MC rows of X
 *     for pc  K block of KC
 *      for ib  32 rows of mb        B slice (32 rows × KC, 16 KiB) in L1
 *       for j  panel of jc          A slice (32 rows × KC) from L2
 *         C = pc first ? 0 : staged; KC/32 steps; pc last ? epilogue : stage
 * Between K blocks the C tiles are stored to a per-thread staging buffer
 * and loaded back as C: the f32 values and the order of additions stay
 * those of one pass over K, so no block size and no thread count changes
 * a bit. While a pass (jc, mb, pc) runs, the weight rows of the next pass
 * are software-prefetched (into L2), a few lines per k step.
 *
 * Default blocks (derived from Sapphire Rapids' caches, L1D 48 KiB 12-way,
 * L2 2 MiB per core; swept on the AMX Xeon 2026-12-07, 768×9216×3072, 2
 * threads: KC 128..1024 × NC 2..16 span 1354–2013 GF/s and these are
 * within 4 % of the best — README "Performance"):
 *   - At peak one TDP takes 16 cycles, so a step (4 TDPs) has 64 cycles for
 *     its 4 KiB of tile loads: with both operands from L2 that is the
 *     whole L2 bandwidth (64 B/cycle); one operand must come from L1.
 *   - The weight rows cannot be that operand: their stride is fixed by the
 *     file, and for k = 3072 or 9216 (stride ≡ 32 lines mod 64) the 32 rows
 *     of a panel fall into 16 lines per L1 set, more than its 12 ways. The
 *     packed X slice is contiguous: KC = 256 makes it 16 KiB, so it stays
 *     in L1 next to the 16 KiB A slice streamed per panel (32 KiB < 48).
 *   - NC = 8 panels: the A chunk of a K block (8 · 16 KiB = 128 KiB) stays
 *     in L2 for every row block of the pass, and the X slice in L1 is used
 *     by 8 panels (X is re-read from L3 once per 256 weight rows).
 *   - MC = 1024: the staged C of a pass (MC/32 · NC · 4 KiB = 1 MiB) fits
 *     L2 beside the A chunk; W is read from memory ceil(m/MC) times (once
 *     for m <= 1024; 4608 tokens: 5 times, ~2 GB/s at 2 TF/s).
 *   The C round trip per K block costs 8 tile loads/stores per 32 TDPs.
 *   A micro-experiment on the AMX machine (2 threads, one pass over the
 *   whole K, A from L2) reached 1.86 TF/s on 768×9216×3072 with 64-byte
 *   aligned rows and 1.44 TF/s with rows 8 bytes off a line (safetensors
 *   data is 8-byte aligned: a tile row then spans two lines); --w-misalign
 *   measures that here.
 *
 * Numerics: X rounded to bf16, products exact in f32, each output one
 * chain in the tile unit's order: per TDP two f32 partial sums over its 32
 * k (even and odd pair elements, RNE, denormals flushed) added to C, TDPs
 * in k order. For k <= 3072 these are bit for bit the sums of the former
 * kernel that read a packed copy of W (same products and order; A and B
 * swapped is commutative); for k > 3072 that kernel restarted C for every
 * 3072-long K block and added the partial sums in the epilogue, so the
 * last bits differ there. Not the avx512bf16 order (results differ in the
 * last bits from that table), independent of threads and blocks.
 *
 * Tile state: each thread loads the one palette before its first tile
 * instruction of a call and releases it after its last.
 */
#include "gemm_avx512_util.h"
#include "gemm_int8.h"
#include "gemm_nest.h"
#include "simd/common/amx.h"

#include <string.h>

enum {
    PANEL = 32,          /* weight rows per panel, X rows per block */
    TILE = 1024,         /* bytes per tile */
    BSTEP = 2 * TILE,    /* packed X of 32 rows × 32 k: two B tiles */
    CBLOCK = 4 * TILE,   /* one 32×32 f32 block of C' (4 tiles) */
    TAIL_TILE = 2 * TILE /* a panel's K tail: 32 rows × 32 bf16 */
};

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Everything the threads share for one call. */
typedef struct plan {
    int64_t m, n, k;
    int64_t ks;                    /* ceil(k/32) */
    const float *x;
    int64_t ldx;
    const char *w;                 /* weight rows, w_rb bytes apart */
    int64_t w_rb;
    const fx_gemm_expander *ex;    /* block types, else NULL (bf16 in place) */
    float *y;
    int64_t ldy;
    const fx_epilogue *epi;
    int64_t kc, mc, nc;            /* blocks (kc, mc multiples of 32) */
    int64_t panels;                /* ceil(n/32) */
    int64_t eld;                   /* elements between expanded rows */
    char *xb;                      /* packed X (shared) */
    size_t stage_bytes, tail_bytes, ntail_bytes; /* per thread */
} plan;

/* ------------------------------------------------------------------------ */
/* B: X rounded to bf16 and packed as VNNI pairs                            */
/* ------------------------------------------------------------------------ */

/* 32 consecutive X values (n valid, zeros past) → 32 bf16 in order. */
static inline __m512i x_bf16_32(const float *x, int64_t n) {
    const __m512 lo = _mm512_maskz_loadu_ps(fx_gemm_mask16(n), x);
    const __m512 hi = _mm512_maskz_loadu_ps(fx_gemm_mask16(n - 16), x + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* B tile u = (block·ks + step)·2 + half: X rows block·32 + half·16 + [0, 16)
 * × k [step·32, +32) → 16 pair rows × 16 rows of X. */
static void pack_x_tile(const plan *pl, int64_t u) {
    const int64_t half = u & 1, s = (u >> 1) % pl->ks, blk = (u >> 1) / pl->ks;
    const int64_t r0 = blk * PANEL + half * 16;
    const int valid = (int)(pl->m - r0 <= 0 ? 0 : min64(pl->m - r0, 16));
    __m512i r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) /* rows past m: zeros */
        r[i] = i < valid ? x_bf16_32(pl->x + (r0 + i) * pl->ldx + s * 32, pl->k - s * 32) : _mm512_setzero_si512();
    fx_gemm_transpose16x16(r); /* r[q] = pair row q over the 16 rows of X */
    uint32_t *o = (uint32_t *)(void *)(pl->xb + u * TILE);
#pragma GCC unroll 16
    for (int q = 0; q < 16; q++) _mm512_store_si512(o + q * 16, r[q]);
}

/* ------------------------------------------------------------------------ */
/* One 32 × 32 block of C' over one K block                                 */
/* ------------------------------------------------------------------------ */

typedef struct job {
    const char *a;      /* A of the first k step (weight rows as bf16) */
    int64_t as;         /* bytes between A rows */
    int64_t steps;      /* 32-k steps from a (step s at a + 64·s) */
    const char *a_tail; /* then one more step from here (stride 64), or NULL */
    const char *b;      /* packed X of the first k step (step s at b + s·BSTEP) */
    char *stage;        /* this block's C between K blocks (4 tiles, stride 64) */
    int first, last;    /* K block: C starts at 0 / goes to the epilogue */
    fx_gemm_prefetch *pf;
    int pf_per_step;
} job;

/* One step of 32 k; two_a / two_b: weight rows / X rows 16-31 are live. */
static inline __attribute__((always_inline)) void tiles_step(const int two_a, const int two_b, const char *a,
                                                             int64_t as, const char *b) {
    FX_TILE_LOAD(FX_TMM_A0, a, as);
    FX_TILE_LOAD(FX_TMM_B0, b, 64);
    FX_TDPBF16PS(FX_TMM_C00, FX_TMM_A0, FX_TMM_B0);
    if (two_b) {
        FX_TILE_LOAD(FX_TMM_B1, b + TILE, 64);
        FX_TDPBF16PS(FX_TMM_C01, FX_TMM_A0, FX_TMM_B1);
    }
    if (two_a) {
        FX_TILE_LOAD(FX_TMM_A1, a + 16 * as, as);
        FX_TDPBF16PS(FX_TMM_C10, FX_TMM_A1, FX_TMM_B0);
        if (two_b) FX_TDPBF16PS(FX_TMM_C11, FX_TMM_A1, FX_TMM_B1);
    }
}

/* The live C tiles from / to the staging tiles (C00, C01, C10, C11 at 0,
 * 1, 2, 3 KiB). */
static inline __attribute__((always_inline)) void tiles_load_c(const int two_a, const int two_b, const char *s) {
    FX_TILE_LOAD(FX_TMM_C00, s, 64);
    if (two_b) FX_TILE_LOAD(FX_TMM_C01, s + TILE, 64);
    if (two_a) FX_TILE_LOAD(FX_TMM_C10, s + 2 * TILE, 64);
    if (two_a && two_b) FX_TILE_LOAD(FX_TMM_C11, s + 3 * TILE, 64);
}
static inline __attribute__((always_inline)) void tiles_store_c(const int two_a, const int two_b, char *s) {
    FX_TILE_STORE(FX_TMM_C00, s, 64);
    if (two_b) FX_TILE_STORE(FX_TMM_C01, s + TILE, 64);
    if (two_a) FX_TILE_STORE(FX_TMM_C10, s + 2 * TILE, 64);
    if (two_a && two_b) FX_TILE_STORE(FX_TMM_C11, s + 3 * TILE, 64);
}

/* C' over the job's K block; on its last K block into ct [32 n][32 m]. */
static inline __attribute__((always_inline)) void tiles_run(const int two_a, const int two_b, const job *q,
                                                            float *ct) {
    if (q->first) FX_TILES_2X2_ZERO(two_a, two_b);
    else tiles_load_c(two_a, two_b, q->stage);
    const char *a = q->a, *b = q->b;
    const int64_t as = q->as, steps = q->steps; /* in registers across the tile asm's memory clobbers */
    for (int64_t s = 0; s < steps; s++, a += 64, b += BSTEP) {
        tiles_step(two_a, two_b, a, as, b);
        for (int f = 0; f < q->pf_per_step; f++) fx_gemm_prefetch_one(q->pf);
    }
    if (q->a_tail) tiles_step(two_a, two_b, q->a_tail, 64, b);
    if (q->last) FX_TILES_2X2_STORE(two_a, two_b, ct, PANEL);
    else tiles_store_c(two_a, two_b, q->stage);
}

/* ct [32 n][32 m] (the live quarters) → Y rows [0, rows) × columns
 * [0, cols) at y, with the epilogue (bias and gate from column col0). */
static void epilogue(const float *ct, int rows, int cols, float *y, int64_t ldy, const fx_epilogue *e, int64_t col0) {
    fx_gemm_tile t = {0};
    t.c = y, t.ldc = ldy;
    t.m = rows, t.n = cols;
    t.first = t.last = 1;
    t.mode = e->mode;
    const __mmask16 k0 = fx_gemm_mask16(cols), k1 = fx_gemm_mask16(cols - 16);
    __m512 b0 = _mm512_setzero_ps(), b1 = b0, g0 = b0, g1 = b0;
    if (e->bias) b0 = _mm512_maskz_loadu_ps(k0, e->bias + col0), b1 = _mm512_maskz_loadu_ps(k1, e->bias + col0 + 16);
    if (e->mode == FX_EPI_GATED_ACCUMULATE)
        g0 = _mm512_maskz_loadu_ps(k0, e->gate + col0), g1 = _mm512_maskz_loadu_ps(k1, e->gate + col0 + 16);
    for (int h = 0; h < 2 && h * 16 < rows; h++) { /* X rows 16h .. 16h + 15 */
        __m512i lo[16], hi[16];
#pragma GCC unroll 16
        for (int q = 0; q < 16; q++) lo[q] = _mm512_load_si512(ct + q * PANEL + h * 16);
        fx_gemm_transpose16x16(lo); /* lo[i] = columns 0-15 of Y row 16h + i */
        if (cols > 16) {
#pragma GCC unroll 16
            for (int q = 0; q < 16; q++) hi[q] = _mm512_load_si512(ct + (16 + q) * PANEL + h * 16);
            fx_gemm_transpose16x16(hi);
        }
        for (int i = 0; i < 16 && h * 16 + i < rows; i++)
            fx_gemm_write_row(&t, h * 16 + i, _mm512_castsi512_ps(lo[i]),
                              cols > 16 ? _mm512_castsi512_ps(hi[i]) : _mm512_setzero_ps(), k0, k1, b0, b1, g0, g1);
    }
}

/* The job on the tile variant its valid rows (of X) and columns (weight
 * rows) need, then the epilogue on its last K block. */
static void run_job(const plan *pl, const job *q, int64_t i, int64_t j) {
    _Alignas(64) float ct[PANEL * PANEL];
    const int rows = (int)min64(pl->m - i, PANEL), cols = (int)min64(pl->n - j * PANEL, PANEL);
    if (cols > 16 && rows > 16) tiles_run(1, 1, q, ct);
    else if (cols > 16) tiles_run(1, 0, q, ct);
    else if (rows > 16) tiles_run(0, 1, q, ct);
    else tiles_run(0, 0, q, ct);
    if (q->last) epilogue(ct, rows, cols, pl->y + i * pl->ldy + j * PANEL, pl->ldy, pl->epi, j * PANEL);
}

/* ------------------------------------------------------------------------ */
/* A: where each panel's K block is read from                               */
/* ------------------------------------------------------------------------ */

static const char *w_row(const plan *pl, int64_t r) { return pl->w + r * pl->w_rb; }

/* The K tails (k % 32 bf16 of each row, zeros after) of the chunk's full
 * panels [jc, jc + jn) → tails [jn][32 rows][32]. */
static void copy_k_tails(const plan *pl, int64_t jc, int64_t jn, char *tails) {
    const int64_t k32 = pl->k / 32 * 32, rest = pl->k - k32;
    for (int64_t j = jc; j < jc + jn && (j + 1) * PANEL <= pl->n; j++)
        for (int r = 0; r < PANEL; r++) {
            char *d = tails + (j - jc) * TAIL_TILE + r * 64;
            memcpy(d, w_row(pl, j * PANEL + r) + k32 * 2, (size_t)rest * 2);
            memset(d + rest * 2, 0, (size_t)(64 - rest * 2));
        }
}

/* K block [pc, pc + kcur) of the last panel j (fewer than 32 rows) →
 * dst [32][kc], zeros past n and past kcur. */
static void copy_n_tail(const plan *pl, int64_t j, int64_t pc, int64_t kcur, char *dst) {
    const int64_t valid = pl->n - j * PANEL, row = pl->kc * 2, used = round_up(kcur, 32) * 2;
    for (int64_t r = 0; r < PANEL; r++) {
        char *d = dst + r * row;
        int64_t done = 0;
        if (r < valid) memcpy(d, w_row(pl, j * PANEL + r) + pc * 2, (size_t)(done = kcur * 2));
        memset(d + done, 0, (size_t)(used - done));
    }
}

/* Block and fp8 types: the chunk's panels [jc, jc + jn) expanded to bf16
 * over the whole K → dst [jn·32][eld], zeros past k (fp8 rows need not be
 * a multiple of 32 long: the last step reads the padding) and rows past n. */
static void expand_chunk(const plan *pl, int64_t jc, int64_t jn, uint16_t *dst, float *tmp) {
    const int64_t r0 = jc * PANEL, rows = min64(pl->n - r0, jn * PANEL), k32 = round_up(pl->k, 32);
    fx_gemm_expand_rows(pl->ex, (int)rows, pl->k, w_row(pl, r0), pl->w_rb, dst, pl->eld, tmp);
    for (int64_t r = 0; r < rows && k32 > pl->k; r++) memset(dst + r * pl->eld + pl->k, 0, (size_t)(k32 - pl->k) * 2);
    for (int64_t r = rows; r < jn * PANEL; r++) memset(dst + r * pl->eld, 0, (size_t)k32 * 2);
}

/* ------------------------------------------------------------------------ */
/* The hooks on the nest (gemm_nest.h)                                      */
/* ------------------------------------------------------------------------ */

/* A thread's buffers and the state its hooks share. */
typedef struct amx_state {
    char *stage, *tails, *ntail;
    uint16_t *ebuf;
    float *etmp;
    fx_gemm_prefetch pf; /* the next pass's weight rows */
    int pf_per_step;
    int64_t jc, jn, jt;  /* the pass's first panel, panels, the n-tail panel (-1: none) */
    job q;               /* the current job: its B slice set per row block */
} amx_state;
FX_GEMM_STATE_FITS(amx_state);

/* Weight rows [r0, r1) × columns [pc, pc + kw) → prefetch walker. */
static void prefetch_rows(const plan *pl, int64_t r0, int64_t r1, int64_t pc, int64_t kw, fx_gemm_prefetch *pf) {
    pf->row = NULL;
    if (r0 >= r1 || kw <= 0) return;
    fx_gemm_prefetch_rows(pf, w_row(pl, r0) + pc * 2, pl->w_rb, (int)(r1 - r0), (size_t)kw * 2);
}

/* B: this thread's share of the X tiles (all threads, before a barrier). */
static void amx_pack_once(const void *ctx, int tid, int nt) {
    const plan *pl = ctx;
    const int64_t units = ceil_div(pl->m, PANEL) * pl->ks * 2;
    for (int64_t u = units * tid / nt; u < units * (tid + 1) / nt; u++) pack_x_tile(pl, u);
}

static void amx_begin(const void *ctx, fx_gemm_thread *t) {
    const plan *pl = ctx;
    amx_state *s = (amx_state *)(void *)t->state;
    s->stage = t->scratch;
    s->tails = s->stage + pl->stage_bytes;
    s->ntail = s->tails + pl->tail_bytes;
    s->ebuf = (uint16_t *)(void *)(s->ntail + pl->ntail_bytes);
    s->etmp = (float *)(void *)(s->ebuf + t->ncu * PANEL * pl->eld);
    fx_amx_tiles_begin();
}

static void amx_end(const void *ctx, fx_gemm_thread *t) {
    (void)ctx, (void)t;
    fx_amx_tiles_end();
}

/* A chunk of panels: block types expanded over the whole K, in-place bf16
 * panels' K tails copied. */
static void amx_chunk(const void *ctx, fx_gemm_thread *t, int64_t n0, int64_t n1) {
    const plan *pl = ctx;
    amx_state *s = (amx_state *)(void *)t->state;
    const int64_t jc = n0 / PANEL, jn = ceil_div(n1 - n0, PANEL);
    if (pl->ex) expand_chunk(pl, jc, jn, s->ebuf, s->etmp);
    else if (pl->k % 32) copy_k_tails(pl, jc, jn, s->tails);
}

/* A pass: the n-tail panel's copy of this K block; the next pass's weight
 * rows prefetched over this pass's steps. */
static void amx_pass(const void *ctx, fx_gemm_thread *t, const fx_gemm_pass *p) {
    const plan *pl = ctx;
    amx_state *s = (amx_state *)(void *)t->state;
    const int64_t jc = p->n0 / PANEL, jn = ceil_div(p->n1 - p->n0, PANEL);
    const int64_t jt = pl->n % PANEL ? pl->panels - 1 : -1; /* the n-tail panel */
    s->jc = jc, s->jn = jn, s->jt = jt;
    if (!pl->ex && jt >= jc && jt < jc + jn) copy_n_tail(pl, jt, p->pc, p->kcur, s->ntail);
    s->pf = (fx_gemm_prefetch){0};
    s->pf_per_step = 0;
    if (!pl->ex && p->has_next) {
        prefetch_rows(pl, p->next_n0, p->next_n1, p->next_pc, p->next_kcur, &s->pf);
        const int64_t steps = ceil_div(p->m1 - p->m0, PANEL) * jn * (p->kcur / 32);
        if (s->pf.row && steps > 0) s->pf_per_step = (int)ceil_div((int64_t)(s->pf.rows_left + 1) * s->pf.lines, steps);
    }
}

/* 32 rows of X from ib: their B slice of the K block (in L1 for the chunk). */
static void amx_panel(const void *ctx, fx_gemm_thread *t, const fx_gemm_pass *p, int64_t ib) {
    const plan *pl = ctx;
    amx_state *s = (amx_state *)(void *)t->state;
    job *q = &s->q;
    q->b = pl->xb + ((ib / PANEL) * pl->ks + p->pc / 32) * BSTEP;
    q->first = p->first, q->last = p->last;
    q->pf = &s->pf, q->pf_per_step = s->pf_per_step;
}

/* The 32 × 32 block of C' at (X rows ib, weight panel j0 / 32): A read in
 * place, from the expanded chunk, or from the zero-padded n-tail copy. */
static void amx_tile(const void *ctx, fx_gemm_thread *t, const fx_gemm_pass *p, int64_t ib, int64_t j0) {
    const plan *pl = ctx;
    amx_state *s = (amx_state *)(void *)t->state;
    job *q = &s->q;
    const int64_t j = j0 / PANEL, jc = s->jc, jn = s->jn, jt = s->jt;
    const int64_t pc = p->pc, kcur = p->kcur;
    q->stage = pl->stage_bytes ? s->stage + (((ib - p->m0) / PANEL) * jn + (j - jc)) * CBLOCK : NULL;
    q->a_tail = NULL;
    if (pl->ex) { /* the expanded chunk, zero-padded to 32 k */
        q->a = (const char *)(s->ebuf + (j - jc) * PANEL * pl->eld + pc);
        q->as = pl->eld * 2;
        q->steps = ceil_div(kcur, 32);
    } else if (j == jt) { /* the zero-padded copy of this K block */
        q->a = s->ntail, q->as = pl->kc * 2;
        q->steps = ceil_div(kcur, 32);
    } else { /* in place; the K tail from its copy */
        q->a = w_row(pl, j * PANEL) + pc * 2, q->as = pl->w_rb;
        q->steps = kcur / 32;
        if (kcur % 32) q->a_tail = s->tails + (j - jc) * TAIL_TILE;
    }
    run_job(pl, q, ib, j);
}

/* ------------------------------------------------------------------------ */
/* Entry point                                                              */
/* ------------------------------------------------------------------------ */

static int linear_tiles(const fx_gemm_tiles *t, const fx_kctx *kc, int threads, int64_t m, const float *x,
                        int64_t ldx, const fx_weight *w, float *y, int64_t ldy, const fx_epilogue *epi) {
    plan pl = {0};
    fx_gemm_expander ex;
    pl.m = m, pl.n = w->n, pl.k = w->k;
    pl.ks = ceil_div(pl.k, 32);
    pl.x = x, pl.ldx = ldx;
    pl.w = w->data;
    pl.w_rb = fx_dtype_row_bytes(w->dtype, w->ld);
    if (fx_dtype_is_expanded(w->dtype)) {
        ex = fx_gemm_expander_for(kc, w, FX_DTYPE_BF16);
        pl.ex = &ex;
        pl.eld = pl.k + 32; /* +64 bytes: rows do not share L1 sets as 2^k strides would */
    }
    pl.y = y, pl.ldy = ldy;
    pl.epi = epi;
    pl.kc = t->kc > 32 ? round_up(t->kc, 32) : 32;
    pl.mc = t->mc > PANEL ? round_up(t->mc, PANEL) : PANEL;
    pl.nc = t->nc > 1 ? t->nc : 1;
    pl.panels = ceil_div(pl.n, PANEL);

    /* per-thread scratch, for any share a thread may get (OpenMP may give
     * fewer threads than asked for) */
    const int64_t ncb = min64(pl.nc, pl.panels), mcb = min64(pl.mc, round_up(pl.m, PANEL));
    pl.stage_bytes = pl.k > pl.kc ? (size_t)(mcb / PANEL * ncb * CBLOCK) : 0;
    pl.tail_bytes = !pl.ex && pl.k % 32 ? (size_t)(ncb * TAIL_TILE) : 0;
    pl.ntail_bytes = !pl.ex && pl.n % PANEL ? (size_t)(PANEL * pl.kc * 2) : 0;
    const size_t e_bytes = pl.ex ? (size_t)round_up(ncb * PANEL * pl.eld * 2 + pl.k * 4, 64) : 0;
    /* N outer (a chunk's A panels stay in L2 for every row block), balanced
     * chunks; the X slice of a row block in L1 across the chunk's panels */
    fx_gemm_nest nest = {
        .m = m, .n = pl.n, .k = pl.k,
        .mu = PANEL, .nu = PANEL,
        .mc = pl.mc, .nc = pl.nc, .kc = pl.kc,
        .n_outer = 1, .m_micro_outer = 1, .balance_n = 1,
        .ctx = &pl,
        .pack_once = amx_pack_once, .begin = amx_begin, .end = amx_end,
        .chunk = amx_chunk, .pass = amx_pass, .panel = amx_panel, .tile = amx_tile,
        .shared_bytes = (size_t)(ceil_div(pl.m, PANEL) * pl.ks * BSTEP),
        .thread_bytes = pl.stage_bytes + pl.tail_bytes + pl.ntail_bytes + e_bytes,
    };
    if (fx_gemm_nest_reserve(kc, &nest, threads)) return -1;
    pl.xb = nest.shared;
    fx_gemm_nest_run(&nest, threads);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The amx table                                                            */
/* ------------------------------------------------------------------------ */

static const fx_gemm_tiles amx_tiles = {
    .name = "amx bf16 tiles 32x32, weights read in place",
    .kc = 256, .mc = 1024, .nc = 8,
    .linear = linear_tiles,
};

/* f32 and f16 weights keep f32 math (AVX-512 FMA); m <= 4 uses the
 * AVX-512 GEMVs (bandwidth-bound; bf16 widened: vdpbf16ps is half rate on
 * Intel). Which m go to the tiles: every m the blocked GEMM gets
 * (m > FX_GEMV_MAX_M), not only m >= 16: a batch stacks its sequences
 * through the GEMMs, so a higher threshold would put a small image's
 * tokens on f32 alone and on tiles in a batch, and an image of a batch
 * would no longer be exactly its single run (README, -n). Below 16 rows
 * the tiles are partly padding, yet (derived) at m = 5 they still peak at
 * 5/16 · 1024 = 320 FLOP/cycle against 64 for AVX-512 FMA. conv2d runs on
 * the packed path (gemm_packed_amx.c). */
const fx_gemm_kernels fx_gemm_amx = {
    .name = "amx",
    .path = {&fx_gemm_avx512_f32_path, &fx_gemm_avx512_f32_path, &fx_gemm_amx_packed_path},
    .tiles = &amx_tiles,
    .gemv = {fx_gemv_avx512_f32, fx_gemv_avx512_f16, fx_gemv_avx512_bf16},
    .gemv_bf16_dot = 0,
    .int8 = fx_gemm_int8_amx_choose,
};
