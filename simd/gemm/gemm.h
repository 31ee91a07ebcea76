/*
 * gemm.h — per-ISA tables of the gemm kernel family (simd-internal).
 *
 * fx_gemm_linear (gemm.c, the product of fx_linear) computes
 * Y[m, n] (op)= X[m, k] · W[n, k]ᵀ the BLIS way: loops around a
 * register-tiled microkernel. The loops are the GEMM nest (gemm_nest.h,
 * shared with the AMX tile driver, the int8 driver and conv2d); a float
 * path's hooks walk it in this order. Each thread owns a block
 * of the output (a range of whole NR column panels, or of whole MR rows
 * when n is narrow) and runs, with nothing shared and no barriers:
 *
 *   for mb in its rows step MC      row super-block
 *    for jc in its cols step NC     column chunk
 *     for pc in K step KC           K block (KC balanced over K)
 *      pack X[mb.., pc..] → A panel [MC/MR][KC][MR]   (L3, per thread)
 *      for jr in the chunk step NR
 *       pack W[jr.., pc..] → B micro-panel [KC][NR]   (L2, per thread)
 *       (prefetching the W rows of the next micro-panel meanwhile)
 *       for ir in the super-block step MR
 *         microkernel: MR×NR tile of Y in registers, rank-KC update
 *
 * W is read from memory once per (super-block, K block); each B micro-panel
 * is reused by every row of the super-block. Because the weight rows are
 * read in short bursts (KC elements per row), their DRAM latency is hidden
 * by software prefetches spread over the microkernel calls of the previous
 * micro-panel.
 *
 * A "path" is one microkernel with its packing routines: the f32 FMA path
 * (packed elements are f32; bf16/f16 weights are widened while packing) or
 * the bf16 dot-product path (packed elements are bf16 pairs (k, k+1) for
 * vdpbf16ps; X is rounded to bf16 while packing). Each ISA table names the
 * path used for each weight dtype.
 *
 * Determinism: threads split only the M and N tiles; every element of Y is
 * reduced over K by the same instruction sequence in the same order (the K
 * blocking depends on K and the path only, never on the thread count), so
 * results are bit-identical for any thread count.
 *
 * Partial sums across K blocks: the microkernel starts its accumulators
 * from the partial sums of the earlier K blocks (one FMA chain per element
 * in k order) and applies the epilogue (bias, store / accumulate / gated
 * accumulate) only in the write-back of the last K block. In STORE mode the
 * partial sums live in Y itself; in the accumulating modes they live in a
 * staging buffer (Y still holds the value to accumulate into).
 *
 * Small M (m <= FX_GEMV_MAX_M): a GEMV-style kernel streams W once, no
 * packing (timestep MLP, modulation: bandwidth bound).
 *
 * Tile drivers: a table may run bf16 and block-typed weights through a
 * driver of its own instead of these hooks (fx_gemm_tiles, on the same
 * nest with hooks of its own). The amx
 * table's computes Yᵀ = W·Xᵀ on AMX tiles with the weight rows loaded in
 * place as the A operand (a tile row is one 64-byte line either way, so a
 * packed copy of W buys nothing and costs a second copy of the model) and
 * X packed once per call as the B operand (gemm_amx.c); conv2d keeps the
 * packed path (its weights are reordered per layer anyway).
 *
 * Scratch: fx_linear reserves and uses the context's *shared* scratch
 * buffer (per thread: A panel, B micro-panel, staging). Callers must not pass
 * pointers into kc->scratch as x or y, and must call fx_linear outside
 * OpenMP parallel regions (it parallelises itself).
 */
#ifndef FX_GEMM_H
#define FX_GEMM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "simd/common/arch.h"
#include "simd/common/cpu.h"
#include "simd/common/table.h"
#include "simd/quant/quant.h"

/* m at or below this uses the GEMV kernel (no packing). */
#define FX_GEMV_MAX_M 4
/* Below this many flops (2·m·n·k) one thread does the whole product. */
#define FX_GEMM_SERIAL_FLOPS 2e6

/* Lines of weight rows to prefetch (the next B micro-panel's source):
 * `rows` rows of `lines` 64-byte lines from `row`, `row_bytes` apart.
 * The microkernel issues `per_call` of them, spread over its k loop, so the
 * prefetches never arrive in bursts that stall the load pipeline. */
typedef struct fx_gemm_prefetch {
    const char *row;    /* current row's first line; NULL: nothing left */
    int64_t row_bytes;
    int rows_left;      /* rows after the current one */
    int lines, line;    /* lines per row; next line of the current row */
    int per_call;       /* lines per microkernel call */
} fx_gemm_prefetch;

/* Issue the next prefetch (if any). */
static inline void fx_gemm_prefetch_one(fx_gemm_prefetch *pf) {
    if (!pf->row) return;
    __builtin_prefetch(pf->row + (int64_t)pf->line * 64, 0, 2);
    if (++pf->line == pf->lines) {
        pf->line = 0;
        pf->row = pf->rows_left-- > 0 ? pf->row + pf->row_bytes : NULL;
    }
}

/* Start pf at `rows` weight rows from `start` (row_bytes apart), `bytes`
 * bytes of each from there, in whole lines; per_call left 0. */
static inline void fx_gemm_prefetch_rows(fx_gemm_prefetch *pf, const char *start, int64_t row_bytes, int rows,
                                         size_t bytes) {
    const uintptr_t mis = (uintptr_t)start & 63;
    pf->row = start - mis;
    pf->row_bytes = row_bytes;
    pf->rows_left = rows - 1;
    pf->lines = (int)((mis + bytes + 63) / 64);
    pf->line = 0;
    pf->per_call = 0;
}

/* k-loop iterations between two prefetches for a kernel of ksteps steps. */
static inline int64_t fx_gemm_prefetch_every(const fx_gemm_prefetch *pf, int64_t ksteps) {
    if (!pf || !pf->row || pf->per_call <= 0) return INT64_MAX;
    int64_t e = ksteps / pf->per_call;
    return e > 0 ? e : 1;
}

/* One microkernel tile's write-back (all pointers already at the tile).
 *   acc  = (first ? 0 : partial) + Σ_k A·B      (one chain per element)
 *   !last: c = acc
 *   last:  t = acc + bias;  c = t | c += t | c += gate ⊙ t   (by mode)
 * Only rows < m and columns < n are read or written. */
typedef struct fx_gemm_tile {
    float *c;
    int64_t ldc;
    const float *partial; /* partial sums when !first (may equal c) */
    int64_t ldp;
    int m, n;
    int first, last;
    fx_epilogue_mode mode;
    const float *bias; /* [n] at the tile's first column, or NULL */
    const float *gate; /* [n] at the tile's first column (gated mode) */
    fx_gemm_prefetch *pf; /* prefetches to issue during this call, or NULL */
} fx_gemm_tile;

struct fx_gemm_path;

/* Packers may write up to this many bytes past their last micro-panel
 * (whole 16-lane vectors past a K tail); the driver keeps the slack. */
#define FX_GEMM_PACK_SLACK 4096

/* Pack rows [0, mc) × cols [0, kc) of X into ceil(mc/MR) micro-panels, each
 * [ceil(kc/kpair)][MR][kpair] elements, zero-padded (rows >= mc, k >= kc). */
typedef void (*fx_gemm_pack_x_fn)(const struct fx_gemm_path *p, int64_t mc, int64_t kc,
                                  const float *x, int64_t ldx, void *dst);
/* Pack outputs [0, nc) × cols [0, kc) of W (rows at w + r*ldw, dtype fixed by
 * the function) into ceil(nc/NR) micro-panels [ceil(kc/kpair)][NR][kpair],
 * zero-padded. */
typedef void (*fx_gemm_pack_w_fn)(const struct fx_gemm_path *p, int64_t nc, int64_t kc,
                                  const void *w, int64_t ldw, void *dst);
/* Rank-ksteps update of one MR×NR tile; ksteps = ceil(kc/kpair). a and b
 * point at a packed micro-panel each. */
typedef void (*fx_gemm_kernel_fn)(int64_t ksteps, const void *a, const void *b,
                                  const fx_gemm_tile *t);

typedef struct fx_gemm_path {
    const char *name;  /* "avx512 f32 14x32" */
    int mr, nr;        /* register tile */
    int kc, mc, nc;    /* blocks: kc (max K block, multiple of 32), mc (rows of
                          a super-block, multiple of mr), nc (multiple of nr) */
    int kpair;         /* 1: f32 elements; 2: bf16 pairs (vdpbf16ps) */
    int elem;          /* bytes per packed element: 4 or 2 */
    fx_gemm_pack_x_fn pack_x;
    fx_gemm_pack_w_fn pack_w[3]; /* by weight dtype: F32, F16, BF16 */
    fx_gemm_kernel_fn kernel;
    int kernel_prefetches; /* the kernel issues t->pf itself (else the driver
                              does, between calls) */
    /* Run by every thread before its first and after its last kernel call
     * of a GEMM or conv (the AMX tile configuration); NULL: nothing. */
    void (*thread_begin)(void);
    void (*thread_end)(void);
} fx_gemm_path;

/* ---- tile drivers: bf16 and block-typed weights read where they lie ----
 * A table may replace the BLIS loops above, for bf16 weights and GGUF block
 * types at m > FX_GEMV_MAX_M, by a driver of its own (the amx table:
 * gemm_amx.c computes Yᵀ = W·Xᵀ on the tiles with the weight rows loaded
 * in place as the A operand, no packed copy of W). Its blocks:
 *   kc  K block, a multiple of 32 (partial sums between K blocks are kept
 *       exactly, so it never changes a bit)
 *   mc  rows of X per block, a multiple of 32
 *   nc  32-row weight panels per chunk (a thread's unit of A reuse)
 * linear returns 0, or -1 when scratch memory is unavailable (nothing
 * written); threads as fx_gemm_linear decided. */
typedef struct fx_gemm_tiles fx_gemm_tiles;
struct fx_gemm_tiles {
    const char *name;
    int kc, mc, nc;
    int (*linear)(const fx_gemm_tiles *t, const fx_kctx *kc, int threads, int64_t m, const float *x, int64_t ldx,
                  const fx_weight *w, float *y, int64_t ldy, const fx_epilogue *epi);
};

/* ---- block-typed weights expanded to an element type (gemm.c) ----
 * Rows of whole blocks dequantized (bit-identical to fx_dequantize_row;
 * fp8: times the weight's scale, fx_weight_scale_row) and, for a bf16 target, rounded to bf16 (RNE) into a buffer that the
 * f32 / bf16 machinery then reads as if the weight were stored so. */
typedef struct fx_gemm_expander {
    fx_dequant_fn dequant;
    void (*to_bf16)(int64_t n, const float *src, uint16_t *dst); /* NULL: f32 target */
    fx_dequant_bf16_fn dequant_bf16; /* bf16 target in one pass, when the table has it (else NULL) */
    int64_t block;
    size_t block_bytes;
    float scale; /* fp8: the weight's scale, applied to the f32 values before any rounding; 0 = none */
    /* side scales (fx_weight.scales): a source row's place in the weight,
     * (src - base) / rb, and its first column (from (src - base) % rb, in
     * whole blocks) pick its scales; NULL = none */
    const fx_weight *w;
    const char *base;
    int64_t rb;
} fx_gemm_expander;
/* The expander of w (a block type or fp8) into target (F32 or BF16). */
fx_gemm_expander fx_gemm_expander_for(const fx_kctx *kc, const fx_weight *w, fx_dtype target);
/* rows × cols elements (cols a multiple of the block) from rows src_rb
 * bytes apart into dst (rows ldd elements apart) of the target type; f32
 * staging for a bf16 target in tmp (cols floats). */
void fx_gemm_expand_rows(const fx_gemm_expander *e, int rows, int64_t cols, const char *src, int64_t src_rb,
                         void *dst, int64_t ldd, float *tmp);


/* y[i, j] for i < m <= FX_GEMV_MAX_M, j in [n0, n1): one thread's share of
 * the GEMV. xb is X rounded to bf16, rows round_up(k, 32) apart and
 * zero-padded (only for tables whose bf16 GEMV uses dot products; NULL
 * otherwise). */
typedef void (*fx_gemv_fn)(int64_t m, int64_t n0, int64_t n1, int64_t k, const float *x,
                           int64_t ldx, const uint16_t *xb, const fx_weight *w, float *y,
                           int64_t ldy, const fx_epilogue *epi);

struct fx_gemm_kernels;
/* The element type expanded weights take on table g, at every m (GEMV
 * included): what its bf16 path packs — BF16 on bf16-dot paths and AMX
 * tiles, else F32. So an fp8 or block weight runs, on every path of a
 * table, exactly as the bf16 (or f32) weight of its values would. */
fx_dtype fx_gemm_expand_target(const struct fx_gemm_kernels *g);

typedef struct fx_gemm_kernels {
    const char *name;
    const fx_gemm_path *path[3]; /* by weight dtype: F32, F16, BF16 */
    /* bf16 and block-typed weights at m > FX_GEMV_MAX_M: this driver
     * instead of path[BF16]'s loops (NULL: none) */
    const fx_gemm_tiles *tiles;
    fx_gemv_fn gemv[3];          /* by weight dtype */
    int gemv_bf16_dot;           /* gemv[BF16] wants xb */
    /* the int8 kernel for a CPU with facts f and a product of m rows
     * (NULL: scalar); every choice gives the same bits */
    const struct fx_gemm_int8 *(*int8)(const fx_cpu_facts *f, int64_t m);
} fx_gemm_kernels;

/* ---- helpers shared by the per-ISA files ---- */

/* The epilogue on one value t = X·Wᵀ (without bias) of column j. */
static inline void fx_gemm_epi_scalar(const fx_epilogue *e, int64_t j, float t, float *yp) {
    if (e->bias) t += e->bias[j];
    if (e->mode == FX_EPI_STORE) *yp = t;
    else if (e->mode == FX_EPI_ACCUMULATE) *yp += t;
    else *yp += e->gate[j] * t;
}

/* Portable packing (any MR/NR from the path) and the scalar microkernel. */
void fx_gemm_pack_x_f32_c(const fx_gemm_path *p, int64_t mc, int64_t kc, const float *x,
                          int64_t ldx, void *dst);
void fx_gemm_pack_x_bf16pair_c(const fx_gemm_path *p, int64_t mc, int64_t kc, const float *x,
                               int64_t ldx, void *dst);
void fx_gemm_pack_w_f32_c(const fx_gemm_path *p, int64_t nc, int64_t kc, const void *w,
                          int64_t ldw, void *dst);
void fx_gemm_pack_w_f16_c(const fx_gemm_path *p, int64_t nc, int64_t kc, const void *w,
                          int64_t ldw, void *dst);
void fx_gemm_pack_w_bf16_c(const fx_gemm_path *p, int64_t nc, int64_t kc, const void *w,
                           int64_t ldw, void *dst);
void fx_gemm_pack_w_bf16pair_c(const fx_gemm_path *p, int64_t nc, int64_t kc, const void *w,
                               int64_t ldw, void *dst);
void fx_gemv_c(int64_t m, int64_t n0, int64_t n1, int64_t k, const float *x, int64_t ldx,
               const uint16_t *xb, const fx_weight *w, float *y, int64_t ldy,
               const fx_epilogue *epi);

/* fx_linear without w's additive terms (w->delta ignored): the product
 * (gemm.c). fx_linear (linear.c) is this, then fx_delta_apply. */
void fx_gemm_linear(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_weight *w, float *y,
                    int64_t ldy, const fx_epilogue *epi);
/* w's additive terms after its product (delta.c): each term of w->delta
 * that passes fx_delta_check adds into y [m, w->n] with epi (not NULL);
 * nothing without terms. */
void fx_delta_apply(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_weight *w, float *y,
                    int64_t ldy, const fx_epilogue *epi);

/* Describe a table's paths per weight dtype (one line each, "linear:"
 * first); returns bytes needed. */
size_t fx_gemm_describe(const fx_gemm_kernels *g, char *buf, size_t size);


/* ---- the tables ---- */

extern const fx_gemm_kernels fx_gemm_scalar;

#if FX_X86
extern const fx_gemm_kernels fx_gemm_avx2, fx_gemm_avx512, fx_gemm_avx512bf16, fx_gemm_amx;
/* the amx table's path for bf16 weights (both operands packed: conv2d) */
extern const fx_gemm_path fx_gemm_amx_packed_path;
/* shared by the avx512, avx512bf16 and amx tables */
extern const fx_gemm_path fx_gemm_avx512_f32_path;
void fx_gemv_avx512_f32(int64_t m, int64_t n0, int64_t n1, int64_t k, const float *x, int64_t ldx,
                        const uint16_t *xb, const fx_weight *w, float *y, int64_t ldy,
                        const fx_epilogue *epi);
void fx_gemv_avx512_f16(int64_t m, int64_t n0, int64_t n1, int64_t k, const float *x, int64_t ldx,
                        const uint16_t *xb, const fx_weight *w, float *y, int64_t ldy,
                        const fx_epilogue *epi);
/* bf16 weights widened to f32 (FMA) */
void fx_gemv_avx512_bf16(int64_t m, int64_t n0, int64_t n1, int64_t k, const float *x, int64_t ldx,
                         const uint16_t *xb, const fx_weight *w, float *y, int64_t ldy,
                         const fx_epilogue *epi);
#endif

#if FX_ARM
extern const fx_gemm_kernels fx_gemm_neon;
#endif

#endif
