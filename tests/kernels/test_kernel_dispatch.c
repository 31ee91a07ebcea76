/*
 * test_kernel_dispatch.c — ISA detection, the table lookup rules, the
 * microarchitecture policy (which table each kind of CPU gets, from its
 * facts alone) and the --cpu-info description (fx_kernels_describe).
 */
#include "kernel_isas.h"

#include "simd/common/arch.h"
#include "simd/common/table.h"
#include "simd/amx_selftest.h"
#include "simd/dispatch.h"
#include "simd/attention/attention.h"
#include "simd/gemm/gemm_int8.h"

TEST(kernel_dispatch_tables) {
    fx_isa best = fx_isa_detect();
    CHECK(fx_kernels_get(FX_ISA_SCALAR, 0) != NULL);
    CHECK(fx_kernels_get(best, 0) != NULL);
    CHECK(fx_kernels_get(FX_ISA_COUNT, 0) == NULL);
    for (int i = 0; i < FX_ISA_COUNT; i++) {
        const fx_kernels *k = fx_kernels_get((fx_isa)i, 0);
        char msg[512];
        CHECK(fx_isa_check((fx_isa)i, msg, sizeof msg) == (k != NULL));
        if (!k) {
            CHECK_MSG(strstr(msg, "this CPU runs scalar") && strstr(msg, fx_isa_name((fx_isa)i)), "%s", msg);
            printf("    %s not here: %s\n", fx_isa_name((fx_isa)i), msg);
            continue;
        }
        CHECK_EQ_INT(fx_kernels_isa(k), i);
        CHECK(fx_isa_parse(fx_isa_name((fx_isa)i)) == i);
        /* f32-forced tables never use bf16 dot products */
        CHECK(!fx_kernels_uses_bf16_dot(fx_kernels_get((fx_isa)i, 1)));
        CHECK(i <= (int)best || best == FX_ISA_NEON);
    }
    /* the automatic choice runs on this CPU, at the best level */
    CHECK(fx_kernels_isa(fx_kernels_best(0)) == best);
    CHECK(!fx_kernels_uses_bf16_dot(fx_kernels_best(1)));
#if FX_ARM
    CHECK(best == FX_ISA_NEON);
    CHECK(fx_kernels_get(FX_ISA_AVX2, 0) == NULL);
#elif FX_X86
    CHECK(fx_kernels_get(FX_ISA_NEON, 0) == NULL);
    if (best >= FX_ISA_AVX2) CHECK(fx_kernels_get(FX_ISA_AVX2, 0) != NULL);
#endif
#if defined(FX_X86_EMULATED)
    CHECK_MSG(best == FX_ISA_AMX, "the emulated CPU runs every x86 level, best %s", fx_isa_name(best));
#endif
    CHECK(fx_isa_parse("sse9") == -1);
    CHECK(fx_isa_parse("amx") == FX_ISA_AMX);
}

/* ---- the policy, on the facts of known CPUs -------------------------------- */

static fx_cpu_facts zen3(void) {
    fx_cpu_facts f;
    memset(&f, 0, sizeof f);
    f.arch = FX_CPU_X86, f.vendor = FX_VENDOR_AMD, f.family = 0x19, f.model = 0x01;
    f.avx2 = f.fma = f.f16c = 1;
    f.xcr0 = 0x7, f.os_avx = 1;
    return f;
}
static fx_cpu_facts zen4(void) {
    fx_cpu_facts f = zen3();
    f.model = 0x11;
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512vnni = f.avx512bf16 = 1;
    f.xcr0 = 0xe7, f.os_avx512 = 1;
    return f;
}
static fx_cpu_facts spr(void) {
    fx_cpu_facts f = zen4();
    f.vendor = FX_VENDOR_INTEL, f.family = 6, f.model = 0x8f;
    f.avx512fp16 = f.avxvnni = f.amx_tile = f.amx_bf16 = f.amx_int8 = 1;
    f.xcr0 = 0x600e7, f.os_amx = 1;
    f.amx_palettes = 1, f.amx_tiles = 8, f.amx_rows = 16, f.amx_row_bytes = 64, f.amx_tile_bytes = 1024;
    f.amx_permitted = 1;
    return f;
}
static fx_cpu_facts icelake(void) {
    fx_cpu_facts f = zen4();
    f.vendor = FX_VENDOR_INTEL, f.family = 6, f.model = 0x6a;
    f.avx512bf16 = 0;
    return f;
}

static void expect(const char *cpu, fx_cpu_facts f, fx_table_id want, fx_table_id want_f32) {
    const char *why = NULL;
    fx_table_id got = fx_dispatch_choose(&f, 0, &why);
    CHECK_MSG(got == want, "%s: %s, expected %s", cpu, fx_table_name(got), fx_table_name(want));
    CHECK_MSG(why && *why, "%s: no reason", cpu);
    fx_table_id got32 = fx_dispatch_choose(&f, 1, NULL);
    CHECK_MSG(got32 == want_f32, "%s f32: %s, expected %s", cpu, fx_table_name(got32), fx_table_name(want_f32));
    printf("    %-28s → %-30s (%s)\n", cpu, fx_table_name(got), why ? why : "");
}

TEST(kernel_dispatch_policy_by_cpu) {
    expect("Zen 3 (AVX2 only)", zen3(), FX_TABLE_AVX2, FX_TABLE_AVX2);
    expect("Zen 4", zen4(), FX_TABLE_AVX512BF16, FX_TABLE_AVX512BF16_F32);
    fx_cpu_facts zen5 = zen4();
    zen5.family = 0x1a, zen5.model = 0x02;
    expect("Zen 5", zen5, FX_TABLE_AVX512BF16, FX_TABLE_AVX512BF16_F32);
    expect("Sapphire Rapids", spr(), FX_TABLE_AMX, FX_TABLE_AMX_F32);
    fx_cpu_facts f = spr();
    f.amx_permitted = 0;
    expect("SPR, Linux refused tiles", f, FX_TABLE_AVX512BF16_FMA, FX_TABLE_AVX512BF16_F32);
    f = spr(), f.amx_palettes = 0;
    expect("SPR guest, zero palettes", f, FX_TABLE_AVX512BF16_FMA, FX_TABLE_AVX512BF16_F32);
    f = spr(), f.xcr0 = 0xe7, f.os_amx = 0;
    expect("SPR, XCR0 without tiles", f, FX_TABLE_AVX512BF16_FMA, FX_TABLE_AVX512BF16_F32);
    f = spr(), f.amx_selftest_failed = 1;
    expect("SPR, tile self-test failed", f, FX_TABLE_AVX512BF16_FMA, FX_TABLE_AVX512BF16_F32);
    f = spr(), f.amx_rows = 8;
    expect("SPR, smaller palette", f, FX_TABLE_AVX512BF16_FMA, FX_TABLE_AVX512BF16_F32);
    f = spr(), f.avx512bf16 = 0;
    expect("AMX without AVX512_BF16", f, FX_TABLE_AVX512, FX_TABLE_AVX512);
    f = icelake(), f.model = 0x55, f.avx512bf16 = 1;
    expect("Cooper Lake", f, FX_TABLE_AVX512BF16_FMA, FX_TABLE_AVX512BF16_F32);
    expect("Ice Lake", icelake(), FX_TABLE_AVX512, FX_TABLE_AVX512);
    f = icelake(), f.xcr0 = 0x7, f.os_avx512 = 0;
    expect("AVX-512, OS without zmm", f, FX_TABLE_AVX2, FX_TABLE_AVX2);
    f = zen3(), f.vendor = FX_VENDOR_INTEL, f.family = 6, f.model = 0x97;
    expect("Alder Lake (no AVX-512)", f, FX_TABLE_AVX2, FX_TABLE_AVX2);
    f = zen4(), f.vendor = FX_VENDOR_OTHER;
    expect("other vendor, AVX512_BF16", f, FX_TABLE_AVX512BF16_FMA, FX_TABLE_AVX512BF16_F32);
    f = zen3(), f.fma = 0;
    expect("x86 without FMA", f, FX_TABLE_SCALAR, FX_TABLE_SCALAR);
    memset(&f, 0, sizeof f);
    f.arch = FX_CPU_ARM, f.neon = 1;
    expect("aarch64", f, FX_TABLE_NEON, FX_TABLE_NEON);
    memset(&f, 0, sizeof f);
    expect("unknown architecture", f, FX_TABLE_SCALAR, FX_TABLE_SCALAR);
    /* a forced level maps to its own table */
    CHECK(fx_dispatch_forced(FX_ISA_AVX512BF16, 0) == FX_TABLE_AVX512BF16);
    CHECK(fx_dispatch_forced(FX_ISA_AVX512BF16, 1) == FX_TABLE_AVX512BF16_F32);
    CHECK(fx_dispatch_forced(FX_ISA_AMX, 0) == FX_TABLE_AMX);
    CHECK(fx_dispatch_forced(FX_ISA_AMX, 1) == FX_TABLE_AMX_F32);
}

#if FX_X86
/* The int8 kernel (--precision int8) of the table each CPU gets, for few
 * and many rows: AVX2 (vpmaddubsw) without any VNNI, ymm vpdpbusd with
 * AVX-VNNI alone, zmm vpdpbusd with AVX512-VNNI, AMX-INT8 tiles from
 * FX_INT8_AMX_MIN_M rows where AMX is usable. */
static void expect_int8(const char *cpu, fx_cpu_facts f, const fx_gemm_int8 *few, const fx_gemm_int8 *many) {
    const fx_kernels *k = fx_kernels_table(fx_dispatch_choose(&f, 0, NULL));
    REQUIRE(k && k->gemm && k->gemm->int8);
    const fx_gemm_int8 *a = k->gemm->int8(&f, FX_INT8_AMX_MIN_M - 1), *b = k->gemm->int8(&f, FX_INT8_AMX_MIN_M);
    CHECK_MSG(a == few && b == many, "%s: int8 %s / %s, expected %s / %s", cpu, a->name, b->name, few->name,
              many->name);
    printf("    %-28s → int8 %s / %s\n", cpu, a->name, b->name);
}

TEST(kernel_dispatch_int8_by_cpu) {
    const fx_gemm_int8 *avx2 = &fx_gemm_int8_avx2_kernel, *vnni = &fx_gemm_int8_avx512vnni, *amx = &fx_gemm_int8_amx;
    const fx_gemm_int8 *avxvnni = &fx_gemm_int8_avxvnni;
    expect_int8("Zen 3 (AVX2 only)", zen3(), avx2, avx2);
    fx_cpu_facts adl = zen3();
    adl.vendor = FX_VENDOR_INTEL, adl.family = 6, adl.model = 0x97, adl.avxvnni = 1;
    expect_int8("Alder Lake (AVX-VNNI)", adl, avxvnni, avxvnni);
    expect_int8("Zen 4", zen4(), vnni, vnni);
    fx_cpu_facts f = zen4();
    f.family = 0x1a, f.model = 0x02;
    expect_int8("Zen 5", f, vnni, vnni);
    expect_int8("Sapphire Rapids", spr(), vnni, amx);
    f = spr(), f.amx_int8 = 0;
    expect_int8("AMX without AMX-INT8", f, vnni, vnni);
    f = spr(), f.amx_permitted = 0;
    expect_int8("SPR, Linux refused tiles", f, vnni, vnni);
    expect_int8("Ice Lake", icelake(), vnni, vnni);
    f = icelake(), f.model = 0x55, f.avx512vnni = 0;
    expect_int8("Skylake-SP (no VNNI)", f, avx2, avx2);
    f = zen4(), f.xcr0 = 0x7, f.os_avx512 = 0;
    expect_int8("AVX-512, OS without zmm", f, avx2, avx2);
    f.family = 0x1a, f.model = 0x02, f.avxvnni = 1;
    expect_int8("Zen 5, OS without zmm", f, avxvnni, avxvnni);
}
#endif

/* Quantized weights run int8 in the default mode exactly on the bf16
 * dot-product tables (simd/dispatch.c fx_kernels_int8_by_default). */
TEST(kernel_dispatch_int8_by_default) {
    for (int isa = 0; isa < FX_ISA_COUNT; isa++)
        for (int f32 = 0; f32 < 2; f32++) {
            const fx_kernels *k = fx_kernels_get((fx_isa)isa, f32);
            if (!k) continue;
            CHECK_MSG(fx_kernels_int8_by_default(k) == fx_kernels_uses_bf16_dot(k), "%s%s: int8 by default %d",
                      fx_kernels_name(k), f32 ? " (f32)" : "", fx_kernels_int8_by_default(k));
        }
}

/* The tables the policy names hold the kernels its comment promises (for
 * the tables this build compiles). */
TEST(kernel_dispatch_table_contents) {
    for (int id = 0; id < FX_TABLE_COUNT; id++) {
        const fx_kernels *k = fx_kernels_table((fx_table_id)id);
        if (!k) continue;
        CHECK(fx_kernels_id(k) == (fx_table_id)id);
        const fx_gemm_kernels *g = k->gemm;
        const fx_gemm_path *bf16 = g->path[FX_DTYPE_BF16], *f32 = g->path[FX_DTYPE_F32];
        printf("    %-30s bf16 %s | gemv bf16 dot %d | f32 %s | attention %s\n", k->name, bf16->name,
               g->gemv_bf16_dot, f32->name, k->attn->name);
        CHECK_MSG((bf16->kpair > 1) == k->bf16_dot, "%s: bf16 path %s vs bf16_dot %d", k->name, bf16->name,
                  k->bf16_dot);
        CHECK(f32->kpair == 1); /* f32 weights always on f32 FMA */
        switch (id) {
        case FX_TABLE_AVX512BF16_F32:
        case FX_TABLE_AVX512BF16_FMA:
        case FX_TABLE_AMX_F32:
            CHECK(k->gemm == fx_kernels_table(FX_TABLE_AVX512)->gemm);
            CHECK(k->attn == fx_kernels_table(FX_TABLE_AVX512)->attn);
            break;
        case FX_TABLE_AMX:
            CHECK_MSG(strstr(bf16->name, "amx") != NULL, "amx table bf16 path %s", bf16->name);
            CHECK_MSG(strstr(k->attn->name, "amx") != NULL, "amx attention %s", k->attn->name);
            /* the GEMV (m <= 4) and f32/f16 weights stay on AVX-512 f32 FMA */
            CHECK(!g->gemv_bf16_dot && g->gemv[FX_DTYPE_BF16] == fx_kernels_table(FX_TABLE_AVX512)->gemm->gemv[FX_DTYPE_BF16]);
            CHECK(f32 == fx_kernels_table(FX_TABLE_AVX512)->gemm->path[FX_DTYPE_F32]);
            CHECK(bf16->thread_begin && bf16->thread_end); /* conv2d's tiles */
            /* linear layers: the in-place tile driver (bf16 and block types) */
            CHECK(g->tiles && g->tiles->linear && strstr(g->tiles->name, "amx") != NULL);
            break;
        default: break;
        }
        if (id != FX_TABLE_AMX) CHECK_MSG(!g->tiles, "%s: a tile driver outside the amx table", k->name);
    }
#if FX_X86
    CHECK(fx_kernels_table(FX_TABLE_AMX) != NULL);
    CHECK(fx_kernels_table(FX_TABLE_NEON) == NULL);
#endif
}

TEST(kernel_dispatch_describe) {
    fx_isa best = fx_isa_detect();
    char buf[8192];
    const fx_kernels *k = fx_kernels_best(0);
    size_t n = fx_kernels_describe(k, buf, sizeof buf);
    CHECK(n == strlen(buf) && n > 0);
    char want[64];
    snprintf(want, sizeof want, "best ISA: %s\n", fx_isa_name(best));
    CHECK_MSG(strstr(buf, want) != NULL, "no '%s' in:\n%s", want, buf);
    CHECK(strstr(buf, "chosen for this CPU: ") != NULL);
    CHECK(strstr(buf, "linear:") && strstr(buf, "bf16 weights") && strstr(buf, "attention:") &&
          strstr(buf, "conv:") && strstr(buf, "row ops:") && strstr(buf, "int8:"));
    CHECK(strstr(buf, "lowered from") == NULL);
#if FX_X86
    CHECK(strstr(buf, "x86-64 with") != NULL && strstr(buf, "XCR0") != NULL);
    if (best >= FX_ISA_AVX2) CHECK(strstr(buf, " avx2") && strstr(buf, " fma") && strstr(buf, " f16c"));
#elif FX_ARM
    CHECK(strstr(buf, "neon") != NULL);
#endif
#if defined(FX_X86_EMULATED)
    CHECK(strstr(buf, "emulated") && strstr(buf, "AMX usable") && strstr(buf, "amx bf16"));
    CHECK_MSG(strstr(buf, "int8:     amx int8") && strstr(buf, "avx512vnni int8"), "%s", buf);
#endif
    if (best != FX_ISA_SCALAR) { /* a lower level says so */
        fx_kernels_describe(fx_kernels_get(FX_ISA_SCALAR, 0), buf, sizeof buf);
        snprintf(want, sizeof want, "lowered from %s", fx_isa_name(best));
        CHECK_MSG(strstr(buf, want) != NULL, "no '%s' in:\n%s", want, buf);
    }
    if (best == FX_ISA_AVX512BF16 || best == FX_ISA_AMX) {
        fx_kernels_describe(fx_kernels_best(1), buf, sizeof buf);
        CHECK(strstr(buf, "bf16 dot products off") != NULL);
    }
    /* truncation: returns the full length, writes a terminated prefix */
    char small[16];
    size_t m = fx_kernels_describe(k, small, sizeof small);
    CHECK(m == n && strlen(small) == sizeof small - 1);
    CHECK(fx_kernels_describe(k, NULL, 0) == n);
}

/* The start-up self-test passes on the AMX table wherever the tiles run:
 * the emulation build always, a real AMX machine natively. */
TEST(kernel_dispatch_amx_selftest) {
    const fx_kernels *amx = fx_kernels_table(FX_TABLE_AMX);
    char why[512];
    if (!amx || !fx_isa_check(FX_ISA_AMX, why, sizeof why)) {
        if (!amx) snprintf(why, sizeof why, "not built for this architecture");
        printf("    tiles not run natively (%s); the x86 emulation suite runs them\n", why);
        return;
    }
    char msg[160] = "";
    CHECK_MSG(fx_amx_selftest(amx, msg, sizeof msg) == 1, "self-test: %s", msg);
    CHECK(!fx_dispatch_facts()->amx_selftest_failed);
}

#if defined(FX_X86_EMULATED)
#include "simd/common/amx_emu.h"

/* Every AMX kernel call releases the tiles it configured (a thread's live
 * tile state would otherwise stay between calls): seen on the calling
 * thread of 1-thread calls. */
TEST(kernel_dispatch_amx_releases_tiles) {
    const fx_kernels *amx = fx_kernels_get(FX_ISA_AMX, 0);
    REQUIRE(amx != NULL);
    fx_kctx kc = kt_ctx(amx, 1);
    float x[64 * 64], y[64 * 64], q[32 * 64];
    uint16_t w[64 * 64];
    for (int i = 0; i < 64 * 64; i++) x[i] = (float)(i % 7) - 3, w[i] = fx_f32_to_bf16_bits((float)(i % 5) - 2);
    for (int i = 0; i < 32 * 64; i++) q[i] = (float)(i % 3) - 1;
    fx_amx_tilecfg cfg;
    const fx_weight wt = {.data = w, .dtype = FX_DTYPE_BF16, .n = 64, .k = 64, .ld = 64};
    fx_linear(&kc, 64, x, 64, &wt, y, 64, NULL);
    fx_amx_emu_sttilecfg(&cfg);
    CHECK_MSG(cfg.palette == 0, "fx_linear left the tiles configured");
    const fx_conv2d_geom g = {8, 8, 32, 8, 3, 3, 1, 1, 1, 1, 1, 0};
    const fx_weight cw = {.data = w, .dtype = FX_DTYPE_BF16, .n = 8, .k = 32 * 9, .ld = 32 * 9}; /* 8 x 288 of w's 64 x 64 */
    fx_conv2d(&kc, &g, x, &cw, NULL, y, 0, 0);
    fx_amx_emu_sttilecfg(&cfg);
    CHECK_MSG(cfg.palette == 0, "fx_conv2d left the tiles configured");
    fx_attn_args a = {0};
    a.sq = a.sk = 32, a.hq = a.hkv = 1, a.d = 64;
    a.q = q, a.k = q, a.v = q, a.o = y, a.ldq = a.ldk = a.ldv = a.ldo = 64, a.scale = 0.125f;
    fx_err err;
    fx_err_clear(&err);
    CHECK(fx_attention(&kc, &a, &err) == FLUX_OK);
    fx_amx_emu_sttilecfg(&cfg);
    CHECK_MSG(cfg.palette == 0, "fx_attention left the tiles configured");
    kt_ctx_free(&kc);
}
#endif
