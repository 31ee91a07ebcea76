/*
 * bench_lora.c — `flux-bench lora`: what LoRA adapters cost outside the
 * denoising steps (the runtime branch itself: `flux-bench dit --lora`).
 *
 *   flux-bench lora --model DIR --lora FILE [--lora2 FILE2]
 *
 * Times, on a loaded model: loading the adapter (flux_lora_load: header,
 * key resolution, views into the mapped file, f32 products for factored
 * LoKr / LoHa), best of --reps loads after the first (warm page cache);
 * switching its strength (flux_lora_set_scale: re-attaching the terms, no
 * file access); and with --lora2 switching between two adapters the way
 * the REPL's "!lora off" + "!lora FILE2" does (remove, load), the model
 * never reloaded.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "flux.h"

static int lora_main(int argc, char **argv, const fx_bench_env *env) {
    const char *model = fx_bench_arg_str(argc, argv, "--model", NULL);
    const char *file = fx_bench_arg_str(argc, argv, "--lora", NULL);
    const char *file2 = fx_bench_arg_str(argc, argv, "--lora2", NULL);
    if (!model || !file) {
        fprintf(stderr, "usage: flux-bench lora --model DIR --lora FILE [--lora2 FILE2]\n");
        return -1;
    }
    flux_options o;
    fx_bench_flux_options(env, &o);
    flux_ctx *ctx = flux_new(&o);
    if (!ctx) return -1;
    int rc = -1;
    double t0 = fx_bench_now();
    if (flux_load(ctx, model, NULL) != FLUX_OK) goto out;
    const double t_model = fx_bench_now() - t0;
    double first = 0, best = 0, best_scale = 0, best_swap = 0;
    for (int rep = 0; rep <= env->reps; rep++) {
        flux_lora_clear(ctx);
        t0 = fx_bench_now();
        if (flux_lora_load(ctx, file, 1.0f) != FLUX_OK) goto out;
        double t = fx_bench_now() - t0;
        if (!rep) first = t;
        else if (!best || t < best) best = t;
        t0 = fx_bench_now();
        if (flux_lora_set_scale(ctx, 0, 0.5f) != FLUX_OK) goto out;
        t = fx_bench_now() - t0;
        if (!best_scale || t < best_scale) best_scale = t;
        if (file2) {
            t0 = fx_bench_now();
            flux_lora_clear(ctx);
            if (flux_lora_load(ctx, file2, 1.0f) != FLUX_OK) goto out;
            t = fx_bench_now() - t0;
            if (!best_swap || t < best_swap) best_swap = t;
        }
    }
    flux_lora_info info;
    struct stat st;
    flux_lora_clear(ctx);
    if (flux_lora_load(ctx, file, 1.0f) != FLUX_OK || flux_lora_get_info(ctx, 0, &info) != FLUX_OK) goto out;
    const double mb = stat(file, &st) == 0 ? (double)st.st_size / 1e6 : 0;
    if (env->json)
        printf("{\"op\":\"lora\",\"file_mb\":%.1f,\"modules\":%d,\"model_load_s\":%.6f,\"lora_load_first_s\":%.6f,"
               "\"lora_load_s\":%.6f,\"set_scale_s\":%.6f,\"swap_s\":%.6f}\n",
               mb, info.modules, t_model, first, best, best_scale, best_swap);
    else
        printf("lora: %s (%.1f MB, %d modules, %s): model load %.3f s; adapter load %.4f s first, %.4f s warm (best of "
               "%d); set scale %.3f ms%s",
               info.name, mb, info.modules, info.kinds, t_model, first, best, env->reps, 1e3 * best_scale,
               file2 ? "" : "\n");
    if (file2 && !env->json) printf("; swap to %s %.4f s\n", file2, best_swap);
    rc = 0;
out:
    if (rc) fprintf(stderr, "flux-bench lora: %s\n", flux_error(ctx));
    flux_free(ctx);
    return rc;
}

FX_BENCH_COMMAND(lora, "lora --model DIR --lora FILE [--lora2 FILE2]   adapter load / rescale / swap times",
                 lora_main, NULL)
