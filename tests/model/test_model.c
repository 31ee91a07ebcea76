/* test_model.c — flux_load on the golden tiny model folders: configs, variant
 * detection, tensor-table checks, and exact messages for broken copies. */
#include "tests/test.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/model/model.h"

static flux_ctx *new_ctx(void) {
    flux_options o;
    flux_options_init(&o);
    o.threads = 1;
    return flux_new(&o);
}

/* The absolute path of tests/golden/model (symlink targets must be absolute). */
static const char *golden_model(void) {
    static char path[PATH_MAX];
    if (!realpath(fx_test_path("golden/model"), path)) fx_test_fail(__FILE__, __LINE__, "no golden model");
    return path;
}

/* A copy of the golden model under the temp folder: every top-level entry a
 * symlink, so a test can replace single files. */
static const char *clone_model(const char *name) {
    static char dst[PATH_MAX];
    static const char *items[] = {"model_index.json", "scheduler", "text_encoder", "tokenizer", "transformer", "vae"};
    snprintf(dst, sizeof dst, "%s/%s", fx_test_tmpdir(), name);
    mkdir(dst, 0755);
    for (size_t i = 0; i < sizeof items / sizeof *items; i++) {
        char from[PATH_MAX + 64], to[PATH_MAX + 64];
        snprintf(from, sizeof from, "%s/%s", golden_model(), items[i]);
        snprintf(to, sizeof to, "%s/%s", dst, items[i]);
        if (symlink(from, to)) fx_test_fail(__FILE__, __LINE__, "symlink %s", to);
    }
    return dst;
}

/* Turn the component symlink into a real folder of per-file symlinks. */
static void unshare(const char *model, const char *component) {
    char src[PATH_MAX + 64], dst[PATH_MAX + 64];
    snprintf(src, sizeof src, "%s/%s", golden_model(), component);
    snprintf(dst, sizeof dst, "%s/%s", model, component);
    unlink(dst);
    mkdir(dst, 0755);
    DIR *d = opendir(src);
    if (!d) { fx_test_fail(__FILE__, __LINE__, "opendir %s", src); return; }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char from[PATH_MAX + 400], to[PATH_MAX + 400];
        snprintf(from, sizeof from, "%s/%s", src, e->d_name);
        snprintf(to, sizeof to, "%s/%s", dst, e->d_name);
        if (symlink(from, to)) fx_test_fail(__FILE__, __LINE__, "symlink %s", to);
    }
    closedir(d);
}

/* Replace model/<rel> by a copy of the golden file with the first `old`
 * replaced by `new_text` (same length for binary files). */
static void patch_file(const char *model, const char *rel, const char *old, const char *new_text) {
    char src[PATH_MAX + 128], dst[PATH_MAX + 128];
    snprintf(src, sizeof src, "%s/%s", golden_model(), rel);
    snprintf(dst, sizeof dst, "%s/%s", model, rel);
    size_t len;
    char *data = fx_test_read_file(src, &len);
    if (!data) { fx_test_fail(__FILE__, __LINE__, "read %s", src); return; }
    char *hit = NULL;
    size_t lo = strlen(old), ln = strlen(new_text);
    for (size_t i = 0; i + lo <= len && !hit; i++)
        if (!memcmp(data + i, old, lo)) hit = data + i;
    if (!hit) { fx_test_fail(__FILE__, __LINE__, "'%s' not in %s", old, src); free(data); return; }
    char *out = malloc(len - lo + ln + 1);
    size_t pre = (size_t)(hit - data);
    memcpy(out, data, pre);
    memcpy(out + pre, new_text, ln);
    memcpy(out + pre + ln, hit + lo, len - pre - lo);
    unlink(dst);
    if (fx_test_write_file(dst, out, len - lo + ln)) fx_test_fail(__FILE__, __LINE__, "write %s", dst);
    free(out);
    free(data);
}

/* A clone of the golden model whose file <rel> can be replaced: the
 * component folder of rel (its first path element) is unshared. */
static const char *clone_for(const char *name, const char *rel) {
    const char *m = clone_model(name);
    const char *slash = strchr(rel, '/');
    if (slash) {
        char component[64];
        snprintf(component, sizeof component, "%.*s", (int)(slash - rel), rel);
        unshare(m, component);
    }
    return m;
}

/* A clone with <rel> patched (patch_file). */
static const char *patched_model(const char *name, const char *rel, const char *old, const char *new_text) {
    const char *m = clone_for(name, rel);
    patch_file(m, rel, old, new_text);
    return m;
}

/* A clone without <rel>. */
static const char *model_without(const char *name, const char *rel) {
    const char *m = clone_for(name, rel);
    char path[PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/%s", m, rel);
    if (unlink(path)) fx_test_fail(__FILE__, __LINE__, "unlink %s", path);
    return m;
}

/* flux_load must fail with code and exactly (or containing) the message. */
static void expect_load_error(const char *dir, flux_status code, const char *msg, int exact, int line) {
    flux_ctx *ctx = new_ctx();
    flux_status st = flux_load(ctx, dir, NULL);
    if (st != code)
        fx_test_fail(__FILE__, line, "status %s, want %s (%s)", flux_status_name(st), flux_status_name(code),
                     flux_error(ctx));
    if (exact ? strcmp(flux_error(ctx), msg) != 0 : strstr(flux_error(ctx), msg) == NULL)
        fx_test_fail(__FILE__, line, "message '%s' %s '%s'", flux_error(ctx), exact ? "is not" : "lacks", msg);
    flux_model_info info;
    if (flux_get_model_info(ctx, &info) != FLUX_ERR_STATE) fx_test_fail(__FILE__, line, "a failed load left a model");
    flux_free(ctx);
}
#define LOAD_FAILS_EXACT(dir, code, msg) expect_load_error(dir, code, msg, 1, __LINE__)
#define LOAD_FAILS(dir, code, msg) expect_load_error(dir, code, msg, 0, __LINE__)

TEST(model_load_golden_distilled) {
    flux_ctx *ctx = new_ctx();
    REQUIRE(ctx);
    flux_model_info info;
    CHECK(flux_get_model_info(ctx, &info) == FLUX_ERR_STATE);
    REQUIRE_MSG(flux_load(ctx, fx_test_path("golden/model"), NULL) == FLUX_OK, "%s", flux_error(ctx));
    REQUIRE(flux_get_model_info(ctx, &info) == FLUX_OK);
    CHECK(!strcmp(info.name, "model"));
    CHECK_EQ_INT(info.distilled, 1);
    CHECK_EQ_INT(info.hidden, 64);
    CHECK_EQ_INT(info.heads, 2);
    CHECK_EQ_INT(info.head_dim, 32);
    CHECK_EQ_INT(info.double_blocks, 2);
    CHECK_EQ_INT(info.single_blocks, 2);
    CHECK_EQ_INT(info.text_dim, 48);
    CHECK_EQ_INT(info.text_hidden, 16);
    CHECK_EQ_INT(info.text_layers_used, 27);
    CHECK_EQ_INT(info.latent_channels, 128);
    CHECK_EQ_INT(info.default_steps, 4);
    CHECK(info.default_guidance == 1.0f);

    const struct fx_model *m = ctx->model;
    REQUIRE(m);
    /* transformer/config.json */
    CHECK_EQ_INT(m->dit.in_channels, 128);
    CHECK_EQ_INT(m->dit.out_channels, 128); /* null → in_channels */
    CHECK_EQ_INT(m->dit.mlp_hidden, 192);
    CHECK(m->dit.mlp_ratio == 3.0);
    CHECK_EQ_INT(m->dit.timestep_dim, 256);
    CHECK(m->dit.axes_dims[0] == 8 && m->dit.axes_dims[3] == 8);
    CHECK(m->dit.rope_theta == 2000.0 && m->dit.eps == 1e-6f && m->dit.patch_size == 1);
    /* text_encoder/config.json: head_dim explicit and ≠ hidden / heads */
    CHECK_EQ_INT(m->qwen3.hidden, 16);
    CHECK_EQ_INT(m->qwen3.intermediate, 48);
    CHECK_EQ_INT(m->qwen3.layers, 28);
    CHECK_EQ_INT(m->qwen3.layers_used, 27);
    CHECK_EQ_INT(m->qwen3.heads, 2);
    CHECK_EQ_INT(m->qwen3.kv_heads, 1);
    CHECK_EQ_INT(m->qwen3.head_dim, 16);
    CHECK_EQ_INT(m->qwen3.vocab, 151936);
    CHECK(m->qwen3.rope_theta == 1e6 && m->qwen3.rms_eps == 1e-6f && m->qwen3.tie_word_embeddings == 1);
    /* vae/config.json */
    CHECK_EQ_INT(m->vae.levels, 4);
    CHECK(m->vae.block_out_channels[0] == 32 && m->vae.block_out_channels[1] == 32 &&
          m->vae.block_out_channels[2] == 64 && m->vae.block_out_channels[3] == 64);
    CHECK(m->vae.decoder_block_out_channels[2] == 64);
    CHECK_EQ_INT(m->vae.layers_per_block, 1);
    CHECK_EQ_INT(m->vae.latent_channels, 32);
    CHECK_EQ_INT(m->vae.norm_num_groups, 32);
    CHECK(m->vae.patch[0] == 2 && m->vae.patch[1] == 2);
    CHECK(m->vae.batch_norm_eps == 1e-4f && m->vae.use_quant_conv && m->vae.use_post_quant_conv &&
          m->vae.mid_block_add_attention);
    /* scheduler */
    CHECK_EQ_INT(m->sched.num_train_timesteps, 1000);
    CHECK(m->sched.use_dynamic_shifting && m->sched.exponential_shift);
    CHECK(m->sched.base_shift == 0.5 && m->sched.max_shift == 1.15 && m->sched.shift == 3.0);
    CHECK(m->sched.base_image_seq_len == 256 && m->sched.max_image_seq_len == 4096);
    /* files */
    const char *tp = m->tokenizer_path;
    CHECK(strlen(tp) > 24 && !strcmp(tp + strlen(tp) - 24, "tokenizer/tokenizer.json"));
    CHECK_EQ_INT(fx_wset_count(m->transformer_w), 49);
    CHECK_EQ_INT(fx_wset_count(m->vae_w), 183);
    CHECK_EQ_INT(fx_wset_count(m->text_encoder_w), 310);
    /* weights are usable right away (transformer, VAE) */
    fx_weight w;
    fx_err err;
    fx_err_clear(&err);
    CHECK(fx_wset_linear(m->transformer_w, "x_embedder.weight", 64, 128, &w, &err) == FLUX_OK);
    CHECK(w.dtype == FX_DTYPE_BF16 && w.data != NULL);
    CHECK(fx_wset_conv(m->vae_w, "decoder.conv_in.weight", 64, 32, 3, 3, &w, &err) == FLUX_OK && w.k == 288);
    /* the text encoder is lazy: headers only until asked for */
    CHECK(!fx_wset_data_loaded(m->text_encoder_w));
    fx_wset *te = fx_model_text_encoder_weights(ctx->model, &err);
    REQUIRE_MSG(te, "%s", err.msg);
    CHECK(fx_wset_data_loaded(te));
    CHECK(fx_wset_linear(te, "model.layers.0.self_attn.q_proj.weight", 32, 16, &w, &err) == FLUX_OK);
    fx_model_release_text_encoder_weights(ctx->model);
    CHECK(!fx_wset_data_loaded(m->text_encoder_w));
    CHECK(fx_model_text_encoder_weights(ctx->model, &err) == te && fx_wset_data_loaded(te));
    /* loading again replaces the model */
    REQUIRE(flux_load(ctx, fx_test_path("golden/model-base"), NULL) == FLUX_OK);
    CHECK(flux_get_model_info(ctx, &info) == FLUX_OK && info.distilled == 0);
    flux_free(ctx);
}

TEST(model_load_golden_base) {
    flux_ctx *ctx = new_ctx();
    REQUIRE_MSG(flux_load(ctx, fx_test_path("golden/model-base"), NULL) == FLUX_OK, "%s", flux_error(ctx));
    flux_model_info info;
    REQUIRE(flux_get_model_info(ctx, &info) == FLUX_OK);
    CHECK(!strcmp(info.name, "model-base"));
    CHECK_EQ_INT(info.distilled, 0); /* no is_distilled key → base */
    CHECK_EQ_INT(info.default_steps, 50);
    CHECK(info.default_guidance == 4.0f);
    CHECK_EQ_INT(info.hidden, 64);
    /* forcing the variant */
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.distilled = 1;
    REQUIRE(flux_load(ctx, fx_test_path("golden/model-base"), &lo) == FLUX_OK);
    CHECK(flux_get_model_info(ctx, &info) == FLUX_OK && info.distilled == 1 && info.default_steps == 4);
    lo.distilled = 0;
    REQUIRE(flux_load(ctx, fx_test_path("golden/model"), &lo) == FLUX_OK);
    CHECK(flux_get_model_info(ctx, &info) == FLUX_OK && info.distilled == 0);
    flux_free(ctx);
}

TEST(model_load_without_mmap_eager_text_encoder) {
    flux_options o;
    flux_options_init(&o);
    o.threads = 1;
    o.use_mmap = 0;
    flux_ctx *ctx = flux_new(&o);
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.lazy_text_encoder = 0;
    REQUIRE_MSG(flux_load(ctx, fx_test_path("golden/model"), &lo) == FLUX_OK, "%s", flux_error(ctx));
    CHECK(fx_wset_data_loaded(ctx->model->text_encoder_w));
    fx_err err;
    float *nw = NULL;
    CHECK(fx_wset_f32(ctx->model->text_encoder_w, "model.layers.26.input_layernorm.weight", &FX_SHAPE(16), &nw, NULL,
                      &err) == FLUX_OK);
    free(nw);
    flux_free(ctx);
}

TEST(model_load_missing_paths) {
    LOAD_FAILS_EXACT("/nonexistent/FLUX.2-klein-4B", FLUX_ERR_IO,
                     "model folder /nonexistent/FLUX.2-klein-4B: No such file or directory");
    LOAD_FAILS(fx_test_path("golden/model/model_index.json"), FLUX_ERR_IO, "is not a folder");
    char empty[PATH_MAX];
    snprintf(empty, sizeof empty, "%s/empty", fx_test_tmpdir());
    mkdir(empty, 0755);
    LOAD_FAILS(empty, FLUX_ERR_IO, "cannot open ");
    LOAD_FAILS(empty, FLUX_ERR_IO, "empty/model_index.json: No such file or directory");
    flux_ctx *ctx = new_ctx();
    CHECK(flux_load(ctx, NULL, NULL) == FLUX_ERR_INVALID_ARG);
    CHECK(flux_load(ctx, "", NULL) == FLUX_ERR_INVALID_ARG);
    flux_free(ctx);
    CHECK(flux_load(NULL, "x", NULL) == FLUX_ERR_INVALID_ARG);

    const char *m = model_without("no_vae_weights", "vae/diffusion_pytorch_model.safetensors");
    LOAD_FAILS(m, FLUX_ERR_IO, "vae/diffusion_pytorch_model.safetensors (nor a sharded");
    m = model_without("no_shard", "text_encoder/model-00002-of-00002.safetensors");
    LOAD_FAILS(m, FLUX_ERR_IO,
               "text_encoder/model.safetensors.index.json: shard 'model-00002-of-00002.safetensors' (listed for "
               "tensor 'model.layers.14.input_layernorm.weight'): cannot open ");
    m = model_without("no_tokenizer", "tokenizer");
    LOAD_FAILS(m, FLUX_ERR_IO, "no_tokenizer/tokenizer/tokenizer.json: No such file or directory");
    m = model_without("no_scheduler", "scheduler");
    LOAD_FAILS(m, FLUX_ERR_IO, "no_scheduler/scheduler/scheduler_config.json: No such file or directory");
}

/* One tensor's shape altered in a copy: the exact message. */
TEST(model_load_altered_tensor_shape) {
    /* same header length: [64,128] → [128,64] keeps the byte count */
    const char *m = patched_model("bad_shape", "transformer/diffusion_pytorch_model.safetensors",
                                  "\"x_embedder.weight\":{\"dtype\":\"BF16\",\"shape\":[64,128]",
                                  "\"x_embedder.weight\":{\"dtype\":\"BF16\",\"shape\":[128,64]");
    LOAD_FAILS_EXACT(m, FLUX_ERR_MODEL,
                     "transformer/diffusion_pytorch_model.safetensors: tensor 'x_embedder.weight' has shape [128, 64], "
                     "expected [64, 128]");

    m = patched_model("renamed_tensor", "transformer/diffusion_pytorch_model.safetensors",
                      "\"proj_out.weight\"", "\"proj_ou2.weight\"");
    LOAD_FAILS_EXACT(m, FLUX_ERR_MODEL,
                     "transformer/diffusion_pytorch_model.safetensors: tensor 'proj_out.weight' not found");

    /* the VAE table follows block_out_channels: the decoder's 64→32 shortcut */
    m = patched_model("bad_vae", "vae/diffusion_pytorch_model.safetensors",
                      "\"decoder.up_blocks.2.resnets.0.conv_shortcut.weight\":{\"dtype\":\"BF16\",\"shape\":[32,64,1,1]",
                      "\"decoder.up_blocks.2.resnets.0.conv_shortcut.weight\":{\"dtype\":\"BF16\",\"shape\":[64,32,1,1]");
    LOAD_FAILS_EXACT(m, FLUX_ERR_MODEL,
                     "vae/diffusion_pytorch_model.safetensors: tensor 'decoder.up_blocks.2.resnets.0.conv_shortcut."
                     "weight' has shape [64, 32, 1, 1], expected [32, 64, 1, 1]");

    /* a corrupt header is a format error naming the file */
    m = patched_model("bad_header", "vae/diffusion_pytorch_model.safetensors",
                      "\"data_offsets\":[0,8]", "\"data_offsets\":[0,9]");
    LOAD_FAILS(m, FLUX_ERR_FORMAT, "vae/diffusion_pytorch_model.safetensors: tensor 'bn.num_batches_tracked': shape [] "
                                   "× I64 = 8 bytes, but data_offsets [0, 9] span 9 bytes");
}

/* Configs drive the expected shapes and are validated. */
TEST(model_load_config_errors) {
    /* explicit head_dim is used (not hidden / heads): q_proj must be [heads·8, 16] */
    const char *m = patched_model("te_head_dim", "text_encoder/config.json", "\"head_dim\": 16", "\"head_dim\": 8");
    LOAD_FAILS_EXACT(m, FLUX_ERR_MODEL,
                     "text_encoder/model-00001-of-00002.safetensors: tensor 'model.layers.0.self_attn.q_proj.weight' "
                     "has shape [32, 16], expected [16, 16]");

    /* absent head_dim → hidden / heads = 8 (HF default), so the real q_proj no longer fits */
    m = patched_model("te_no_head_dim", "text_encoder/config.json", "\"head_dim\": 16,", "");
    LOAD_FAILS(m, FLUX_ERR_MODEL, "tensor 'model.layers.0.self_attn.q_proj.weight' has shape [32, 16], expected [16, 16]");

    m = patched_model("axes", "transformer/config.json", "8\n  ]", "4\n  ]");
    LOAD_FAILS_EXACT(m, FLUX_ERR_FORMAT,
                     "transformer/config.json: \"axes_dims_rope\" [8, 8, 8, 4] sums to 28, but \"attention_head_dim\" is 32");

    m = patched_model("guidance", "transformer/config.json", "\"guidance_embeds\": false", "\"guidance_embeds\": true");
    LOAD_FAILS(m, FLUX_ERR_UNSUPPORTED, "transformer/config.json: \"guidance_embeds\" = true");

    m = patched_model("heads_type", "transformer/config.json",
                      "\"num_attention_heads\": 2", "\"num_attention_heads\": \"2\"");
    LOAD_FAILS_EXACT(m, FLUX_ERR_FORMAT, "transformer/config.json: \"num_attention_heads\" is a string, expected an integer");

    m = patched_model("json", "transformer/config.json", "\"eps\": 1e-06,", "\"eps\": 1e-06");
    LOAD_FAILS(m, FLUX_ERR_FORMAT, "transformer/config.json: line 12, column 3: expected ',' or '}' in object");

    m = patched_model("vae_groups", "vae/config.json", "\"norm_num_groups\": 32", "\"norm_num_groups\": 24");
    LOAD_FAILS_EXACT(m, FLUX_ERR_FORMAT,
                     "vae/config.json: \"block_out_channels\"[0] = 32 is not a multiple of \"norm_num_groups\" = 24");

    m = patched_model("vae_levels", "vae/config.json", "\"layers_per_block\": 1", "\"layers_per_block\": 2");
    LOAD_FAILS_EXACT(m, FLUX_ERR_MODEL, "vae/diffusion_pytorch_model.safetensors: tensor "
                                        "'encoder.down_blocks.0.resnets.1.norm1.weight' not found");

    m = patched_model("latent", "vae/config.json", "\"latent_channels\": 32", "\"latent_channels\": 16");
    LOAD_FAILS(m, FLUX_ERR_FORMAT, "\"in_channels\" = 128, but the VAE packs 16 latent channels");

    m = patched_model("joint", "transformer/config.json", "\"joint_attention_dim\": 48", "\"joint_attention_dim\": 32");
    LOAD_FAILS(m, FLUX_ERR_FORMAT, "\"joint_attention_dim\" = 32, but the text encoder gives 3 stacked hidden states");

    m = patched_model("layers", "text_encoder/config.json", "\"num_hidden_layers\": 28", "\"num_hidden_layers\": 20");
    LOAD_FAILS(m, FLUX_ERR_FORMAT, "\"num_hidden_layers\" = 20, but klein reads hidden state 27");

    m = patched_model("gqa", "text_encoder/config.json", "\"num_key_value_heads\": 1", "\"num_key_value_heads\": 3");
    LOAD_FAILS(m, FLUX_ERR_FORMAT, "\"num_attention_heads\" = 2 is not a multiple of \"num_key_value_heads\" = 3");

    m = patched_model("distilled_type", "model_index.json", "\"is_distilled\": true", "\"is_distilled\": \"yes\"");
    LOAD_FAILS_EXACT(m, FLUX_ERR_FORMAT, "model_index.json: \"is_distilled\" is a string, expected true or false");

    m = patched_model("distilled_false", "model_index.json", "\"is_distilled\": true", "\"is_distilled\": false");
    flux_ctx *ctx = new_ctx();
    flux_model_info info;
    REQUIRE_MSG(flux_load(ctx, m, NULL) == FLUX_OK, "%s", flux_error(ctx));
    CHECK(flux_get_model_info(ctx, &info) == FLUX_OK && info.distilled == 0);
    /* a failing load after a good one leaves no model behind */
    CHECK(flux_load(ctx, "/nonexistent", NULL) == FLUX_ERR_IO);
    CHECK(flux_get_model_info(ctx, &info) == FLUX_ERR_STATE);
    /* a missing single-file transformer is named (test_single_file.c has the rest) */
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.transformer_file = "flux-2-klein-4b.safetensors";
    CHECK(flux_load(ctx, m, &lo) == FLUX_ERR_IO);
    CHECK(strstr(flux_error(ctx), "flux-2-klein-4b.safetensors") != NULL);
    flux_free(ctx);
}

/* ------------------------------------------------------------ FIFOs, replaced files */

typedef struct fifo_case {
    const char *model, *rel;
    int tokenize; /* tokenizer.json is read on first use, not at load */
} fifo_case;

static void load_with_fifo(void *arg) {
    const fifo_case *c = arg;
    flux_ctx *ctx = new_ctx();
    flux_status st = flux_load(ctx, c->model, NULL);
    if (c->tokenize && st == FLUX_OK) {
        int32_t ids[16];
        int n = 0;
        st = flux_tokenize(ctx, "a cat", 1, ids, 16, &n);
    }
    CHECK_MSG(st == FLUX_ERR_IO, "%s: %s (%s)", c->rel, flux_status_name(st), flux_error(ctx));
    CHECK_MSG(strstr(flux_error(ctx), "not a regular file (a FIFO)") && strstr(flux_error(ctx), c->rel),
              "%s: %s", c->rel, flux_error(ctx));
    flux_free(ctx);
}

/* A model file replaced by a FIFO (nobody writing) gives "not a regular
 * file" at once; it used to hang in open(). */
TEST(model_load_fifo_instead_of_a_file) {
    static const struct {
        const char *rel;
        int tokenize;
    } cases[] = {
        {"model_index.json", 0},
        {"transformer/config.json", 0},
        {"transformer/diffusion_pytorch_model.safetensors", 0},
        {"text_encoder/model-00002-of-00002.safetensors", 0}, /* a shard: headers are read at load */
        {"text_encoder/model.safetensors.index.json", 0},
        {"vae/diffusion_pytorch_model.safetensors", 0},
        {"tokenizer/tokenizer.json", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char name[32], path[PATH_MAX + 128];
        snprintf(name, sizeof name, "fifo%zu", i);
        const char *m = model_without(name, cases[i].rel);
        snprintf(path, sizeof path, "%s/%s", m, cases[i].rel);
        REQUIRE(mkfifo(path, 0644) == 0);
        fifo_case c = {m, cases[i].rel, cases[i].tokenize};
        CHECK_MSG(fx_test_fork(load_with_fifo, &c, 20) == 0, "case %s", cases[i].rel);
    }
}

/* Swap the data_offsets of two same-shaped tensors in a safetensors header
 * (same text length: same file size), writing a new file over path. */
static void swap_offsets(const char *src, const char *dst, const char *a, const char *b) {
    size_t len;
    char *data = fx_test_read_file(src, &len);
    REQUIRE(data);
    char *pa = strstr(data + 8, a), *pb = strstr(data + 8, b);
    REQUIRE(pa && pb);
    pa = strstr(pa, "\"data_offsets\":["), pb = strstr(pb, "\"data_offsets\":[");
    REQUIRE(pa && pb);
    size_t la = strcspn(pa, "]"), lb = strcspn(pb, "]");
    REQUIRE(la == lb);
    char tmp[64];
    REQUIRE(la < sizeof tmp);
    memcpy(tmp, pa, la), memcpy(pa, pb, la), memcpy(pb, tmp, la);
    char next[PATH_MAX + 256];
    snprintf(next, sizeof next, "%s.new", dst);
    REQUIRE(fx_test_write_file(next, data, len) == 0);
    REQUIRE(rename(next, dst) == 0); /* a new file (inode) at the path */
    free(data);
}

/* The text encoder's data is mapped on use and dropped after each prompt;
 * a shard replaced meanwhile by another file of the same size (here: two
 * tensors' offsets swapped) was mapped through the old header, and the
 * embedding cache kept answering for the old weights. Now the next call
 * sees the change (device, inode, size, mtime) and loads the model again:
 * the result is what a fresh context computes from the new files. */
TEST(model_replaced_text_encoder_shard_is_loaded_again) {
    const char *rel = "text_encoder/model-00002-of-00002.safetensors";
    const char *m = clone_for("replaced", rel);
    char path[PATH_MAX + 128], golden[PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/%s", m, rel);
    snprintf(golden, sizeof golden, "%s/%s", golden_model(), rel);
    unlink(path);
    size_t len;
    char *bytes = fx_test_read_file(golden, &len);
    REQUIRE(bytes && fx_test_write_file(path, bytes, len) == 0);
    free(bytes);
    flux_options o;
    flux_options_init(&o);
    o.threads = 1;
    o.no_disk_cache = 1;
    flux_ctx *ctx = flux_new(&o), *fresh = flux_new(&o);
    REQUIRE(ctx && fresh && flux_load(ctx, m, NULL) == FLUX_OK);
    flux_model_info info;
    REQUIRE(flux_get_model_info(ctx, &info) == FLUX_OK);
    const size_t n = (size_t)FLUX_TEXT_TOKENS * info.text_dim;
    float *before = malloc(n * sizeof(float)), *after = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    REQUIRE(before && after && want);
    REQUIRE(flux_encode_text(ctx, "a dog", before) == FLUX_OK);
    flux_release_text_encoder(ctx); /* as after every generation */
    swap_offsets(golden, path, "\"model.layers.20.mlp.gate_proj.weight\"", "\"model.layers.20.mlp.up_proj.weight\"");
    struct stat st;
    REQUIRE(stat(path, &st) == 0 && (size_t)st.st_size == len);
    REQUIRE_MSG(flux_encode_text(ctx, "a dog", after) == FLUX_OK, "%s", flux_error(ctx));
    REQUIRE(flux_load(fresh, m, NULL) == FLUX_OK && flux_encode_text(fresh, "a dog", want) == FLUX_OK);
    CHECK_MSG(!memcmp(after, want, n * sizeof(float)), "the replaced shard was not read as it is now");
    CHECK_MSG(memcmp(after, before, n * sizeof(float)), "the old weights (or their cached result) were used");
    free(before), free(after), free(want);
    flux_free(ctx), flux_free(fresh);
}

/* ------------------------------------------------------------ unused tensors */

/* Checkpoint tensors the configuration does not use mean the config and the
 * weights disagree (a truncated config.json runs part of the model): the
 * load fails naming the first unused family. The known extras stay
 * allowed: Qwen3 layers past the 27 klein reads (up to num_hidden_layers)
 * and its final norm, the VAE's BatchNorm counter. */
TEST(model_load_unused_tensors_are_refused) {
    LOAD_FAILS(patched_model("dit_short", "transformer/config.json", "\"num_layers\": 2", "\"num_layers\": 1"),
               FLUX_ERR_MODEL,
               "transformer/diffusion_pytorch_model.safetensors: 16 tensors are not used by the model the config "
               "describes, first the family 'transformer_blocks.1.*' (tensor 'transformer_blocks.1.attn.add_k_proj."
               "weight'): the config may be truncated or belong to other weights");
    LOAD_FAILS(patched_model("dit_single", "transformer/config.json", "\"num_single_layers\": 2",
                             "\"num_single_layers\": 1"),
               FLUX_ERR_MODEL, "4 tensors are not used by the model the config describes, first the family "
                               "'single_transformer_blocks.1.*'");
    LOAD_FAILS(patched_model("te_short", "text_encoder/config.json", "\"num_hidden_layers\": 28",
                             "\"num_hidden_layers\": 27"),
               FLUX_ERR_MODEL, "first the family 'model.layers.27.*'");
    LOAD_FAILS(patched_model("vae_noattn", "vae/config.json", "\"mid_block_add_attention\": true",
                             "\"mid_block_add_attention\": false"),
               FLUX_ERR_MODEL, "vae/diffusion_pytorch_model.safetensors: 20 tensors are not used by the model the "
                               "config describes, first the family 'decoder.mid_block.attentions.0.*'");
    /* the golden model has layer 27 of 28 and model.norm.weight in its text
     * encoder, unused by klein: loads (model_load_golden_distilled) */
    flux_ctx *ctx = new_ctx();
    CHECK_MSG(flux_load(ctx, fx_test_path("golden/model"), NULL) == FLUX_OK, "%s", flux_error(ctx));
    flux_free(ctx);
}
