/*
 * attention.h — per-ISA tables of the attention kernel family (simd-internal).
 *
 * The family defines one const table per ISA it implements and publishes
 * each through a macro FX_ATTN_TABLE_<ISA> (pointer to the table) that
 * dispatch.c wires into the kernel tables; an undefined macro means "not
 * implemented for this ISA" and the scalar table is used instead.
 *
 * Work decomposition (shared by every ISA, driven by attention.c):
 *  - A task is one kv head g and a block of consecutive query positions.
 *    Its "rows" are the (query head, position) pairs of the GQA group that
 *    shares g: row r ↔ position p0 + r / group, head g·group + r % group.
 *    So one packed K/V tile serves all the query heads that read it.
 *  - A task walks the key tiles [j0, j0 + kt) in increasing order (a fixed
 *    order: results do not depend on the thread count) keeping, per row, a
 *    running max m, a running sum l and an accumulator O[rows, d] that is
 *    rescaled by 2^(m_old − m_new) whenever the max grows (online softmax).
 *  - Scores are kept in the log2 domain: Q is multiplied by scale·log2(e)
 *    when packed, so p = 2^(s − m).
 *  - Tiles no row can see (causal, all keys padded) are skipped; tiles only
 *    partly visible go through fx_attn_mask_tile, which writes −inf.
 *  - Tables with pack_kv get K and V packed once per call (not once per
 *    task) into a shared buffer in their own tile layout: the kv heads are
 *    processed in phases of as many heads as fit a memory budget; in each
 *    phase all threads first pack those heads, then compute their tasks.
 *    Rows of the activations are usually 4 KiB-multiples apart (one page
 *    and the same L1 sets per row), so reading them once per call instead
 *    of once per query block saves TLB walks and cache conflicts.
 */
#ifndef FX_ATTN_H
#define FX_ATTN_H

#include "simd/common/arch.h"
#include "simd/common/table.h"

/* Visibility of a key tile, from the key mask and the end of the keys. */
enum { FX_ATTN_KEYS_NONE = 0, FX_ATTN_KEYS_ALL = 1, FX_ATTN_KEYS_SOME = 2 };

/* Everything a task needs, computed once per call by attention.c. */
typedef struct fx_attn_plan {
    fx_attn_args a;
    int group;              /* hq / hkv: query heads per kv head          */
    int pos_per_task;       /* query positions per task                   */
    int rows;               /* pos_per_task · group                       */
    int rows_pad;           /* rows rounded up to the table's row_align   */
    int kt;                 /* keys per tile (the table's kt)             */
    int64_t tiles_per_head; /* ceil(sq / pos_per_task)                    */
    int64_t ntasks;         /* hkv · tiles_per_head                       */
    int64_t nkt;            /* key tiles: ceil(sk / kt)                   */
    const uint8_t *key_tiles; /* [nkt] FX_ATTN_KEYS_* per key tile        */
    float qscale;           /* scale · log2(e), applied to Q when packed  */
    /* Packed K/V of kv heads [kv_g0, kv_g0 + heads in phase), each
     * kv_head_bytes long (tables with pack_kv only). */
    char *kv;
    size_t kv_head_bytes;
    int kv_g0;
} fx_attn_plan;

/* The packed K/V block of kv head g (in the current phase). */
static inline const void *fx_attn_kv_head(const fx_attn_plan *p, int g) {
    return p->kv + (size_t)(g - p->kv_g0) * p->kv_head_bytes;
}

struct fx_attn_kernels {
    const char *name;  /* "avx512 f32 fma", ... (for --cpu-info)         */
    int qt;            /* preferred rows per task                        */
    int row_align;     /* rows are padded to a multiple of this          */
    int kt;            /* keys per tile                                  */
    /* Per-thread scratch bytes one task needs. */
    size_t (*scratch_bytes)(const fx_attn_plan *p);
    /* Optional (NULL = the task reads K/V itself): bytes of one kv head's
     * packed K/V (a multiple of 64), and packing of its key tiles
     * [kb0, kb1) into dst = that head's block. */
    size_t (*kv_head_bytes)(const fx_attn_plan *p);
    void (*pack_kv)(const fx_attn_plan *p, int g, int64_t kb0, int64_t kb1, void *dst);
    /* Compute task t completely (all its rows, all key tiles). */
    void (*run_task)(const fx_attn_plan *p, int64_t t, void *scratch);
};

/* The rows of task t. */
typedef struct fx_attn_task {
    int g;       /* kv head                                   */
    int64_t p0;  /* first query position                      */
    int np;      /* positions in this task (<= pos_per_task)  */
    int rows;    /* np · group valid rows (<= p->rows)        */
} fx_attn_task;

static inline fx_attn_task fx_attn_task_of(const fx_attn_plan *p, int64_t t) {
    fx_attn_task k;
    k.g = (int)(t / p->tiles_per_head);
    k.p0 = (t % p->tiles_per_head) * p->pos_per_task;
    int64_t left = p->a.sq - k.p0;
    k.np = left < p->pos_per_task ? (int)left : p->pos_per_task;
    k.rows = k.np * p->group;
    return k;
}

/* Row r of a task → pointer to its query / output vector [d]. */
static inline const float *fx_attn_q_row(const fx_attn_plan *p, const fx_attn_task *k, int r) {
    int64_t pos = k->p0 + r / p->group;
    int h = k->g * p->group + r % p->group;
    return p->a.q + pos * p->a.ldq + (int64_t)h * p->a.d;
}
static inline float *fx_attn_o_row(const fx_attn_plan *p, const fx_attn_task *k, int r) {
    int64_t pos = k->p0 + r / p->group;
    int h = k->g * p->group + r % p->group;
    return p->a.o + pos * p->a.ldo + (int64_t)h * p->a.d;
}

/* How the task's rows see key tile kb. */
typedef enum fx_attn_vis {
    FX_ATTN_SKIP = 0,    /* no row sees any key: skip the tile            */
    FX_ATTN_FULL,        /* every row sees all kt keys: no masking        */
    FX_ATTN_PARTIAL,     /* compute, then fx_attn_mask_tile               */
    FX_ATTN_DONE         /* causal: this and every later tile is hidden   */
} fx_attn_vis;

static inline fx_attn_vis fx_attn_tile_vis(const fx_attn_plan *p, const fx_attn_task *k,
                                           int64_t kb) {
    int64_t j0 = kb * p->kt;
    int partial = 0;
    if (p->a.causal) {
        int64_t lo = k->p0 + p->a.causal_offset;          /* first row's last key */
        int64_t hi = k->p0 + k->np - 1 + p->a.causal_offset; /* last row's last key */
        if (j0 > hi) return FX_ATTN_DONE;
        if (j0 + p->kt - 1 > lo) partial = 1;
    }
    switch (p->key_tiles[kb]) {
    case FX_ATTN_KEYS_NONE: return FX_ATTN_SKIP;
    case FX_ATTN_KEYS_SOME: return FX_ATTN_PARTIAL;
    default: return partial ? FX_ATTN_PARTIAL : FX_ATTN_FULL;
    }
}

/* Set the scores of invisible (key, row) pairs of tile kb to −inf.
 * s: [kt][lds] log2-domain scores, row r of the task in column r. */
void fx_attn_mask_tile(const fx_attn_plan *p, const fx_attn_task *k, int64_t kb, float *s,
                       int lds);

/* Tables. The scalar table always exists and is the fallback. */
extern const struct fx_attn_kernels fx_attn_scalar;
#define FX_ATTN_TABLE_SCALAR (&fx_attn_scalar)

#if FX_X86
extern const struct fx_attn_kernels fx_attn_avx2;
#define FX_ATTN_TABLE_AVX2 (&fx_attn_avx2)
extern const struct fx_attn_kernels fx_attn_avx512;
#define FX_ATTN_TABLE_AVX512 (&fx_attn_avx512)
extern const struct fx_attn_kernels fx_attn_avx512bf16;
#define FX_ATTN_TABLE_AVX512BF16 (&fx_attn_avx512bf16)
extern const struct fx_attn_kernels fx_attn_amx;
#define FX_ATTN_TABLE_AMX (&fx_attn_amx)
#endif

#if FX_ARM
extern const struct fx_attn_kernels fx_attn_neon;
#define FX_ATTN_TABLE_NEON (&fx_attn_neon)
#endif

#endif
