/*
 * test_kernel_fp8_encode.c — the f32 → fp8 encoder (fx_f32_to_fp8, what
 * `flux quantize --type fp8` stores) against the formats' definition:
 *   - a brute-force search over all 256 codes (nearest value of the same
 *     sign, NaN/infinity codes excluded, ties to the even code) at every
 *     decision point: each midpoint between neighbouring codes and the
 *     floats next to it, the ends of the range, and 2^16 random floats;
 *   - every finite f32 (all 2^32 bit patterns but NaN/infinity), checked
 *     with a walk over the sorted code values that decides exactly as the
 *     brute force does (the walk is compared with it at each boundary
 *     above), saturation to ±max included;
 *   - fx_fp8_quantize_row = the encoder of x / scale.
 * Code values are computed here from the bit layouts (OCP OFP8 1.0: E4M3FN
 * bias 7, no infinities, 0x7F NaN, max 448; E5M2 bias 15, IEEE-like,
 * max 57344), not with the library's decoders.
 */
#include "tests/test.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_isas.h"
#include "simd/kernels.h"

typedef struct fmt {
    fx_dtype t;
    const char *name;
    int mbits, bias, top; /* top: the largest finite positive code */
} fmt;

static const fmt formats[2] = {{FX_DTYPE_F8_E4M3, "E4M3", 3, 7, 0x7E}, {FX_DTYPE_F8_E5M2, "E5M2", 2, 15, 0x7B}};

/* The value of a positive code c <= top, exactly (a double holds it). */
static double code_value(const fmt *f, int c) {
    const int e = c >> f->mbits, m = c & ((1 << f->mbits) - 1);
    return e ? ldexp(1.0 + ldexp(m, -f->mbits), e - f->bias) : ldexp(m, 1 - f->bias - f->mbits);
}

/* 1 for the NaN and infinity codes (either sign). */
static int not_finite_code(const fmt *f, int c) {
    c &= 0x7F;
    return c > f->top;
}

/* Whether x is nearer to value v than to w (same sign as x; v != w),
 * decided exactly: by x's side of the midpoint (v + w) / 2, a double that
 * holds it exactly (one bit more than the codes); on it, the even code. */
static int nearer(double x, double v, int cv, double w, int cw) {
    const double m = (v + w) / 2;
    if (x == m) return !(cv & 1);
    return (x < m) == (v < w);
}

/* The nearest code by trying all 256: same sign as x, finite codes only,
 * ties to the even code. */
static int brute_force(const fmt *f, float x) {
    const int neg = signbit(x) != 0;
    int best = -1;
    double best_v = 0;
    for (int c = 0; c < 256; c++) {
        if (not_finite_code(f, c) || (c >> 7) != neg) continue;
        const double v = neg ? -code_value(f, c & 0x7F) : code_value(f, c);
        if (best < 0 || nearer((double)x, v, c, best_v, best)) best = c, best_v = v;
    }
    return best;
}

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* The walk's state: the code c whose interval holds the current |x|
 * (values in increasing bit order); its decision for |x|. */
static int walk_decide(const fmt *f, const double *mid, int *c, double a) {
    while (*c < f->top && a > mid[*c]) ++*c;
    if (*c < f->top && a == mid[*c]) return (*c & 1) ? *c + 1 : *c; /* tie: the even one */
    return *c;
}

TEST(kernel_fp8_encoder_matches_brute_force_at_every_boundary) {
    fx_test_rng rng;
    fx_test_rng_seed(&rng, 8);
    for (int k = 0; k < 2; k++) {
        const fmt *f = &formats[k];
        long bad = 0;
        /* midpoints between neighbours, the floats on either side, and the
         * code values themselves; both signs */
        for (int c = 0; c <= f->top; c++) {
            const double lo = code_value(f, c), hi = c < f->top ? code_value(f, c + 1) : 2 * lo;
            const float pts[5] = {(float)lo, (float)((lo + hi) / 2), nextafterf((float)((lo + hi) / 2), 0.0f),
                                  nextafterf((float)((lo + hi) / 2), INFINITY), nextafterf((float)lo, INFINITY)};
            CHECK_MSG((double)pts[1] == (lo + hi) / 2, "%s: midpoint after code %#x is not a float", f->name, c);
            for (int i = 0; i < 5; i++)
                for (int s = 0; s < 2; s++) {
                    const float x = s ? -pts[i] : pts[i];
                    const int want = brute_force(f, x), got = fx_f32_to_fp8(f->t, x);
                    if (got != want && bad++ < 5)
                        fx_test_fail(__FILE__, __LINE__, "%s: %a → %#04x, nearest is %#04x", f->name, x, got, want);
                }
        }
        /* the ends: zero, the smallest subnormals, the largest floats */
        const float ends[] = {0.0f, -0.0f, 0x1p-149f, -0x1p-149f, 0x1p-126f, FLT_MAX, -FLT_MAX, 1e30f, 500.0f, 464.0f, 61440.0f};
        for (size_t i = 0; i < sizeof ends / sizeof *ends; i++) {
            const int want = brute_force(f, ends[i]), got = fx_f32_to_fp8(f->t, ends[i]);
            CHECK_MSG(got == want, "%s: %a → %#04x, nearest is %#04x", f->name, ends[i], got, want);
        }
        /* random floats over the whole range and around the fp8 range */
        for (int i = 0; i < 1 << 16; i++) {
            uint32_t u = (uint32_t)fx_test_rng_u64(&rng);
            float x = i & 1 ? from_bits(u) : ldexpf(fx_test_rng_uniform(&rng), (int)(u % 48) - 30);
            if (!isfinite(x)) continue;
            const int want = brute_force(f, x), got = fx_f32_to_fp8(f->t, x);
            if (got != want && bad++ < 5)
                fx_test_fail(__FILE__, __LINE__, "%s: %a → %#04x, nearest is %#04x", f->name, x, got, want);
        }
        /* the walk decides as the brute force at the same points */
        double mid[128];
        for (int c = 0; c < f->top; c++) mid[c] = (code_value(f, c) + code_value(f, c + 1)) / 2;
        for (int c = 0; c < f->top; c++) {
            const float m = (float)mid[c];
            const float pts[3] = {nextafterf(m, 0.0f), m, nextafterf(m, INFINITY)};
            for (int i = 0; i < 3; i++) {
                int w = 0;
                CHECK_MSG(walk_decide(f, mid, &w, pts[i]) == brute_force(f, pts[i]), "%s: walk differs at %a", f->name,
                          pts[i]);
            }
        }
        CHECK_MSG(!bad, "%s: %ld floats encoded to another code than the nearest", f->name, bad);
    }
}

/* Every finite float: the walk over increasing |x| (bit patterns of
 * positive floats increase with their value) through fx_f32_to_fp8 and
 * fx_fp8_quantize_row (scale 1, its vectorized loop, in blocks of 1024),
 * and −x through the row: x's code with the sign bit. Ranges of 2^25 patterns in
 * parallel, each with its own walk. Under qemu (KT_SMALL) every 997th
 * pattern only, under the sanitizers (several times slower; CI runs that
 * build too) every 31st; the rounding boundaries themselves are checked
 * exhaustively by the brute-force test above in every build. */
#if KT_SMALL
#define PATTERN_STRIDE 997u
#elif defined(__SANITIZE_ADDRESS__) /* gcc: -fsanitize=address */
#define PATTERN_STRIDE 31u
#else
#define PATTERN_STRIDE 1u
#endif
TEST(kernel_fp8_encoder_every_finite_float) {
    for (int k = 0; k < 2; k++) {
        const fmt *f = &formats[k];
        double mid[128];
        for (int c = 0; c < f->top; c++) mid[c] = (code_value(f, c) + code_value(f, c + 1)) / 2;
        const uint32_t end = 0x7F800000u; /* +infinity: the first non-finite pattern */
        const int ranges = (int)(end >> 25) + 1;
        long bad = 0;
        uint32_t first_bad = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : bad)
        for (int r = 0; r < ranges; r++) {
            const uint32_t u0 = (uint32_t)r << 25, u1 = u0 + (1u << 25) < end ? u0 + (1u << 25) : end;
            int c = 0;
            float xs[2][1024];
            uint32_t us[1024];
            uint8_t q[2][1024];
            for (uint32_t u = u0; u < u1;) {
                int n = 0;
                for (; n < 1024 && u < u1; n++, u += PATTERN_STRIDE) {
                    us[n] = u;
                    xs[0][n] = from_bits(u), xs[1][n] = -from_bits(u);
                }
                fx_fp8_quantize_row(f->t, xs[0], n, 1.0f, q[0]);
                fx_fp8_quantize_row(f->t, xs[1], n, 1.0f, q[1]);
                for (int i = 0; i < n; i++) {
                    const float x = xs[0][i];
                    const int want = walk_decide(f, mid, &c, (double)x);
                    if (fx_f32_to_fp8(f->t, x) != want || q[0][i] != want || q[1][i] != (want | 0x80)) {
                        if (!bad) {
#pragma omp critical
                            if (!first_bad || us[i] < first_bad) first_bad = us[i];
                        }
                        bad++;
                    }
                }
            }
        }
        CHECK_MSG(!bad, "%s: %ld finite floats off the nearest code (first %a → %#04x, nearest %#04x)", f->name, bad,
                  from_bits(first_bad), fx_f32_to_fp8(f->t, from_bits(first_bad)), brute_force(f, from_bits(first_bad)));
    }
}

/* fx_fp8_quantize_row: code of x / scale, the division in f32; fx_fp8_max. */
TEST(kernel_fp8_quantize_row_divides_by_the_scale) {
    fx_test_rng rng;
    fx_test_rng_seed(&rng, 9);
    float x[1000];
    uint8_t q[1000];
    fx_test_fill_uniform(&rng, x, 1000, 0.37f);
    for (int k = 0; k < 2; k++) {
        const fmt *f = &formats[k];
        CHECK(fx_fp8_max(f->t) == (float)code_value(f, f->top));
        float amax = 0.0f;
        for (int i = 0; i < 1000; i++) amax = fmaxf(amax, fabsf(x[i]));
        const float scale = amax / fx_fp8_max(f->t);
        fx_fp8_quantize_row(f->t, x, 1000, scale, q);
        int same = 1, top = 0;
        for (int i = 0; i < 1000; i++) {
            same &= q[i] == brute_force(f, x[i] / scale);
            top |= (q[i] & 0x7F) == f->top;
        }
        CHECK_MSG(same, "%s: row codes differ from the nearest codes of x / scale", f->name);
        CHECK_MSG(top, "%s: the largest |x| does not reach the top code", f->name);
    }
}
