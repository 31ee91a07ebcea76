/*
 * test_kernel_amx_tiles.c — the plain-C tile unit (simd/common/amx_emu.c,
 * what the AMX kernels run on in the emulation build) against the real
 * instructions, on a CPU whose AMX the library would use: random tiles
 * through TDPBSSD / TDPBSUD / TDPBUSD / TDPBUUD must give the same int32
 * bits (integer sums, modulo 2^32: no room for an implementation choice),
 * and through TDPBF16PS the same f32 within a few ULP of the sum of the
 * products' magnitudes (the order of the f32 additions inside one
 * instruction is the implementation's; GCC's own AMX tests allow 1 ULP
 * against a plain loop) — a wrong pair layout, row or column would be off
 * by whole products. On a CPU without usable AMX (or a build without x86
 * tiles) it checks only that the dispatcher would not choose the amx
 * level there, and says the comparison needs the AMX machine.
 */
#include "tests/test.h"

#include <math.h>
#include <string.h>

#include "simd/common/amx_emu.h"
#include "simd/common/cpu.h"
#include "simd/dispatch.h"
#include "src/base/float16.h"

enum { OP_BF16, OP_SS, OP_SU, OP_US, OP_UU };

typedef struct tile_job {
    fx_amx_tilecfg cfg;
    int op;
    _Alignas(64) unsigned char a[16 * 64], b[16 * 64], c[16 * 64];
} tile_job;

/* C (tile 0) += A (tile 1) · B (tile 2), 16 × 64-byte rows each. */
static void emu_run(tile_job *j) {
    fx_amx_emu_ldtilecfg(&j->cfg);
    fx_amx_emu_load(0, j->c, 64), fx_amx_emu_load(1, j->a, 64), fx_amx_emu_load(2, j->b, 64);
    if (j->op == OP_BF16) fx_amx_emu_dpbf16ps(0, 1, 2);
    else fx_amx_emu_dpb(0, 1, 2, j->op == OP_SS || j->op == OP_SU, j->op == OP_SS || j->op == OP_US);
    fx_amx_emu_store(0, j->c, 64);
    fx_amx_emu_release();
}

#if defined(__x86_64__) && !defined(FX_X86_EMULATED)
#include <immintrin.h>
#define HAVE_TILES 1

__attribute__((target("amx-tile,amx-bf16,amx-int8"))) static int hw_run(void *arg) {
    tile_job *j = arg;
    _tile_loadconfig(&j->cfg);
    _tile_loadd(0, j->c, 64);
    _tile_loadd(1, j->a, 64);
    _tile_loadd(2, j->b, 64);
    switch (j->op) {
    case OP_BF16: _tile_dpbf16ps(0, 1, 2); break;
    case OP_SS: _tile_dpbssd(0, 1, 2); break;
    case OP_SU: _tile_dpbsud(0, 1, 2); break;
    case OP_US: _tile_dpbusd(0, 1, 2); break;
    default: _tile_dpbuud(0, 1, 2); break;
    }
    _tile_stored(0, j->c, 64);
    _tile_release();
    return 0;
}
#else
#define HAVE_TILES 0
static int hw_run(void *arg) {
    (void)arg;
    return -1;
}
#endif

static void full_config(fx_amx_tilecfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->palette = 1;
    for (int t = 0; t < 3; t++) cfg->rows[t] = 16, cfg->colsb[t] = 64;
}

/* Runs j on the real unit (guarded: a fault fails the test); 0 when done. */
static int on_tiles(tile_job *j) {
    int signo = 0;
    int rc = fx_amx_os_guarded(hw_run, j, &signo);
    CHECK_MSG(rc == 0 && !signo, "the tile instructions faulted (signal %d)", signo);
    return rc == 0 && !signo ? 0 : -1;
}

TEST(kernel_amx_tiles_match_the_emulator) {
    const fx_cpu_facts *f = fx_cpu_facts_get();
    char why[256] = "";
    if (!HAVE_TILES || !f->amx_tile || !f->amx_bf16 || !f->amx_int8 || !fx_cpu_amx_ready(f, why, sizeof why)) {
        CHECK_MSG(!HAVE_TILES || !fx_dispatch_level_ok(f, FX_ISA_AMX) || !f->amx_int8,
                  "the amx level is chosen on a CPU whose tiles this test cannot run");
        printf("  no usable AMX-BF16/INT8 here (%s): the emulator is compared with the real tiles on an AMX "
               "machine\n", HAVE_TILES ? (why[0] ? why : "CPUID reports no AMX-BF16/INT8") : "not an x86-64 build");
        return;
    }
    fx_test_rng r;
    fx_test_rng_seed(&r, 2026);
    static tile_job hw, emu;

    /* int8: random bytes, C near the int32 limits so sums wrap */
    for (int op = OP_SS; op <= OP_UU; op++)
        for (int round = 0; round < 8; round++) {
            full_config(&hw.cfg), hw.op = op;
            for (int i = 0; i < 16 * 64; i++)
                hw.a[i] = (unsigned char)fx_test_rng_u64(&r), hw.b[i] = (unsigned char)fx_test_rng_u64(&r);
            for (int i = 0; i < 256; i++) {
                int32_t v = round & 1 ? INT32_MAX - (int32_t)(fx_test_rng_u64(&r) % 100000)
                                      : (int32_t)(fx_test_rng_u64(&r) % 2000001) - 1000000;
                memcpy(hw.c + 4 * i, &v, 4);
            }
            emu = hw;
            emu_run(&emu);
            if (on_tiles(&hw)) return;
            CHECK_MSG(!memcmp(hw.c, emu.c, sizeof hw.c), "int8 variant %d round %d: emulator differs from TDPB*D",
                      op, round);
        }

    /* bf16: random signs and exponents 2^-20..2^20 (normal products) */
    int exact = 0, total = 0;
    for (int round = 0; round < 16; round++) {
        full_config(&hw.cfg), hw.op = OP_BF16;
        uint16_t *a = (uint16_t *)hw.a, *b = (uint16_t *)hw.b;
        for (int i = 0; i < 16 * 32; i++) {
            a[i] = fx_f32_to_bf16_bits(ldexpf(fx_test_rng_uniform(&r), (int)(fx_test_rng_u64(&r) % 41) - 20));
            b[i] = fx_f32_to_bf16_bits(ldexpf(fx_test_rng_uniform(&r), (int)(fx_test_rng_u64(&r) % 41) - 20));
        }
        float *c = (float *)hw.c;
        for (int i = 0; i < 256; i++) c[i] = ldexpf(fx_test_rng_uniform(&r), (int)(fx_test_rng_u64(&r) % 21) - 10);
        emu = hw;
        emu_run(&emu);
        float c0[256];
        memcpy(c0, c, sizeof c0);
        if (on_tiles(&hw)) return;
        const float *ch = (const float *)hw.c, *ce = (const float *)emu.c;
        for (int m = 0; m < 16; m++)
            for (int n = 0; n < 16; n++) {
                double mag = fabs(c0[m * 16 + n]);
                for (int k = 0; k < 32; k++)
                    mag += fabs((double)fx_bf16_bits_to_f32(a[m * 32 + k]) *
                                fx_bf16_bits_to_f32(b[(k / 2) * 32 + 2 * n + (k & 1)]));
                const double d = fabs((double)ch[m * 16 + n] - ce[m * 16 + n]);
                CHECK_MSG(d <= 4 * ldexp(mag, -24), "TDPBF16PS round %d C[%d][%d]: tiles %.9g, emulator %.9g", round,
                          m, n, ch[m * 16 + n], ce[m * 16 + n]);
                exact += !memcmp(&ch[m * 16 + n], &ce[m * 16 + n], 4), total++;
            }
    }
    printf("  TDPBF16PS: %d of %d results bit-identical to the emulator\n", exact, total);
}
