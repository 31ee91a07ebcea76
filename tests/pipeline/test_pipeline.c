/* test_pipeline.c — text-to-image end to end against the golden cases
 * (tests/golden/README.md, ours-README.md): from the golden embeddings and
 * noise through flux_generate (per-step velocities, final latents, decoded
 * image, PNG pixels via --dump-style files), through the CLI, from the
 * prompt (tokens + text encoder), batches, seeds, threads, progress and
 * errors.
 *
 * Errors are max|ours − golden| / max|golden| per array; the tolerances
 * (f32 mode 1e-4, default bf16 mode FX_GCASE_TOL_BF16_*) are in
 * golden_case.h, with the end-to-end run of a case (fx_gcase_check). */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/golden_case.h"

typedef fx_gcase gcase;
#define load_case fx_gcase_load
#define new_ctx(threads, prec, model) fx_gcase_ctx(model, threads, prec)
#define npy_at fx_gcase_npy
#define compare fx_gcase_compare
#define TOL_F32 FX_GCASE_TOL_F32

static const char *golden_dir(const char *name) {
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s", fx_test_path("golden"));
    size_t n = strlen(buf);
    snprintf(buf + n, sizeof buf - n, "/%s", name);
    return buf;
}

static const char *const t2i_cases[] = {"t2i-48x64-2step", "t2i-32x32-4step"};
static const char *const ours_cases[] = {"ours-t2i-48x80-1step", "ours-t2i-80x48-2step-gqa", "ours-t2i-16x112-4step",
                                         "ours-t2i-32x64-2step-vae", "ours-f16-32x48-2step", "ours-f32-48x32-1step"};
static const char *const cfg_cases[] = {"base-cfg-48x48-3step", "ours-base-cfg-48x32-2step", "ours-base-g1-32x48-2step",
                                        "ours-base-linear-32x32-3step"};
#define CHECK_ALL(list, prec)                                                  \
    for (size_t i_ = 0; i_ < sizeof list / sizeof *list; i_++) fx_gcase_check(list[i_], prec)

TEST(pipeline_golden_t2i_f32) { CHECK_ALL(t2i_cases, FLUX_PRECISION_F32); }
TEST(pipeline_golden_t2i_default) { CHECK_ALL(t2i_cases, FLUX_PRECISION_DEFAULT); }
TEST(pipeline_ours_t2i_f32) { CHECK_ALL(ours_cases, FLUX_PRECISION_F32); }
TEST(pipeline_ours_t2i_default) { CHECK_ALL(ours_cases, FLUX_PRECISION_DEFAULT); }
TEST(pipeline_cfg_f32) { CHECK_ALL(cfg_cases, FLUX_PRECISION_F32); }
TEST(pipeline_cfg_default) { CHECK_ALL(cfg_cases, FLUX_PRECISION_DEFAULT); }

/* ------------------------------------------------------------ from the prompt */

/* tokens.npy / attention_mask.npy / text_embeddings.npy of a prompt run. */
TEST(pipeline_prompt_dump) {
    static const struct {
        const char *name, *prompt;
    } cases[] = {{"t2i-48x64-2step", "a cat on a skateboard"},
                 {"t2i-32x32-4step", "It's 3 cats & 2 dogs (100% good) \xe2\x80\x94 don't stop!"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gcase c;
        REQUIRE(load_case(cases[i].name, &c));
        flux_ctx *ctx = new_ctx(2, FLUX_PRECISION_F32, c.model);
        REQUIRE(ctx);
        char gd[1100], dump[1100];
        snprintf(gd, sizeof gd, "%s", golden_dir(cases[i].name));
        snprintf(dump, sizeof dump, "%s/prompt-%zu", fx_test_tmpdir(), i);
        mkdir(dump, 0755);
        fx_npy noise;
        REQUIRE(npy_at(gd, "noise.npy", &noise));
        flux_params p;
        flux_params_init(&p);
        p.prompt = cases[i].prompt;
        p.noise = noise.data;
        p.height = (int)noise.shape[1] * 16;
        p.width = (int)noise.shape[2] * 16;
        p.steps = c.steps;
        p.seed = 5;
        p.dump_dir = dump;
        flux_image *img = NULL;
        flux_status st = flux_generate(ctx, &p, &img);
        CHECK_MSG(st == FLUX_OK, "%s: %s", cases[i].name, flux_error(ctx));
        if (st == FLUX_OK) {
            CHECK_MSG(compare(dump, "tokens.npy", gd, "tokens.npy") == 0.0, "tokens");
            CHECK_MSG(compare(dump, "attention_mask.npy", gd, "attention_mask.npy") == 0.0, "attention mask");
            double e = compare(dump, "text_embeddings.npy", gd, "out/emb.npy");
            double l = compare(dump, "latents.npy", gd, "out/latents.npy");
            printf("      %-34s embeddings %.2e  latents %.2e\n", cases[i].name, e, l);
            CHECK(e >= 0 && e <= TOL_F32);
            CHECK(l >= 0 && l <= TOL_F32);
            CHECK(!strcmp(flux_image_get_text(img, "prompt"), cases[i].prompt));
        }
        flux_image_free(img);
        fx_npy_free(&noise);
        flux_free(ctx);
    }
}

/* ------------------------------------------------------------ CLI */

TEST(pipeline_cli_embeddings_noise_dump) {
    const char *name = "t2i-48x64-2step";
    char gd[1100], dump[1100], out[1100], cmd[5000];
    snprintf(gd, sizeof gd, "%s", golden_dir(name));
    snprintf(dump, sizeof dump, "%s/cli-dump", fx_test_tmpdir());
    snprintf(out, sizeof out, "%s/cli.png", fx_test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "FLUX_PRECISION=f32 '%s' -d '%s' --embeddings '%s/out/emb.npy' --noise '%s/noise.npy' -s 2 -S 77 "
             "--dump '%s' -o '%s' -q",
             fx_test_flux_bin(), fx_test_path("golden/model"), gd, gd, dump, out);
    char *log = NULL;
    int rc = fx_test_run(cmd, &log);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, log ? log : "");
    free(log);
    REQUIRE(rc == 0);
    static const char *files[] = {"text_embeddings.npy", "noise.npy", "sigmas.npy", "velocity_000.npy",
                                  "velocity_001.npy", "latents.npy", "decoded.npy"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dump, files[i]);
        CHECK_MSG(access(path, R_OK) == 0, "--dump did not write %s", files[i]);
    }
    double e = compare(dump, "decoded.npy", gd, "out/image.npy");
    CHECK_MSG(e >= 0 && e <= TOL_F32, "CLI decoded image error %.3g", e);
    e = compare(dump, "velocity_001.npy", gd, "out/steps/step01_v.npy");
    CHECK_MSG(e >= 0 && e <= TOL_F32, "CLI velocity error %.3g", e);
    flux_ctx *ctx = flux_new(NULL);
    flux_image *img = NULL;
    REQUIRE(flux_image_load(ctx, out, &img) == FLUX_OK);
    int maxd;
    double mean;
    char png[1200];
    snprintf(png, sizeof png, "%s/out/image.png", gd);
    fx_gcase_pixel_diff(img, png, &maxd, &mean);
    CHECK_MSG(maxd <= 1, "CLI PNG differs by %d", maxd);
    CHECK(flux_image_get_text(img, "seed") && !strcmp(flux_image_get_text(img, "seed"), "77"));
    flux_image_free(img);
    flux_free(ctx);
}

/* ------------------------------------------------------------ seeds, threads, batches */

static char *generate_png(int threads, uint64_t seed, const char *file, size_t *len) {
    fx_npy emb;
    flux_ctx *ctx = fx_gcase_ctx_emb("t2i-48x64-2step", threads, FLUX_PRECISION_DEFAULT, NULL, &emb);
    if (!ctx) return NULL;
    flux_params p;
    flux_params_init(&p);
    p.embeddings = emb.data;
    p.width = 80, p.height = 48, p.steps = 2, p.seed = seed;
    flux_image *img = NULL;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", fx_test_tmpdir(), file);
    char *data = NULL;
    if (flux_generate(ctx, &p, &img) != FLUX_OK) fx_test_fail(__FILE__, __LINE__, "%s", flux_error(ctx));
    else if (flux_image_save(ctx, img, path) != FLUX_OK) fx_test_fail(__FILE__, __LINE__, "%s", flux_error(ctx));
    else data = fx_test_read_file(path, len);
    flux_image_free(img);
    fx_npy_free(&emb);
    flux_free(ctx);
    return data;
}

TEST(pipeline_seed_png_bit_identical) {
    size_t n1, n2, n3, n4;
    char *a = generate_png(2, 1234, "a.png", &n1), *b = generate_png(2, 1234, "b.png", &n2);
    char *c = generate_png(1, 1234, "c.png", &n3), *d = generate_png(2, 1235, "d.png", &n4);
    REQUIRE(a && b && c && d);
    CHECK_MSG(n1 == n2 && !memcmp(a, b, n1), "two runs with the same seed differ");
    CHECK_MSG(n1 == n3 && !memcmp(a, c, n1), "1 thread and 2 threads differ");
    CHECK_MSG(n1 != n4 || memcmp(a, d, n1), "seeds 1234 and 1235 give the same PNG");
    free(a), free(b), free(c), free(d);
}

TEST(pipeline_batch_equals_single_runs) {
    fx_npy emb;
    flux_ctx *ctx = fx_gcase_ctx_emb("t2i-48x64-2step", 2, FLUX_PRECISION_DEFAULT, NULL, &emb);
    REQUIRE(ctx);
    flux_params p;
    flux_params_init(&p);
    p.embeddings = emb.data;
    p.width = 64, p.height = 32, p.steps = 2, p.seed = 900, p.batch = 3;
    flux_image *batch[3] = {NULL, NULL, NULL};
    REQUIRE_MSG(flux_generate_batch(ctx, &p, batch) == FLUX_OK, "%s", flux_error(ctx));
    for (int i = 0; i < 3; i++) {
        flux_params q = p;
        q.batch = 1, q.seed = 900 + (uint64_t)i;
        flux_image *one = NULL;
        REQUIRE_MSG(flux_generate(ctx, &q, &one) == FLUX_OK, "%s", flux_error(ctx));
        CHECK_MSG(!memcmp(one->data, batch[i]->data, (size_t)64 * 32 * 3), "batch image %d differs from its single run", i);
        char want[32];
        snprintf(want, sizeof want, "%d", 900 + i);
        CHECK(!strcmp(flux_image_get_text(batch[i], "seed"), want));
        flux_image_free(one);
    }
    CHECK(memcmp(batch[0]->data, batch[1]->data, (size_t)64 * 32 * 3));
    for (int i = 0; i < 3; i++) flux_image_free(batch[i]);
    fx_npy_free(&emb);
    flux_free(ctx);
}

/* ------------------------------------------------------------ progress, errors */

typedef struct prog_log {
    int calls, denoise_blocks, last_step, cancel_at, stages_seen;
} prog_log;

static int on_progress(void *user, flux_stage stage, int step, int total, int sub, int subtotal) {
    prog_log *l = user;
    l->calls++;
    l->stages_seen |= 1 << stage;
    if (stage == FLUX_STAGE_DENOISE) {
        CHECK(total == 2 && step >= 0 && step <= total);
        if (subtotal) {
            CHECK(subtotal == 4 && sub >= 0 && sub <= 4); /* 2 double + 2 single blocks */
            if (sub > 0) l->denoise_blocks++;
        }
        l->last_step = step;
    }
    return l->cancel_at && l->denoise_blocks >= l->cancel_at;
}

TEST(pipeline_progress_and_cancel) {
    fx_npy emb;
    flux_ctx *ctx = fx_gcase_ctx_emb("t2i-48x64-2step", 2, FLUX_PRECISION_DEFAULT, NULL, &emb);
    REQUIRE(ctx);
    flux_params p;
    flux_params_init(&p);
    p.embeddings = emb.data;
    p.width = p.height = 32, p.steps = 2, p.seed = 3;
    prog_log l = {0};
    p.progress = on_progress, p.progress_user = &l;
    flux_image *img = NULL;
    REQUIRE(flux_generate(ctx, &p, &img) == FLUX_OK);
    CHECK_EQ_INT(l.denoise_blocks, 2 * 4);
    CHECK_EQ_INT(l.last_step, 2);
    CHECK(l.stages_seen & (1 << FLUX_STAGE_VAE_DECODE));
    CHECK(l.stages_seen & (1 << FLUX_STAGE_DONE));
    flux_image_free(img);
    /* cancel after the third block */
    prog_log c = {.cancel_at = 3};
    p.progress_user = &c;
    img = (flux_image *)1;
    CHECK_EQ_INT(flux_generate(ctx, &p, &img), FLUX_ERR_CANCELLED);
    CHECK(img == NULL);
    CHECK_EQ_INT(c.denoise_blocks, 3);
    fx_npy_free(&emb);
    flux_free(ctx);
}

TEST(pipeline_bad_params) {
    fx_npy emb;
    flux_ctx *ctx = fx_gcase_ctx_emb("t2i-48x64-2step", 1, FLUX_PRECISION_DEFAULT, NULL, &emb);
    REQUIRE(ctx);
    flux_params p;
    flux_image *img = NULL;
    struct {
        int w, h, steps, n_refs, batch;
        float guidance;
        int no_text;
        flux_status want;
        const char *msg;
    } bad[] = {
        {40, 32, 1, 0, 1, -1, 0, FLUX_ERR_INVALID_ARG, "multiple of 16"},
        {32, 8, 1, 0, 1, -1, 0, FLUX_ERR_INVALID_ARG, "outside"},
        {8192, 32, 1, 0, 1, -1, 0, FLUX_ERR_INVALID_ARG, "outside"},
        {32, 32, 1001, 0, 1, -1, 0, FLUX_ERR_INVALID_ARG, "steps"},
        {32, 32, -2, 0, 1, -1, 0, FLUX_ERR_INVALID_ARG, "steps"},
        {32, 32, 1, 1, 1, -1, 0, FLUX_ERR_INVALID_ARG, "refs is NULL"},
        {32, 32, 1, 17, 1, -1, 0, FLUX_ERR_INVALID_ARG, "n_refs"},
        {32, 32, 1, 0, 1, 1e9f, 0, FLUX_ERR_INVALID_ARG, "guidance"},
        {32, 32, 1, 0, 1, -1, 1, FLUX_ERR_INVALID_ARG, "prompt"},
        {32, 32, 1, 0, 5000, -1, 0, FLUX_ERR_INVALID_ARG, "batch"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        flux_params_init(&p);
        p.embeddings = bad[i].no_text ? NULL : emb.data;
        p.width = bad[i].w, p.height = bad[i].h, p.steps = bad[i].steps, p.n_refs = bad[i].n_refs;
        p.batch = bad[i].batch, p.guidance = bad[i].guidance, p.seed = 1;
        flux_image *outs[1] = {NULL};
        flux_status st = bad[i].batch > 1 ? flux_generate_batch(ctx, &p, outs) : flux_generate(ctx, &p, &img);
        CHECK_MSG(st == bad[i].want, "case %zu: %s, expected %s (%s)", i, flux_status_name(st),
                  flux_status_name(bad[i].want), flux_error(ctx));
        CHECK_MSG(strstr(flux_error(ctx), bad[i].msg), "case %zu: message '%s' lacks '%s'", i, flux_error(ctx), bad[i].msg);
    }
    /* noise for one image, not a batch */
    flux_params_init(&p);
    p.embeddings = emb.data;
    float noise[128 * 4] = {0};
    p.noise = noise, p.width = p.height = 32, p.batch = 2;
    flux_image *two[2];
    CHECK_EQ_INT(flux_generate_batch(ctx, &p, two), FLUX_ERR_INVALID_ARG);
    /* no model */
    flux_ctx *empty = flux_new(NULL);
    CHECK_EQ_INT(flux_generate(empty, &p, &img), FLUX_ERR_STATE);
    CHECK_EQ_INT(flux_generate(ctx, NULL, &img), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_generate(NULL, &p, &img), FLUX_ERR_INVALID_ARG);
    flux_free(empty);
    fx_npy_free(&emb);
    flux_free(ctx);
}

/* A failing CLI run writes no output file. */
TEST(pipeline_cli_failure_writes_nothing) {
    char out[1100], cmd[3000];
    snprintf(out, sizeof out, "%s/never.png", fx_test_tmpdir());
    snprintf(cmd, sizeof cmd, "'%s' -d '%s' --embeddings '%s/out/emb.npy' -W 64 -H 64 -s 2000 -o '%s' -q",
             fx_test_flux_bin(), fx_test_path("golden/model"), golden_dir("t2i-48x64-2step"), out);
    char *log = NULL;
    int rc = fx_test_run(cmd, &log);
    CHECK(rc != 0);
    free(log);
    CHECK(access(out, F_OK) != 0);
}

/* The PNG's "schedule" text names the schedule for every kind (it was empty
 * for the shifted and linear schedules), as does the A1111 parameters text. */
TEST(pipeline_png_records_the_schedule) {
    fx_npy emb;
    flux_ctx *ctx = fx_gcase_ctx_emb("t2i-48x64-2step", 1, FLUX_PRECISION_DEFAULT, NULL, &emb);
    REQUIRE(ctx);
    static const struct {
        flux_schedule kind;
        const char *name;
    } cases[] = {{FLUX_SCHEDULE_SHIFTED, "shifted"}, {FLUX_SCHEDULE_LINEAR, "linear"}, {FLUX_SCHEDULE_POWER, "power 3"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        flux_params p;
        flux_params_init(&p);
        p.embeddings = emb.data;
        p.width = p.height = 32, p.steps = 1, p.seed = 2;
        p.schedule = cases[i].kind, p.power_alpha = 3;
        flux_image *img = NULL;
        REQUIRE_MSG(flux_generate(ctx, &p, &img) == FLUX_OK, "%s", flux_error(ctx));
        const char *png = fx_test_tmp_path("s.png");
        REQUIRE(flux_image_save(ctx, img, png) == FLUX_OK);
        flux_image_free(img);
        img = NULL;
        REQUIRE(flux_image_load(ctx, png, &img) == FLUX_OK);
        const char *s = flux_image_get_text(img, "schedule"), *a = flux_image_get_text(img, "parameters");
        CHECK_MSG(s && !strcmp(s, cases[i].name), "schedule text '%s', want '%s'", s ? s : "(none)", cases[i].name);
        char want[64];
        snprintf(want, sizeof want, "Schedule type: %s", cases[i].name);
        CHECK_MSG(a && strstr(a, want), "parameters '%s' lack '%s'", a ? a : "(none)", want);
        flux_image_free(img);
    }
    fx_npy_free(&emb);
    flux_free(ctx);
}
