/*
 * bench_text.c — `flux-bench text`: the Qwen3 text encoder on a model
 * folder (klein: 512 tokens through layers 0..26).
 *
 *   flux-bench text --model DIR [--tokens 512] [--prompt TEXT]
 *
 * The tokens are the prompt's chat-template encoding padded to --tokens
 * (the time does not depend on the ids; padding rows cost the same as real
 * ones). The first encode (untimed here, reported as first_s) maps the
 * weights and faults them in; the timed runs are warm. Reports seconds,
 * GFLOPS (fx_qwen3_flops: 2·params·tokens for the linears plus
 * 4·(S(S+1)/2)·head_dim per query head for causal attention), % of the
 * measured peak, and as extras the process's peak RSS (ru_maxrss), its RSS
 * after the runs and after flux_release_text_encoder (MB).
 * The default run measures nothing: it needs a model folder.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"
#include "src/model/ctx.h"
#include "src/model/model.h"
#include "src/text/qwen3.h"
#include "src/pipeline/text_encode.h"
#include "src/text/tokenizer.h"

typedef struct text_problem {
    flux_ctx *ctx;
    const int32_t *ids;
    const uint8_t *mask;
    int seq;
    float *out;
    int failed;
} text_problem;

static void run_encode(void *arg) {
    text_problem *p = arg;
    if (fx_text_encode_ids(p->ctx, p->ids, p->mask, p->seq, p->out) != FLUX_OK) p->failed = 1;
}

static double peak_rss_mb(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024.0 : 0.0;
}

/* Resident set now (/proc/self/statm), MB; 0 if unknown. */
static double rss_mb(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0.0;
    int ok = fscanf(f, "%ld %ld", &pages, &resident) == 2;
    fclose(f);
    return ok ? (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0) : 0.0;
}

static int text_main(int argc, char **argv, const fx_bench_env *env) {
    int bad = 0;
    const char *model = fx_bench_arg_str(argc, argv, "--model", NULL);
    const char *prompt = fx_bench_arg_str(argc, argv, "--prompt", "a cat on a skateboard");
    int64_t seq = fx_bench_arg_int(argc, argv, "--tokens", FLUX_TEXT_TOKENS, &bad);
    if (bad || !model || seq < 1 || seq > 40960) {
        fprintf(stderr, "usage: flux-bench text --model DIR [--tokens N (default 512)] [--prompt TEXT]\n");
        return -1;
    }
    flux_options o;
    fx_bench_flux_options(env, &o);
    flux_ctx *ctx = flux_new(&o);
    int32_t *ids = malloc((size_t)seq * sizeof *ids);
    uint8_t *mask = malloc((size_t)seq);
    float *out = NULL;
    fx_tokenizer *tok = NULL;
    int rc = -1, n_real = 0;
    if (!ctx || !ids || !mask) goto out;
    if (flux_load(ctx, model, NULL) != FLUX_OK || fx_ctx_tokenizer(ctx, &tok) != FLUX_OK) goto out;
    if (fx_tokenizer_encode_prompt(tok, prompt, (int)seq, ids, mask, &n_real, &ctx->err) != FLUX_OK) goto out;
    const fx_qwen3_config *c = &ctx->model->qwen3;
    out = malloc((size_t)seq * FX_KLEIN_N_TEXT_STATES * (size_t)c->hidden * sizeof(float));
    if (!out) goto out;
    text_problem p = {ctx, ids, mask, (int)seq, out, 0};
    double t0 = fx_bench_now();
    run_encode(&p); /* loads the encoder, maps and faults in the weights */
    double first = fx_bench_now() - t0;
    if (p.failed) goto out;
    double t = fx_bench_time(env, run_encode, &p);
    if (p.failed) goto out;
    fx_bench_result r;
    memset(&r, 0, sizeof r);
    r.op = "text";
    snprintf(r.shape, sizeof r.shape, "tokens=%lld hidden=%d heads=%d/%d ff=%d layers=%d", (long long)seq, c->hidden,
             c->heads, c->kv_heads, c->intermediate, c->layers_used);
    snprintf(r.shape_json, sizeof r.shape_json, "\"tokens\":%lld,\"hidden\":%d,\"layers\":%d", (long long)seq,
             c->hidden, c->layers_used);
    r.dtype = env->force_f32 ? "f32" : "bf16";
    r.isa = fx_bench_isa_label(ctx->kernels);
    r.threads = ctx->threads;
    r.seconds = t;
    r.flops = fx_qwen3_flops(ctx->text_encoder, (int)seq);
    r.peak = fx_bench_peak_of(ctx->kernels, 1);
    fx_bench_extra(&r, "first_s", first);
    fx_bench_extra(&r, "peak_rss_mb", peak_rss_mb());
    fx_bench_extra(&r, "rss_mb", rss_mb());
    flux_release_text_encoder(ctx);
    fx_bench_extra(&r, "released_rss_mb", rss_mb());
    fx_bench_report(env, &r);
    rc = 0;
out:
    if (rc) fprintf(stderr, "flux-bench text: %s\n", ctx && flux_error(ctx)[0] ? flux_error(ctx) : "out of memory");
    free(ids), free(mask), free(out);
    flux_free(ctx);
    return rc;
}

FX_BENCH_COMMAND(text, "text --model DIR [--tokens N --prompt TEXT]   Qwen3 text encoder (klein: 512 tokens)",
                 text_main, NULL)
