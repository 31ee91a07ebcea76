/*
 * bench_record.c — `flux-bench record`: this machine's performance record.
 *
 *   flux-bench record [--model DIR [--flux PATH]] [--write] [--file PATH]
 *                     [--tolerance PCT] [--only peak]
 *
 * The CPUs of our machines differ (AMD Zen 3 AVX2-only, Zen 4, Zen 5, Intel
 * Xeon with AMX), so a change measured on one can slow another unseen. Each
 * machine keeps its figures in bench/record/<vendor>-<family>-<model>-<isa>.txt
 * (CPU name, date, commit, then one "key = value" line per figure). This
 * command measures a fixed suite on the machine it runs on and compares it
 * with that machine's file: every figure that is more than --tolerance
 * percent (default 5) worse is flagged REGRESSION and the exit status is 1.
 * --write stores the run as the machine's new record instead.
 *
 * The suite (what each figure means is its key: op | shape | dtype | isa |
 * threads | metric):
 *   peak    every peak kind of `flux-bench peak` this CPU has (GF/s)
 *   gemm    the DiT's main linear shapes at 768 tokens (a 256² step) in the
 *           default precision, bf16 weights and GGUF q8_0 / q4_k weights
 *           (weight-only and W8A8), and in f32 math (GF/s)
 *   attn    the DiT's joint attention at 768 and 4608 tokens (GF/s)
 *   dit     with --model: one 256² transformer forward, steady (GF/s) and
 *           the first one after the load (seconds: step 1 of a job)
 *   job     with --model and --flux: the whole CLI job, 256², 4 steps,
 *           --no-cache, as a child process: wall seconds and peak RSS (GB)
 * --only peak measures the peaks alone (seconds, not minutes: a quick look,
 * and the tests' run).
 * Rates are higher-better, seconds and GB lower-better. A figure measured
 * while other processes used the CPUs is marked "loaded" in the output and
 * in a written record (a loaded figure is a lower bound of the machine).
 * Figures the record has and this run did not measure (no --model, another
 * ISA) are listed as not measured, never as regressions.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "simd/common/cpu.h"

#ifndef FX_BENCH_COMMIT
#define FX_BENCH_COMMIT "unknown"
#endif

enum { MAX_FIGURES = 256, KEY_BYTES = 200 };

typedef struct figure {
    char key[KEY_BYTES];
    double value;
    int loaded;
} figure;

typedef struct figures {
    figure f[MAX_FIGURES];
    int n;
} figures;

/* "gflops" figures are rates; every other metric is a cost. */
static int higher_is_better(const char *key) {
    const char *m = strrchr(key, '|');
    return m && strstr(m, "gflops") != NULL;
}

static void add_figure(figures *fs, const char *key, double value, int loaded) {
    if (fs->n >= MAX_FIGURES || !isfinite(value)) return;
    for (int i = 0; i < fs->n; i++)
        if (!strcmp(fs->f[i].key, key)) { /* the same figure twice in a run: keep the better */
            const int better = higher_is_better(key) ? value > fs->f[i].value : value < fs->f[i].value;
            if (better) fs->f[i].value = value, fs->f[i].loaded = loaded;
            return;
        }
    figure *f = &fs->f[fs->n++];
    snprintf(f->key, sizeof f->key, "%s", key);
    f->value = value;
    f->loaded = loaded;
}

static const figure *find_figure(const figures *fs, const char *key) {
    for (int i = 0; i < fs->n; i++)
        if (!strcmp(fs->f[i].key, key)) return &fs->f[i];
    return NULL;
}

/* Every reported result: its rate; dit results also their first forward. */
static void observe(const fx_bench_result *r, double gflops, int loaded, void *user) {
    figures *fs = user;
    char key[KEY_BYTES];
    snprintf(key, sizeof key, "%s | %s | %s | %s | %d | gflops", r->op, r->shape, r->dtype, r->isa, r->threads);
    add_figure(fs, key, gflops, loaded);
    for (int i = 0; i < r->n_extra; i++)
        if (!strcmp(r->extra[i].key, "first_s")) {
            snprintf(key, sizeof key, "%s | %s | %s | %s | %d | first_s", r->op, r->shape, r->dtype, r->isa,
                     r->threads);
            add_figure(fs, key, r->extra[i].value, loaded);
        }
}

/* Run one bench command line ("gemm --m 768 ...") with env. */
static int run_line(const fx_bench_env *env, const char *line) {
    char buf[512], *argv[32];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && argc < 31; t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    argv[argc] = NULL;
    return fx_bench_run_command(argv[0], argc, argv, env);
}

/* ------------------------------------------------------------------------ */
/* The whole job, as a user runs it                                         */
/* ------------------------------------------------------------------------ */

/* flux -d model ... as a child; wall seconds, the child's peak RSS, and
 * whether other processes used the CPUs meanwhile. */
static int time_job(const char *flux, const char *model, int threads, double *seconds, double *rss_bytes,
                    int *loaded) {
    char out[] = "/tmp/flux-bench-record-XXXXXX.png";
    int fd = mkstemps(out, 4);
    if (fd < 0) return -1;
    close(fd);
    char threads_s[16];
    snprintf(threads_s, sizeof threads_s, "%d", threads);
    char *const argv[] = {(char *)flux, "-d", (char *)model, "-p", "a cat on a skateboard", "-W", "256", "-H", "256",
                          "-s", "4", "-S", "1", "--no-cache", "-t", threads_s, "-q", "-o", out, NULL};
    const double t0 = fx_bench_now(), busy0 = fx_bench_machine_busy();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        execv(flux, argv);
        fprintf(stderr, "flux-bench record: cannot run %s: %s\n", flux, strerror(errno));
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0)
        if (errno != EINTR) return -1;
    *seconds = fx_bench_now() - t0;
    *rss_bytes = (double)ru.ru_maxrss * 1024.0;
    const double child_cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                             (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    const double foreign = fx_bench_machine_busy() - busy0 - child_cpu;
    *loaded = busy0 >= 0 && foreign > 0.05 && foreign > 0.02 * *seconds;
    unlink(out);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* The record file                                                          */
/* ------------------------------------------------------------------------ */

static const char *isa_of_machine(void) { return fx_isa_name(fx_isa_detect()); }

static void default_path(char *buf, size_t size) {
    const fx_cpu_facts *f = fx_cpu_facts_get();
    snprintf(buf, size, "bench/record/%s-%02x-%02x-%s.txt", f->vendor_id[0] ? f->vendor_id : "cpu", f->family,
             f->model, isa_of_machine());
}

static int read_record(const char *path, figures *fs, char *header, size_t header_size) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    size_t hl = 0;
    header[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *eq = strstr(line, " = ");
        if (line[0] == '#' || !eq || !strchr(line, '|')) { /* header lines: cpu, date, commit ... */
            if (line[0] != '#' && line[0] && hl + strlen(line) + 4 < header_size)
                hl += (size_t)snprintf(header + hl, header_size - hl, "  %s\n", line);
            continue;
        }
        *eq = '\0';
        char *end = NULL;
        double v = strtod(eq + 3, &end);
        if (end == eq + 3) continue;
        add_figure(fs, line, v, end && strstr(end, "loaded") != NULL);
    }
    fclose(f);
    return 0;
}

static int write_record(const char *path, const figures *fs, int threads) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "flux-bench record: cannot write %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    const fx_cpu_facts *c = fx_cpu_facts_get();
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    fprintf(f, "# flux.c performance record of one machine: written by `flux-bench record --write`,\n"
               "# checked by `flux-bench record` (figures more than 5%% worse are regressions).\n"
               "# key = value: op | shape | dtype | isa | threads | metric (gflops: higher is better;\n"
               "# seconds, first_s, rss_gb: lower is better); \"loaded\": measured while other\n"
               "# processes used the CPUs (a lower bound).\n");
    fprintf(f, "cpu: %s family 0x%x model 0x%x (%s)\nisa: %s\ndate: %s\ncommit: %s\nthreads: %d\n", c->vendor_id,
            c->family, c->model, c->brand, isa_of_machine(), date, FX_BENCH_COMMIT, threads);
    for (int i = 0; i < fs->n; i++)
        fprintf(f, "%s = %.6g%s\n", fs->f[i].key, fs->f[i].value, fs->f[i].loaded ? " loaded" : "");
    if (fclose(f) || rename(tmp, path)) {
        fprintf(stderr, "flux-bench record: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    printf("record: wrote %d figures to %s\n", fs->n, path);
    return 0;
}

/* Today's figures against the record; returns the number of regressions. */
static int compare(const figures *rec, const figures *now, double tolerance) {
    int regressions = 0;
    printf("\n%-78s %11s %11s %8s\n", "figure", "record", "now", "change");
    for (int i = 0; i < rec->n; i++) {
        const figure *r = &rec->f[i], *n = find_figure(now, r->key);
        if (!n) {
            printf("%-78s %11.4g %11s %8s\n", r->key, r->value, "-", "not measured");
            continue;
        }
        /* > 0: better than the record */
        const double gain = higher_is_better(r->key) ? n->value / r->value - 1.0 : r->value / n->value - 1.0;
        const int bad = gain < -tolerance / 100.0;
        regressions += bad;
        printf("%-78s %11.4g %11.4g %+7.1f%%%s%s\n", r->key, r->value, n->value, 100.0 * gain,
               bad ? "  REGRESSION" : "", n->loaded ? "  (loaded)" : "");
    }
    for (int i = 0; i < now->n; i++)
        if (!find_figure(rec, now->f[i].key))
            printf("%-78s %11s %11.4g %8s\n", now->f[i].key, "-", now->f[i].value, "new");
    return regressions;
}

/* ------------------------------------------------------------------------ */
/* The command                                                              */
/* ------------------------------------------------------------------------ */

static int record_main(int argc, char **argv, const fx_bench_env *env) {
    const char *model = fx_bench_arg_str(argc, argv, "--model", NULL);
    const char *flux = fx_bench_arg_str(argc, argv, "--flux", NULL);
    const char *file = fx_bench_arg_str(argc, argv, "--file", NULL);
    const int write = fx_bench_arg_flag(argc, argv, "--write");
    const char *only = fx_bench_arg_str(argc, argv, "--only", NULL);
    int bad = 0;
    const double tolerance = (double)fx_bench_arg_int(argc, argv, "--tolerance", 5, &bad);
    if (bad || tolerance < 0 || (flux && !model) || (only && strcmp(only, "peak"))) {
        fprintf(stderr, "usage: flux-bench record [--model DIR [--flux PATH]] [--write] [--file PATH] "
                        "[--tolerance PCT] [--only peak]\n");
        return -1;
    }
    char path[4096];
    if (file) snprintf(path, sizeof path, "%s", file);
    else default_path(path, sizeof path);
    figures *rec = calloc(1, sizeof *rec), *now = calloc(1, sizeof *now);
    char header[2048];
    if (!rec || !now) return free(rec), free(now), -1;
    const int have_record = !read_record(path, rec, header, sizeof header);
    if (!have_record && !write) {
        fprintf(stderr, "flux-bench record: no record for this machine (%s); measure one with --write\n", path);
        free(rec), free(now);
        return -1;
    }
    if (have_record) printf("record %s:\n%s", path, header);

    /* the peaks first, while nothing else of ours runs */
    for (int kind = 0; kind < FX_PEAK_KINDS; kind++) {
        const double busy0 = fx_bench_machine_busy(), self0 = fx_bench_self_cpu();
        const double g = fx_bench_peak((fx_bench_peak_kind)kind, env->threads);
        const double foreign = fx_bench_machine_busy() - busy0 - (fx_bench_self_cpu() - self0);
        char key[KEY_BYTES];
        snprintf(key, sizeof key, "peak | %s | - | - | %d | gflops", fx_bench_peak_name((fx_bench_peak_kind)kind),
                 env->threads);
        if (g > 0)
            add_figure(now, key, g, busy0 >= 0 && foreign > 0.05),
                printf("peak   %-20s %8.1f GF/s\n", fx_bench_peak_name((fx_bench_peak_kind)kind), g);
    }
    int rc = 0;
    if (only) goto measured;
    fx_bench_set_observer(observe, now);
    static const char *const suite[] = {
        "gemm --m 768 --n 9216 --k 3072 --wtype q8_0,q4_k",
        "gemm --m 768 --n 3072 --k 3072 --no-yardsticks",
        "gemm --m 768 --n 3072 --k 12288 --no-yardsticks",
        "attn --sq 768 --heads 24 --dim 128 --ld 27648",
        "attn --sq 4608 --heads 24 --dim 128 --ld 27648",
    };
    for (size_t i = 0; i < sizeof suite / sizeof *suite; i++) rc |= run_line(env, suite[i]);
    fx_bench_env e = *env; /* W8A8 and f32 math on the same shape */
    e.int8 = 1, e.force_f32 = 0;
    rc |= run_line(&e, "gemm --m 768 --n 9216 --k 3072 --wtype q8_0,q4_k");
    e.int8 = 0, e.force_f32 = 1;
    rc |= run_line(&e, "gemm --m 768 --n 9216 --k 3072 --no-yardsticks");
    if (model) {
        char line[4200];
        snprintf(line, sizeof line, "dit --model %s", model);
        rc |= run_line(env, line);
    }
    fx_bench_set_observer(NULL, NULL);
    if (model && flux) {
        double s = 0, rss = 0;
        int loaded = 0;
        if (time_job(flux, model, env->threads, &s, &rss, &loaded)) {
            fprintf(stderr, "flux-bench record: the job (%s -d %s) failed\n", flux, model);
            rc = -1;
        } else {
            char key[KEY_BYTES];
            snprintf(key, sizeof key, "job | 256x256 4 steps --no-cache | default | %s | %d | seconds",
                     isa_of_machine(), env->threads);
            add_figure(now, key, s, loaded);
            snprintf(key, sizeof key, "job | 256x256 4 steps --no-cache | default | %s | %d | rss_gb",
                     isa_of_machine(), env->threads);
            add_figure(now, key, rss * 1e-9, loaded);
            printf("job    256x256, 4 steps: %.2f s, peak RSS %.2f GB%s\n", s, rss * 1e-9, loaded ? " (loaded)" : "");
        }
    }
measured:;
    int regressions = 0;
    if (write) {
        if (write_record(path, now, env->threads)) rc = -1;
    } else {
        regressions = compare(rec, now, tolerance);
        printf("\n%d figure(s) more than %.0f%% worse than the record%s\n", regressions, tolerance,
               regressions ? " (rerun on an idle machine to confirm)" : "");
    }
    free(rec), free(now);
    return rc || regressions ? -1 : 0;
}

FX_BENCH_COMMAND(record,
                 "record [--model DIR [--flux PATH]] [--write] [--file PATH] [--tolerance PCT] [--only peak]\n"
                 "                        this machine's performance record (bench/record/): measure, compare,\n"
                 "                        flag regressions",
                 record_main, NULL)
