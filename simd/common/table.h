/*
 * table.h — the per-ISA kernel table type (simd-internal).
 *
 * One const fx_kernels per table id (simd/dispatch.h), assembled in
 * dispatch.c from the per-area tables each kernel family defines in its own
 * header (gemm.h, attention.h, rowops.h). Model code never sees this.
 */
#ifndef FX_SIMD_TABLE_H
#define FX_SIMD_TABLE_H

#include "simd/kernels.h"

struct fx_gemm_kernels;  /* gemm.h */
struct fx_attn_kernels;  /* attention.h */
struct fx_row_kernels;   /* rowops.h */
struct fx_quant_kernels; /* quant.h */

struct fx_kernels {
    int id;                              /* fx_table_id (simd/dispatch.h) */
    fx_isa isa;                          /* the level it needs */
    int bf16_dot;                        /* rounds activations to bf16 for bf16
                                            weights (vdpbf16ps or AMX tiles) */
    const char *name;                    /* "avx512bf16", "amx", ... */
    const struct fx_gemm_kernels *gemm;
    const struct fx_attn_kernels *attn;
    const struct fx_row_kernels *row;
    const struct fx_quant_kernels *quant;
};

/* Named scratch buffers, separate from the per-thread/shared GEMM and
 * attention buffers so that a kernel may hold one across a call to another
 * family (conv2d keeps its im2col strip while fx_linear packs panels).
 * Grows to >= bytes (64-byte aligned) and returns it; NULL on allocation
 * failure. Call outside parallel regions. */
typedef enum fx_scratch_slot {
    FX_SLOT_IM2COL = 0, /* conv2d.c: packed weights of a one-shot fx_conv2d */
    FX_SLOT_CONVW,      /* conv2d.c: weight reordered to [cout, kh, kw, cin] */
    FX_SLOT_ROWOPS,     /* groupnorm.c: partial sums, per-channel factors */
    FX_SLOT_DELTA,      /* gemm/delta.c: a layer's additive terms (scaled gate, low-rank products) */
    FX_SLOT_COUNT
} fx_scratch_slot;
void *fx_scratch_slot_get(fx_scratch *s, fx_scratch_slot slot, size_t bytes);

/* Thread id / count inside a parallel region, also without OpenMP. */
#ifdef _OPENMP
#include <omp.h>
static inline int fx_thread_id(void) { return omp_get_thread_num(); }
static inline int fx_thread_count(void) { return omp_get_num_threads(); }
#else
static inline int fx_thread_id(void) { return 0; }
static inline int fx_thread_count(void) { return 1; }
#endif

#endif
