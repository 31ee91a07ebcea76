/*
 * bench_dit.c — `flux-bench dit`: one transformer forward pass (the work of
 * one denoising step) on a model folder, at a given image size and number
 * of stacked sequences (B = 2 is a CFG step, N a batch of N images).
 *
 *   flux-bench dit --model DIR [--width 256 --height 256] [--batch 1]
 *                  [--cfg] [--refs R [--ref-width W --ref-height H]] [--sequential]
 *                  [--backend cpu|vulkan|auto [--device N]]
 *
 * --cfg doubles the sequences (the conditional and unconditional pass of
 * each image, as the pipeline stacks them); --refs appends R reference
 * images (default: the target's size) after the target tokens, as img2img
 * / multi-reference generation does. --sequential also times the same
 * sequences run one at a time (B forwards of a one-sequence run, as an
 * implementation without stacking would: two passes per CFG step, one run
 * per image of a batch) and reports the stacked speed-up; each timed call
 * runs both back to back (stacked, then one at a time), so the two see the
 * same machine state; the best of each is reported.
 *
 * --lora FILE[:SCALE] loads a LoRA / LyCORIS adapter (flux_lora_load, timed:
 * "lora load") and times the same forward without it (scale 0: no term
 * attached) and with it, back to back in each timed call (the adapter is
 * switched between them, untimed), reporting the runtime branch as a % of
 * the step; the switch itself (flux_lora_set_scale, no reload) is timed too,
 * and so is the first forward after it apart from the steady one that
 * follows (on a device the first uploads the terms' factors, which then
 * stay resident).
 * Because a whole step is long and a shared machine moves it by more than
 * the branch costs, --lora also measures the branch layer by layer: each
 * distinct linear view that carries terms (shape, rows of a 256-token-grid
 * step: text rows for the txt stream, image rows for img, all rows for the
 * single blocks) is timed without and with its terms, alternately, best of
 * --reps each, and the differences are summed over the views of one step
 * ("branch per step", also as a % of the measured step and of the linear
 * layers' time).
 *
 * The first forward after the load is timed apart (first_s, and its ratio to
 * the steady best): it is step 1 of a generation, which faults the mapped
 * weights in and pays any one-time work.
 * Inputs are random (text embeddings, noisy latents); the time does not
 * depend on the values. Reports seconds per forward, GFLOPS (flops from
 * fx_dit_run_flops) and % of the measured bf16 (or f32) peak. --backend
 * vulkan runs the forward on a Vulkan device (weights uploaded once, before
 * timing; each forward includes its uploads, per-block submits and the
 * velocity's download); % of peak is then the CPU's f32 FMA peak for a CPU
 * device (lavapipe runs on it) and blank for a GPU. The default backend is
 * the CPU (a CPU benchmark unless asked otherwise). The default
 * run (no command) measures nothing: it needs a model folder.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "src/model/ctx.h"
#include "src/dit/dit_internal.h"

typedef struct dit_problem {
    fx_dit_run *run;
    const float *x;
    float *v;
    float sigma;
    int repeat;       /* forwards per call: B for the one-at-a-time run */
    int64_t x_stride; /* floats between the inputs (outputs) of the repeats */
    int64_t v_stride;
    int failed;
} dit_problem;

static void run_forward(void *arg) {
    dit_problem *p = arg;
    for (int i = 0; i < p->repeat; i++)
        if (fx_dit_forward(p->run, p->x + i * p->x_stride, p->sigma, p->v + i * p->v_stride) != FLUX_OK)
            p->failed = 1;
}

/* --sequential: the stacked run and the one-at-a-time run back to back. */
typedef struct pair_problem {
    dit_problem *stacked, *one;
    double best_stacked, best_one;
} pair_problem;

static void run_pair(void *arg) {
    pair_problem *pp = arg;
    double t0 = fx_bench_now();
    run_forward(pp->stacked);
    double t1 = fx_bench_now();
    run_forward(pp->one);
    double t2 = fx_bench_now();
    if (pp->best_stacked == 0 || t1 - t0 < pp->best_stacked) pp->best_stacked = t1 - t0;
    if (pp->best_one == 0 || t2 - t1 < pp->best_one) pp->best_one = t2 - t1;
}

/* --lora: the forward without the adapter, then with it (twice: the first
 * forward after the switch also uploads the terms' factors to a device,
 * the second is a steady step). */
typedef struct lora_problem {
    dit_problem *p;
    flux_ctx *ctx;
    float scale;
    double best_plain, best_lora, best_switch, best_first; /* wall seconds */
    double cpu_plain, cpu_lora;                /* this process's CPU seconds */
    int failed;
} lora_problem;

static void keep_min(double *best, double v) {
    if (*best == 0 || v < *best) *best = v;
}

/* Wall and CPU time are both kept: on a shared machine the CPU seconds of
 * this process (best with --threads 1, where no thread spins waiting for
 * another) move much less than the wall time when other work competes. */
static void run_lora_pair(void *arg) {
    lora_problem *lp = arg;
    double c0 = fx_bench_self_cpu(), t0 = fx_bench_now();
    run_forward(lp->p);
    double t1 = fx_bench_now(), c1 = fx_bench_self_cpu();
    lp->failed |= flux_lora_set_scale(lp->ctx, 0, lp->scale) != FLUX_OK;
    double t2 = fx_bench_now();
    run_forward(lp->p);
    double c3 = fx_bench_self_cpu(), t3 = fx_bench_now();
    run_forward(lp->p);
    double t4 = fx_bench_now(), c4 = fx_bench_self_cpu();
    lp->failed |= flux_lora_set_scale(lp->ctx, 0, 0.0f) != FLUX_OK;
    keep_min(&lp->best_plain, t1 - t0);
    keep_min(&lp->best_first, t3 - t2);
    keep_min(&lp->best_lora, t4 - t3);
    keep_min(&lp->best_switch, t2 - t1);
    keep_min(&lp->cpu_plain, c1 - c0);
    keep_min(&lp->cpu_lora, c4 - c3);
}

/* Rows a view multiplies in one forward of a run (0: none per step, e.g.
 * context_embedder, projected once per run): the stream of a double block
 * from its weight names, all rows for the single blocks, the target tokens
 * for x_embedder / proj_out, 1 for the modulation vectors. */
static int64_t view_rows_per_step(const char *tensor, const fx_dit_run *r) {
    if (!strncmp(tensor, "single_transformer_blocks.", 26)) return r->R;
    if (!strncmp(tensor, "transformer_blocks.", 19)) {
        int txt = strstr(tensor, ".add_") || strstr(tensor, "to_add_out") || strstr(tensor, "ff_context.");
        return txt ? r->L * r->B : r->n_img * r->B;
    }
    if (!strcmp(tensor, "context_embedder.weight")) return 0;
    if (!strcmp(tensor, "x_embedder.weight") || !strcmp(tensor, "proj_out.weight")) return r->N * r->B;
    return 1;
}

/* One group of views with the same shape, rows and terms. */
typedef struct layer_group {
    fx_dit_linear *view;   /* the first one */
    int64_t m;
    int count;
    double plain, with;    /* best CPU seconds of this process */
} layer_group;

static int same_terms(const fx_weight *a, const fx_weight *b) {
    const fx_delta *x = a->delta, *y = b->delta;
    for (; x && y; x = x->next, y = y->next)
        if (x->kind != y->kind || x->rows != y->rows || x->a.n != y->a.n || x->a.k != y->a.k || x->b.n != y->b.n ||
            x->b.k != y->b.k || x->a.dtype != y->a.dtype)
            return 0;
    return !x && !y;
}

/* The branch layer by layer (see the top); returns the seconds per step it
 * adds, and the plain linear seconds in *linear. -1 on no memory. Times
 * are this process's CPU seconds (run with --threads 1 on a shared
 * machine: waiting for the CPU then costs nothing, and no thread spins). */
static double lora_layers(const fx_bench_env *env, flux_ctx *ctx, fx_dit *dit, const fx_dit_run *run, double *linear) {
    layer_group g[64];
    int ng = 0;
    for (int v = 0; v < dit->n_linears; v++) {
        fx_dit_linear *l = &dit->linears[v];
        const int64_t m = view_rows_per_step(l->tensor, run);
        if (!l->w->delta || !m) continue;
        int j = 0;
        while (j < ng && !(g[j].m == m && g[j].view->w->n == l->w->n && g[j].view->w->k == l->w->k &&
                           same_terms(g[j].view->w, l->w)))
            j++;
        if (j == ng) {
            if (ng == 64) continue;
            g[ng++] = (layer_group){l, m, 0, 0, 0};
        }
        g[j].count++;
    }
    double branch = 0;
    *linear = 0;
    for (int j = 0; j < ng; j++) {
        const fx_weight *w = g[j].view->w;
        fx_weight plain = *w;
        plain.delta = NULL;
        float *x = malloc((size_t)(g[j].m * w->k) * sizeof *x), *y = malloc((size_t)(g[j].m * w->n) * sizeof *y);
        if (!x || !y) {
            free(x), free(y);
            return -1;
        }
        for (int64_t i = 0; i < g[j].m * w->k; i++) x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
        for (int rep = 0; rep <= env->reps; rep++) { /* rep 0 warms up */
            double t0 = fx_bench_self_cpu();
            fx_linear(&ctx->kc, g[j].m, x, w->k, &plain, y, w->n, NULL);
            double t1 = fx_bench_self_cpu();
            fx_linear(&ctx->kc, g[j].m, x, w->k, w, y, w->n, NULL);
            double t2 = fx_bench_self_cpu();
            if (rep && (g[j].plain == 0 || t1 - t0 < g[j].plain)) g[j].plain = t1 - t0;
            if (rep && (g[j].with == 0 || t2 - t1 < g[j].with)) g[j].with = t2 - t1;
        }
        free(x), free(y);
        branch += g[j].count * (g[j].with - g[j].plain);
        *linear += g[j].count * g[j].plain;
        if (!env->json)
            printf("  lora layer %-58s x%-3d [%lld, %lld] m=%-5lld %8.2f ms %8.2f ms with the terms (%+.1f%%, CPU)\n",
                   g[j].view->tensor, g[j].count, (long long)w->n, (long long)w->k, (long long)g[j].m, 1e3 * g[j].plain,
                   1e3 * g[j].with, 100.0 * (g[j].with - g[j].plain) / g[j].plain);
    }
    return branch;
}

/* "FILE[:SCALE]" → file (into buf) and scale. */
static int split_lora(const char *arg, char *buf, size_t size, float *scale) {
    const char *colon = strrchr(arg, ':');
    char *end = NULL;
    *scale = 1.0f;
    size_t n = strlen(arg);
    if (colon && colon[1]) {
        double v = strtod(colon + 1, &end);
        if (!*end) *scale = (float)v, n = (size_t)(colon - arg);
    }
    if (n == 0 || n >= size) return -1;
    memcpy(buf, arg, n);
    buf[n] = '\0';
    return 0;
}

/* A run with the text and reference tokens set (random values). */
static flux_status make_run(flux_ctx *ctx, fx_dit *dit, const fx_dit_layout *lay, const float *emb,
                            const float *ref_tokens, fx_dit_run **out) {
    flux_status st = fx_dit_run_new(ctx, dit, lay, out);
    const float *texts[128];
    for (int b = 0; b < lay->batch && b < 128; b++) texts[b] = emb;
    if (!st) st = fx_dit_run_set_text(*out, texts);
    for (int k = 1; k < lay->n_images && !st; k++) st = fx_dit_run_set_image(*out, k, ref_tokens);
    return st;
}

static int dit_main(int argc, char **argv, const fx_bench_env *env) {
    int bad = 0;
    const char *model = fx_bench_arg_str(argc, argv, "--model", NULL);
    int64_t width = fx_bench_arg_int(argc, argv, "--width", 256, &bad);
    int64_t height = fx_bench_arg_int(argc, argv, "--height", 256, &bad);
    int64_t batch = fx_bench_arg_int(argc, argv, "--batch", 1, &bad);
    int64_t refs = fx_bench_arg_int(argc, argv, "--refs", 0, &bad);
    int64_t ref_w = fx_bench_arg_int(argc, argv, "--ref-width", width, &bad);
    int64_t ref_h = fx_bench_arg_int(argc, argv, "--ref-height", height, &bad);
    const int cfg = fx_bench_arg_flag(argc, argv, "--cfg"), sequential = fx_bench_arg_flag(argc, argv, "--sequential");
    const char *backend = fx_bench_arg_str(argc, argv, "--backend", "cpu");
    int64_t device = fx_bench_arg_int(argc, argv, "--device", -1, &bad);
    flux_backend be = !strcmp(backend, "vulkan") ? FLUX_BACKEND_VULKAN
                      : !strcmp(backend, "auto") ? FLUX_BACKEND_AUTO
                                                 : FLUX_BACKEND_CPU;
    if (strcmp(backend, "vulkan") && strcmp(backend, "auto") && strcmp(backend, "cpu")) bad = 1;
    const char *lora_arg = fx_bench_arg_str(argc, argv, "--lora", NULL);
    char lora_file[4096];
    float lora_scale = 1.0f;
    if (lora_arg && (split_lora(lora_arg, lora_file, sizeof lora_file, &lora_scale) || sequential)) bad = 1;
    if (bad || !model || width < 16 || height < 16 || width % 16 || height % 16 || batch < 1 || batch > 64 || refs < 0 ||
        refs > FLUX_MAX_REFS || ref_w < 16 || ref_h < 16 || ref_w % 16 || ref_h % 16 || ref_w > 4096 || ref_h > 4096) {
        fprintf(stderr, "usage: flux-bench dit --model DIR [--width W --height H (multiples of 16)] [--batch B] [--cfg]\n"
                        "                      [--refs R (0..16) [--ref-width W --ref-height H]] [--sequential | --lora FILE[:SCALE]]\n"
                        "                      [--backend cpu|vulkan|auto [--device N]]\n");
        return -1;
    }
    const int64_t seqs = batch * (cfg ? 2 : 1); /* stacked sequences */
    flux_options o;
    fx_bench_flux_options(env, &o);
    o.backend = be;
    o.device = (int)device;
    flux_ctx *ctx = flux_new(&o);
    fx_dit *dit = NULL;
    fx_dit_run *run = NULL;
    fx_dit_run *one = NULL;
    float *emb = NULL, *x = NULL, *v = NULL, *ref_tok = NULL;
    int rc = -1;
    if (!ctx) return -1;
    if (flux_load(ctx, model, NULL) != FLUX_OK || fx_dit_get(ctx, &dit) != FLUX_OK) goto out;
    double t_load = 0;
    flux_lora_info lora = {0};
    if (lora_arg) { /* loaded at scale 0: attached only while timed */
        double t0 = fx_bench_now();
        if (flux_lora_load(ctx, lora_file, 0.0f) != FLUX_OK) goto out;
        t_load = fx_bench_now() - t0;
        flux_lora_get_info(ctx, 0, &lora);
    }
    const fx_dit_config *c = fx_dit_cfg(dit);
    fx_dit_layout lay = {.batch = (int)seqs, .text_len = FLUX_TEXT_TOKENS, .n_images = 1 + (int)refs,
                         .grid_h = {(int)height / 16}, .grid_w = {(int)width / 16}};
    for (int k = 1; k <= refs; k++) lay.grid_h[k] = (int)ref_h / 16, lay.grid_w[k] = (int)ref_w / 16;
    int64_t n = (int64_t)lay.grid_h[0] * lay.grid_w[0], n_ref = (ref_h / 16) * (ref_w / 16);
    emb = malloc((size_t)FLUX_TEXT_TOKENS * c->text_dim * sizeof(float));
    x = malloc((size_t)(seqs * n * c->in_channels) * sizeof(float));
    v = malloc((size_t)(seqs * n * c->out_channels) * sizeof(float));
    ref_tok = malloc((size_t)(n_ref * c->in_channels) * sizeof(float));
    if (!emb || !x || !v || !ref_tok) goto out;
    uint64_t s = 88172645463325252ull;
    for (int64_t i = 0; i < (int64_t)FLUX_TEXT_TOKENS * c->text_dim; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        emb[i] = (float)((double)(s >> 11) * 0x1p-53 - 0.5);
    }
    const int64_t n_emb = (int64_t)FLUX_TEXT_TOKENS * c->text_dim;
    for (int64_t i = 0; i < seqs * n * c->in_channels; i++) x[i] = emb[i % n_emb] * 2.0f;
    for (int64_t i = 0; i < n_ref * c->in_channels; i++) ref_tok[i] = emb[(i * 7) % n_emb] * 2.0f;
    if (make_run(ctx, dit, &lay, emb, ref_tok, &run) != FLUX_OK) goto out;
    dit_problem p = {run, x, v, 0.9f, 1, 0, 0, 0};
    /* the first forward after the load, apart: it faults the mapped
     * weights in and pays any one-time work (step 1 of a generation) */
    double t_first = fx_bench_now();
    run_forward(&p);
    t_first = fx_bench_now() - t_first;
    double t, t_seq = 0;
    lora_problem lp = {&p, ctx, lora_scale, 0, 0, 0, 0, 0, 0, 0};
    double layers_branch = 0, layers_linear = 0;
    if (lora_arg) {
        fx_bench_time(env, run_lora_pair, &lp);
        t = lp.best_plain;
        if (lp.failed || flux_lora_set_scale(ctx, 0, lora_scale) != FLUX_OK) goto out;
        layers_branch = lora_layers(env, ctx, dit, run, &layers_linear);
        if (layers_branch < 0 || flux_lora_set_scale(ctx, 0, 0.0f) != FLUX_OK) goto out;
    } else if (sequential) { /* the same sequences one at a time, in the same timed calls */
        fx_dit_layout lay1 = lay;
        lay1.batch = 1;
        if (make_run(ctx, dit, &lay1, emb, ref_tok, &one) != FLUX_OK) goto out;
        dit_problem q = {one, x, v, 0.9f, (int)seqs, n * c->in_channels, n * c->out_channels, 0};
        pair_problem pp = {&p, &q, 0, 0};
        fx_bench_time(env, run_pair, &pp);
        t = pp.best_stacked, t_seq = pp.best_one;
        if (q.failed) goto out;
    } else {
        t = fx_bench_time(env, run_forward, &p);
    }
    if (p.failed) goto out;
    fx_bench_result r;
    memset(&r, 0, sizeof r);
    r.op = "dit";
    snprintf(r.shape, sizeof r.shape, "%lldx%lld B=%lld%s refs=%lld tokens=%lld d=%d blocks=%d+%d", (long long)width,
             (long long)height, (long long)seqs, cfg ? " (CFG)" : "", (long long)refs,
             (long long)(FLUX_TEXT_TOKENS + n + refs * n_ref), c->hidden, c->double_blocks, c->single_blocks);
    snprintf(r.shape_json, sizeof r.shape_json,
             "\"width\":%lld,\"height\":%lld,\"batch\":%lld,\"cfg\":%d,\"refs\":%lld,\"ref_width\":%lld,"
             "\"ref_height\":%lld,\"hidden\":%d",
             (long long)width, (long long)height, (long long)batch, cfg, (long long)refs, (long long)ref_w,
             (long long)ref_h, c->hidden);
    r.dtype = env->force_f32 ? "f32" : "bf16";
    r.isa = fx_bench_isa_label(ctx->kernels);
    r.threads = ctx->threads;
    r.seconds = t;
    r.flops = fx_dit_run_flops(run);
    r.peak = fx_bench_peak_of(ctx->kernels, 1);
    if (!strcmp(fx_ops_backend(ctx->ops), "vulkan")) { /* f32 math on the device */
        r.isa = "vulkan";
        r.dtype = "bf16w-f32";
        r.peak = strstr(fx_ops_name(ctx->ops), "(CPU)") ? FX_PEAK_FMA_F32 : FX_PEAK_KINDS;
        if (!env->json) printf("dit: on %s\n", fx_ops_name(ctx->ops));
    }
    fx_bench_extra(&r, "first_s", t_first);
    fx_bench_extra(&r, "first_over_steady", t_first / t);
    if (sequential) {
        fx_bench_extra(&r, "sequential_s", t_seq);
        fx_bench_extra(&r, "stacked_speedup", t_seq / t);
    }
    if (lora_arg) {
        fx_bench_extra(&r, "lora_s", lp.best_lora);
        fx_bench_extra(&r, "lora_pct_of_step", 100.0 * (lp.best_lora - t) / t);
        fx_bench_extra(&r, "lora_load_s", t_load);
        fx_bench_extra(&r, "lora_switch_s", lp.best_switch);
        fx_bench_extra(&r, "lora_first_s", lp.best_first);
        fx_bench_extra(&r, "cpu_s", lp.cpu_plain);
        fx_bench_extra(&r, "lora_cpu_s", lp.cpu_lora);
        fx_bench_extra(&r, "lora_cpu_pct_of_step", 100.0 * (lp.cpu_lora - lp.cpu_plain) / lp.cpu_plain);
        fx_bench_extra(&r, "lora_layers_s", layers_branch);
        fx_bench_extra(&r, "linear_layers_s", layers_linear);
        fx_bench_extra(&r, "lora_layers_pct_of_step", 100.0 * layers_branch / lp.cpu_plain);
    }
    fx_bench_report(env, &r);
    if (lora_arg && !env->json)
        printf("dit: %s (%d modules, %s, %s names, scale %g): step %.3f s without, %.3f s with (wall: %+.1f%%); "
               "CPU %.3f s without, %.3f s with (%+.1f%%); load %.3f s, switch %.2f ms, first step after it %.3f s\n",
               lora.name, lora.modules, lora.kinds, lora.naming, (double)lora_scale, t, lp.best_lora,
               100.0 * (lp.best_lora - t) / t, lp.cpu_plain, lp.cpu_lora,
               100.0 * (lp.cpu_lora - lp.cpu_plain) / lp.cpu_plain, t_load, 1e3 * lp.best_switch, lp.best_first);
    if (lora_arg && !env->json)
        printf("dit: layer by layer (CPU seconds): the branch adds %.3f s per step to %.3f s of linear layers "
               "(%+.1f%%): %.1f%% of the step's %.3f CPU seconds\n",
               layers_branch, layers_linear, 100.0 * layers_branch / layers_linear, 100.0 * layers_branch / lp.cpu_plain,
               lp.cpu_plain);
    if (sequential && !env->json)
        printf("dit: %lld sequence(s) stacked %.3f s, one at a time %.3f s: stacked is %.2fx faster\n", (long long)seqs,
               t, t_seq, t_seq / t);
    rc = 0;
out:
    if (rc) fprintf(stderr, "flux-bench dit: %s\n", flux_error(ctx)[0] ? flux_error(ctx) : "out of memory");
    fx_dit_run_free(run);
    fx_dit_run_free(one);
    free(emb), free(x), free(v), free(ref_tok);
    flux_free(ctx);
    return rc;
}

FX_BENCH_COMMAND(dit,
                 "dit --model DIR [--width W --height H --batch B --cfg --refs R --ref-width W --ref-height H "
                 "--sequential | --lora FILE[:SCALE], --backend cpu|vulkan|auto --device N]   one transformer forward "
                 "(a denoising step)",
                 dit_main, NULL)
