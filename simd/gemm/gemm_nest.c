/*
 * gemm_nest.c — the GEMM loop nest of every driver (gemm_nest.h): the
 * thread split, the N chunks, M blocks and K blocks, the micro loops and
 * the scratch. The paths' hooks do the rest.
 */
#include "gemm_nest.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t v, int64_t a) { return ceil_div(v, a) * a; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

int fx_gemm_nest_reserve(const fx_kctx *kc, fx_gemm_nest *nest, int threads) {
    const size_t total = nest->shared_bytes + (size_t)threads * nest->thread_bytes;
    if (!kc->scratch || fx_scratch_reserve(kc->scratch, 0, total)) return -1;
    nest->shared = fx_scratch_shared(kc->scratch);
    return 0;
}

/* The thread's pass after (m0, n0, pc) in nest order, into p->next_*. */
static void next_pass(const fx_gemm_nest *s, const fx_gemm_thread *t, int64_t m0, int64_t n0, fx_gemm_pass *p) {
    const int64_t chunk = t->ncu * s->nu;
    int64_t npc = p->pc + s->kc, nm0 = m0, nn0 = n0;
    if (s->n_outer) {
        if (npc >= s->k) npc = 0, nm0 = m0 + t->mcb;
        if (nm0 >= t->r1) nm0 = t->r0, nn0 = n0 + chunk;
        p->has_next = nn0 < t->c1;
    } else {
        if (npc >= s->k) npc = 0, nn0 = n0 + chunk;
        if (nn0 >= t->c1) nn0 = t->c0, nm0 = m0 + t->mcb;
        p->has_next = nm0 < t->r1;
    }
    p->next_n0 = nn0, p->next_n1 = min64(t->c1, nn0 + chunk);
    p->next_pc = npc, p->next_kcur = min64(s->kc, s->k - npc);
}

/* The K blocks of one M block × N chunk, each with its micro loops. */
static void k_blocks(const fx_gemm_nest *s, fx_gemm_thread *t, int64_t m0, int64_t n0) {
    fx_gemm_pass p;
    p.m0 = m0, p.m1 = min64(t->r1, m0 + t->mcb);
    p.n0 = n0, p.n1 = min64(t->c1, n0 + t->ncu * s->nu);
    for (p.pc = 0; p.pc < s->k; p.pc += s->kc) {
        p.kcur = min64(s->kc, s->k - p.pc);
        p.first = p.pc == 0, p.last = p.pc + p.kcur == s->k;
        next_pass(s, t, m0, n0, &p);
        if (s->pass) s->pass(s->ctx, t, &p);
        if (s->m_micro_outer) {
            for (int64_t i = p.m0; i < p.m1; i += s->mu) {
                if (s->panel) s->panel(s->ctx, t, &p, i);
                for (int64_t j = p.n0; j < p.n1; j += s->nu) s->tile(s->ctx, t, &p, i, j);
            }
        } else {
            for (int64_t j = p.n0; j < p.n1; j += s->nu) {
                if (s->panel) s->panel(s->ctx, t, &p, j);
                for (int64_t i = p.m0; i < p.m1; i += s->mu) s->tile(s->ctx, t, &p, i, j);
            }
        }
    }
}

static void nest_thread(const fx_gemm_nest *s, int split_n, int tid, int nt) {
    fx_gemm_thread t;
    t.tid = tid;
    t.scratch = s->shared + s->shared_bytes + (size_t)tid * s->thread_bytes;
    t.r0 = 0, t.r1 = s->m, t.c0 = 0, t.c1 = s->n;
    if (split_n) { /* contiguous ranges of whole N units */
        const int64_t units = ceil_div(s->n, s->nu);
        t.c0 = units * tid / nt * s->nu, t.c1 = min64(s->n, units * (tid + 1) / nt * s->nu);
    } else {
        const int64_t units = ceil_div(s->m, s->mu);
        t.r0 = units * tid / nt * s->mu, t.r1 = min64(s->m, units * (tid + 1) / nt * s->mu);
    }
    if (t.r0 >= t.r1 || t.c0 >= t.c1) return;
    /* M blocks of balanced size, whole mu; N chunks of whole units */
    t.mcb = round_up(ceil_div(t.r1 - t.r0, ceil_div(t.r1 - t.r0, s->mc)), s->mu);
    const int64_t units = ceil_div(t.c1 - t.c0, s->nu);
    t.ncu = s->balance_n ? ceil_div(units, ceil_div(units, s->nc)) : s->nc;
    const int64_t chunk = t.ncu * s->nu;
    if (s->begin) s->begin(s->ctx, &t);
    if (s->n_outer) {
        for (int64_t n0 = t.c0; n0 < t.c1; n0 += chunk) {
            if (s->chunk) s->chunk(s->ctx, &t, n0, min64(t.c1, n0 + chunk));
            for (int64_t m0 = t.r0; m0 < t.r1; m0 += t.mcb) k_blocks(s, &t, m0, n0);
        }
    } else {
        for (int64_t m0 = t.r0; m0 < t.r1; m0 += t.mcb)
            for (int64_t n0 = t.c0; n0 < t.c1; n0 += chunk) {
                if (s->chunk) s->chunk(s->ctx, &t, n0, min64(t.c1, n0 + chunk));
                k_blocks(s, &t, m0, n0);
            }
    }
    if (s->end) s->end(s->ctx, &t);
}

/* dynamic_m: every thread takes whole M blocks (mc rows, the last
 * shorter) as they come, each over the whole N. */
static void nest_dynamic(const fx_gemm_nest *s, int tid) {
    fx_gemm_thread t;
    t.tid = tid;
    t.scratch = s->shared + s->shared_bytes + (size_t)tid * s->thread_bytes;
    t.r0 = 0, t.r1 = s->m, t.c0 = 0, t.c1 = s->n;
    t.mcb = s->mc, t.ncu = s->nc;
    const int64_t blocks = ceil_div(s->m, s->mc), chunk = t.ncu * s->nu;
    if (s->begin) s->begin(s->ctx, &t);
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < blocks; b++)
        for (int64_t n0 = 0; n0 < s->n; n0 += chunk) {
            if (s->chunk) s->chunk(s->ctx, &t, n0, min64(s->n, n0 + chunk));
            k_blocks(s, &t, b * s->mc, n0);
        }
    if (s->end) s->end(s->ctx, &t);
}

void fx_gemm_nest_run(const fx_gemm_nest *s, int threads) {
    /* the split is decided on the threads asked for, the ranges on those
     * OpenMP gives */
    const int split_n = s->split_n_only || ceil_div(s->n, s->nu) >= 2 * (int64_t)threads;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        const int tid = fx_thread_id(), nt = fx_thread_count();
        if (s->pack_once) {
            s->pack_once(s->ctx, tid, nt);
#pragma omp barrier
        }
        if (s->dynamic_m) nest_dynamic(s, tid);
        else nest_thread(s, split_n, tid, nt);
    }
}
