/*
 * gemm.h — per-ISA tables of the gemm kernel family (simd-internal).
 *
 * fx_gemm_linear (gemm.c, the product of fx_linear) computes
 * Y[m, n] (op)= X[m, k] · W[n, k]ᵀ the BLIS way: loops around a
 * register-tiled microkernel. Each thread owns a block
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
 * driver of its own instead of these loops (fx_gemm_tiles). The amx
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

/* ---- the int8 (W8A8) GEMM (gemm_int8.c) ----
 * Weights: the per-channel int8 form (kernels.h fx_int8w), read in place:
 * MR output rows (channels) at a time, row stride ldq = round_up(k, 64)
 * bytes. X: quantized per row (codes and one f32 scale each) and packed
 * once per call into panels of NR rows (tokens): [ldq/4][NR][4], the 4
 * codes of a k-quad of one token together (the AMX B tile's layout);
 * kernels with x_u8 get code + 128 as unsigned bytes (vpdpbusd's unsigned
 * operand) and subtract 128·sum[j] from the dot. Padding tokens are zero
 * codes with scale 0. A kernel call runs the whole K for its MR × NR tile
 * with exact int32 sums d[j][i] = Σ_k codeW[j]·codeX[i], then the
 * epilogue fx_int8_epi_c describes (every ISA: the same operations). */
typedef struct fx_int8_tile {
    float *y;               /* at (token i0, channel j0) */
    int64_t ldy;
    int m, n;               /* valid tokens (rows of y) / channels (columns of y) */
    const float *sx;        /* [NR] token scales (0 past m) */
    const float *sw;        /* [MR] channel scales (0 past n) */
    const int32_t *wsum;    /* [MR] channel code sums */
    fx_epilogue_mode mode;
    const float *bias, *gate; /* at column j0, or NULL */
} fx_int8_tile;
/* kq: quads of k (ldq / 4); w: MR weight rows, ldw bytes apart; x: one
 * packed panel. */
typedef void (*fx_int8_kernel_fn)(int64_t kq, const int8_t *w, int64_t ldw, const uint8_t *x, const fx_int8_tile *t);
typedef struct fx_gemm_int8 {
    const char *name;
    int mr, nr;             /* channels × tokens per call; mr divides 32 */
    fx_int8_kernel_fn kernel;
    int x_u8;               /* 1: X packed as code + 128 */
    /* run by every thread before its first / after its last kernel call
     * (the AMX tile configuration); NULL: nothing */
    void (*thread_begin)(void), (*thread_end)(void);
} fx_gemm_int8;

/* The epilogue of one output from its int32 dot d (already without the
 * u8 offset): v = ((float)d · sw_j) · sx_i, then + bias_j when there is a
 * bias, then store / c + v / fma(gate_j, v, c). Every kernel does exactly
 * these operations per element (vectorized or not). */
static inline void fx_int8_epi_c(const fx_int8_tile *t, int i, int j, int32_t d) {
    float v = (float)d * t->sw[j];
    v = v * t->sx[i];
    if (t->bias) v = v + t->bias[j];
    float *c = t->y + i * t->ldy + j;
    if (t->mode == FX_EPI_STORE) *c = v;
    else if (t->mode == FX_EPI_ACCUMULATE) *c = *c + v;
    else *c = fmaf(t->gate[j], v, *c);
}
/* The epilogue of a tile of dots d[j·ldd + i] (channel-major); u8: the
 * dots still hold 128·wsum[j]. */
static inline void fx_int8_finish_c(const int32_t *d, int64_t ldd, int u8, const fx_int8_tile *t) {
    for (int i = 0; i < t->m; i++)
        for (int j = 0; j < t->n; j++) fx_int8_epi_c(t, i, j, d[j * ldd + i] - (u8 ? 128 * t->wsum[j] : 0));
}

/* The rule's int8 codes of n values (n a multiple of 32): s = max|x|/127,
 * code = x·(127/max|x|) rounded to nearest even, Σ codes; all zero (s 0)
 * when max|x| is 0 or not finite. Shared by the activations (per call)
 * and the weights (fx_weight_row_to_int8). Written in 32-element steps of
 * integer operations so that the compiler vectorizes it: max|x| as the
 * largest |x| bit pattern (ordered like the values for finite x), the
 * rounding by adding 1.5·2^23 (the float's low bits are then the integer,
 * exact for |v| <= 127). */
static inline void fx_int8_codes(const float *x, int64_t n, int8_t *q, float *scale, int32_t *sum) {
    uint32_t mx = 0;
    for (int64_t b = 0; b < n; b += 32) {
        uint32_t u[32], m = 0;
        memcpy(u, x + b, sizeof u);
        for (int j = 0; j < 32; j++) m = (u[j] & 0x7fffffffu) > m ? (u[j] & 0x7fffffffu) : m;
        mx = m > mx ? m : mx;
    }
    float amax;
    memcpy(&amax, &mx, 4);
    if (!(amax > 0.0f) || !(amax <= 3.4028235e38f)) {
        memset(q, 0, (size_t)n);
        *scale = 0.0f, *sum = 0;
        return;
    }
    const float inv = 127.0f / amax;
    int32_t s = 0;
    for (int64_t b = 0; b < n; b += 32) {
        float t[32];
        int32_t r[32];
        for (int j = 0; j < 32; j++) t[j] = x[b + j] * inv + 12582912.0f;
        memcpy(r, t, sizeof r);
        for (int j = 0; j < 32; j++) {
            r[j] -= 0x4b400000;
            q[b + j] = (int8_t)r[j];
            s += r[j];
        }
    }
    *scale = amax / 127.0f, *sum = s;
}

/* The int8 GEMM: from form f (of w), or with f NULL w's blocks converted
 * per call panel by panel; kernel p (NULL: the table's for m rows on this
 * CPU, else scalar). Returns 0 when done; -1 when it did not run (scratch
 * memory unavailable, or K too long for exact int32 sums): nothing
 * written, the caller takes the weight-only path. */
int fx_linear_int8(const fx_kctx *kc, const fx_gemm_int8 *p, int64_t m, const float *x, int64_t ldx,
                   const fx_weight *w, const fx_int8w *f, float *y, int64_t ldy, const fx_epilogue *epi);

extern const fx_gemm_int8 fx_gemm_int8_scalar;

/* AMX-INT8 tiles from this many rows of X (fewer: the AVX-512 kernel) */
#define FX_INT8_AMX_MIN_M 16

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
    const fx_gemm_int8 *(*int8)(const fx_cpu_facts *f, int64_t m);
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
/* int8 kernels: vpmaddubsw (AVX2), ymm vpdpbusd (AVX-VNNI), zmm vpdpbusd
 * (AVX512-VNNI), TDPBSSD (AMX); the choosers of the avx2, avx512 (and
 * avx512bf16) and amx tables */
extern const fx_gemm_int8 fx_gemm_int8_avx2_kernel, fx_gemm_int8_avxvnni, fx_gemm_int8_avx512vnni, fx_gemm_int8_amx;
const fx_gemm_int8 *fx_gemm_int8_avx2(const fx_cpu_facts *f, int64_t m);
const fx_gemm_int8 *fx_gemm_int8_avx512(const fx_cpu_facts *f, int64_t m);
const fx_gemm_int8 *fx_gemm_int8_amx_choose(const fx_cpu_facts *f, int64_t m);
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
/* sdot (ARMv8.2 dotprod, when the CPU has it) or widening multiplies */
extern const fx_gemm_int8 fx_gemm_int8_neon_dot, fx_gemm_int8_neon_base;
const fx_gemm_int8 *fx_gemm_int8_neon(const fx_cpu_facts *f, int64_t m);
extern const fx_gemm_kernels fx_gemm_neon;
#endif

#endif
