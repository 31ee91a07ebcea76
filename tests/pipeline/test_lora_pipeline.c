/*
 * test_lora_pipeline.c — LoRA adapters end to end (flux_lora_*, flux.h) on
 * the tiny golden model, in FLUX_PRECISION=f32:
 *
 *   - every format tools/gen_lora writes (diffusers/PEFT with metadata
 *     alpha and an alpha_pattern entry, BFL-PEFT with the diffusion_model.,
 *     base_model.model. or no prefix, kohya with .alpha, ComfyUI lora_up/down,
 *     LyCORIS LoKr with a factored and with whole factors, LoHa in its
 *     low-rank and its dense form, diff), in
 *     bf16, f16 and f32 factors, applied at run time to the bf16 model,
 *     against the same model with W' = W + strength·scale·ΔW merged offline
 *     by the tool (an independent implementation of the key conventions and
 *     of the BFL ↔ diffusers rows) and saved as f32 weights;
 *   - DoRA (ai-toolkit/PEFT .magnitude, LyCORIS .dora_scale on LoRA, LoKr,
 *     LoHa and diff) against W + λ·(m·(W + sΔW)/‖W + sΔW‖ − W) merged by the
 *     tool, also after a change of strength and on a BFL single file;
 *   - two stacked adapters (0.7 and −0.4) against two merges;
 *   - CFG on the base variant, a batch of two, img2img with a reference,
 *     a BFL single-file transformer (split to_k and fused qkv adapters on
 *     its row views);
 *   - scale 0, removal and clearing give the model without adapters bit
 *     for bit; results are bit-identical for 1, 2 and 3 threads;
 *   - the PNG metadata (<lora:NAME:SCALE> after the prompt of "parameters",
 *     "loras"), and API errors.
 *
 * Tolerance: max|latents − merged latents| / max|merged latents| <= 1e-5.
 * The two sides round differently (W + ΔW rounded once to f32 and one
 * product, against W·x and ΔW·x as two products in f32); over 2 steps of
 * the tiny model the difference measured is 2e-7..5e-7 (printed per case),
 * so 1e-5 leaves a 20x margin while a wrong row, scale or sign (changes of
 * 1e-2..5e-1, also printed) cannot pass. Every adapter must move the
 * latents by more than 1e-2, so a test cannot pass by ignoring it.
 */
#include "tests/test.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/base/npy.h"

#define TOL_MERGED 1e-5
#define MIN_EFFECT 1e-2

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* gen_lora with `args` on `model`: writes <tmp>/<name>.safetensors (and,
 * with merge, <tmp>/<name>-merged). Returns the adapter path (static per
 * call slot) or NULL after a failure. */
static const char *gen_lora(const char *model, const char *name, const char *args, int merge) {
    static char paths[8][PATH_MAX];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, PATH_MAX, "%s/%s.safetensors", fx_test_tmpdir(), name);
    char all[4 * PATH_MAX], merged[PATH_MAX + 16] = "";
    if (merge) snprintf(merged, sizeof merged, "--merge '%s/%s-merged'", fx_test_tmpdir(), name);
    snprintf(all, sizeof all, "-d '%s' -o '%s' %s %s", model, path, args, merged);
    return FX_TEST_RUN_TOOL("gen_lora", all) ? NULL : path;
}

static const char *merged_dir(const char *name) {
    static char dirs[4][PATH_MAX];
    static int next;
    char *d = dirs[next++ % 4];
    snprintf(d, PATH_MAX, "%s/%s-merged", fx_test_tmpdir(), name);
    return d;
}

typedef struct job {
    const char *model;
    const char *transformer;    /* single file, or NULL */
    const char *lora[3];
    float scale[3];
    int n_lora;
    int threads;                /* 0 = 2 */
    int base;                   /* force the base variant (CFG, guidance 4) */
    int batch;                  /* 0 = 1 */
    const char *ref;            /* reference image, or NULL */
    int prompt;                 /* encode "a cat" (else its embeddings, encoded once) */
} job;

/* The result of a job: the latents of image 0 and the images. */
typedef struct result {
    fx_npy latents;
    flux_image *img[2];
    int ok;
} result;

static void result_free(result *r) {
    fx_npy_free(&r->latents);
    for (int i = 0; i < 2; i++) flux_image_free(r->img[i]);
    memset(r, 0, sizeof *r);
}

static flux_ctx *job_ctx(const job *j) {
    flux_options o;
    flux_options_init(&o);
    o.threads = j->threads ? j->threads : 2;
    o.precision = FLUX_PRECISION_F32;
    o.no_disk_cache = 1;
    flux_ctx *ctx = flux_new(&o);
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.transformer_file = j->transformer;
    if (j->base) lo.distilled = 0;
    if (!ctx || flux_load(ctx, j->model, &lo) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "flux_load %s: %s", j->model, flux_error(ctx));
        flux_free(ctx);
        return NULL;
    }
    for (int i = 0; i < j->n_lora; i++)
        if (flux_lora_load(ctx, j->lora[i], j->scale[i]) != FLUX_OK) {
            fx_test_fail(__FILE__, __LINE__, "flux_lora_load %s: %s", j->lora[i], flux_error(ctx));
            flux_free(ctx);
            return NULL;
        }
    return ctx;
}

/* The embeddings of "a cat" and of "" (CFG), encoded once per test. */
static float *g_emb, *g_neg;

static int embeddings(flux_ctx *ctx) {
    flux_model_info info;
    if (g_emb) return 1;
    if (flux_get_model_info(ctx, &info) != FLUX_OK) return 0;
    g_emb = malloc(sizeof(float) * FLUX_TEXT_TOKENS * (size_t)info.text_dim);
    g_neg = malloc(sizeof(float) * FLUX_TEXT_TOKENS * (size_t)info.text_dim);
    if (!g_emb || !g_neg || flux_encode_text(ctx, "a cat", g_emb) != FLUX_OK || flux_encode_text(ctx, "", g_neg) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "encoding the prompt: %s", flux_error(ctx));
        free(g_emb), free(g_neg);
        g_emb = g_neg = NULL;
        return 0;
    }
    return 1;
}

/* Generate "a cat" (seed 5, 32x32, 2 steps) on a context; dump tag names
 * the dump folder. */
static result generate(flux_ctx *ctx, const job *j, const char *tag) {
    result r = {0};
    flux_params p;
    flux_params_init(&p);
    if (j->prompt) {
        p.prompt = "a cat";
    } else { /* the text encoder once per test: its embeddings */
        if (!embeddings(ctx)) return r;
        p.embeddings = g_emb;
        if (j->base) p.negative_embeddings = g_neg;
    }
    p.seed = 5;
    p.width = p.height = 32;
    p.steps = 2;
    p.batch = j->batch ? j->batch : 1;
    if (j->base) p.guidance = 4.0f;
    char dump[PATH_MAX];
    snprintf(dump, sizeof dump, "%s/dump-%s", fx_test_tmpdir(), tag);
    mkdir(dump, 0777);
    p.dump_dir = dump;
    flux_image *ref = NULL;
    if (j->ref && flux_image_load(ctx, j->ref, &ref) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "%s", flux_error(ctx));
        return r;
    }
    const flux_image *refs[1] = {ref};
    p.refs = refs;
    p.n_refs = ref != NULL;
    flux_status st = flux_generate_batch(ctx, &p, r.img);
    flux_image_free(ref);
    if (st != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "generate (%s): %s", tag, flux_error(ctx));
        return r;
    }
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/latents.npy", dump);
    fx_err err = {0};
    if (fx_npy_read(path, &r.latents, &err) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return r;
    }
    r.ok = 1;
    return r;
}

static result run(const job *j, const char *tag) {
    flux_ctx *ctx = job_ctx(j);
    result r = {0};
    if (ctx) r = generate(ctx, j, tag);
    flux_free(ctx);
    return r;
}

static double rel(const result *a, const result *b) {
    if (!a->ok || !b->ok || a->latents.count != b->latents.count) return 1e9;
    return fx_test_rel_err(a->latents.data, b->latents.data, a->latents.count);
}

static int same_bits(const result *a, const result *b) {
    return a->ok && b->ok && a->latents.count == b->latents.count &&
           !memcmp(a->latents.data, b->latents.data, a->latents.count * sizeof(float)) &&
           fx_test_same_pixels(a->img[0], b->img[0]);
}

/* The adapter run against the merged run (and against the plain model). */
static void expect_merged(int line, const char *what, const job *with, const job *merged, const result *plain) {
    result a = run(with, "lora"), b = run(merged, "merged");
    double err = rel(&a, &b), effect = plain ? rel(plain, &b) : 1;
    printf("      %-28s lora vs merged %.2e   effect of the adapter %.2e\n", what, err, effect);
    if (!(err <= TOL_MERGED)) fx_test_fail(__FILE__, line, "%s: %.3g from the merged model (tolerance %g)", what, err, TOL_MERGED);
    if (!(effect >= MIN_EFFECT)) fx_test_fail(__FILE__, line, "%s: the adapter changes the latents by only %.3g", what, effect);
    for (int i = 1; i < 2; i++)
        if (a.img[i] || b.img[i])
            if (fx_test_max_pixel_diff(a.img[i], b.img[i]) > 1)
                fx_test_fail(__FILE__, line, "%s: image %d differs from the merged one by %d", what, i,
                             fx_test_max_pixel_diff(a.img[i], b.img[i]));
    result_free(&a);
    result_free(&b);
}

/* The golden model folder (fx_test_path's buffer is reused by every call). */
static const char *model(void) {
    static char path[PATH_MAX];
    if (!path[0]) snprintf(path, sizeof path, "%s", fx_test_path("golden/model"));
    return path;
}

static int starts(const char *s, const char *prefix) { return s && !strncmp(s, prefix, strlen(prefix)); }

/* ------------------------------------------------------------------------ */
/* Formats                                                                  */
/* ------------------------------------------------------------------------ */

TEST(lora_pipeline_formats_match_merged) {
    static const struct {
        const char *name, *args;
        float strength;
    } cases[] = {
        {"diffusers", "--format diffusers --rank 4 --seed 11", 1.0f},
        {"diffusers-f32", "--format diffusers --rank 3 --alpha 6 --dtype f32 --seed 12", 0.8f},
        {"bfl", "--format bfl --rank 4 --seed 13", 1.0f},
        {"bfl-bare-alpha", "--format bfl-bare --rank 4 --alpha 8 --seed 14", 1.0f},
        {"bfl-peft", "--format bfl-peft --rank 2 --seed 15", 1.5f},
        {"kohya", "--format kohya --rank 4 --seed 16", 1.0f},
        {"kohya-f16", "--format kohya --rank 8 --alpha 4 --dtype f16 --seed 17", -0.6f},
        {"comfy", "--format comfy --rank 4 --seed 18", 1.0f},
        {"lokr", "--format lokr --rank 4 --seed 19", 1.0f},
        {"lokr-full", "--format lokr-full --seed 20 --amp 0.2", 1.0f},
        {"loha", "--format loha --rank 4 --seed 21 --amp 0.2", 1.0f},          /* as a rank-16 product */
        {"loha-dense", "--format loha --rank 12 --seed 23 --amp 0.2", 0.7f},   /* ΔW built: 144·(in+out) > in·out */
        {"diff", "--format diff --seed 22 --amp 0.2", 0.5f},
        /* DoRA: ai-toolkit / PEFT .magnitude [out] and LyCORIS .dora_scale [out, 1] */
        {"dora-diffusers", "--format diffusers --rank 4 --seed 24 --dora out", 1.0f},
        {"dora-bfl", "--format bfl --rank 4 --seed 25 --dora out --dtype f32", 0.6f},
        {"dora-kohya", "--format kohya --rank 4 --seed 26 --dora out", 1.0f},
        {"dora-lokr", "--format lokr --rank 4 --seed 27 --dora out", 1.0f},
        {"dora-loha", "--format loha --rank 4 --seed 28 --amp 0.2 --dora out", 1.0f},
        {"dora-diff", "--format diff --seed 29 --amp 0.2 --dora out --dtype f16", -0.5f},
    };
    const job plain_job = {.model = model()};
    result plain = run(&plain_job, "plain");
    REQUIRE(plain.ok);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char args[256];
        snprintf(args, sizeof args, "%s --strength %g", cases[i].args, (double)cases[i].strength);
        const char *file = gen_lora(model(), cases[i].name, args, 1);
        if (!file) continue;
        job with = {.model = model(), .lora = {file}, .scale = {cases[i].strength}, .n_lora = 1};
        job merged = {.model = merged_dir(cases[i].name)};
        expect_merged(__LINE__, cases[i].name, &with, &merged, &plain);
    }
    result_free(&plain);
}

TEST(lora_pipeline_two_adapters_stack) {
    const char *a = gen_lora(model(), "stack-a", "--format bfl --rank 4 --seed 31 --strength 0.7", 1);
    REQUIRE(a);
    /* the second merge starts from the first merged folder */
    char first[PATH_MAX];
    snprintf(first, sizeof first, "%s", merged_dir("stack-a"));
    const char *b = gen_lora(first, "stack-b", "--format kohya --rank 6 --seed 32 --strength -0.4", 1);
    REQUIRE(b);
    job with = {.model = model(), .lora = {a, b}, .scale = {0.7f, -0.4f}, .n_lora = 2};
    job merged = {.model = merged_dir("stack-b")};
    const job plain_job = {.model = model()};
    result plain = run(&plain_job, "plain");
    expect_merged(__LINE__, "0.7 bfl + -0.4 kohya", &with, &merged, &plain);
    result_free(&plain);
}

/* ------------------------------------------------------------------------ */
/* Modes of generation                                                      */
/* ------------------------------------------------------------------------ */

TEST(lora_pipeline_cfg_batch_reference) {
    const char *a = gen_lora(model(), "modes", "--format comfy --rank 4 --seed 41", 1);
    REQUIRE(a);
    char ref[PATH_MAX];
    snprintf(ref, sizeof ref, "%s", fx_test_path("golden/multiref-48x48-2step/ref0.png"));
    static const struct {
        const char *what;
        int base, batch, ref;
    } modes[] = {{"CFG (base variant, g 4)", 1, 0, 0}, {"batch of 2", 0, 2, 0}, {"img2img reference", 0, 0, 1},
                 {"CFG + batch + reference", 1, 2, 1}};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        job with = {.model = model(), .lora = {a}, .scale = {1.0f}, .n_lora = 1, .base = modes[i].base,
                    .batch = modes[i].batch, .ref = modes[i].ref ? ref : NULL};
        job merged = with, plain = with;
        merged.model = merged_dir("modes"), merged.n_lora = 0;
        plain.n_lora = 0;
        result p = run(&plain, "plain");
        expect_merged(__LINE__, modes[i].what, &with, &merged, &p);
        result_free(&p);
    }
}

TEST(lora_pipeline_bfl_single_file) {
    const char *sf = fx_test_tmp_path("klein-bfl.safetensors");
    char args[3 * PATH_MAX];
    snprintf(args, sizeof args, "--layout bfl -d '%s' -o '%s'", model(), sf);
    REQUIRE(FX_TEST_RUN_TOOL("make_single_file", args) == 0);
    const job plain_job = {.model = model()};
    result plain = run(&plain_job, "plain");
    /* diffusers names (split to_q/to_k/to_v on the fused qkv views) and
     * kohya names (the fused module itself) */
    static const char *const fmts[][2] = {{"sf-diffusers", "--format diffusers --rank 4 --seed 51"},
                                          {"sf-kohya", "--format kohya --rank 4 --seed 52"}};
    for (int i = 0; i < 2; i++) {
        const char *a = gen_lora(model(), fmts[i][0], fmts[i][1], 1);
        if (!a) continue;
        job with = {.model = model(), .transformer = sf, .lora = {a}, .scale = {1.0f}, .n_lora = 1};
        job merged = {.model = merged_dir(fmts[i][0])};
        expect_merged(__LINE__, fmts[i][0], &with, &merged, &plain);
    }
    result_free(&plain);
}

/* ------------------------------------------------------------------------ */
/* Bitwise properties                                                       */
/* ------------------------------------------------------------------------ */

TEST(lora_pipeline_zero_scale_and_removal_are_exact) {
    const char *a = gen_lora(model(), "exact-a", "--format lokr --rank 4 --seed 61", 0);
    const char *b = gen_lora(model(), "exact-b", "--format diffusers --rank 4 --seed 62", 0);
    REQUIRE(a && b);
    job plain_job = {.model = model()};
    result plain = run(&plain_job, "plain");
    job j = {.model = model()};
    flux_ctx *ctx = job_ctx(&j);
    REQUIRE(ctx);
    REQUIRE(flux_lora_load(ctx, a, 0.0f) == FLUX_OK);
    result r0 = generate(ctx, &j, "zero");
    CHECK_MSG(same_bits(&r0, &plain), "an adapter at scale 0 changed the result");
    REQUIRE(flux_lora_set_scale(ctx, 0, 1.0f) == FLUX_OK);
    result r1 = generate(ctx, &j, "one");
    CHECK(rel(&r1, &plain) >= MIN_EFFECT);
    REQUIRE(flux_lora_load(ctx, b, 0.0f) == FLUX_OK); /* a second adapter at 0 changes nothing */
    result r2 = generate(ctx, &j, "one-and-zero");
    CHECK_MSG(same_bits(&r2, &r1), "a second adapter at scale 0 changed the result");
    REQUIRE(flux_lora_set_scale(ctx, 0, 0.0f) == FLUX_OK);
    result r3 = generate(ctx, &j, "zeros");
    CHECK_MSG(same_bits(&r3, &plain), "two adapters at scale 0 changed the result");
    REQUIRE(flux_lora_set_scale(ctx, 1, 0.5f) == FLUX_OK);
    REQUIRE(flux_lora_remove(ctx, 1) == FLUX_OK);
    CHECK_EQ_INT(flux_lora_count(ctx), 1);
    result r4 = generate(ctx, &j, "removed");
    CHECK_MSG(same_bits(&r4, &plain), "removing the active adapter did not restore the model");
    REQUIRE(flux_lora_set_scale(ctx, 0, 1.0f) == FLUX_OK);
    result r5 = generate(ctx, &j, "again");
    CHECK_MSG(same_bits(&r5, &r1), "rescaling back to 1 did not give the same result");
    flux_lora_clear(ctx);
    CHECK_EQ_INT(flux_lora_count(ctx), 0);
    result r6 = generate(ctx, &j, "cleared");
    CHECK_MSG(same_bits(&r6, &plain), "clearing the adapters did not restore the model");
    result *all[] = {&plain, &r0, &r1, &r2, &r3, &r4, &r5, &r6};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) result_free(all[i]);
    flux_free(ctx);
}

TEST(lora_pipeline_threads_bitwise) {
    const char *a = gen_lora(model(), "thr-a", "--format kohya --rank 5 --seed 71", 0);
    const char *b = gen_lora(model(), "thr-b", "--format lokr --rank 3 --seed 72", 0);
    const char *c = gen_lora(model(), "thr-c", "--format loha --rank 2 --seed 73 --amp 0.2", 0);
    REQUIRE(a && b && c);
    result r[3];
    for (int t = 1; t <= 3; t++) {
        job j = {.model = model(), .lora = {a, b, c}, .scale = {0.9f, 0.5f, -0.7f}, .n_lora = 3, .threads = t, .batch = 2};
        r[t - 1] = run(&j, "threads");
    }
    CHECK_MSG(same_bits(&r[0], &r[1]) && fx_test_max_pixel_diff(r[0].img[1], r[1].img[1]) == 0, "1 and 2 threads differ");
    CHECK_MSG(same_bits(&r[2], &r[1]) && fx_test_max_pixel_diff(r[2].img[1], r[1].img[1]) == 0, "3 and 2 threads differ");
    for (int t = 0; t < 3; t++) result_free(&r[t]);
}

/* ------------------------------------------------------------------------ */
/* Metadata and API                                                         */
/* ------------------------------------------------------------------------ */

TEST(lora_pipeline_png_metadata) {
    const char *a = gen_lora(model(), "style_one", "--format bfl --rank 2 --seed 81", 0);
    const char *b = gen_lora(model(), "detail", "--format kohya --rank 2 --seed 82", 0);
    REQUIRE(a && b);
    job j = {.model = model(), .lora = {a, b}, .scale = {0.7f, -0.4f}, .n_lora = 2, .prompt = 1};
    flux_ctx *ctx = job_ctx(&j);
    REQUIRE(ctx);
    result r = generate(ctx, &j, "meta");
    REQUIRE(r.ok);
    const char *params = flux_image_get_text(r.img[0], "parameters");
    CHECK_MSG(starts(params, "a cat <lora:style_one:0.7> <lora:detail:-0.4>\nSteps: 2,"), "%s",
              params ? params : "(none)");
    CHECK(!strcmp(flux_image_get_text(r.img[0], "prompt"), "a cat"));
    const char *loras = flux_image_get_text(r.img[0], "loras");
    CHECK_MSG(loras && !strcmp(loras, "style_one:0.7, detail:-0.4"), "%s", loras ? loras : "(none)");
    /* the image saved as PNG keeps them */
    const char *png = fx_test_tmp_path("meta.png");
    REQUIRE(flux_image_save(ctx, r.img[0], png) == FLUX_OK);
    flux_image *back = NULL;
    REQUIRE(flux_image_load(ctx, png, &back) == FLUX_OK);
    CHECK(flux_image_get_text(back, "parameters") && !strcmp(flux_image_get_text(back, "parameters"), params));
    flux_image_free(back);
    result_free(&r);
    /* scale 0: not listed; none active: no "loras" and the plain parameters */
    REQUIRE(flux_lora_set_scale(ctx, 0, 0.0f) == FLUX_OK);
    r = generate(ctx, &j, "meta0");
    CHECK(r.ok && starts(flux_image_get_text(r.img[0], "parameters"), "a cat <lora:detail:-0.4>\n"));
    result_free(&r);
    REQUIRE(flux_lora_set_scale(ctx, 1, 0.0f) == FLUX_OK);
    r = generate(ctx, &j, "meta00");
    CHECK(r.ok && !flux_image_get_text(r.img[0], "loras") &&
          starts(flux_image_get_text(r.img[0], "parameters"), "a cat\nSteps"));
    result_free(&r);
    flux_lora_info info;
    REQUIRE(flux_lora_get_info(ctx, 0, &info) == FLUX_OK);
    CHECK(!strcmp(info.name, "style_one") && !strcmp(info.path, a) && info.scale == 0.0f && info.modules == 29 &&
          !strcmp(info.kinds, "LoRA") && !strcmp(info.naming, "BFL") && info.ignored_keys == 0 && !info.warning[0]);
    flux_free(ctx);
}

TEST(lora_pipeline_api_errors) {
    const char *a = gen_lora(model(), "api", "--format bfl --rank 2 --seed 91", 0);
    REQUIRE(a);
    flux_ctx *ctx = flux_new(NULL);
    REQUIRE(ctx);
    CHECK(flux_lora_load(ctx, a, 1.0f) == FLUX_ERR_STATE && strstr(flux_error(ctx), "load a model"));
    CHECK(flux_lora_count(ctx) == 0 && flux_lora_count(NULL) == 0);
    REQUIRE(flux_load(ctx, model(), NULL) == FLUX_OK);
    CHECK(flux_lora_load(ctx, a, NAN) == FLUX_ERR_INVALID_ARG && strstr(flux_error(ctx), "not a finite"));
    CHECK(flux_lora_load(ctx, a, INFINITY) == FLUX_ERR_INVALID_ARG);
    CHECK(flux_lora_load(ctx, fx_test_tmp_path("missing.safetensors"), 1.0f) == FLUX_ERR_IO &&
          strstr(flux_error(ctx), "missing.safetensors"));
    CHECK(flux_lora_load(ctx, NULL, 1.0f) == FLUX_ERR_INVALID_ARG);
    CHECK(flux_lora_set_scale(ctx, 0, 1.0f) == FLUX_ERR_INVALID_ARG && strstr(flux_error(ctx), "no adapter 0"));
    CHECK(flux_lora_remove(ctx, -1) == FLUX_ERR_INVALID_ARG);
    for (int i = 0; i < FLUX_MAX_LORAS; i++) REQUIRE(flux_lora_load(ctx, a, 0.01f) == FLUX_OK);
    CHECK(flux_lora_load(ctx, a, 1.0f) == FLUX_ERR_INVALID_ARG && strstr(flux_error(ctx), "at most"));
    CHECK(flux_lora_set_scale(ctx, FLUX_MAX_LORAS - 1, NAN) == FLUX_ERR_INVALID_ARG);
    flux_lora_info info;
    CHECK(flux_lora_get_info(ctx, FLUX_MAX_LORAS, &info) == FLUX_ERR_INVALID_ARG);
    CHECK(flux_lora_remove(ctx, 3) == FLUX_OK && flux_lora_count(ctx) == FLUX_MAX_LORAS - 1);
    /* a new model drops the adapters of the old one */
    REQUIRE(flux_load(ctx, model(), NULL) == FLUX_OK);
    CHECK_EQ_INT(flux_lora_count(ctx), 0);
    flux_free(ctx);
}

/* The slots of removed adapters hold nothing: load → remove → a load that
 * fails must not free the removed adapter's strings again (double free),
 * and with two adapters, must not free the live one's (use after free);
 * the survivor keeps its name, path and effect. Issue 34 NEW-1 / 32 D1
 * (flux-server died of it from a client request). */
TEST(lora_pipeline_failed_load_after_remove) {
    const char *a = gen_lora(model(), "slot-a", "--format bfl --rank 2 --seed 93", 0);
    const char *b = gen_lora(model(), "slot-b", "--format kohya --rank 2 --seed 94", 0);
    REQUIRE(a && b);
    char junk[PATH_MAX];
    snprintf(junk, sizeof junk, "%s", fx_test_tmp_path("slot-junk.safetensors"));
    FILE *f = fopen(junk, "wb");
    REQUIRE(f);
    fputs("this is not a safetensors file, but long enough to be read", f);
    fclose(f);
    flux_ctx *ctx = flux_new(NULL);
    REQUIRE(ctx);
    REQUIRE(flux_load(ctx, model(), NULL) == FLUX_OK);
    /* one adapter: load, remove, failing load, then a good one again */
    REQUIRE(flux_lora_load(ctx, a, 1.0f) == FLUX_OK);
    REQUIRE(flux_lora_remove(ctx, 0) == FLUX_OK);
    CHECK(flux_lora_load(ctx, junk, 1.0f) != FLUX_OK && strstr(flux_error(ctx), "slot-junk"));
    CHECK_EQ_INT(flux_lora_count(ctx), 0);
    REQUIRE(flux_lora_load(ctx, a, 1.0f) == FLUX_OK);
    /* two adapters: remove the first, the failing load lands in the slot
     * the second occupied before */
    REQUIRE(flux_lora_load(ctx, b, 0.5f) == FLUX_OK);
    REQUIRE(flux_lora_remove(ctx, 0) == FLUX_OK);
    CHECK(flux_lora_load(ctx, junk, 1.0f) != FLUX_OK);
    CHECK(flux_lora_load(ctx, fx_test_tmp_path("slot-missing.safetensors"), 1.0f) == FLUX_ERR_IO);
    CHECK_EQ_INT(flux_lora_count(ctx), 1);
    flux_lora_info info;
    REQUIRE(flux_lora_get_info(ctx, 0, &info) == FLUX_OK);
    CHECK(!strcmp(info.path, b) && !strcmp(info.name, "slot-b") && info.scale == 0.5f);
    CHECK(flux_lora_remove(ctx, 0) == FLUX_OK && flux_lora_count(ctx) == 0);
    CHECK(flux_lora_load(ctx, junk, 1.0f) != FLUX_OK && flux_lora_count(ctx) == 0);
    flux_free(ctx);
}

/* tools/gen_lora --dora out|in with every format (issue 34 NEW-4: --dora in
 * with diffusers or bfl* read an [in] vector as an [out] tensor, a heap
 * overflow under SANITIZE=1, garbage magnitudes without): "out" gives a
 * DoRA adapter flux.c loads; "in" gives LyCORIS' per-input form, which
 * flux.c refuses naming the key, and on the PEFT formats (no such form)
 * exits 1 naming the option, writing nothing. */
TEST(lora_gen_lora_dora_every_format) {
    static const char *const formats[] = {"diffusers", "bfl", "bfl-bare", "bfl-peft", "kohya",
                                          "comfy",     "lokr", "lokr-full", "loha",    "diff"};
    flux_ctx *ctx = flux_new(&(flux_options){.threads = 2, .use_mmap = 1, .device = -1});
    REQUIRE(ctx && flux_load(ctx, model(), NULL) == FLUX_OK);
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++) {
        const int peft = !strcmp(formats[i], "diffusers") || starts(formats[i], "bfl");
        char name[64], args[256];
        snprintf(name, sizeof name, "dora-out-%s", formats[i]);
        snprintf(args, sizeof args, "--format %s --rank 2 --seed %zu --dora out", formats[i], 300 + i);
        const char *out = gen_lora(model(), name, args, 0);
        REQUIRE(out);
        CHECK_MSG(flux_lora_load(ctx, out, 1.0f) == FLUX_OK, "%s: %s", name, flux_error(ctx));
        flux_lora_info info;
        CHECK(flux_lora_get_info(ctx, 0, &info) == FLUX_OK && strstr(info.kinds, "DoRA"));
        flux_lora_clear(ctx);

        snprintf(name, sizeof name, "dora-in-%s", formats[i]);
        char path[PATH_MAX], cmd[4 * PATH_MAX], *said = NULL;
        snprintf(path, sizeof path, "%s/%s.safetensors", fx_test_tmpdir(), name);
        const char *tool = fx_test_tool("gen_lora");
        REQUIRE(tool);
        snprintf(cmd, sizeof cmd, "'%s' -d '%s' -o '%s' --format %s --rank 2 --seed %zu --dora in", tool, model(), path,
                 formats[i], 300 + i);
        const int rc = fx_test_run(cmd, &said);
        if (peft) {
            CHECK_MSG(rc == 1 && said && strstr(said, "gen_lora: --dora in: --format ") && !fx_test_file_exists(path),
                      "%s: exit %d: %s", name, rc, said ? said : "");
        } else {
            CHECK_MSG(rc == 0, "%s: exit %d: %s", name, rc, said ? said : "");
            CHECK_MSG(flux_lora_load(ctx, path, 1.0f) != FLUX_OK && strstr(flux_error(ctx), ".dora_scale"), "%s: %s",
                      name, flux_error(ctx));
            CHECK_EQ_INT(flux_lora_count(ctx), 0);
        }
        free(said);
    }
    flux_free(ctx);
}

/* DoRA beside other adapters: a second adapter on the same rows is refused
 * (the rows' gate would not compose) and the first keeps working. Changing the strength re-attaches (norms made again)
 * and matches the merge at that strength; a BFL single file (fused qkv
 * views) takes a diffusers DoRA on its row thirds. */
TEST(lora_pipeline_dora_with_others) {
    const char *d = gen_lora(model(), "dora-stack", "--format kohya --rank 4 --seed 101 --dora out --strength 0.5", 1);
    const char *other = gen_lora(model(), "dora-other", "--format bfl --rank 2 --seed 102", 0);
    REQUIRE(d && other);
    const job plain_job = {.model = model()};
    result plain = run(&plain_job, "plain");
    REQUIRE(plain.ok);
    flux_ctx *ctx = job_ctx(&(job){.model = model(), .lora = {d}, .scale = {1.0f}, .n_lora = 1});
    REQUIRE(ctx);
    CHECK(flux_lora_load(ctx, other, 1.0f) == FLUX_ERR_UNSUPPORTED && strstr(flux_error(ctx), "DoRA") &&
          strstr(flux_error(ctx), "same rows"));
    CHECK_EQ_INT(flux_lora_count(ctx), 1);
    flux_lora_info info;
    REQUIRE(flux_lora_get_info(ctx, 0, &info) == FLUX_OK);
    CHECK_MSG(!strcmp(info.kinds, "LoRA+DoRA"), "%s", info.kinds);
    /* strength 1 → 0.5: matches the merge made at 0.5 */
    REQUIRE(flux_lora_set_scale(ctx, 0, 0.5f) == FLUX_OK);
    result a = generate(ctx, &plain_job, "dora-half");
    flux_free(ctx);
    job merged = {.model = merged_dir("dora-stack")};
    result b = run(&merged, "dora-half-merged");
    const double err = rel(&a, &b);
    printf("      %-28s lora vs merged %.2e\n", "DoRA kohya 1 -> 0.5", err);
    CHECK_MSG(err <= TOL_MERGED, "DoRA set to 0.5: %.3g from the merged model", err);
    result_free(&a), result_free(&b);
    /* a BFL single file: the fused qkv views take a diffusers DoRA's thirds */
    const char *sf = fx_test_tmp_path("klein-bfl-dora.safetensors");
    char args[3 * PATH_MAX];
    snprintf(args, sizeof args, "--layout bfl -d '%s' -o '%s'", model(), sf);
    REQUIRE(FX_TEST_RUN_TOOL("make_single_file", args) == 0);
    const char *ds = gen_lora(model(), "dora-sf", "--format diffusers --rank 4 --seed 104 --dora out", 1);
    REQUIRE(ds);
    job with = {.model = model(), .transformer = sf, .lora = {ds}, .scale = {1.0f}, .n_lora = 1};
    job msf = {.model = merged_dir("dora-sf")};
    expect_merged(__LINE__, "DoRA on a BFL single file", &with, &msf, &plain);
    result_free(&plain);
}
