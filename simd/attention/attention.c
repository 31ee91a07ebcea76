/*
 * attention.c — fx_attention, the one driver of every ISA: argument
 * checks, the task plan, scratch, the parallel K/V packing and loop over
 * tasks (kv head × query block), and the task itself: the walk over the
 * key tiles that calls the table's hooks (attention.h). The per-ISA files
 * (attention_<isa>.c) hold only packing and tile microkernels.
 */
#include "attention.h"

#include <math.h>
#include <string.h>

/* Packed K/V held at once (one phase of kv heads; at least one head). */
#define KV_BUDGET_BYTES ((size_t)16 << 20)
/* Key tiles per packing work item. */
#define PACK_CHUNK_TILES 8

static const struct fx_attn_kernels *attn_table(const fx_kctx *kc) {
    const struct fx_attn_kernels *t = kc && kc->k ? kc->k->attn : NULL;
    return t ? t : &fx_attn_scalar;
}

static flux_status check_args(const fx_attn_args *a, fx_err *err) {
    if (!a) return fx_fail(err, FLUX_ERR_INVALID_ARG, "fx_attention: args is NULL");
    if (a->sq < 0 || a->sk < 0)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "fx_attention: sequence lengths must be >= 0 (sq=%lld, sk=%lld)",
                       (long long)a->sq, (long long)a->sk);
    if (a->hq < 1 || a->hkv < 1 || a->hq % a->hkv)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "fx_attention: query heads (hq=%d) must be a positive multiple of kv "
                       "heads (hkv=%d)", a->hq, a->hkv);
    if (a->d < 2 || a->d % 2)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "fx_attention: head dim d=%d must be even and >= 2", a->d);
    if (a->d > 65536) /* keeps every per-task offset within int */
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "fx_attention: head dim d=%d exceeds the supported 65536", a->d);
    if (!(a->scale == a->scale) || isinf(a->scale))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "fx_attention: scale %g is not finite",
                       (double)a->scale);
    int64_t qw = (int64_t)a->hq * a->d, kw = (int64_t)a->hkv * a->d;
    if (a->sq > 0) {
        if (!a->q || !a->o)
            return fx_fail(err, FLUX_ERR_INVALID_ARG, "fx_attention: %s is NULL",
                           !a->q ? "q" : "o");
        if (a->ldq < qw || a->ldo < qw)
            return fx_fail(err, FLUX_ERR_INVALID_ARG,
                           "fx_attention: ldq=%lld / ldo=%lld must be >= hq*d = %lld",
                           (long long)a->ldq, (long long)a->ldo, (long long)qw);
    }
    if (a->sk > 0) {
        if (!a->k || !a->v)
            return fx_fail(err, FLUX_ERR_INVALID_ARG, "fx_attention: %s is NULL",
                           !a->k ? "k" : "v");
        if (a->ldk < kw || a->ldv < kw)
            return fx_fail(err, FLUX_ERR_INVALID_ARG,
                           "fx_attention: ldk=%lld / ldv=%lld must be >= hkv*d = %lld",
                           (long long)a->ldk, (long long)a->ldv, (long long)kw);
    }
    return FLUX_OK;
}

static size_t up64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* The next scratch piece of `bytes` at *off, 64-byte aligned (NULL when
 * base is NULL: only measuring). */
static void *piece(void *base, size_t *off, size_t bytes) {
    void *at = base && bytes ? (char *)base + *off : NULL;
    *off += up64(bytes);
    return at;
}

/* One task's scratch: qp, pp (the table's sizes), s [kt][R], o [R·Dp],
 * m, l, alpha [R] (base may be NULL to measure); returns bytes used. */
static size_t carve(const fx_attn_plan *p, void *base, fx_attn_bufs *b) {
    const size_t R = (size_t)p->rows_pad, d = (size_t)p->a.d, dp = (d + 15) & ~(size_t)15;
    size_t off = 0;
    b->R = (int)R;
    b->d = (int)d;
    b->dp = (int)dp;
    b->kt = p->kt;
    b->qp = piece(base, &off, p->lay.q_bytes);
    b->pp = piece(base, &off, p->lay.p_bytes);
    b->s = piece(base, &off, sizeof(float) * (size_t)p->kt * R);
    b->o = piece(base, &off, sizeof(float) * R * dp);
    b->m = piece(base, &off, sizeof(float) * R);
    b->l = piece(base, &off, sizeof(float) * R);
    b->alpha = piece(base, &off, sizeof(float) * R);
    b->kp = b->vp = NULL;
    return off;
}

/* Task t: its rows against every key tile they can see, in order. */
static void run_task(const struct fx_attn_kernels *t, const fx_attn_plan *p, int64_t ti, void *scratch) {
    const fx_attn_task k = fx_attn_task_of(p, ti);
    fx_attn_bufs b;
    carve(p, scratch, &b);
    const char *kv = p->kv + (size_t)(k.g - p->kv_g0) * p->kv_head_bytes;
    t->pack_q(p, &k, &b);
    for (int r = 0; r < b.R; r++) {
        b.m[r] = -INFINITY;
        b.l[r] = 0.0f;
    }
    int first = 1;
    for (int64_t kb = 0; kb < p->nkt; kb++) {
        const fx_attn_vis vis = fx_attn_tile_vis(p, &k, kb);
        if (vis == FX_ATTN_DONE) break;
        if (vis == FX_ATTN_SKIP) continue;
        b.kp = kv + (size_t)kb * p->lay.k_tile_bytes;
        b.vp = kv + p->v_offset + (size_t)kb * p->lay.v_tile_bytes;
        t->scores(&b);
        if (vis == FX_ATTN_PARTIAL) fx_attn_mask_tile(p, &k, kb, b.s, b.R);
        t->softmax(&b);
        t->pv(&b, first);
        first = 0;
    }
    t->store(p, &k, &b, !first);
}

/* Every output row is zero (no keys at all). */
static void zero_output(const fx_attn_args *a) {
    for (int64_t i = 0; i < a->sq; i++)
        memset(a->o + i * a->ldo, 0, sizeof(float) * (size_t)a->hq * (size_t)a->d);
}

flux_status fx_attention(const fx_kctx *kc, const fx_attn_args *a, fx_err *err) {
    flux_status st = check_args(a, err);
    if (st != FLUX_OK) return st;
    if (!kc || !kc->scratch)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "fx_attention: kernel context has no scratch");
    if (a->sq == 0) return FLUX_OK;
    if (a->sk == 0) {
        zero_output(a);
        return FLUX_OK;
    }
    const struct fx_attn_kernels *t = attn_table(kc);

    fx_attn_plan p;
    memset(&p, 0, sizeof p);
    p.a = *a;
    p.group = a->hq / a->hkv;
    p.pos_per_task = t->qt / p.group > 0 ? t->qt / p.group : 1;
    if (p.pos_per_task > a->sq) p.pos_per_task = (int)a->sq;
    p.rows = p.pos_per_task * p.group;
    p.rows_pad = (p.rows + t->row_align - 1) / t->row_align * t->row_align;
    p.kt = t->kt;
    p.tiles_per_head = (a->sq + p.pos_per_task - 1) / p.pos_per_task;
    p.ntasks = p.tiles_per_head * a->hkv;
    p.nkt = (a->sk + p.kt - 1) / p.kt;
    p.qscale = (float)((double)a->scale * 1.4426950408889634074);

    /* Shared scratch: the per-key-tile visibility (from key_mask and sk),
     * then the packed K/V of one phase of kv heads. */
    const size_t vis_bytes = up64((size_t)p.nkt);
    p.lay = t->layout(&p);
    p.v_offset = up64((size_t)p.nkt * p.lay.k_tile_bytes);
    p.kv_head_bytes = p.v_offset + up64((size_t)p.nkt * p.lay.v_tile_bytes);
    const size_t fit = KV_BUDGET_BYTES / p.kv_head_bytes;
    const int heads_per_phase = fit < 1 ? 1 : fit < (size_t)a->hkv ? (int)fit : a->hkv;
    fx_attn_bufs measure;
    const size_t per_thread = carve(&p, NULL, &measure);
    const size_t shared = vis_bytes + (size_t)heads_per_phase * p.kv_head_bytes;
    if (fx_scratch_reserve(kc->scratch, per_thread, shared) != 0)
        return fx_fail(err, FLUX_ERR_NOMEM,
                       "fx_attention: cannot allocate scratch (%zu bytes per thread, %zu shared)",
                       per_thread, shared);
    uint8_t *key_tiles = fx_scratch_shared(kc->scratch);
    for (int64_t kb = 0; kb < p.nkt; kb++) {
        int64_t j0 = kb * p.kt, j1 = j0 + p.kt < a->sk ? j0 + p.kt : a->sk;
        int64_t seen = j1 - j0;
        if (a->key_mask) {
            seen = 0;
            for (int64_t j = j0; j < j1; j++) seen += a->key_mask[j] != 0;
        }
        key_tiles[kb] = seen == 0       ? FX_ATTN_KEYS_NONE
                        : seen == p.kt  ? FX_ATTN_KEYS_ALL
                                        : FX_ATTN_KEYS_SOME;
    }
    p.key_tiles = key_tiles;
    p.kv = (char *)key_tiles + vis_bytes;

#ifdef _OPENMP
    const int threads = kc->threads > 0 ? kc->threads : 1;
#endif
    fx_scratch *scratch = kc->scratch;
    const int64_t pack_chunk = PACK_CHUNK_TILES;
    const int64_t chunks_per_head = (p.nkt + pack_chunk - 1) / pack_chunk;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1)
#endif
    {
        void *mine = fx_scratch_thread(scratch, fx_thread_id());
        if (t->thread_begin) t->thread_begin();
        for (int g0 = 0; g0 < a->hkv; g0 += heads_per_phase) {
            const int g1 = g0 + heads_per_phase < a->hkv ? g0 + heads_per_phase : a->hkv;
#ifdef _OPENMP
#pragma omp single
#endif
            p.kv_g0 = g0; /* implicit barrier: every thread sees it */
            const int64_t items = (int64_t)(g1 - g0) * chunks_per_head;
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
            for (int64_t it = 0; it < items; it++) {
                const int g = g0 + (int)(it / chunks_per_head);
                const int64_t kb0 = it % chunks_per_head * pack_chunk;
                const int64_t kb1 = kb0 + pack_chunk < p.nkt ? kb0 + pack_chunk : p.nkt;
                char *head = p.kv + (size_t)(g - g0) * p.kv_head_bytes;
                for (int64_t kb = kb0; kb < kb1; kb++)
                    if (p.key_tiles[kb] != FX_ATTN_KEYS_NONE) /* else never read */
                        t->pack_kv(&p, g, kb, head + (size_t)kb * p.lay.k_tile_bytes,
                                   head + p.v_offset + (size_t)kb * p.lay.v_tile_bytes);
            }
            /* Dynamic scheduling balances causal tasks; each task is
             * computed by one thread in a fixed key order, so results do
             * not depend on the schedule or the thread count. */
            const int64_t t0 = (int64_t)g0 * p.tiles_per_head, t1 = (int64_t)g1 * p.tiles_per_head;
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
            for (int64_t ti = t0; ti < t1; ti++) run_task(t, &p, ti, mine);
        }
        if (t->thread_end) t->thread_end();
    }
    return FLUX_OK;
}
