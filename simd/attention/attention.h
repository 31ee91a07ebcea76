/*
 * attention.h — the attention kernel family (simd-internal): one driver,
 * per-ISA hooks (the BLIS pattern of simd/gemm: the loops written once in
 * attention.c, the packing and microkernels named by each ISA's table).
 *
 * The family defines one const table per ISA it implements, declared
 * below and wired into the kernel tables by dispatch.c.
 *
 * Work decomposition (attention.c, the same for every ISA):
 *  - A task is one kv head g and a block of consecutive query positions.
 *    Its "rows" are the (query head, position) pairs of the GQA group that
 *    shares g: row r ↔ position p0 + r / group, head g·group + r % group.
 *    So one packed K/V tile serves all the query heads that read it.
 *  - K and V are packed once per call (not once per task) by the table's
 *    pack_kv into a shared buffer, one key tile at a time in the table's
 *    tile layout: the kv heads are processed in phases of as many heads as
 *    fit a memory budget; in each phase all threads first pack those
 *    heads, then compute their tasks. Rows of the activations are usually
 *    4 KiB-multiples apart (one page and the same L1 sets per row), so
 *    reading them once per call instead of once per query block saves TLB
 *    walks and cache conflicts.
 *  - A task (run_task) carves its thread's scratch (fx_attn_bufs), packs
 *    the Q of its rows (pack_q), sets the running max m = −inf and sum
 *    l = 0, and walks the key tiles in increasing order (a fixed order:
 *    results do not depend on the thread count). Per tile it can see:
 *      scores   S [kt][R] = K_tile · Qᵀ (rows of the task along a row of S)
 *      mask     fx_attn_mask_tile, only on partly visible tiles (−inf)
 *      softmax  the online update: m_new = max(m, max S), α = 2^(m − m_new),
 *               p = 2^(s − m_new) (into S, or the table's P layout),
 *               l = α·l + Σp
 *      pv       O = α·O + P·V_tile (O: R·Dp floats, the table's layout)
 *    and at the end store writes out = O / l (zero rows where l = 0).
 *    Tiles no row can see (causal, all keys padded) are skipped.
 *  - Scores are kept in the log2 domain: Q is multiplied by scale·log2(e)
 *    when packed, so p = 2^(s − m).
 *
 * Tables: scalar (the reference, libm exp2f), avx2, neon, avx512 (f32 FMA
 * products, sharing the f32 layout and packing of attention_f32.c), and
 * the bf16-product avx512bf16 (vdpbf16ps) and amx (tiles). The SIMD
 * tables' online softmax is written once over the vec_*.h vocabulary
 * (attention_simd.h).
 */
#ifndef FX_ATTN_H
#define FX_ATTN_H

#include "simd/common/arch.h"
#include "simd/common/table.h"

/* Visibility of a key tile, from the key mask and the end of the keys. */
enum { FX_ATTN_KEYS_NONE = 0, FX_ATTN_KEYS_ALL = 1, FX_ATTN_KEYS_SOME = 2 };

/* Bytes of a table's packed pieces (64-byte multiples not required). */
typedef struct fx_attn_layout {
    size_t q_bytes;      /* qp: Q of one task (R rows)                     */
    size_t p_bytes;      /* pp: P of one key tile; 0 = P overwrites S      */
    size_t k_tile_bytes; /* one key tile of packed K                       */
    size_t v_tile_bytes; /* one key tile of packed V                       */
} fx_attn_layout;

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
    fx_attn_layout lay;     /* the table's packed sizes for this call     */
    /* Packed K/V of kv heads [kv_g0, kv_g0 + heads in phase), each
     * kv_head_bytes long; V starts v_offset bytes into a head. */
    char *kv;
    size_t kv_head_bytes, v_offset;
    int kv_g0;
} fx_attn_plan;

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

/* Rows of Q read, and rows of O written, FX_ATTN_PF_ROWS ahead are
 * prefetched: they are usually a page apart (no hardware prefetch). */
enum { FX_ATTN_PF_ROWS = 4 };
static inline void fx_attn_prefetch_row(const void *row, int bytes, int for_write) {
    for (int e = 0; e < bytes; e += 64) {
        if (for_write) __builtin_prefetch((const char *)row + e, 1, 3);
        else __builtin_prefetch((const char *)row + e, 0, 3);
    }
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

/* A task's scratch (one 64-byte aligned piece each, carved by attention.c)
 * and the current key tile. R = rows_pad, Dp = d rounded up to 16. */
typedef struct fx_attn_bufs {
    void *qp;             /* Q of the task's rows · qscale, the table's layout */
    void *pp;             /* P of the tile, the table's layout (NULL: P overwrites S) */
    float *s;             /* [kt][R] scores (log2 domain), then p          */
    float *o;             /* running unnormalised output, R·Dp floats, the
                             table's layout; free until the first tile
                             (pack_q may stage Q there)                    */
    float *m, *l, *alpha; /* [R] running max, running sum, rescale factor  */
    const void *kp, *vp;  /* the current key tile of packed K and of V     */
    int R, d, dp, kt;
} fx_attn_bufs;

/* One ISA's attention: its geometry, packing and tile microkernels; the
 * driver (attention.c) owns every loop. */
struct fx_attn_kernels {
    const char *name;  /* "avx512 f32 fma", ... (for --cpu-info)         */
    int qt;            /* preferred rows per task                        */
    int row_align;     /* rows are padded to a multiple of this          */
    int kt;            /* keys per tile                                  */
    fx_attn_layout (*layout)(const fx_attn_plan *p);
    /* Key tile kb of kv head g → k (k_tile_bytes) and v (v_tile_bytes),
     * zeros for keys past sk. Tiles no row can see are never packed. */
    void (*pack_kv)(const fx_attn_plan *p, int g, int64_t kb, void *k, void *v);
    /* Q of the task's rows times qscale into b->qp (zero for rows >= rows). */
    void (*pack_q)(const fx_attn_plan *p, const fx_attn_task *k, const fx_attn_bufs *b);
    /* b->s [kt][R] = K tile · Qᵀ. */
    void (*scores)(const fx_attn_bufs *b);
    /* The online softmax of the tile: m, alpha, l, and P (in s or pp). */
    void (*softmax)(const fx_attn_bufs *b);
    /* O = α·O + P·V_tile; on the first tile O = P·V_tile (O holds nothing). */
    void (*pv)(const fx_attn_bufs *b, int first);
    /* out[row] = O[row] / l[row] for the task's rows; zeros for rows that
     * saw no key (any == 0: no tile visited, or l == 0). */
    void (*store)(const fx_attn_plan *p, const fx_attn_task *k, const fx_attn_bufs *b, int any);
    /* Run by every thread before its first and after its last task (the
     * AMX tile configuration); NULL: nothing. */
    void (*thread_begin)(void);
    void (*thread_end)(void);
};

/* The f32 layout (attention_f32.c) of the tables whose products read f32
 * Q, K and V (scalar, avx2, neon, avx512):
 *   qp [d][R]      Q · qscale transposed (row r of the task in column r)
 *   K tile [kt][d] rows of keys;  V tile [kt][Dp] (zeros past d)
 *   O [R][Dp]      row r of the task at o + r·Dp
 * P overwrites S. */
fx_attn_layout fx_attn_f32_layout(const fx_attn_plan *p);
void fx_attn_f32_pack_kv(const fx_attn_plan *p, int g, int64_t kb, void *k, void *v);
void fx_attn_f32_pack_q(const fx_attn_plan *p, const fx_attn_task *k, const fx_attn_bufs *b);
void fx_attn_f32_store(const fx_attn_plan *p, const fx_attn_task *k, const fx_attn_bufs *b, int any);

/* Tables. The scalar table always exists and is the fallback. */
extern const struct fx_attn_kernels fx_attn_scalar;

#if FX_X86
extern const struct fx_attn_kernels fx_attn_avx2;
extern const struct fx_attn_kernels fx_attn_avx512;
extern const struct fx_attn_kernels fx_attn_avx512bf16;
extern const struct fx_attn_kernels fx_attn_amx;
#endif

#if FX_ARM
extern const struct fx_attn_kernels fx_attn_neon;
#endif

#endif
