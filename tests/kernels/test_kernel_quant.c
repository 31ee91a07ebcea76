/*
 * test_kernel_quant.c — the ggml block types: dequantization against the
 * per-element decoding rules of the format reference (hand-built blocks
 * with exactly known values, and random blocks), every table's
 * dequantizer against the scalar reference (bitwise), the reference
 * quantizers (round trips, error bounds, golden blocks made by ggml's own
 * reference quantizers), and fx_linear with block-typed weights against
 * fx_linear on the dequantized weights (bitwise, every ISA, 1–3 threads).
 */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>

#include "kernel_isas.h"
#include "quant_input.h"
#include "simd/gemm/gemm.h"
#include "simd/kernels.h"
#include "simd/quant/quant.h"

static const fx_dtype block_types[] = {FX_DTYPE_Q8_0, FX_DTYPE_Q4_0, FX_DTYPE_Q4_1, FX_DTYPE_Q5_0,
                                       FX_DTYPE_Q5_1, FX_DTYPE_Q2_K, FX_DTYPE_Q3_K, FX_DTYPE_Q4_K,
                                       FX_DTYPE_Q5_K, FX_DTYPE_Q6_K, FX_DTYPE_IQ4_NL, FX_DTYPE_IQ4_XS};
#define N_BLOCK_TYPES (int)(sizeof block_types / sizeof *block_types)

static const int iq4_grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* ------------------------------------------------------------------------ */
/* Decoding of one element, straight from the format reference's tables     */
/* ------------------------------------------------------------------------ */

static double f16at(const uint8_t *p) { return fx_f16_bits_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* Nibble j (0..31) of a 32-element nibble block: low of qs[j] for j < 16,
 * high of qs[j − 16] otherwise. */
static int nib(const uint8_t *qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }

/* 6-bit scale and min of sub-block j of the Q4_K/Q5_K 12-byte packing. */
static void k4_scale_min(const uint8_t *s, int j, int *sc, int *mn) {
    if (j < 4) *sc = s[j] & 63, *mn = s[j + 4] & 63;
    else *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
}

/* The value of element e of block b of type t, in double. */
static double spec_value(fx_dtype t, const uint8_t *b, int e) {
    const int h = e / 128, r = e % 128, tt = r / 32, l = r % 32, s16 = e / 16, s32 = e / 32;
    uint32_t qh;
    switch (t) {
    case FX_DTYPE_Q8_0: return f16at(b) * (int8_t)b[2 + e];
    case FX_DTYPE_Q4_0: return f16at(b) * (nib(b + 2, e) - 8);
    case FX_DTYPE_Q4_1: return f16at(b) * nib(b + 4, e) + f16at(b + 2);
    case FX_DTYPE_Q5_0:
        memcpy(&qh, b + 2, 4);
        return f16at(b) * ((nib(b + 6, e) | (int)((qh >> e) & 1) << 4) - 16);
    case FX_DTYPE_Q5_1:
        memcpy(&qh, b + 4, 4);
        return f16at(b) * (nib(b + 8, e) | (int)((qh >> e) & 1) << 4) + f16at(b + 2);
    case FX_DTYPE_IQ4_NL: return f16at(b) * iq4_grid[nib(b + 2, e)];
    case FX_DTYPE_Q2_K: {
        int q = (b[16 + 32 * h + l] >> (2 * tt)) & 3, sc = b[s16];
        return f16at(b + 80) * (sc & 15) * q - f16at(b + 82) * (sc >> 4);
    }
    case FX_DTYPE_Q3_K: {
        int q2 = (b[32 + 32 * h + l] >> (2 * tt)) & 3, hb = (b[e % 32] >> (e / 32)) & 1;
        int q = q2 - (hb ? 0 : 4);
        const uint8_t *sc = b + 96;
        int s = s16, low4 = s < 8 ? sc[s] & 15 : sc[s - 8] >> 4, hi2 = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
        return f16at(b + 108) * ((low4 | hi2 << 4) - 32) * q;
    }
    case FX_DTYPE_Q4_K:
    case FX_DTYPE_Q5_K: {
        const uint8_t *qs = b + (t == FX_DTYPE_Q4_K ? 16 : 48);
        int byte = qs[32 * (e / 64) + e % 32], q = s32 % 2 == 0 ? byte & 15 : byte >> 4;
        if (t == FX_DTYPE_Q5_K) q |= ((b[16 + e % 32] >> s32) & 1) << 4;
        int sc, mn;
        k4_scale_min(b + 4, s32, &sc, &mn);
        return f16at(b) * sc * q - f16at(b + 2) * mn;
    }
    case FX_DTYPE_Q6_K: {
        int lb = b[64 * h + 32 * (tt & 1) + l], lo = tt < 2 ? lb & 15 : lb >> 4;
        int hi2 = (b[128 + 32 * h + l] >> (2 * tt)) & 3;
        return f16at(b + 208) * (int8_t)b[192 + s16] * ((lo | hi2 << 4) - 32);
    }
    case FX_DTYPE_IQ4_XS: {
        int bb = s32, i = e % 32, sh = b[2] | b[3] << 8;
        int ls = ((b[4 + bb / 2] >> (4 * (bb & 1))) & 15) | (((sh >> (2 * bb)) & 3) << 4);
        int n = i < 16 ? b[8 + 16 * bb + i] & 15 : b[8 + 16 * bb + i - 16] >> 4;
        return f16at(b) * (ls - 32) * iq4_grid[n];
    }
    default: return 0;
    }
}

/* Random block bytes with finite f16 scales in [2⁻⁸, 2) (all types keep
 * their f16 fields at these offsets). */
static void random_block(fx_test_rng *r, fx_dtype t, uint8_t *b) {
    size_t bytes = fx_dtype_block_bytes(t);
    for (size_t i = 0; i < bytes; i++) b[i] = (uint8_t)fx_test_rng_u64(r);
    int f16_at[3] = {-1, -1, -1};
    switch (t) {
    case FX_DTYPE_Q8_0: case FX_DTYPE_Q4_0: case FX_DTYPE_Q5_0: case FX_DTYPE_IQ4_NL: case FX_DTYPE_IQ4_XS:
        f16_at[0] = 0; break;
    case FX_DTYPE_Q4_1: case FX_DTYPE_Q5_1: case FX_DTYPE_Q4_K: case FX_DTYPE_Q5_K:
        f16_at[0] = 0, f16_at[1] = 2; break;
    case FX_DTYPE_Q2_K: f16_at[0] = 80, f16_at[1] = 82; break;
    case FX_DTYPE_Q3_K: f16_at[0] = 108; break;
    case FX_DTYPE_Q6_K: f16_at[0] = 208; break;
    default: break;
    }
    for (int k = 0; k < 3; k++)
        if (f16_at[k] >= 0) {
            uint64_t v = fx_test_rng_u64(r);
            uint16_t h = (uint16_t)(((v & 1) << 15) | ((7 + (v >> 1) % 9) << 10) | ((v >> 8) & 0x3ff));
            b[f16_at[k]] = (uint8_t)h, b[f16_at[k] + 1] = (uint8_t)(h >> 8);
        }
}

/* ------------------------------------------------------------------------ */
/* Dequantization                                                           */
/* ------------------------------------------------------------------------ */

TEST(kernel_quant_dtype_sizes) {
    static const struct { fx_dtype t; int64_t block; size_t bytes; const char *name; } want[] = {
        {FX_DTYPE_Q8_0, 32, 34, "Q8_0"},   {FX_DTYPE_Q4_0, 32, 18, "Q4_0"},   {FX_DTYPE_Q4_1, 32, 20, "Q4_1"},
        {FX_DTYPE_Q5_0, 32, 22, "Q5_0"},   {FX_DTYPE_Q5_1, 32, 24, "Q5_1"},   {FX_DTYPE_Q2_K, 256, 84, "Q2_K"},
        {FX_DTYPE_Q3_K, 256, 110, "Q3_K"}, {FX_DTYPE_Q4_K, 256, 144, "Q4_K"}, {FX_DTYPE_Q5_K, 256, 176, "Q5_K"},
        {FX_DTYPE_Q6_K, 256, 210, "Q6_K"}, {FX_DTYPE_IQ4_NL, 32, 18, "IQ4_NL"}, {FX_DTYPE_IQ4_XS, 256, 136, "IQ4_XS"},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        CHECK_EQ_INT(fx_dtype_block(want[i].t), want[i].block);
        CHECK_EQ_INT(fx_dtype_block_bytes(want[i].t), want[i].bytes);
        CHECK(!strcmp(fx_dtype_name(want[i].t), want[i].name));
        CHECK_EQ_INT(fx_dtype_parse(want[i].name), want[i].t);
        CHECK(fx_dtype_is_block(want[i].t));
        CHECK_EQ_INT(fx_dtype_size(want[i].t), 0);
        CHECK_EQ_INT(fx_dtype_row_bytes(want[i].t, 3 * want[i].block), 3 * (int64_t)want[i].bytes);
        CHECK_EQ_INT(fx_dtype_row_bytes(want[i].t, want[i].block + 1), -1);
    }
    CHECK_EQ_INT(fx_dtype_parse("q4_k"), FX_DTYPE_Q4_K);
    CHECK_EQ_INT(fx_dtype_parse("bf16"), FX_DTYPE_BF16);
    CHECK_EQ_INT(fx_dtype_parse("q4_2"), -1);
    CHECK_EQ_INT(fx_dtype_row_bytes(FX_DTYPE_BF16, 7), 14);
    CHECK(!fx_dtype_is_block(FX_DTYPE_F16));
}

/* Hand-built blocks whose every value is exact: f16 scales that are powers
 * of two and codes chosen element by element. */
TEST(kernel_quant_dequant_hand_built) {
    uint8_t b[256];
    float y[256];
    /* Q8_0: d = 0.5, qs = -128 .. -97 */
    b[0] = 0x00, b[1] = 0x38;
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)(-128 + j);
    fx_dequantize_row(FX_DTYPE_Q8_0, b, 32, y);
    for (int j = 0; j < 32; j++) CHECK_NEAR(y[j], 0.5 * (-128 + j), 0);
    /* Q4_0: d = 2, qs[j] = j | (15 − j) << 4 → element j: 2(j − 8), element j+16: 2(7 − j) */
    b[0] = 0x00, b[1] = 0x40;
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(j | (15 - j) << 4);
    fx_dequantize_row(FX_DTYPE_Q4_0, b, 32, y);
    for (int j = 0; j < 16; j++) {
        CHECK_NEAR(y[j], 2.0 * (j - 8), 0);
        CHECK_NEAR(y[j + 16], 2.0 * (7 - j), 0);
    }
    /* Q4_1: d = 0.25, m = -1 */
    b[0] = 0x00, b[1] = 0x34, b[2] = 0x00, b[3] = 0xbc;
    for (int j = 0; j < 16; j++) b[4 + j] = (uint8_t)(j | (15 - j) << 4);
    fx_dequantize_row(FX_DTYPE_Q4_1, b, 32, y);
    for (int j = 0; j < 16; j++) {
        CHECK_NEAR(y[j], 0.25 * j - 1, 0);
        CHECK_NEAR(y[j + 16], 0.25 * (15 - j) - 1, 0);
    }
    /* Q5_0: d = 1, qh = 0xAAAA5555: odd elements of the low half and even
     * of the high half get the 5th bit */
    b[0] = 0x00, b[1] = 0x3c;
    uint32_t qh = 0xAAAA5555u;
    memcpy(b + 2, &qh, 4);
    for (int j = 0; j < 16; j++) b[6 + j] = (uint8_t)(j | (15 - j) << 4);
    fx_dequantize_row(FX_DTYPE_Q5_0, b, 32, y);
    for (int j = 0; j < 32; j++) {
        int q = (j < 16 ? j : 31 - j) | (int)((qh >> j) & 1) << 4;
        CHECK_NEAR(y[j], q - 16, 0);
    }
    /* IQ4_NL: d = 1: the grid itself */
    b[0] = 0x00, b[1] = 0x3c;
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(j | (15 - j) << 4);
    fx_dequantize_row(FX_DTYPE_IQ4_NL, b, 32, y);
    for (int j = 0; j < 16; j++) {
        CHECK_NEAR(y[j], iq4_grid[j], 0);
        CHECK_NEAR(y[j + 16], iq4_grid[15 - j], 0);
    }
    /* Q4_K: d = 1, dmin = 0.5; sub-block j has scale j+1 (6 bits) and min
     * 2j (6 bits); all codes 3 in the low nibbles and 12 in the high ones */
    memset(b, 0, sizeof b);
    b[0] = 0x00, b[1] = 0x3c, b[2] = 0x00, b[3] = 0x38;
    for (int j = 0; j < 8; j++) {
        int sc = 40 + j, mn = 2 * j + 33; /* 6-bit values using the top bits */
        if (j < 4) b[4 + j] = (uint8_t)sc, b[4 + j + 4] = (uint8_t)mn;
        else {
            b[4 + j + 4] = (uint8_t)((sc & 15) | (mn & 15) << 4);
            b[4 + j - 4] |= (uint8_t)((sc >> 4) << 6);
            b[4 + j] |= (uint8_t)((mn >> 4) << 6);
        }
    }
    for (int i = 0; i < 128; i++) b[16 + i] = 3 | 12 << 4;
    fx_dequantize_row(FX_DTYPE_Q4_K, b, 256, y);
    for (int e = 0; e < 256; e++) {
        int j = e / 32, q = j % 2 ? 12 : 3;
        CHECK_NEAR(y[e], (40 + j) * q - 0.5 * (2 * j + 33), 0);
    }
    /* Q6_K: d = 1/4, scales[s] = s − 8, every 6-bit code 37 (= 5 + 32):
     * ql nibbles 5, qh 2-bit fields 2 */
    memset(b, 0, sizeof b);
    for (int i = 0; i < 128; i++) b[i] = 0x55;
    for (int i = 0; i < 64; i++) b[128 + i] = 0xAA;
    for (int s = 0; s < 16; s++) b[192 + s] = (uint8_t)(int8_t)(s - 8);
    b[208] = 0x00, b[209] = 0x34;
    fx_dequantize_row(FX_DTYPE_Q6_K, b, 256, y);
    for (int e = 0; e < 256; e++) CHECK_NEAR(y[e], 0.25 * (e / 16 - 8) * (37 - 32), 0);
    /* Q2_K: d = 1, dmin = 2, scales[s] = (s & 15) | (s % 4) << 4, codes 0..3 by position */
    memset(b, 0, sizeof b);
    for (int s = 0; s < 16; s++) b[s] = (uint8_t)(s | (s % 4) << 4);
    for (int i = 0; i < 64; i++) b[16 + i] = 0xE4; /* fields 0,1,2,3 */
    b[80] = 0x00, b[81] = 0x3c, b[82] = 0x00, b[83] = 0x40;
    fx_dequantize_row(FX_DTYPE_Q2_K, b, 256, y);
    for (int e = 0; e < 256; e++) {
        int s = e / 16, t = (e % 128) / 32;
        CHECK_NEAR(y[e], s * t - 2.0 * (s % 4), 0);
    }
}

/* Every element of random blocks against the per-element rules. */
TEST(kernel_quant_dequant_matches_format_rules) {
    fx_test_rng r;
    fx_test_rng_seed(&r, 7);
    for (int ti = 0; ti < N_BLOCK_TYPES; ti++) {
        const fx_dtype t = block_types[ti];
        const int64_t bl = fx_dtype_block(t);
        uint8_t b[4 * 256];
        float y[4 * 256];
        double worst = 0;
        for (int round = 0; round < 50; round++) {
            for (int k = 0; k < 4; k++) random_block(&r, t, b + k * fx_dtype_block_bytes(t));
            fx_dequantize_row(t, b, 4 * bl, y);
            for (int k = 0; k < 4; k++)
                for (int e = 0; e < bl; e++) {
                    double want = spec_value(t, b + k * fx_dtype_block_bytes(t), e);
                    double err = fabs(y[k * bl + e] - want) / (fabs(want) + 1e-30);
                    if (want == 0) err = fabs(y[k * bl + e]);
                    if (err > worst) worst = err;
                }
        }
        /* at most two f32 roundings away from the exact double value */
        CHECK_MSG(worst <= 3 * 0x1p-24, "%s: worst relative difference %g", fx_dtype_name(t), worst);
    }
}

/* Every table's dequantizer equals the scalar reference bit for bit (and
 * its direct bf16 one the reference rounded to bf16). */
TEST(kernel_quant_dequant_tables_bitwise) {
    kt_isas isas = kt_isas_list("kernel_quant_dequant_tables_bitwise", 0);
    fx_test_rng r;
    fx_test_rng_seed(&r, 11);
    const int64_t rows = 5, cols = 1024;
    for (int ti = 0; ti < N_BLOCK_TYPES; ti++) {
        const fx_dtype t = block_types[ti];
        const int64_t rb = fx_dtype_row_bytes(t, cols), nb = rows * cols / fx_dtype_block(t);
        uint8_t *q = malloc((size_t)(rows * rb));
        float *ref = kt_alloc((size_t)(rows * cols)), *got = kt_alloc((size_t)(rows * cols));
        for (int64_t i = 0; i < nb; i++) random_block(&r, t, q + i * fx_dtype_block_bytes(t));
        fx_dequantize_row(t, q, rows * cols, ref);
        for (int i = 0; i < isas.n; i++)
            for (int threads = 1; threads <= 2; threads++) {
                fx_kctx kc = kt_ctx(isas.k[i], threads);
                memset(got, 0xff, (size_t)(rows * cols) * 4);
                fx_dequantize(&kc, t, rows, cols, q, rb, got);
                long at = kt_bitdiff(got, ref, (size_t)(rows * cols), 4);
                CHECK_MSG(at < 0, "%s on %s (%d threads): element %ld differs: %g vs %g", fx_dtype_name(t),
                          kt_name(isas.k[i]), threads, at, at < 0 ? 0.0 : got[at], at < 0 ? 0.0 : ref[at]);
                kt_ctx_free(&kc);
            }
        /* the direct bf16 dequantizers: the f32 reference rounded to nearest even */
        uint16_t *gb = malloc((size_t)(rows * cols) * 2);
        for (int i = 0; i < isas.n; i++) {
            fx_dequant_bf16_fn fb = fx_quant_dequant_bf16_fn(isas.k[i], t);
            if (!fb) continue;
            fb(q, nb, gb);
            long at = -1;
            for (int64_t e = 0; e < rows * cols && at < 0; e++)
                if (gb[e] != fx_f32_to_bf16_bits(ref[e])) at = (long)e;
            CHECK_MSG(at < 0, "%s bf16 on %s: element %ld differs: %04x vs %04x", fx_dtype_name(t), kt_name(isas.k[i]),
                      at, at < 0 ? 0 : gb[at], at < 0 ? 0 : fx_f32_to_bf16_bits(ref[at]));
        }
        free(gb);
        free(q), free(ref), free(got);
    }
}

/* ------------------------------------------------------------------------ */
/* Reference quantizers                                                     */
/* ------------------------------------------------------------------------ */

/* Relative RMS error of quantize → dequantize on N(0, 0.02²) with two
 * outliers (4096 values) is about what the format reference measured for
 * ggml's reference quantizers on such data (its own random draw: within
 * 0.8–1.25×), and the types rank as there. */
TEST(kernel_quant_reference_error_bounds) {
    static const struct { fx_dtype t; double rmse; } bound[] = {
        {FX_DTYPE_Q8_0, 0.006}, {FX_DTYPE_Q6_K, 0.020}, {FX_DTYPE_Q5_K, 0.037}, {FX_DTYPE_Q5_1, 0.039},
        {FX_DTYPE_Q5_0, 0.049}, {FX_DTYPE_Q4_K, 0.076}, {FX_DTYPE_Q4_1, 0.083}, {FX_DTYPE_Q4_0, 0.099},
        {FX_DTYPE_Q3_K, 0.162}, {FX_DTYPE_Q2_K, 0.304},
    };
    const int n = 4096;
    float *x = kt_alloc(n), *y = kt_alloc(n);
    uint8_t *q = malloc(n * 2);
    fx_test_rng r;
    fx_test_rng_seed(&r, 3);
    for (int i = 0; i < n; i++) x[i] = 0.02f * fx_test_rng_normal(&r);
    x[100] = 0.5f, x[3000] = -0.4f;
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    for (size_t k = 0; k < sizeof bound / sizeof *bound; k++) {
        fx_quantize_row(bound[k].t, x, n, q);
        fx_dequantize_row(bound[k].t, q, n, y);
        double e = 0;
        for (int i = 0; i < n; i++) e += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        double rel = sqrt(e / ss);
        printf("    %s: relative RMSE %.4f (format reference: %.3f)\n", fx_dtype_name(bound[k].t), rel, bound[k].rmse);
        CHECK_MSG(rel <= bound[k].rmse * 1.25 && rel >= bound[k].rmse * 0.8, "%s: relative RMSE %g, expected about %g",
                  fx_dtype_name(bound[k].t), rel, bound[k].rmse);
    }
    free(x), free(y), free(q);
}

/* Values already on a type's grid come back exactly; zero rows stay zero;
 * quantizing a dequantized row reproduces its blocks for the 32-blocks. */
TEST(kernel_quant_reference_round_trips) {
    const int n = 512;
    float x[512], y[512], z[512];
    uint8_t q[1200], q2[1200];
    fx_test_rng r;
    fx_test_rng_seed(&r, 5);
    static const fx_dtype types[] = {FX_DTYPE_Q8_0, FX_DTYPE_Q4_0, FX_DTYPE_Q4_1, FX_DTYPE_Q5_0, FX_DTYPE_Q5_1,
                                     FX_DTYPE_Q2_K, FX_DTYPE_Q3_K, FX_DTYPE_Q4_K, FX_DTYPE_Q5_K, FX_DTYPE_Q6_K};
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        const fx_dtype t = types[k];
        memset(x, 0, sizeof x);
        fx_quantize_row(t, x, n, q);
        fx_dequantize_row(t, q, n, y);
        for (int i = 0; i < n; i++) CHECK_MSG(y[i] == 0, "%s: zero row gives %g at %d", fx_dtype_name(t), y[i], i);
        fx_test_fill_uniform(&r, x, n, 1.0f);
        fx_quantize_row(t, x, n, q);
        fx_dequantize_row(t, q, n, y);
        fx_quantize_row(t, y, n, q2);
        fx_dequantize_row(t, q2, n, z);
        /* the 32-blocks: a dequantized row is (nearly) a fixed point of quantization */
        double e1 = fx_test_max_abs_err(z, y, n), e0 = fx_test_max_abs_err(y, x, n);
        if (fx_dtype_block(t) == 32)
            CHECK_MSG(e1 <= e0, "%s: requantizing moved values by %g (first error %g)", fx_dtype_name(t), e1, e0);
        if (t == FX_DTYPE_Q4_0 || t == FX_DTYPE_Q5_0)
            CHECK_MSG(!memcmp(q, q2, (size_t)fx_dtype_row_bytes(t, n)), "%s: blocks of a dequantized row differ",
                      fx_dtype_name(t));
    }
    /* integers -127..127 scaled by a power of two are on Q8_0's grid */
    for (int i = 0; i < 32; i++) x[i] = (float)(i * 8 - 127) * 0.25f;
    x[31] = 127 * 0.25f;
    fx_quantize_row(FX_DTYPE_Q8_0, x, 32, q);
    fx_dequantize_row(FX_DTYPE_Q8_0, q, 32, y);
    for (int i = 0; i < 32; i++) CHECK_NEAR(y[i], x[i], 1e-6 * 32);
}

/* Blocks produced by ggml's own reference quantizers (quantize_row_*_ref,
 * tools/gen_quant_golden.c) from quant_input.h's inputs: ours (the
 * reference and every table's vector quantizers) must be byte-identical. */
TEST(kernel_quant_reference_matches_ggml_golden) {
    static const fx_dtype types[] = {FX_DTYPE_Q8_0, FX_DTYPE_Q4_0, FX_DTYPE_Q4_1, FX_DTYPE_Q5_0, FX_DTYPE_Q5_1,
                                     FX_DTYPE_Q2_K, FX_DTYPE_Q3_K, FX_DTYPE_Q4_K, FX_DTYPE_Q5_K, FX_DTYPE_Q6_K};
    kt_isas isas = kt_isas_list("kernel_quant_reference_matches_ggml_golden", 0);
    float *x = kt_alloc(QI_ROWS * QI_COLS);
    qi_fill(x);
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        const fx_dtype t = types[k];
        char rel[96];
        snprintf(rel, sizeof rel, "golden/quant/%s.bin", fx_dtype_name(t));
        size_t len = 0;
        unsigned char *golden = (unsigned char *)fx_test_read_file(fx_test_path(rel), &len);
        const int64_t rb = fx_dtype_row_bytes(t, QI_COLS);
        REQUIRE_MSG(golden, "missing %s", rel);
        CHECK_EQ_INT(len, QI_ROWS * rb);
        unsigned char *ours = malloc((size_t)(QI_ROWS * rb));
        for (int i = 0; i < QI_ROWS; i++) fx_quantize_row(t, x + i * QI_COLS, QI_COLS, ours + i * rb);
        for (int i = 0; i < QI_ROWS && len == (size_t)(QI_ROWS * rb); i++)
            CHECK_MSG(!memcmp(ours + i * rb, golden + i * rb, (size_t)rb), "%s: row %d (%s) differs from ggml's blocks",
                      fx_dtype_name(t), i, qi_row_kind(i));
        for (int j = 0; j < isas.n && len == (size_t)(QI_ROWS * rb); j++) { /* and every table's quantizer */
            fx_kctx kc = kt_ctx(isas.k[j], 2);
            fx_quantize(&kc, t, QI_ROWS, QI_COLS, x, ours);
            for (int i = 0; i < QI_ROWS; i++)
                CHECK_MSG(!memcmp(ours + i * rb, golden + i * rb, (size_t)rb), "%s on %s: row %d (%s) differs",
                          fx_dtype_name(t), kt_name(isas.k[j]), i, qi_row_kind(i));
            kt_ctx_free(&kc);
        }
        free(ours);
        free(golden);
    }
    free(x);
}

TEST(kernel_quant_parallel_quantize_equals_rows) {
    const int64_t rows = 7, cols = 512;
    float *x = kt_alloc((size_t)(rows * cols));
    fx_test_rng r;
    fx_test_rng_seed(&r, 9);
    fx_test_fill_uniform(&r, x, (size_t)(rows * cols), 0.1f);
    const int64_t rb = fx_dtype_row_bytes(FX_DTYPE_Q4_K, cols);
    uint8_t *a = malloc((size_t)(rows * rb)), *b = malloc((size_t)(rows * rb));
    for (int64_t i = 0; i < rows; i++) fx_quantize_row(FX_DTYPE_Q4_K, x + i * cols, cols, a + i * rb);
    fx_kctx kc = kt_ctx(kt_scalar(), 3);
    fx_quantize(&kc, FX_DTYPE_Q4_K, rows, cols, x, b);
    CHECK(!memcmp(a, b, (size_t)(rows * rb)));
    kt_ctx_free(&kc);
    free(x), free(a), free(b);
}

/* Rows of kind `kind` (cols values) for the vector-quantizer comparison:
 * the shapes that take the searches' rarely used branches. */
static void quant_test_row(fx_test_rng *r, int kind, float *x, int64_t cols) {
    for (int64_t i = 0; i < cols; i++) {
        float g = fx_test_rng_normal(r), u = (float)fx_test_rng_uniform(r);
        switch (kind) {
        case 0: x[i] = 0.02f * g; break;                                           /* weights */
        case 1: x[i] = 0.0f; break;                                                /* zeros */
        case 2: x[i] = (i % 3 ? 1.0f : -1.0f) * 0x1p-140f * (float)(i % 7); break; /* subnormals */
        case 3: x[i] = 1e-20f * g; break;                                          /* tiny */
        case 4: x[i] = 1e30f * g; break;                                           /* huge (x² overflows) */
        case 5: x[i] = (float)((int)(u * 9.0f) - 4) * 0.5f; break;                  /* ties */
        case 6: x[i] = 0.01f * g + (i == 77 ? 30.0f : 0.0f); break;                 /* one outlier */
        case 7: x[i] = 1.0f + 0.001f * u; break;                                   /* all positive, narrow */
        case 8: x[i] = -(0.5f + u); break;                                         /* all negative */
        case 9: x[i] = (i / 16) % 3 == 0 ? 0.0f : (i & 1 ? -0.0f : 0.3f * g); break; /* zero sub-blocks, -0 */
        case 10: x[i] = (float)(i % 32) == 5 ? 2.0f : (i % 32 == 9 ? -2.0f : 0.1f * u); break; /* equal |max| */
        default: x[i] = ldexpf(g, (int)(u * 20.0f) - 10); break;                   /* wide range */
        }
    }
}

/* Every table's quantizers (fx_quantize) equal the scalar reference byte
 * for byte on rows of every kind, at 1–3 threads, including a row of an
 * odd number of super-blocks (the AVX-512 K-quant searches pair them). */
TEST(kernel_quant_tables_quantize_bitwise) {
    static const fx_dtype types[] = {FX_DTYPE_Q8_0, FX_DTYPE_Q4_0, FX_DTYPE_Q4_1, FX_DTYPE_Q5_0, FX_DTYPE_Q5_1,
                                     FX_DTYPE_Q2_K, FX_DTYPE_Q3_K, FX_DTYPE_Q4_K, FX_DTYPE_Q5_K, FX_DTYPE_Q6_K};
    kt_isas isas = kt_isas_list("kernel_quant_tables_quantize_bitwise", 0);
    fx_test_rng r;
    fx_test_rng_seed(&r, 17);
    const int kinds = 12, per_kind = KT_SMALL ? 2 : 6;
    const int64_t cols = 768, rows = (int64_t)kinds * per_kind; /* 3 super-blocks a row */
    float *x = kt_alloc((size_t)(rows * cols));
    for (int64_t i = 0; i < rows; i++) quant_test_row(&r, (int)(i / per_kind), x + i * cols, cols);
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        const fx_dtype t = types[k];
        const int64_t rb = fx_dtype_row_bytes(t, cols);
        uint8_t *ref = malloc((size_t)(rows * rb)), *got = malloc((size_t)(rows * rb));
        for (int64_t i = 0; i < rows; i++) fx_quantize_row(t, x + i * cols, cols, ref + i * rb);
        for (int i = 0; i < isas.n; i++)
            for (int threads = 1; threads <= 3; threads += 2) {
                fx_kctx kc = kt_ctx(isas.k[i], threads);
                memset(got, 0xA5, (size_t)(rows * rb));
                fx_quantize(&kc, t, rows, cols, x, got);
                for (int64_t row = 0; row < rows; row++) {
                    int64_t at = -1;
                    for (int64_t b = 0; b < rb && at < 0; b++)
                        if (got[row * rb + b] != ref[row * rb + b]) at = b;
                    CHECK_MSG(at < 0, "%s on %s (%d threads): row %lld (kind %lld) differs at byte %lld",
                              fx_dtype_name(t), kt_name(isas.k[i]), threads, (long long)row,
                              (long long)(row / per_kind), (long long)at);
                    if (at >= 0) break;
                }
                kt_ctx_free(&kc);
            }
        free(ref), free(got);
    }
    free(x);
}

/* ------------------------------------------------------------------------ */
/* fx_linear with block-typed weights                                       */
/* ------------------------------------------------------------------------ */

/* Whether the table rounds expanded weights to bf16 (at every m: the
 * GEMV too, so a table runs them as the bf16 weight of their values). */
static int bf16_target(const fx_kernels *kt) {
    return fx_gemm_expand_target(kt->gemm ? kt->gemm : &fx_gemm_scalar) == FX_DTYPE_BF16;
}

/* y (block weights) must equal y (dequantized weights as F32, or BF16 on
 * bf16-dot paths) bit for bit, for every epilogue. */
static void check_linear(const fx_kernels *kt, fx_dtype t, int64_t m, int64_t n, int64_t k, int threads,
                         fx_epilogue_mode mode, fx_test_rng *r) {
    const int64_t rb = fx_dtype_row_bytes(t, k);
    uint8_t *wq = malloc((size_t)(n * rb));
    float *wf = kt_alloc((size_t)(n * k)), *x = kt_alloc((size_t)(m * k));
    float *ya = kt_alloc((size_t)(m * n)), *yb = kt_alloc((size_t)(m * n));
    float *bias = kt_alloc((size_t)n), *gate = kt_alloc((size_t)n);
    uint16_t *wb = malloc((size_t)(n * k) * 2);
    float *row = kt_alloc((size_t)k);
    for (int64_t j = 0; j < n; j++) {
        for (int64_t q = 0; q < k; q++) row[q] = 0.05f * fx_test_rng_normal(r);
        if (fx_dtype_can_quantize(t)) fx_quantize_row(t, row, k, wq + j * rb);
        else /* IQ4: random blocks */
            for (int64_t b = 0; b < k / fx_dtype_block(t); b++)
                random_block(r, t, wq + j * rb + b * (int64_t)fx_dtype_block_bytes(t));
    }
    fx_dequantize_row(t, wq, n * k, wf);
    for (int64_t i = 0; i < n * k; i++) wb[i] = fx_f32_to_bf16_bits(wf[i]);
    fx_test_fill_uniform(r, x, (size_t)(m * k), 1.0f);
    fx_test_fill_uniform(r, bias, (size_t)n, 0.5f);
    fx_test_fill_uniform(r, gate, (size_t)n, 1.0f);
    fx_test_fill_uniform(r, ya, (size_t)(m * n), 1.0f);
    memcpy(yb, ya, (size_t)(m * n) * 4);
    const fx_epilogue epi = {mode, mode == FX_EPI_STORE ? NULL : bias, gate};
    fx_kctx kc = kt_ctx(kt, threads);
    const fx_weight w = {.data = wq, .dtype = t, .n = n, .k = k, .ld = k};
    const int bf = bf16_target(kt);
    const fx_weight wref = {.data = bf ? (const void *)wb : (const void *)wf, .dtype = bf ? FX_DTYPE_BF16 : FX_DTYPE_F32, .n = n, .k = k, .ld = k};
    fx_linear(&kc, m, x, k, &w, ya, n, &epi);
    fx_linear(&kc, m, x, k, &wref, yb, n, &epi);
    long at = kt_bitdiff(ya, yb, (size_t)(m * n), 4);
    CHECK_MSG(at < 0, "%s %s m=%lld n=%lld k=%lld threads=%d mode=%d: y[%ld] %.9g vs %.9g", kt_name(kt),
              fx_dtype_name(t), (long long)m, (long long)n, (long long)k, threads, (int)mode, at,
              at < 0 ? 0.0 : ya[at], at < 0 ? 0.0 : yb[at]);
    kt_ctx_free(&kc);
    free(wq), free(wf), free(x), free(ya), free(yb), free(bias), free(gate), free(wb), free(row);
}

TEST(kernel_quant_linear_equals_dequantized) {
    kt_isas isas = kt_isas_list("kernel_quant_linear_equals_dequantized", 1);
    fx_test_rng r;
    fx_test_rng_seed(&r, 21);
    /* GEMV (m <= 4) and blocked shapes; n not a multiple of any tile; K over
     * several K blocks on every path (k = 1792 > kc of scalar and neon) */
    static const int64_t shapes[][3] = {{1, 37, 512}, {3, 50, 256}, {4, 33, 1024},
                                        {7, 45, 512}, {29, 70, 1792}, {64, 19, 256}};
    for (int i = 0; i < isas.n; i++)
        for (int ti = 0; ti < N_BLOCK_TYPES; ti++)
            for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
                if (KT_SMALL && s >= 4) continue;
                for (int threads = 1; threads <= 3; threads += 2)
                    check_linear(isas.k[i], block_types[ti], shapes[s][0], shapes[s][1], shapes[s][2], threads,
                                 (fx_epilogue_mode)((s + (size_t)ti) % 3), &r);
            }
}

/* fp8 by hand, independently of the kernels' bit construction: E4M3FN
 * bias 7 (0x7F/0xFF NaN, no infinities), E5M2 bias 15 (exponent 31:
 * infinities and NaNs); subnormals m·2^(1 − bias − mantissa bits). */
static float fp8_value(fx_dtype t, uint8_t b) {
    const int e4 = t == FX_DTYPE_F8_E4M3, mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15;
    const int e = b >> mbits & (e4 ? 15 : 31), m = b & ((1 << mbits) - 1);
    double v = e ? ldexp(1.0 + m / (double)(1 << mbits), e - bias) : ldexp(m, 1 - bias - mbits);
    return (float)(b & 0x80 ? -v : v);
}

/* Every byte decodes to its value (NaNs and infinities by class). */
TEST(kernel_quant_fp8_decode) {
    for (int t = FX_DTYPE_F8_E4M3; t <= FX_DTYPE_F8_E5M2; t++)
        for (int b = 0; b < 256; b++) {
            const uint8_t byte = (uint8_t)b;
            float got;
            fx_dequantize_row((fx_dtype)t, &byte, 1, &got);
            const int low7 = b & 0x7F;
            if (t == FX_DTYPE_F8_E4M3 && low7 == 0x7F) CHECK_MSG(got != got, "E4M3 0x%02x: %g, want NaN", b, got);
            else if (t == FX_DTYPE_F8_E5M2 && low7 > 0x7C) CHECK_MSG(got != got, "E5M2 0x%02x: %g, want NaN", b, got);
            else if (t == FX_DTYPE_F8_E5M2 && low7 == 0x7C) CHECK_MSG(got == (b & 0x80 ? -INFINITY : INFINITY), "E5M2 0x%02x: %g", b, got);
            else CHECK_MSG(got == fp8_value((fx_dtype)t, byte) && !!signbit(got) == !!(b & 0x80), "%s 0x%02x: %g, want %g",
                           fx_dtype_name((fx_dtype)t), b, got, fp8_value((fx_dtype)t, byte));
        }
    uint8_t max = 0x7E;
    float v;
    fx_dequantize_row(FX_DTYPE_F8_E4M3, &max, 1, &v);
    CHECK(v == 448.0f); /* the E4M3FN maximum */
    /* every table's decoder (vector lanes and tail) equals the reference bit for bit, NaNs included */
    kt_isas isas = kt_isas_list("kernel_quant_fp8_decode", 0);
    uint8_t all[259];
    for (int b = 0; b < 259; b++) all[b] = (uint8_t)(b * 7 + 3); /* every byte, then 3 for a tail */
    for (int i = 0; i < isas.n; i++)
        for (int t = FX_DTYPE_F8_E4M3; t <= FX_DTYPE_F8_E5M2; t++) {
            float ref[259], got[259];
            fx_kctx kc = kt_ctx(isas.k[i], 1);
            fx_dequantize_row((fx_dtype)t, all, 259, ref);
            fx_dequantize(&kc, (fx_dtype)t, 1, 259, all, 259, got);
            long at = kt_bitdiff(got, ref, 259, 4);
            CHECK_MSG(at < 0, "%s %s: byte 0x%02x gives %g, reference %g", kt_name(isas.k[i]), fx_dtype_name((fx_dtype)t),
                      at < 0 ? 0 : all[at], at < 0 ? 0.0 : got[at], at < 0 ? 0.0 : ref[at]);
            kt_ctx_free(&kc);
        }
}

/* fp8 weights with a per-tensor scale: y equals, bit for bit, the product
 * with the expanded weight f32(fp8)·scale as F32 (or rounded to BF16 on the
 * bf16-dot paths), on every table, GEMV and blocked shapes (k not a
 * multiple of 32 too), every epilogue; scale 0 is the unscaled weight. */
TEST(kernel_quant_fp8_linear_equals_dequantized) {
    kt_isas isas = kt_isas_list("kernel_quant_fp8_linear_equals_dequantized", 1);
    fx_test_rng r;
    fx_test_rng_seed(&r, 88);
    static const int64_t shapes[][3] = {{1, 37, 512}, {3, 50, 100}, {7, 45, 512}, {29, 70, 1792}, {64, 19, 250}};
    static const float scales[] = {0.0f, 1.0f, 0.00123f, 3.7e-5f};
    int64_t checked = 0;
    for (int i = 0; i < isas.n; i++)
        for (int t = FX_DTYPE_F8_E4M3; t <= FX_DTYPE_F8_E5M2; t++)
            for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
                if (KT_SMALL && s >= 3) continue;
                const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                const float scale = scales[(s + (size_t)t) % 4];
                uint8_t *wq = malloc((size_t)(n * k));
                float *wf = kt_alloc((size_t)(n * k)), *x = kt_alloc((size_t)(m * k));
                float *ya = kt_alloc((size_t)(m * n)), *yb = kt_alloc((size_t)(m * n));
                float *bias = kt_alloc((size_t)n), *gate = kt_alloc((size_t)n);
                uint16_t *wb = malloc((size_t)(n * k) * 2);
                for (int64_t q = 0; q < n * k; q++) {
                    uint8_t b;
                    do b = (uint8_t)(fx_test_rng_u64(&r) >> 56);
                    while ((t == FX_DTYPE_F8_E4M3 && (b & 0x7F) == 0x7F) || (t == FX_DTYPE_F8_E5M2 && (b & 0x7F) >= 0x7C));
                    wq[q] = b;
                    wf[q] = fp8_value((fx_dtype)t, b) * (scale != 0.0f ? scale : 1.0f);
                    wb[q] = fx_f32_to_bf16_bits(wf[q]);
                }
                fx_test_fill_uniform(&r, x, (size_t)(m * k), 1.0f);
                fx_test_fill_uniform(&r, bias, (size_t)n, 0.5f);
                fx_test_fill_uniform(&r, gate, (size_t)n, 1.0f);
                fx_test_fill_uniform(&r, ya, (size_t)(m * n), 1.0f);
                memcpy(yb, ya, (size_t)(m * n) * 4);
                const fx_epilogue_mode mode = (fx_epilogue_mode)((s + (size_t)i) % 3);
                const fx_epilogue epi = {mode, mode == FX_EPI_STORE ? NULL : bias, gate};
                const int threads = 1 + (int)(s % 2) * 2;
                fx_kctx kc = kt_ctx(isas.k[i], threads);
                kc.int8 = 1; /* fp8 never runs W8A8: the mode must not change it */
                fx_weight w = {.data = wq, .dtype = (fx_dtype)t, .n = n, .k = k, .ld = k};
                w.scale = scale;
                const int bf = bf16_target(isas.k[i]);
                const fx_weight wref = {.data = bf ? (const void *)wb : (const void *)wf, .dtype = bf ? FX_DTYPE_BF16 : FX_DTYPE_F32, .n = n, .k = k, .ld = k};
                fx_linear(&kc, m, x, k, &w, ya, n, &epi);
                fx_linear(&kc, m, x, k, &wref, yb, n, &epi);
                long at = kt_bitdiff(ya, yb, (size_t)(m * n), 4);
                CHECK_MSG(at < 0, "%s %s scale %g m=%lld n=%lld k=%lld threads=%d mode=%d: y[%ld] %.9g vs %.9g",
                          kt_name(isas.k[i]), fx_dtype_name((fx_dtype)t), (double)scale, (long long)m, (long long)n,
                          (long long)k, threads, (int)mode, at, at < 0 ? 0.0 : ya[at], at < 0 ? 0.0 : yb[at]);
                checked++;
                kt_ctx_free(&kc);
                free(wq), free(wf), free(x), free(ya), free(yb), free(bias), free(gate), free(wb);
            }
    printf("    %lld fp8 products equal their expanded weights' bit for bit\n", (long long)checked);
}

/* A row slice (the fused qkv of a single block) as a view. */
TEST(kernel_quant_linear_row_view) {
    const fx_kernels *kt = fx_kernels_get(fx_isa_detect(), 0);
    fx_test_rng r;
    fx_test_rng_seed(&r, 4);
    const int64_t n = 48, k = 512, m = 9;
    const fx_dtype t = FX_DTYPE_Q4_K;
    const int64_t rb = fx_dtype_row_bytes(t, k);
    uint8_t *wq = malloc((size_t)(n * rb));
    float *wf = kt_alloc((size_t)(n * k)), *x = kt_alloc((size_t)(m * k));
    float *ya = kt_alloc((size_t)(m * n)), *yb = kt_alloc((size_t)(m * n));
    fx_test_fill_uniform(&r, wf, (size_t)(n * k), 0.1f);
    fx_quantize(&(fx_kctx){.k = kt, .threads = 1}, t, n, k, wf, wq);
    fx_test_fill_uniform(&r, x, (size_t)(m * k), 1.0f);
    const fx_weight w = {.data = wq, .dtype = t, .n = n, .k = k, .ld = k};
    fx_weight lo = fx_weight_rows(&w, 0, 16), hi = fx_weight_rows(&w, 16, 32);
    fx_kctx kc = kt_ctx(kt, 2);
    fx_linear(&kc, m, x, k, &w, ya, n, NULL);
    fx_linear(&kc, m, x, k, &lo, yb, n, NULL);
    fx_linear(&kc, m, x, k, &hi, yb + 16, n, NULL);
    CHECK(kt_bitdiff(ya, yb, (size_t)(m * n), 4) < 0);
    kt_ctx_free(&kc);
    free(wq), free(wf), free(x), free(ya), free(yb);
}

/* simd/dtype.h's table: names and ggml ids map back to their type; a
 * weight block type or fp8 has a reference dequantizer and nothing else does;
 * rows are whole blocks; a few sizes against ggml's block structs. */
TEST(kernel_dtype_table_is_consistent) {
    int weights = 0;
    for (int i = 0; i < FX_DTYPE_COUNT; i++) {
        const fx_dtype t = (fx_dtype)i;
        CHECK_MSG(fx_dtype_parse(fx_dtype_name(t)) == i, "%s", fx_dtype_name(t));
        if (fx_dtype_ggml_id(t) >= 0) CHECK_MSG(fx_dtype_of_ggml((uint32_t)fx_dtype_ggml_id(t)) == i, "%s", fx_dtype_name(t));
        const int block_weight = fx_dtype_is_weight(t) && fx_dtype_is_expanded(t);
        CHECK_MSG((fx_dequant_ref[t] != NULL) == block_weight, "%s", fx_dtype_name(t));
        CHECK_EQ_INT(fx_dtype_row_bytes(t, 3 * fx_dtype_block(t)), 3 * (int64_t)fx_dtype_block_bytes(t));
        CHECK_EQ_INT(fx_dtype_row_bytes(t, fx_dtype_block(t) + 1), fx_dtype_is_block(t) ? -1 : (int64_t)(fx_dtype_block_bytes(t) * (fx_dtype_block(t) + 1)));
        weights += fx_dtype_is_weight(t);
    }
    CHECK_EQ_INT(weights, 19); /* F32, F16, BF16, 12 block types, 2 fp8, I8, F4_E2M1 (NVFP4's elements) */
    CHECK_EQ_INT(fx_dtype_of_ggml(4), -1); /* retired Q4_2 */
    CHECK_EQ_INT(fx_dtype_of_ggml(99), -1);
    CHECK(fx_dtype_of_ggml(16) == FX_DTYPE_IQ2_XXS && fx_dtype_block_bytes(FX_DTYPE_IQ2_XXS) == 66);
    CHECK(fx_dtype_of_ggml(39) == FX_DTYPE_MXFP4 && fx_dtype_block(FX_DTYPE_MXFP4) == 32 &&
          fx_dtype_block_bytes(FX_DTYPE_MXFP4) == 17);
    CHECK(fx_dtype_of_ggml(15) == FX_DTYPE_Q8_K && fx_dtype_block_bytes(FX_DTYPE_Q8_K) == 292);
    CHECK(fx_dtype_in_safetensors(FX_DTYPE_BF16) && fx_dtype_in_safetensors(FX_DTYPE_C64) &&
          !fx_dtype_in_safetensors(FX_DTYPE_Q4_K));
    char names[200];
    CHECK(!strncmp(fx_dtype_weight_names(names, sizeof names), "F32, F16, BF16, Q8_0, ", 22));
    CHECK(strstr(names, "IQ4_XS") && !strstr(names, "IQ2"));
}
