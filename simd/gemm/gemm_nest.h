/*
 * gemm_nest.h — the GEMM loop nest, written once (BLIS style; simd-internal).
 *
 *   Y[m, n] (op)= X[m, k] · W[n, k]ᵀ      m: rows of X (tokens), n: weight
 *                                          rows (output channels), k: K
 *
 * Every GEMM driver of simd/gemm/ walks this nest and provides only its
 * hooks: how an operand is packed or expanded, which microkernel runs a
 * tile, where partial sums are staged, the epilogue. The nest:
 *
 *   pack_once(tid, nt) on every thread, then one barrier     X packed per call
 *   split: threads own contiguous ranges of N units (nu weight rows) when
 *     there are >= 2 units per thread or split_n_only, else of M units (mu
 *     rows of X): rows [r0, r1) × columns [c0, c1) of Y, nothing shared
 *     (dynamic_m instead: M blocks handed out as threads come, whole N)
 *   begin                                              AMX: tile configuration
 *   loop A, loop B = N chunks, M blocks (n_outer) or M blocks, N chunks:
 *     N chunk   nc units of nu (balance_n: balanced over the thread's units)
 *     M block   mc rows, balanced, whole mu
 *     chunk(n0, n1) at the top of each N chunk iteration  W expanded / converted
 *       for pc in [0, k) step kc                      K block (kc >= k: one)
 *         pass                                        pack X / stage / prefetch
 *         micro loops: i over the M block step mu, j over the chunk step nu,
 *         i outer (m_micro_outer) or j outer:
 *           panel(outer index)                        pack a W micro-panel /
 *                                                     pick an X slice
 *             tile(i, j)                              microkernel on mu × nu;
 *                                                     epilogue on the last pc
 *   end
 *
 * Which path provides which hooks (the blocks are each path's own):
 *   float (gemm.c, fx_gemm_path: f32 FMA or bf16 pairs; per ISA a table of
 *     packers by weight dtype and a microkernel): M outer; pass = pack X
 *     into the A panel; panel (N outer) = expand a block / fp8 / side-scaled
 *     weight (fx_gemm_expander) then pack the W micro-panel, prefetch the
 *     next one; tile = microkernel, partial sums in Y or a staging buffer.
 *   AMX tiles (gemm_amx.c): pack_once = X rounded to bf16 as B tiles; N
 *     outer, balanced; chunk = expand block types (or copy the K tails of
 *     in-place bf16 panels); pass = the n-tail panel's copy and the
 *     prefetch of the next pass (fx_gemm_pass.next_*); panel (M outer) =
 *     the X slice; tile = 2×2 TDPBF16PS over the K block, C staged per
 *     thread between K blocks, transposed epilogue.
 *   int8 W8A8 (gemm_int8.c; X quantized per call before the nest): N
 *     chunks of whole MR blocks, split_n_only, one M block, one K block;
 *     chunk = the per-channel form in place, or the weight rows converted
 *     per chunk (fx_weight_row_to_int8); tile = exact int32 sums over the
 *     whole K, then the scales (fx_int8_finish_c).
 *   conv2d (simd/conv/conv2d.c, on a float path; gemm_packed_amx.c on
 *     AMX): dynamic_m, M blocks of a few MR-pixel tiles handed out
 *     dynamically, one N chunk (B packed once per layer), one K block;
 *     pass = gather the im2col rows and pack the A tiles; tile =
 *     microkernel over the whole K.
 * Operand types: a weight type enters the float and AMX paths through
 * packing (fx_gemm_path.pack_w by stored dtype) or expansion while packing
 * (fx_gemm_expander: the dequantizer of simd/quant/'s table, the fp8 or
 * side scales, f32 or bf16 target), and the int8 path through its row
 * conversion (fx_weight_row_to_int8, the quant table's to_int8). So a new
 * type (fp8, NVFP4, I8, ...) is a dequantizer / packer and a table entry;
 * the loops do not change.
 *
 * Determinism (every path): threads and blocks split only M and N, never
 * K; every element of Y is one chain over K in k order, continued across K
 * blocks from exactly stored partial sums (f32 in Y or a staging buffer,
 * AMX C tiles) or run in one exact int32 sum; block sizes depend on the
 * problem and the path only. So no thread count, schedule or block size
 * changes a bit.
 *
 * Next step (not done): the GEMV of m <= FX_GEMV_MAX_M (gemm.c
 * linear_gemv*, bandwidth bound: W streamed once, no packing) keeps its own
 * split of the outputs over threads; and the three routes by operand type
 * (pack_w[dtype], fx_gemm_expander_for, fx_weight_row_to_int8) could be
 * one table indexed by dtype. The blocks are still the derived defaults:
 * flux-bench gemm --kc/--mc/--nc sweeps them on a quiet machine.
 */
#ifndef FX_GEMM_NEST_H
#define FX_GEMM_NEST_H

#include <stddef.h>
#include <stdint.h>

#include "simd/common/table.h"

/* One pass of a thread: an M block × N chunk × K block, and the thread's
 * next pass in nest order (what to prefetch). */
typedef struct fx_gemm_pass {
    int64_t m0, m1;   /* rows of X */
    int64_t n0, n1;   /* weight rows (columns of Y) */
    int64_t pc, kcur; /* K block [pc, pc + kcur) */
    int first, last;  /* first / last K block */
    int has_next;     /* the thread's next pass: */
    int64_t next_n0, next_n1, next_pc, next_kcur;
} fx_gemm_pass;

/* Per-thread state of a path's hooks (its own struct inside, checked with
 * FX_GEMM_STATE_FITS). */
enum { FX_GEMM_STATE_BYTES = 256 };
#define FX_GEMM_STATE_FITS(type) _Static_assert(sizeof(type) <= FX_GEMM_STATE_BYTES, #type " too big")

typedef struct fx_gemm_thread {
    int tid;
    char *scratch;          /* thread_bytes of its own */
    int64_t r0, r1, c0, c1; /* its block of Y */
    int64_t mcb;            /* rows per M block */
    int64_t ncu;            /* N units per chunk */
    _Alignas(64) unsigned char state[FX_GEMM_STATE_BYTES];
} fx_gemm_thread;

typedef struct fx_gemm_nest fx_gemm_nest;
struct fx_gemm_nest {
    int64_t m, n, k;
    int mu, nu;          /* rows of X / weight rows per tile */
    int64_t mc;          /* rows per M block (balanced, whole mu) */
    int64_t nc;          /* N units per chunk */
    int64_t kc;          /* K block */
    int n_outer;         /* N chunk loop outside the M block loop */
    int m_micro_outer;   /* micro loops: M outer, N inner */
    int balance_n;       /* chunks balanced over the thread's units */
    int split_n_only;    /* threads always split N */
    int dynamic_m;       /* instead of the split: M blocks (mc rows, not
                            balanced) handed out dynamically, each over the
                            whole N; begin / end on every thread; the next
                            pass (fx_gemm_pass.next_*) is not meaningful */
    const void *ctx;     /* the path's plan */
    /* hooks (NULL: nothing) */
    void (*pack_once)(const void *ctx, int tid, int nt);
    void (*begin)(const void *ctx, fx_gemm_thread *t);
    void (*end)(const void *ctx, fx_gemm_thread *t);
    void (*chunk)(const void *ctx, fx_gemm_thread *t, int64_t n0, int64_t n1);
    void (*pass)(const void *ctx, fx_gemm_thread *t, const fx_gemm_pass *p);
    void (*panel)(const void *ctx, fx_gemm_thread *t, const fx_gemm_pass *p, int64_t ij);
    void (*tile)(const void *ctx, fx_gemm_thread *t, const fx_gemm_pass *p, int64_t i, int64_t j);
    /* scratch (fx_gemm_nest_reserve) */
    size_t shared_bytes, thread_bytes;
    char *shared;        /* shared_bytes, then threads × thread_bytes */
};

/* Reserve the context's shared scratch for nest on `threads` threads:
 * nest->shared is set; -1 when unavailable (nothing run). */
int fx_gemm_nest_reserve(const fx_kctx *kc, fx_gemm_nest *nest, int threads);
/* Run the nest on `threads` threads (scratch reserved first). */
void fx_gemm_nest_run(const fx_gemm_nest *nest, int threads);

#endif
