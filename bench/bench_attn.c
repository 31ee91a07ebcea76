/*
 * bench_attn.c — the `attn` command: fx_attention on one shape or on the
 * model's attention shapes.
 *
 *   flux-bench attn --sq S [--sk S] --heads H [--kv-heads H] --dim D
 *                   [--causal] [--pad N] [--ld L]
 *
 * Q, K and V are column slices of one fused [S, (H + 2·Hkv)·D] buffer (the
 * row layout a fused QKV linear produces; --ld widens the rows, e.g. to
 * the single-stream block's 3·3072 + 2·9216 = 27648), O is [S, H·D].
 * --pad N masks the last N keys (key padding), --causal the future keys.
 *
 * Flops: 4·D per visible (query, key) pair and query head: 4·Sq·Sk·D·H
 * without masks (Q·Kᵀ and P·V, a multiply-add counted as 2). Percent of
 * peak is against the measured vdpbf16ps peak when the table uses bf16
 * dot products (with the FMA peak as an extra, pct_fma_peak), else against
 * the measured FMA peak.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct attn_problem {
    int64_t sq, sk, ld, pad;
    int hq, hkv, d, causal;
    float *qkv, *o;
    uint8_t *mask;
    fx_attn_args args;
    fx_kctx kc;
    fx_err err;
    int failed;
} attn_problem;

static void fill(float *p, size_t n, uint64_t seed, float scale) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = scale * (float)((double)(s >> 11) * (2.0 / 9007199254740992.0) - 1.0);
    }
}

static int problem_init(attn_problem *p) {
    const int64_t s = p->sq > p->sk ? p->sq : p->sk;
    const size_t n = (size_t)(s * p->ld), no = (size_t)(p->sq * p->hq * p->d);
    p->qkv = malloc(n * sizeof(float));
    p->o = malloc(no * sizeof(float));
    p->mask = p->pad > 0 ? malloc((size_t)p->sk) : NULL;
    if (!p->qkv || !p->o || (p->pad > 0 && !p->mask)) {
        fprintf(stderr, "flux-bench: out of memory for attention sq=%lld sk=%lld\n",
                (long long)p->sq, (long long)p->sk);
        return -1;
    }
    fill(p->qkv, n, 7, 2.0f);
    memset(p->o, 0, no * sizeof(float));
    for (int64_t j = 0; p->mask && j < p->sk; j++) p->mask[j] = j < p->sk - p->pad;
    fx_attn_args *a = &p->args;
    memset(a, 0, sizeof *a);
    a->sq = p->sq;
    a->sk = p->sk;
    a->hq = p->hq;
    a->hkv = p->hkv;
    a->d = p->d;
    a->q = p->qkv;
    a->k = p->qkv + (int64_t)p->hq * p->d;
    a->v = a->k + (int64_t)p->hkv * p->d;
    a->ldq = a->ldk = a->ldv = p->ld;
    a->o = p->o;
    a->ldo = (int64_t)p->hq * p->d;
    a->scale = 1.0f / sqrtf((float)p->d);
    a->causal = p->causal;
    a->causal_offset = p->causal ? p->sk - p->sq : 0;
    a->key_mask = p->mask;
    return 0;
}

static void problem_free(attn_problem *p) { free(p->qkv), free(p->o), free(p->mask); }

static void run_ours(void *arg) {
    attn_problem *p = arg;
    if (fx_attention(&p->kc, &p->args, &p->err) != FLUX_OK) p->failed = 1;
}

/* Visible (query, key) pairs for one head. */
static double visible_pairs(const attn_problem *p) {
    const int64_t keys = p->sk - p->pad;
    if (!p->causal) return (double)p->sq * (double)keys;
    double n = 0;
    for (int64_t i = 0; i < p->sq; i++) {
        int64_t last = i + p->sk - p->sq; /* causal_offset = sk − sq */
        int64_t seen = last + 1 < keys ? last + 1 : keys;
        n += seen > 0 ? (double)seen : 0.0;
    }
    return n;
}

static int bench_one(const fx_bench_env *env, int64_t sq, int64_t sk, int hq, int hkv, int d,
                     int causal, int64_t pad, int64_t ld, int force_f32) {
    attn_problem p = {.sq = sq, .sk = sk, .hq = hq, .hkv = hkv, .d = d, .causal = causal,
                      .pad = pad, .ld = ld > 0 ? ld : (int64_t)(hq + 2 * hkv) * d};
    if (fx_bench_kctx(env, -1, force_f32, &p.kc)) return -1;
    if (problem_init(&p)) {
        fx_bench_kctx_free(&p.kc);
        problem_free(&p);
        return -1;
    }
    const int bf16_dot = fx_kernels_uses_bf16_dot(p.kc.k);
    fx_bench_result r = {.op = "attn", .threads = env->threads};
    snprintf(r.shape, sizeof r.shape, "sq=%lld sk=%lld h=%d/%d d=%d%s%s", (long long)sq, (long long)sk,
             hq, hkv, d, causal ? " causal" : "", pad ? " pad" : "");
    snprintf(r.shape_json, sizeof r.shape_json,
             "\"sq\":%lld,\"sk\":%lld,\"heads\":%d,\"kv_heads\":%d,\"dim\":%d,\"causal\":%d,"
             "\"pad\":%lld,\"ld\":%lld",
             (long long)sq, (long long)sk, hq, hkv, d, causal, (long long)pad, (long long)p.ld);
    r.dtype = bf16_dot ? "bf16" : "f32";
    r.isa = fx_bench_isa_label(p.kc.k);
    r.flops = 4.0 * (double)d * (double)hq * visible_pairs(&p);
    r.bytes = 4.0 * (double)d * (2.0 * (double)sq * hq + 2.0 * (double)sk * hkv); /* Q, K, V in, O out: f32 */
    r.peak = fx_bench_peak_of(p.kc.k, 1);
    r.seconds = fx_bench_time(env, run_ours, &p);
    if (p.failed) {
        fprintf(stderr, "flux-bench: fx_attention failed: %s\n", p.err.msg);
        fx_bench_kctx_free(&p.kc);
        problem_free(&p);
        return -1;
    }
    if (bf16_dot) {
        const double fma = fx_bench_peak(FX_PEAK_FMA_F32, env->threads);
        if (fma > 0) fx_bench_extra(&r, "pct_fma_peak", 100.0 * r.flops / r.seconds * 1e-9 / fma);
    }
    fx_bench_report(env, &r);
    fx_bench_kctx_free(&p.kc);
    problem_free(&p);
    return 0;
}

static int attn_main(int argc, char **argv, const fx_bench_env *env) {
    int bad = 0;
    const int64_t sq = fx_bench_arg_int(argc, argv, "--sq", 4608, &bad);
    const int64_t sk = fx_bench_arg_int(argc, argv, "--sk", sq, &bad);
    const int64_t hq = fx_bench_arg_int(argc, argv, "--heads", 24, &bad);
    const int64_t hkv = fx_bench_arg_int(argc, argv, "--kv-heads", hq, &bad);
    const int64_t d = fx_bench_arg_int(argc, argv, "--dim", 128, &bad);
    const int64_t pad = fx_bench_arg_int(argc, argv, "--pad", 0, &bad);
    const int64_t ld = fx_bench_arg_int(argc, argv, "--ld", 0, &bad);
    const int causal = fx_bench_arg_flag(argc, argv, "--causal");
    if (bad || sq < 1 || sk < 1 || hq < 1 || hkv < 1 || hq % hkv || hq > 4096 || d < 2 || d % 2 ||
        d > 4096 || pad < 0 || pad > sk || (ld && ld < (hq + 2 * hkv) * d)) {
        fprintf(stderr, "usage: flux-bench attn --sq S [--sk S] --heads H [--kv-heads H] --dim D "
                        "[--causal] [--pad N] [--ld L]\n"
                        "  (heads a multiple of kv-heads, D even, ld >= (H + 2*Hkv)*D)\n");
        return -1;
    }
    return bench_one(env, sq, sk, (int)hq, (int)hkv, (int)d, causal, pad, ld, env->force_f32);
}

/* The model's attention: DiT joint attention at 256², 512², 1024² (S =
 * 512 text + image tokens, 24 heads × 128, the single-stream block's
 * fused row of 27648 floats), the Qwen3 text encoder (512 tokens, GQA
 * 32/8 × 128, causal, a 100-token prompt: 412 padded keys) and the VAE
 * mid-block attention (1 head × 512 over 64² and 128² latents). With bf16
 * dot products available, every shape also runs in f32 math. */
static int attn_defaults(const fx_bench_env *env) {
    static const int64_t dit_s[] = {768, 1536, 4608};
    static const int64_t vae_s[] = {4096, 16384};
    int rc = 0;
    const int math_f32[2] = {env->force_f32, 1};
    const fx_kernels *k = fx_bench_table(env, env->force_f32);
    const int passes = env->force_f32 || !k || !fx_kernels_uses_bf16_dot(k) ? 1 : 2;
    for (int pass = 0; pass < passes; pass++) {
        for (size_t i = 0; i < sizeof dit_s / sizeof *dit_s; i++)
            rc |= bench_one(env, dit_s[i], dit_s[i], 24, 24, 128, 0, 0, 27648, math_f32[pass]);
        rc |= bench_one(env, 512, 512, 32, 8, 128, 1, 412, 0, math_f32[pass]);
        for (size_t i = 0; i < sizeof vae_s / sizeof *vae_s; i++)
            rc |= bench_one(env, vae_s[i], vae_s[i], 1, 1, 512, 0, 0, 0, math_f32[pass]);
    }
    return rc;
}

FX_BENCH_COMMAND(attn,
                 "attn --sq S [--sk S] --heads H [--kv-heads H] --dim D [--causal] [--pad N] "
                 "[--ld L]",
                 attn_main, attn_defaults)
