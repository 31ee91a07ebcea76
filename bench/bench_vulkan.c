/*
 * bench_vulkan.c — the `vulkan` command (built with VULKAN=1): the Vulkan
 * backend's GEMM and attention on one shape.
 *
 *   flux-bench vulkan gemm --m M --n N --k K [--dtype bf16|f32|f16]
 *                          [--variant auto|reg|tiled] [--device N]
 *   flux-bench vulkan attn --sq S --sk S --heads H [--kv-heads G] [--d D]
 *                          [--causal] [--device N]
 *
 * One timed run = record the operation, submit, wait (fx_vk_sync), so the
 * submit and fence latency is included. Without --device the best device is
 * used, a CPU device (lavapipe) included. % of peak is the CPU's measured
 * f32 FMA peak for CPU devices (lavapipe runs on it) and blank for GPUs.
 * The CPU kernels on the same shape are reported as cpu_gflops.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "src/vulkan/vk.h"

typedef struct vk_run {
    fx_vk *vk;
    int attn;
    int64_t m;
    fx_vk_mat x, y;
    fx_vk_weight w;
    fx_vk_attn_args a;
    int failed;
    char msg[FX_ERR_MSG_MAX];
} vk_run;

static void vk_once(void *arg) {
    vk_run *r = arg;
    if (r->failed) return;
    fx_err err = {0};
    flux_status st = r->attn ? fx_vk_attention(r->vk, &r->a, &err)
                             : fx_vk_linear(r->vk, r->m, r->x, &r->w, r->y, NULL, &err);
    if (st == FLUX_OK) st = fx_vk_sync(r->vk, &err);
    if (st != FLUX_OK) r->failed = 1, snprintf(r->msg, sizeof r->msg, "%s", err.msg);
}

typedef struct cpu_run {
    fx_kctx kc;
    int attn;
    int64_t m;
    float *x, *y;
    fx_weight w;
    fx_attn_args a;
} cpu_run;

static void cpu_once(void *arg) {
    cpu_run *r = arg;
    if (r->attn) fx_attention(&r->kc, &r->a, NULL);
    else fx_linear(&r->kc, r->m, r->x, r->w.k, &r->w, r->y, r->w.n, NULL);
}

static fx_vk_buf *filled(fx_vk *vk, size_t n, const char *what, fx_err *err) {
    float *h = malloc(n * 4);
    if (!h) return NULL;
    uint64_t s = 0x9E3779B97F4A7C15ull + n;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        h[i] = (float)((double)(s >> 11) * (2.0 / 9007199254740992.0) - 1.0);
    }
    fx_vk_buf *b = NULL;
    if (fx_vk_buf_new(vk, n * 4, what, &b, err) == FLUX_OK && fx_vk_upload(vk, b, 0, h, n * 4, err) != FLUX_OK) {
        fx_vk_buf_free(vk, b);
        b = NULL;
    }
    free(h);
    return b;
}

static int vulkan_main(int argc, char **argv, const fx_bench_env *env) {
    const char *what = argc > 1 ? argv[1] : "";
    int attn = !strcmp(what, "attn");
    if (!attn && strcmp(what, "gemm")) {
        fprintf(stderr, "usage: flux-bench vulkan gemm|attn [options] (see bench_vulkan.c)\n");
        return -1;
    }
    int bad = 0;
    fx_vk_opts o;
    fx_vk_opts_init(&o);
    o.device = (int)fx_bench_arg_int(argc, argv, "--device", FX_VK_DEVICE_ANY, &bad);
    const char *variant = fx_bench_arg_str(argc, argv, "--variant", "auto");
    o.gemm = !strcmp(variant, "reg") ? FX_VK_GEMM_REG : !strcmp(variant, "tiled") ? FX_VK_GEMM_TILED : FX_VK_GEMM_AUTO;
    int64_t m = fx_bench_arg_int(argc, argv, "--m", 256, &bad), n = fx_bench_arg_int(argc, argv, "--n", 512, &bad);
    int64_t k = fx_bench_arg_int(argc, argv, "--k", 512, &bad);
    int64_t sq = fx_bench_arg_int(argc, argv, "--sq", 256, &bad), sk = fx_bench_arg_int(argc, argv, "--sk", 256, &bad);
    int heads = (int)fx_bench_arg_int(argc, argv, "--heads", 4, &bad);
    int kvh = (int)fx_bench_arg_int(argc, argv, "--kv-heads", heads, &bad);
    int d = (int)fx_bench_arg_int(argc, argv, "--d", 128, &bad);
    const char *ds = fx_bench_arg_str(argc, argv, "--dtype", "bf16");
    fx_dtype dt = !strcmp(ds, "f32") ? FX_DTYPE_F32 : !strcmp(ds, "f16") ? FX_DTYPE_F16 : FX_DTYPE_BF16;
    if (bad || m < 1 || n < 1 || k < 1 || sq < 1 || sk < 1 || heads < 1 || kvh < 1 || d < 2) return -1;

    fx_err err = {0};
    vk_run r = {.attn = attn, .m = m};
    if (fx_vk_open(&o, &r.vk, &err) != FLUX_OK) {
        fprintf(stderr, "flux-bench vulkan: %s\n", err.msg);
        return -1;
    }
    const fx_vk_device_info *info = fx_vk_device(r.vk);
    cpu_run c = {.attn = attn, .m = m};
    fx_vk_buf *bufs[4] = {0};
    void *host_w = NULL;
    int rc = -1;
    double flops;
    fx_bench_result res = {.op = attn ? "vk-attn" : "vk-gemm", .threads = env->threads,
                           .peak = info->type == FX_VK_DEV_CPU ? FX_PEAK_FMA_F32 : FX_PEAK_KINDS};
    char isa[96];
    snprintf(isa, sizeof isa, "vulkan %.40s", info->name);
    res.isa = isa;
    if (!attn) {
        size_t es = dt == FX_DTYPE_F32 ? 4 : 2;
        host_w = calloc((size_t)(n * k), es);
        c.w = (fx_weight){.data = host_w, .dtype = dt, .n = n, .k = k, .ld = k};
        if (!host_w || fx_vk_weight_upload(r.vk, &c.w, "bench weight", &r.w, &err) != FLUX_OK) goto out;
        bufs[0] = filled(r.vk, (size_t)(m * k), "x", &err);
        bufs[1] = filled(r.vk, (size_t)(m * n), "y", &err);
        if (!bufs[0] || !bufs[1]) goto out;
        r.x = (fx_vk_mat){bufs[0], 0, k}, r.y = (fx_vk_mat){bufs[1], 0, n};
        flops = 2.0 * m * n * k;
        snprintf(res.shape, sizeof res.shape, "m=%lld n=%lld k=%lld %s", (long long)m, (long long)n, (long long)k,
                 variant);
        snprintf(res.shape_json, sizeof res.shape_json, "\"m\":%lld,\"n\":%lld,\"k\":%lld,\"variant\":\"%s\"",
                 (long long)m, (long long)n, (long long)k, variant);
        res.dtype = fx_dtype_name(dt);
        c.x = calloc((size_t)(m * k), 4), c.y = calloc((size_t)(m * n), 4);
    } else {
        const int64_t qw = (int64_t)heads * d, kw = (int64_t)kvh * d;
        bufs[0] = filled(r.vk, (size_t)(sq * qw), "q", &err);
        bufs[1] = filled(r.vk, (size_t)(sk * kw), "k", &err);
        bufs[2] = filled(r.vk, (size_t)(sk * kw), "v", &err);
        bufs[3] = filled(r.vk, (size_t)(sq * qw), "o", &err);
        if (!bufs[0] || !bufs[1] || !bufs[2] || !bufs[3]) goto out;
        int causal = fx_bench_arg_flag(argc, argv, "--causal");
        r.a = (fx_vk_attn_args){.sq = sq, .sk = sk, .hq = heads, .hkv = kvh, .d = d, .q = {bufs[0], 0, qw},
                                .k = {bufs[1], 0, kw}, .v = {bufs[2], 0, kw}, .o = {bufs[3], 0, qw},
                                .scale = 1.0f / sqrtf((float)d), .causal = causal};
        flops = 4.0 * sq * sk * heads * d * (causal ? 0.5 : 1.0);
        snprintf(res.shape, sizeof res.shape, "sq=%lld sk=%lld h=%d/%d d=%d%s", (long long)sq, (long long)sk, heads,
                 kvh, d, causal ? " causal" : "");
        snprintf(res.shape_json, sizeof res.shape_json, "\"sq\":%lld,\"sk\":%lld,\"heads\":%d,\"kv_heads\":%d,\"d\":%d",
                 (long long)sq, (long long)sk, heads, kvh, d);
        res.dtype = "f32";
        float *q = calloc((size_t)(sq * qw), 4), *kk = calloc((size_t)(sk * kw), 4), *v = calloc((size_t)(sk * kw), 4);
        c.x = q, c.y = calloc((size_t)(sq * qw), 4);
        c.a = (fx_attn_args){sq, sk, heads, kvh, d, q, qw, kk, kw, v, kw, c.y, qw, r.a.scale, causal, 0, NULL};
        host_w = kk, c.w.data = v; /* freed below */
    }
    res.seconds = fx_bench_time(env, vk_once, &r);
    if (r.failed) {
        fprintf(stderr, "flux-bench vulkan: %s\n", r.msg);
        goto out;
    }
    res.flops = flops;
    if (fx_bench_kctx(env, -1, env->force_f32, &c.kc) == 0) {
        double t = fx_bench_time(env, cpu_once, &c);
        fx_bench_extra(&res, "cpu_gflops", flops / t * 1e-9);
        fx_bench_kctx_free(&c.kc);
    }
    fx_bench_report(env, &res);
    rc = 0;
out:
    if (rc && err.msg[0]) fprintf(stderr, "flux-bench vulkan: %s\n", err.msg);
    for (int i = 0; i < 4; i++) fx_vk_buf_free(r.vk, bufs[i]);
    if (!attn) fx_vk_weight_free(r.vk, &r.w);
    else free((void *)c.w.data), free(c.x);
    if (!attn) free(c.x);
    free(c.y);
    free(host_w);
    fx_vk_close(r.vk);
    return rc;
}

FX_BENCH_COMMAND(vulkan, "vulkan gemm|attn [--m --n --k --dtype --variant reg|tiled | --sq --sk --heads --d --causal] [--device N]",
                 vulkan_main, NULL)
