/*
 * test_kernel_attention.c — fx_attention on every ISA this machine runs,
 * against a naive softmax attention in double precision and against the
 * scalar table.
 *
 * Tolerances, as max|out − ref| / max|ref| over the whole output:
 *  - f32 paths (scalar, avx2, avx512, neon, avx512bf16 in f32 mode) vs
 *    double: 2e-5 (observed ≲ 1e-6: f32 sums of at most a few hundred terms
 *    and a ~1e-7 polynomial exp2);
 *  - f32 SIMD paths vs scalar: 2e-5;
 *  - the bf16 dot-product path (Q, K, P and V rounded to bf16, f32 sums) vs
 *    double: 2e-2 (bf16 keeps 8 significant bits: a relative rounding of
 *    2^-9 per factor; observed ≤ 1e-2 on these inputs, whose scores have a
 *    standard deviation of about 2, so an error of 2^-9 relative on the
 *    largest scores (~6) moves their probability by ~1%). That alone would
 *    let a 0.5% error of the kernel pass, so the bf16 path is also held
 *    to a reference fed the same bf16 roundings (bf16_attention: Q·scale·
 *    log2 e, K and V rounded as the kernel rounds them, the online softmax
 *    over the table's key tiles with P rounded to bf16 after each tile's
 *    max, every sum in double): what remains is the kernel's f32 sums and
 *    exp2 (~1e-6 on a score, and the rare P that rounds the other way), so
 *    the norm-wise error ‖out − ref‖/‖ref‖ must be <= 5e-4 and the largest
 *    <= 4e-3; the test checks that the reference scaled by 1.005 (a 0.5%
 *    error) fails that.
 * Rows that see no key must be exactly zero, the ld padding of the output
 * must stay untouched, and results are bitwise equal for 1, 2 and 3 threads.
 */
#include "kernel_isas.h"

#include "simd/attention/attention.h"
#include "simd/common/table.h"

#define TOL_F32 2e-5
#define TOL_BF16 2e-2
#define TOL_BF16_REF_NORM 5e-4 /* vs the bf16-rounded reference, norm-wise */
#define TOL_BF16_REF_MAX 4e-3  /* ... and the largest element error */
#define SENTINEL 12345.0f

typedef struct attn_case {
    int64_t sq, sk;
    int hq, hkv, d;
    int causal;
    int64_t off;  /* causal_offset */
    int mask;     /* 0 none, 1 padded tail, 2 random holes, 3 every key masked */
    int pad;      /* extra elements in every ld */
} attn_case;

/* Shapes: S ∈ {1, 7, 17, 33, 255, ...}, Sq ≠ Sk, D ∈ {2, 32, 48, 50, 64, 80,
 * 96, 128, 256, 512, 1030}, GQA groups 1, 2, 3, 4, 8, causal with offsets,
 * padding masks, strided rows. */
static const attn_case cases[] = {
    {1, 1, 1, 1, 64, 0, 0, 0, 0},
    {7, 7, 2, 2, 64, 1, 0, 0, 3},
    {17, 17, 4, 2, 128, 1, 0, 1, 0},
    {33, 33, 8, 2, 128, 0, 0, 2, 5},
    {33, 17, 3, 1, 48, 0, 0, 0, 0},
    {17, 33, 4, 1, 48, 1, 16, 1, 7},
    {20, 20, 2, 1, 64, 1, -5, 0, 0},   /* rows 0..4 see no key → zeros */
    {9, 70, 32, 8, 128, 1, 61, 1, 0},  /* Qwen3-like: GQA 4, causal + padding */
    {12, 12, 2, 2, 2, 1, 0, 2, 1},
    {40, 40, 2, 1, 50, 1, 0, 0, 0},
    {13, 29, 2, 2, 64, 0, 0, 3, 0},    /* every key masked → zeros */
    {255, 255, 2, 2, 64, 1, 0, 1, 0},
    {255, 255, 1, 1, 128, 0, 0, 0, 16},
    {64, 300, 4, 1, 64, 0, 0, 2, 0},
    {100, 100, 1, 1, 512, 0, 0, 0, 0}, /* VAE: one head of 512 */
    {150, 150, 6, 6, 128, 0, 0, 0, 0}, /* DiT-like, several query blocks */
    {5, 2048, 6, 6, 512, 1, 2043, 2, 0}, /* packed K/V > 16 MiB: several phases */
    {600, 700, 1, 1, 128, 0, 0, 0, 0},   /* many key tiles and rescales */
    {10, 70, 2, 1, 1030, 1, 60, 1, 3},   /* a large head dim, not a multiple of 16 */
    /* head dims 32, 80, 96, 256 with odd lengths, GQA groups 3 and 8 */
    {31, 45, 2, 2, 32, 0, 0, 0, 1},
    {50, 77, 6, 2, 32, 1, 27, 2, 0},
    {19, 19, 4, 4, 80, 1, 0, 0, 0},
    {61, 61, 3, 3, 96, 1, 0, 1, 2},
    {45, 130, 8, 1, 256, 0, 0, 2, 0},
};

/* Under qemu (aarch64) the emulator is ~1000x slower: tiny shapes only. */
static int case_enabled(const attn_case *c) {
#if defined(__aarch64__)
    return c->sq * c->sk * (int64_t)c->hq * c->d <= 3000000;
#else
    (void)c;
    return 1;
#endif
}

typedef struct attn_data {
    attn_case c;
    float *q, *k, *v;
    uint8_t *mask;
    int64_t ldq, ldk, ldv, ldo;
    float scale;
} attn_data;

static void data_init(attn_data *t, const attn_case *c, uint64_t seed) {
    memset(t, 0, sizeof *t);
    t->c = *c;
    t->ldq = (int64_t)c->hq * c->d + c->pad;
    t->ldk = (int64_t)c->hkv * c->d + c->pad + 1;
    t->ldv = (int64_t)c->hkv * c->d + 2 * c->pad;
    t->ldo = (int64_t)c->hq * c->d + c->pad;
    t->scale = 1.0f / sqrtf((float)c->d);
    fx_test_rng rng;
    fx_test_rng_seed(&rng, seed);
    size_t nq = (size_t)(c->sq * t->ldq), nk = (size_t)(c->sk * t->ldk),
           nv = (size_t)(c->sk * t->ldv);
    t->q = malloc(sizeof(float) * (nq ? nq : 1));
    t->k = malloc(sizeof(float) * (nk ? nk : 1));
    t->v = malloc(sizeof(float) * (nv ? nv : 1));
    /* Scores with a standard deviation of about 2: a peaked softmax. */
    fx_test_fill_uniform(&rng, t->q, nq, 2.5f);
    fx_test_fill_uniform(&rng, t->k, nk, 2.5f);
    fx_test_fill_uniform(&rng, t->v, nv, 1.0f);
    if (c->mask) {
        t->mask = malloc((size_t)(c->sk ? c->sk : 1));
        for (int64_t j = 0; j < c->sk; j++) {
            if (c->mask == 1) t->mask[j] = j < c->sk - c->sk / 3;
            else if (c->mask == 2) t->mask[j] = j == 0 || (fx_test_rng_u64(&rng) % 10) >= 3;
            else t->mask[j] = 0;
        }
    }
}

static void data_free(attn_data *t) {
    free(t->q);
    free(t->k);
    free(t->v);
    free(t->mask);
}

static fx_attn_args data_args(const attn_data *t, float *o) {
    fx_attn_args a;
    memset(&a, 0, sizeof a);
    a.sq = t->c.sq;
    a.sk = t->c.sk;
    a.hq = t->c.hq;
    a.hkv = t->c.hkv;
    a.d = t->c.d;
    a.q = t->q;
    a.ldq = t->ldq;
    a.k = t->k;
    a.ldk = t->ldk;
    a.v = t->v;
    a.ldv = t->ldv;
    a.o = o;
    a.ldo = t->ldo;
    a.scale = t->scale;
    a.causal = t->c.causal;
    a.causal_offset = t->c.off;
    a.key_mask = t->mask;
    return a;
}

static float *out_alloc(const attn_data *t) {
    size_t n = (size_t)(t->c.sq * t->ldo);
    float *o = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) o[i] = SENTINEL;
    return o;
}

/* Naive softmax attention in double: out [sq, hq·d] packed (ld = hq·d). */
static void naive_attention(const attn_data *t, float *out) {
    const attn_case *c = &t->c;
    const int group = c->hq / c->hkv;
    double *sc = malloc(sizeof(double) * (size_t)(c->sk ? c->sk : 1));
    double *acc = malloc(sizeof(double) * (size_t)c->d);
    for (int64_t i = 0; i < c->sq; i++) {
        for (int h = 0; h < c->hq; h++) {
            const int g = h / group;
            const float *q = t->q + i * t->ldq + (int64_t)h * c->d;
            double mx = -INFINITY;
            for (int64_t j = 0; j < c->sk; j++) {
                int vis = (!t->mask || t->mask[j]) && (!c->causal || j <= i + c->off);
                if (!vis) {
                    sc[j] = -INFINITY;
                    continue;
                }
                const float *kk = t->k + j * t->ldk + (int64_t)g * c->d;
                double dot = 0;
                for (int e = 0; e < c->d; e++) dot += (double)q[e] * kk[e];
                sc[j] = dot * t->scale;
                if (sc[j] > mx) mx = sc[j];
            }
            float *o = out + (i * c->hq + h) * c->d;
            if (mx == -INFINITY) {
                for (int e = 0; e < c->d; e++) o[e] = 0.0f;
                continue;
            }
            double sum = 0;
            for (int e = 0; e < c->d; e++) acc[e] = 0;
            for (int64_t j = 0; j < c->sk; j++) {
                if (sc[j] == -INFINITY) continue;
                double pj = exp(sc[j] - mx);
                sum += pj;
                const float *vv = t->v + j * t->ldv + (int64_t)g * c->d;
                for (int e = 0; e < c->d; e++) acc[e] += pj * vv[e];
            }
            for (int e = 0; e < c->d; e++) o[e] = (float)(acc[e] / sum);
        }
    }
    free(sc);
    free(acc);
}

static float bf16_round(float x) { return fx_bf16_bits_to_f32(fx_f32_to_bf16_bits(x)); }

/* The bf16 dot-product attention as its kernels compute it (see the top of
 * this file): out [sq, hq·d] packed. kt = the table's keys per tile. */
static void bf16_attention(const attn_data *t, int kt, float *out) {
    const attn_case *c = &t->c;
    const int group = c->hq / c->hkv, d = c->d;
    const float qscale = (float)((double)t->scale * 1.4426950408889634074); /* scores in log2 units */
    double *s = malloc(sizeof(double) * (size_t)(c->sk ? c->sk : 1)), *acc = malloc(sizeof(double) * (size_t)d);
    float *qb = malloc(sizeof(float) * (size_t)d);
    for (int64_t i = 0; i < c->sq; i++) {
        for (int h = 0; h < c->hq; h++) {
            const int g = h / group;
            const float *q = t->q + i * t->ldq + (int64_t)h * d;
            for (int e = 0; e < d; e++) qb[e] = bf16_round(q[e] * qscale);
            double m = -INFINITY, l = 0;
            for (int e = 0; e < d; e++) acc[e] = 0;
            for (int64_t j0 = 0; j0 < c->sk; j0 += kt) {
                const int64_t j1 = j0 + kt < c->sk ? j0 + kt : c->sk;
                double mt = m;
                for (int64_t j = j0; j < j1; j++) {
                    int vis = (!t->mask || t->mask[j]) && (!c->causal || j <= i + c->off);
                    s[j] = -INFINITY;
                    if (!vis) continue;
                    const float *kk = t->k + j * t->ldk + (int64_t)g * d;
                    double dot = 0;
                    for (int e = 0; e < d; e++) dot += (double)qb[e] * bf16_round(kk[e]);
                    s[j] = dot;
                    if (dot > mt) mt = dot;
                }
                if (mt == -INFINITY) continue; /* no visible key in this tile */
                const double alpha = m == -INFINITY ? 0.0 : exp2(m - mt);
                l *= alpha;
                for (int e = 0; e < d; e++) acc[e] *= alpha;
                for (int64_t j = j0; j < j1; j++) {
                    if (s[j] == -INFINITY) continue;
                    const double p = exp2(s[j] - mt), pb = bf16_round((float)p);
                    l += p; /* the sum takes the unrounded probabilities */
                    const float *vv = t->v + j * t->ldv + (int64_t)g * d;
                    for (int e = 0; e < d; e++) acc[e] += pb * bf16_round(vv[e]);
                }
                m = mt;
            }
            float *o = out + (i * c->hq + h) * d;
            for (int e = 0; e < d; e++) o[e] = l > 0 ? (float)(acc[e] / l) : 0.0f;
        }
    }
    free(s), free(acc), free(qb);
}

/* ‖a − b‖ / ‖b‖ (0 for b = 0). */
static double norm_rel_err(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - b[i];
        num += e * e;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The bf16 path against the bf16-rounded reference; 1 when within both
 * tolerances. */
static int bf16_ref_ok(const float *got, const float *ref, size_t n, double *norm, double *max) {
    *norm = norm_rel_err(got, ref, n);
    *max = fx_test_rel_err(got, ref, n);
    return *norm <= TOL_BF16_REF_NORM && *max <= TOL_BF16_REF_MAX;
}

/* Copy the [sq, hq·d] payload out of a strided output; check the padding. */
static int unpack_output(const attn_data *t, const float *o, float *packed) {
    const int64_t w = (int64_t)t->c.hq * t->c.d;
    int pad_ok = 1;
    for (int64_t i = 0; i < t->c.sq; i++) {
        memcpy(packed + i * w, o + i * t->ldo, sizeof(float) * (size_t)w);
        for (int64_t e = w; e < t->ldo; e++) pad_ok &= o[i * t->ldo + e] == SENTINEL;
    }
    return pad_ok;
}

static void case_name(const attn_case *c, char *buf, size_t n) {
    snprintf(buf, n, "sq=%lld sk=%lld hq=%d hkv=%d d=%d causal=%d off=%lld mask=%d pad=%d",
             (long long)c->sq, (long long)c->sk, c->hq, c->hkv, c->d, c->causal,
             (long long)c->off, c->mask, c->pad);
}

/* Run one case on table k with the given thread count; packed result. */
static int run_case(const fx_kernels *k, int threads, const attn_data *t, float *packed,
                    char *msg, size_t msgn) {
    fx_scratch *s = fx_scratch_new(threads);
    fx_kctx kc;
    fx_kctx_init(&kc, k, threads, s);
    float *o = out_alloc(t);
    fx_attn_args a = data_args(t, o);
    fx_err err;
    fx_err_clear(&err);
    flux_status st = fx_attention(&kc, &a, &err);
    int ok = st == FLUX_OK;
    if (!ok) snprintf(msg, msgn, "status %d: %s", (int)st, err.msg);
    else if (!unpack_output(t, o, packed)) {
        snprintf(msg, msgn, "wrote into the ld padding of the output");
        ok = 0;
    }
    free(o);
    fx_scratch_free(s);
    return ok;
}

/* Rows that see no key must be exactly zero in out. */
static int zero_rows_ok(const attn_data *t, const float *ref, const float *out) {
    const size_t row = (size_t)t->c.d;
    const size_t n = (size_t)(t->c.sq * t->c.hq);
    for (size_t i = 0; i < n; i++) {
        int ref_zero = 1;
        for (size_t e = 0; e < row; e++) ref_zero &= ref[i * row + e] == 0.0f;
        if (!ref_zero) continue;
        for (size_t e = 0; e < row; e++)
            if (out[i * row + e] != 0.0f) return 0;
    }
    return 1;
}

static int any_row_fully_masked(const attn_case *c) {
    return c->mask == 3 || (c->causal && c->off < 0);
}

/* Every enabled case on table k: vs the double reference and vs scalar. */
static void check_table(const fx_kernels *k, int threads) {
    const fx_kernels *scalar = fx_kernels_get(FX_ISA_SCALAR, 0);
    const double tol = fx_kernels_uses_bf16_dot(k) ? TOL_BF16 : TOL_F32;
    double worst = 0, worst_bf16 = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const attn_case *c = &cases[ci];
        if (!case_enabled(c)) continue;
        char name[160], msg[FX_ERR_MSG_MAX + 64];
        case_name(c, name, sizeof name);
        attn_data t;
        data_init(&t, c, 1000 + ci);
        size_t n = (size_t)(c->sq * c->hq * c->d);
        float *ref = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
        float *sref = malloc(sizeof(float) * n);
        naive_attention(&t, ref);
        if (!run_case(k, threads, &t, got, msg, sizeof msg)) {
            fx_test_fail(__FILE__, __LINE__, "%s: %s", name, msg);
        } else {
            double e = fx_test_rel_err(got, ref, n);
            if (e > worst) worst = e;
            if (getenv("ATTN_VERBOSE")) printf("      %s: %.2e\n", name, e);
            CHECK_MSG(e <= tol, "%s vs double: rel err %.3g > %.1g", name, e, tol);
            if (any_row_fully_masked(c))
                CHECK_MSG(zero_rows_ok(&t, ref, got), "%s: a row that sees no key is not 0", name);
            if (k != scalar && !fx_kernels_uses_bf16_dot(k)) {
                REQUIRE(run_case(scalar, 1, &t, sref, msg, sizeof msg));
                double es = fx_test_rel_err(got, sref, n);
                CHECK_MSG(es <= TOL_F32, "%s vs scalar: rel err %.3g > %.1g", name, es, TOL_F32);
            }
            if (fx_kernels_uses_bf16_dot(k) && k->attn) {
                bf16_attention(&t, k->attn->kt, sref);
                double en, em;
                CHECK_MSG(bf16_ref_ok(got, sref, n, &en, &em),
                          "%s vs the bf16-rounded reference: norm-wise %.3g (tol %.1g), largest %.3g (tol %.1g)", name,
                          en, TOL_BF16_REF_NORM, em, TOL_BF16_REF_MAX);
                if (en > worst_bf16) worst_bf16 = en;
                /* a 0.5% error must not pass (unless every row is masked:
                 * an all-zero output has no scale to get wrong) */
                int nonzero = 0;
                for (size_t x = 0; x < n; x++) nonzero |= sref[x] != 0.0f, sref[x] *= 1.005f;
                if (nonzero)
                    CHECK_MSG(!bf16_ref_ok(got, sref, n, &en, &em), "%s: a 0.5%% scale error passes the bf16 check",
                              name);
            }
        }
        free(ref);
        free(got);
        free(sref);
        data_free(&t);
    }
    printf("    %-10s bf16=%d threads=%d: worst rel err vs double %.2e", fx_isa_name(fx_kernels_isa(k)),
           fx_kernels_uses_bf16_dot(k), threads, worst);
    if (fx_kernels_uses_bf16_dot(k)) printf(", norm-wise vs the bf16-rounded reference %.2e", worst_bf16);
    printf("\n");
}

TEST(kernel_attention_scalar_vs_naive) {
    const fx_kernels *k = fx_kernels_get(FX_ISA_SCALAR, 0);
    REQUIRE(k != NULL);
    check_table(k, 1);
    check_table(k, 2);
}

/* The bf16-rounded reference (what the bf16 path is held to, on CPUs that
 * have it) is attention: within the bf16 tolerance of the double one on
 * every case, here on any CPU. */
TEST(kernel_attention_bf16_reference_vs_naive) {
    double worst = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const attn_case *c = &cases[ci];
        if (!case_enabled(c)) continue;
        attn_data t;
        data_init(&t, c, 1000 + ci);
        size_t n = (size_t)(c->sq * c->hq * c->d);
        float *ref = malloc(sizeof(float) * n), *b16 = malloc(sizeof(float) * n);
        naive_attention(&t, ref);
        bf16_attention(&t, 64, b16);
        double e = fx_test_rel_err(b16, ref, n);
        if (e > worst) worst = e;
        char name[160];
        case_name(c, name, sizeof name);
        CHECK_MSG(e <= TOL_BF16, "%s: bf16 reference vs double %.3g", name, e);
        free(ref), free(b16);
        data_free(&t);
    }
    printf("    bf16-rounded reference vs double: worst %.2e\n", worst);
    CHECK(worst > 1e-4); /* it does round */
}

/* Every SIMD table the CPU runs (bf16 dot-product and f32 modes). */
TEST(kernel_attention_simd_vs_naive_and_scalar) {
    int tested = 0;
    kt_check_levels();
    for (int isa = FX_ISA_SCALAR + 1; isa < FX_ISA_COUNT; isa++) {
        for (int f32 = 0; f32 < 2; f32++) {
            const fx_kernels *k = fx_kernels_get((fx_isa)isa, f32);
            if (!k) continue;
            if (f32 && !fx_kernels_uses_bf16_dot(fx_kernels_get((fx_isa)isa, 0))) continue;
            printf("    table %s%s\n", fx_isa_name((fx_isa)isa), f32 ? " (f32 math)" : "");
            check_table(k, 2);
            tested++;
        }
    }
    /* Unless the CPU has neither AVX2 nor NEON, some SIMD table must run. */
    CHECK_MSG(tested > 0 || fx_isa_detect() == FX_ISA_SCALAR, "no SIMD table was tested");
}

/* Bitwise identical output for 1, 2 and 3 threads on every table. */
TEST(kernel_attention_thread_invariance) {
    const attn_case big = {97, 203, 4, 2, 64, 1, 10, 2, 3};
    const attn_case dit = {130, 130, 3, 3, 128, 0, 0, 0, 0};
    const attn_case tiny = {9, 11, 2, 1, 64, 1, 0, 2, 0};
    const attn_case *cs[2];
#if defined(__aarch64__)
    cs[0] = &tiny;
    cs[1] = &tiny;
    (void)big, (void)dit;
#else
    cs[0] = &big;
    cs[1] = &dit;
    (void)tiny;
#endif
    for (int isa = 0; isa < FX_ISA_COUNT; isa++) {
        for (int f32 = 0; f32 < 2; f32++) {
            const fx_kernels *k = fx_kernels_get((fx_isa)isa, f32);
            if (!k) continue;
            for (int ci = 0; ci < 2; ci++) {
                attn_data t;
                data_init(&t, cs[ci], 77 + ci);
                size_t n = (size_t)(cs[ci]->sq * cs[ci]->hq * cs[ci]->d);
                float *o1 = malloc(sizeof(float) * n), *o2 = malloc(sizeof(float) * n),
                      *o3 = malloc(sizeof(float) * n);
                char msg[FX_ERR_MSG_MAX + 64];
                int ok = run_case(k, 1, &t, o1, msg, sizeof msg) &&
                         run_case(k, 2, &t, o2, msg, sizeof msg) &&
                         run_case(k, 3, &t, o3, msg, sizeof msg);
                CHECK_MSG(ok, "%s: %s", fx_isa_name((fx_isa)isa), msg);
                if (ok) {
                    CHECK_MSG(!memcmp(o1, o2, sizeof(float) * n), "%s f32=%d: 1 vs 2 threads differ",
                              fx_isa_name((fx_isa)isa), f32);
                    CHECK_MSG(!memcmp(o1, o3, sizeof(float) * n), "%s f32=%d: 1 vs 3 threads differ",
                              fx_isa_name((fx_isa)isa), f32);
                }
                free(o1);
                free(o2);
                free(o3);
                data_free(&t);
            }
        }
    }
}

/* Bad shapes fail with FLUX_ERR_INVALID_ARG and a message naming them. */
TEST(kernel_attention_bad_args) {
    const fx_kernels *k = fx_kernels_get(FX_ISA_SCALAR, 0);
    fx_scratch *s = fx_scratch_new(1);
    fx_kctx kc;
    fx_kctx_init(&kc, k, 1, s);
    float q[64] = {0}, kk[64] = {0}, v[64] = {0}, o[64] = {0};
    fx_attn_args good = {.sq = 2, .sk = 2, .hq = 2, .hkv = 1, .d = 16, .q = q, .ldq = 32,
                         .k = kk, .ldk = 16, .v = v, .ldv = 16, .o = o, .ldo = 32,
                         .scale = 0.25f};
    fx_err err;
    fx_err_clear(&err);
    CHECK_EQ_INT(fx_attention(&kc, &good, &err), FLUX_OK);

    struct { fx_attn_args a; const char *needle; } bad[8];
    for (int i = 0; i < 8; i++) bad[i].a = good;
    bad[0].a.d = 15, bad[0].needle = "d=15";
    bad[1].a.hq = 3, bad[1].a.hkv = 2, bad[1].needle = "hq=3";
    bad[2].a.ldq = 31, bad[2].needle = "ldq=31";
    bad[3].a.ldk = 8, bad[3].needle = "ldk=8";
    bad[4].a.k = NULL, bad[4].needle = "k is NULL";
    bad[5].a.sq = -1, bad[5].needle = "sq=-1";
    bad[6].a.scale = INFINITY, bad[6].needle = "scale";
    bad[7].a.hkv = 0, bad[7].needle = "hkv=0";
    for (int i = 0; i < 8; i++) {
        fx_err_clear(&err);
        flux_status st = fx_attention(&kc, &bad[i].a, &err);
        CHECK_MSG(st == FLUX_ERR_INVALID_ARG, "case %d: status %d", i, (int)st);
        CHECK_MSG(strstr(err.msg, bad[i].needle) != NULL, "case %d: message '%s' lacks '%s'", i,
                  err.msg, bad[i].needle);
    }
    fx_scratch_free(s);
}

/* No keys at all: every output row is zero; no queries: nothing written. */
TEST(kernel_attention_empty_sequences) {
    const fx_kernels *k = fx_kernels_get(fx_isa_detect(), 0);
    fx_scratch *s = fx_scratch_new(2);
    fx_kctx kc;
    fx_kctx_init(&kc, k, 2, s);
    float q[3 * 40], o[3 * 40];
    for (int i = 0; i < 3 * 40; i++) q[i] = 1.0f, o[i] = SENTINEL;
    fx_attn_args a = {.sq = 3, .sk = 0, .hq = 2, .hkv = 2, .d = 16, .q = q, .ldq = 40,
                      .o = o, .ldo = 40, .scale = 0.25f};
    fx_err err;
    fx_err_clear(&err);
    CHECK_EQ_INT(fx_attention(&kc, &a, &err), FLUX_OK);
    for (int i = 0; i < 3; i++)
        for (int e = 0; e < 40; e++) CHECK(o[i * 40 + e] == (e < 32 ? 0.0f : SENTINEL));
    a.sq = 0;
    o[0] = SENTINEL;
    CHECK_EQ_INT(fx_attention(&kc, &a, &err), FLUX_OK);
    CHECK(o[0] == SENTINEL);
    fx_scratch_free(s);
}

/* O may overwrite Q in place (same pointer and ld): each task reads its own
 * Q rows before it writes the same rows of O, and no other task reads
 * them. The model uses this to write the attention output into the
 * columns that held Q (the single-stream block's fused row). */
TEST(kernel_attention_output_over_q) {
    const attn_case c = {70, 70, 4, 2, 64, 1, 0, 2, 3};
    for (int isa = 0; isa < FX_ISA_COUNT; isa++) {
        for (int f32 = 0; f32 < 2; f32++) {
            const fx_kernels *k = fx_kernels_get((fx_isa)isa, f32);
            if (!k) continue;
            attn_data t;
            data_init(&t, &c, 5);
            t.ldo = t.ldq;
            size_t n = (size_t)(c.sq * c.hq * c.d);
            float *ref = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
            char msg[FX_ERR_MSG_MAX + 64];
            REQUIRE(run_case(k, 2, &t, ref, msg, sizeof msg));
            fx_scratch *s = fx_scratch_new(2);
            fx_kctx kc;
            fx_kctx_init(&kc, k, 2, s);
            fx_attn_args a = data_args(&t, t.q);
            fx_err err;
            fx_err_clear(&err);
            CHECK_EQ_INT(fx_attention(&kc, &a, &err), FLUX_OK);
            for (int64_t i = 0; i < c.sq; i++)
                memcpy(got + i * c.hq * c.d, t.q + i * t.ldq, sizeof(float) * (size_t)(c.hq * c.d));
            CHECK_MSG(!memcmp(got, ref, sizeof(float) * n), "%s f32=%d: in-place result differs",
                      fx_isa_name((fx_isa)isa), f32);
            fx_scratch_free(s);
            free(ref);
            free(got);
            data_free(&t);
        }
    }
}
