/*
 * test_faults.c — generations that meet bad numbers or a failing callback:
 * NaN/Inf in the noise, the embeddings or the weights is an error naming the
 * stage (it used to give a black image and exit 0); the progress callback
 * sees the substeps flux.h promises (Qwen3 layers, transformer blocks, VAE
 * decoder stages) and a cancellation stops within one of them.
 */
#include "tests/test.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/npy.h"
#include "src/model/ctx.h"
#include "src/model/model.h"
#include "tests/golden_case.h"

/* ------------------------------------------------------------ non-finite values */

static int run_cli(const char *args, char **out) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s' -q -t 1 -d '%s' %s", fx_test_flux_bin(), fx_test_path("golden/model"), args);
    return fx_test_run(cmd, out);
}

/* A copy of the golden .npy with one value replaced. */
static const char *npy_with(const char *golden_rel, const char *name, size_t index, float value) {
    fx_npy a;
    fx_err err = {0};
    if (fx_npy_read(fx_test_path(golden_rel), &a, &err) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return "";
    }
    ((float *)a.data)[index] = value;
    const char *path = fx_test_tmp_path(name);
    if (fx_npy_write_f32(path, a.data, a.ndim, a.shape, &err) != FLUX_OK) fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
    fx_npy_free(&a);
    return path;
}

TEST(faults_nonfinite_inputs_are_errors) {
    char args[8192], *out = NULL;
    const char *emb_rel = "t2i-48x64-2step/out/emb.npy", *noise_rel = "t2i-48x64-2step/noise.npy";
    char emb[1200], noise[1200], png[1200];
    snprintf(png, sizeof png, "%s", fx_test_tmp_path("out.png"));
    snprintf(emb, sizeof emb, "%s", fx_test_path("golden/t2i-48x64-2step/out/emb.npy"));
    /* NaN in the noise (row 1 of [128, 3, 4]) */
    snprintf(noise, sizeof noise, "%s", npy_with("golden/" "t2i-48x64-2step/noise.npy", "nan_noise.npy", 17, NAN));
    snprintf(args, sizeof args, "--embeddings '%s' --noise '%s' -s 2 -o '%s'", emb, noise, png);
    int rc = run_cli(args, &out);
    CHECK_MSG(rc == 1 && out && strstr(out, "flux: the initial noise contains a non-finite value (nan at channel 1,"),
              "exit %d: %s", rc, out);
    free(out);
    /* Inf in the embeddings */
    const char *bad_emb = npy_with("golden/t2i-48x64-2step/out/emb.npy", "inf_emb.npy", 48 * 7 + 5, INFINITY);
    snprintf(args, sizeof args, "--embeddings '%s' -W 64 -H 64 -s 1 -S 1 -o '%s'", bad_emb, png);
    rc = run_cli(args, &out);
    CHECK_MSG(rc == 1 && out && strstr(out, "flux: the text embeddings contain a non-finite value (inf at token 7, "
                                            "column 5)"),
              "exit %d: %s", rc, out);
    free(out);
    CHECK(!fx_test_file_exists(png));
    (void)emb_rel, (void)noise_rel;
}

/* A copy of the golden model whose weight file `rel` has one bf16 value
 * of tensor `tensor` set to a NaN. */
static const char *model_with_nan(const char *name, const char *rel, const char *tensor) {
    static char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", fx_test_tmpdir(), name);
    char cmd[PATH_MAX * 3];
    snprintf(cmd, sizeof cmd, "cp -rL '%s' '%s'", fx_test_path("golden/model"), dir);
    if (fx_test_run(cmd, NULL) != 0) fx_test_fail(__FILE__, __LINE__, "cp failed");
    char path[PATH_MAX + 200];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    size_t len;
    uint8_t *d = (uint8_t *)fx_test_read_file(path, &len);
    if (!d) {
        fx_test_fail(__FILE__, __LINE__, "read %s", path);
        return dir;
    }
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | d[i];
    char key[300];
    snprintf(key, sizeof key, "\"%s\"", tensor);
    const char *hit = strstr((const char *)d + 8, key), *offs = hit ? strstr(hit, "\"data_offsets\":[") : NULL;
    if (!offs) {
        fx_test_fail(__FILE__, __LINE__, "%s not in %s", tensor, rel);
        free(d);
        return dir;
    }
    long begin = strtol(offs + 16, NULL, 10);
    uint8_t *v = d + 8 + hl + begin + 2 * 3; /* element 3: bf16 quiet NaN 0x7fc0 */
    v[0] = 0xc0, v[1] = 0x7f;
    unlink(path);
    if (fx_test_write_file(path, d, len)) fx_test_fail(__FILE__, __LINE__, "write %s", path);
    free(d);
    return dir;
}

TEST(faults_nonfinite_weights_name_the_stage) {
    static const struct {
        const char *rel, *tensor, *msg;
    } cases[] = {
        {"transformer/diffusion_pytorch_model.safetensors", "proj_out.weight",
         "flux: denoising step 1 of 2 produced a non-finite latent (nan at token "},
        {"vae/diffusion_pytorch_model.safetensors", "decoder.conv_out.weight",
         "flux: the VAE decoder produced a non-finite pixel value (nan at channel "},
        {"text_encoder/model-00001-of-00002.safetensors", "model.layers.3.mlp.down_proj.weight",
         "flux: the text encoder produced non-finite embeddings (nan at token "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char name[32], args[8192], png[1200], *out = NULL;
        snprintf(name, sizeof name, "nan%zu", i);
        const char *m = model_with_nan(name, cases[i].rel, cases[i].tensor);
        snprintf(png, sizeof png, "%s/out.png", fx_test_tmpdir());
        char cmd[16384];
        snprintf(cmd, sizeof cmd, "'%s' -q -t 1 --no-cache -d '%s' -p 'a cat' -W 64 -H 64 -s 2 -S 4 -o '%s'",
                 fx_test_flux_bin(), m, png);
        int rc = fx_test_run(cmd, &out);
        CHECK_MSG(rc == 1 && out && strstr(out, cases[i].msg), "%s: exit %d: %s", cases[i].tensor, rc, out);
        CHECK(!fx_test_file_exists(png));
        free(out);
        (void)args;
    }
}

/* ------------------------------------------------------------ progress substeps */

typedef struct substeps {
    int text_layers, text_subtotal, blocks, vae_stages, vae_subtotal;
    flux_stage cancel_stage;
    int cancel_at;      /* cancel when the stage's substep reaches this (0: never) */
    int after_cancel;   /* callbacks with substeps of that stage after cancelling */
    int cancelled;
} substeps;

static int on_substep(void *user, flux_stage stage, int step, int total, int sub, int subtotal) {
    substeps *s = user;
    (void)step, (void)total;
    if (subtotal > 0 && sub > 0) {
        if (s->cancelled && stage == s->cancel_stage) s->after_cancel++;
        if (stage == FLUX_STAGE_TEXT_ENCODE) s->text_layers++, s->text_subtotal = subtotal;
        if (stage == FLUX_STAGE_DENOISE) s->blocks++;
        if (stage == FLUX_STAGE_VAE_DECODE) s->vae_stages++, s->vae_subtotal = subtotal;
    }
    if (s->cancel_at && stage == s->cancel_stage && sub >= s->cancel_at) s->cancelled = 1;
    return s->cancelled;
}

TEST(faults_progress_substeps_and_cancellation) {
    flux_options o;
    flux_options_init(&o);
    o.threads = 1, o.no_disk_cache = 1;
    flux_ctx *ctx = flux_new(&o);
    REQUIRE(ctx && flux_load(ctx, fx_test_path("golden/model"), NULL) == FLUX_OK);
    flux_params p;
    flux_params_init(&p);
    p.prompt = "a cat";
    p.width = p.height = 64, p.steps = 2, p.seed = 1;
    substeps s = {0};
    p.progress = on_substep, p.progress_user = &s;
    flux_image *img = NULL;
    REQUIRE_MSG(flux_generate(ctx, &p, &img) == FLUX_OK, "%s", flux_error(ctx));
    flux_image_free(img);
    CHECK_EQ_INT(s.text_layers, 27); /* one per Qwen3 layer that runs */
    CHECK_EQ_INT(s.text_subtotal, 27);
    CHECK_EQ_INT(s.blocks, 2 * 4);    /* 2 steps x (2 double + 2 single blocks) */
    CHECK_EQ_INT(s.vae_subtotal, 6);  /* mid block, 4 up blocks, output */
    CHECK_EQ_INT(s.vae_stages, 6);
    /* cancelling inside the text encoder (a new prompt: no cache hit) and
     * inside the VAE decoder: no further substep of that stage runs */
    static const struct {
        flux_stage stage;
        int at;
        const char *prompt;
    } cancel[] = {{FLUX_STAGE_TEXT_ENCODE, 3, "a dog"}, {FLUX_STAGE_VAE_DECODE, 2, "a cat"}};
    for (int i = 0; i < 2; i++) {
        substeps c = {0};
        c.cancel_stage = cancel[i].stage, c.cancel_at = cancel[i].at;
        p.progress_user = &c, p.prompt = cancel[i].prompt;
        img = (flux_image *)1;
        CHECK_EQ_INT(flux_generate(ctx, &p, &img), FLUX_ERR_CANCELLED);
        CHECK(img == NULL);
        CHECK_MSG(c.cancelled && c.after_cancel == 0, "stage %d: %d substeps after the cancel", (int)cancel[i].stage,
                  c.after_cancel);
        if (cancel[i].stage == FLUX_STAGE_TEXT_ENCODE) CHECK_EQ_INT(c.text_layers, 3);
        if (cancel[i].stage == FLUX_STAGE_VAE_DECODE) CHECK_EQ_INT(c.vae_stages, 2);
    }
    /* the context works after a cancellation (the encoder was left clean) */
    substeps d = {0};
    p.progress_user = &d, p.prompt = "a dog";
    REQUIRE_MSG(flux_generate(ctx, &p, &img) == FLUX_OK, "%s", flux_error(ctx));
    CHECK_EQ_INT(d.text_layers, 27);
    flux_image_free(img);
    flux_free(ctx);
}

/* ------------------------------------------------------------ files cut short */

/* A private copy of the golden model (real files, so they can be cut). */
static const char *copy_model(const char *name) {
    static char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", fx_test_tmpdir(), name);
    char cmd[PATH_MAX * 3];
    snprintf(cmd, sizeof cmd, "cp -rL '%s' '%s'", fx_test_path("golden/model"), dir);
    if (fx_test_run(cmd, NULL) != 0) fx_test_fail(__FILE__, __LINE__, "cp failed");
    return dir;
}

/* A context (threads, no disk cache) on a private copy of the model. */
static flux_ctx *ctx_on_copy(const char *name, int threads) {
    const char *m = copy_model(name);
    flux_options o;
    flux_options_init(&o);
    o.threads = threads, o.no_disk_cache = 1;
    flux_ctx *ctx = flux_new(&o);
    if (ctx && flux_load(ctx, m, NULL) == FLUX_OK) return ctx;
    fx_test_fail(__FILE__, __LINE__, "load %s: %s", m, ctx ? flux_error(ctx) : "no context");
    flux_free(ctx);
    return NULL;
}

/* cp from → to (keeping a whole copy aside, putting it back). */
static int copy_file(const char *from, const char *to) {
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    return fx_test_run(cmd, NULL);
}

typedef struct cutter {
    char path[PATH_MAX + 64];
    off_t keep;          /* bytes left after the cut */
    flux_stage stage;
    int at_substep;
    int done;
} cutter;

/* Progress callback that cuts a weight file short in the middle of a stage,
 * as `cp` over the model folder does (it truncates, then writes). */
static int cut_file(void *user, flux_stage stage, int step, int total, int sub, int subtotal) {
    cutter *c = user;
    (void)step, (void)total, (void)subtotal;
    if (!c->done && stage == c->stage && sub == c->at_substep) {
        c->done = 1;
        if (truncate(c->path, c->keep) != 0) fx_test_fail(__FILE__, __LINE__, "truncate %s", c->path);
    }
    return 0;
}

/* A mapped weight file truncated while a generation reads it: the read
 * faults (SIGBUS killed the process); now that generation fails naming the
 * file, the context survives, and once the file is whole again the next
 * generation loads the model again and works. */
TEST(faults_weight_file_cut_short_during_a_generation) {
    static const struct {
        const char *rel;
        flux_stage stage;
        int at;
    } cases[] = {
        {"transformer/diffusion_pytorch_model.safetensors", FLUX_STAGE_DENOISE, 1},
        {"vae/diffusion_pytorch_model.safetensors", FLUX_STAGE_VAE_DECODE, 1},
        {"text_encoder/model-00002-of-00002.safetensors", FLUX_STAGE_TEXT_ENCODE, 2},
    };
    flux_ctx *ctx = ctx_on_copy("cut", 2);
    REQUIRE(ctx);
    char m[PATH_MAX];
    snprintf(m, sizeof m, "%s", ctx->model->dir); /* the model is loaded again below */
    flux_params p;
    flux_params_init(&p);
    p.width = p.height = 64, p.steps = 2, p.seed = 9;
    flux_image *good = NULL, *img = NULL;
    p.prompt = "a red apple";
    REQUIRE_MSG(flux_generate(ctx, &p, &good) == FLUX_OK, "%s", flux_error(ctx));
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        /* a prompt the memory cache has not seen: the text encoder runs */
        char prompt[32];
        snprintf(prompt, sizeof prompt, "a red apple %zu", i);
        p.prompt = prompt;
        cutter c = {.stage = cases[i].stage, .at_substep = cases[i].at};
        snprintf(c.path, sizeof c.path, "%s/%s", m, cases[i].rel);
        char backup[PATH_MAX + 80];
        snprintf(backup, sizeof backup, "%s.whole", c.path);
        REQUIRE(copy_file(c.path, backup) == 0);
        struct stat st;
        REQUIRE(stat(c.path, &st) == 0);
        c.keep = st.st_size / 3; /* the header stays, most tensors go */
        p.progress = cut_file, p.progress_user = &c;
        img = (flux_image *)1;
        flux_status s = flux_generate(ctx, &p, &img);
        CHECK_MSG(c.done, "%s: the cut did not happen", cases[i].rel);
        CHECK_MSG(s == FLUX_ERR_IO && img == NULL, "%s: %s (%s)", cases[i].rel, flux_status_name(s), flux_error(ctx));
        CHECK_MSG(strstr(flux_error(ctx), cases[i].rel) && strstr(flux_error(ctx), "was cut short while in use"),
                  "%s: %s", cases[i].rel, flux_error(ctx));
        /* the file is whole again (the copy finished): the next call loads the model again */
        REQUIRE(copy_file(backup, c.path) == 0);
        p.progress = NULL;
        p.prompt = "a red apple";
        img = NULL;
        CHECK_MSG(flux_generate(ctx, &p, &img) == FLUX_OK, "%s, after restoring: %s", cases[i].rel, flux_error(ctx));
        CHECK_MSG(fx_test_same_pixels(img, good), "%s: the image after reloading differs", cases[i].rel);
        flux_image_free(img);
        unlink(backup);
    }
    flux_image_free(good);
    flux_free(ctx);
}

/* A weight file cut short between two generations of a session: the next
 * generation checks the files first and loads the folder again (or fails
 * with the loader's message while the file is short). */
TEST(faults_weight_file_cut_short_between_generations) {
    flux_ctx *ctx = ctx_on_copy("between", 1);
    REQUIRE(ctx);
    flux_params p;
    flux_params_init(&p);
    p.prompt = "a cat";
    p.width = p.height = 64, p.steps = 1, p.seed = 2;
    flux_image *a = NULL, *b = NULL;
    REQUIRE(flux_generate(ctx, &p, &a) == FLUX_OK);
    char path[PATH_MAX + 64], backup[PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/transformer/diffusion_pytorch_model.safetensors", ctx->model->dir);
    snprintf(backup, sizeof backup, "%s.whole", path);
    REQUIRE(copy_file(path, backup) == 0);
    struct stat st;
    REQUIRE(stat(path, &st) == 0 && truncate(path, st.st_size / 2) == 0);
    CHECK_EQ_INT(flux_generate(ctx, &p, &b), FLUX_ERR_FORMAT); /* loading it again: the short file is refused */
    CHECK_MSG(strstr(flux_error(ctx), "changed since it was loaded") &&
                  strstr(flux_error(ctx), "transformer/diffusion_pytorch_model.safetensors"),
              "%s", flux_error(ctx));
    REQUIRE(copy_file(backup, path) == 0);
    REQUIRE_MSG(flux_generate(ctx, &p, &b) == FLUX_OK, "%s", flux_error(ctx));
    CHECK(fx_test_same_pixels(a, b));
    flux_image_free(a), flux_image_free(b);
    flux_free(ctx);
}

/* The model loaded again after its files changed keeps its LoRA adapters
 * (they used to be dropped: the next image ran without them and
 * flux_lora_count said 0): same image with the adapter as before the
 * change; an adapter that cannot be attached again is the error of that
 * call, naming it, and is attached once it can be. */
TEST(faults_model_loaded_again_keeps_its_lora_adapters) {
    flux_ctx *ctx = ctx_on_copy("lora-reload", 1);
    REQUIRE(ctx);
    char m[PATH_MAX], lora[PATH_MAX + 32], args[3 * PATH_MAX];
    snprintf(m, sizeof m, "%s", ctx->model->dir);
    snprintf(lora, sizeof lora, "%s/reload-lora.safetensors", fx_test_tmpdir());
    snprintf(args, sizeof args, "-d '%s' -o '%s' --format diffusers --rank 4 --seed 5", m, lora);
    REQUIRE(FX_TEST_RUN_TOOL("gen_lora", args) == 0);
    flux_params p;
    flux_params_init(&p);
    p.prompt = "a cat";
    p.width = p.height = 64, p.steps = 1, p.seed = 3;
    flux_image *plain = NULL, *with = NULL, *again = NULL;
    REQUIRE(flux_generate(ctx, &p, &plain) == FLUX_OK);
    REQUIRE_MSG(flux_lora_load(ctx, lora, 0.8f) == FLUX_OK, "%s", flux_error(ctx));
    REQUIRE(flux_generate(ctx, &p, &with) == FLUX_OK);
    CHECK_MSG(!fx_test_same_pixels(with, plain), "the adapter changed nothing");
    /* the transformer's file rewritten in place (same bytes, new mtime) */
    char path[PATH_MAX + 64], backup[PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/transformer/diffusion_pytorch_model.safetensors", m);
    snprintf(backup, sizeof backup, "%s.whole", path);
    REQUIRE(copy_file(path, backup) == 0);
    sleep(1); /* a new mtime even on coarse file-system clocks */
    REQUIRE(copy_file(backup, path) == 0);
    REQUIRE_MSG(flux_generate(ctx, &p, &again) == FLUX_OK, "%s", flux_error(ctx));
    CHECK_EQ_INT(flux_lora_count(ctx), 1);
    flux_lora_info info;
    CHECK(flux_lora_get_info(ctx, 0, &info) == FLUX_OK && info.scale == 0.8f && !strcmp(info.path, lora));
    CHECK_MSG(fx_test_same_pixels(again, with), "after loading the model again the adapter was lost");
    flux_image_free(again);
    again = NULL;
    /* the adapter file unreadable while the model is loaded again: that call fails naming it */
    char lora_backup[PATH_MAX + 48];
    snprintf(lora_backup, sizeof lora_backup, "%s.whole", lora);
    REQUIRE(rename(lora, lora_backup) == 0);
    sleep(1);
    REQUIRE(copy_file(backup, path) == 0);
    CHECK(flux_generate(ctx, &p, &again) != FLUX_OK && again == NULL);
    CHECK_MSG(strstr(flux_error(ctx), "LoRA adapter") && strstr(flux_error(ctx), "reload-lora.safetensors"), "%s",
              flux_error(ctx));
    /* back: the next call attaches it and gives the same image */
    REQUIRE(rename(lora_backup, lora) == 0);
    REQUIRE_MSG(flux_generate(ctx, &p, &again) == FLUX_OK, "%s", flux_error(ctx));
    CHECK_EQ_INT(flux_lora_count(ctx), 1);
    CHECK_MSG(fx_test_same_pixels(again, with), "the adapter attached later differs");
    flux_image_free(plain), flux_image_free(with), flux_image_free(again);
    unlink(backup);
    flux_free(ctx);
}
