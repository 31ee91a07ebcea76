/*
 * bench.h — the flux-bench program: a registry of sub-commands plus the
 * shared timing, peak, load-check and report helpers.
 *
 *   flux-bench                       every command's default shape list
 *   flux-bench <command> [options]   one measurement (see --help)
 *   common options: --threads T --isa X --precision f32 --reps N --json
 *
 * A command lives in its own bench/bench_<name>.c and registers itself:
 *
 *   static int attn_main(int argc, char **argv, const fx_bench_env *env);
 *   static int attn_defaults(const fx_bench_env *env);
 *   FX_BENCH_COMMAND(attn, "attn --sq S --sk S --heads H ...", attn_main, attn_defaults)
 *
 * `main` runs when the command is named on the command line (argv[0] is the
 * command name; the common options are already parsed into env and removed);
 * `defaults` (may be NULL) runs its model shape list in the default run.
 * Both return 0 on success.
 *
 * A measurement: build a kernel context with fx_bench_kctx, time a closure
 * with fx_bench_time (warm-up, then best of N), fill an fx_bench_result and
 * print it with fx_bench_report (a table row, or one JSON object per line
 * with --json). Percent of peak uses the peaks measured by fx_bench_peak
 * (built-in FMA / vdpbf16ps / tdpbf16ps throughput loops), never assumed
 * ones.
 */
#ifndef FX_BENCH_H
#define FX_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "simd/kernels.h"

/* ------------------------------------------------------------------------ */
/* Options common to every command                                          */
/* ------------------------------------------------------------------------ */

typedef struct fx_bench_env {
    int threads;         /* --threads (default: OMP_NUM_THREADS or all CPUs) */
    int isa;             /* --isa name → fx_isa; -1 (default): the table the
                            library picks for this CPU (fx_kernels_best) */
    int force_f32;       /* --precision f32 (or FLUX_PRECISION=f32) */
    int int8;            /* --precision int8 (or FLUX_PRECISION=int8): W8A8 for block-typed weights */
    int bf16;            /* --precision bf16: the model commands' quantized weights expanded, never int8 */
    int reps;            /* --reps: timed repetitions after one warm-up (default 5) */
    double min_seconds;  /* keep repeating up to reps until this much time (default 0.3) */
    double max_seconds;  /* stop repeating after this much time (default 3, min 2 reps) */
    int json;            /* --json: one JSON object per line */
    const char *plot;    /* --plot FILE.svg: the run as a roofline (bench_plot.c), or NULL */
} fx_bench_env;

struct flux_options;
/* Library options for the model commands: flux_options_init, then the
 * env's threads, ISA and precision. */
void fx_bench_flux_options(const fx_bench_env *env, struct flux_options *o);

/* ------------------------------------------------------------------------ */
/* Command registry                                                         */
/* ------------------------------------------------------------------------ */

typedef int (*fx_bench_main_fn)(int argc, char **argv, const fx_bench_env *env);
typedef int (*fx_bench_defaults_fn)(const fx_bench_env *env);

void fx_bench_register(const char *name, const char *usage, fx_bench_main_fn main_fn,
                       fx_bench_defaults_fn defaults_fn);

#define FX_BENCH_COMMAND(name, usage, main_fn, defaults_fn)                      \
    __attribute__((constructor)) static void fx_bench_register_##name(void) {    \
        fx_bench_register(#name, usage, main_fn, defaults_fn);                    \
    }

/* ------------------------------------------------------------------------ */
/* Argument helpers (for a command's own options)                           */
/* ------------------------------------------------------------------------ */

/* Value of "--name V" as an integer / string; def if absent. A malformed
 * or missing value prints an error and returns def with *bad set to 1. */
int64_t fx_bench_arg_int(int argc, char **argv, const char *name, int64_t def, int *bad);
const char *fx_bench_arg_str(int argc, char **argv, const char *name, const char *def);
/* 1 if the flag "--name" is present. */
int fx_bench_arg_flag(int argc, char **argv, const char *name);

/* ------------------------------------------------------------------------ */
/* Kernel context                                                           */
/* ------------------------------------------------------------------------ */

/* The table of env->isa (or this CPU's choice when -1) with force_f32;
 * NULL if not available here. */
const fx_kernels *fx_bench_table(const fx_bench_env *env, int force_f32);

/* A context on table (isa, force_f32) with threads, its own scratch and a
 * packed-weight cache (paths that pack whole weights — the AMX tiles — do
 * so in the warm-up run, as the library does on a weight's first use).
 * isa < 0 = env->isa. Returns 0, or -1 (message printed) if the ISA is not
 * available. Free with fx_bench_kctx_free. */
int fx_bench_kctx(const fx_bench_env *env, int isa, int force_f32, fx_kctx *kc);
void fx_bench_kctx_free(fx_kctx *kc);

/* A table's label for reports: "avx512bf16", "avx512bf16-f32" (f32 math
 * asked for), "avx512bf16-fma" (Intel's choice), "amx", "amx-f32", ... */
const char *fx_bench_isa_label(const fx_kernels *k);

/* ------------------------------------------------------------------------ */
/* Timing                                                                   */
/* ------------------------------------------------------------------------ */

double fx_bench_now(void); /* monotonic seconds */

/* Call fn(arg) once to warm up, then time it until env->reps runs or
 * env->max_seconds (at least 2 timed runs, and at least until
 * env->min_seconds). Returns the best time in seconds. Also watches the
 * machine: if other processes used CPU during the runs, the next
 * fx_bench_report marks the result as "loaded" and warns on stderr. */
double fx_bench_time(const fx_bench_env *env, void (*fn)(void *), void *arg);

/* Busy CPU seconds of the whole machine so far (/proc/stat; < 0 if
 * unknown), and this process's own CPU seconds (all threads). */
double fx_bench_machine_busy(void);
double fx_bench_self_cpu(void);

/* CPU seconds used by other processes during the fx_bench_time calls since
 * the last fx_bench_report (from /proc/stat minus our own rusage); < 0 if
 * unknown. fx_bench_report prints it and resets it. */
double fx_bench_last_foreign_cpu(void);

/* ------------------------------------------------------------------------ */
/* Peak                                                                     */
/* ------------------------------------------------------------------------ */

typedef enum fx_bench_peak_kind {
    FX_PEAK_FMA_F32 = 0, /* widest f32 FMA the CPU has (zmm, ymm or NEON) */
    FX_PEAK_BF16_DOT,    /* vdpbf16ps zmm (0 if the CPU lacks AVX512_BF16) */
    FX_PEAK_AMX_BF16,    /* tdpbf16ps on 4 tiles (0 without usable AMX) */
    /* int8 dot products (the int8 GEMM's kernels; a multiply-add = 2 ops) */
    FX_PEAK_INT8_ZMM,    /* zmm vpdpbusd (0 without AVX512_VNNI) */
    FX_PEAK_INT8_YMM,    /* ymm vpdpbusd, VEX (0 without AVX-VNNI) */
    FX_PEAK_INT8_AVX2,   /* ymm vpmaddubsw + vpmaddwd + vpaddd (0 without AVX2) */
    FX_PEAK_AMX_INT8,    /* tdpbssd on 4 tiles (0 without usable AMX-INT8) */
    FX_PEAK_KINDS
} fx_bench_peak_kind;

/* The peak that bounds table k on weights of dtype bf16_weights ? bf16 :
 * f32/f16: tiles (amx), vdpbf16ps (avx512bf16) or FMA. */
fx_bench_peak_kind fx_bench_peak_of(const fx_kernels *k, int bf16_weights);
/* The peak of the instruction an int8 GEMM kernel is built on (by its
 * name: "amx", "avx512vnni", "avxvnni", "avx2"); FX_PEAK_KINDS if none. */
fx_bench_peak_kind fx_bench_peak_of_int8(const char *kernel_name);

/* Measured GFLOPS (multiply-add = 2 flops) of a register-resident
 * throughput loop on `threads` threads; measured once per process and
 * cached. 0 if the kind is not supported here. */
double fx_bench_peak(fx_bench_peak_kind kind, int threads);
const char *fx_bench_peak_name(fx_bench_peak_kind kind);
/* Measured memory read bandwidth (GB/s) of `threads` threads streaming a
 * buffer far larger than the caches; measured once per process. The
 * roofline's slope (--plot). */
double fx_bench_mem_gbps(int threads);

/* ------------------------------------------------------------------------ */
/* Reporting                                                                */
/* ------------------------------------------------------------------------ */

enum { FX_BENCH_MAX_EXTRA = 12 };

typedef struct fx_bench_result {
    const char *op;          /* "gemm", "attn", ... */
    char shape[160];         /* human: "m=256 n=3072 k=3072" */
    char shape_json[160];    /* JSON members: "\"m\":256,\"n\":3072,\"k\":3072" */
    const char *dtype;       /* "bf16", "f32" */
    const char *isa;         /* table name, e.g. "avx512bf16" */
    int threads;
    double seconds;          /* best time */
    double flops;            /* flops of one run (gflops = flops / seconds / 1e9) */
    double bytes;            /* least memory traffic of one run (operands read once, output
                              * written once; 0 = not stated): the roofline's intensity */
    fx_bench_peak_kind peak; /* denominator for "% of peak" */
    int n_extra;             /* extra numbers: yardsticks, ratios (JSON members) */
    struct {
        char key[32];
        double value;
    } extra[FX_BENCH_MAX_EXTRA];
} fx_bench_result;

/* Append an extra number ("onednn_gflops", "ratio_onednn", ...). */
void fx_bench_extra(fx_bench_result *r, const char *key, double value);

/* Print one result: a table row (a header first time), or one JSON object
 * with op, the shape members, dtype, isa, threads, seconds, gflops,
 * peak_gflops, pct_peak, foreign_cpu_s and the extras. */
void fx_bench_report(const fx_bench_env *env, const fx_bench_result *r);

/* A listener that also sees every reported result (the record command
 * collects a run this way): gflops as printed, loaded = other processes
 * used the CPUs meanwhile. NULL: none. */
typedef void (*fx_bench_observer_fn)(const fx_bench_result *r, double gflops, int loaded, void *user);
void fx_bench_set_observer(fx_bench_observer_fn fn, void *user);

/* --plot FILE.svg: every reported result is kept and, at exit, drawn as a
 * roofline (GF/s against flop/byte, log-log) under this machine's peaks
 * and memory bandwidth (bench_plot.c). */
void fx_bench_plot_add(const fx_bench_result *r, double gflops, int loaded);
int fx_bench_plot_write(const char *path, int threads);

/* Run the registered command `name` with its own options (argv[0] is the
 * command name); returns its status, or -1 if no such command. */
int fx_bench_run_command(const char *name, int argc, char **argv, const fx_bench_env *env);

#endif
