/*
 * bench_busy.c — `flux-bench busy`: a small job on an idle machine and with
 * one CPU kept busy by another process, under the default (adaptive) thread
 * count, one thread, and every CPU.
 *
 *   flux-bench busy --model DIR [--width 64 --height 64 --steps 2] [--hogs 1]
 *
 * The job is flux_generate of one prompt (the text embeddings come from
 * the memory cache after the warm-up run, so it is denoising + decoding).
 * "One CPU busy" is a child process spinning (--hogs N: N of them), started
 * by the bench and killed after. Each row is one (load, threads) pair:
 * the best time of the runs, and the threads the context ran with (the
 * adaptive default re-measures the idle CPUs between units of work; the
 * row reports the lowest and highest count seen at its checkpoints). The
 * claim to check: with a CPU busy, the default is never slower than one
 * thread (ratio_vs_1thread <= 1, within noise), and idle it is as fast as
 * every CPU. --threads T replaces "every CPU" by T.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "flux.h"
#include "src/base/cpu_load.h"
#include "src/model/ctx.h"

typedef struct busy_job {
    flux_ctx *ctx;
    flux_params p;
    int failed;
    int tmin, tmax; /* kernel threads seen at the checkpoints */
} busy_job;

static int on_progress(void *user, flux_stage stage, int step, int total, int sub, int subtotal) {
    busy_job *j = user;
    (void)stage, (void)step, (void)total, (void)sub, (void)subtotal;
    int t = j->ctx->kc.threads;
    if (t < j->tmin) j->tmin = t;
    if (t > j->tmax) j->tmax = t;
    return 0;
}

static void run_job(void *arg) {
    busy_job *j = arg;
    flux_image *img = NULL;
    if (flux_generate(j->ctx, &j->p, &img) != FLUX_OK) j->failed = 1;
    flux_image_free(img);
}

/* Spinning children, one per hog; their pids in pids[]. */
static int start_hogs(int n, pid_t *pids) {
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0) return -1;
        if (pids[i] == 0) {
            volatile unsigned long x = 0;
            for (;;) x++;
        }
    }
    usleep(200000); /* let the scheduler see them */
    return 0;
}

static void stop_hogs(int n, const pid_t *pids) {
    for (int i = 0; i < n; i++)
        if (pids[i] > 0) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
        }
}

static int busy_main(int argc, char **argv, const fx_bench_env *env) {
    int bad = 0;
    const char *model = fx_bench_arg_str(argc, argv, "--model", NULL);
    int64_t w = fx_bench_arg_int(argc, argv, "--width", 64, &bad), h = fx_bench_arg_int(argc, argv, "--height", 64, &bad);
    int64_t steps = fx_bench_arg_int(argc, argv, "--steps", 2, &bad), hogs = fx_bench_arg_int(argc, argv, "--hogs", 1, &bad);
    if (bad || !model || w < 16 || h < 16 || w % 16 || h % 16 || steps < 1 || hogs < 0 || hogs > 64) {
        fprintf(stderr, "usage: flux-bench busy --model DIR [--width W --height H (default 64)] [--steps S (2)] "
                        "[--hogs N (1)] [--threads T (every CPU)]\n");
        return -1;
    }
    const int cpus = fx_cpu_available(), all = env->threads > 0 ? env->threads : cpus;
    const int counts[3] = {1, 0, all}; /* 0 = the adaptive default */
    double best[2][3] = {{0}};
    pid_t pids[64] = {0};
    int rc = 0;
    for (int load = 0; load < 2 && !rc; load++) {
        if (load && start_hogs((int)hogs, pids)) {
            fprintf(stderr, "flux-bench busy: cannot start the busy processes\n");
            stop_hogs((int)hogs, pids);
            return -1;
        }
        for (int k = 0; k < 3 && !rc; k++) {
            flux_options o;
            fx_bench_flux_options(env, &o);
            o.threads = counts[k];
            o.no_disk_cache = 1;
            busy_job j = {.ctx = flux_new(&o), .tmin = 1 << 30, .tmax = 0};
            if (!j.ctx || flux_load(j.ctx, model, NULL) != FLUX_OK) {
                fprintf(stderr, "flux-bench busy: %s\n", j.ctx ? flux_error(j.ctx) : "out of memory");
                flux_free(j.ctx);
                rc = -1;
                break;
            }
            flux_params_init(&j.p);
            j.p.prompt = "a small job on a shared machine";
            j.p.width = (int)w, j.p.height = (int)h, j.p.steps = (int)steps, j.p.seed = 1;
            j.p.progress = on_progress, j.p.progress_user = &j;
            double s = fx_bench_time(env, run_job, &j);
            if (j.failed) {
                fprintf(stderr, "flux-bench busy: %s\n", flux_error(j.ctx));
                rc = -1;
            }
            best[load][k] = s;
            fx_bench_result r;
            memset(&r, 0, sizeof r);
            r.op = "busy";
            snprintf(r.shape, sizeof r.shape, "%s %dx%d s%d threads %s", load ? "busy" : "idle", (int)w, (int)h,
                     (int)steps, k == 1 ? "default" : k == 0 ? "1" : "all");
            snprintf(r.shape_json, sizeof r.shape_json,
                     "\"load\":\"%s\",\"busy_cpus\":%d,\"cpus\":%d,\"threads_opt\":%d,\"width\":%d,\"height\":%d,"
                     "\"steps\":%d",
                     load ? "busy" : "idle", load ? (int)hogs : 0, cpus, counts[k], (int)w, (int)h, (int)steps);
            r.dtype = "bf16";
            r.isa = fx_isa_name(fx_kernels_isa(j.ctx->kernels));
            r.threads = j.tmax;
            r.seconds = s;
            r.peak = FX_PEAK_FMA_F32;
            fx_bench_extra(&r, "threads_min", j.tmin);
            fx_bench_extra(&r, "threads_max", j.tmax);
            if (k > 0 && best[load][0] > 0) fx_bench_extra(&r, "ratio_vs_1thread", s / best[load][0]);
            fx_bench_report(env, &r);
            flux_free(j.ctx);
        }
        if (load) stop_hogs((int)hogs, pids);
    }
    if (!rc)
        printf("busy: default vs 1 thread: idle %.2fx, %d busy %.2fx; default vs all %d: idle %.2fx, busy %.2fx "
               "(< 1: faster)\n",
               best[0][1] / best[0][0], (int)hogs, best[1][1] / best[1][0], all, best[0][1] / best[0][2],
               best[1][1] / best[1][2]);
    return rc;
}

FX_BENCH_COMMAND(busy, "busy --model DIR [--width W --height H --steps S --hogs N]", busy_main, NULL)
