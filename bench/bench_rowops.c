/*
 * bench_rowops.c — the `rowops` and `conv2d` commands: the row-op family
 * (memory-bound: reported as GB/s moved, extra "gbps") and the VAE conv2d
 * (compute-bound: GFLOPS and % of peak like gemm).
 *
 *   flux-bench rowops --op OP --rows R --cols C
 *       OP: rmsnorm layernorm silu swiglu gated_add softmax qk_norm_rope
 *           groupnorm (rows = pixels, cols = channels, 32 groups, SiLU)
 *           bf16_to_f32 f32_to_bf16
 *   flux-bench conv2d --h H --w W --cin C --cout C [--k 3] [--stride S]
 *                     [--upsample] [--dtype bf16|f32]
 *       3×3: padding 1 (stride 1) or right/bottom 1 (stride 2, the VAE
 *       downsample); 1×1: none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static void fill(float *p, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = (float)((double)(s >> 11) * (2.0 / 9007199254740992.0) - 1.0);
    }
}

/* ---- rowops ---------------------------------------------------------------- */

typedef struct row_problem {
    const char *op;
    int64_t rows, cols;
    float *x, *y, *p1, *p2;
    uint16_t *h;
    fx_rope_table rope;
    fx_kctx kc;
} row_problem;

static void run_row(void *arg) {
    row_problem *p = arg;
    const char *op = p->op;
    int64_t r = p->rows, c = p->cols;
    if (!strcmp(op, "rmsnorm")) fx_rmsnorm(&p->kc, r, c, p->x, c, p->p1, 1e-6f, p->y, c);
    else if (!strcmp(op, "layernorm"))
        fx_layernorm_modulate(&p->kc, r, c, p->x, c, p->p1, p->p2, 1e-6f, p->y, c);
    else if (!strcmp(op, "silu")) fx_silu(&p->kc, r * c, p->y);
    else if (!strcmp(op, "swiglu")) fx_swiglu(&p->kc, r, c, p->x, c, p->y, c, p->y, c);
    else if (!strcmp(op, "gated_add")) fx_gated_add(&p->kc, r, c, p->y, c, p->p1, p->x, c);
    else if (!strcmp(op, "softmax")) fx_softmax_rows(&p->kc, r, c, p->y, c);
    else if (!strcmp(op, "qk_norm_rope")) fx_qk_norm_rope(&p->kc, p->y, c, r, (int)(c / 128), 128, p->p1, 1e-6f, &p->rope);
    else if (!strcmp(op, "groupnorm")) fx_groupnorm(&p->kc, r, (int)c, 32, p->x, p->p1, p->p2, 1e-6f, 1, p->y);
    else if (!strcmp(op, "bf16_to_f32")) fx_bf16_to_f32(&p->kc, r * c, p->h, p->y);
    else if (!strcmp(op, "f32_to_bf16")) fx_f32_to_bf16(&p->kc, r * c, p->x, p->h);
}

/* bytes read + written per element */
static double row_bytes_per_elem(const char *op) {
    if (!strcmp(op, "silu") || !strcmp(op, "softmax") || !strcmp(op, "qk_norm_rope")) return 8;
    if (!strcmp(op, "swiglu") || !strcmp(op, "gated_add")) return 12;
    if (!strcmp(op, "bf16_to_f32") || !strcmp(op, "f32_to_bf16")) return 6;
    if (!strcmp(op, "groupnorm")) return 12; /* stats pass + apply pass */
    return 8;
}

static int rowops_one(const fx_bench_env *env, const char *op, int64_t rows, int64_t cols) {
    static const char *const ops[] = {"rmsnorm", "layernorm", "silu", "swiglu", "gated_add", "softmax",
                                      "qk_norm_rope", "groupnorm", "bf16_to_f32", "f32_to_bf16"};
    int known = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) known |= !strcmp(op, ops[i]);
    if (!known || rows < 1 || cols < 1 || (!strcmp(op, "qk_norm_rope") && cols % 128) ||
        (!strcmp(op, "groupnorm") && cols % 32)) {
        fprintf(stderr, "flux-bench rowops: bad --op/--rows/--cols (%s %lld x %lld)\n", op,
                (long long)rows, (long long)cols);
        return -1;
    }
    row_problem p = {.op = op, .rows = rows, .cols = cols};
    size_t n = (size_t)(rows * cols);
    p.x = malloc(n * sizeof(float)), p.y = malloc(n * sizeof(float));
    p.p1 = malloc((size_t)cols * sizeof(float)), p.p2 = malloc((size_t)cols * sizeof(float));
    p.h = malloc(n * sizeof(uint16_t));
    if (!p.x || !p.y || !p.p1 || !p.p2 || !p.h) {
        fprintf(stderr, "flux-bench rowops: out of memory\n");
        free(p.x), free(p.y), free(p.p1), free(p.p2), free(p.h);
        return -1;
    }
    fill(p.x, n, 1), fill(p.y, n, 2), fill(p.p1, (size_t)cols, 3), fill(p.p2, (size_t)cols, 4);
    for (size_t i = 0; i < n; i++) p.h[i] = fx_f32_to_bf16_bits(p.x[i]);
    int rc = 0;
    if (!strcmp(op, "qk_norm_rope")) { /* FLUX 4-axis table over rows positions */
        int32_t *pos = calloc((size_t)(4 * rows), sizeof *pos);
        int dims[4] = {32, 32, 32, 32};
        for (int64_t i = 0; pos && i < rows; i++) pos[rows + i] = (int32_t)(i / 64), pos[2 * rows + i] = (int32_t)(i % 64);
        fx_err err = {0};
        if (!pos || fx_rope_table_init(&p.rope, pos, rows, 4, dims, 2000.0, FX_ROPE_INTERLEAVED, &err)) rc = -1;
        free(pos);
    }
    if (!rc && fx_bench_kctx(env, -1, env->force_f32, &p.kc)) rc = -1;
    if (!rc) {
        fx_bench_result r = {0};
        r.op = "rowops";
        snprintf(r.shape, sizeof r.shape, "%s %lldx%lld", op, (long long)rows, (long long)cols);
        snprintf(r.shape_json, sizeof r.shape_json, "\"kernel\":\"%s\",\"rows\":%lld,\"cols\":%lld", op,
                 (long long)rows, (long long)cols);
        r.dtype = "f32";
        r.isa = fx_bench_isa_label(p.kc.k);
        r.threads = p.kc.threads;
        r.flops = 4.0 * (double)n; /* nominal; GB/s is the figure that matters */
        r.bytes = row_bytes_per_elem(op) * (double)n;
        r.peak = FX_PEAK_FMA_F32;
        r.seconds = fx_bench_time(env, run_row, &p);
        fx_bench_extra(&r, "gbps", row_bytes_per_elem(op) * (double)n / r.seconds * 1e-9);
        fx_bench_report(env, &r);
        fx_bench_kctx_free(&p.kc);
    }
    fx_rope_table_free(&p.rope);
    free(p.x), free(p.y), free(p.p1), free(p.p2), free(p.h);
    return rc;
}

static int rowops_main(int argc, char **argv, const fx_bench_env *env) {
    int bad = 0;
    const char *op = fx_bench_arg_str(argc, argv, "--op", "rmsnorm");
    int64_t rows = fx_bench_arg_int(argc, argv, "--rows", 4608, &bad);
    int64_t cols = fx_bench_arg_int(argc, argv, "--cols", 3072, &bad);
    return bad ? -1 : rowops_one(env, op, rows, cols);
}

/* DiT at 1024² (4096 image + 512 text tokens, hidden 3072, MLP 9216),
 * Qwen3 (512 × 2560, MLP 9728), VAE GroupNorm at 1024² (level 3: 128² × 512,
 * last level: 1024² × 128). */
static int rowops_defaults(const fx_bench_env *env) {
    int rc = 0;
    rc |= rowops_one(env, "rmsnorm", 512, 2560);
    rc |= rowops_one(env, "layernorm", 4608, 3072);
    rc |= rowops_one(env, "qk_norm_rope", 4608, 3072);
    rc |= rowops_one(env, "swiglu", 4608, 9216);
    rc |= rowops_one(env, "gated_add", 4608, 3072);
    rc |= rowops_one(env, "softmax", 4096, 4096);
    rc |= rowops_one(env, "groupnorm", 128 * 128, 512);
    rc |= rowops_one(env, "groupnorm", 1024 * 1024, 128);
    rc |= rowops_one(env, "bf16_to_f32", 4608, 3072);
    return rc;
}

FX_BENCH_COMMAND(rowops, "rowops --op OP --rows R --cols C", rowops_main, rowops_defaults)

/* ---- conv2d ---------------------------------------------------------------- */

typedef struct conv_problem {
    fx_conv2d_geom g;
    float *x, *y, *bias;
    fx_weight w;
    fx_kctx kc;
} conv_problem;

static void run_conv(void *arg) {
    conv_problem *p = arg;
    fx_epilogue epi = {FX_EPI_STORE, p->bias, NULL};
    fx_conv2d(&p->kc, &p->g, p->x, &p->w, &epi, p->y, 0, 0);
}

static int conv_one(const fx_bench_env *env, int h, int w, int cin, int cout, int k, int stride, int up,
                    fx_dtype dt) {
    conv_problem p = {0};
    int pad = k == 3 ? 1 : 0;
    p.g = (fx_conv2d_geom){h, w, cin, cout, k, k, stride, pad, pad, pad, pad, up};
    if (k == 3 && stride == 2) p.g.pad_top = p.g.pad_left = 0; /* VAE downsample */
    int ho, wo;
    fx_conv2d_out_size(&p.g, &ho, &wo);
    if (ho <= 0 || wo <= 0) {
        fprintf(stderr, "flux-bench conv2d: bad geometry\n");
        return -1;
    }
    size_t nx = (size_t)h * w * cin, ny = (size_t)ho * wo * cout, kd = (size_t)cin * k * k;
    size_t es = fx_dtype_size(dt);
    p.x = malloc(nx * sizeof(float)), p.y = malloc(ny * sizeof(float));
    p.bias = malloc((size_t)cout * sizeof(float));
    void *wd = malloc((size_t)cout * kd * es);
    if (!p.x || !p.y || !p.bias || !wd) {
        fprintf(stderr, "flux-bench conv2d: out of memory\n");
        free(p.x), free(p.y), free(p.bias), free(wd);
        return -1;
    }
    fill(p.x, nx, 5), fill(p.bias, (size_t)cout, 6);
    for (size_t i = 0; i < (size_t)cout * kd; i++) {
        float v = (float)((i * 2654435761u) % 1000) * 1e-4f - 0.05f;
        if (dt == FX_DTYPE_BF16) ((uint16_t *)wd)[i] = fx_f32_to_bf16_bits(v);
        else ((float *)wd)[i] = v;
    }
    p.w = (fx_weight){.data = wd, .dtype = dt, .n = cout, .k = (int64_t)kd, .ld = (int64_t)kd};
    int rc = fx_bench_kctx(env, -1, env->force_f32, &p.kc);
    if (!rc) {
        fx_bench_result r = {0};
        r.op = "conv2d";
        snprintf(r.shape, sizeof r.shape, "%dx%dx%d->%d k%d s%d%s", h, w, cin, cout, k, stride, up ? " up2" : "");
        snprintf(r.shape_json, sizeof r.shape_json,
                 "\"h\":%d,\"w\":%d,\"cin\":%d,\"cout\":%d,\"k\":%d,\"stride\":%d,\"upsample\":%d", h, w, cin,
                 cout, k, stride, up);
        r.dtype = dt == FX_DTYPE_BF16 ? "bf16" : "f32";
        r.isa = fx_bench_isa_label(p.kc.k);
        r.threads = p.kc.threads;
        r.flops = 2.0 * (double)ny * (double)kd;
        r.bytes = 4.0 * (double)(nx + ny) + (double)(cout * kd * es); /* x, y f32; the weight as stored */
        r.peak = fx_bench_peak_of(p.kc.k, dt == FX_DTYPE_BF16);
        r.seconds = fx_bench_time(env, run_conv, &p);
        fx_bench_report(env, &r);
        fx_bench_kctx_free(&p.kc);
    }
    free(p.x), free(p.y), free(p.bias), free(wd);
    return rc;
}

static int conv_main(int argc, char **argv, const fx_bench_env *env) {
    int bad = 0;
    int h = (int)fx_bench_arg_int(argc, argv, "--h", 128, &bad);
    int w = (int)fx_bench_arg_int(argc, argv, "--w", h, &bad);
    int cin = (int)fx_bench_arg_int(argc, argv, "--cin", 256, &bad);
    int cout = (int)fx_bench_arg_int(argc, argv, "--cout", cin, &bad);
    int k = (int)fx_bench_arg_int(argc, argv, "--k", 3, &bad);
    int stride = (int)fx_bench_arg_int(argc, argv, "--stride", 1, &bad);
    int up = fx_bench_arg_flag(argc, argv, "--upsample");
    const char *dt = fx_bench_arg_str(argc, argv, "--dtype", "bf16");
    if (bad || (k != 1 && k != 3) || stride < 1 || (strcmp(dt, "bf16") && strcmp(dt, "f32"))) {
        fprintf(stderr, "flux-bench conv2d: bad arguments\n");
        return -1;
    }
    return conv_one(env, h, w, cin, cout, k, stride, up, strcmp(dt, "f32") ? FX_DTYPE_BF16 : FX_DTYPE_F32);
}

/* The VAE decoder's convs for a 512² image (latent 64²): mid 64²×512,
 * upsample into 128², 256² (512→256 ch), and the 512² level at 128 ch. */
static int conv_defaults(const fx_bench_env *env) {
    int rc = 0;
    rc |= conv_one(env, 64, 64, 512, 512, 3, 1, 0, FX_DTYPE_BF16);
    rc |= conv_one(env, 64, 64, 512, 512, 3, 1, 1, FX_DTYPE_BF16);
    rc |= conv_one(env, 256, 256, 256, 256, 3, 1, 0, FX_DTYPE_BF16);
    rc |= conv_one(env, 512, 512, 128, 128, 3, 1, 0, FX_DTYPE_BF16);
    rc |= conv_one(env, 512, 512, 128, 128, 3, 2, 0, FX_DTYPE_BF16);
    return rc;
}

FX_BENCH_COMMAND(conv2d, "conv2d --h H --w W --cin C --cout C [--k 3] [--stride S] [--upsample] [--dtype bf16|f32]",
                 conv_main, conv_defaults)
