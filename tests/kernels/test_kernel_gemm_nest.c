/*
 * test_kernel_gemm_nest.c — the GEMM loop nest (simd/gemm/gemm_nest.h)
 * walked with recording hooks: for every loop order, split, chunking,
 * dynamic schedule and thread count, each mu × nu tile of Y is visited by
 * one thread, once per K block, K blocks in k order with the right
 * first / last flags, inside its pass and after its panel hook; pack_once
 * runs on every thread before any tile; each pass announces the thread's
 * next pass exactly (static schedules); every thread has its own scratch.
 * The numeric results of the drivers on the nest are checked by the other
 * kernel tests (every ISA against references, thread invariance).
 */
#include "simd/gemm/gemm_nest.h"
#include "tests/test.h"

#include <stdlib.h>

typedef struct rec {
    const fx_gemm_nest *nest;
    int64_t tiles_m, tiles_n;
    int64_t *next_pc; /* per tile: the pc its next visit must have */
    int *owner;       /* per tile: the thread that visited it (-1: none yet) */
    int packed, team; /* pack_once calls, team size they saw */
    int errors;
} rec;

typedef struct rec_state {
    int64_t panel;        /* index of the last panel hook */
    int have_next;        /* the last pass announced a next pass */
    fx_gemm_pass expect;  /* what it announced */
    const fx_gemm_pass *cur;
    int tid;
} rec_state;
FX_GEMM_STATE_FITS(rec_state);

static void fail(rec *r) { __atomic_fetch_add(&r->errors, 1, __ATOMIC_RELAXED); }

static void rec_pack_once(const void *ctx, int tid, int nt) {
    rec *r = (rec *)ctx;
    (void)tid;
    __atomic_fetch_add(&r->packed, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&r->team, nt, __ATOMIC_SEQ_CST);
}

static void rec_begin(const void *ctx, fx_gemm_thread *t) {
    rec_state *s = (rec_state *)(void *)t->state;
    s->panel = -1, s->have_next = 0, s->cur = NULL, s->tid = t->tid;
    if (((const rec *)ctx)->nest->thread_bytes) *(int *)(void *)t->scratch = t->tid;
}

static void rec_end(const void *ctx, fx_gemm_thread *t) {
    rec *r = (rec *)ctx;
    const rec_state *s = (const rec_state *)(const void *)t->state;
    if (!r->nest->dynamic_m && s->have_next) fail(r); /* announced a pass that never came */
    if (r->nest->thread_bytes && *(int *)(void *)t->scratch != t->tid) fail(r);
}

static void rec_pass(const void *ctx, fx_gemm_thread *t, const fx_gemm_pass *p) {
    rec *r = (rec *)ctx;
    const fx_gemm_nest *s = r->nest;
    rec_state *st = (rec_state *)(void *)t->state;
    if (!s->dynamic_m && st->have_next &&
        (st->expect.next_n0 != p->n0 || st->expect.next_n1 != p->n1 || st->expect.next_pc != p->pc ||
         st->expect.next_kcur != p->kcur))
        fail(r);
    st->have_next = p->has_next, st->expect = *p, st->cur = p;
    if (p->m0 % s->mu || p->n0 % s->nu || p->m0 >= p->m1 || p->n0 >= p->n1 || p->m1 > s->m || p->n1 > s->n) fail(r);
    if (p->first != (p->pc == 0) || p->last != (p->pc + p->kcur == s->k) || p->kcur <= 0) fail(r);
    st->panel = -1;
}

static void rec_panel(const void *ctx, fx_gemm_thread *t, const fx_gemm_pass *p, int64_t ij) {
    rec *r = (rec *)ctx;
    rec_state *st = (rec_state *)(void *)t->state;
    if (st->cur != p) fail(r);
    st->panel = ij;
}

static void rec_tile(const void *ctx, fx_gemm_thread *t, const fx_gemm_pass *p, int64_t i, int64_t j) {
    rec *r = (rec *)ctx;
    const fx_gemm_nest *s = r->nest;
    rec_state *st = (rec_state *)(void *)t->state;
    if (s->pack_once && __atomic_load_n(&r->packed, __ATOMIC_SEQ_CST) != __atomic_load_n(&r->team, __ATOMIC_SEQ_CST))
        fail(r);
    if (st->cur != p || i < p->m0 || i >= p->m1 || j < p->n0 || j >= p->n1 || i % s->mu || j % s->nu) {
        fail(r);
        return;
    }
    if (st->panel != (s->m_micro_outer ? i : j)) fail(r);
    const int64_t q = (i / s->mu) * r->tiles_n + j / s->nu;
    if (r->owner[q] >= 0 && !s->dynamic_m && r->owner[q] != st->tid) fail(r);
    r->owner[q] = st->tid;
    if (r->next_pc[q] != p->pc) fail(r);
    r->next_pc[q] = p->pc + p->kcur;
}

/* One configuration: returns the errors found. */
static int walk(int64_t m, int64_t n, int64_t k, int mu, int nu, int64_t mc, int64_t nc, int64_t kc, int flags,
                int threads, fx_kctx *kc_) {
    rec r = {0};
    fx_gemm_nest s = {
        .m = m, .n = n, .k = k, .mu = mu, .nu = nu, .mc = mc, .nc = nc, .kc = kc,
        .n_outer = flags & 1, .m_micro_outer = flags >> 1 & 1, .balance_n = flags >> 2 & 1,
        .split_n_only = flags >> 3 & 1, .dynamic_m = flags >> 4 & 1,
        .ctx = &r,
        .pack_once = flags >> 5 & 1 ? rec_pack_once : NULL,
        .begin = rec_begin, .end = rec_end, .pass = rec_pass, .panel = rec_panel, .tile = rec_tile,
        .shared_bytes = 64, .thread_bytes = flags >> 6 & 1 ? 64 : 0,
    };
    r.nest = &s;
    r.team = -1; /* no pack_once yet */
    r.tiles_m = (m + mu - 1) / mu, r.tiles_n = (n + nu - 1) / nu;
    r.next_pc = calloc((size_t)(r.tiles_m * r.tiles_n), sizeof *r.next_pc);
    r.owner = malloc((size_t)(r.tiles_m * r.tiles_n) * sizeof *r.owner);
    if (!r.next_pc || !r.owner || fx_gemm_nest_reserve(kc_, &s, threads)) {
        free(r.next_pc), free(r.owner);
        return 1;
    }
    for (int64_t q = 0; q < r.tiles_m * r.tiles_n; q++) r.owner[q] = -1;
    fx_gemm_nest_run(&s, threads);
    for (int64_t q = 0; q < r.tiles_m * r.tiles_n; q++) /* every tile through the whole K */
        if (r.next_pc[q] != k) r.errors++;
    if (s.pack_once && r.packed != r.team) r.errors++;
    free(r.next_pc), free(r.owner);
    return r.errors;
}

TEST(kernel_gemm_nest_visits) {
    fx_scratch *sc = fx_scratch_new(3);
    REQUIRE(sc);
    fx_kctx kc;
    fx_kctx_init(&kc, NULL, 3, sc);
    const int64_t ms[] = {1, 7, 45, 130}, ns[] = {1, 33, 200}, ks[] = {1, 70, 300};
    const int mus[] = {4, 14}, nus[] = {16, 32};
    int configs = 0, bad = 0;
#if defined(__aarch64__)
    const int flag_step[2] = {3, 11}; /* qemu: fewer */
#else
    const int flag_step[2] = {1, 5};  /* every flag set on the first tiling */
#endif
    for (int mi = 0; mi < 4; mi++)
        for (int ni = 0; ni < 3; ni++)
            for (int ki = 0; ki < 3; ki++)
                for (int u = 0; u < 2; u++)
                    for (int flags = 0; flags < 128; flags += flag_step[u])
                        for (int threads = 1; threads <= 3; threads++) {
                            const int mu = mus[u], nu = nus[u];
                            const int64_t mc = u ? 3 * mu : 1000, nc = u ? 2 : 1, kc_blk = ki == 2 ? 64 : 32;
                            const int e = walk(ms[mi], ns[ni], ks[ki], mu, nu, mc, nc, kc_blk, flags, threads, &kc);
                            CHECK_MSG(e == 0, "m %lld n %lld k %lld mu %d nu %d flags %#x threads %d: %d errors",
                                      (long long)ms[mi], (long long)ns[ni], (long long)ks[ki], mu, nu, flags, threads,
                                      e);
                            configs++, bad += e != 0;
                        }
    printf("    %d nest configurations walked, %d wrong\n", configs, bad);
    fx_scratch_free(sc);
}
