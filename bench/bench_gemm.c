/*
 * bench_gemm.c — the `gemm` command: fx_linear (Y = X·Wᵀ, W stored [n, k])
 * on one shape or on the model shape list, with OpenBLAS sgemm and oneDNN
 * matmul side by side when they are linked in (make bench OPENBLAS=1
 * ONEDNN=1). Yardstick setups:
 *   oneDNN   matmul primitive (2.x C API), src [m,k] bf16 or f32, weights
 *            as stored [n,k] (a transposed-B "ba" descriptor), dst f32;
 *            bf16×bf16→f32 when our run uses bf16 dot products, else f32.
 *            Its X is converted to bf16 outside the timing (ours converts
 *            inside fx_linear).
 *   OpenBLAS cblas_sgemm(RowMajor, NoTrans, Trans) on f32 copies.
 * Ratios are ours / theirs (> 1: we are faster).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "simd/common/table.h"
#include "simd/gemm/gemm_int8.h"

#ifdef FX_BENCH_OPENBLAS
#include <cblas.h>
#endif
#ifdef FX_BENCH_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

/* ------------------------------------------------------------------------ */
/* One problem                                                              */
/* ------------------------------------------------------------------------ */

typedef struct gemm_problem {
    int64_t m, n, k;
    fx_dtype dt;            /* F32/F16/BF16, or a block type (quantized from the same values) */
    fx_epilogue_mode mode;
    int w_misalign;         /* the weight starts this many bytes past a 64-byte boundary */
    float *x, *y, *bias, *gate;
    void *w, *w_alloc;
    fx_kctx kc;
    fx_int8w *form;         /* int8 mode, types that get the form at load: made before the timing */
    const fx_gemm_int8 *k8; /* int8 mode: a kernel forced by --int8-kernel, else NULL (the table's) */
} gemm_problem;

static size_t dt_size(fx_dtype dt) { return dt == FX_DTYPE_F32 ? 4 : fx_dtype_is_fp8(dt) ? 1 : 2; }
/* Bytes of the stored weights. */
static double weight_bytes(const gemm_problem *p) {
    return fx_dtype_is_block(p->dt) ? (double)fx_dtype_row_bytes(p->dt, p->n * p->k) : (double)(p->n * p->k) * dt_size(p->dt);
}

static void fill(float *p, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = (float)((double)(s >> 11) * (2.0 / 9007199254740992.0) - 1.0);
    }
}

static int problem_init(gemm_problem *p) {
    size_t mk = (size_t)(p->m * p->k), nk = (size_t)(p->n * p->k), mn = (size_t)(p->m * p->n);
    const int blocks = fx_dtype_is_block(p->dt);
    p->x = malloc(mk * 4);
    p->y = malloc(mn * 4);
    const size_t wbytes = blocks ? (size_t)fx_dtype_row_bytes(p->dt, p->n * p->k) : nk * dt_size(p->dt);
    p->w_alloc = aligned_alloc(64, (wbytes + 64 + 63) / 64 * 64);
    p->w = p->w_alloc ? (char *)p->w_alloc + p->w_misalign : NULL;
    p->bias = malloc((size_t)p->n * 4);
    p->gate = malloc((size_t)p->n * 4);
    if (!p->x || !p->y || !p->w || !p->bias || !p->gate) {
        fprintf(stderr, "flux-bench: out of memory for m=%lld n=%lld k=%lld\n", (long long)p->m,
                (long long)p->n, (long long)p->k);
        return -1;
    }
    fill(p->x, mk, 1);
    fill(p->bias, (size_t)p->n, 3);
    fill(p->gate, (size_t)p->n, 4);
    memset(p->y, 0, mn * 4);
    float *tmp = malloc(p->k * 4);
    for (int64_t j = 0; j < p->n; j++) {
        fill(tmp, (size_t)p->k, 100 + (uint64_t)j);
        if (blocks) { /* the same values as the bf16 problem, quantized */
            for (int64_t q = 0; q < p->k; q++) tmp[q] *= 0.05f;
            fx_quantize_row(p->dt, tmp, p->k, (char *)p->w + fx_dtype_row_bytes(p->dt, j * p->k));
            continue;
        }
        for (int64_t q = 0; q < p->k; q++) {
            size_t idx = (size_t)(j * p->k + q);
            float v = tmp[q] * 0.05f;
            if (p->dt == FX_DTYPE_F32) ((float *)p->w)[idx] = v;
            else if (fx_dtype_is_fp8(p->dt)) /* finite codes below 2^7, either sign (scale: problem_weight) */
                ((uint8_t *)p->w)[idx] = (uint8_t)((idx * 2654435761u >> 20) % 0x70 | (v < 0 ? 0x80 : 0));
            else if (p->dt == FX_DTYPE_BF16) ((uint16_t *)p->w)[idx] = fx_f32_to_bf16_bits(v);
            else ((uint16_t *)p->w)[idx] = (uint16_t)(0x2000 + (idx * 2654435761u >> 20) % 0x1000); /* small halves */
        }
    }
    free(tmp);
    return 0;
}

static void problem_free(gemm_problem *p) {
    fx_int8w_free(p->form);
    free(p->x), free(p->y), free(p->w_alloc), free(p->bias), free(p->gate);
}

/* fx_linear as the model runs it: int8 mode from the form made at load
 * (Q8_0) or the blocks converted per call (the other types). */
static void run_ours(void *arg) {
    gemm_problem *p = arg;
    fx_weight w = {.data = p->w, .dtype = p->dt, .n = p->n, .k = p->k, .ld = p->k};
    w.scale = fx_dtype_is_fp8(p->dt) ? 1.0f / 4096 : 0.0f; /* fp8: a scaled weight, as ComfyUI's files */
    fx_epilogue e = {p->mode, p->mode == FX_EPI_STORE ? NULL : p->bias,
                     p->mode == FX_EPI_GATED_ACCUMULATE ? p->gate : NULL};
    if (p->k8 && !fx_linear_int8(&p->kc, p->k8, p->m, p->x, p->k, &w, p->form, p->y, p->n, &e)) return;
    if (p->form) fx_linear_int8w(&p->kc, p->m, p->x, p->k, &w, p->form, p->y, p->n, &e);
    else fx_linear(&p->kc, p->m, p->x, p->k, &w, p->y, p->n, &e);
}

#if defined(FX_BENCH_OPENBLAS) || defined(FX_BENCH_ONEDNN)
/* f32 copy of the weights (for sgemm, and oneDNN f32). */
static float *weights_f32(const gemm_problem *p) {
    size_t nk = (size_t)(p->n * p->k);
    float *wf = malloc(nk * 4);
    if (!wf) return NULL;
    for (size_t i = 0; i < nk; i++) {
        if (p->dt == FX_DTYPE_F32) wf[i] = ((const float *)p->w)[i];
        else if (p->dt == FX_DTYPE_BF16) wf[i] = fx_bf16_bits_to_f32(((const uint16_t *)p->w)[i]);
        else wf[i] = fx_f16_bits_to_f32(((const uint16_t *)p->w)[i]);
    }
    return wf;
}
#endif

/* ------------------------------------------------------------------------ */
/* Yardsticks                                                               */
/* ------------------------------------------------------------------------ */

#ifdef FX_BENCH_OPENBLAS
typedef struct blas_run {
    const gemm_problem *p;
    const float *wf;
} blas_run;

static void run_openblas(void *arg) {
    blas_run *b = arg;
    const gemm_problem *p = b->p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)p->m, (int)p->n, (int)p->k, 1.0f, p->x,
                (int)p->k, b->wf, (int)p->k, 0.0f, p->y, (int)p->n);
}

static double time_openblas(const fx_bench_env *env, const gemm_problem *p, const float *wf) {
    openblas_set_num_threads(env->threads);
    blas_run b = {p, wf};
    return fx_bench_time(env, run_openblas, &b);
}
#endif

#ifdef FX_BENCH_ONEDNN
typedef struct dnnl_run {
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    dnnl_exec_arg_t args[3];
} dnnl_run;

static void run_onednn(void *arg) {
    dnnl_run *d = arg;
    dnnl_primitive_execute(d->prim, d->stream, 3, d->args);
    dnnl_stream_wait(d->stream);
}

/* Returns the best time, or -1 if oneDNN refuses the problem. */
static double time_onednn(const fx_bench_env *env, const gemm_problem *p, int bf16, const float *wf) {
    double best = -1;
    dnnl_engine_t eng = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL;
    uint16_t *xb = NULL, *wb = NULL;
    dnnl_data_type_t t = bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t a_md, b_md, c_md;
    dnnl_dims_t a_dims = {p->m, p->k}, b_dims = {p->k, p->n}, c_dims = {p->m, p->n};
    dnnl_matmul_desc_t md;
    const void *a_ptr = p->x, *b_ptr = wf;
    if (bf16) {
        xb = malloc((size_t)(p->m * p->k) * 2);
        if (!xb) goto done;
        for (int64_t i = 0; i < p->m * p->k; i++) xb[i] = fx_f32_to_bf16_bits(p->x[i]);
        a_ptr = xb;
        b_ptr = p->w;
        if (p->dt != FX_DTYPE_BF16) {
            wb = malloc((size_t)(p->n * p->k) * 2);
            if (!wb) goto done;
            for (int64_t i = 0; i < p->n * p->k; i++) wb[i] = fx_f32_to_bf16_bits(wf[i]);
            b_ptr = wb;
        }
    }
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) || dnnl_stream_create(&stream, eng, dnnl_stream_default_flags) ||
        dnnl_memory_desc_init_by_tag(&a_md, 2, a_dims, t, dnnl_ab) ||
        dnnl_memory_desc_init_by_tag(&b_md, 2, b_dims, t, dnnl_ba) ||
        dnnl_memory_desc_init_by_tag(&c_md, 2, c_dims, dnnl_f32, dnnl_ab) ||
        dnnl_matmul_desc_init(&md, &a_md, &b_md, NULL, &c_md) ||
        dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL) || dnnl_primitive_create(&prim, pd) ||
        dnnl_memory_create(&ma, &a_md, eng, (void *)a_ptr) || dnnl_memory_create(&mb, &b_md, eng, (void *)b_ptr) ||
        dnnl_memory_create(&mc, &c_md, eng, p->y)) {
        fprintf(stderr, "flux-bench: oneDNN matmul setup failed for m=%lld n=%lld k=%lld\n", (long long)p->m,
                (long long)p->n, (long long)p->k);
        goto done;
    }
    dnnl_run d = {prim, stream, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}}};
    best = fx_bench_time(env, run_onednn, &d);
done:
    if (ma) dnnl_memory_destroy(ma);
    if (mb) dnnl_memory_destroy(mb);
    if (mc) dnnl_memory_destroy(mc);
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (stream) dnnl_stream_destroy(stream);
    if (eng) dnnl_engine_destroy(eng);
    free(xb), free(wb);
    return best;
}
#endif

/* ------------------------------------------------------------------------ */
/* One measurement row                                                      */
/* ------------------------------------------------------------------------ */

static const char *mode_name(fx_epilogue_mode m) {
    return m == FX_EPI_STORE ? "store" : m == FX_EPI_ACCUMULATE ? "acc" : "gated";
}

/* Block-size overrides for tuning (0 = the table's own), and where the
 * weight starts (--w-misalign). */
typedef struct block_override {
    int kc, mc, nc;
    int w_misalign;
} block_override;

/* Copies of the chosen tables with other block sizes (bench memory only). */
typedef struct tuned_tables {
    fx_gemm_path path;
    fx_gemm_tiles tiles;
    fx_gemm_kernels gemm;
    fx_kernels k;
} tuned_tables;

/* The table's tile driver, if it runs weights of dtype dt (bf16 and block
 * types on the amx table), else NULL. */
static const fx_gemm_tiles *tiles_for(const fx_kctx *kc, fx_dtype dt, int64_t m) {
    const fx_gemm_kernels *g = kc->k->gemm ? kc->k->gemm : &fx_gemm_scalar;
    return g->tiles && m > FX_GEMV_MAX_M && (dt == FX_DTYPE_BF16 || fx_dtype_is_block(dt)) ? g->tiles : NULL;
}

/* The blocks of bo on the tile driver that runs dt, else on dt's path
 * (element types only: block types expand into the bf16 path's panels). */
static void apply_override(fx_kctx *kc, fx_dtype dt, int64_t m, const block_override *bo, tuned_tables *tt) {
    if (!bo || (!bo->kc && !bo->mc && !bo->nc)) return;
    const fx_gemm_kernels *g = kc->k->gemm ? kc->k->gemm : &fx_gemm_scalar;
    tt->gemm = *g;
    if (tiles_for(kc, dt, m)) { /* kc, mc multiples of 32; nc in 32-row weight panels */
        tt->tiles = *g->tiles;
        if (bo->kc) tt->tiles.kc = (bo->kc + 31) / 32 * 32;
        if (bo->mc) tt->tiles.mc = (bo->mc + 31) / 32 * 32;
        if (bo->nc) tt->tiles.nc = bo->nc;
        tt->gemm.tiles = &tt->tiles;
    } else if (!fx_dtype_is_block(dt)) {
        tt->path = *g->path[dt];
        if (bo->kc) tt->path.kc = (bo->kc + 31) / 32 * 32;
        if (bo->mc) tt->path.mc = (bo->mc + tt->path.mr - 1) / tt->path.mr * tt->path.mr;
        if (bo->nc) tt->path.nc = (bo->nc + tt->path.nr - 1) / tt->path.nr * tt->path.nr;
        tt->gemm.path[dt] = &tt->path;
    } else {
        return;
    }
    tt->k = *kc->k;
    tt->k.gemm = &tt->gemm;
    kc->k = &tt->k;
}

/* Time of the last bf16 row (the quantized rows' "ratio_bf16" = it / theirs). */
static double g_bf16_seconds;
/* --int8-kernel NAME: the int8 kernel every int8 row runs (NULL: the table's). */
static const fx_gemm_int8 *g_int8_kernel;
/* --model-shapes --wtype: block types measured after each bf16 row. */
static fx_dtype g_model_types[16];
static int g_model_ntypes;

static int bench_one(const fx_bench_env *env, int64_t m, int64_t n, int64_t k, fx_dtype dt, int force_f32,
                     fx_epilogue_mode mode, int yardsticks, const block_override *bo, int int8) {
    gemm_problem p = {.m = m, .n = n, .k = k, .dt = dt, .mode = mode, .w_misalign = bo ? bo->w_misalign : 0};
    if (fx_bench_kctx(env, -1, force_f32, &p.kc)) return -1;
    const int blocks = fx_dtype_is_block(dt);
    p.kc.int8 = int8 ? FX_INT8_ALL : FX_INT8_OFF;
    tuned_tables tt;
    apply_override(&p.kc, dt, m, bo, &tt);
    if (problem_init(&p)) {
        fx_bench_kctx_free(&p.kc);
        problem_free(&p);
        return -1;
    }
    const int bf16_dot = fx_kernels_uses_bf16_dot(p.kc.k) && dt == FX_DTYPE_BF16;
    fx_bench_result r = {.op = "gemm", .threads = env->threads};
    snprintf(r.shape, sizeof r.shape, "m=%lld n=%lld k=%lld%s%s", (long long)m, (long long)n, (long long)k,
             mode == FX_EPI_STORE ? "" : " ", mode == FX_EPI_STORE ? "" : mode_name(mode));
    snprintf(r.shape_json, sizeof r.shape_json, "\"m\":%lld,\"n\":%lld,\"k\":%lld,\"epilogue\":\"%s\"",
             (long long)m, (long long)n, (long long)k, mode_name(mode));
    char dts[32];
    snprintf(dts, sizeof dts, "%s%s", fx_dtype_name(dt), p.kc.int8 ? "/int8" : "");
    for (char *c = dts; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
    r.dtype = dts;
    r.isa = fx_bench_isa_label(p.kc.k);
    char isa8[24];
    double form_seconds = 0;
    r.flops = 2.0 * (double)m * (double)n * (double)k;
    r.bytes = weight_bytes(&p) + 4.0 * (double)m * (double)(k + n); /* W as stored, X and Y f32 */
    /* block, fp8 and side-scaled types run the bf16 weights' path (expanded in the packing) */
    r.peak = fx_bench_peak_of(p.kc.k, dt == FX_DTYPE_BF16 || fx_dtype_is_expanded(dt));
    if (m <= FX_GEMV_MAX_M && !p.kc.k->gemm->gemv_bf16_dot) r.peak = FX_PEAK_FMA_F32; /* the amx table's GEMV */
    /* int8: the kernel's ISA and dot-product peak (the table picks it by CPU
     * and m, --isa amx: tiles from 16 rows) */
    if (p.kc.int8) {
        const fx_gemm_kernels *g = p.kc.k->gemm;
        const fx_gemm_int8 *k8 = g_int8_kernel ? g_int8_kernel
                                 : g && g->int8 ? g->int8(fx_cpu_facts_get(), m)
                                                : &fx_gemm_int8_scalar;
        snprintf(isa8, sizeof isa8, "%.*s", (int)strcspn(k8->name, " "), k8->name);
        r.isa = isa8;
        r.peak = fx_bench_peak_of_int8(k8->name);
        p.k8 = g_int8_kernel;
        if (fx_int8w_wanted(&p.kc, dt)) { /* made once at load by the model: outside the timing */
            fx_weight w = {.data = p.w, .dtype = dt, .n = n, .k = k, .ld = k};
            w.scale = fx_dtype_is_fp8(dt) ? 1.0f / 4096 : 0.0f; /* as run_ours */
            const double t0 = fx_bench_now();
            p.form = fx_int8w_new(&p.kc, &w);
            form_seconds = fx_bench_now() - t0; /* cold: the first conversion, as at load */
        }
    }
    r.seconds = fx_bench_time(env, run_ours, &p);
    if (dt == FX_DTYPE_BF16 && !p.kc.int8) g_bf16_seconds = r.seconds;
    else if (g_bf16_seconds > 0) fx_bench_extra(&r, "ratio_bf16", g_bf16_seconds / r.seconds);
    if (bo && (bo->kc || bo->mc || bo->nc) && !p.kc.int8) { /* the blocks in effect */
        const fx_gemm_tiles *t = tiles_for(&p.kc, dt, m);
        const fx_gemm_path *pp = p.kc.k->gemm->path[blocks ? FX_DTYPE_BF16 : dt];
        fx_bench_extra(&r, "kc", t ? t->kc : pp->kc), fx_bench_extra(&r, "mc", t ? t->mc : pp->mc);
        fx_bench_extra(&r, "nc", t ? t->nc : pp->nc);
    }
    if (p.w_misalign) fx_bench_extra(&r, "w_misalign", p.w_misalign);
    if (p.kc.int8) fx_bench_extra(&r, "int8_form", p.form ? 1 : 0);
    if (p.form) /* the conversion at load: stored bytes read per second */
        fx_bench_extra(&r, "form_src_gb_s", weight_bytes(&p) / form_seconds * 1e-9);
    if (m <= 16) /* bandwidth bound: weight bytes per second */
        fx_bench_extra(&r, "weight_gb_s", weight_bytes(&p) / r.seconds * 1e-9);
    (void)yardsticks, (void)bf16_dot;
    if (blocks) yardsticks = 0;
#if defined(FX_BENCH_OPENBLAS) || defined(FX_BENCH_ONEDNN)
    if (yardsticks) {
        const double ours = r.flops / r.seconds * 1e-9;
        float *wf = weights_f32(&p);
        if (!wf) {
            fprintf(stderr, "flux-bench: out of memory for the yardsticks' f32 weights\n");
        } else {
#ifdef FX_BENCH_ONEDNN
            double td = time_onednn(env, &p, bf16_dot, wf);
            if (td > 0) {
                fx_bench_extra(&r, bf16_dot ? "onednn_bf16_gflops" : "onednn_f32_gflops", r.flops / td * 1e-9);
                fx_bench_extra(&r, "ratio_onednn", ours / (r.flops / td * 1e-9));
            }
#endif
#ifdef FX_BENCH_OPENBLAS
            double tb = time_openblas(env, &p, wf);
            fx_bench_extra(&r, "openblas_gflops", r.flops / tb * 1e-9);
            fx_bench_extra(&r, "ratio_openblas", ours / (r.flops / tb * 1e-9));
#endif
            free(wf);
        }
    }
#endif
    fx_bench_report(env, &r);
    fx_bench_kctx_free(&p.kc);
    problem_free(&p);
    return 0;
}

/* The rows of one weight type: block types W8A8 under --precision int8;
 * element types (bf16, f16, f32, fp8) in the table's precision and, under
 * --precision int8, again from their int8 form (made outside the timing,
 * as the model makes it at load). */
static int bench_type(const fx_bench_env *env, int64_t m, int64_t n, int64_t k, fx_dtype dt, int force_f32,
                      fx_epilogue_mode mode, int yardsticks, const block_override *bo) {
    const int blocks = fx_dtype_is_block(dt);
    int rc = bench_one(env, m, n, k, dt, force_f32, mode, yardsticks, bo, blocks && env->int8);
    if (!blocks && env->int8 && !force_f32) rc |= bench_one(env, m, n, k, dt, force_f32, mode, 0, bo, 1);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Commands                                                                 */
/* ------------------------------------------------------------------------ */

static int parse_dtype(const char *s, fx_dtype *dt) {
    if (!strcmp(s, "bf16")) *dt = FX_DTYPE_BF16;
    else if (!strcmp(s, "f32")) *dt = FX_DTYPE_F32;
    else if (!strcmp(s, "f16")) *dt = FX_DTYPE_F16;
    else return -1;
    return 0;
}

static int gemm_defaults(const fx_bench_env *env);

/* --wtype list → types (block types flux quantizes, k a multiple of
 * their block when k > 0); count, or -1. */
static int parse_wtypes(const char *ws, int64_t k, fx_dtype *types) {
    char list[256];
    snprintf(list, sizeof list, "%s", ws);
    int nt = 0;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && nt < 16; tok = strtok_r(NULL, ",", &save)) {
        int t = fx_dtype_parse(tok);
        if (t >= 0 && fx_dtype_is_fp8((fx_dtype)t)) { /* fp8 with a per-tensor scale */
            types[nt++] = (fx_dtype)t;
            continue;
        }
        if (t < 0 || !fx_dtype_is_block((fx_dtype)t) || !fx_dtype_can_quantize((fx_dtype)t) ||
            (k > 0 && k % fx_dtype_block((fx_dtype)t))) {
            fprintf(stderr, "flux-bench gemm: --wtype '%s' is not a block type flux quantizes, or k = %lld is not a "
                            "multiple of its block\n", tok, (long long)k);
            return -1;
        }
        types[nt++] = (fx_dtype)t;
    }
    return nt;
}

/* --int8-kernel NAME (the first word of a kernel's name): this build's
 * int8 kernels the CPU runs. */
static int parse_int8_kernel(const char *s) {
    const fx_gemm_int8 *all[8];
    int n = 0;
    all[n++] = &fx_gemm_int8_scalar;
#if FX_X86
    const fx_cpu_facts *f = fx_cpu_facts_get();
    all[n++] = &fx_gemm_int8_avx2_kernel;
    if (f->avxvnni) all[n++] = &fx_gemm_int8_avxvnni;
    if (f->avx512vnni && fx_isa_check(FX_ISA_AVX512, NULL, 0)) all[n++] = &fx_gemm_int8_avx512vnni;
    if (f->amx_int8 && fx_isa_check(FX_ISA_AMX, NULL, 0)) all[n++] = &fx_gemm_int8_amx;
#endif
#if FX_ARM
    all[n++] = fx_gemm_int8_neon(NULL, 0);
#endif
    for (int i = 0; i < n; i++)
        if (strlen(s) == strcspn(all[i]->name, " ") && !strncmp(s, all[i]->name, strlen(s))) {
            g_int8_kernel = all[i];
            return 0;
        }
    fprintf(stderr, "flux-bench gemm: --int8-kernel '%s' is not an int8 kernel this CPU runs:", s);
    for (int i = 0; i < n; i++) fprintf(stderr, " %.*s", (int)strcspn(all[i]->name, " "), all[i]->name);
    fprintf(stderr, "\n");
    return -1;
}

/* A comma-separated list of positive integers ("256" or "128,256,512") into
 * v (at most max); NULL s gives the one value 0 (the table's own). Returns
 * the count, or -1. */
static int parse_list(const char *s, int *v, int max) {
    if (!s) {
        v[0] = 0;
        return 1;
    }
    int n = 0;
    for (const char *p = s; *p;) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x <= 0 || x > 1 << 20 || n == max || (*end && *end != ',')) return -1;
        v[n++] = (int)x;
        p = *end ? end + 1 : end;
    }
    return n ? n : -1;
}

static int gemm_main(int argc, char **argv, const fx_bench_env *env) {
    const char *ks = fx_bench_arg_str(argc, argv, "--int8-kernel", NULL);
    if (ks && parse_int8_kernel(ks)) return -1;
    if (fx_bench_arg_flag(argc, argv, "--model-shapes")) {
        const char *mw = fx_bench_arg_str(argc, argv, "--wtype", NULL);
        if (mw && (g_model_ntypes = parse_wtypes(mw, 0, g_model_types)) < 0) return -1;
        return gemm_defaults(env);
    }
    int bad = 0;
    int64_t m = fx_bench_arg_int(argc, argv, "--m", 768, &bad);
    int64_t n = fx_bench_arg_int(argc, argv, "--n", 9216, &bad);
    int64_t k = fx_bench_arg_int(argc, argv, "--k", 3072, &bad);
    const int64_t misalign = fx_bench_arg_int(argc, argv, "--w-misalign", 0, &bad);
    fx_dtype dt;
    const char *ds = fx_bench_arg_str(argc, argv, "--dtype", "bf16");
    const char *es = fx_bench_arg_str(argc, argv, "--epilogue", "store");
    fx_epilogue_mode mode = !strcmp(es, "gated") ? FX_EPI_GATED_ACCUMULATE
                            : !strcmp(es, "acc") ? FX_EPI_ACCUMULATE
                                                 : FX_EPI_STORE;
    if (bad || m < 1 || n < 1 || k < 1 || parse_dtype(ds, &dt) || misalign < 0 || misalign > 63) {
        fprintf(stderr, "usage: flux-bench gemm --m M --n N --k K --dtype bf16|f32|f16 [--epilogue "
                        "store|acc|gated] [--kc KC[,KC...] --mc MC[,...] --nc NC[,...]] [--w-misalign BYTES (0-63)] "
                        "[--no-yardsticks] [--wtype q8_0,q4_k,...]\n");
        return -1;
    }
    /* the rows to time: the bf16 row and each quantized type with --wtype
     * (weight-only, or W8A8 with --precision int8), else the one dtype */
    fx_dtype types[17];
    int nt = 1;
    const char *ws = fx_bench_arg_str(argc, argv, "--wtype", NULL);
    if (ws) {
        types[0] = FX_DTYPE_BF16;
        const int nq = parse_wtypes(ws, k, types + 1);
        if (nq < 0) return -1;
        nt += nq;
    } else {
        types[0] = dt;
    }
    /* --kc/--mc/--nc: one row per combination (for the amx table: the
     * in-place tile driver's blocks, nc in 32-row weight panels) */
    enum { MAX_LIST = 16 };
    int kcs[MAX_LIST], mcs[MAX_LIST], ncs[MAX_LIST];
    const int nk = parse_list(fx_bench_arg_str(argc, argv, "--kc", NULL), kcs, MAX_LIST);
    const int nm = parse_list(fx_bench_arg_str(argc, argv, "--mc", NULL), mcs, MAX_LIST);
    const int nn = parse_list(fx_bench_arg_str(argc, argv, "--nc", NULL), ncs, MAX_LIST);
    if (nk < 0 || nm < 0 || nn < 0) {
        fprintf(stderr, "flux-bench gemm: --kc/--mc/--nc need positive integers, comma-separated (at most %d)\n",
                MAX_LIST);
        return -1;
    }
    int rc = 0, yardsticks = !ws && !fx_bench_arg_flag(argc, argv, "--no-yardsticks");
    for (int a = 0; a < nk; a++)
        for (int b = 0; b < nm; b++)
            for (int c = 0; c < nn; c++) {
                const block_override bo = {kcs[a], mcs[b], ncs[c], (int)misalign};
                for (int i = 0; i < nt; i++)
                    rc |= bench_type(env, m, n, k, types[i], env->force_f32, mode, yardsticks, &bo);
                yardsticks = 0; /* once: they do not depend on our blocks */
            }
    return rc;
}

/* The model's linear shapes: FLUX.2-klein DiT (M = image+text tokens) and
 * the Qwen3-4B text encoder (M = 512 tokens), plus the GEMV shapes
 * (timestep MLP / modulation, M = 1). */
static int gemm_defaults(const fx_bench_env *env) {
    static const int64_t flux_m[] = {256, 768, 1536, 4608};
    static const int64_t flux_nk[][2] = {{3072, 3072}, {9216, 3072}, {18432, 3072}, {27648, 3072},
                                         {3072, 9216}, {3072, 12288}};
    static const int64_t qwen_nk[][2] = {{4096, 2560}, {1024, 2560}, {9728, 2560}, {2560, 4096}, {2560, 9728}};
    static const int64_t gemv_mnk[][3] = {{1, 18432, 3072}, {1, 3072, 256}, {2, 9216, 3072}};
    int rc = 0;
    /* the denominators first, while nothing else of ours runs */
    for (int kind = 0; kind < FX_PEAK_KINDS; kind++) fx_bench_peak((fx_bench_peak_kind)kind, env->threads);
    const int math_f32[2] = {env->force_f32, 1};
    const int passes = env->force_f32 ? 1 : 2;
    for (int pass = 0; pass < passes; pass++) {
        /* each bf16 row, then (--wtype, first pass) the quantized types */
#define ROW(M, N, K, YARD)                                                                                      \
    do {                                                                                                        \
        rc |= bench_type(env, M, N, K, FX_DTYPE_BF16, math_f32[pass], FX_EPI_STORE, YARD, NULL);                 \
        for (int t = 0; pass == 0 && t < g_model_ntypes; t++)                                                   \
            if ((K) % fx_dtype_block(g_model_types[t]) == 0)                                                    \
                rc |= bench_type(env, M, N, K, g_model_types[t], math_f32[pass], FX_EPI_STORE, 0, NULL);         \
    } while (0)
        for (size_t a = 0; a < sizeof flux_m / sizeof *flux_m; a++)
            for (size_t b = 0; b < sizeof flux_nk / sizeof *flux_nk; b++) ROW(flux_m[a], flux_nk[b][0], flux_nk[b][1], 1);
        for (size_t b = 0; b < sizeof qwen_nk / sizeof *qwen_nk; b++) ROW(512, qwen_nk[b][0], qwen_nk[b][1], 1);
        for (size_t b = 0; b < sizeof gemv_mnk / sizeof *gemv_mnk; b++)
            ROW(gemv_mnk[b][0], gemv_mnk[b][1], gemv_mnk[b][2], 0);
#undef ROW
        if (g_model_ntypes) break; /* the f32-math pass only without --wtype */
    }
    return rc;
}

FX_BENCH_COMMAND(gemm,
                 "gemm --m M --n N --k K [--dtype bf16|f32|f16] [--epilogue store|acc|gated]\n"
                 "                        [--wtype q8_0,q4_k,f8_e4m3,... (GGUF block types, fp8, beside the bf16 row;\n"
                 "                         with --precision int8: W8A8)]\n"
                 "                        [--int8-kernel avx2|avxvnni|avx512vnni|amx|scalar (with --precision int8)]\n"
                 "                        [--kc KC,... --mc MC,... --nc NC,... (block sizes, for tuning: one row per\n"
                 "                         combination; --isa amx: the in-place tile driver's, nc in 32-row panels)]\n"
                 "                        [--w-misalign BYTES (the weight starts BYTES past a 64-byte line)]\n"
                 "                        [--no-yardsticks]\n"
                 "  gemm --model-shapes [--wtype q8_0,...]   the model's linear shapes (bf16 dot, then f32 math;\n"
                 "                         with --wtype: bf16 and the types, one pass)",
                 gemm_main, gemm_defaults)
