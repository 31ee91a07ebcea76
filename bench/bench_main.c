/*
 * bench_main.c — flux-bench: sub-command dispatch, common options, timing
 * with a machine-load check, and the table / JSON report (see bench.h).
 */
#include "bench.h"

#include "simd/dispatch.h"
#include "flux.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* ------------------------------------------------------------------------ */
/* Registry                                                                 */
/* ------------------------------------------------------------------------ */

enum { MAX_COMMANDS = 32 };

typedef struct command {
    const char *name, *usage;
    fx_bench_main_fn main_fn;
    fx_bench_defaults_fn defaults_fn;
} command;

static command g_commands[MAX_COMMANDS];
static int g_ncommands;

void fx_bench_register(const char *name, const char *usage, fx_bench_main_fn main_fn,
                       fx_bench_defaults_fn defaults_fn) {
    if (g_ncommands < MAX_COMMANDS) g_commands[g_ncommands++] = (command){name, usage, main_fn, defaults_fn};
}

/* Constructors run in link order; list commands alphabetically, "peak" first. */
static int command_cmp(const void *a, const void *b) {
    const command *x = a, *y = b;
    int px = !strcmp(x->name, "peak"), py = !strcmp(y->name, "peak");
    if (px != py) return py - px;
    return strcmp(x->name, y->name);
}

/* ------------------------------------------------------------------------ */
/* Arguments                                                                */
/* ------------------------------------------------------------------------ */

static int find_arg(int argc, char **argv, const char *name) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name)) return i;
    return -1;
}

int64_t fx_bench_arg_int(int argc, char **argv, const char *name, int64_t def, int *bad) {
    int i = find_arg(argc, argv, name);
    if (i < 0) return def;
    char *end = NULL;
    errno = 0;
    long long v = i + 1 < argc ? strtoll(argv[i + 1], &end, 10) : 0;
    if (i + 1 >= argc || errno || end == argv[i + 1] || *end) {
        fprintf(stderr, "flux-bench: %s needs an integer value\n", name);
        if (bad) *bad = 1;
        return def;
    }
    return v;
}

const char *fx_bench_arg_str(int argc, char **argv, const char *name, const char *def) {
    int i = find_arg(argc, argv, name);
    return i >= 0 && i + 1 < argc ? argv[i + 1] : def;
}

int fx_bench_arg_flag(int argc, char **argv, const char *name) { return find_arg(argc, argv, name) >= 0; }

/* ------------------------------------------------------------------------ */
/* Kernel context                                                           */
/* ------------------------------------------------------------------------ */

const fx_kernels *fx_bench_table(const fx_bench_env *env, int force_f32) {
    return env->isa < 0 ? fx_kernels_best(force_f32) : fx_kernels_get((fx_isa)env->isa, force_f32);
}

int fx_bench_kctx(const fx_bench_env *env, int isa, int force_f32, fx_kctx *kc) {
    if (isa < 0) isa = env->isa;
    const fx_kernels *k = isa < 0 ? fx_kernels_best(force_f32) : fx_kernels_get((fx_isa)isa, force_f32);
    if (!k) {
        fprintf(stderr, "flux-bench: ISA %s is not available on this CPU/build\n", fx_isa_name((fx_isa)isa));
        return -1;
    }
    fx_scratch *s = fx_scratch_new(env->threads);
    if (!s) return -1;
    fx_kctx_init(kc, k, env->threads, s);
    return 0;
}

void fx_bench_kctx_free(fx_kctx *kc) {
    fx_scratch_free(kc->scratch);
    kc->scratch = NULL;
}

const char *fx_bench_isa_label(const fx_kernels *k) {
    switch (fx_kernels_id(k)) {
    case FX_TABLE_AVX512BF16_F32: return "avx512bf16-f32";
    case FX_TABLE_AVX512BF16_FMA: return "avx512bf16-fma";
    case FX_TABLE_AMX_F32: return "amx-f32";
    default: return fx_isa_name(fx_kernels_isa(k));
    }
}

fx_bench_peak_kind fx_bench_peak_of(const fx_kernels *k, int bf16_weights) {
    if (!bf16_weights || !fx_kernels_uses_bf16_dot(k)) return FX_PEAK_FMA_F32;
    return fx_kernels_isa(k) == FX_ISA_AMX ? FX_PEAK_AMX_BF16 : FX_PEAK_BF16_DOT;
}

fx_bench_peak_kind fx_bench_peak_of_int8(const char *name) {
    const size_t len = strcspn(name, " ");
    if (len == 3 && !strncmp(name, "amx", 3)) return FX_PEAK_AMX_INT8;
    if (len == 10 && !strncmp(name, "avx512vnni", 10)) return FX_PEAK_INT8_ZMM;
    if (len == 7 && !strncmp(name, "avxvnni", 7)) return FX_PEAK_INT8_YMM;
    if (len == 4 && !strncmp(name, "avx2", 4)) return FX_PEAK_INT8_AVX2;
    return FX_PEAK_KINDS;
}

/* ------------------------------------------------------------------------ */
/* Timing and machine load                                                  */
/* ------------------------------------------------------------------------ */

void fx_bench_flux_options(const fx_bench_env *env, flux_options *o) {
    flux_options_init(o);
    o->threads = env->threads;
    o->precision = env->force_f32 ? FLUX_PRECISION_F32
                   : env->int8    ? FLUX_PRECISION_INT8
                   : env->bf16    ? FLUX_PRECISION_BF16
                                  : FLUX_PRECISION_DEFAULT;
    o->isa = env->isa < 0 ? NULL : fx_isa_name((fx_isa)env->isa);
}

/* Other processes' CPU seconds and our wall time, summed over the timings
 * since the last report (one report row may hold several timings). */
static double g_foreign_cpu = 0, g_foreign_wall = 0;
static int g_foreign_unknown;

double fx_bench_last_foreign_cpu(void) { return g_foreign_unknown ? -1 : g_foreign_cpu; }

double fx_bench_time(const fx_bench_env *env, void (*fn)(void *), void *arg) {
    fn(arg); /* warm-up: page faults, scratch growth, caches */
    double busy0 = fx_bench_machine_busy(), self0 = fx_bench_self_cpu(), t_start = fx_bench_now();
    double best = INFINITY, total = 0;
    for (int rep = 0;; rep++) {
        double t0 = fx_bench_now();
        fn(arg);
        double dt = fx_bench_now() - t0;
        total += dt;
        if (dt < best) best = dt;
        if (rep + 1 >= 2 && total >= env->min_seconds && (rep + 1 >= env->reps || total >= env->max_seconds))
            break;
    }
    double busy1 = fx_bench_machine_busy(), self1 = fx_bench_self_cpu();
    g_foreign_wall += fx_bench_now() - t_start;
    if (busy0 < 0 || busy1 < 0) g_foreign_unknown = 1;
    else if ((busy1 - busy0) - (self1 - self0) > 0) /* < 0: tick rounding */
        g_foreign_cpu += (busy1 - busy0) - (self1 - self0);
    return best;
}

/* Other processes used a noticeable share of the CPUs during the runs. */
static int machine_was_loaded(void) {
    return g_foreign_cpu > 0.05 && g_foreign_cpu > 0.02 * g_foreign_wall;
}

/* ------------------------------------------------------------------------ */
/* Reporting                                                                */
/* ------------------------------------------------------------------------ */

void fx_bench_extra(fx_bench_result *r, const char *key, double value) {
    if (r->n_extra >= FX_BENCH_MAX_EXTRA) return;
    snprintf(r->extra[r->n_extra].key, sizeof r->extra[r->n_extra].key, "%s", key);
    r->extra[r->n_extra].value = value;
    r->n_extra++;
}

static void print_number_json(const char *key, double v) {
    if (isfinite(v)) printf(",\"%s\":%.6g", key, v);
    else printf(",\"%s\":null", key);
}

static fx_bench_observer_fn g_observer;
static void *g_observer_user;

void fx_bench_set_observer(fx_bench_observer_fn fn, void *user) {
    g_observer = fn;
    g_observer_user = user;
}

void fx_bench_report(const fx_bench_env *env, const fx_bench_result *r) {
    static int header_done;
    double gflops = r->seconds > 0 ? r->flops / r->seconds * 1e-9 : 0;
    double peak = fx_bench_peak(r->peak, r->threads);
    double pct = peak > 0 ? 100.0 * gflops / peak : 0;
    int loaded = machine_was_loaded();
    if (g_observer) g_observer(r, gflops, loaded, g_observer_user);
    if (env->plot) fx_bench_plot_add(r, gflops, loaded);
    if (env->json) {
        printf("{\"op\":\"%s\",%s,\"dtype\":\"%s\",\"isa\":\"%s\",\"threads\":%d", r->op, r->shape_json,
               r->dtype, r->isa, r->threads);
        print_number_json("seconds", r->seconds);
        print_number_json("gflops", gflops);
        print_number_json("peak_gflops", peak);
        printf(",\"peak_kind\":\"%s\"", fx_bench_peak_name(r->peak));
        print_number_json("pct_peak", pct);
        print_number_json("foreign_cpu_s", fx_bench_last_foreign_cpu());
        printf(",\"loaded\":%s", loaded ? "true" : "false");
        for (int i = 0; i < r->n_extra; i++) print_number_json(r->extra[i].key, r->extra[i].value);
        printf("}\n");
    } else {
        if (!header_done) {
            printf("%-6s %-30s %-5s %-16s %3s %10s %8s %6s  %s\n", "op", "shape", "dtype", "isa", "thr", "ms",
                   "GFLOPS", "%peak", "yardsticks");
            header_done = 1;
        }
        printf("%-6s %-30s %-5s %-16s %3d %10.3f %8.1f %5.1f%%", r->op, r->shape, r->dtype, r->isa, r->threads,
               r->seconds * 1e3, gflops, pct);
        for (int i = 0; i < r->n_extra; i++) printf("  %s=%.4g", r->extra[i].key, r->extra[i].value);
        if (loaded) printf("  [LOADED: other processes used %.2f CPU-s]", g_foreign_cpu);
        printf("\n");
    }
    if (loaded)
        fprintf(stderr, "flux-bench: warning: the machine was busy (%.2f CPU-s used by other processes during "
                        "this measurement); numbers are too low, rerun when idle\n", g_foreign_cpu);
    fflush(stdout);
    g_foreign_cpu = g_foreign_wall = 0, g_foreign_unknown = 0;
}

/* ------------------------------------------------------------------------ */
/* main                                                                     */
/* ------------------------------------------------------------------------ */

int fx_bench_run_command(const char *name, int argc, char **argv, const fx_bench_env *env) {
    for (int i = 0; i < g_ncommands; i++)
        if (!strcmp(name, g_commands[i].name)) return g_commands[i].main_fn(argc, argv, env);
    return -1;
}

static void usage(FILE *f) {
    fprintf(f, "usage: flux-bench [common options] [command [options]]\n"
               "  without a command: every command's default (model shape) list\n"
               "common options:\n"
               "  --threads T     threads (default OMP_NUM_THREADS or all CPUs)\n"
               "  --isa X         scalar|avx2|avx512|avx512bf16|amx|neon (default: the\n"
               "                  kernels the library picks for this CPU)\n"
               "  --precision f32 force f32 math (as FLUX_PRECISION=f32); int8: W8A8 for GGUF block-type\n"
               "                  weights (gemm --wtype, the model commands' quantized weights); bf16: the\n"
               "                  model commands' quantized weights expanded, never int8 (gemm --wtype rows\n"
               "                  are weight-only without --precision int8)\n"
               "  --reps N        timed repetitions after a warm-up, best is reported (default 5)\n"
               "  --max-seconds S stop repeating after S seconds (at least 2 runs; default 3)\n"
               "  --json          one JSON object per measurement per line\n"
               "  --plot F.svg    also draw every measurement as a roofline (GF/s against flop/byte\n"
               "                  under this machine's measured peaks and memory bandwidth) into F.svg\n"
               "commands:\n");
    for (int i = 0; i < g_ncommands; i++) fprintf(f, "  %s\n", g_commands[i].usage);
}

static int default_threads(void) {
    const char *e = getenv("OMP_NUM_THREADS");
    if (e && atoi(e) > 0) return atoi(e);
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
#endif
}

/* Remove argv[i .. i+n) in place. */
static void drop_args(int *argc, char **argv, int i, int n) {
    memmove(argv + i, argv + i + n, sizeof *argv * (size_t)(*argc - i - n + 1));
    *argc -= n;
}

int main(int argc, char **argv) {
    qsort(g_commands, (size_t)g_ncommands, sizeof *g_commands, command_cmp);
    fx_bench_env env = {.threads = default_threads(), .isa = -1, .reps = 5,
                        .min_seconds = 0.3, .max_seconds = 3.0};
    const char *prec = getenv("FLUX_PRECISION");
    if (prec && !strcmp(prec, "f32")) env.force_f32 = 1;
    if (prec && !strcmp(prec, "int8")) env.int8 = 1;
    if (prec && !strcmp(prec, "bf16")) env.bf16 = 1;

    /* Common options may appear anywhere; strip them. */
    for (int i = 1; i < argc;) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            env.json = 1;
            drop_args(&argc, argv, i, 1);
        } else if (!strcmp(a, "--plot") && has_val) {
            env.plot = argv[i + 1];
            drop_args(&argc, argv, i, 2);
        } else if (!strcmp(a, "--threads") && has_val) {
            env.threads = atoi(argv[i + 1]);
            if (env.threads < 1) {
                fprintf(stderr, "flux-bench: --threads needs a positive integer\n");
                return 2;
            }
            drop_args(&argc, argv, i, 2);
        } else if (!strcmp(a, "--isa") && has_val) {
            env.isa = fx_isa_parse(argv[i + 1]);
            char why[512];
            if (env.isa < 0) {
                fprintf(stderr, "flux-bench: unknown ISA '%s'\n", argv[i + 1]);
                return 2;
            }
            if (!fx_isa_check((fx_isa)env.isa, why, sizeof why)) {
                fprintf(stderr, "flux-bench: --isa %s: %s\n", argv[i + 1], why);
                return 2;
            }
            drop_args(&argc, argv, i, 2);
        } else if (!strcmp(a, "--precision") && has_val) {
            env.force_f32 = !strcmp(argv[i + 1], "f32");
            env.int8 = !strcmp(argv[i + 1], "int8");
            env.bf16 = !strcmp(argv[i + 1], "bf16");
            drop_args(&argc, argv, i, 2);
        } else if (!strcmp(a, "--reps") && has_val) {
            env.reps = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : 1;
            drop_args(&argc, argv, i, 2);
        } else if (!strcmp(a, "--max-seconds") && has_val) {
            env.max_seconds = atof(argv[i + 1]);
            drop_args(&argc, argv, i, 2);
        } else {
            i++;
        }
    }
#ifdef _OPENMP
    omp_set_num_threads(env.threads);
#endif

    if (argc < 2) {
        int rc = 0;
        for (int i = 0; i < g_ncommands; i++)
            if (g_commands[i].defaults_fn) rc |= g_commands[i].defaults_fn(&env);
        return rc || fx_bench_plot_write(env.plot, env.threads) ? 1 : 0;
    }
    for (int i = 0; i < g_ncommands; i++)
        if (!strcmp(argv[1], g_commands[i].name)) {
            const int rc = g_commands[i].main_fn(argc - 1, argv + 1, &env);
            return rc || fx_bench_plot_write(env.plot, env.threads) ? 1 : 0;
        }
    fprintf(stderr, "flux-bench: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
