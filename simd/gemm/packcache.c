/*
 * packcache.c — whole weights packed once for a gemm path (see kernels.h,
 * fx_packcache_*), and their lookup by fx_linear.
 *
 * A packed weight is the path's B micro-panels for the whole K, one per NR
 * outputs, each 64-byte aligned: panel j (outputs j·NR..) at
 * j·panel_bytes, its K block from k0 at k0/kpair·NR·kpair·elem bytes in;
 * gemm.c reads them in place instead of packing per call.
 *
 * Lookup: a short list searched by (address, dtype, n, k, ld, path); a hit
 * must also match a fingerprint of sampled weight bytes, so a different
 * tensor that came to live at a released one's address is packed afresh
 * rather than read stale (the owner still clears the cache when it frees
 * weights: the fingerprint is a safety net, not the contract).
 */
#include "gemm.h"

#include <stdlib.h>
#include <string.h>

typedef struct pack_entry {
    const void *data;
    fx_dtype dtype;
    int64_t n, k, ld;
    const fx_gemm_path *path;
    uint64_t fingerprint;
    void *packed;
    size_t bytes;
} pack_entry;

struct fx_packcache {
    pack_entry *e;
    size_t count, cap;
    size_t bytes, budget;
    long hits, packed, over_budget, stale;
};

fx_packcache *fx_packcache_new(size_t budget_bytes) {
    fx_packcache *c = calloc(1, sizeof *c);
    if (c) c->budget = budget_bytes;
    return c;
}

void fx_packcache_clear(fx_packcache *c) {
    if (!c) return;
    for (size_t i = 0; i < c->count; i++) free(c->e[i].packed);
    c->count = 0;
    c->bytes = 0;
}

void fx_packcache_free(fx_packcache *c) {
    if (!c) return;
    fx_packcache_clear(c);
    free(c->e);
    free(c);
}

void fx_packcache_stats_get(const fx_packcache *c, fx_packcache_stats *st) {
    memset(st, 0, sizeof *st);
    if (!c) return;
    st->bytes = c->bytes, st->entries = c->count, st->budget = c->budget;
    st->hits = c->hits, st->packed = c->packed, st->over_budget = c->over_budget, st->stale = c->stale;
}

/* FNV-1a over 16 rows spread across the weight (up to 32 bytes from the
 * start of each and 32 before its end). */
static uint64_t fingerprint(const fx_weight *w) {
    const size_t es = fx_dtype_size(w->dtype), row = (size_t)w->k * es;
    const size_t take = row < 32 ? row : 32;
    uint64_t h = 1469598103934665603ull;
    for (int s = 0; s < 16; s++) {
        const int64_t r = w->n > 1 ? (w->n - 1) * s / 15 : 0;
        const unsigned char *p = (const unsigned char *)w->data + (size_t)r * (size_t)w->ld * es;
        for (size_t i = 0; i < take; i++) h = (h ^ p[i]) * 1099511628211ull;
        for (size_t i = row - take; i < row; i++) h = (h ^ p[i]) * 1099511628211ull;
    }
    return h;
}

size_t fx_gemm_packed_panel_bytes(const fx_gemm_path *p, int64_t k) {
    const int64_t ks = (k + p->kpair - 1) / p->kpair;
    return ((size_t)ks * (size_t)p->nr * (size_t)p->kpair * (size_t)p->elem + 63) & ~(size_t)63;
}

/* Pack all of w into dst (panels of NR outputs, panel_bytes apart). */
static void pack_weight(const fx_gemm_path *p, const fx_weight *w, char *dst, size_t panel_bytes, int threads) {
    const int64_t panels = (w->n + p->nr - 1) / p->nr;
    const size_t es = fx_dtype_size(w->dtype);
    const fx_gemm_pack_w_fn pack = p->pack_w[w->dtype];
    (void)threads; /* unused without OpenMP */
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && panels > 1)
    for (int64_t j = 0; j < panels; j++) {
        const int64_t cols = w->n - j * p->nr < p->nr ? w->n - j * p->nr : p->nr;
        pack(p, cols, w->k, (const char *)w->data + (size_t)(j * p->nr) * (size_t)w->ld * es, w->ld,
             dst + (size_t)j * panel_bytes);
    }
}

const void *fx_packcache_get(fx_packcache *c, const fx_gemm_path *p, const fx_weight *w, int threads) {
    if (!c || !p->prepack || !p->pack_w[w->dtype]) return NULL;
    const uint64_t fp = fingerprint(w);
    for (size_t i = 0; i < c->count; i++) {
        pack_entry *e = &c->e[i];
        if (e->data != w->data || e->dtype != w->dtype || e->n != w->n || e->k != w->k || e->ld != w->ld ||
            e->path != p)
            continue;
        if (e->fingerprint == fp) {
            c->hits++;
            return e->packed;
        }
        /* same place, other contents: a released weight's address reused */
        c->stale++;
        c->bytes -= e->bytes;
        free(e->packed);
        c->e[i] = c->e[--c->count];
        break;
    }
    const size_t panel = fx_gemm_packed_panel_bytes(p, w->k);
    const size_t bytes = (size_t)((w->n + p->nr - 1) / p->nr) * panel;
    if (bytes > c->budget || c->bytes > c->budget - bytes) {
        c->over_budget++;
        return NULL;
    }
    if (c->count == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        pack_entry *e = realloc(c->e, cap * sizeof *e);
        if (!e) return NULL;
        c->e = e, c->cap = cap;
    }
    void *packed = aligned_alloc(64, bytes ? bytes : 64);
    if (!packed) return NULL;
    pack_weight(p, w, packed, panel, threads);
    c->e[c->count++] = (pack_entry){w->data, w->dtype, w->n, w->k, w->ld, p, fp, packed, bytes};
    c->bytes += bytes;
    c->packed++;
    return packed;
}
