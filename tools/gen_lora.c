/*
 * gen_lora.c — write a random LoRA / LyCORIS adapter for a model folder in
 * one of the key conventions users download, and optionally the model with
 * the adapter merged offline (W' = W + strength·scale·ΔW, f32 weights), for
 * testing `flux --lora FILE` against the merged folder and for benchmarks.
 *
 *   gen_lora -d MODEL_DIR -o OUT.safetensors [--format F] [--rank R]
 *            [--alpha A] [--dtype bf16|f16|f32] [--seed S] [--amp X]
 *            [--modules all|blocks] [--max-modules N] [--dora out|in|none]
 *            [--merge DIR [--strength S]]
 *
 * Formats (the trainers' key conventions, README "LoRA adapters"):
 *   diffusers   transformer.<diffusers module>.lora_A/lora_B.weight; alpha in
 *               the header "lora_adapter_metadata" (transformer.r,
 *               transformer.lora_alpha, and an alpha_pattern entry giving the
 *               first module α/2)
 *   bfl         diffusion_model.<BFL module>.lora_A/lora_B.weight, no alpha
 *               (scale 1) unless --alpha is given (then .alpha keys)
 *   bfl-bare    the same without prefix; bfl-peft with "base_model.model."
 *   kohya       lora_unet_<BFL module, '.' → '_'>.lora_down/lora_up.weight + .alpha
 *   comfy       diffusion_model.<BFL module>.lora_down/lora_up.weight + .alpha
 *   lokr        lycoris_<BFL module, '.' → '_'>.lokr_w1 [4, 4] (whole) and
 *               .lokr_w2_a [out/4, R] · .lokr_w2_b [R, in/4] + .alpha (α/R)
 *   lokr-full   diffusion_model.<BFL module>.lokr_w1 and .lokr_w2 both whole,
 *               .alpha written but not used (scale 1, the ComfyUI rule)
 *   loha        diffusion_model.<BFL module>.hada_w1_a/_b, hada_w2_a/_b + .alpha (α/R)
 *   diff        diffusion_model.<BFL module>.diff (ΔW itself, scale 1)
 * --dora out|in|none adds DoRA magnitudes m (random, about the length of
 * each row of W + scale·ΔW): ".magnitude" [out] (ai-toolkit; PEFT keeps
 * the same vector as .lora_magnitude_vector) on the diffusers and bfl*
 * formats, ".dora_scale" [out, 1] (LyCORIS, wd_on_out=True) on the others;
 * "in" writes LyCORIS' per-input form [1, in] (not merged: flux.c refuses
 * it; LyCORIS formats only, the PEFT ones have no such form). The merge then makes, per output row i (with λ = --strength),
 *   W_i + λ·(g_i·(W_i + scale·ΔW_i) − W_i),  g_i = m_i / ‖W_i + scale·ΔW_i‖.
 * BFL modules are built here from a table of BFL names (as diffusers convert_flux2_to_diffusers.py maps them),
 * independently of the engine's mapping: a fused qkv ΔW [3d, in] adds its
 * row thirds to to_q, to_k, to_v (add_*_proj for txt); linear1 is
 * to_qkv_mlp_proj, linear2 to_out; final_layer.adaLN_modulation.1 rows
 * [0, d) (shift) go to norm_out.linear rows [d, 2d) and [d, 2d) (scale) to
 * [0, d). --modules blocks leaves out the embedders, modulations and the
 * final layer; --max-modules N keeps the first N (small fuzzing seeds). Default alpha: R/2 (so scale 0.5), --rank 4.
 *
 * Factors are random normal (Box–Muller on SplitMix64 of --seed), sized so
 * that ΔW·scale has entries of about amp/√in (default amp 0.3: a visible
 * change next to W ~ N(0, 1/in)), and rounded to --dtype; the merge uses
 * the rounded values, in double, rounded once to f32. --merge writes DIR
 * with transformer/diffusion_pytorch_model.safetensors (every tensor f32)
 * and symbolic links to the other parts of MODEL_DIR (which may itself be
 * a merged folder: two runs stack two adapters).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/formats/weight_set.h"
#include "src/formats/safetensors_write.h"

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("gen_lora: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) die("out of memory");
    return p;
}

/* ------------------------------------------------------------------ random */

static uint64_t g_rng;

static double uniform01(void) {
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) * 0x1p-53;
}

static double normal(void) { return sqrt(-2.0 * log(uniform01())) * cos(6.283185307179586 * uniform01()); }

/* ------------------------------------------------------------------ factors */

static fx_dtype g_dtype = FX_DTYPE_BF16;

typedef struct factor {
    char name[320];
    fx_shape shape;
    void *data;      /* in g_dtype (alpha: F32 scalar) */
    double *v;       /* the stored values, as doubles */
    fx_dtype dtype;
} factor;

static factor *g_out;
static size_t g_nout, g_capout;

/* A new tensor of the output file. */
static factor *push(const char *name) {
    if (g_nout == g_capout) {
        g_capout = g_capout ? 2 * g_capout : 256;
        g_out = realloc(g_out, g_capout * sizeof *g_out);
        if (!g_out) die("out of memory");
    }
    factor *f = &g_out[g_nout++];
    snprintf(f->name, sizeof f->name, "%.319s", name);
    return f;
}

/* A new tensor of the given shape holding v (NULL: normal values × sd),
 * rounded to g_dtype; returns the rounded values. */
static const double *new_tensor(const char *name, fx_shape shape, const double *v, double sd) {
    factor *f = push(name);
    f->shape = shape;
    f->dtype = g_dtype;
    const int64_t n = fx_shape_numel(&shape);
    f->data = xcalloc((size_t)n, fx_dtype_size(g_dtype));
    f->v = xcalloc((size_t)n, sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        float x = (float)(v ? v[i] : normal() * sd);
        if (g_dtype == FX_DTYPE_F32) ((float *)f->data)[i] = x;
        else if (g_dtype == FX_DTYPE_BF16) ((uint16_t *)f->data)[i] = fx_f32_to_bf16_bits(x);
        else ((uint16_t *)f->data)[i] = fx_f32_to_f16_bits(x);
        fx_tensor_convert_f32((const char *)f->data + (size_t)i * fx_dtype_size(g_dtype), g_dtype, 1, &x);
        f->v[i] = x;
    }
    return f->v;
}

/* A new factor [rows, cols] of normal values × sd, rounded to g_dtype. */
static const double *new_factor(const char *name, int64_t rows, int64_t cols, double sd) {
    return new_tensor(name, FX_SHAPE(rows, cols), NULL, sd);
}

static void new_alpha(const char *name, double alpha) {
    factor *f = push(name);
    f->shape = FX_SHAPE0;
    f->dtype = FX_DTYPE_F32;
    f->data = xcalloc(1, 4);
    *(float *)f->data = (float)alpha;
    f->v = NULL;
}

/* C [p, q] = A [p, r] · B [r, q] (doubles, malloc'd). */
static double *matmul(const double *a, const double *b, int64_t p, int64_t r, int64_t q) {
    double *c = xcalloc((size_t)(p * q), sizeof *c);
    for (int64_t i = 0; i < p; i++)
        for (int64_t k = 0; k < r; k++) {
            const double x = a[i * r + k];
            for (int64_t j = 0; j < q; j++) c[i * q + j] += x * b[k * q + j];
        }
    return c;
}

/* ------------------------------------------------------------------ modules */

typedef struct part {
    char tensor[160];        /* diffusers tensor of the model */
    int64_t dst_row0, src_row0, rows;
} part;

typedef struct module {
    char name[200];          /* BFL or diffusers module name */
    int64_t out, in;
    part parts[3];
    int n_parts;
} module;

static module g_mod[4096];
static int g_nmod;
static fx_wset *g_model;

static int64_t rows_of(const char *tensor, int64_t *cols) {
    const fx_tensor *t = fx_wset_find(g_model, tensor);
    if (!t || t->shape.ndim != 2) return -1;
    if (cols) *cols = t->shape.d[1];
    return t->shape.d[0];
}

/* A module whose ΔW rows are the listed tensors, one after the other. */
static void add_module(const char *name, const char *const *tensors, int n) {
    module *m = &g_mod[g_nmod];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    for (int i = 0; i < n; i++) {
        int64_t cols, rows = rows_of(tensors[i], &cols);
        if (rows < 0) return; /* not in this model */
        m->in = cols;
        part *p = &m->parts[m->n_parts++];
        snprintf(p->tensor, sizeof p->tensor, "%s", tensors[i]);
        p->dst_row0 = 0, p->src_row0 = m->out, p->rows = rows;
        m->out += rows;
    }
    g_nmod++;
}

static void build_diffusers(int blocks_only) {
    for (size_t i = 0; i < fx_wset_count(g_model); i++) {
        const fx_tensor *t = fx_wset_tensor_at(g_model, i);
        size_t len = strlen(t->name);
        if (t->shape.ndim != 2 || len < 8 || strcmp(t->name + len - 7, ".weight")) continue;
        if (blocks_only && !strstr(t->name, "transformer_blocks.")) continue;
        char name[200];
        snprintf(name, sizeof name, "%.*s", (int)(len - 7), t->name);
        const char *one[1] = {t->name};
        add_module(name, one, 1);
    }
}

static void build_bfl(int blocks_only) {
    char name[200], ts[3][160];
    const char *tp[3] = {ts[0], ts[1], ts[2]};
    static const char *const qkv[2][3] = {{"attn.to_q", "attn.to_k", "attn.to_v"},
                                          {"attn.add_q_proj", "attn.add_k_proj", "attn.add_v_proj"}};
    static const char *const stream[2] = {"img", "txt"};
    static const char *const proj[2] = {"attn.to_out.0", "attn.to_add_out"}, *ff[2] = {"ff", "ff_context"};
    for (int i = 0;; i++) {
        snprintf(ts[0], sizeof ts[0], "transformer_blocks.%d.attn.to_q.weight", i);
        if (rows_of(ts[0], NULL) < 0) break;
        for (int s = 0; s < 2; s++) {
            for (int q = 0; q < 3; q++) snprintf(ts[q], sizeof ts[q], "transformer_blocks.%d.%s.weight", i, qkv[s][q]);
            snprintf(name, sizeof name, "double_blocks.%d.%s_attn.qkv", i, stream[s]);
            add_module(name, tp, 3);
            snprintf(ts[0], sizeof ts[0], "transformer_blocks.%d.%s.weight", i, proj[s]);
            snprintf(name, sizeof name, "double_blocks.%d.%s_attn.proj", i, stream[s]);
            add_module(name, tp, 1);
            snprintf(ts[0], sizeof ts[0], "transformer_blocks.%d.%s.linear_in.weight", i, ff[s]);
            snprintf(name, sizeof name, "double_blocks.%d.%s_mlp.0", i, stream[s]);
            add_module(name, tp, 1);
            snprintf(ts[0], sizeof ts[0], "transformer_blocks.%d.%s.linear_out.weight", i, ff[s]);
            snprintf(name, sizeof name, "double_blocks.%d.%s_mlp.2", i, stream[s]);
            add_module(name, tp, 1);
        }
    }
    for (int j = 0;; j++) {
        snprintf(ts[0], sizeof ts[0], "single_transformer_blocks.%d.attn.to_qkv_mlp_proj.weight", j);
        if (rows_of(ts[0], NULL) < 0) break;
        snprintf(name, sizeof name, "single_blocks.%d.linear1", j);
        add_module(name, tp, 1);
        snprintf(ts[0], sizeof ts[0], "single_transformer_blocks.%d.attn.to_out.weight", j);
        snprintf(name, sizeof name, "single_blocks.%d.linear2", j);
        add_module(name, tp, 1);
    }
    if (blocks_only) return;
    static const char *const globals[][2] = {
        {"img_in", "x_embedder.weight"},
        {"txt_in", "context_embedder.weight"},
        {"time_in.in_layer", "time_guidance_embed.timestep_embedder.linear_1.weight"},
        {"time_in.out_layer", "time_guidance_embed.timestep_embedder.linear_2.weight"},
        {"double_stream_modulation_img.lin", "double_stream_modulation_img.linear.weight"},
        {"double_stream_modulation_txt.lin", "double_stream_modulation_txt.linear.weight"},
        {"single_stream_modulation.lin", "single_stream_modulation.linear.weight"},
        {"final_layer.linear", "proj_out.weight"},
    };
    for (size_t k = 0; k < sizeof globals / sizeof *globals; k++) add_module(globals[k][0], &globals[k][1], 1);
    /* the final AdaLN: BFL (shift, scale), diffusers norm_out (scale, shift) */
    const char *norm_out[1] = {"norm_out.linear.weight"};
    add_module("final_layer.adaLN_modulation.1", norm_out, 1);
    module *m = &g_mod[g_nmod - 1];
    const int64_t d = m->out / 2;
    m->n_parts = 2;
    m->parts[1] = m->parts[0];
    m->parts[0].dst_row0 = d, m->parts[0].src_row0 = 0, m->parts[0].rows = d;
    m->parts[1].dst_row0 = 0, m->parts[1].src_row0 = d, m->parts[1].rows = d;
}

/* ------------------------------------------------------------------ merge */

typedef struct merged {
    const fx_tensor *t;
    double *w;              /* W then W + Σ strength·scale·ΔW */
} merged;

static merged *g_merged;

/* The values of model tensor i, read on first use (a DoRA adapter without
 * --merge reads one module's tensors at a time: a 4B model as doubles
 * would not fit). */
static double *merged_w(size_t i) {
    if (!g_merged[i].w) {
        int64_t n;
        float *f;
        fx_err err = {0};
        if (fx_wset_f32(g_model, g_merged[i].t->name, NULL, &f, &n, &err)) die("%s", err.msg);
        g_merged[i].w = xcalloc((size_t)n, sizeof(double));
        for (int64_t k = 0; k < n; k++) g_merged[i].w[k] = f[k];
        free(f);
    }
    return g_merged[i].w;
}

static void merge(const module *m, const double *dw, double s) {
    for (int p = 0; p < m->n_parts; p++) {
        const part *pt = &m->parts[p];
        merged *mt = NULL;
        for (size_t i = 0; i < fx_wset_count(g_model); i++)
            if (!strcmp(g_merged[i].t->name, pt->tensor)) mt = &g_merged[i], merged_w(i);
        if (!mt) die("internal: tensor %s not found", pt->tensor);
        for (int64_t r = 0; r < pt->rows; r++)
            for (int64_t c = 0; c < m->in; c++)
                mt->w[(pt->dst_row0 + r) * m->in + c] += s * dw[(pt->src_row0 + r) * m->in + c];
    }
}

/* The merged row of module row i (its part's tensor row). */
static double *module_row(const module *m, int64_t i) {
    for (int p = 0; p < m->n_parts; p++) {
        const part *pt = &m->parts[p];
        if (i < pt->src_row0 || i >= pt->src_row0 + pt->rows) continue;
        for (size_t t = 0; t < fx_wset_count(g_model); t++)
            if (!strcmp(g_merged[t].t->name, pt->tensor)) return merged_w(t) + (pt->dst_row0 + i - pt->src_row0) * m->in;
    }
    die("internal: row %lld of %s has no tensor", (long long)i, m->name);
}

/* ‖W_i + s·ΔW_i‖ of module row i. */
static double row_norm(const module *m, const double *dw, double s, int64_t i) {
    const double *w = module_row(m, i);
    double sum = 0;
    for (int64_t c = 0; c < m->in; c++) {
        const double v = w[c] + s * dw[i * m->in + c];
        sum += v * v;
    }
    return sqrt(sum);
}

/* DoRA, per row i: W_i ← W_i + λ·(g_i·(W_i + s·ΔW_i) − W_i), g_i = m_i / ‖W_i + s·ΔW_i‖
 * (λ = 1: m·(W + sΔW)/‖W + sΔW‖, PEFT / ai-toolkit / LyCORIS). */
static void merge_dora(const module *m, const double *dw, double s, double strength, const double *mag) {
    for (int64_t i = 0; i < m->out; i++) {
        const double g = mag[i] / row_norm(m, dw, s, i);
        double *w = module_row(m, i);
        for (int64_t c = 0; c < m->in; c++) w[c] += strength * (g * (w[c] + s * dw[i * m->in + c]) - w[c]);
    }
}

static void link_or_die(const char *src_dir, const char *dst_dir, const char *name) {
    char src[PATH_MAX + 64], dst[PATH_MAX + 64], real[PATH_MAX];
    snprintf(src, sizeof src, "%s/%s", src_dir, name);
    snprintf(dst, sizeof dst, "%s/%s", dst_dir, name);
    if (!realpath(src, real)) return; /* absent parts are absent in the copy too */
    unlink(dst);
    if (symlink(real, dst)) die("cannot link %s -> %s: %s", dst, real, strerror(errno));
}

static void write_merged(const char *model_dir, const char *out) {
    char path[PATH_MAX + 64];
    if (mkdir(out, 0777) && errno != EEXIST) die("cannot create %s: %s", out, strerror(errno));
    snprintf(path, sizeof path, "%s/transformer", out);
    if (mkdir(path, 0777) && errno != EEXIST) die("cannot create %s: %s", path, strerror(errno));
    static const char *const parts[] = {"model_index.json", "scheduler", "text_encoder", "tokenizer", "vae"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) link_or_die(model_dir, out, parts[i]);
    char tsrc[PATH_MAX + 64];
    snprintf(tsrc, sizeof tsrc, "%s/transformer", model_dir);
    link_or_die(tsrc, path, "config.json");
    const size_t n = fx_wset_count(g_model);
    fx_safetensors_out *t = xcalloc(n, sizeof *t);
    for (size_t i = 0; i < n; i++) {
        const int64_t numel = fx_shape_numel(&g_merged[i].t->shape);
        float *f = xcalloc((size_t)numel, sizeof *f);
        const double *w = merged_w(i);
        for (int64_t k = 0; k < numel; k++) f[k] = (float)w[k];
        t[i] = (fx_safetensors_out){g_merged[i].t->name, FX_DTYPE_F32, g_merged[i].t->shape, f};
    }
    snprintf(path, sizeof path, "%s/transformer/diffusion_pytorch_model.safetensors", out);
    fx_err err = {0};
    if (fx_safetensors_write(path, t, n, NULL, 0, &err)) die("%s", err.msg);
    for (size_t i = 0; i < n; i++) free((void *)t[i].data);
    free(t);
}

/* ------------------------------------------------------------------ main */

static void flatten(const char *in, char *out, size_t size) {
    snprintf(out, size, "%.199s", in);
    for (char *p = out; *p; p++)
        if (*p == '.') *p = '_';
}

int main(int argc, char **argv) {
    const char *dir = NULL, *out = NULL, *format = "bfl", *merge_dir = NULL, *modules = "all";
    int64_t rank = 4;
    int max_modules = 0, dora = 0;
    double alpha = -1, amp = 0.3, strength = 1.0;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) die("%s: missing value (see the top of tools/gen_lora.c)", a);
        if (!strcmp(a, "-d")) dir = v;
        else if (!strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--format")) format = v;
        else if (!strcmp(a, "--rank")) rank = atoll(v);
        else if (!strcmp(a, "--alpha")) alpha = atof(v);
        else if (!strcmp(a, "--amp")) amp = atof(v);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--merge")) merge_dir = v;
        else if (!strcmp(a, "--strength")) strength = atof(v);
        else if (!strcmp(a, "--modules")) modules = v;
        else if (!strcmp(a, "--max-modules")) max_modules = atoi(v);
        else if (!strcmp(a, "--dora")) {
            if (!strcmp(v, "out")) dora = 1;
            else if (!strcmp(v, "in")) dora = 2;
            else if (strcmp(v, "none")) die("--dora: '%s' is not none, out or in", v);
        }
        else if (!strcmp(a, "--dtype")) {
            if (!strcmp(v, "bf16")) g_dtype = FX_DTYPE_BF16;
            else if (!strcmp(v, "f16")) g_dtype = FX_DTYPE_F16;
            else if (!strcmp(v, "f32")) g_dtype = FX_DTYPE_F32;
            else die("--dtype: '%s' is not bf16, f16 or f32", v);
        } else die("unknown option '%s' (see the top of tools/gen_lora.c)", a);
        i++;
    }
    if (!dir || !out) die("-d MODEL_DIR and -o OUT.safetensors are required (see the top of tools/gen_lora.c)");
    if (rank < 1) die("--rank must be >= 1");
    g_rng = seed * 0x2545F4914F6CDD1Dull + 12345;
    const int alpha_given = alpha >= 0;
    if (!alpha_given) alpha = (double)rank / 2;

    char tdir[PATH_MAX];
    snprintf(tdir, sizeof tdir, "%s/transformer", dir);
    fx_err err = {0};
    g_model = fx_wset_open_component(tdir, "transformer", "diffusion_pytorch_model.safetensors", 1, &err);
    if (!g_model) die("%s", err.msg);
    const int blocks_only = !strcmp(modules, "blocks");
    if (!blocks_only && strcmp(modules, "all")) die("--modules: '%s' is not all or blocks", modules);
    const int diffusers = !strcmp(format, "diffusers");
    /* ai-toolkit / PEFT keep one magnitude per output row: the per-input form
     * is LyCORIS' alone (it used to be written as a [out] tensor from an
     * [in] vector: a heap overflow wherever out > in) */
    if (dora == 2 && (diffusers || !strncmp(format, "bfl", 3)))
        die("--dora in: --format %s stores PEFT's .magnitude, one per output row; the per-input form [1, in] is "
            "LyCORIS' .dora_scale (kohya, comfy, lokr, lokr-full, loha, diff)", format);
    if (diffusers) build_diffusers(blocks_only);
    else build_bfl(blocks_only);
    if (max_modules > 0 && g_nmod > max_modules) g_nmod = max_modules;

    if (merge_dir || dora) { /* DoRA magnitudes are made from W */
        g_merged = xcalloc(fx_wset_count(g_model), sizeof *g_merged);
        for (size_t i = 0; i < fx_wset_count(g_model); i++) g_merged[i].t = fx_wset_tensor_at(g_model, i);
    }

    char meta_json[1024] = "";
    for (int mi = 0; mi < g_nmod; mi++) {
        const module *m = &g_mod[mi];
        char base[320], flat[200], key[360];
        flatten(m->name, flat, sizeof flat);
        const double target = amp / sqrt((double)m->in); /* entries of scale·ΔW */
        double *dw = NULL, scale = 1.0;
        const int need_dw = merge_dir || dora;
        if (diffusers || !strcmp(format, "bfl") || !strcmp(format, "bfl-bare") || !strcmp(format, "bfl-peft") ||
            !strcmp(format, "kohya") || !strcmp(format, "comfy")) {
            const char *down = ".lora_A.weight", *up = ".lora_B.weight";
            int write_alpha = 0;
            if (diffusers) {
                snprintf(base, sizeof base, "transformer.%.199s", m->name);
                scale = (mi == 0 ? alpha / 2 : alpha) / (double)rank; /* module 0 via alpha_pattern */
            } else if (!strcmp(format, "kohya")) {
                snprintf(base, sizeof base, "lora_unet_%.199s", flat);
                down = ".lora_down.weight", up = ".lora_up.weight", write_alpha = 1;
            } else if (!strcmp(format, "comfy")) {
                snprintf(base, sizeof base, "diffusion_model.%.199s", m->name);
                down = ".lora_down.weight", up = ".lora_up.weight", write_alpha = 1;
            } else {
                snprintf(base, sizeof base, "%s%.199s",
                         !strcmp(format, "bfl") ? "diffusion_model." : !strcmp(format, "bfl-peft") ? "base_model.model." : "",
                         m->name);
                write_alpha = alpha_given;
            }
            if (write_alpha) scale = alpha / (double)rank;
            else if (!diffusers) scale = 1.0;
            snprintf(key, sizeof key, "%s%s", base, down);
            const double *a = new_factor(key, rank, m->in, 1.0 / sqrt((double)m->in));
            snprintf(key, sizeof key, "%s%s", base, up);
            const double *b = new_factor(key, m->out, rank, target / scale / sqrt((double)rank));
            if (write_alpha) {
                snprintf(key, sizeof key, "%s.alpha", base);
                new_alpha(key, alpha);
            }
            if (need_dw) dw = matmul(b, a, m->out, rank, m->in);
        } else if (!strcmp(format, "lokr") || !strcmp(format, "lokr-full")) {
            const int64_t f = 4, l = f, m1 = f, k2 = m->out / f, n2 = m->in / f;
            if (m->out % f || m->in % f) die("%s: [%lld, %lld] is not divisible by %lld", m->name, (long long)m->out,
                                             (long long)m->in, (long long)f);
            const int full = !strcmp(format, "lokr-full");
            if (full) snprintf(base, sizeof base, "diffusion_model.%.199s", m->name);
            else snprintf(base, sizeof base, "lycoris_%.199s", flat);
            scale = full ? 1.0 : alpha / (double)rank;
            snprintf(key, sizeof key, "%s.lokr_w1", base);
            const double *w1 = new_factor(key, l, m1, 1.0);
            double *w2;
            if (full) {
                snprintf(key, sizeof key, "%s.lokr_w2", base);
                w2 = (double *)new_factor(key, k2, n2, target / scale);
                w2 = memcpy(xcalloc((size_t)(k2 * n2), sizeof *w2), w2, (size_t)(k2 * n2) * sizeof *w2);
            } else {
                snprintf(key, sizeof key, "%s.lokr_w2_a", base);
                const double *w2a = new_factor(key, k2, rank, target / scale / sqrt((double)rank));
                snprintf(key, sizeof key, "%s.lokr_w2_b", base);
                const double *w2b = new_factor(key, rank, n2, 1.0);
                w2 = matmul(w2a, w2b, k2, rank, n2);
            }
            snprintf(key, sizeof key, "%s.alpha", base);
            new_alpha(key, alpha);
            if (need_dw) {
                dw = xcalloc((size_t)(m->out * m->in), sizeof *dw);
                for (int64_t i1 = 0; i1 < l; i1++)
                    for (int64_t i2 = 0; i2 < k2; i2++)
                        for (int64_t j1 = 0; j1 < m1; j1++)
                            for (int64_t j2 = 0; j2 < n2; j2++)
                                dw[(i1 * k2 + i2) * m->in + j1 * n2 + j2] = w1[i1 * m1 + j1] * w2[i2 * n2 + j2];
            }
            free(w2);
        } else if (!strcmp(format, "loha")) {
            snprintf(base, sizeof base, "diffusion_model.%.199s", m->name);
            scale = alpha / (double)rank;
            const double sd = sqrt(target / scale) / sqrt((double)rank);
            snprintf(key, sizeof key, "%s.hada_w1_a", base);
            const double *w1a = new_factor(key, m->out, rank, sd);
            snprintf(key, sizeof key, "%s.hada_w1_b", base);
            const double *w1b = new_factor(key, rank, m->in, 1.0);
            snprintf(key, sizeof key, "%s.hada_w2_a", base);
            const double *w2a = new_factor(key, m->out, rank, sd);
            snprintf(key, sizeof key, "%s.hada_w2_b", base);
            const double *w2b = new_factor(key, rank, m->in, 1.0);
            snprintf(key, sizeof key, "%s.alpha", base);
            new_alpha(key, alpha);
            if (need_dw) {
                dw = matmul(w1a, w1b, m->out, rank, m->in);
                double *p2 = matmul(w2a, w2b, m->out, rank, m->in);
                for (int64_t i = 0; i < m->out * m->in; i++) dw[i] *= p2[i];
                free(p2);
            }
        } else if (!strcmp(format, "diff")) {
            snprintf(base, sizeof base, "diffusion_model.%.199s", m->name);
            snprintf(key, sizeof key, "%s.diff", base);
            const double *d = new_factor(key, m->out, m->in, target);
            if (need_dw) dw = memcpy(xcalloc((size_t)(m->out * m->in), sizeof *dw), d, (size_t)(m->out * m->in) * sizeof *dw);
        } else {
            die("--format: '%s' is not diffusers, bfl, bfl-bare, bfl-peft, kohya, comfy, lokr, lokr-full, loha or diff",
                format);
        }
        if (dora) {
            /* m = ‖W + sΔW‖ per row times 1 ± 25 %: a visible change of every row's length.
             * ai-toolkit / PEFT formats: ".magnitude" [out]; LyCORIS formats: ".dora_scale"
             * [out, 1], or with --dora in the per-input form [1, in] flux.c refuses */
            const int peft = diffusers || !strncmp(format, "bfl", 3);
            double *mag = xcalloc((size_t)(dora == 2 ? m->in : m->out), sizeof *mag);
            for (int64_t i = 0; i < (dora == 2 ? m->in : m->out); i++)
                mag[i] = (dora == 2 ? 1.0 : row_norm(m, dw, scale, i)) * (1.0 + 0.25 * normal());
            char mkey[400];
            snprintf(mkey, sizeof mkey, "%s%s", base, peft ? ".magnitude" : ".dora_scale");
            const double *stored = new_tensor(mkey, peft ? FX_SHAPE(m->out) : dora == 2 ? FX_SHAPE(1, m->in) : FX_SHAPE(m->out, 1),
                                              mag, 0);
            if (merge_dir && dora == 1) merge_dora(m, dw, scale, strength, stored);
            free(mag);
        } else if (dw && merge_dir) {
            merge(m, dw, strength * scale);
        }
        free(dw);
        if (dora && !merge_dir) /* only this module's tensors were needed */
            for (size_t i = 0; i < fx_wset_count(g_model); i++) free(g_merged[i].w), g_merged[i].w = NULL;
    }
    if (diffusers)
        snprintf(meta_json, sizeof meta_json,
                 "{\"transformer.r\": %lld, \"transformer.lora_alpha\": %g, \"transformer.alpha_pattern\": "
                 "{\"%s\": %g}, \"transformer.use_dora\": %s}",
                 (long long)rank, alpha, g_mod[0].name, alpha / 2, dora ? "true" : "false");
    fx_safetensors_out *t = xcalloc(g_nout, sizeof *t);
    for (size_t i = 0; i < g_nout; i++) t[i] = (fx_safetensors_out){g_out[i].name, g_out[i].dtype, g_out[i].shape, g_out[i].data};
    const char *meta[4] = {"format", "pt", "lora_adapter_metadata", meta_json};
    if (fx_safetensors_write(out, t, g_nout, meta, diffusers ? 2 : 1, &err)) die("%s", err.msg);
    free(t);
    if (merge_dir) write_merged(dir, merge_dir);
    printf("gen_lora: wrote %s (%s, %d modules, rank %lld, %zu tensors)%s%s\n", out, format, g_nmod, (long long)rank,
           g_nout, merge_dir ? " and the merged model " : "", merge_dir ? merge_dir : "");
    return 0;
}
