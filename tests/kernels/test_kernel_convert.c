/*
 * test_kernel_convert.c — f32 ↔ bf16 / f16 conversions. Exactness is the
 * only tolerance: every result is compared bit for bit.
 *
 *  - single-element conversions against independent references: decoding
 *    by ldexp (all 65536 patterns), encoding by a brute-force nearest
 *    search over the sorted table of representable values, ties to even;
 *    subnormals, overflow to inf, ±0, inf and NaN (stays NaN, made quiet,
 *    top payload bits kept);
 *  - every ISA's vector conversion against the scalar one on all 65536
 *    16-bit patterns and on f32 inputs built to hit every rounding case,
 *    with awkward lengths (tails), and 1 vs 2 vs 3 threads.
 */
#include "kernel_isas.h"

#define SENTINEL_F 1234.5f

static uint32_t bits(float f) {
    union { float f; uint32_t u; } v = {.f = f};
    return v.u;
}
static float from_bits(uint32_t u) {
    union { uint32_t u; float f; } v = {.u = u};
    return v.f;
}

static double f16_value(uint16_t h) { /* independent decode, finite only */
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return s ? -v : v;
}

TEST(kernel_convert_f16_decode_exhaustive) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fx_f16_bits_to_f32((uint16_t)h);
        int e = (h >> 10) & 31, m = h & 1023;
        if (e == 31 && m) { /* NaN: quiet, payload shifted, sign kept */
            uint32_t want = ((h & 0x8000u) << 16) | 0x7fc00000u | ((uint32_t)m << 13);
            if (bits(f) != want && bad++ < 5) CHECK_MSG(0, "f16 %04x -> %08x, want %08x", h, bits(f), want);
        } else if (e == 31) {
            if (!(isinf(f) && !!signbit(f) == (int)(h >> 15)) && bad++ < 5) CHECK_MSG(0, "f16 %04x not inf", h);
        } else {
            double v = f16_value((uint16_t)h);
            if (((double)f != v || !!signbit(f) != (int)(h >> 15)) && bad++ < 5)
                CHECK_MSG(0, "f16 %04x -> %.9g, want %.9g", h, f, v);
            /* and back, exactly */
            if (fx_f32_to_f16_bits(f) != h && bad++ < 5)
                CHECK_MSG(0, "f16 %04x round trip -> %04x", h, fx_f32_to_f16_bits(f));
        }
    }
    CHECK_EQ_INT(bad, 0);
}

/* Nearest f16 by search over the sorted positive finite halves (0..0x7bff
 * are increasing), ties to even mantissa; >= 65520 overflows to inf. */
static uint16_t f16_nearest(float f) {
    if (isnan(f)) return 0;
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (a >= 65520.0) return sign | 0x7c00;
    int lo = 0, hi = 0x7bff;
    while (lo < hi) { /* first half >= a */
        int mid = (lo + hi) / 2;
        if (f16_value((uint16_t)mid) >= a) hi = mid;
        else lo = mid + 1;
    }
    int best = lo;
    if (lo > 0) {
        double up = f16_value((uint16_t)lo) - a, down = a - f16_value((uint16_t)(lo - 1));
        if (down < up || (down == up && ((lo - 1) & 1) == 0)) best = lo - 1;
    }
    return (uint16_t)(sign | best);
}

/* f32 test inputs hitting every rounding case of a 16-bit format whose
 * dropped mantissa bits are `drop`: random bit patterns, exact midpoints,
 * midpoints ± 1 ulp, subnormals, specials. */
static float *f32_cases(size_t *count) {
    size_t n = 0, cap = 400000;
    float *v = kt_alloc(cap);
    fx_test_rng r;
    fx_test_rng_seed(&r, 5);
    for (int i = 0; i < 200000; i++) v[n++] = from_bits((uint32_t)fx_test_rng_u64(&r));
    for (int i = 0; i < 50000; i++) { /* exponents around the f16 range */
        uint32_t u = (uint32_t)fx_test_rng_u64(&r);
        uint32_t e = 95 + (u >> 24) % 50; /* 2^-32 .. 2^17 */
        v[n++] = from_bits((u & 0x807fffffu) | e << 23);
    }
    for (uint32_t h = 0; h < 0x7c00; h += 7) { /* f16 midpoints and neighbours */
        double mid = (f16_value((uint16_t)h) + f16_value((uint16_t)(h + 1))) / 2;
        float fm = (float)mid;
        v[n++] = fm;
        v[n++] = nextafterf(fm, 0.0f);
        v[n++] = nextafterf(fm, INFINITY);
        v[n++] = -fm;
    }
    for (uint32_t u = 0; u < 0x10000 && n < cap - 64; u += 3) /* bf16 midpoints */
        v[n++] = from_bits(u << 16 | 0x8000u), v[n++] = from_bits(u << 16 | 0x7fffu);
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 65504.0f, 65519.996f,
                             65520.0f, -65520.0f, 1e-8f, 5.96e-8f, 2.98e-8f, 2.9802322e-8f,
                             1.17549435e-38f, 1.4e-45f, 3.4028235e38f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) v[n++] = special[i];
    v[n++] = from_bits(0x7f800001u); /* signalling NaN */
    v[n++] = from_bits(0xff812345u);
    v[n++] = from_bits(0x7fffffffu);
    *count = n;
    return v;
}

TEST(kernel_convert_f32_to_f16_rne) {
    size_t n;
    float *v = f32_cases(&n);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t got = fx_f32_to_f16_bits(v[i]);
        if (isnan(v[i])) {
            uint32_t u = bits(v[i]);
            uint16_t want = (uint16_t)(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu));
            if (got != want && bad++ < 5) CHECK_MSG(0, "NaN %08x -> %04x, want %04x", u, got, want);
            continue;
        }
        uint16_t want = f16_nearest(v[i]);
        if (got != want && bad++ < 5)
            CHECK_MSG(0, "f32 %.9g (%08x) -> f16 %04x, want %04x", v[i], bits(v[i]), got, want);
    }
    CHECK_EQ_INT(bad, 0);
    free(v);
}

TEST(kernel_convert_bf16_exact) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) { /* widening is a shift */
        float f = fx_bf16_bits_to_f32((uint16_t)h);
        if (bits(f) != h << 16 && bad++ < 5) CHECK_MSG(0, "bf16 %04x", h);
    }
    size_t n;
    float *v = f32_cases(&n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = bits(v[i]);
        uint16_t got = fx_f32_to_bf16_bits(v[i]), want;
        if (isnan(v[i])) {
            want = (uint16_t)((u >> 16) | 0x40u);
        } else if (isinf(v[i])) {
            want = (uint16_t)(u >> 16);
        } else { /* nearest of truncation and the next value up, ties to even */
            uint32_t t = u >> 16;
            double a = fabs((double)v[i]);
            double lo = fabs((double)from_bits(t << 16));
            double hi = (t & 0x7fffu) == 0x7f7fu ? ldexp(1.0, 128) : fabs((double)from_bits((t + 1) << 16));
            want = (uint16_t)((a - lo < hi - a || (a - lo == hi - a && !(t & 1))) ? t : t + 1);
        }
        if (got != want && bad++ < 5)
            CHECK_MSG(0, "f32 %.9g (%08x) -> bf16 %04x, want %04x", v[i], u, got, want);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(fx_f32_to_bf16_bits(3.4028235e38f), 0x7f80); /* FLT_MAX rounds to inf */
    CHECK_EQ_INT(fx_f32_to_bf16_bits(1.0f), 0x3f80);
    free(v);
}

TEST(kernel_convert_dtypes) {
    CHECK_EQ_INT(fx_dtype_size(FX_DTYPE_F32), 4);
    CHECK_EQ_INT(fx_dtype_size(FX_DTYPE_F16), 2);
    CHECK_EQ_INT(fx_dtype_size(FX_DTYPE_BF16), 2);
    CHECK(!strcmp(fx_dtype_name(FX_DTYPE_F32), "F32"));
    CHECK(!strcmp(fx_dtype_name(FX_DTYPE_F16), "F16"));
    CHECK(!strcmp(fx_dtype_name(FX_DTYPE_BF16), "BF16"));
    CHECK(!strcmp(fx_dtype_name((fx_dtype)(FX_DTYPE_COUNT + 1)), "unknown"));
    CHECK_EQ_INT(fx_dtype_size((fx_dtype)(FX_DTYPE_COUNT + 1)), 0);
}

/* Every ISA (public entry points, threads 1..3) against the scalar
 * single-element functions, bitwise, at awkward lengths. */
TEST(kernel_convert_isas) {
    kt_isas isas = kt_isas_list("convert", 0);
    size_t nf;
    float *f = f32_cases(&nf);
    uint16_t *h = malloc(65536 * sizeof *h);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    const size_t lens[] = {1, 7, 17, 33, 255, 65536, KT_SMALL ? 20003 : 200003};
    float *of = kt_alloc(nf > 65536 ? nf : 65536);
    uint16_t *oh = malloc(nf * sizeof *oh);
    float *wantf = kt_alloc(65536 * 2);
    uint16_t *wanth = malloc(nf * 2 * sizeof *wanth);
    for (uint32_t i = 0; i < 65536; i++) {
        wantf[i] = fx_bf16_bits_to_f32(h[i]);
        wantf[65536 + i] = fx_f16_bits_to_f32(h[i]);
    }
    for (size_t i = 0; i < nf; i++) {
        wanth[i] = fx_f32_to_bf16_bits(f[i]);
        wanth[nf + i] = fx_f32_to_f16_bits(f[i]);
    }
    for (int ii = 0; ii < isas.n; ii++) {
        const char *nm = kt_name(isas.k[ii]);
        for (int t = 1; t <= 3; t++) {
            fx_kctx kc = kt_ctx(isas.k[ii], t);
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                size_t n16 = lens[li] < 65536 ? lens[li] : 65536;
                size_t n32 = lens[li] < nf ? lens[li] : nf;
                long at;
                of[n16] = SENTINEL_F;
                fx_bf16_to_f32(&kc, (int64_t)n16, h, of);
                at = kt_bitdiff(of, wantf, n16, 4);
                CHECK_MSG(at < 0 && bits(of[n16]) == bits(SENTINEL_F), "bf16->f32 %s/%dt n=%zu at %ld", nm, t, n16, at);
                fx_f16_to_f32(&kc, (int64_t)n16, h, of);
                at = kt_bitdiff(of, wantf + 65536, n16, 4);
                CHECK_MSG(at < 0 && bits(of[n16]) == bits(SENTINEL_F), "f16->f32 %s/%dt n=%zu at %ld", nm, t, n16, at);
                fx_to_f32(&kc, (int64_t)n16, h, FX_DTYPE_F16, of);
                CHECK_MSG(kt_bitdiff(of, wantf + 65536, n16, 4) < 0, "fx_to_f32(F16) %s", nm);
                fx_to_f32(&kc, (int64_t)n16, h, FX_DTYPE_BF16, of);
                CHECK_MSG(kt_bitdiff(of, wantf, n16, 4) < 0, "fx_to_f32(BF16) %s", nm);
                fx_to_f32(&kc, (int64_t)n32, f, FX_DTYPE_F32, of);
                CHECK_MSG(kt_bitdiff(of, f, n32, 4) < 0, "fx_to_f32(F32) %s", nm);
                oh[n32 < nf ? n32 : nf - 1] = 0x5a5a;
                fx_f32_to_bf16(&kc, (int64_t)n32, f, oh);
                at = kt_bitdiff(oh, wanth, n32, 2);
                CHECK_MSG(at < 0, "f32->bf16 %s/%dt n=%zu at %ld: %08x -> %04x want %04x", nm, t, n32, at,
                          at < 0 ? 0 : bits(f[at]), at < 0 ? 0 : oh[at], at < 0 ? 0 : wanth[at]);
                if (n32 < nf) CHECK_MSG(oh[n32] == 0x5a5a, "f32->bf16 %s wrote past n", nm);
                fx_f32_to_f16(&kc, (int64_t)n32, f, oh);
                at = kt_bitdiff(oh, wanth + nf, n32, 2);
                CHECK_MSG(at < 0, "f32->f16 %s/%dt n=%zu at %ld: %08x -> %04x want %04x", nm, t, n32, at,
                          at < 0 ? 0 : bits(f[at]), at < 0 ? 0 : oh[at], at < 0 ? 0 : wanth[nf + at]);
            }
            kt_ctx_free(&kc);
        }
    }
    free(f), free(h), free(of), free(oh), free(wantf), free(wanth);
}
