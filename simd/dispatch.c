/*
 * dispatch.c — the kernel tables, which ISA levels this machine runs, and
 * which table wins on its microarchitecture.
 *
 * Levels: scalar → avx2 (AVX2+FMA+F16C) → avx512 (F/BW/VL/DQ) → avx512bf16
 * (+AVX512_BF16) → amx (+AMX-TILE/BF16, the OS's tile state, self-test) on
 * x86-64; scalar → neon on aarch64. A level says which instructions may
 * run; the table chosen for it (fx_dispatch_choose) says which kernels are
 * fastest there. Tables are const data; a context keeps a pointer to one.
 */
#include "simd/dispatch.h"

#include "simd/amx_selftest.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simd/common/append.h"
#include "simd/common/arch.h"
#include "simd/common/table.h"

static const char *const isa_names[FX_ISA_COUNT] = {"scalar", "avx2", "avx512", "avx512bf16", "amx", "neon"};

const char *fx_isa_name(fx_isa isa) {
    return (unsigned)isa < FX_ISA_COUNT ? isa_names[isa] : "unknown";
}

int fx_isa_parse(const char *name) {
    for (int i = 0; i < FX_ISA_COUNT; i++)
        if (!strcmp(name, isa_names[i])) return i;
    return -1;
}

/* ------------------------------------------------------------------------ */
/* The tables                                                               */
/* ------------------------------------------------------------------------ */

/* Each kernel family declares its per-ISA tables in its header; a family
 * not compiled for this architecture is NULL here (FX_IF_X86 / FX_IF_ARM). */
#include "simd/attention/attention.h"
#include "simd/gemm/gemm_int8.h"
#include "simd/quant/quant.h"
#include "simd/rowops/rowops.h"

#define X86(table) FX_IF_X86(&(table))
#define ARM(table) FX_IF_ARM(&(table))

/* The f32-math tables of the avx512bf16 and amx levels are the avx512
 * kernels (bf16 weights widened to f32, FMA only); rows and quantizers
 * have no bf16-specific kernels above avx512. */
static const fx_kernels tables[FX_TABLE_COUNT] = {
    [FX_TABLE_SCALAR] = {.id = FX_TABLE_SCALAR, .isa = FX_ISA_SCALAR, .name = "scalar", .gemm = &fx_gemm_scalar,
                         .attn = &fx_attn_scalar, .row = &fx_row_scalar, .quant = &fx_quant_scalar},
    [FX_TABLE_AVX2] = {.id = FX_TABLE_AVX2, .isa = FX_ISA_AVX2, .name = "avx2", .gemm = X86(fx_gemm_avx2),
                       .attn = X86(fx_attn_avx2), .row = X86(fx_row_avx2), .quant = X86(fx_quant_avx2)},
    [FX_TABLE_AVX512] = {.id = FX_TABLE_AVX512, .isa = FX_ISA_AVX512, .name = "avx512", .gemm = X86(fx_gemm_avx512),
                         .attn = X86(fx_attn_avx512), .row = X86(fx_row_avx512), .quant = X86(fx_quant_avx512)},
    [FX_TABLE_AVX512BF16] = {.id = FX_TABLE_AVX512BF16, .isa = FX_ISA_AVX512BF16, .bf16_dot = 1,
                             .name = "avx512bf16", .gemm = X86(fx_gemm_avx512bf16),
                             .attn = X86(fx_attn_avx512bf16), .row = X86(fx_row_avx512),
                             .quant = X86(fx_quant_avx512)},
    [FX_TABLE_AVX512BF16_F32] = {.id = FX_TABLE_AVX512BF16_F32, .isa = FX_ISA_AVX512BF16,
                                 .name = "avx512bf16 (f32 math)", .gemm = X86(fx_gemm_avx512),
                                 .attn = X86(fx_attn_avx512), .row = X86(fx_row_avx512),
                                 .quant = X86(fx_quant_avx512)},
    [FX_TABLE_AVX512BF16_FMA] = {.id = FX_TABLE_AVX512BF16_FMA, .isa = FX_ISA_AVX512BF16,
                                 .name = "avx512bf16 (f32 FMA kernels)", .gemm = X86(fx_gemm_avx512),
                                 .attn = X86(fx_attn_avx512), .row = X86(fx_row_avx512),
                                 .quant = X86(fx_quant_avx512)},
    [FX_TABLE_AMX] = {.id = FX_TABLE_AMX, .isa = FX_ISA_AMX, .bf16_dot = 1, .name = "amx", .gemm = X86(fx_gemm_amx),
                      .attn = X86(fx_attn_amx), .row = X86(fx_row_avx512), .quant = X86(fx_quant_avx512)},
    [FX_TABLE_AMX_F32] = {.id = FX_TABLE_AMX_F32, .isa = FX_ISA_AMX, .name = "amx (f32 math)",
                          .gemm = X86(fx_gemm_avx512), .attn = X86(fx_attn_avx512), .row = X86(fx_row_avx512),
                          .quant = X86(fx_quant_avx512)},
    [FX_TABLE_NEON] = {.id = FX_TABLE_NEON, .isa = FX_ISA_NEON, .name = "neon", .gemm = ARM(fx_gemm_neon),
                       .attn = ARM(fx_attn_neon), .row = ARM(fx_row_neon), .quant = ARM(fx_quant_neon)},
};

const fx_kernels *fx_kernels_table(fx_table_id id) {
    if ((unsigned)id >= FX_TABLE_COUNT) return NULL;
    const fx_kernels *k = &tables[id];
    /* every level but scalar needs its own gemm and attention compiled */
    return id == FX_TABLE_SCALAR || (k->gemm && k->attn && k->row) ? k : NULL;
}

fx_table_id fx_kernels_id(const fx_kernels *k) { return (fx_table_id)k->id; }

const char *fx_table_name(fx_table_id id) {
    return (unsigned)id < FX_TABLE_COUNT ? tables[id].name : "unknown";
}

/* ------------------------------------------------------------------------ */
/* Levels and the choice of table                                           */
/* ------------------------------------------------------------------------ */

int fx_dispatch_level_ok(const fx_cpu_facts *f, fx_isa isa) {
    const int x86 = f->arch == FX_CPU_X86;
    const int avx2 = x86 && f->os_avx && f->avx2 && f->fma && f->f16c;
    const int avx512 = avx2 && f->os_avx512 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq;
    switch (isa) {
    case FX_ISA_SCALAR: return 1;
    case FX_ISA_AVX2: return avx2;
    case FX_ISA_AVX512: return avx512;
    case FX_ISA_AVX512BF16: return avx512 && f->avx512bf16;
    case FX_ISA_AMX: return avx512 && f->avx512bf16 && fx_cpu_amx_ready(f, NULL, 0);
    case FX_ISA_NEON: return f->arch == FX_CPU_ARM && f->neon;
    default: return 0;
    }
}

/*
 * Which table wins, by CPU facts (2-thread figures, same-run ratios, measured
 * on our machines: README "Performance", bench/record/; instruction rates:
 * Intel's optimization manual for AMX, uops.info for Zen 4):
 *
 *  facts                                table       why
 *  AMX usable (CPUID AMX-TILE/BF16,     amx         TDPBF16PS: 1024 bf16 FLOP/cycle/core, 16x AVX-512 f32 FMA;
 *  XCR0 tiles, a palette, Linux grant,              oneDNN's AMX bf16 matmul 1499 GF/s vs our vdpbf16ps
 *  self-test), AVX512_BF16                          linear 220 GF/s at 768x9216x3072 on the SPR guest (1.1-1.8
 *                                                   TF/s on every model shape). Tiny m (<= 4: the GEMV,
 *                                                   bandwidth-bound) stays on AVX-512 f32 FMA, as do f32/f16
 *                                                   weights; m >= 5 goes to tiles (gemm_amx.c says why not
 *                                                   only m >= 16: batch = single runs).
 *  Intel AVX512_BF16 without usable AMX avx512bf16  vdpbf16ps peaks at 232 GF/s, f32 FMA at 452 on the SPR
 *  (SPR with AMX refused, Cooper Lake)  (f32 FMA)   guest; our bf16-weight linear 220 vs f32 linear 316 GF/s:
 *                                                   bf16 weights are widened in packing, FMA kernels run.
 *  AMD AVX512_BF16 (Zen 4, Zen 5)       avx512bf16  vdpbf16ps 468 GF/s = 2x f32 FMA (235) on Zen 4; our bf16
 *                                                   linear 418 GF/s = 0.98x oneDNN bf16. Zen 5 (512-bit
 *                                                   datapaths): 812 vs 446 GF/s = 1.8x; our bf16 linear ~700.
 *  other vendors with AVX512_BF16       avx512bf16  no measurement: keep exact f32 math.
 *                                       (f32 FMA)
 *  AVX-512 F/BW/VL/DQ, no BF16          avx512      Ice Lake, Skylake-SP: the widest FMA.
 *  AVX2 + FMA + F16C                    avx2        Zen 2/3, Haswell..Alder Lake.
 *  aarch64                              neon
 *  anything else                        scalar
 * FLUX_PRECISION=f32 keeps the level but never rounds activations to bf16
 * (the f32-math tables). Deterministic: the facts decide, never a timing
 * taken at run time.
 */
fx_table_id fx_dispatch_choose(const fx_cpu_facts *f, int force_f32, const char **why) {
    const char *w;
    fx_table_id id;
    if (fx_dispatch_level_ok(f, FX_ISA_AMX)) {
        id = force_f32 ? FX_TABLE_AMX_F32 : FX_TABLE_AMX;
        w = force_f32 ? "AMX usable, f32 math asked for: AVX-512 FMA kernels"
                      : "AMX usable: bf16 weights and attention on tiles (GEMV m <= 4 on AVX-512)";
    } else if (fx_dispatch_level_ok(f, FX_ISA_AVX512BF16)) {
        if (force_f32) {
            id = FX_TABLE_AVX512BF16_F32, w = "f32 math asked for: AVX-512 FMA kernels";
        } else if (f->vendor == FX_VENDOR_AMD) {
            id = FX_TABLE_AVX512BF16, w = "AMD AVX512_BF16: vdpbf16ps runs at twice the f32 FMA rate";
        } else {
            id = FX_TABLE_AVX512BF16_FMA;
            w = f->vendor == FX_VENDOR_INTEL ? "Intel without usable AMX: vdpbf16ps runs at half the f32 FMA "
                                               "rate, bf16 weights are widened for FMA"
                                             : "AVX512_BF16 on an unmeasured vendor: f32 FMA kernels";
        }
    } else if (fx_dispatch_level_ok(f, FX_ISA_AVX512)) {
        id = FX_TABLE_AVX512, w = "AVX-512 without BF16: f32 FMA";
    } else if (fx_dispatch_level_ok(f, FX_ISA_AVX2)) {
        id = FX_TABLE_AVX2, w = "AVX2 + FMA: f32 FMA";
    } else if (fx_dispatch_level_ok(f, FX_ISA_NEON)) {
        id = FX_TABLE_NEON, w = "aarch64: NEON";
    } else {
        id = FX_TABLE_SCALAR, w = "no SIMD level this build knows";
    }
    if (why) *why = w;
    return id;
}

fx_table_id fx_dispatch_forced(fx_isa isa, int force_f32) {
    switch (isa) {
    case FX_ISA_AVX2: return FX_TABLE_AVX2;
    case FX_ISA_AVX512: return FX_TABLE_AVX512;
    case FX_ISA_AVX512BF16: return force_f32 ? FX_TABLE_AVX512BF16_F32 : FX_TABLE_AVX512BF16;
    case FX_ISA_AMX: return force_f32 ? FX_TABLE_AMX_F32 : FX_TABLE_AMX;
    case FX_ISA_NEON: return FX_TABLE_NEON;
    default: return FX_TABLE_SCALAR;
    }
}

/* ------------------------------------------------------------------------ */
/* This machine                                                             */
/* ------------------------------------------------------------------------ */

static fx_cpu_facts machine;
static char selftest_why[160];
static pthread_once_t machine_once = PTHREAD_ONCE_INIT;

/* The CPU's facts, and on an AMX machine one exact tile GEMM: a failure or
 * a fault turns AMX off (the CPU or hypervisor did not do what the facts
 * promise), with the reason kept for --cpu-info and -v. */
static void machine_init(void) {
    machine = *fx_cpu_facts_get();
    const fx_kernels *amx = fx_kernels_table(FX_TABLE_AMX);
    if (amx && fx_dispatch_level_ok(&machine, FX_ISA_AMX) && !fx_amx_selftest(amx, selftest_why, sizeof selftest_why))
        machine.amx_selftest_failed = 1;
}

const fx_cpu_facts *fx_dispatch_facts(void) {
    pthread_once(&machine_once, machine_init);
    return &machine;
}

static int level_here(fx_isa isa) {
    return fx_dispatch_level_ok(fx_dispatch_facts(), isa) && fx_kernels_table(fx_dispatch_forced(isa, 0));
}

fx_isa fx_isa_detect(void) {
    static const fx_isa order[] = {FX_ISA_AMX, FX_ISA_AVX512BF16, FX_ISA_AVX512, FX_ISA_AVX2, FX_ISA_NEON};
    for (size_t i = 0; i < sizeof order / sizeof *order; i++)
        if (level_here(order[i])) return order[i];
    return FX_ISA_SCALAR;
}


/* Why a level does not run here. */
static void level_missing(fx_isa isa, char *why, size_t size) {
    const fx_cpu_facts *f = fx_dispatch_facts();
    if (isa == FX_ISA_NEON && f->arch != FX_CPU_ARM) snprintf(why, size, "not an aarch64 CPU");
    else if (isa != FX_ISA_NEON && isa != FX_ISA_SCALAR && f->arch != FX_CPU_X86)
        snprintf(why, size, "not an x86-64 CPU");
    else if (isa == FX_ISA_AVX2 && !fx_dispatch_level_ok(f, isa))
        snprintf(why, size, "needs AVX2, FMA and F16C with ymm state saved by the OS");
    else if (isa == FX_ISA_AVX512 && !fx_dispatch_level_ok(f, isa))
        snprintf(why, size, "needs AVX-512 F/BW/VL/DQ with zmm state saved by the OS");
    else if (isa == FX_ISA_AVX512BF16 && !fx_dispatch_level_ok(f, isa))
        snprintf(why, size, "needs AVX512_BF16 (and AVX-512 F/BW/VL/DQ)");
    else if (isa == FX_ISA_AMX && !fx_dispatch_level_ok(f, FX_ISA_AVX512BF16))
        snprintf(why, size, "needs AMX-TILE/AMX-BF16 and, for its other steps, AVX-512 with AVX512_BF16");
    else if (isa == FX_ISA_AMX && !fx_dispatch_level_ok(f, isa)) {
        char amx[160];
        fx_cpu_amx_ready(f, amx, sizeof amx);
        snprintf(why, size, "%s%s%s", amx, f->amx_selftest_failed ? ": " : "",
                 f->amx_selftest_failed ? selftest_why : "");
    } else
        snprintf(why, size, "not built for this architecture");
}

int fx_isa_check(fx_isa isa, char *msg, size_t size) {
    if ((unsigned)isa < FX_ISA_COUNT && level_here(isa)) {
        if (size) msg[0] = 0;
        return 1;
    }
    size_t len = 0;
    if (size) msg[0] = 0;
    fx_append(msg, size, &len, "this CPU runs");
    for (int i = 0; i < FX_ISA_COUNT; i++)
        if (level_here((fx_isa)i)) fx_append(msg, size, &len, "%s %s", i ? "," : "", isa_names[i]);
    if ((unsigned)isa < FX_ISA_COUNT) {
        char why[384];
        level_missing(isa, why, sizeof why);
        fx_append(msg, size, &len, "; %s: %s", isa_names[isa], why);
    }
    return 0;
}

const fx_kernels *fx_kernels_get(fx_isa isa, int force_f32) {
    if ((unsigned)isa >= FX_ISA_COUNT || !level_here(isa)) return NULL;
    return fx_kernels_table(fx_dispatch_forced(isa, force_f32));
}

const fx_kernels *fx_kernels_best(int force_f32) {
    const fx_kernels *k = fx_kernels_table(fx_dispatch_choose(fx_dispatch_facts(), force_f32, NULL));
    return k ? k : fx_kernels_get(fx_isa_detect(), force_f32);
}

fx_isa fx_kernels_isa(const fx_kernels *k) { return k->isa; }

const char *fx_kernels_name(const fx_kernels *k) { return k->name; }

int fx_kernels_uses_bf16_dot(const fx_kernels *k) { return k->bf16_dot; }

/* The precision of quantized weights in the default mode: the fastest whose
 * error stays within the default mode's golden tolerances
 * (tests/golden_case.h). Measured on the golden tiny models with --quant
 * q8_0 (Zen 5): int8 moves the latents 6.5-6.7e-3 from the same weights'
 * f32 run (the weight-only path: 2.2-2.6e-3), velocities 1.7e-2 from the
 * golden files (weight-only 1.1e-2).
 *   bf16 dot-product tables (Zen 4/5, Sapphire Rapids: AVX512_BF16, AMX):
 *     their default tolerance is 3e-2 (bf16 activations), which int8
 *     meets; and their int8 kernels (zmm vpdpbusd, AMX tdpbssd) run
 *     1.5-1.8x their bf16 GEMM (README "--precision int8") -> int8.
 *   every other table (AVX2, AVX-512 without BF16, NEON): the default mode
 *     computes in f32 there (tolerance 1e-3 on velocities and latents),
 *     which int8 does not meet -> weight-only (the f32 path); int8 stays an
 *     option (--precision int8). */
int fx_kernels_int8_by_default(const fx_kernels *k) { return k->bf16_dot && k->gemm && k->gemm->int8; }

/* ------------------------------------------------------------------------ */
/* --cpu-info                                                               */
/* ------------------------------------------------------------------------ */

size_t fx_kernels_describe(const fx_kernels *k, char *buf, size_t size) {
    const fx_cpu_facts *f = fx_dispatch_facts();
    const fx_isa best = fx_isa_detect();
    size_t len = 0;
    if (size) buf[0] = 0;
    fx_cpu_facts_describe(f, buf, size, &len);
    if (f->amx_selftest_failed) fx_append(buf, size, &len, "          (self-test: %s)\n", selftest_why);
    fx_append(buf, size, &len, "best ISA: %s\n", fx_isa_name(best));
    fx_append(buf, size, &len, "kernels:  %s (bf16 dot products: %s)\n", k->name, k->bf16_dot ? "yes" : "no");
    const char *why = NULL;
    const fx_table_id auto_f32 = fx_dispatch_choose(f, 1, NULL), auto_def = fx_dispatch_choose(f, 0, &why);
    if (k->id == (int)auto_def) {
        fx_append(buf, size, &len, "          chosen for this CPU: %s\n", why);
    } else if (k->id == (int)auto_f32) {
        const char *env = getenv("FLUX_PRECISION");
        fx_append(buf, size, &len, "          bf16 dot products off: %s\n",
            env && !strcmp(env, "f32") ? "FLUX_PRECISION=f32" : "precision option f32");
    } else {
        const char *env = getenv("FLUX_ISA");
        if (k->isa != best)
            fx_append(buf, size, &len, "          lowered from %s by %s%s\n", fx_isa_name(best),
                env && !strcmp(env, fx_isa_name(k->isa)) ? "FLUX_ISA=" : "the isa option",
                env && !strcmp(env, fx_isa_name(k->isa)) ? env : "");
        else
            fx_append(buf, size, &len, "          forced by %s (this CPU's choice: %s)\n",
                env && !strcmp(env, fx_isa_name(k->isa)) ? "FLUX_ISA" : "the isa option", fx_table_name(auto_def));
    }
    const fx_gemm_kernels *g = k->gemm ? k->gemm : &fx_gemm_scalar;
    char part[1024];
    fx_gemm_describe(g, part, sizeof part);
    fx_append(buf, size, &len, "%s", part);
    /* the int8 kernel of --precision int8 (GGUF / --quant weights), for a
     * product of many rows and, where it differs, of few */
    const fx_gemm_int8 *i8 = g->int8 ? g->int8(f, 1 << 20) : &fx_gemm_int8_scalar;
    const fx_gemm_int8 *i8_few = g->int8 ? g->int8(f, 1) : &fx_gemm_int8_scalar;
    fx_append(buf, size, &len, "int8:     %s", i8->name);
    if (i8_few != i8) fx_append(buf, size, &len, "; fewer rows than %d: %s", FX_INT8_AMX_MIN_M, i8_few->name);
    fx_append(buf, size, &len, " (W8A8: --precision int8%s)\n",
              fx_kernels_int8_by_default(k) ? "; the default for quantized weights here" : "");
    const struct fx_attn_kernels *a = k->attn ? k->attn : &fx_attn_scalar;
    fx_append(buf, size, &len, "attention: %s (%d query rows x %d keys per tile)\n", a->name, a->qt, a->kt);
    const fx_gemm_path *cb = g->path[FX_DTYPE_BF16], *cf = g->path[FX_DTYPE_F32];
    fx_append(buf, size, &len, "conv:     implicit GEMM; bf16 weights %s, f32/f16 weights %s\n", cb->name, cf->name);
    fx_append(buf, size, &len, "row ops:  %s\n", k->row ? k->row->name : "scalar (no table)");
    fx_append(buf, size, &len, "quant:    %s block expansion and quantizers\n", k->quant ? k->quant->name : "scalar");
    return len;
}
