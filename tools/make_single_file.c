/*
 * make_single_file.c — write a model folder's transformer as one
 * single-file checkpoint in the official BFL layout, the ComfyUI layout
 * (BFL names with the model.diffusion_model. prefix) or with diffusers
 * names, for testing `flux --transformer FILE` against the folder.
 *
 *   make_single_file --layout bfl|comfyui|diffusers -d MODEL_DIR -o OUT.safetensors
 *                    [--guidance-in] [--extra-component]
 *
 * The BFL layout is built here from a table of BFL names (as diffusers convert_flux2_to_diffusers.py maps them), in
 * the direction diffusers → BFL, independently of the loader's mapping
 * (src/formats/single_file.c), so a test comparing the two catches a wrong entry:
 *   to_q ‖ to_k ‖ to_v (rows)            → double_blocks.i.img_attn.qkv
 *   add_q_proj ‖ add_k_proj ‖ add_v_proj → double_blocks.i.txt_attn.qkv
 *   norm_out.linear rows [d,2d) ‖ [0,d)  → final_layer.adaLN_modulation.1 (shift, scale)
 *   norm_{q,k} → ….norm.{query,key}_norm.scale, …
 * Bytes are copied as stored (no dtype change). --guidance-in adds the
 * guidance_in.{in,out}_layer tensors launch-era BFL files carry (copies of
 * time_in, values irrelevant: the loader must ignore them);
 * --extra-component adds an unprefixed "vae.decoder.conv_in.weight" as an
 * all-in-one ComfyUI file would (ignored with the prefix). The file is
 * written as OUT.tmp and renamed when complete.
 *
 * --fp8 e4m3|e5m2 stores every 2-D ".weight" (the linear layers) as fp8
 * the way ComfyUI's quantizer does (comfy/quant_ops.py,
 * TensorCoreFP8Layout.quantize): scale = max|W| / fp8 max (448 or 57344),
 * q = fp8(W · (1/scale)) rounded to nearest even (saturating), with the
 * scale beside it as '<layer>.weight_scale' (F32, shape []: the mixed-quant
 * convention); --fp8-legacy writes the older scaled-fp8 convention instead:
 * '<layer>.scale_weight', '<layer>.scale_input' = 1 and the "scaled_fp8"
 * marker tensor (shape [0], the fp8 dtype). --dequantized writes the same
 * weights as F32 values f32(q)·scale and no scales: the reference the fp8
 * file must reproduce; --dequantized-bf16 those values rounded to BF16
 * (nearest even): what the default precision's bf16 kernels read. fp8 values are computed here from their definition
 * (ldexp), independently of the kernels' decoder.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/formats/weight_set.h"

#define MAX_OUT 4096
#define MAX_PARTS 3

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("make_single_file: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

typedef struct part {
    const fx_tensor *t;
    int64_t row0, rows;
} part;

typedef struct out_tensor {
    char name[200];
    part parts[MAX_PARTS];
    int n;
    fx_shape shape;
    fx_dtype dtype;
    int64_t nbytes, offset;
    unsigned char *mem; /* converted bytes written instead of the parts (dtype, shape, nbytes set) */
} out_tensor;

static out_tensor g_out[MAX_OUT];
static int g_n;
static const fx_wset *g_in;
static const char *g_prefix = "";

static const fx_tensor *need(const char *name) {
    const fx_tensor *t = fx_wset_find(g_in, name);
    if (!t) die("%s: tensor '%s' not found", fx_wset_display(g_in), name);
    if (t->shape.ndim < 1) die("tensor '%s' has no rows", name);
    return t;
}

/* New output tensor named prefix + name made of whole source tensors. */
static out_tensor *add(const char *name, int n, const char *const *srcs) {
    if (g_n == MAX_OUT) die("too many tensors");
    out_tensor *o = &g_out[g_n++];
    snprintf(o->name, sizeof o->name, "%s%s", g_prefix, name);
    o->n = n;
    for (int i = 0; i < n; i++) {
        const fx_tensor *t = need(srcs[i]);
        o->parts[i] = (part){t, 0, t->shape.d[0]};
    }
    return o;
}

static void add1(const char *name, const char *src) { add(name, 1, &src); }

/* Shapes, dtypes and offsets of every output tensor. */
static void layout_outputs(void) {
    int64_t offset = 0;
    for (int k = 0; k < g_n; k++) {
        out_tensor *o = &g_out[k];
        if (o->mem) {
            o->offset = offset;
            offset += o->nbytes;
            continue;
        }
        const fx_tensor *first = o->parts[0].t;
        o->dtype = first->dtype;
        o->shape = first->shape;
        o->shape.d[0] = 0;
        int64_t row_bytes = first->nbytes / first->shape.d[0];
        for (int i = 0; i < o->n; i++) {
            const fx_tensor *t = o->parts[i].t;
            if (t->dtype != first->dtype || t->shape.ndim != first->shape.ndim ||
                memcmp(t->shape.d + 1, first->shape.d + 1, (size_t)(t->shape.ndim - 1) * sizeof(int64_t)))
                die("%s: parts '%s' and '%s' differ in dtype or trailing shape", o->name, first->name, t->name);
            o->shape.d[0] += o->parts[i].rows;
        }
        o->nbytes = o->shape.d[0] * row_bytes;
        o->offset = offset;
        offset += o->nbytes;
    }
}

static void write_file(const char *path) {
    layout_outputs();
    /* header JSON: metadata first, then tensors in order */
    size_t cap = 1 << 20, len = 0;
    char *h = malloc(cap);
    if (!h) die("out of memory");
#define EMIT(...)                                                                              \
    do {                                                                                       \
        int n_ = snprintf(h + len, cap - len, __VA_ARGS__);                                    \
        if (n_ < 0 || (size_t)n_ >= cap - len) die("header too large");                        \
        len += (size_t)n_;                                                                     \
    } while (0)
    EMIT("{\"__metadata__\":{\"format\":\"pt\"}");
    for (int k = 0; k < g_n; k++) {
        const out_tensor *o = &g_out[k];
        EMIT(",\"%s\":{\"dtype\":\"%s\",\"shape\":[", o->name, fx_dtype_name(o->dtype));
        for (int d = 0; d < o->shape.ndim; d++) EMIT(d ? ",%lld" : "%lld", (long long)o->shape.d[d]);
        EMIT("],\"data_offsets\":[%lld,%lld]}", (long long)o->offset, (long long)(o->offset + o->nbytes));
    }
    EMIT("}");
    while (len % 8) EMIT(" ");
#undef EMIT
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) die("cannot write %s", tmp);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)len >> 8 * i);
    fwrite(len8, 1, 8, f);
    fwrite(h, 1, len, f);
    for (int k = 0; k < g_n; k++) {
        const out_tensor *o = &g_out[k];
        if (o->mem) fwrite(o->mem, 1, (size_t)o->nbytes, f);
        for (int i = 0; o->mem ? 0 : i < o->n; i++) {
            const part *p = &o->parts[i];
            const unsigned char *data = fx_tensor_data(p->t);
            int64_t row_bytes = p->t->nbytes / p->t->shape.d[0];
            if (!data) die("data of '%s' not loaded", p->t->name);
            fwrite(data + p->row0 * row_bytes, 1, (size_t)(p->rows * row_bytes), f);
        }
    }
    if (ferror(f) || fclose(f) != 0) die("write error on %s", tmp);
    if (rename(tmp, path) != 0) die("cannot rename %s to %s", tmp, path);
    free(h);
}

/* Highest block index + 1 of names "<prefix><i>." in the input. */
static int count_blocks(const char *prefix) {
    int n = 0;
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < fx_wset_count(g_in); i++) {
        const char *name = fx_wset_tensor_at(g_in, i)->name;
        if (strncmp(name, prefix, plen)) continue;
        int b = atoi(name + plen);
        if (b + 1 > n) n = b + 1;
    }
    return n;
}

static void build_bfl(int guidance_in) {
    add1("img_in.weight", "x_embedder.weight");
    add1("txt_in.weight", "context_embedder.weight");
    add1("time_in.in_layer.weight", "time_guidance_embed.timestep_embedder.linear_1.weight");
    add1("time_in.out_layer.weight", "time_guidance_embed.timestep_embedder.linear_2.weight");
    if (guidance_in) {
        add1("guidance_in.in_layer.weight", "time_guidance_embed.timestep_embedder.linear_1.weight");
        add1("guidance_in.out_layer.weight", "time_guidance_embed.timestep_embedder.linear_2.weight");
    }
    add1("double_stream_modulation_img.lin.weight", "double_stream_modulation_img.linear.weight");
    add1("double_stream_modulation_txt.lin.weight", "double_stream_modulation_txt.linear.weight");
    add1("single_stream_modulation.lin.weight", "single_stream_modulation.linear.weight");
    char name[200], s[3][200];
    const char *srcs[3] = {s[0], s[1], s[2]};
    int nd = count_blocks("transformer_blocks."), ns = count_blocks("single_transformer_blocks.");
    for (int i = 0; i < nd; i++) {
        static const char *const stream[2] = {"img", "txt"};
        static const char *const qkv[2][3] = {{"to_q", "to_k", "to_v"}, {"add_q_proj", "add_k_proj", "add_v_proj"}};
        static const char *const norm[2][2] = {{"norm_q", "norm_k"}, {"norm_added_q", "norm_added_k"}};
        static const char *const proj[2] = {"attn.to_out.0", "attn.to_add_out"};
        static const char *const ff[2] = {"ff", "ff_context"};
        for (int st = 0; st < 2; st++) {
            for (int k = 0; k < 3; k++) snprintf(s[k], sizeof s[k], "transformer_blocks.%d.attn.%s.weight", i, qkv[st][k]);
            snprintf(name, sizeof name, "double_blocks.%d.%s_attn.qkv.weight", i, stream[st]);
            add(name, 3, srcs);
            snprintf(name, sizeof name, "double_blocks.%d.%s_attn.norm.query_norm.scale", i, stream[st]);
            snprintf(s[0], sizeof s[0], "transformer_blocks.%d.attn.%s.weight", i, norm[st][0]);
            add1(name, s[0]);
            snprintf(name, sizeof name, "double_blocks.%d.%s_attn.norm.key_norm.scale", i, stream[st]);
            snprintf(s[0], sizeof s[0], "transformer_blocks.%d.attn.%s.weight", i, norm[st][1]);
            add1(name, s[0]);
            snprintf(name, sizeof name, "double_blocks.%d.%s_attn.proj.weight", i, stream[st]);
            snprintf(s[0], sizeof s[0], "transformer_blocks.%d.%s.weight", i, proj[st]);
            add1(name, s[0]);
            snprintf(name, sizeof name, "double_blocks.%d.%s_mlp.0.weight", i, stream[st]);
            snprintf(s[0], sizeof s[0], "transformer_blocks.%d.%s.linear_in.weight", i, ff[st]);
            add1(name, s[0]);
            snprintf(name, sizeof name, "double_blocks.%d.%s_mlp.2.weight", i, stream[st]);
            snprintf(s[0], sizeof s[0], "transformer_blocks.%d.%s.linear_out.weight", i, ff[st]);
            add1(name, s[0]);
        }
    }
    for (int j = 0; j < ns; j++) {
        static const char *const bfl[4] = {"linear1.weight", "linear2.weight", "norm.query_norm.scale",
                                           "norm.key_norm.scale"};
        static const char *const dif[4] = {"attn.to_qkv_mlp_proj.weight", "attn.to_out.weight", "attn.norm_q.weight",
                                           "attn.norm_k.weight"};
        for (int k = 0; k < 4; k++) {
            snprintf(name, sizeof name, "single_blocks.%d.%s", j, bfl[k]);
            snprintf(s[0], sizeof s[0], "single_transformer_blocks.%d.%s", j, dif[k]);
            add1(name, s[0]);
        }
    }
    /* diffusers norm_out rows are (scale, shift); BFL stores (shift, scale) */
    const char *nout = "norm_out.linear.weight";
    out_tensor *o = add("final_layer.adaLN_modulation.1.weight", 1, &nout);
    int64_t d2 = o->parts[0].rows;
    if (d2 % 2) die("norm_out.linear.weight has an odd row count");
    o->parts[1] = o->parts[0];
    o->parts[0].row0 = d2 / 2, o->parts[0].rows = d2 / 2; /* shift */
    o->parts[1].row0 = 0, o->parts[1].rows = d2 / 2;      /* scale */
    o->n = 2;
    add1("final_layer.linear.weight", "proj_out.weight");
}

/* ---- fp8 (see the top) ---- */

static double fp8_value(int e4m3, int b) {
    const int mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
    const int e = b >> mbits & (e4m3 ? 15 : 31), m = b & ((1 << mbits) - 1);
    double v = e ? ldexp(1.0 + m / (double)(1 << mbits), e - bias) : ldexp(m, 1 - bias - mbits);
    return b & 0x80 ? -v : v;
}

/* x (finite) to the nearest fp8 code, ties to the even code, saturating at
 * the largest finite value (E4M3FN 0x7E = 448, E5M2 0x7B = 57344). */
static unsigned char fp8_code(int e4m3, float x) {
    const int top = e4m3 ? 0x7E : 0x7B;
    const double a = fabs((double)x);
    int lo = 0, hi = top; /* positive codes increase with their value */
    if (a >= fp8_value(e4m3, top)) lo = top;
    else {
        while (hi - lo > 1) {
            int mid = (lo + hi) / 2;
            if (fp8_value(e4m3, mid) <= a) lo = mid;
            else hi = mid;
        }
        double dl = a - fp8_value(e4m3, lo), dh = fp8_value(e4m3, hi) - a;
        if (dh < dl || (dh == dl && (hi & 1) == 0)) lo = hi;
    }
    return (unsigned char)(lo | (x < 0 && lo ? 0x80 : 0));
}

static out_tensor *add_mem(const char *name, fx_dtype dtype, int ndim, int64_t d0, const void *bytes, int64_t nbytes) {
    if (g_n == MAX_OUT) die("too many tensors");
    out_tensor *o = &g_out[g_n++];
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", name);
    o->dtype = dtype;
    o->shape.ndim = ndim;
    o->shape.d[0] = d0;
    o->nbytes = nbytes;
    if (!(o->mem = malloc(nbytes ? (size_t)nbytes : 1))) die("out of memory");
    memcpy(o->mem, bytes, (size_t)nbytes);
    return o;
}

/* Every 2-D ".weight" output as fp8 + scale (dequant: as F32 f32(q)·scale). */
static void convert_fp8(int e4m3, int legacy, int dequant) {
    const int n0 = g_n;
    layout_outputs(); /* shapes of the copied tensors */
    const float one = 1.0f;
    for (int k = 0; k < n0; k++) {
        out_tensor *o = &g_out[k];
        const size_t len = strlen(o->name);
        if (o->mem || o->shape.ndim != 2 || len < 7 || strcmp(o->name + len - 7, ".weight")) continue;
        const int64_t n = o->shape.d[0] * o->shape.d[1];
        float *v = malloc((size_t)n * 4 + 4);
        if (!v) die("out of memory");
        int64_t at = 0;
        for (int i = 0; i < o->n; i++) {
            const part *p = &o->parts[i];
            const int64_t row_elems = fx_shape_numel(&p->t->shape) / p->t->shape.d[0];
            fx_tensor_convert_f32((const unsigned char *)fx_tensor_data(p->t) + p->row0 * (p->t->nbytes / p->t->shape.d[0]),
                              p->t->dtype, p->rows * row_elems, v + at);
            at += p->rows * row_elems;
        }
        float amax = 0.0f;
        for (int64_t i = 0; i < n; i++) amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
        const float scale = amax > 0.0f ? amax / (float)fp8_value(e4m3, e4m3 ? 0x7E : 0x7B) : 1.0f;
        const float inv = 1.0f / scale;
        unsigned char *q = malloc((size_t)n + 1);
        if (!q) die("out of memory");
        for (int64_t i = 0; i < n; i++) q[i] = fp8_code(e4m3, v[i] * inv);
        o->mem = q;
        if (dequant) {
            for (int64_t i = 0; i < n; i++) v[i] = (float)fp8_value(e4m3, q[i]) * scale;
            free(q);
            o->mem = (unsigned char *)v;
            o->dtype = FX_DTYPE_F32;
            o->nbytes = n * 4;
            if (dequant == 2) { /* bf16, nearest even (the values are finite) */
                uint16_t *h = (uint16_t *)(void *)v;
                for (int64_t i = 0; i < n; i++) {
                    uint32_t b;
                    memcpy(&b, &v[i], 4);
                    h[i] = (uint16_t)((b + 0x7FFF + (b >> 16 & 1)) >> 16);
                }
                o->dtype = FX_DTYPE_BF16;
                o->nbytes = n * 2;
            }
            continue;
        }
        free(v);
        o->dtype = e4m3 ? FX_DTYPE_F8_E4M3 : FX_DTYPE_F8_E5M2;
        o->nbytes = n;
        char name[240];
        snprintf(name, sizeof name, "%.*s.%s", (int)(len - 7), o->name, legacy ? "scale_weight" : "weight_scale");
        add_mem(name, FX_DTYPE_F32, 0, 0, &scale, 4);
        if (legacy) {
            snprintf(name, sizeof name, "%.*s.scale_input", (int)(len - 7), o->name);
            add_mem(name, FX_DTYPE_F32, 0, 0, &one, 4);
        }
    }
    if (legacy && !dequant) {
        char name[240];
        snprintf(name, sizeof name, "%sscaled_fp8", g_prefix);
        add_mem(name, e4m3 ? FX_DTYPE_F8_E4M3 : FX_DTYPE_F8_E5M2, 1, 0, "", 0);
    }
}

static void build_diffusers(void) {
    for (size_t i = 0; i < fx_wset_count(g_in); i++) {
        const char *name = fx_wset_tensor_at(g_in, i)->name;
        add1(name, name);
    }
}

int main(int argc, char **argv) {
    const char *layout = NULL, *dir = NULL, *out = NULL;
    int guidance_in = 0, extra = 0, legacy = 0, dequant = 0;
    const char *fp8 = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--layout") && i + 1 < argc) layout = argv[++i];
        else if (!strcmp(argv[i], "-d") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--guidance-in")) guidance_in = 1;
        else if (!strcmp(argv[i], "--extra-component")) extra = 1;
        else if (!strcmp(argv[i], "--fp8") && i + 1 < argc) fp8 = argv[++i];
        else if (!strcmp(argv[i], "--fp8-legacy")) legacy = 1;
        else if (!strcmp(argv[i], "--dequantized")) dequant = 1;
        else if (!strcmp(argv[i], "--dequantized-bf16")) dequant = 2;
        else {
            fprintf(stderr, "usage: make_single_file --layout bfl|comfyui|diffusers -d MODEL_DIR -o OUT.safetensors "
                            "[--guidance-in] [--extra-component] [--fp8 e4m3|e5m2 [--fp8-legacy] [--dequantized[-bf16]]]\n");
            return 2;
        }
    }
    if (!layout || !dir || !out) die("--layout, -d and -o are required (see the top of tools/make_single_file.c)");
    int bfl = !strcmp(layout, "bfl") || !strcmp(layout, "comfyui");
    if (!bfl && strcmp(layout, "diffusers")) die("--layout: '%s' is not bfl, comfyui or diffusers", layout);
    if (!strcmp(layout, "comfyui")) g_prefix = "model.diffusion_model.";

    char tdir[4096];
    snprintf(tdir, sizeof tdir, "%s/transformer", dir);
    fx_err err = {0};
    fx_wset *in = fx_wset_open_component(tdir, "transformer", "diffusion_pytorch_model.safetensors", 1, &err);
    if (!in) die("%s", err.msg);
    g_in = in;
    if (bfl) build_bfl(guidance_in);
    else build_diffusers();
    if (extra) {
        const char *saved = g_prefix;
        g_prefix = "";
        add1("vae.decoder.conv_in.weight", "x_embedder.weight");
        g_prefix = saved;
    }
    if (fp8) {
        if (strcmp(fp8, "e4m3") && strcmp(fp8, "e5m2")) die("--fp8: '%s' is not e4m3 or e5m2", fp8);
        convert_fp8(!strcmp(fp8, "e4m3"), legacy, dequant);
    } else if (legacy || dequant) {
        die("--fp8-legacy and --dequantized go with --fp8");
    }
    write_file(out);
    printf("make_single_file: wrote %s (%s layout, %d tensors)\n", out, layout, g_n);
    fx_wset_close(in);
    return 0;
}
