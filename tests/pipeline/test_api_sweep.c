/*
 * test_api_sweep.c — every function of flux.h with arguments out of range:
 * enum values the header does not define, negative counts and indices,
 * huge sizes, non-finite floats, in every public option struct field
 * (flux_options, flux_load_options, flux_params, flux_quantize_options).
 * Each call returns the error flux.h documents (FLUX_ERR_INVALID_ARG with
 * a message naming the field, ...) and none crashes; NULL pointers alone
 * are test_api_misuse.c's.
 */
#include "tests/test.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flux.h"

static const char *golden_model(void) { return fx_test_path("golden/model"); }

/* flux_new with one field of flux_options out of range: a context (NULL is
 * only for a lack of memory) whose flux_error names the field from the
 * start, and on which every load and quantize fails with it. */
static void expect_bad_options(const flux_options *o, const char *field) {
    flux_ctx *ctx = flux_new(o);
    REQUIRE_MSG(ctx, "flux_new returned NULL for a bad %s", field);
    CHECK_MSG(strstr(flux_error(ctx), field), "flux_new with a bad %s: flux_error '%s'", field, flux_error(ctx));
    CHECK_EQ_INT(flux_load(ctx, golden_model(), NULL), FLUX_ERR_INVALID_ARG);
    CHECK_MSG(strstr(flux_error(ctx), field), "flux_load after a bad %s: '%s'", field, flux_error(ctx));
    flux_quantize_options q;
    flux_quantize_options_init(&q);
    q.type = "q8_0", q.component = "transformer";
    CHECK_EQ_INT(flux_quantize(ctx, golden_model(), &q, fx_test_tmp_path("never.gguf")), FLUX_ERR_INVALID_ARG);
    CHECK_MSG(strstr(flux_error(ctx), field), "flux_quantize after a bad %s: '%s'", field, flux_error(ctx));
    CHECK(!fx_test_file_exists(fx_test_tmp_path("never.gguf")));
    CHECK(strlen(flux_backend_name(ctx)) > 0 && flux_threads(ctx) >= 1);
    char info[4096];
    CHECK(flux_cpu_info(ctx, info, sizeof info) > 0);
    flux_free(ctx);
}

/* Issue 34 NEW-3: precision 7, backend 9 and distilled 5 used to be
 * accepted silently (run as default, auto and distilled). */
TEST(api_sweep_option_fields_out_of_range) {
    static const struct {
        const char *field;
        int value;
    } bad[] = {
        {"flux_options.backend", -1},   {"flux_options.backend", 3},      {"flux_options.backend", INT_MAX},
        {"flux_options.precision", -1}, {"flux_options.precision", 4},    {"flux_options.precision", INT_MIN},
        {"flux_options.device", -2},    {"flux_options.device", INT_MIN}, {"flux_options.threads", -1},
        {"flux_options.threads", INT_MIN}, {"flux_options.use_mmap", 2},  {"flux_options.use_mmap", -1},
        {"flux_options.no_disk_cache", 2}, {"flux_options.verbose", -1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        flux_options o;
        flux_options_init(&o);
        const char *f = bad[i].field + strlen("flux_options.");
        if (!strcmp(f, "backend")) o.backend = (flux_backend)bad[i].value;
        else if (!strcmp(f, "precision")) o.precision = (flux_precision)bad[i].value;
        else if (!strcmp(f, "device")) o.device = bad[i].value;
        else if (!strcmp(f, "threads")) o.threads = bad[i].value;
        else if (!strcmp(f, "use_mmap")) o.use_mmap = bad[i].value;
        else if (!strcmp(f, "no_disk_cache")) o.no_disk_cache = bad[i].value;
        else o.verbose = bad[i].value;
        expect_bad_options(&o, bad[i].field);
    }
    /* every value flux.h defines still loads */
    for (int prec = FLUX_PRECISION_DEFAULT; prec <= FLUX_PRECISION_BF16; prec++) {
        flux_options o;
        flux_options_init(&o);
        o.precision = (flux_precision)prec, o.backend = FLUX_BACKEND_CPU, o.threads = 1, o.use_mmap = prec & 1;
        o.verbose = 0, o.no_disk_cache = 1;
        flux_ctx *ctx = flux_new(&o);
        REQUIRE(ctx);
        CHECK_MSG(!flux_error(ctx)[0], "precision %d: %s", prec, flux_error(ctx));
        CHECK_MSG(flux_load(ctx, golden_model(), NULL) == FLUX_OK, "precision %d: %s", prec, flux_error(ctx));
        flux_free(ctx);
    }

    flux_ctx *ctx = flux_new(NULL);
    REQUIRE(ctx);
    static const struct {
        int distilled, lazy;
        const char *field;
    } lbad[] = {
        {5, 1, "flux_load_options.distilled"},       {-2, 1, "flux_load_options.distilled"},
        {INT_MAX, 1, "flux_load_options.distilled"}, {INT_MIN, 1, "flux_load_options.distilled"},
        {-1, 2, "flux_load_options.lazy_text_encoder"}, {-1, -1, "flux_load_options.lazy_text_encoder"},
    };
    for (size_t i = 0; i < sizeof lbad / sizeof *lbad; i++) {
        flux_load_options lo;
        flux_load_options_init(&lo);
        lo.distilled = lbad[i].distilled, lo.lazy_text_encoder = lbad[i].lazy;
        CHECK_EQ_INT(flux_load(ctx, golden_model(), &lo), FLUX_ERR_INVALID_ARG);
        CHECK_MSG(strstr(flux_error(ctx), lbad[i].field), "distilled %d lazy %d: '%s'", lbad[i].distilled,
                  lbad[i].lazy, flux_error(ctx));
        CHECK_EQ_INT(flux_get_model_info(ctx, &(flux_model_info){0}), FLUX_ERR_STATE); /* nothing loaded */
    }
    for (int d = -1; d <= 1; d++) {
        flux_load_options lo;
        flux_load_options_init(&lo);
        lo.distilled = d, lo.lazy_text_encoder = d != 0;
        REQUIRE_MSG(flux_load(ctx, golden_model(), &lo) == FLUX_OK, "distilled %d: %s", d, flux_error(ctx));
        flux_model_info mi;
        REQUIRE(flux_get_model_info(ctx, &mi) == FLUX_OK);
        if (d >= 0) CHECK_EQ_INT(mi.distilled, d);
    }
    flux_free(ctx);
}

/* flux_params fields out of range on a loaded model: each refused before
 * any work, the message naming the value. */
TEST(api_sweep_params_out_of_range) {
    flux_ctx *ctx = flux_new(&(flux_options){.threads = 1, .use_mmap = 1, .device = -1}); /* the defaults, 1 thread */
    REQUIRE(ctx && flux_load(ctx, golden_model(), NULL) == FLUX_OK);
    flux_image *ref = flux_image_new(64, 64, 3);
    REQUIRE(ref);
    const flux_image *refs[1] = {ref};
    static const struct {
        int width, height, steps, schedule, n_refs, batch;
        float guidance, alpha;
        const char *frag;
    } bad[] = {
        {-16, 64, 1, 0, 0, 0, -1, 2, "image size -16x64"},
        {64, INT_MIN, 1, 0, 0, 0, -1, 2, "image size 64x-2147483648"},
        {INT_MAX, INT_MAX, 1, 0, 0, 0, -1, 2, "image size 2147483647x2147483647"},
        {64, 64, -1, 0, 0, 0, -1, 2, "steps must be in 1..", },
        {64, 64, INT_MAX, 0, 0, 0, -1, 2, "steps must be in 1.."},
        {64, 64, 1, -1, 0, 0, -1, 2, "flux_params.schedule is -1"},
        {64, 64, 1, 3, 0, 0, -1, 2, "flux_params.schedule is 3"},
        {64, 64, 1, INT_MAX, 0, 0, -1, 2, "flux_params.schedule is 2147483647"},
        {64, 64, 1, 0, -1, 0, -1, 2, "n_refs must be in 0..16, got -1"},
        {64, 64, 1, 0, INT_MAX, 0, -1, 2, "n_refs must be in 0..16, got 2147483647"},
        {64, 64, 1, 0, 0, -1, -1, 2, "flux_params.batch is -1"},
        {64, 64, 1, 0, 0, INT_MIN, -1, 2, "flux_params.batch is -2147483648"},
        {64, 64, 1, 0, 0, INT_MAX, -1, 2, "batch must be in 1.."},
        {64, 64, 1, 0, 0, 0, NAN, 2, "guidance must be in 0..100"},
        {64, 64, 1, 0, 0, 0, INFINITY, 2, "guidance must be in 0..100"},
        {64, 64, 1, 0, 0, 0, 1e30f, 2, "guidance must be in 0..100"},
        {64, 64, 1, 2, 0, 0, -1, NAN, "power alpha must be positive"},
        {64, 64, 1, 2, 0, 0, -1, -1, "power alpha must be positive"},
        {64, 64, 1, 2, 0, 0, -1, INFINITY, "power alpha must be positive"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        flux_params p;
        flux_params_init(&p);
        p.prompt = "a cat";
        p.width = bad[i].width, p.height = bad[i].height, p.steps = bad[i].steps;
        p.schedule = (flux_schedule)bad[i].schedule, p.power_alpha = bad[i].alpha, p.guidance = bad[i].guidance;
        p.n_refs = bad[i].n_refs, p.refs = bad[i].n_refs > 0 ? refs : NULL, p.batch = bad[i].batch, p.seed = 1;
        flux_image *out[4] = {(flux_image *)1, NULL, NULL, NULL};
        flux_status st = bad[i].batch == INT_MAX ? flux_generate_batch(ctx, &p, out) : flux_generate(ctx, &p, out);
        CHECK_MSG(st == FLUX_ERR_INVALID_ARG && strstr(flux_error(ctx), bad[i].frag), "case %zu: %s: '%s' (want '%s')",
                  i, flux_status_name(st), flux_error(ctx), bad[i].frag);
        CHECK_MSG(out[0] == NULL || out[0] == (flux_image *)1, "case %zu: an image came back", i);
        if (bad[i].batch < 0) { /* flux_generate_batch refuses it too */
            CHECK_EQ_INT(flux_generate_batch(ctx, &p, out), FLUX_ERR_INVALID_ARG);
        }
    }
    /* the largest seed with a batch that would pass it */
    flux_params p;
    flux_params_init(&p);
    p.prompt = "a cat", p.width = p.height = 64, p.steps = 1, p.seed = FLUX_SEED_RANDOM - 1, p.batch = 2;
    flux_image *two[2] = {NULL, NULL};
    CHECK_EQ_INT(flux_generate_batch(ctx, &p, two), FLUX_ERR_INVALID_ARG);
    CHECK_MSG(strstr(flux_error(ctx), "the last seed would pass"), "%s", flux_error(ctx));
    flux_image_free(ref);
    flux_free(ctx);
}

/* Adapter indices and strengths, token buffers, device lists, quantize
 * options: out of range in every direction. */
TEST(api_sweep_indices_counts_and_names) {
    flux_ctx *ctx = flux_new(NULL);
    REQUIRE(ctx);
    /* before a model: the state error, whatever the arguments */
    CHECK_EQ_INT(flux_lora_load(ctx, "x.safetensors", 1.0f), FLUX_ERR_STATE);
    CHECK_EQ_INT(flux_lora_load(ctx, "", 1.0f), FLUX_ERR_INVALID_ARG);
    REQUIRE(flux_load(ctx, golden_model(), NULL) == FLUX_OK);
    static const float bad_scales[] = {NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < 3; i++) {
        CHECK_EQ_INT(flux_lora_load(ctx, fx_test_tmp_path("missing.safetensors"), bad_scales[i]), FLUX_ERR_INVALID_ARG);
        CHECK_MSG(strstr(flux_error(ctx), "not a finite number"), "%s", flux_error(ctx));
    }
    static const int bad_index[] = {-1, 0, 1, FLUX_MAX_LORAS, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof bad_index / sizeof *bad_index; i++) {
        const int k = bad_index[i];
        flux_lora_info li;
        CHECK_EQ_INT(flux_lora_set_scale(ctx, k, 1.0f), FLUX_ERR_INVALID_ARG);
        CHECK_MSG(strstr(flux_error(ctx), "no adapter"), "set_scale %d: %s", k, flux_error(ctx));
        CHECK_EQ_INT(flux_lora_remove(ctx, k), FLUX_ERR_INVALID_ARG);
        CHECK_EQ_INT(flux_lora_get_info(ctx, k, &li), FLUX_ERR_INVALID_ARG);
    }
    CHECK_EQ_INT(flux_lora_count(ctx), 0);
    flux_lora_clear(ctx);
    flux_lora_clear(NULL);
    CHECK_EQ_INT(flux_lora_count(NULL), 0);
    CHECK_EQ_INT(flux_lora_set_scale(NULL, 0, 1.0f), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_lora_remove(NULL, 0), FLUX_ERR_INVALID_ARG);

    /* tokens: a negative buffer size is refused; 0 counts only */
    int32_t ids[4];
    int n = -7;
    CHECK_EQ_INT(flux_tokenize(ctx, "a cat", 0, ids, -1, &n), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_tokenize(ctx, "a cat", 0, ids, INT_MIN, &n), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_tokenize(ctx, "a cat", 1, ids, 0, &n), FLUX_OK);
    CHECK(n >= 2);
    memset(ids, 0x5a, sizeof ids);
    CHECK_EQ_INT(flux_tokenize(ctx, "a cat on a mat with a hat", 1, ids, 1, &n), FLUX_OK);
    CHECK(n > 1 && ids[1] == 0x5a5a5a5a); /* only max_ids written */

    /* devices: negative max, NULL out with max 0 */
    flux_device_info dev[2];
    int count = -1;
    flux_status st = flux_list_devices(ctx, NULL, 0, &count);
    CHECK(st == FLUX_OK || st == FLUX_ERR_UNSUPPORTED);
    CHECK(count >= 0);
    st = flux_list_devices(ctx, dev, -5, &count);
    CHECK(st == FLUX_OK || st == FLUX_ERR_UNSUPPORTED);
    CHECK_EQ_INT(flux_list_devices(ctx, NULL, 2, &count), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(flux_list_devices(ctx, dev, 2, NULL), FLUX_ERR_INVALID_ARG);

    /* quantize options: names it does not know, NULL names */
    static const struct {
        const char *type, *component, *frag;
    } q[] = {
        {NULL, "transformer", "type '(none)'"},     {"q9_9", "transformer", "type 'q9_9'"},
        {"f32", "transformer", "type 'f32'"},       {"", "transformer", "type ''"},
        {"q8_0", NULL, "component"},                {"q8_0", "vae", "component"},
    };
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
        flux_quantize_options qo;
        flux_quantize_options_init(&qo);
        qo.type = q[i].type, qo.component = q[i].component;
        CHECK_EQ_INT(flux_quantize(ctx, golden_model(), &qo, fx_test_tmp_path("q.gguf")), FLUX_ERR_INVALID_ARG);
        CHECK_MSG(strstr(flux_error(ctx), q[i].frag), "case %zu: '%s'", i, flux_error(ctx));
    }
    CHECK(!fx_test_file_exists(fx_test_tmp_path("q.gguf")));
    flux_quantize_options_init(NULL);

    /* status names of values that are not statuses; signal bits outside the set */
    CHECK(strlen(flux_status_name((flux_status)-1)) > 0 && strlen(flux_status_name((flux_status)INT_MAX)) > 0);
    unsigned was = flux_set_signals(~0u);
    CHECK_EQ_INT(flux_set_signals(was), FLUX_SIGNALS_ALL); /* bits outside FLUX_SIGNALS_ALL ignored */
    flux_free(ctx);
}

/* Images: sizes and channel counts out of range, huge buffers, hollow
 * images handed to the writers. */
TEST(api_sweep_images) {
    static const int sizes[][3] = {{0, 1, 3},       {1, 0, 3},        {-1, 16, 3},    {16, -1, 3},
                                   {16, 16, 0},     {16, 16, 5},      {16, 16, -1},   {INT_MAX, 1, 1},
                                   {1, INT_MAX, 1}, {INT_MAX, INT_MAX, 4}, {INT_MIN, INT_MIN, 3}, {65536, 65536, 3}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        CHECK_MSG(flux_image_new(sizes[i][0], sizes[i][1], sizes[i][2]) == NULL, "flux_image_new(%d, %d, %d)",
                  sizes[i][0], sizes[i][1], sizes[i][2]);
    flux_ctx *ctx = flux_new(NULL);
    REQUIRE(ctx);
    flux_image *img = flux_image_new(16, 16, 3);
    REQUIRE(img);
    CHECK_EQ_INT(flux_image_set_text(img, "", "v"), FLUX_ERR_INVALID_ARG);
    /* hollow images: sizes that do not match any buffer */
    static const int hollow[][3] = {{-16, 16, 3}, {16, -16, 3}, {0, 16, 3}, {16, 16, 0}, {16, 16, 9},
                                    {INT_MAX, 16, 3}, {16, INT_MAX, 3}, {INT_MIN, INT_MIN, 3}};
    for (size_t i = 0; i < sizeof hollow / sizeof *hollow; i++) {
        flux_image h = *img;
        h.width = hollow[i][0], h.height = hollow[i][1], h.channels = hollow[i][2];
        uint8_t *buf = (uint8_t *)1;
        size_t len = 7;
        CHECK_MSG(flux_image_encode_png(ctx, &h, &buf, &len) == FLUX_ERR_INVALID_ARG && !buf && !len,
                  "encode %dx%dx%d: %s", h.width, h.height, h.channels, flux_error(ctx));
        CHECK_MSG(flux_image_save(ctx, &h, fx_test_tmp_path("h.png")) == FLUX_ERR_INVALID_ARG, "save %dx%dx%d: %s",
                  h.width, h.height, h.channels, flux_error(ctx));
        CHECK_MSG(flux_image_save(ctx, &h, fx_test_tmp_path("h.ppm")) == FLUX_ERR_INVALID_ARG, "save ppm %dx%dx%d: %s",
                  h.width, h.height, h.channels, flux_error(ctx));
        h.width = h.height = 16, h.channels = 3, h.n_text = -1;
        CHECK_MSG(flux_image_save(ctx, &h, fx_test_tmp_path("h.png")) == FLUX_ERR_INVALID_ARG, "n_text -1: %s",
                  flux_error(ctx));
    }
    CHECK_EQ_INT(fx_test_dir_entries(fx_test_tmpdir()), 0); /* nothing half-written */
    /* decoding: no data with a size, huge sizes of a small buffer's prefix */
    flux_image *out = (flux_image *)1;
    CHECK_EQ_INT(flux_image_decode(ctx, NULL, SIZE_MAX, NULL, &out), FLUX_ERR_INVALID_ARG);
    CHECK(out == NULL);
    static const uint8_t junk[16] = "P6\n99999 99999\n";
    CHECK(flux_image_decode(ctx, junk, sizeof junk, "junk", &out) != FLUX_OK && out == NULL);
    CHECK(flux_image_decode(ctx, junk, 0, "junk", &out) != FLUX_OK && out == NULL);
    flux_image_free(img);
    flux_free(ctx);
}
