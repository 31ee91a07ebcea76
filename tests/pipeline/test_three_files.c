/*
 * test_three_files.c — a model from three files and no folder (flux
 * --transformer T --text-encoder TE --vae V, flux_load(ctx, NULL, lo)), as
 * a ComfyUI user has them: configs derived from the shapes equal the golden
 * folder's config files field by field, the run equals the folder run byte
 * for byte (PNG), the tokenizer's sources, and the variant hints.
 *
 * Files: the golden transformer as a BFL single file (tools/make_single_file,
 * written independently of the loader), the golden text encoder's
 * safetensors, or as a llama.cpp-style GGUF with its vocabulary
 * (tests/pipeline/qwen3_gguf_writer.py: python3, json + struct), the golden
 * VAE under BFL names (tools/gen_vae_files.py).
 */
#include "tests/test.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/model/ctx.h"
#include "src/model/model.h"
#include "src/text/tokenizer.h"

static char g_te[PATH_MAX], g_vae[PATH_MAX], g_tok[PATH_MAX], g_dir[PATH_MAX];

/* The golden transformer as a BFL file named <name>.safetensors in the temp
 * folder (static buffer), and the other two files' paths in g_te / g_vae. */
static const char *three_files(const char *name) {
    static char path[PATH_MAX];
    snprintf(g_te, sizeof g_te, "%s", fx_test_path("golden/model/text_encoder/model.safetensors.index.json"));
    snprintf(g_vae, sizeof g_vae, "%s", fx_test_path("golden/vae_files/flux2-vae-bfl.safetensors"));
    snprintf(g_tok, sizeof g_tok, "%s", fx_test_path("golden/model/tokenizer/tokenizer.json"));
    snprintf(g_dir, sizeof g_dir, "%s", fx_test_path("golden/model"));
    snprintf(path, sizeof path, "%s/%s.safetensors", fx_test_tmpdir(), name);
    char args[3 * PATH_MAX];
    snprintf(args, sizeof args, "--layout bfl -d '%s' -o '%s'", g_dir, path);
    return FX_TEST_RUN_TOOL("make_single_file", args) ? NULL : path;
}

static flux_ctx *new_ctx(void) {
    flux_options o;
    flux_options_init(&o);
    o.threads = 1;
    o.no_disk_cache = 1;
    return flux_new(&o);
}

static flux_ctx *load_files(const char *transformer, const char *tokenizer, int distilled) {
    flux_ctx *ctx = new_ctx();
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.transformer_file = transformer;
    lo.text_encoder_file = g_te;
    lo.vae_file = g_vae;
    lo.tokenizer_file = tokenizer;
    lo.distilled = distilled;
    if (!ctx || flux_load(ctx, NULL, &lo) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "three-file load: %s", ctx ? flux_error(ctx) : "no context");
        flux_free(ctx);
        return NULL;
    }
    return ctx;
}

#define SAME(field) CHECK_MSG(a->field == b->field, #field ": folder %g, derived %g", (double)a->field, (double)b->field)

TEST(three_files_configs_equal_the_folder_configs) {
    const char *t = three_files("klein-tiny");
    REQUIRE(t);
    flux_ctx *folder = new_ctx(), *files = load_files(t, g_tok, -1);
    REQUIRE(folder && files);
    REQUIRE_MSG(flux_load(folder, g_dir, NULL) == FLUX_OK, "%s", flux_error(folder));
    {
        const fx_dit_config *a = &folder->model->dit, *b = &files->model->dit;
        SAME(in_channels);
        SAME(out_channels);
        SAME(double_blocks);
        SAME(single_blocks);
        SAME(heads);
        SAME(head_dim);
        SAME(hidden);
        SAME(mlp_hidden);
        SAME(mlp_ratio);
        SAME(text_dim);
        SAME(timestep_dim);
        for (int i = 0; i < FX_DIT_ROPE_AXES; i++) {
            SAME(axes_dims[i]);
        }
        SAME(rope_theta);
        SAME(eps);
        SAME(patch_size);
    }
    {
        const fx_qwen3_config *a = &folder->model->qwen3, *b = &files->model->qwen3;
        SAME(hidden);
        SAME(intermediate);
        SAME(layers);
        SAME(layers_used);
        SAME(heads);
        SAME(kv_heads);
        SAME(head_dim);
        SAME(vocab);
        SAME(rope_theta);
        SAME(rms_eps);
        SAME(tie_word_embeddings);
        SAME(max_position_embeddings);
    }
    {
        const fx_vae_config *a = &folder->model->vae, *b = &files->model->vae;
        SAME(in_channels);
        SAME(out_channels);
        SAME(latent_channels);
        SAME(levels);
        SAME(layers_per_block);
        for (int i = 0; i < a->levels; i++) {
            SAME(block_out_channels[i]);
            SAME(decoder_block_out_channels[i]);
        }
        SAME(norm_num_groups);
        SAME(patch[0]);
        SAME(patch[1]);
        SAME(use_quant_conv);
        SAME(use_post_quant_conv);
        SAME(mid_block_add_attention);
        SAME(batch_norm_eps);
        SAME(norm_eps);
    }
    {
        const fx_sched_config *a = &folder->model->sched, *b = &files->model->sched;
        SAME(num_train_timesteps);
        SAME(use_dynamic_shifting);
        SAME(exponential_shift);
        SAME(shift);
        SAME(base_shift);
        SAME(max_shift);
        SAME(base_image_seq_len);
        SAME(max_image_seq_len);
    }
    CHECK(files->model->dir == NULL);
    CHECK_MSG(!strcmp(files->model->name, "klein-tiny"), "name %s", files->model->name);
    flux_free(folder);
    flux_free(files);
}

static int run(const char *args, char **out) {
    char cmd[8 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "'%s' %s </dev/null", fx_test_flux_bin(), args);
    return fx_test_run(cmd, out);
}

/* A folder whose entries link to the golden model's (its own name is the
 * model's: a symlinked folder would resolve to "model"); 0 on success. */
static int linked_folder(const char *folder) {
    static const char *const items[] = {"model_index.json", "scheduler", "text_encoder", "tokenizer", "transformer", "vae"};
    if (mkdir(folder, 0755)) return -1;
    for (size_t i = 0; i < sizeof items / sizeof *items; i++) {
        char from[PATH_MAX + 32], to[2 * PATH_MAX];
        snprintf(from, sizeof from, "%s/%s", g_dir, items[i]);
        snprintf(to, sizeof to, "%s/%s", folder, items[i]);
        if (symlink(from, to)) return -1;
    }
    return 0;
}

/* The golden text encoder as a GGUF with tokenizer.ggml.* arrays (pre =
 * the tokenizer.ggml.pre value) at <tmp>/<name>; NULL after a failure. */
static const char *te_gguf(const char *name, const char *pre) {
    static char path[PATH_MAX];
    char cmd[4 * PATH_MAX], *out = NULL;
    snprintf(path, sizeof path, "%s/%s", fx_test_tmpdir(), name);
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s' '%s' --pre '%s'", fx_test_path("pipeline/qwen3_gguf_writer.py"),
             g_dir, path, pre);
    int rc = fx_test_run(cmd, &out);
    if (rc) fx_test_fail(__FILE__, __LINE__, "qwen3_gguf_writer.py: exit %d: %s", rc, out ? out : "");
    free(out);
    return rc ? NULL : path;
}

static void encode_both(fx_tokenizer *a, fx_tokenizer *b, const char *text) {
    fx_ids x = {0}, y = {0};
    fx_err err = {0};
    CHECK(fx_tokenizer_encode(a, text, strlen(text), &x, &err) == FLUX_OK);
    CHECK(fx_tokenizer_encode(b, text, strlen(text), &y, &err) == FLUX_OK);
    CHECK_MSG(x.n == y.n && !memcmp(x.ids, y.ids, x.n * sizeof *x.ids), "'%s': %zu and %zu ids differ", text, x.n,
              y.n);
    fx_ids_free(&x), fx_ids_free(&y);
}

/* A GGUF text encoder's own vocabulary gives the ids tokenizer.json gives. */
TEST(three_files_gguf_vocabulary_equals_tokenizer_json) {
    REQUIRE(three_files("unused"));
    const char *g = te_gguf("te.gguf", "qwen2");
    REQUIRE(g);
    fx_tokenizer *a = NULL, *b = NULL;
    fx_err err = {0};
    REQUIRE_MSG(fx_tokenizer_load_gguf(g, &a, &err) == FLUX_OK, "%s", err.msg);
    REQUIRE_MSG(fx_tokenizer_load(g_tok, &b, &err) == FLUX_OK, "%s", err.msg);
    CHECK(fx_tokenizer_vocab_size(a) == fx_tokenizer_vocab_size(b));
    CHECK(fx_tokenizer_merge_count(a) == fx_tokenizer_merge_count(b));
    CHECK(fx_tokenizer_added_count(a) == fx_tokenizer_added_count(b));
    static const char *const texts[] = {
        "a red fox in the snow",
        "Hello <|im_start|> w\xc3\xb6rld 12345 <think>\n\n</think> \"quoted\" back\\slash",
        "  leading spaces, tabs\tand\r\nnewlines   ",
        "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe6\x96\x87 \xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xf0\x9f\xa6\x8a emoji",
        "don't I'LL we've 3.14159 $100 #tag @user https://example.com/a?b=c",
        "<|endoftext|><|im_end|>",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) encode_both(a, b, texts[i]);
    CHECK(fx_tokenizer_token_id(a, "<think>") == fx_tokenizer_token_id(b, "<think>"));
    fx_tokenizer_free(a);
    fx_tokenizer_free(b);

    /* another pre-tokenizer is refused by name */
    const char *bad = te_gguf("te-llama.gguf", "llama-bpe");
    REQUIRE(bad);
    CHECK(fx_tokenizer_load_gguf(bad, &a, &err) == FLUX_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "tokenizer.ggml.pre is 'llama-bpe'"), "%s", err.msg);
    /* ... and at load, before anything runs */
    char te[PATH_MAX];
    snprintf(te, sizeof te, "%s", bad);
    const char *t = three_files("klein-tiny");
    REQUIRE(t);
    flux_ctx *ctx = new_ctx();
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.transformer_file = t;
    lo.text_encoder_file = te;
    lo.vae_file = g_vae;
    CHECK(flux_load(ctx, NULL, &lo) == FLUX_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(flux_error(ctx), "pre 'llama-bpe'") && strstr(flux_error(ctx), "--tokenizer"), "%s",
              flux_error(ctx));
    lo.tokenizer_file = g_tok; /* a tokenizer.json instead: loads */
    CHECK_MSG(flux_load(ctx, NULL, &lo) == FLUX_OK, "%s", flux_error(ctx));
    flux_free(ctx);
}

/* The folder run and the three-file run write the same PNG, byte for byte:
 * the folder is named like the transformer file (the PNG names the model)
 * and both say --distilled (the PNG says why). */
TEST(three_files_png_equals_the_folder_run) {
    const char *t = three_files("klein-tiny");
    REQUIRE(t);
    char folder[PATH_MAX + 32], a[PATH_MAX + 32], b[PATH_MAX + 32], args[6 * PATH_MAX];
    snprintf(folder, sizeof folder, "%s/klein-tiny", fx_test_tmpdir());
    REQUIRE(linked_folder(folder) == 0);
    snprintf(a, sizeof a, "%s/folder.png", fx_test_tmpdir());
    snprintf(b, sizeof b, "%s/files.png", fx_test_tmpdir());
    const char *common = "-p 'a red fox in the snow' -W 64 -H 64 -S 7 -s 2 -t 1 --no-cache --distilled";
    char *out = NULL;
    snprintf(args, sizeof args, "-d '%s' %s -o '%s'", folder, common, a);
    CHECK_MSG(run(args, &out) == 0, "%s", out);
    free(out);
    snprintf(args, sizeof args, "--transformer '%s' --text-encoder '%s' --vae '%s' --tokenizer '%s' %s -o '%s' -v", t,
             g_te, g_vae, g_tok, common, b);
    CHECK_MSG(run(args, &out) == 0, "%s", out);
    CHECK_MSG(strstr(out, "no model folder: configs from the shapes"), "%s", out);
    CHECK_MSG(strstr(out, "(--tokenizer)"), "%s", out);
    free(out);
    /* the text encoder as a GGUF carrying its vocabulary: no --tokenizer */
    char c[PATH_MAX + 32];
    snprintf(c, sizeof c, "%s/gguf.png", fx_test_tmpdir());
    const char *g = te_gguf("te.gguf", "qwen2");
    REQUIRE(g);
    snprintf(args, sizeof args, "--transformer '%s' --text-encoder '%s' --vae '%s' %s -o '%s' -v", t, g, g_vae, common, c);
    CHECK_MSG(run(args, &out) == 0, "%s", out);
    CHECK_MSG(strstr(out, "(its tokenizer.ggml.* arrays)"), "%s", out);
    free(out);
    size_t na, nb, nc;
    char *pa = fx_test_read_file(a, &na), *pb = fx_test_read_file(b, &nb), *pc = fx_test_read_file(c, &nc);
    REQUIRE(pa && pb && pc);
    CHECK_MSG(na == nb && !memcmp(pa, pb, na), "PNG files differ (%zu and %zu bytes)", na, nb);
    CHECK_MSG(na == nc && !memcmp(pa, pc, na), "PNG files differ (%zu and %zu bytes: GGUF text encoder)", na, nc);
    free(pc);
    CHECK_MSG(memmem(pa, na, "distilled (forced (--distilled))", 32) != NULL, "no variant text in the PNG");
    free(pa), free(pb);
}

TEST(three_files_refusals) {
    const char *t = three_files("klein-tiny");
    REQUIRE(t);
    flux_ctx *ctx = new_ctx();
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.transformer_file = t;
    lo.text_encoder_file = g_te; /* no VAE */
    CHECK(flux_load(ctx, NULL, &lo) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(strstr(flux_error(ctx), "no model folder given"), "%s", flux_error(ctx));
    /* the files in the wrong roles: each named */
    lo.vae_file = t;
    CHECK(flux_load(ctx, NULL, &lo) == FLUX_ERR_MODEL);
    CHECK_MSG(strstr(flux_error(ctx), "not a FLUX.2 VAE"), "%s", flux_error(ctx));
    lo.vae_file = g_vae;
    lo.text_encoder_file = g_vae;
    CHECK(flux_load(ctx, NULL, &lo) == FLUX_ERR_MODEL);
    CHECK_MSG(strstr(flux_error(ctx), "not a Qwen3 text encoder"), "%s", flux_error(ctx));
    flux_model_info info;
    CHECK(flux_get_model_info(ctx, &info) == FLUX_ERR_STATE);
    flux_free(ctx);

    char args[4 * PATH_MAX], *out = NULL;
    snprintf(args, sizeof args, "--transformer '%s' --text-encoder '%s' -p x -o /dev/null", t, g_te);
    CHECK(run(args, &out) == 2);
    CHECK_MSG(strstr(out, "--transformer, --text-encoder and --vae together"), "%s", out);
    free(out);
}

/* Without --tokenizer and a GGUF vocabulary: the installed copy
 * (FLUX_SHARE_DIR stands for make install's $PREFIX/share/flux), else an
 * error naming the ways to give one. */
TEST(three_files_tokenizer_installed_copy) {
    const char *t = three_files("klein-tiny");
    REQUIRE(t);
    char share[PATH_MAX + 16], link[PATH_MAX + 64];
    snprintf(share, sizeof share, "%s/share", fx_test_tmpdir());
    REQUIRE(mkdir(share, 0755) == 0);
    const char *old = getenv("FLUX_SHARE_DIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("FLUX_SHARE_DIR", share, 1);
    flux_ctx *ctx = new_ctx();
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.transformer_file = t;
    lo.text_encoder_file = g_te;
    lo.vae_file = g_vae;
    CHECK(flux_load(ctx, NULL, &lo) == FLUX_ERR_IO);
    CHECK_MSG(strstr(flux_error(ctx), "no tokenizer") && strstr(flux_error(ctx), "--tokenizer"), "%s", flux_error(ctx));
    snprintf(link, sizeof link, "%s/tokenizer.json", share);
    REQUIRE(symlink(g_tok, link) == 0);
    REQUIRE_MSG(flux_load(ctx, NULL, &lo) == FLUX_OK, "%s", flux_error(ctx));
    CHECK_MSG(strstr(ctx->model->tokenizer_source, "the installed copy"), "%s", ctx->model->tokenizer_source);
    int32_t ids[64];
    int n = 0;
    CHECK(flux_tokenize(ctx, "a red fox", 1, ids, 64, &n) == FLUX_OK && n > 0);
    flux_free(ctx);
    if (saved) setenv("FLUX_SHARE_DIR", saved, 1);
    else unsetenv("FLUX_SHARE_DIR");
    free(saved);
}

/* Distilled or base, never silently: the file name when nothing else says
 * (with a warning), --base / --distilled over everything, and a base-named
 * file given to a distilled folder runs as base. */
TEST(three_files_variant_hints) {
    const char *base = three_files("flux-2-klein-base-tiny");
    REQUIRE(base);
    char base_path[PATH_MAX];
    snprintf(base_path, sizeof base_path, "%s", base);
    const char *plain = three_files("flux-2-klein-tiny");
    REQUIRE(plain);

    flux_ctx *ctx = load_files(base_path, g_tok, -1);
    REQUIRE(ctx);
    CHECK(ctx->model->distilled == 0);
    CHECK_MSG(strstr(ctx->model->variant_why, "contains \"base\""), "%s", ctx->model->variant_why);
    flux_free(ctx);
    REQUIRE((ctx = load_files(plain, g_tok, -1)));
    CHECK(ctx->model->distilled == 1);
    CHECK_MSG(strstr(ctx->model->variant_why, "assumed"), "%s", ctx->model->variant_why);
    flux_free(ctx);
    REQUIRE((ctx = load_files(base_path, g_tok, 1)));
    CHECK(ctx->model->distilled == 1);
    flux_free(ctx);

    /* a base file with the distilled golden folder */
    ctx = new_ctx();
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.transformer_file = base_path;
    REQUIRE_MSG(flux_load(ctx, g_dir, &lo) == FLUX_OK, "%s", flux_error(ctx));
    CHECK(ctx->model->distilled == 0);
    CHECK_MSG(strstr(ctx->model->variant_why, "the folder says distilled"), "%s", ctx->model->variant_why);
    flux_model_info info;
    CHECK(flux_get_model_info(ctx, &info) == FLUX_OK && info.default_steps == 50 && !info.distilled);
    CHECK_MSG(info.variant_reason && strstr(info.variant_reason, "file name"), "%s", info.variant_reason);
    flux_free(ctx);

    /* a GGUF's general.name (flux quantize writes the folder's name) says base */
    char based[PATH_MAX + 32], gguf[PATH_MAX + 32], qargs[4 * PATH_MAX];
    snprintf(based, sizeof based, "%s/klein-base-tiny", fx_test_tmpdir());
    snprintf(gguf, sizeof gguf, "%s/plain.gguf", fx_test_tmpdir());
    REQUIRE(linked_folder(based) == 0);
    snprintf(qargs, sizeof qargs, "quantize -d '%s' --type q8_0 --component transformer -o '%s' -q", based, gguf);
    char *qout = NULL;
    REQUIRE_MSG(run(qargs, &qout) == 0, "%s", qout);
    free(qout);
    ctx = new_ctx();
    lo.transformer_file = gguf;
    REQUIRE_MSG(flux_load(ctx, g_dir, &lo) == FLUX_OK, "%s", flux_error(ctx));
    CHECK(ctx->model->distilled == 0);
    CHECK_MSG(strstr(ctx->model->variant_why, "general.name = \"klein-base-tiny\""), "%s", ctx->model->variant_why);
    flux_free(ctx);

    /* the warning is printed (not only with -v) */
    char args[4 * PATH_MAX], *out = NULL;
    snprintf(args, sizeof args, "-d '%s' --transformer '%s' --tokenize -p x", g_dir, base_path);
    CHECK(run(args, &out) == 0);
    CHECK_MSG(strstr(out, "named as a base model but the folder's model_index.json says distilled"), "%s", out);
    free(out);
}

/* Without a folder too, a file changed on disk is noticed at the next
 * generation and the three files are loaded again (the reload keeps "no
 * folder"): a VAE cut short fails that call naming it, the restored one
 * gives the first image again. */
TEST(three_files_loaded_again_after_a_file_changed) {
    const char *t = three_files("klein-tiny");
    REQUIRE(t);
    char transformer[PATH_MAX], vae[PATH_MAX];
    snprintf(transformer, sizeof transformer, "%s", t);
    snprintf(vae, sizeof vae, "%.3900s/vae-copy.safetensors", fx_test_tmpdir());
    size_t n;
    char *bytes = fx_test_read_file(g_vae, &n);
    REQUIRE(bytes && fx_test_write_file(vae, bytes, n) == 0);
    snprintf(g_vae, sizeof g_vae, "%s", vae);
    flux_ctx *ctx = load_files(transformer, g_tok, 1);
    REQUIRE(ctx);
    flux_params p;
    flux_params_init(&p);
    p.prompt = "a cat";
    p.width = p.height = 64, p.steps = 1, p.seed = 2;
    flux_image *a = NULL, *b = NULL;
    REQUIRE_MSG(flux_generate(ctx, &p, &a) == FLUX_OK, "%s", flux_error(ctx));
    REQUIRE(fx_test_write_file(vae, bytes, n / 2) == 0);
    CHECK(flux_generate(ctx, &p, &b) != FLUX_OK);
    CHECK_MSG(strstr(flux_error(ctx), "changed since it was loaded") && strstr(flux_error(ctx), "vae-copy"), "%s",
              flux_error(ctx));
    REQUIRE(fx_test_write_file(vae, bytes, n) == 0);
    REQUIRE_MSG(flux_generate(ctx, &p, &b) == FLUX_OK, "%s", flux_error(ctx));
    CHECK(ctx->model && ctx->model->dir == NULL);
    CHECK(fx_test_same_pixels(a, b));
    flux_image_free(a), flux_image_free(b);
    flux_free(ctx);
    free(bytes);
}

/* Community GGUF files (ComfyUI-GGUF's transformer, stable-diffusion.cpp's
 * with the model.diffusion_model. prefix, llama.cpp's Qwen3 without
 * vocabulary: tests/formats/gguf_fixtures) run without a folder exactly as
 * with the golden folder around them. */
TEST(three_files_community_gguf_equal_the_folder_run) {
    REQUIRE(three_files("unused"));
    static const char *const transformers[] = {"formats/gguf_fixtures/flux2-comfy-Q8_0.gguf",
                                               "formats/gguf_fixtures/flux2-sdcpp-q4_0.gguf"};
    char te[PATH_MAX], tr[PATH_MAX];
    snprintf(te, sizeof te, "%s", fx_test_path("formats/gguf_fixtures/qwen3-te-Q8_0.gguf"));
    for (size_t i = 0; i < sizeof transformers / sizeof *transformers; i++) {
        snprintf(tr, sizeof tr, "%s", fx_test_path(transformers[i]));
        flux_load_options lo;
        flux_load_options_init(&lo);
        lo.transformer_file = tr;
        lo.text_encoder_file = te;
        flux_ctx *folder = new_ctx(), *files = new_ctx();
        REQUIRE(folder && files);
        REQUIRE_MSG(flux_load(folder, g_dir, &lo) == FLUX_OK, "%s", flux_error(folder));
        lo.vae_file = g_vae;
        lo.tokenizer_file = g_tok;
        lo.distilled = 1;
        REQUIRE_MSG(flux_load(files, NULL, &lo) == FLUX_OK, "%s", flux_error(files));
        flux_params p;
        flux_params_init(&p);
        p.prompt = "a lighthouse at dusk";
        p.width = 64, p.height = 48, p.steps = 2, p.seed = 11;
        flux_image *a = NULL, *b = NULL;
        CHECK_MSG(flux_generate(folder, &p, &a) == FLUX_OK, "%s", flux_error(folder));
        CHECK_MSG(flux_generate(files, &p, &b) == FLUX_OK, "%s", flux_error(files));
        CHECK_MSG(fx_test_same_pixels(a, b), "%s: the three-file run differs from the folder run", transformers[i]);
        flux_image_free(a), flux_image_free(b);
        flux_free(folder), flux_free(files);
    }
}
