/*
 * dispatch.h — the kernel tables by id and the rule that picks one from
 * the CPU's facts (simd-internal; model code sees only kernels.h).
 *
 * A table combines one table per kernel family (gemm, attention, row ops)
 * into what one context runs. Several tables share an ISA level: the level
 * says which instructions may run, the table which kernels are fastest
 * there (fx_dispatch_choose, explained in dispatch.c).
 */
#ifndef FX_DISPATCH_POLICY_H
#define FX_DISPATCH_POLICY_H

#include "simd/common/cpu.h"
#include "simd/kernels.h"

typedef enum fx_table_id {
    FX_TABLE_SCALAR = 0,
    FX_TABLE_AVX2,
    FX_TABLE_AVX512,          /* f32 FMA; bf16/f16 weights widened */
    FX_TABLE_AVX512BF16,      /* bf16 weights by vdpbf16ps, bf16 attention */
    FX_TABLE_AVX512BF16_F32,  /* that level with f32 math (FLUX_PRECISION=f32) */
    FX_TABLE_AVX512BF16_FMA,  /* that level on Intel: the f32 FMA kernels */
    FX_TABLE_AMX,             /* bf16 weights (m >= 16), attention, conv on tiles */
    FX_TABLE_AMX_F32,         /* that level with f32 math */
    FX_TABLE_NEON,
    FX_TABLE_COUNT
} fx_table_id;

/* Whether the facts allow an ISA level (CPU features, OS state, AMX
 * checks); compiled-in tables are a separate question. */
int fx_dispatch_level_ok(const fx_cpu_facts *f, fx_isa isa);

/* The table that wins on a CPU with these facts; *why (may be NULL) gets
 * the rule that chose it. A pure function of its arguments. */
fx_table_id fx_dispatch_choose(const fx_cpu_facts *f, int force_f32, const char **why);

/* The table of a forced level: fx_kernels_get's choice. */
fx_table_id fx_dispatch_forced(fx_isa isa, int force_f32);

/* A table by id (NULL when this build does not compile it), its id, and a
 * name for every id (also those not compiled). */
const fx_kernels *fx_kernels_table(fx_table_id id);
fx_table_id fx_kernels_id(const fx_kernels *k);
const char *fx_table_name(fx_table_id id);

/* This process's facts as the dispatch sees them: fx_cpu_facts_get() plus
 * the outcome of the AMX self-test (run once on a real AMX host). */
const fx_cpu_facts *fx_dispatch_facts(void);

#endif
