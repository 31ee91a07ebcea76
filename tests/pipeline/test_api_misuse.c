/*
 * test_api_misuse.c — the library used wrongly: every public function of
 * flux.h called with NULL pointers (each accepts NULL where flux_error does,
 * or returns FLUX_ERR_INVALID_ARG, as flux.h documents), environment values
 * it does not understand, and thread counts it cannot honour.
 */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>

#include "flux.h"

/* Every function of flux.h, each NULL pointer argument in turn. */
TEST(api_every_function_accepts_null) {
    CHECK(strlen(flux_status_name((flux_status)12345)) > 0);
    flux_options_init(NULL);
    flux_load_options_init(NULL);
    flux_params_init(NULL);
    flux_free(NULL);
    CHECK(!strcmp(flux_error(NULL), "no context"));
    CHECK_EQ_INT(flux_threads(NULL), 0);

    flux_ctx *ctx = flux_new(NULL);
    REQUIRE(ctx);
    CHECK_EQ_INT(flux_load(NULL, fx_test_path("golden/model"), NULL), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_load(ctx, NULL, NULL), FLUX_ERR_INVALID_ARG);
    CHECK(strstr(flux_error(ctx), "no model folder"));
    flux_model_info info;
    CHECK_EQ_INT(flux_get_model_info(NULL, &info), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_get_model_info(ctx, NULL), FLUX_ERR_INVALID_ARG);

    /* images */
    flux_image_free(NULL);
    CHECK(flux_image_new(0, 16, 3) == NULL);
    CHECK_EQ_INT(flux_image_set_text(NULL, "k", "v"), FLUX_ERR_INVALID_ARG);
    flux_image *img = flux_image_new(16, 16, 3);
    REQUIRE(img);
    CHECK_EQ_INT(flux_image_set_text(img, NULL, "v"), FLUX_ERR_INVALID_ARG);
    CHECK(flux_image_get_text(NULL, "k") == NULL);
    CHECK(flux_image_get_text(img, NULL) == NULL);
    flux_image *loaded = (flux_image *)1;
    CHECK_EQ_INT(flux_image_load(ctx, NULL, &loaded), FLUX_ERR_INVALID_ARG);
    CHECK(loaded == NULL);
    CHECK_EQ_INT(flux_image_load(ctx, "x.png", NULL), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_image_load(NULL, NULL, NULL), FLUX_ERR_INVALID_ARG);
    const char *png = fx_test_tmp_path("ok.png");
    CHECK_EQ_INT(flux_image_save(ctx, NULL, png), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_image_save(ctx, img, NULL), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_image_save(NULL, NULL, NULL), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_image_save(NULL, img, png), FLUX_OK); /* no context: no message kept, still saved */
    flux_image hollow = *img;
    hollow.data = NULL;
    CHECK_EQ_INT(flux_image_save(ctx, &hollow, png), FLUX_ERR_INVALID_ARG);
    hollow = *img;
    hollow.n_text = 2; /* entries claimed, no arrays */
    CHECK_EQ_INT(flux_image_save(ctx, &hollow, png), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_image_load(NULL, png, &loaded), FLUX_OK);
    flux_image_free(loaded);

    /* generation and text, without and with a model */
    flux_params p;
    flux_params_init(&p);
    p.prompt = "a cat";
    flux_image *out = NULL, *outs[2] = {NULL, NULL};
    CHECK_EQ_INT(flux_generate(NULL, &p, &out), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_generate(ctx, NULL, &out), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_generate(ctx, &p, NULL), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_generate_batch(NULL, &p, outs), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_generate_batch(ctx, NULL, outs), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_generate_batch(ctx, &p, NULL), FLUX_ERR_INVALID_ARG);
    int32_t ids[8];
    int n = 0;
    CHECK_EQ_INT(flux_tokenize(NULL, "a", 0, ids, 8, &n), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_tokenize(ctx, NULL, 0, ids, 8, &n), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_tokenize(ctx, "a", 0, NULL, 8, &n), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_tokenize(ctx, "a", 0, ids, 8, NULL), FLUX_ERR_INVALID_ARG);
    float emb[4];
    CHECK_EQ_INT(flux_encode_text(NULL, "a", emb), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_encode_text(ctx, NULL, emb), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_encode_text(ctx, "a", NULL), FLUX_ERR_INVALID_ARG);
    flux_release_text_encoder(NULL);
    REQUIRE_MSG(flux_load(ctx, fx_test_path("golden/model"), NULL) == FLUX_OK, "%s", flux_error(ctx));
    CHECK_EQ_INT(flux_tokenize(ctx, "a", 0, NULL, 8, &n), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_tokenize(ctx, "a", 0, NULL, 0, &n), FLUX_OK); /* count only */
    CHECK(n > 1);
    CHECK_EQ_INT(flux_encode_text(ctx, NULL, emb), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_generate(ctx, &p, NULL), FLUX_ERR_INVALID_ARG);
    flux_release_text_encoder(ctx);

    /* information */
    CHECK(flux_version() && flux_build_info());
    char buf[4096];
    size_t need = flux_cpu_info(NULL, buf, sizeof buf); /* no context: what a default context would use */
    CHECK(need > 0 && need < sizeof buf && strstr(buf, "kernels:"));
    CHECK_EQ_INT(flux_cpu_info(NULL, NULL, 0), need);
    CHECK_EQ_INT(flux_cpu_info(ctx, NULL, 100), flux_cpu_info(ctx, buf, sizeof buf)); /* NULL buf: size only */
    CHECK(flux_threads(ctx) >= 1);
    flux_image_free(img);
    flux_free(ctx);
}

/* FLUX_ISA / FLUX_PRECISION values the library does not understand are
 * described by flux_error() after flux_new (they used to vanish). */
TEST(api_bad_environment_values_are_reported) {
    setenv("FLUX_ISA", "avx9", 1);
    flux_ctx *ctx = flux_new(NULL);
    REQUIRE(ctx);
    CHECK_MSG(strstr(flux_error(ctx), "FLUX_ISA='avx9' is unknown"), "%s", flux_error(ctx));
    flux_free(ctx);
#if defined(__x86_64__)
    setenv("FLUX_ISA", "neon", 1);
    ctx = flux_new(NULL);
    CHECK_MSG(ctx && strstr(flux_error(ctx), "FLUX_ISA='neon' is not supported: "), "%s", flux_error(ctx));
    flux_free(ctx);
#endif
    setenv("FLUX_ISA", "scalar", 1);
    setenv("FLUX_PRECISION", "f16", 1);
    ctx = flux_new(NULL);
    CHECK_MSG(ctx && strstr(flux_error(ctx), "FLUX_PRECISION='f16' is not a precision (f32, int8, bf16 or default)"), "%s",
              flux_error(ctx));
    flux_free(ctx);
    setenv("FLUX_PRECISION", "f32", 1); /* good values leave no message */
    ctx = flux_new(NULL);
    CHECK(ctx && !flux_error(ctx)[0]);
    flux_free(ctx);
}

/* OMP_NUM_THREADS beyond FLUX_MAX_THREADS is clamped like -t (100000 used to
 * crash inside libgomp); flux_options.threads too. */
TEST(api_thread_count_is_clamped) {
    flux_options o;
    flux_options_init(&o);
    o.threads = 5 * FLUX_MAX_THREADS;
    flux_ctx *ctx = flux_new(&o);
    REQUIRE(ctx);
    CHECK_EQ_INT(flux_threads(ctx), FLUX_MAX_THREADS);
    flux_free(ctx);
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=100000 '%s' --cpu-info", fx_test_flux_bin());
    CHECK_EQ_INT(fx_test_run(cmd, &out), 0);
    CHECK_MSG(out && strstr(out, "threads:  1024 (fixed)"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=100000 '%s' -q -d '%s' -p 'a cat' -W 64 -H 64 -s 1 -S 1 -o '%s'",
             fx_test_flux_bin(), fx_test_path("golden/model"), fx_test_tmp_path("cat.png"));
    CHECK_EQ_INT(fx_test_run(cmd, &out), 0);
    CHECK_MSG(fx_test_file_exists(fx_test_tmp_path("cat.png")), "%s", out);
    free(out);
}

/* A prompt with embeddings would be ignored yet recorded in the PNG: refused
 * (the CLI refuses -p with --embeddings at parse time). */
TEST(api_prompt_and_embeddings_exclude_each_other) {
    flux_options o;
    flux_options_init(&o);
    o.threads = 1;
    flux_ctx *ctx = flux_new(&o);
    REQUIRE(ctx && flux_load(ctx, fx_test_path("golden/model"), NULL) == FLUX_OK);
    flux_model_info info;
    REQUIRE(flux_get_model_info(ctx, &info) == FLUX_OK);
    float *emb = calloc((size_t)FLUX_TEXT_TOKENS * info.text_dim, sizeof(float));
    REQUIRE(emb);
    flux_params p;
    flux_params_init(&p);
    p.prompt = "a cat", p.embeddings = emb;
    p.width = p.height = 64, p.steps = 1, p.seed = 1;
    flux_image *img = NULL;
    CHECK_EQ_INT(flux_generate(ctx, &p, &img), FLUX_ERR_INVALID_ARG);
    CHECK_MSG(strstr(flux_error(ctx), "prompt and embeddings exclude each other"), "%s", flux_error(ctx));
    p.prompt = NULL;
    CHECK_MSG(flux_generate(ctx, &p, &img) == FLUX_OK, "%s", flux_error(ctx));
    const char *said = img ? flux_image_get_text(img, "prompt") : "?";
    CHECK_MSG(!said || !*said, "the metadata claims the prompt '%s'", said); /* nothing claimed */
    flux_image_free(img);
    free(emb);
    flux_free(ctx);
}
