/*
 * test_kernel_amx_emu.c — the plain-C tile unit (simd/common/amx_emu.h)
 * that the AMX kernels run on in the emulation build and that the real
 * AMX self-test compares against: configuration checks, faults, loads
 * that zero, stores, TDPBF16PS numerics (DAZ, FTZ, RNE and the two
 * partial sums per output of the SDM), the AMX-INT8 dots (signedness of
 * each variant, exact sums, int32 wrap-around, the shape checks),
 * per-thread state.
 */
#include "tests/test.h"

#include <pthread.h>
#include <setjmp.h>
#include <string.h>

#include "simd/common/amx_emu.h"
#include "src/base/float16.h"

static jmp_buf fault_jmp;
static char fault_msg[256];

static void catch_fault(const char *msg) {
    snprintf(fault_msg, sizeof fault_msg, "%s", msg);
    longjmp(fault_jmp, 1);
}

/* stmt must fault with a message containing want (the handler longjmps
 * back here). */
#define CHECK_FAULT(stmt, want)                                                                   \
    do {                                                                                          \
        volatile int got_ = 0;                                                                    \
        fault_msg[0] = 0;                                                                         \
        fx_amx_emu_on_fault(catch_fault);                                                         \
        if (setjmp(fault_jmp) == 0) {                                                             \
            stmt;                                                                                 \
        } else {                                                                                  \
            got_ = 1;                                                                             \
        }                                                                                         \
        fx_amx_emu_on_fault(NULL);                                                                \
        CHECK_MSG(got_ && strstr(fault_msg, want), "%s: no fault '%s' (got '%s')", #stmt, want,   \
                  fault_msg);                                                                     \
    } while (0)

static fx_amx_tilecfg cfg_all(int rows, int colsb) {
    fx_amx_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.rows[t] = (uint8_t)rows, c.colsb[t] = (uint16_t)colsb;
    return c;
}

TEST(kernel_amx_emu_config_checks) {
    CHECK(sizeof(fx_amx_tilecfg) == 64);
    fx_amx_tilecfg c = cfg_all(16, 64);
    float buf[256] = {0};
    /* nothing loaded: every tile instruction faults */
    fx_amx_emu_release();
    CHECK_FAULT(fx_amx_emu_zero(0), "palette 0");
    CHECK_FAULT(fx_amx_emu_load(1, buf, 64), "palette 0");
    CHECK_FAULT(fx_amx_emu_dpbf16ps(0, 1, 2), "palette 0");
    fx_amx_emu_ldtilecfg(&c);
    fx_amx_emu_zero(0); /* fine now */
    fx_amx_emu_release();
    CHECK_FAULT(fx_amx_emu_store(0, buf, 64), "palette 0");

    fx_amx_tilecfg bad = c;
    bad.palette = 2;
    CHECK_FAULT(fx_amx_emu_ldtilecfg(&bad), "palette 2");
    bad = c, bad.reserved[3] = 1;
    CHECK_FAULT(fx_amx_emu_ldtilecfg(&bad), "reserved byte 5");
    bad = c, bad.start_row = 3;
    CHECK_FAULT(fx_amx_emu_ldtilecfg(&bad), "start_row");
    bad = c, bad.rows[2] = 17;
    CHECK_FAULT(fx_amx_emu_ldtilecfg(&bad), "tmm2 rows 17");
    bad = c, bad.colsb[5] = 68;
    CHECK_FAULT(fx_amx_emu_ldtilecfg(&bad), "tmm5 colsb 68");
    bad = c, bad.colsb[4] = 0;
    CHECK_FAULT(fx_amx_emu_ldtilecfg(&bad), "tmm4 rows 16 with colsb 0");
    bad = c, bad.rows[9] = 1, bad.colsb[9] = 4;
    CHECK_FAULT(fx_amx_emu_ldtilecfg(&bad), "tile 9");
    /* a rejected configuration leaves the unit unconfigured */
    CHECK_FAULT(fx_amx_emu_zero(0), "palette 0");

    /* unconfigured tile, bad tile number */
    fx_amx_tilecfg part = c;
    part.rows[7] = 0, part.colsb[7] = 0;
    fx_amx_emu_ldtilecfg(&part);
    CHECK_FAULT(fx_amx_emu_zero(7), "tmm7 is not configured");
    CHECK_FAULT(fx_amx_emu_zero(8), "no tile tmm8");
    fx_amx_tilecfg back;
    fx_amx_emu_sttilecfg(&back);
    CHECK(!memcmp(&back, &part, sizeof back));
    /* palette 0 is the init state */
    fx_amx_tilecfg zero;
    memset(&zero, 0, sizeof zero);
    fx_amx_emu_ldtilecfg(&zero);
    CHECK_FAULT(fx_amx_emu_zero(0), "palette 0");
}

TEST(kernel_amx_emu_load_store_shapes) {
    fx_amx_tilecfg c = cfg_all(16, 64);
    c.rows[1] = 5, c.colsb[1] = 12; /* 5 rows of 3 dwords */
    fx_amx_emu_ldtilecfg(&c);
    uint32_t src[16 * 20], out[16 * 16];
    for (int i = 0; i < 16 * 20; i++) src[i] = 0x1000u + (uint32_t)i;
    /* tmm0, full shape, from rows 80 bytes apart, back with stride 64 */
    fx_amx_emu_load(0, src, 80);
    fx_amx_emu_store(0, out, 64);
    int ok = 1;
    for (int r = 0; r < 16; r++)
        for (int e = 0; e < 16; e++) ok &= out[r * 16 + e] == src[r * 20 + e];
    CHECK(ok);
    /* tmm1 (5 × 12 bytes): a store writes exactly that much */
    fx_amx_emu_load(1, src, 80);
    for (int i = 0; i < 16 * 16; i++) out[i] = 0xdeadbeefu;
    fx_amx_emu_store(1, out, 64);
    ok = 1;
    for (int r = 0; r < 16; r++)
        for (int e = 0; e < 16; e++)
            ok &= out[r * 16 + e] == (r < 5 && e < 3 ? src[r * 20 + e] : 0xdeadbeefu);
    CHECK(ok);
    /* TDPBF16PS on partial shapes: C 3×4 += A (3 rows × 2 pairs) · B (2
     * pair rows × 4 columns); the store writes C's 3 rows × 16 bytes */
    fx_amx_tilecfg tdp = cfg_all(16, 64);
    tdp.rows[2] = 3, tdp.colsb[2] = 8;
    tdp.rows[3] = 2, tdp.colsb[3] = 16;
    tdp.rows[4] = 3, tdp.colsb[4] = 16;
    fx_amx_emu_ldtilecfg(&tdp);
    uint16_t a[3 * 4], bm[2 * 8];
    for (int i = 0; i < 12; i++) a[i] = fx_f32_to_bf16_bits((float)(i + 1));
    for (int i = 0; i < 16; i++) bm[i] = fx_f32_to_bf16_bits((float)(i % 3));
    fx_amx_emu_load(2, a, 8);
    fx_amx_emu_load(3, bm, 16);
    fx_amx_emu_zero(4);
    fx_amx_emu_dpbf16ps(4, 2, 3);
    float cout[16 * 16];
    for (int i = 0; i < 256; i++) cout[i] = -1.0f;
    fx_amx_emu_store(4, cout, 16);
    ok = 1;
    for (int m = 0; m < 3; m++)
        for (int n = 0; n < 4; n++) {
            float want = 0;
            for (int k = 0; k < 2; k++)
                for (int e = 0; e < 2; e++)
                    want += fx_bf16_bits_to_f32(a[m * 4 + 2 * k + e]) * fx_bf16_bits_to_f32(bm[k * 8 + 2 * n + e]);
            ok &= cout[m * 4 + n] == want;
        }
    for (int i = 12; i < 256; i++) ok &= cout[i] == -1.0f;
    CHECK(ok);
    fx_amx_emu_release();
}

/* C (16×16) += A (16 × 32 bf16) · B (16 pair rows × 16), all full tiles. */
static void tdp_full(const uint16_t *a, const uint16_t *b, float *c) {
    fx_amx_tilecfg cfg = cfg_all(16, 64);
    fx_amx_emu_ldtilecfg(&cfg);
    fx_amx_emu_load(0, c, 64);
    fx_amx_emu_load(1, a, 64);
    fx_amx_emu_load(2, b, 64);
    fx_amx_emu_dpbf16ps(0, 1, 2);
    fx_amx_emu_store(0, c, 64);
    fx_amx_emu_release();
}

TEST(kernel_amx_emu_tdpbf16ps_numerics) {
    uint16_t a[16 * 32], b[16 * 32];
    float c[256];
    /* small integers: every sum exact, so the result is the dot product */
    fx_test_rng r;
    fx_test_rng_seed(&r, 5);
    for (int i = 0; i < 512; i++) {
        a[i] = fx_f32_to_bf16_bits((float)((int)(fx_test_rng_u64(&r) % 17) - 8));
        b[i] = fx_f32_to_bf16_bits((float)((int)(fx_test_rng_u64(&r) % 13) - 6));
    }
    for (int i = 0; i < 256; i++) c[i] = (float)(i - 100);
    float c0[256];
    memcpy(c0, c, sizeof c);
    tdp_full(a, b, c);
    int ok = 1;
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            double want = c0[m * 16 + n];
            for (int k = 0; k < 16; k++)
                for (int e = 0; e < 2; e++)
                    want += (double)fx_bf16_bits_to_f32(a[m * 32 + 2 * k + e]) *
                            fx_bf16_bits_to_f32(b[k * 32 + 2 * n + e]);
            ok &= c[m * 16 + n] == (float)want;
        }
    CHECK_MSG(ok, "integer dot products not exact");

    /* Two partial sums: even products 1·1, odd products three times
     * 2^-13·2^-12 = 2^-25. Kept apart, odd = 1.5·2^-24 and 1 + odd rounds up
     * to 1 + 2^-23; one running sum would lose each 2^-25 against 1. */
    memset(a, 0, sizeof a), memset(b, 0, sizeof b), memset(c, 0, sizeof c);
    const uint16_t one = fx_f32_to_bf16_bits(1.0f), s13 = fx_f32_to_bf16_bits(ldexpf(1, -13)),
                   s12 = fx_f32_to_bf16_bits(ldexpf(1, -12));
    a[0] = one, b[0] = one;                         /* k = 0, even: 1 */
    for (int k = 0; k < 3; k++) a[2 * k + 1] = s13, b[k * 32 + 1] = s12; /* odd: 3·2^-25 */
    tdp_full(a, b, c);
    CHECK_MSG(c[0] == 1.0f + ldexpf(1, -23), "two partial sums: got %.9g", c[0]);

    /* DAZ: a denormal bf16 input counts as zero */
    memset(a, 0, sizeof a), memset(b, 0, sizeof b);
    for (int i = 0; i < 256; i++) c[i] = 0.0f;
    a[0] = 0x0001; /* bf16 denormal 2^-133 */
    b[0] = fx_f32_to_bf16_bits(ldexpf(1, 100));
    a[1] = one, b[1] = one;
    tdp_full(a, b, c);
    CHECK_MSG(c[0] == 1.0f, "DAZ: got %.9g (a denormal times 2^100 would add 2^-33)", c[0]);
    /* FTZ: a denormal result becomes zero */
    memset(a, 0, sizeof a), memset(b, 0, sizeof b);
    for (int i = 0; i < 256; i++) c[i] = 0.0f;
    a[0] = fx_f32_to_bf16_bits(ldexpf(1, -70)), b[0] = fx_f32_to_bf16_bits(ldexpf(1, -70));
    tdp_full(a, b, c);
    CHECK_MSG(c[0] == 0.0f, "FTZ: got %g", c[0]);
    /* a denormal C input reads as zero too */
    memset(a, 0, sizeof a), memset(b, 0, sizeof b);
    for (int i = 0; i < 256; i++) c[i] = ldexpf(1, -130);
    tdp_full(a, b, c);
    CHECK(c[5] == 0.0f);
}

TEST(kernel_amx_emu_tdpbf16ps_shape_faults) {
    fx_amx_tilecfg c = cfg_all(16, 64);
    fx_amx_emu_ldtilecfg(&c);
    CHECK_FAULT(fx_amx_emu_dpbf16ps(0, 0, 1), "must differ");
    CHECK_FAULT(fx_amx_emu_dpbf16ps(0, 1, 1), "must differ");
    c.rows[2] = 8; /* B with 8 pair rows against A's 16 pairs per row */
    fx_amx_emu_ldtilecfg(&c);
    CHECK_FAULT(fx_amx_emu_dpbf16ps(0, 1, 2), "K mismatch");
    c = cfg_all(16, 64), c.colsb[0] = 32; /* C 8 columns, B 16 */
    fx_amx_emu_ldtilecfg(&c);
    CHECK_FAULT(fx_amx_emu_dpbf16ps(0, 1, 2), "N mismatch");
    c = cfg_all(16, 64), c.rows[0] = 15; /* C 15 rows, A 16 */
    fx_amx_emu_ldtilecfg(&c);
    CHECK_FAULT(fx_amx_emu_dpbf16ps(0, 1, 2), "M mismatch");
    c = cfg_all(16, 64), c.colsb[1] = 62, c.rows[2] = 15; /* A colsb not a multiple of 4 */
    fx_amx_emu_ldtilecfg(&c);
    CHECK_FAULT(fx_amx_emu_dpbf16ps(0, 1, 2), "multiples of 4");
    fx_amx_emu_release();
}

/* ---- AMX-INT8: TDPBSSD / TDPBSUD / TDPBUSD / TDPBUUD -------------------- */

/* C (16 × 16 int32) += A (16 rows × 64 bytes) · B (16 quad rows × 16
 * columns) with the variant's signedness, through the model. */
static void tdpb_full(const uint8_t *a, const uint8_t *b, int32_t *c, int a_signed, int b_signed) {
    fx_amx_tilecfg cfg = cfg_all(16, 64);
    fx_amx_emu_ldtilecfg(&cfg);
    fx_amx_emu_load(0, c, 64);
    fx_amx_emu_load(1, a, 64);
    fx_amx_emu_load(2, b, 64);
    fx_amx_emu_dpb(0, 1, 2, a_signed, b_signed);
    fx_amx_emu_store(0, c, 64);
    fx_amx_emu_release();
}

static int64_t byte_value(uint8_t v, int is_signed) { return is_signed ? (int64_t)(int8_t)v : (int64_t)v; }

TEST(kernel_amx_emu_tdpb_int8_numerics) {
    uint8_t a[16 * 64], b[16 * 64];
    int32_t c[256], c0[256];
    fx_test_rng r;
    fx_test_rng_seed(&r, 9);
    for (int i = 0; i < 1024; i++) a[i] = (uint8_t)fx_test_rng_u64(&r), b[i] = (uint8_t)fx_test_rng_u64(&r);
    a[0] = 0x80, b[0] = 0x80, a[1] = 0xff, b[1] = 0x7f; /* the extremes of both readings */
    for (int i = 0; i < 256; i++) c0[i] = (int32_t)(fx_test_rng_u64(&r) % 2000001) - 1000000;
    static const char *const names[4] = {"TDPBUUD", "TDPBUSD", "TDPBSUD", "TDPBSSD"};
    for (int v = 0; v < 4; v++) {
        const int as = v >> 1, bs = v & 1;
        memcpy(c, c0, sizeof c);
        tdpb_full(a, b, c, as, bs);
        int ok = 1;
        for (int m = 0; m < 16; m++)
            for (int n = 0; n < 16; n++) {
                int64_t want = c0[m * 16 + n];
                for (int k = 0; k < 16; k++)
                    for (int e = 0; e < 4; e++)
                        want += byte_value(a[m * 64 + 4 * k + e], as) * byte_value(b[k * 64 + 4 * n + e], bs);
                ok &= c[m * 16 + n] == (int32_t)want; /* |want| < 2^31 here */
            }
        CHECK_MSG(ok, "%s: not the exact dot products", names[v]);
    }
    /* 0x80 is -128 signed, 128 unsigned */
    memset(a, 0x80, sizeof a), memset(b, 0x01, sizeof b), memset(c, 0, sizeof c);
    tdpb_full(a, b, c, 1, 1);
    CHECK_MSG(c[0] == -128 * 64 && c[255] == -128 * 64, "TDPBSSD 0x80·1: %d", c[0]);
    memset(c, 0, sizeof c);
    tdpb_full(a, b, c, 0, 1);
    CHECK_MSG(c[0] == 128 * 64, "TDPBUSD 0x80·1: %d", c[0]);
    /* no saturation: the int32 wraps (TDPBUUD 255·255·64 onto INT32_MAX) */
    memset(a, 0xff, sizeof a), memset(b, 0xff, sizeof b);
    for (int i = 0; i < 256; i++) c[i] = INT32_MAX;
    tdpb_full(a, b, c, 0, 0);
    CHECK_MSG(c[7] == (int32_t)((uint32_t)INT32_MAX + 255u * 255u * 64u), "TDPBUUD wraps: %d", c[7]);
}

/* The int8 GEMM's shapes: C 16×16, A 16 rows × 32 bytes, B 8 quad rows ×
 * 16 (K = 32); and the shape faults. */
TEST(kernel_amx_emu_tdpb_int8_shapes) {
    fx_amx_tilecfg cfg = cfg_all(16, 64);
    cfg.colsb[1] = 32, cfg.rows[2] = 8;
    int8_t a[16 * 32], b[8 * 64];
    int32_t c[256];
    for (int i = 0; i < 512; i++) a[i] = (int8_t)(i % 7 - 3), b[i] = (int8_t)(i % 5 - 2);
    fx_amx_emu_ldtilecfg(&cfg);
    fx_amx_emu_zero(0);
    fx_amx_emu_load(1, a, 32);
    fx_amx_emu_load(2, b, 64);
    fx_amx_emu_dpb(0, 1, 2, 1, 1);
    fx_amx_emu_store(0, c, 64);
    int ok = 1;
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            int32_t want = 0;
            for (int q = 0; q < 32; q++) want += a[m * 32 + q] * b[(q / 4) * 64 + 4 * n + q % 4];
            ok &= c[m * 16 + n] == want;
        }
    CHECK_MSG(ok, "K = 32 tiles: not the exact dot products");
    fx_amx_emu_release();
    /* shape faults, as TDPBF16PS */
    cfg = cfg_all(16, 64);
    fx_amx_emu_ldtilecfg(&cfg);
    CHECK_FAULT(fx_amx_emu_dpb(0, 0, 1, 1, 1), "TDPBSSD tmm0, tmm0, tmm1: tiles must differ");
    cfg.rows[2] = 8; /* B 8 rows against A's 16 dwords per row */
    fx_amx_emu_ldtilecfg(&cfg);
    CHECK_FAULT(fx_amx_emu_dpb(0, 1, 2, 0, 1), "TDPBUSD K mismatch");
    cfg = cfg_all(16, 64), cfg.colsb[0] = 32;
    fx_amx_emu_ldtilecfg(&cfg);
    CHECK_FAULT(fx_amx_emu_dpb(0, 1, 2, 1, 0), "TDPBSUD N mismatch");
    cfg = cfg_all(16, 64), cfg.rows[0] = 15;
    fx_amx_emu_ldtilecfg(&cfg);
    CHECK_FAULT(fx_amx_emu_dpb(0, 1, 2, 0, 0), "TDPBUUD M mismatch");
    fx_amx_emu_release();
    CHECK_FAULT(fx_amx_emu_dpb(0, 1, 2, 1, 1), "palette 0");
}

static _Thread_local jmp_buf thread_jmp;
static void thread_fault(const char *msg) {
    (void)msg;
    longjmp(thread_jmp, 1);
}
static void *other_thread(void *arg) {
    volatile int *faulted = arg;
    fx_amx_emu_on_fault(thread_fault);
    if (setjmp(thread_jmp) == 0) fx_amx_emu_zero(0); /* this thread never configured */
    else *faulted = 1;
    return NULL;
}

TEST(kernel_amx_emu_state_is_per_thread) {
    fx_amx_tilecfg c = cfg_all(16, 64);
    fx_amx_emu_ldtilecfg(&c);
    pthread_t th;
    volatile int faulted = 0;
    REQUIRE(pthread_create(&th, NULL, other_thread, (void *)&faulted) == 0);
    pthread_join(th, NULL);
    CHECK_MSG(faulted, "a configuration loaded by one thread was visible to another");
    fx_amx_emu_zero(0); /* still configured here */
    fx_amx_emu_release();
}
