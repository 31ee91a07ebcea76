/*
 * test_gguf_model.c — quantized models end to end, on a small generated
 * model whose widths are multiples of 256 (transformer d = 256, so every
 * type quantizes every transformer weight; text encoder hidden 32, so the
 * 32-blocks quantize it and K-quants fall back to BF16 as peers do):
 *   - `flux quantize` → read back → the same blocks as quantizing the
 *     folder's rows (BFL / llama.cpp names, fused and swapped rows), the
 *     peer key/values;
 *   - a run from the two GGUF files equals, bit for bit in f32 mode, the run
 *     from a folder holding their dequantized weights as F32 safetensors;
 *   - --quant on load equals running the files flux quantize writes;
 *   - a folder of configs, tokenizer and VAE plus the two GGUF files runs;
 *   - a type without kernels on tensors klein never reads loads; on one it
 *     reads, the load fails naming file, tensor and type;
 *   - wrong files (truncated, another model's shapes, the other component,
 *     another Qwen3) fail with exit 1, a message naming file and tensor or
 *     key, and no output written.
 */
#include "tests/test.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/formats/gguf.h"
#include "src/formats/qwen3_file.h"
#include "src/formats/single_file.h"
#include "tests/golden_cases.h"

/* The test model in this test's tmpdir (static buffer), or NULL. */
static const char *model(void) { return fx_gen_model_in_tmpdir("model", FX_GEN_ARGS_D256); }

/* `flux quantize` of a component into tmpdir/<name>; path (static, 4
 * rotating) or NULL. */
static const char *quantize(const char *dir, const char *component, const char *type, const char *name) {
    static char paths[4][PATH_MAX];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, PATH_MAX, "%s/%s", fx_test_tmpdir(), name);
    char cmd[4 * PATH_MAX], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' quantize -q -d '%s' --type %s --component %s -o '%s'", fx_test_flux_bin(), dir, type,
             component, path);
    int rc = fx_test_run(cmd, &out);
    if (rc) fx_test_fail(__FILE__, __LINE__, "%s: %s", cmd, out);
    free(out);
    return rc ? NULL : path;
}

/* Both components quantized to `type` into tq / teq (PATH_MAX each); 0 or -1. */
static int quantize_both(const char *dir, const char *type, char *tq, char *teq) {
    char tn[32], ten[32];
    snprintf(tn, sizeof tn, "t-%s.gguf", type);
    snprintf(ten, sizeof ten, "te-%s.gguf", type);
    const char *a = quantize(dir, "transformer", type, tn);
    if (!a) return -1;
    snprintf(tq, PATH_MAX, "%s", a);
    if (!(a = quantize(dir, "text-encoder", type, ten))) return -1;
    snprintf(teq, PATH_MAX, "%s", a);
    return 0;
}

/* One 32×32 generation with fixed seed, with a LoRA adapter at scale 1
 * when lora is given (image malloc'd, NULL on failure). */
static flux_image *generate_lora(const char *dir, const char *tfile, const char *tefile, const char *quant,
                                 flux_precision prec, const char *lora) {
    flux_options o;
    flux_options_init(&o);
    o.precision = prec;
    o.no_disk_cache = 1;
    flux_ctx *ctx = flux_new(&o);
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.transformer_file = tfile;
    lo.text_encoder_file = tefile;
    lo.quant = quant;
    flux_image *img = NULL;
    if (!ctx || flux_load(ctx, dir, &lo) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "flux_load: %s", flux_error(ctx));
    } else if (lora && flux_lora_load(ctx, lora, 1.0f) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "flux_lora_load: %s", flux_error(ctx));
    } else {
        flux_params p;
        flux_params_init(&p);
        p.prompt = "a small red boat";
        p.width = 32, p.height = 32, p.steps = 1, p.seed = 7;
        if (flux_generate(ctx, &p, &img) != FLUX_OK) fx_test_fail(__FILE__, __LINE__, "%s", flux_error(ctx));
    }
    flux_free(ctx);
    return img;
}

static flux_image *generate(const char *dir, const char *tfile, const char *tefile, const char *quant,
                            flux_precision prec) {
    return generate_lora(dir, tfile, tefile, quant, prec, NULL);
}

/* Write every tensor of a set as F32 into one safetensors file. */
static int write_f32_safetensors(const char *path, const fx_wset *s) {
    size_t n = fx_wset_count(s), cap = 1 << 20, hl = 0;
    char *hdr = malloc(cap);
    int64_t off = 0;
    hl += (size_t)snprintf(hdr + hl, cap - hl, "{");
    for (size_t i = 0; i < n; i++) {
        const fx_tensor *t = fx_wset_tensor_at(s, i);
        char shape[160];
        int64_t numel = fx_shape_numel(&t->shape);
        fx_shape_str(&t->shape, shape, sizeof shape);
        hl += (size_t)snprintf(hdr + hl, cap - hl, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":%s,\"data_offsets\":[%lld,%lld]}",
                               i ? "," : "", t->name, shape, (long long)off, (long long)(off + 4 * numel));
        off += 4 * numel;
    }
    hl += (size_t)snprintf(hdr + hl, cap - hl, "}");
    FILE *f = fopen(path, "wb");
    uint64_t len = hl;
    int ok = f && fwrite(&len, 8, 1, f) == 1 && fwrite(hdr, 1, hl, f) == hl;
    for (size_t i = 0; ok && i < n; i++) {
        const fx_tensor *t = fx_wset_tensor_at(s, i);
        float *v = NULL;
        int64_t numel = 0;
        fx_err err = {0};
        ok = fx_wset_f32(s, t->name, NULL, &v, &numel, &err) == FLUX_OK &&
             fwrite(v, 4, (size_t)numel, f) == (size_t)numel;
        free(v);
    }
    if (f) ok &= fclose(f) == 0;
    free(hdr);
    return ok ? 0 : -1;
}

/* A folder like src whose transformer/ and text_encoder/ hold the given
 * sets as F32; path (static) or NULL. */
static const char *dequantized_folder(const char *src, const fx_wset *tw, const fx_wset *tew) {
    static char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/dequantized", fx_test_tmpdir());
    char cmd[12 * PATH_MAX], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/transformer' '%s/text_encoder' && for f in '%s'/*; do b=$(basename \"$f\"); "
             "case $b in transformer|text_encoder) ;; *) ln -s \"$(readlink -f \"$f\")\" '%s/'\"$b\";; esac; done && "
             "cp '%s/transformer/config.json' '%s/transformer/' && cp '%s/text_encoder/config.json' '%s/text_encoder/'",
             dir, dir, src, dir, src, dir, src, dir);
    int rc = fx_test_run(cmd, &out);
    free(out);
    if (rc) return NULL;
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/transformer/diffusion_pytorch_model.safetensors", dir);
    if (write_f32_safetensors(p, tw)) return NULL;
    snprintf(p, sizeof p, "%s/text_encoder/model.safetensors", dir);
    if (write_f32_safetensors(p, tew)) return NULL;
    return dir;
}

static fx_wset *open_set(const char *dir, const char *component, const char *base) {
    char d[PATH_MAX];
    snprintf(d, sizeof d, "%s/%s", dir, component);
    fx_err err = {0};
    fx_wset *s = fx_wset_open_component(d, component, base, 1, &err);
    if (!s) fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
    return s;
}

/* The bytes of quantizing rows [row0, row0 + rows) of a source tensor. */
static unsigned char *quantized_rows(const fx_wset *src, const char *name, int64_t row0, int64_t rows, fx_dtype t,
                                     int64_t *nbytes) {
    float *v = NULL;
    int64_t n = 0;
    fx_err err = {0};
    if (fx_wset_f32(src, name, NULL, &v, &n, &err)) {
        fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return NULL;
    }
    const fx_tensor *st = fx_wset_find(src, name);
    int64_t cols = st->shape.ndim > 1 ? st->shape.d[1] : n;
    *nbytes = fx_dtype_row_bytes(t, rows * cols);
    unsigned char *q = malloc((size_t)*nbytes);
    for (int64_t r = 0; r < rows; r++)
        fx_quantize_row(t, v + (row0 + r) * cols, cols, q + fx_dtype_row_bytes(t, r * cols));
    free(v);
    return q;
}

/* ------------------------------------------------------------------------ */

TEST(gguf_quantize_writes_peer_files_with_reference_blocks) {
    const char *dir = model();
    REQUIRE(dir);
    const char *tq = quantize(dir, "transformer", "q4_k", "t.gguf");
    const char *teq = quantize(dir, "text-encoder", "q5_0", "te.gguf");
    REQUIRE(tq && teq);
    fx_wset *src = open_set(dir, "transformer", "diffusion_pytorch_model.safetensors");
    REQUIRE(src);
    fx_err err = {0};
    fx_wset *g = fx_wset_open(tq, "t.gguf", 1, &err);
    REQUIRE_MSG(g, "%s", err.msg);
    const fx_gguf *h = fx_tensor_file_gguf(fx_wset_file_at(g, 0));
    const char *arch = NULL;
    CHECK(h && !fx_gguf_get_str(h, "general.architecture", &arch) && !strcmp(arch, "flux"));
    uint64_t u = 0;
    CHECK(!fx_gguf_get_uint(h, "general.quantization_version", &u) && u == 2);
    /* every tensor under its BFL name; the types the peers' rules give */
    static const struct {
        const char *name;
        fx_dtype dt;
    } want[] = {
        {"img_in.weight", FX_DTYPE_BF16},
        {"txt_in.weight", FX_DTYPE_BF16},
        {"time_in.in_layer.weight", FX_DTYPE_BF16},
        {"final_layer.linear.weight", FX_DTYPE_BF16},
        {"final_layer.adaLN_modulation.1.weight", FX_DTYPE_BF16},
        {"double_blocks.1.img_attn.qkv.weight", FX_DTYPE_Q4_K},
        {"double_blocks.0.txt_mlp.2.weight", FX_DTYPE_Q4_K},
        {"single_blocks.1.linear1.weight", FX_DTYPE_Q4_K},
        {"single_stream_modulation.lin.weight", FX_DTYPE_Q4_K},
        {"single_blocks.0.norm.key_norm.scale", FX_DTYPE_F32},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const fx_tensor *t = fx_wset_find(g, want[i].name);
        CHECK_MSG(t && t->dtype == want[i].dt, "%s: %s", want[i].name, t ? fx_dtype_name(t->dtype) : "missing");
    }
    /* fused qkv = quantized to_q | to_k | to_v rows; linear1 as is */
    const fx_tensor *qkv = fx_wset_find(g, "double_blocks.1.img_attn.qkv.weight");
    REQUIRE(qkv);
    const unsigned char *p = fx_tensor_data(qkv);
    static const char *const parts[3] = {"transformer_blocks.1.attn.to_q.weight", "transformer_blocks.1.attn.to_k.weight",
                                         "transformer_blocks.1.attn.to_v.weight"};
    for (int k = 0; k < 3; k++) {
        int64_t nb = 0;
        unsigned char *q = quantized_rows(src, parts[k], 0, 256, FX_DTYPE_Q4_K, &nb);
        REQUIRE(q);
        CHECK_MSG(!memcmp(p + k * nb, q, (size_t)nb), "qkv part %d differs from quantizing %s", k, parts[k]);
        free(q);
    }
    int64_t nb = 0;
    unsigned char *q = quantized_rows(src, "single_transformer_blocks.1.attn.to_qkv_mlp_proj.weight", 0, 2304,
                                      FX_DTYPE_Q4_K, &nb);
    const fx_tensor *l1 = fx_wset_find(g, "single_blocks.1.linear1.weight");
    CHECK(q && l1 && l1->nbytes == nb && !memcmp(fx_tensor_data(l1), q, (size_t)nb));
    free(q);
    /* final layer: BFL (shift, scale) = diffusers norm_out rows [256, 512) then [0, 256) */
    q = quantized_rows(src, "norm_out.linear.weight", 256, 256, FX_DTYPE_BF16, &nb);
    const fx_tensor *fl = fx_wset_find(g, "final_layer.adaLN_modulation.1.weight");
    CHECK(q && fl && !memcmp(fx_tensor_data(fl), q, (size_t)nb));
    free(q);
    fx_wset_close(g);
    fx_wset_close(src);

    /* text encoder: llama.cpp names, the qwen3 key/values, all layers */
    src = open_set(dir, "text_encoder", "model.safetensors");
    g = fx_wset_open(teq, "te.gguf", 1, &err);
    REQUIRE_MSG(g && src, "%s", err.msg);
    h = fx_tensor_file_gguf(fx_wset_file_at(g, 0));
    CHECK(!fx_gguf_get_str(h, "general.architecture", &arch) && !strcmp(arch, "qwen3"));
    CHECK(!fx_gguf_get_uint(h, "qwen3.embedding_length", &u) && u == 32);
    CHECK(!fx_gguf_get_uint(h, "qwen3.block_count", &u) && u == 28);
    CHECK(fx_wset_find(g, "blk.27.ffn_down.weight") && fx_wset_find(g, "output_norm.weight"));
    const fx_tensor *emb = fx_wset_find(g, "token_embd.weight");
    CHECK(emb && emb->dtype == FX_DTYPE_Q5_0);
    q = quantized_rows(src, "model.layers.3.mlp.down_proj.weight", 0, 32, FX_DTYPE_Q5_0, &nb);
    const fx_tensor *dn = fx_wset_find(g, "blk.3.ffn_down.weight");
    CHECK(q && dn && dn->nbytes == nb && !memcmp(fx_tensor_data(dn), q, (size_t)nb));
    free(q);
    fx_wset_close(g);
    fx_wset_close(src);
}

/* The written file does not depend on the thread count or the ISA: the
 * workers encode and write whole rows at their offsets, and the vector
 * quantizers equal the scalar reference (FLUX_ISA=scalar). */
TEST(gguf_quantize_file_same_at_any_thread_count_and_isa) {
    const char *dir = model();
    REQUIRE(dir);
    static const char *const types[] = {"q4_k", "q8_0", "q6_k"};
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        unsigned char *first = NULL;
        size_t first_len = 0;
        static const char *const runs[] = {"-t 1", "-t 2", "-t 3", "-t 2 --no-mmap"};
        for (int r = 0; r < 5; r++) {
            char path[PATH_MAX], cmd[3 * PATH_MAX], *out = NULL;
            snprintf(path, sizeof path, "%s/threads-%s-%d.gguf", fx_test_tmpdir(), types[k], r);
            snprintf(cmd, sizeof cmd, "%s'%s' quantize -q %s -d '%s' --type %s --component transformer -o '%s'",
                     r == 4 ? "FLUX_ISA=scalar " : "", fx_test_flux_bin(), r == 4 ? "-t 2" : runs[r], dir, types[k],
                     path);
            int rc = fx_test_run(cmd, &out);
            CHECK_MSG(rc == 0, "%s: %s", cmd, out ? out : "");
            free(out);
            size_t len = 0;
            unsigned char *bytes = (unsigned char *)fx_test_read_file(path, &len);
            REQUIRE_MSG(bytes, "cannot read %s", path);
            if (!first) {
                first = bytes, first_len = len;
            } else {
                CHECK_MSG(len == first_len && !memcmp(bytes, first, len), "%s: '%s' differs from the -t 1 file",
                          types[k], cmd);
                free(bytes);
            }
            remove(path);
        }
        free(first);
    }
}

/* The GGUF run and the run from the dequantized weights as F32
 * safetensors: bit-identical in f32 mode (the block expansion inside the
 * GEMM packing is exact). */
TEST(gguf_run_equals_dequantized_safetensors_run) {
    const char *dir = model();
    REQUIRE(dir);
    char tq[PATH_MAX], teq[PATH_MAX];
    const char *a = quantize(dir, "transformer", "q4_k", "t.gguf");
    REQUIRE(a);
    snprintf(tq, sizeof tq, "%s", a);
    a = quantize(dir, "text-encoder", "q8_0", "te.gguf");
    REQUIRE(a);
    snprintf(teq, sizeof teq, "%s", a);
    fx_err err = {0};
    fx_wset *tw = fx_single_file_open(tq, 1, NULL, NULL, &err);
    fx_wset *tew = fx_qwen3_file_open(teq, 1, NULL, &err);
    REQUIRE_MSG(tw && tew, "%s", err.msg);
    const char *dq = dequantized_folder(dir, tw, tew);
    fx_wset_close(tw);
    fx_wset_close(tew);
    REQUIRE(dq);
    flux_image *x = generate(dir, tq, teq, NULL, FLUX_PRECISION_F32);
    flux_image *y = generate(dq, NULL, NULL, NULL, FLUX_PRECISION_F32);
    flux_image *z = generate(dir, NULL, NULL, NULL, FLUX_PRECISION_F32);
    REQUIRE(x && y && z);
    CHECK_MSG(fx_test_same_pixels(x, y), "GGUF run differs from the dequantized-safetensors run");
    /* and quantization did change the weights (the comparison is not vacuous) */
    CHECK_MSG(!fx_test_same_pixels(x, z), "Q4_K run is pixel-identical to the bf16 run");
    flux_image_free(x), flux_image_free(y), flux_image_free(z);
}

/* A LoRA on a GGUF transformer runs as a term beside the block weights
 * (never merged into them, never requantized): the run equals, bit for bit
 * in f32 mode, the same adapter on the dequantized-safetensors model, and
 * the adapter changes the image. */
TEST(gguf_lora_on_quantized_transformer) {
    const char *dir = model();
    REQUIRE(dir);
    char tq[PATH_MAX], lora[PATH_MAX], args[3 * PATH_MAX];
    const char *a = quantize(dir, "transformer", "q8_0", "t-lora.gguf");
    REQUIRE(a);
    snprintf(tq, sizeof tq, "%s", a);
    snprintf(lora, sizeof lora, "%s/style.safetensors", fx_test_tmpdir());
    snprintf(args, sizeof args, "-d '%s' -o '%s' --format diffusers --rank 4 --seed 71", dir, lora);
    REQUIRE(FX_TEST_RUN_TOOL("gen_lora", args) == 0);
    fx_err err = {0};
    fx_wset *tw = fx_single_file_open(tq, 1, NULL, NULL, &err);
    REQUIRE_MSG(tw, "%s", err.msg);
    fx_wset *tew = open_set(dir, "text_encoder", "model.safetensors");
    REQUIRE(tew);
    const char *dq = dequantized_folder(dir, tw, tew);
    fx_wset_close(tw);
    fx_wset_close(tew);
    REQUIRE(dq);
    flux_image *x = generate_lora(dir, tq, NULL, NULL, FLUX_PRECISION_F32, lora);
    flux_image *y = generate_lora(dq, NULL, NULL, NULL, FLUX_PRECISION_F32, lora);
    flux_image *z = generate(dir, tq, NULL, NULL, FLUX_PRECISION_F32);
    REQUIRE(x && y && z);
    CHECK_MSG(fx_test_same_pixels(x, y), "LoRA on the GGUF transformer differs from LoRA on its dequantized weights");
    CHECK_MSG(!fx_test_same_pixels(x, z), "the adapter does not change the GGUF run");
    flux_image_free(x), flux_image_free(y), flux_image_free(z);
}

/* --quant on load builds what flux quantize writes: the same images. */
TEST(gguf_quant_on_load_equals_quantized_files) {
    const char *dir = model();
    REQUIRE(dir);
    char tq[PATH_MAX], teq[PATH_MAX];
    REQUIRE(quantize_both(dir, "q8_0", tq, teq) == 0);
    flux_image *x = generate(dir, tq, teq, NULL, FLUX_PRECISION_DEFAULT);
    flux_image *y = generate(dir, NULL, NULL, "q8_0", FLUX_PRECISION_DEFAULT);
    REQUIRE(x && y);
    CHECK_MSG(fx_test_same_pixels(x, y), "--quant q8_0 differs from the flux quantize files");
    flux_image_free(x), flux_image_free(y);
    /* an already quantized component is used as stored */
    flux_image *w = generate(dir, tq, NULL, "q4_0", FLUX_PRECISION_DEFAULT);
    flux_image *v = generate(dir, tq, NULL, NULL, FLUX_PRECISION_DEFAULT);
    REQUIRE(w && v);
    CHECK(!fx_test_same_pixels(w, v)); /* text encoder quantized on load, transformer as stored */
    flux_image_free(w), flux_image_free(v);
}

/* int8 mode on quantized weights: an image close to the f32 mode's, not
 * the same (the activations are rounded to 8 bits). The default mode runs
 * the block weights as int8 where the CPU's table does so by default
 * (fx_kernels_int8_by_default): then not the bf16 mode's pixels, else
 * exactly them; it never gives int8's pixels (--precision int8 also runs
 * the files' BF16 projections — img_in, txt_in, time_in, final_layer — as
 * int8). The bf16 mode never runs int8. */
TEST(gguf_int8_mode_runs_close_to_default) {
    const char *dir = model();
    REQUIRE(dir);
    char tq[PATH_MAX], teq[PATH_MAX];
    REQUIRE(quantize_both(dir, "q8_0", tq, teq) == 0);
    flux_image *f = generate(dir, tq, teq, NULL, FLUX_PRECISION_F32);
    flux_image *d = generate(dir, tq, teq, NULL, FLUX_PRECISION_DEFAULT);
    flux_image *i = generate(dir, tq, teq, NULL, FLUX_PRECISION_INT8);
    flux_image *b = generate(dir, tq, teq, NULL, FLUX_PRECISION_BF16);
    REQUIRE(f && d && i && b && f->width == i->width && f->height == i->height);
    CHECK(!fx_test_same_pixels(f, i));
    CHECK_MSG(!fx_test_same_pixels(b, i), "the bf16 mode gave int8's pixels");
    const char *isa = getenv("FLUX_ISA");
    if (!isa || !*isa) {
        const int by_default = fx_kernels_int8_by_default(fx_kernels_best(0));
        CHECK_MSG(!fx_test_same_pixels(d, i), "the default mode gave int8's pixels");
        CHECK_MSG(fx_test_same_pixels(d, b) == !by_default, "the bf16 mode %s the default's pixels",
                  fx_test_same_pixels(d, b) ? "gave" : "did not give");
    }
    double sum = 0;
    size_t n = (size_t)f->width * f->height * f->channels;
    for (size_t k = 0; k < n; k++) sum += fabs((double)f->data[k] - i->data[k]);
    CHECK_MSG(sum / n < 8.0, "int8 image differs from the f32 one by %.2f levels on average", sum / n);
    flux_image_free(f), flux_image_free(d), flux_image_free(i), flux_image_free(b);
}

/* What users download for small machines: configs, tokenizer, VAE and two
 * GGUF files. Through the CLI. */
TEST(gguf_folder_of_configs_and_two_gguf_files_runs) {
    const char *dir = model();
    REQUIRE(dir);
    char tq[PATH_MAX], small[PATH_MAX], cmd[16 * PATH_MAX], png[PATH_MAX], *out = NULL;
    const char *a = quantize(dir, "transformer", "q4_0", "t.gguf");
    REQUIRE(a);
    snprintf(tq, sizeof tq, "%s", a);
    const char *teq = quantize(dir, "text-encoder", "q4_0", "te.gguf");
    REQUIRE(teq);
    snprintf(small, sizeof small, "%s/small", fx_test_tmpdir());
    snprintf(png, sizeof png, "%s/out.png", fx_test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/transformer' '%s/text_encoder' && cp -r '%s/vae' '%s/tokenizer' '%s/scheduler' "
             "'%s/model_index.json' '%s/' && cp '%s/transformer/config.json' '%s/transformer/' && "
             "cp '%s/text_encoder/config.json' '%s/text_encoder/' && "
             "'%s' -q -d '%s' --transformer '%s' --text-encoder '%s' -p 'a lighthouse' -W 64 -H 64 -s 2 -S 1 -o '%s'",
             small, small, dir, dir, dir, dir, small, dir, small, dir, small, fx_test_flux_bin(), small, tq, teq, png);
    int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0, "%s", out);
    free(out);
    CHECK(fx_test_file_exists(png));
    /* without the files: the folder has no weights */
    snprintf(cmd, sizeof cmd, "'%s' -q -d '%s' -p x -W 64 -H 64 -o '%s/none.png'", fx_test_flux_bin(), small,
             fx_test_tmpdir());
    rc = fx_test_run(cmd, &out);
    CHECK(rc == 1);
    free(out);
}

/* Run the CLI on the test model with extra arguments; expect exit 1, the
 * fragments in the output, and no image. */
static void expect_cli_failure(int line, const char *dir, const char *args, const char *frag1, const char *frag2) {
    char cmd[6 * PATH_MAX], png[PATH_MAX], *out = NULL;
    snprintf(png, sizeof png, "%s/fail.png", fx_test_tmpdir());
    snprintf(cmd, sizeof cmd, "'%s' -q -d '%s' %s -p x -W 64 -H 64 -s 1 -o '%s'", fx_test_flux_bin(), dir, args, png);
    int rc = fx_test_run(cmd, &out);
    if (rc != 1) fx_test_fail(__FILE__, line, "exit %d (expected 1): %s", rc, out);
    if (frag1 && !strstr(out, frag1)) fx_test_fail(__FILE__, line, "output lacks '%s': %s", frag1, out);
    if (frag2 && !strstr(out, frag2)) fx_test_fail(__FILE__, line, "output lacks '%s': %s", frag2, out);
    if (fx_test_file_exists(png)) fx_test_fail(__FILE__, line, "an image was written");
    free(out);
}

TEST(gguf_wrong_files_fail_cleanly) {
    const char *dir = model();
    REQUIRE(dir);
    char tq[PATH_MAX], teq[PATH_MAX], args[3 * PATH_MAX], bad[PATH_MAX];
    const char *a = quantize(dir, "transformer", "q8_0", "t.gguf");
    REQUIRE(a);
    snprintf(tq, sizeof tq, "%s", a);
    a = quantize(dir, "text-encoder", "q8_0", "te.gguf");
    REQUIRE(a);
    snprintf(teq, sizeof teq, "%s", a);
    /* truncated */
    size_t len = 0;
    char *bytes = fx_test_read_file(tq, &len);
    REQUIRE(bytes && len > 4096);
    snprintf(bad, sizeof bad, "%s/truncated.gguf", fx_test_tmpdir());
    REQUIRE(fx_test_write_file(bad, bytes, len / 2) == 0);
    snprintf(args, sizeof args, "--transformer '%s'", bad);
    expect_cli_failure(__LINE__, dir, args, "truncated.gguf", "run past the end of the data section");
    /* a corrupt header: bad magic → not read as GGUF at all */
    bytes[0] = 'X';
    REQUIRE(fx_test_write_file(bad, bytes, len) == 0);
    expect_cli_failure(__LINE__, dir, args, "truncated.gguf", NULL);
    free(bytes);
    /* the other component's file */
    snprintf(args, sizeof args, "--transformer '%s'", teq);
    expect_cli_failure(__LINE__, dir, args, "not a FLUX.2 transformer checkpoint", NULL);
    snprintf(args, sizeof args, "--text-encoder '%s'", tq);
    expect_cli_failure(__LINE__, dir, args, "not a Qwen3 text encoder", NULL);
    /* another model's transformer: the committed tiny model (d = 64) */
    const char *other = quantize(fx_test_path("golden/model"), "transformer", "q8_0", "other-t.gguf");
    REQUIRE(other);
    snprintf(args, sizeof args, "--transformer '%s'", other);
    expect_cli_failure(__LINE__, dir, args, "has shape [64, 128], expected [256, 128]", "x_embedder.weight");
    /* another model's text encoder (hidden 16): caught by the key/values */
    const char *other_te = quantize(fx_test_path("golden/model"), "text-encoder", "q8_0", "other-te.gguf");
    REQUIRE(other_te);
    snprintf(args, sizeof args, "--text-encoder '%s'", other_te);
    expect_cli_failure(__LINE__, dir, args, "qwen3.embedding_length is 16", "hidden_size 32");
    /* another Qwen3 release (rope θ 5e6, as Instruct-2507) */
    bytes = fx_test_read_file(teq, &len);
    REQUIRE(bytes);
    const char key[] = "qwen3.rope.freq_base";
    char *at = NULL;
    for (size_t i = 0; i + sizeof key < len && !at; i++)
        if (!memcmp(bytes + i, key, sizeof key - 1)) at = bytes + i + sizeof key - 1 + 4; /* past the type */
    REQUIRE(at);
    float theta = 5e6f;
    memcpy(at, &theta, 4);
    snprintf(bad, sizeof bad, "%s/instruct.gguf", fx_test_tmpdir());
    REQUIRE(fx_test_write_file(bad, bytes, len) == 0);
    free(bytes);
    snprintf(args, sizeof args, "--text-encoder '%s'", bad);
    expect_cli_failure(__LINE__, dir, args, "qwen3.rope.freq_base is 5e+06", "rope_theta 1e+06");
    /* bad --quant value: a usage error */
    char cmd[4 * PATH_MAX], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' -d '%s' --quant q4_2 -p x -o '%s/x.png'", fx_test_flux_bin(), dir, fx_test_tmpdir());
    CHECK(fx_test_run(cmd, &out) == 2 && strstr(out, "--quant: 'q4_2' is not a quantization type"));
    free(out);
}

/* Set the ggml type id of tensor `name` in a GGUF image (its info record:
 * u64 length, name, u32 n_dims, u64 ne[n_dims], u32 type); 0 or -1. */
static int patch_tensor_type(char *bytes, size_t len, const char *name, uint32_t type) {
    const size_t n = strlen(name);
    for (size_t i = 0; i + 8 + n + 4 <= len; i++) {
        uint64_t l;
        memcpy(&l, bytes + i, 8);
        if (l != n || memcmp(bytes + i + 8, name, n)) continue;
        uint32_t nd;
        memcpy(&nd, bytes + i + 8 + n, 4);
        size_t at = i + 8 + n + 4 + 8 * (size_t)nd;
        if (nd < 1 || nd > 4 || at + 4 > len) return -1;
        memcpy(bytes + at, &type, 4);
        return 0;
    }
    return -1;
}

/* Issue 24.3: a type flux.c cannot decode (MXFP4, ggml id 39: half the
 * bytes of Q8_0, so the patched tensors still fit their slots) fails only
 * when the model reads the tensor: in Qwen3 layer 27 (klein runs 0..26)
 * the file loads and runs as before; in layer 0 the load fails naming the
 * file, the tensor and the type. */
TEST(gguf_undecodable_type_fails_only_when_read) {
    const char *dir = model();
    REQUIRE(dir);
    char teq[PATH_MAX], bad[PATH_MAX], args[2 * PATH_MAX];
    const char *a = quantize(dir, "text-encoder", "q8_0", "te.gguf");
    REQUIRE(a);
    snprintf(teq, sizeof teq, "%s", a);
    size_t len = 0;
    char *bytes = fx_test_read_file(teq, &len);
    REQUIRE(bytes);
    static const char *const layer27[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    for (size_t i = 0; i < sizeof layer27 / sizeof *layer27; i++) {
        char name[64];
        snprintf(name, sizeof name, "blk.27.%s.weight", layer27[i]);
        CHECK_MSG(patch_tensor_type(bytes, len, name, 39) == 0, "no tensor %s", name);
    }
    snprintf(bad, sizeof bad, "%s/te-mxfp4-unread.gguf", fx_test_tmpdir());
    REQUIRE(fx_test_write_file(bad, bytes, len) == 0);
    flux_image *x = generate(dir, NULL, teq, NULL, FLUX_PRECISION_DEFAULT);
    flux_image *y = generate(dir, NULL, bad, NULL, FLUX_PRECISION_DEFAULT);
    CHECK(x && y && fx_test_same_pixels(x, y));
    flux_image_free(x), flux_image_free(y);
    REQUIRE(patch_tensor_type(bytes, len, "blk.0.attn_k.weight", 39) == 0);
    snprintf(bad, sizeof bad, "%s/te-mxfp4-read.gguf", fx_test_tmpdir());
    REQUIRE(fx_test_write_file(bad, bytes, len) == 0);
    free(bytes);
    snprintf(args, sizeof args, "--text-encoder '%s'", bad);
    expect_cli_failure(__LINE__, dir, args, "te-mxfp4-read.gguf: tensor 'model.layers.0.self_attn.k_proj.weight' (from rows 0..16 of 'blk.0.attn_k.weight')",
                       "has dtype MXFP4, which flux.c cannot decode");
}

TEST(gguf_quantize_cli_errors) {
    const char *dir = model();
    REQUIRE(dir);
    char cmd[4 * PATH_MAX], *out = NULL;
    const char *bin = fx_test_flux_bin(), *tmp = fx_test_tmpdir();
    static const struct {
        const char *args, *frag;
        int rc;
    } cases[] = {
        {"--type q4_k --component transformer", "missing -o", 2},
        {"--type q4_k --component vae -o x.gguf", "'vae' is not transformer or text-encoder", 2},
        {"--type iq4_xs --component transformer -o x.gguf", "'iq4_xs' is not a quantization type", 2},
        {"--type q4_k --component transformer -o x.safetensors", "does not end in .gguf", 2},
        {"--type q4_k --component transformer -o /nonexistent/x.gguf", "does not exist", 2},
        {"--type q4_k --component transformer -o x.gguf --bogus", "unknown argument '--bogus'", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(cmd, sizeof cmd, "cd '%s' && '%s' quantize -d '%s' %s", tmp, bin, dir, cases[i].args);
        int rc = fx_test_run(cmd, &out);
        CHECK_MSG(rc == cases[i].rc && strstr(out, cases[i].frag), "%s: exit %d: %s", cases[i].args, rc, out);
        free(out);
    }
    /* an output name the file system cannot hold: refused before any
     * tensor is quantized (it used to fail only at the final rename) */
    char name[301];
    memset(name, 'q', sizeof name - 6);
    memcpy(name + sizeof name - 6, ".gguf", 6);
    snprintf(cmd, sizeof cmd, "'%s' quantize -v -d '%s' --type q8_0 --component transformer -o '%s/%s'", bin, dir,
             tmp, name);
    int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 2 && strstr(out, "-o: file name of 300 characters is longer than this file system allows") &&
                  !strstr(out, "quantizing"),
              "long -o: exit %d: %s", rc, out);
    free(out);
    /* a broken source: exit 1 and nothing written */
    char broken[PATH_MAX];
    snprintf(broken, sizeof broken, "%s/broken.safetensors", tmp);
    REQUIRE(fx_test_write_file(broken, "\x10\0\0\0\0\0\0\0{\"a\":1}", 15) == 0);
    snprintf(cmd, sizeof cmd, "'%s' quantize -d '%s' --type q8_0 --component transformer --transformer '%s' -o '%s/o.gguf'",
             bin, dir, broken, tmp);
    rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 1 && strstr(out, "broken.safetensors"), "exit %d: %s", rc, out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s/o.gguf", tmp);
    CHECK(!fx_test_file_exists(cmd));
    CHECK_EQ_INT(fx_test_dir_entries(tmp), 2); /* model, broken.safetensors: no temporary left */
}

/* Leftovers of the 2026-11-28 audit around `flux quantize`:
 *  - Ctrl-C twice: the first cancels, the second (while the partial file is
 *    being removed) used to kill the process and leave the hidden temporary
 *    file behind; now it is acknowledged, the run ends 130, nothing stays;
 *  - a write that fails for lack of room names the reason (a 256 KiB tmpfs
 *    as root, else a file-size limit), and leaves nothing;
 *  - `--help > /dev/full` exits 1 (the text was lost);
 *  - flux_quantize_options_init(NULL) does nothing, as flux.h promises. */
TEST(gguf_quantize_interrupted_twice_leaves_nothing) {
    /* a transformer large enough (~100 MB) for the signals to land mid-run */
    const char *dir = fx_gen_model_in_tmpdir("big", "--preset tiny --heads 8 --head-dim 128 --axes 32,32,32,32 "
                                                    "--double 2 --single 6");
    REQUIRE(dir);
    char out_dir[PATH_MAX], out[PATH_MAX + 16];
    snprintf(out_dir, sizeof out_dir, "%s/out", fx_test_tmpdir());
    REQUIRE(mkdir(out_dir, 0755) == 0);
    snprintf(out, sizeof out, "%s/t.gguf", out_dir);
    int err_pipe[2];
    REQUIRE(pipe(err_pipe) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        signal(SIGINT, SIG_DFL); /* a background runner may have left it ignored */
        dup2(err_pipe[1], STDERR_FILENO);
        close(err_pipe[0]);
        execl(fx_test_flux_bin(), fx_test_flux_bin(), "quantize", "-v", "-d", dir, "--type", "q4_k", "--component",
              "transformer", "-o", out, (char *)NULL);
        _exit(127);
    }
    close(err_pipe[1]);
    char log[8192];
    size_t len = 0;
    int signalled = 0;
    while (!strstr(log, "quantizing:")) { /* the first progress line */
        ssize_t k = read(err_pipe[0], log + len, sizeof log - 1 - len);
        if (k <= 0) break;
        len += (size_t)k;
        log[len] = '\0';
    }
    /* then Ctrl-C every millisecond until it ends: the later ones land
     * while the first unwinds */
    int status = 0;
    signalled = strstr(log, "quantizing:") != NULL;
    for (int i = 0; signalled && i < 10000 && waitpid(pid, &status, WNOHANG) == 0; i++) {
        kill(pid, SIGINT);
        usleep(1000);
    }
    if (!signalled) waitpid(pid, &status, 0);
    for (ssize_t k; (k = read(err_pipe[0], log + len, sizeof log - 1 - len)) > 0;) len += (size_t)k, log[len] = '\0';
    close(err_pipe[0]);
    REQUIRE_MSG(signalled, "no progress line: %s", log);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 130, "status %d: %s", status, log);
    CHECK_MSG(strstr(log, "interrupted; nothing was written"), "%s", log);
    CHECK_MSG(fx_test_dir_entries(out_dir) == 0, "%d files left in the output folder: %s",
              fx_test_dir_entries(out_dir), log);
}

TEST(gguf_quantize_reports_why_a_write_fails) {
    const char *dir = model();
    REQUIRE(dir);
    const char *bin = fx_test_flux_bin(), *tmp = fx_test_tmpdir();
    char small[PATH_MAX], cmd[4 * PATH_MAX], *out = NULL;
    snprintf(small, sizeof small, "%s/small", tmp);
    REQUIRE(mkdir(small, 0755) == 0);
    char mnt[PATH_MAX + 64];
    snprintf(mnt, sizeof mnt, "mount -t tmpfs -o size=256k tmpfs '%s' 2>/dev/null", small);
    const int tmpfs = geteuid() == 0 && fx_test_run(mnt, NULL) == 0;
    snprintf(cmd, sizeof cmd, "%s'%s' quantize -q -d '%s' --type q8_0 --component transformer -o '%s/t.gguf'",
             tmpfs ? "" : "ulimit -f 256 && ", bin, dir, small);
    int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 1 && out &&
                  (strstr(out, tmpfs ? "No space left on device" : "File too large")),
              "%s: exit %d: %s", tmpfs ? "tmpfs" : "ulimit -f", rc, out ? out : "");
    free(out);
    CHECK_MSG(fx_test_dir_entries(small) == 0, "%d files left", fx_test_dir_entries(small));
    if (tmpfs) {
        snprintf(mnt, sizeof mnt, "umount '%s'", small);
        fx_test_run(mnt, NULL);
    }
    snprintf(cmd, sizeof cmd, "'%s' quantize --help > /dev/full", bin);
    CHECK_EQ_INT(fx_test_run(cmd, NULL), 1);
    flux_quantize_options_init(NULL); /* no crash */
}
