/*
 * rng.c — the documented noise generator (algorithm in rng.h).
 *
 * Bit-exact everywhere: only +, −, ×, ÷, sqrt and compares on IEEE doubles,
 * each rounded once. FP contraction (a·b + c → fma) would change results
 * on machines with FMA. Every product that feeds an addition therefore
 * goes through rounded() (a volatile store: the compiler must produce the
 * rounded product, so nothing can be fused, whatever -ffp-contract says);
 * the pragmas below switch contraction off as well where compilers honour
 * them (clang without -ffp-contract=fast, GCC).
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#pragma clang fp contract(off) /* also wins over -ffp-contract=fast */
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "rng.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "rng.c needs FLT_EVAL_METHOD == 0 (no excess precision) for bit-exact noise"
#endif

#define RNG_KEY_SALT 0x6E6F6973652E6678ull /* "noise.fx" */
#define RNG_GOLDEN 0x9E3779B97F4A7C15ull
#define RNG_ATTEMPTS 64
#define RNG_WORDS_PER_VALUE 128 /* counter stride per index: 2 words × 64 attempts */

uint64_t fx_rng_mix64(uint64_t z) {
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The product/sum x rounded to double, never fused with what follows. */
static double rounded(double x) {
    volatile double v = x;
    return v;
}

static uint64_t double_bits(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static double bits_double(uint64_t u) {
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

double fx_rng_log(double x) {
    /* fdlibm's split of ln 2: LN2_HI has trailing zero bits so e·LN2_HI is exact. */
    const double LN2_HI = 6.93147180369123816490e-01, LN2_LO = 1.90821492927058770002e-10;
    const double SQRT2 = 1.41421356237309504880;
    if (!(x > 0.0) || x > DBL_MAX) return x == 0.0 ? -HUGE_VAL : (x > DBL_MAX ? x : NAN);
    int e = 0;
    if (x < DBL_MIN) { /* subnormal: scale into the normal range first (exact) */
        x *= 18014398509481984.0; /* 2^54 */
        e = -54;
    }
    uint64_t b = double_bits(x);
    e += (int)((b >> 52) & 0x7ff) - 1023;
    double m = bits_double((b & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull); /* [1, 2) */
    if (m >= SQRT2) {
        m *= 0.5; /* exact */
        e += 1;
    }
    double f = (m - 1.0) / (m + 1.0), f2 = f * f;
    static const double inv_odd[12] = {1.0 / 23.0, 1.0 / 21.0, 1.0 / 19.0, 1.0 / 17.0, 1.0 / 15.0, 1.0 / 13.0,
                                       1.0 / 11.0, 1.0 / 9.0,  1.0 / 7.0,  1.0 / 5.0,  1.0 / 3.0,  1.0};
    double p = inv_odd[0];
    for (int k = 1; k < 12; k++) p = rounded(p * f2) + inv_odd[k];
    double lnm = rounded(2.0 * f * p);
    double de = (double)e;
    return rounded(de * LN2_HI) + (rounded(de * LN2_LO) + lnm);
}

static double unit(uint64_t r) {
    /* 2·(r >> 12) + 1 < 2^53 is exact; the scaling by 2^−52 is exact. */
    return rounded((double)(2 * (r >> 12) + 1) * (1.0 / 4503599627370496.0)) - 1.0;
}

static float normal_with_key(uint64_t key, uint64_t i) {
    uint64_t c = i * RNG_WORDS_PER_VALUE;
    for (int j = 0; j < RNG_ATTEMPTS; j++, c += 2) {
        double u = unit(fx_rng_mix64(key + (c + 1) * RNG_GOLDEN));
        double v = unit(fx_rng_mix64(key + (c + 2) * RNG_GOLDEN));
        double s = rounded(u * u) + rounded(v * v);
        if (s < 1.0) return (float)(u * sqrt(-2.0 * fx_rng_log(s) / s));
    }
    return 0.0f;
}

float fx_rng_normal_at(uint64_t seed, uint64_t i) {
    return normal_with_key(fx_rng_mix64(seed ^ RNG_KEY_SALT), i);
}

void fx_rng_normal_fill(const fx_kctx *kc, uint64_t seed, uint64_t first, int64_t n, float *out) {
    uint64_t key = fx_rng_mix64(seed ^ RNG_KEY_SALT);
    int threads = kc && kc->threads > 0 ? kc->threads : 1;
    if (n < 4096) threads = 1;
    (void)threads; /* unused without OpenMP */
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
    for (int64_t k = 0; k < n; k++) out[k] = normal_with_key(key, first + (uint64_t)k);
}

void fx_rng_noise(const fx_kctx *kc, uint64_t seed, int channels, int h, int w, float *out) {
    fx_rng_normal_fill(kc, seed, 0, (int64_t)channels * h * w, out);
}
