/* test_inpaint.c — img2img with a strength and inpainting with a mask (issue 31),
 * against the float64 statement of diffusers' Flux2KleinInpaintPipeline in
 * tools/reference/inpaint.py (goldens tests/golden/ours-img2img-* and
 * ours-inpaint-*, written by tools/gen_inpaint_golden.py):
 *
 *   - the three cases through the CLI in f32 mode (--init-img --strength
 *     [--mask [--mask-invert]] [-i] --dump): x0 (ref0_latents), the extra
 *     reference's latents, the token mask, the start latents, every step's
 *     velocity, the final latents and the decoded image within 1e-4
 *     relative, PNG pixels within 1; metadata;
 *   - kept tokens (mask 0) end exactly at x0; strength 1 starts from the noise;
 *   - get_timesteps' rule in double against a table Python computed;
 *   - the mask rules on hand-made masks (threshold 127/128, 2x2 taps);
 *   - a batch equals single runs with seeds S, S+1; the default bf16 mode
 *     runs too; a LoRA adapter equals its offline merge;
 *   - A1111's mask blur byte for byte against OpenCV; flux_mask_decode's
 *     conventions (OpenAI transparency, A1111's create_binary_mask);
 *   - bad inputs: clear errors naming the argument, exit 2 for the command
 *     line, no output file. */
#include "tests/test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/npy.h"
#include "src/dit/schedule.h"
#include "src/pipeline/mask.h"
#include "tests/golden_case.h"

#define TOL FX_GCASE_TOL_F32

typedef struct inpaint_case {
    const char *name, *model;
    const char *args; /* the case's options besides -d, --embeddings, --noise, --init-img */
    const char *strength;
    int first_step, steps, has_mask, has_ref;
} inpaint_case;

static const inpaint_case cases[] = {
    {"ours-img2img-48x64-4step", "model", "--strength 0.6 -s 4", "0.6", 1, 4, 0, 0},
    {"ours-inpaint-ref-48x64-4step", "model", "--strength 0.75 -s 4 --mask '%s/mask.png' -i '%s/ref1.png'", "0.75", 1,
     4, 1, 1},
    {"ours-inpaint-invert-base-cfg-32x48-3step", "model-base",
     "--strength 0.5 -s 3 -g 3 --mask '%s/mask.png' --mask-invert", "0.5", 1, 3, 1, 0},
    {"ours-inpaint-blur-48x64-2step", "model", "--strength 1 -s 2 --mask '%s/mask.png' --mask-blur 3", "1", 0, 2, 1, 0},
};

/* Run case c through the CLI (FLUX_PRECISION=prec unless NULL) into <tmp>/<tag>-dump and <tmp>/<tag>.png; returns the exit
 * status. */
static int run_case(const inpaint_case *c, const char *prec, const char *tag, char *dump, char *png, size_t size) {
    char gd[1100], extra[4096], cmd[12000];
    snprintf(gd, sizeof gd, "%s", fx_test_path("golden"));
    snprintf(dump, size, "%s/%s-dump", fx_test_tmpdir(), tag);
    snprintf(png, size, "%s/%s.png", fx_test_tmpdir(), tag);
    char cdir[1200];
    snprintf(cdir, sizeof cdir, "%s/%s", gd, c->name);
    snprintf(extra, sizeof extra, c->args, cdir, cdir);
    snprintf(cmd, sizeof cmd,
             "%s%s '%s' -d '%s/%s' --embeddings '%s/multiref-48x48-2step/out/emb.npy' --noise "
             "'%s/noise.npy' --init-img '%s/init.png' %s -S 5 --dump '%s' -o '%s' -q",
             prec ? "FLUX_PRECISION=" : "", prec ? prec : "", fx_test_flux_bin(), gd, c->model, gd, cdir, cdir, extra, dump, png);
    char *log = NULL;
    int rc = fx_test_run(cmd, &log);
    CHECK_MSG(rc == 0, "%s: exit %d: %s", c->name, rc, log ? log : "");
    free(log);
    return rc;
}

TEST(inpaint_cli_golden_f32) {
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const inpaint_case *c = &cases[k];
        char dump[1200], png[1200], gdir[1200];
        snprintf(gdir, sizeof gdir, "%s", fx_test_path("golden"));
        strcat(gdir, "/"), strcat(gdir, c->name);
        if (run_case(c, "f32", c->name, dump, png, sizeof dump)) continue;
        const char *pairs[16][2] = {{"ref0_latents.npy", "out/ref0_latents.npy"},
                                    {"start_latents.npy", "out/start_latents.npy"},
                                    {"latents.npy", "out/latents.npy"},
                                    {"decoded.npy", "out/image.npy"}};
        int n = 4;
        if (c->has_mask) pairs[n][0] = "mask.npy", pairs[n++][1] = "out/mask.npy";
        if (c->has_ref) pairs[n][0] = "ref1_latents.npy", pairs[n++][1] = "out/ref1_latents.npy";
        char vnames[8][2][64];
        for (int i = c->first_step; i < c->steps; i++) { /* only the steps that run */
            snprintf(vnames[i][0], 64, "velocity_%03d.npy", i);
            snprintf(vnames[i][1], 64, "out/steps/step%02d_v.npy", i);
            pairs[n][0] = vnames[i][0], pairs[n++][1] = vnames[i][1];
        }
        double worst = 0;
        for (int i = 0; i < n; i++) {
            double e = fx_gcase_compare(dump, pairs[i][0], gdir, pairs[i][1]);
            CHECK_MSG(e <= TOL, "%s: %s error %.3g > %g", c->name, pairs[i][0], e, TOL);
            if (e > worst) worst = e;
        }
        char first[1300];
        snprintf(first, sizeof first, "%s/velocity_%03d.npy", dump, c->first_step - 1);
        CHECK_MSG(c->first_step == 0 || !fx_test_file_exists(first), "%s: step %d ran (strength leaves steps %d..)",
                  c->name, c->first_step - 1, c->first_step);
        flux_ctx *ctx = flux_new(NULL);
        flux_image *img = NULL;
        CHECK_MSG(flux_image_load(ctx, png, &img) == FLUX_OK, "%s", flux_error(ctx));
        if (img) {
            int maxd;
            double mean;
            char gpng[1300];
            snprintf(gpng, sizeof gpng, "%s/out/image.png", gdir);
            fx_gcase_pixel_diff(img, gpng, &maxd, &mean);
            CHECK_MSG(maxd <= 1, "%s: a pixel differs by %d", c->name, maxd);
            printf("    %s: worst array error %.2g, pixels max %d mean %.3f\n", c->name, worst, maxd, mean);
            const char *strength = flux_image_get_text(img, "strength"), *par = flux_image_get_text(img, "parameters");
            const char *want = c->strength;
            CHECK_MSG(strength && !strcmp(strength, want), "strength metadata '%s'", strength ? strength : "(none)");
            char a1111[64];
            snprintf(a1111, sizeof a1111, "Denoising strength: %s", want);
            CHECK_MSG(par && strstr(par, a1111), "parameters: %s", par ? par : "(none)");
            CHECK(flux_image_get_text(img, "init_image") && strstr(flux_image_get_text(img, "init_image"), "init.png"));
            CHECK(!c->has_mask == !flux_image_get_text(img, "mask"));
            CHECK(!(k == 2) == !flux_image_get_text(img, "mask_invert"));
            CHECK(!(k == 3) == !flux_image_get_text(img, "mask_blur"));
            CHECK(k != 3 || (par && strstr(par, "Mask blur: 3")));
            CHECK(!c->has_ref == !flux_image_get_text(img, "references"));
        }
        flux_image_free(img);
        flux_free(ctx);
    }
}

/* Where the mask is 0 the last blend puts x0 itself: (1 − 0)·x0 + 0·x = x0,
 * bit for bit; where it is 1 the latents are the sampler's. */
TEST(inpaint_kept_tokens_end_at_x0) {
    const inpaint_case *c = &cases[1];
    char dump[1200], png[1200];
    if (run_case(c, "f32", "kept", dump, png, sizeof dump)) return;
    fx_npy m, x0, lat;
    REQUIRE(fx_gcase_npy(dump, "mask.npy", &m));
    REQUIRE(fx_gcase_npy(dump, "ref0_latents.npy", &x0));
    REQUIRE(fx_gcase_npy(dump, "latents.npy", &lat));
    const float *mk = m.data, *a = x0.data, *b = lat.data;
    const size_t n = m.count;
    int kept = 0, repainted = 0;
    for (size_t t = 0; t < n; t++) {
        int same = 1;
        for (size_t ch = 0; ch < 128; ch++) same &= a[ch * n + t] == b[ch * n + t];
        if (mk[t] == 0.0f) {
            kept++;
            CHECK_MSG(same, "token %zu (mask 0) is not x0", t);
        }
        if (mk[t] == 1.0f) {
            repainted++;
            CHECK_MSG(!same, "token %zu (mask 1) is still x0", t);
        }
    }
    CHECK(kept > 0 && repainted > 0);
    fx_npy_free(&m), fx_npy_free(&x0), fx_npy_free(&lat);
}

/* Strength 1: t_start = 0, σ_0 = 1, so the start latents are the noise
 * exactly (1·noise + 0·x0); every step runs. */
TEST(inpaint_strength_one_starts_from_noise) {
    inpaint_case c = cases[0];
    c.args = "--strength 1 -s 2";
    char dump[1200], png[1200];
    if (run_case(&c, "f32", "s1", dump, png, sizeof dump)) return;
    fx_npy start, noise;
    REQUIRE(fx_gcase_npy(dump, "start_latents.npy", &start));
    REQUIRE(fx_gcase_npy(dump, "noise.npy", &noise));
    CHECK(start.count == noise.count && !memcmp(start.data, noise.data, start.count * sizeof(float)));
    char v0[1300];
    snprintf(v0, sizeof v0, "%s/velocity_000.npy", dump);
    CHECK(fx_test_file_exists(v0));
    fx_npy_free(&start), fx_npy_free(&noise);
}

/* diffusers get_timesteps in Python floats: t_start = int(max(N − min(N·s, N), 0)),
 * the table printed by Python 3.11 for these (N, s); (10, 0.3) tells double
 * from float arithmetic (0.3f gives 6). */
TEST(inpaint_first_step_rule) {
    static const struct {
        int steps;
        double strength;
        int first;
    } t[] = {{4, 0.6, 1},     {4, 0.75, 1},    {4, 1.0, 0},      {4, 0.0, 4},   {4, 1e-17, 4},   {4, 0.01, 3},
             {10, 0.7, 3},    {10, 0.3, 7},    {10, 0.9, 1},     {50, 0.75, 12}, {50, 0.33, 33}, {1, 0.5, 0},
             {3, 0.5, 1},     {28, 0.35, 18},  {20, 0.15, 17},   {1000, 0.001, 999}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        CHECK_MSG(fx_schedule_first_step(t[i].steps, t[i].strength) == t[i].first, "steps %d strength %g: %d, want %d",
                  t[i].steps, t[i].strength, fx_schedule_first_step(t[i].steps, t[i].strength), t[i].first);
}

/* The mask rules on a hand-made 32x48 gray mask at the output size: a
 * token is the mean of the binarized pixels (16y + 7..8, 16x + 7..8);
 * 127 → 0 and 128 → 1; invert flips before the threshold; RGB uses PIL's
 * luma (pure red, luma 76, is "keep"). */
TEST(inpaint_mask_rules) {
    flux_image *m = flux_image_new(48, 32, 1), *rgb = flux_image_new(48, 32, 3);
    REQUIRE(m && rgb);
    /* token (0,0): one of its four taps white → 0.25; token (0,1): taps 128,128,127,127 → 0.5;
     * token (1,2): all four 255 → 1; elsewhere 0 */
    m->data[7 * 48 + 7] = 255;
    m->data[7 * 48 + 23] = m->data[7 * 48 + 24] = 128;
    m->data[8 * 48 + 23] = m->data[8 * 48 + 24] = 127;
    for (int y = 23; y <= 24; y++)
        for (int x = 39; x <= 40; x++) m->data[y * 48 + x] = 255;
    float *tok = NULL;
    fx_err err = {0};
    const fx_mask_rules inv = {1, 0, 0};
    REQUIRE(fx_mask_tokens(m, NULL, 48, 32, 16, &tok, &err) == FLUX_OK);
    const float want[6] = {0.25f, 0.5f, 0, 0, 0, 1};
    for (int i = 0; i < 6; i++) CHECK_MSG(tok[i] == want[i], "token %d: %g, want %g", i, tok[i], want[i]);
    free(tok);
    REQUIRE(fx_mask_tokens(m, &inv, 48, 32, 16, &tok, &err) == FLUX_OK);
    for (int i = 0; i < 6; i++) CHECK_MSG(tok[i] == 1.0f - want[i], "inverted token %d: %g", i, tok[i]);
    free(tok);
    for (int i = 0; i < 48 * 32; i++) rgb->data[i * 3] = 255; /* pure red: luma 76 */
    REQUIRE(fx_mask_tokens(rgb, NULL, 48, 32, 16, &tok, &err) == FLUX_OK);
    for (int i = 0; i < 6; i++) CHECK(tok[i] == 0.0f);
    free(tok);
    for (int i = 0; i < 48 * 32; i++) rgb->data[i * 3 + 1] = 255; /* yellow: luma 226 */
    REQUIRE(fx_mask_tokens(rgb, NULL, 48, 32, 16, &tok, &err) == FLUX_OK);
    for (int i = 0; i < 6; i++) CHECK(tok[i] == 1.0f);
    free(tok);
    flux_image_free(m), flux_image_free(rgb);
}

/* A1111's mask blur alone against OpenCV's cv2.GaussianBlur as A1111 calls it
 * (the blur/ vectors of ours-inpaint-blur-48x64-2step, made with OpenCV 4.6):
 * every byte, for sigma 1, 2.5, 4, 12 and 64, on a 64x48 block mask and on a
 * 9-pixel-wide one (kernels wider than the image: repeated reflection). */
TEST(inpaint_mask_blur_matches_opencv) {
    static const char *const names[] = {"blocks", "narrow"};
    static const char *const sigmas[] = {"1", "2.5", "4", "12", "64"};
    flux_ctx *ctx = flux_new(NULL);
    REQUIRE(ctx);
    for (int n = 0; n < 2; n++) {
        char path[1300];
        snprintf(path, sizeof path, "%s/blur/%s.png", fx_test_path("golden/ours-inpaint-blur-48x64-2step"), names[n]);
        flux_image *in = NULL;
        REQUIRE_MSG(flux_image_load(ctx, path, &in) == FLUX_OK, "%s", flux_error(ctx));
        const int w = in->width, h = in->height;
        uint8_t *g = malloc((size_t)w * h);
        REQUIRE(g);
        for (int si = 0; si < 5; si++) {
            for (int i = 0; i < w * h; i++) g[i] = in->data[i * 3];
            fx_err err = {0};
            const double sigma = strtod(sigmas[si], NULL);
            CHECK(fx_mask_blur(g, w, h, sigma, sigma, &err) == FLUX_OK);
            snprintf(path, sizeof path, "%s/blur/%s_s%s.png", fx_test_path("golden/ours-inpaint-blur-48x64-2step"),
                     names[n], sigmas[si]);
            flux_image *want = NULL;
            if (flux_image_load(ctx, path, &want) != FLUX_OK) {
                CHECK_MSG(0, "%s", flux_error(ctx));
                continue;
            }
            int bad = 0, maxd = 0;
            for (int i = 0; i < w * h; i++) {
                int d = abs((int)g[i] - (int)want->data[i * 3]);
                bad += d != 0;
                if (d > maxd) maxd = d;
            }
            CHECK_MSG(bad == 0, "%s sigma %s: %d pixels differ (max %d)", names[n], sigmas[si], bad, maxd);
            flux_image_free(want);
        }
        free(g);
        flux_image_free(in);
    }
    flux_free(ctx);
}

/* flux_mask_decode's conventions on PNGs written by our encoder: RGBA
 * (alpha 0 / 1 / 128 / 129 / 255 over gray 200 or 50), gray + alpha, RGB. */
TEST(inpaint_mask_decode_conventions) {
    flux_ctx *ctx = flux_new(NULL);
    REQUIRE(ctx);
    static const uint8_t alpha[5] = {0, 1, 128, 129, 255}, gray[5] = {200, 50, 200, 50, 129};
    flux_image *rgba = flux_image_new(5, 1, 4), *la = flux_image_new(5, 1, 2), *rgb = flux_image_new(5, 1, 3),
               *opaque = flux_image_new(5, 1, 4);
    REQUIRE(rgba && la && rgb && opaque);
    for (int i = 0; i < 5; i++) {
        for (int c = 0; c < 3; c++) rgba->data[i * 4 + c] = rgb->data[i * 3 + c] = opaque->data[i * 4 + c] = gray[i];
        rgba->data[i * 4 + 3] = la->data[i * 2 + 1] = alpha[i];
        opaque->data[i * 4 + 3] = 255;
        la->data[i * 2] = gray[i];
    }
    const flux_image *imgs[4] = {rgba, la, rgb, opaque};
    /* expected per image and convention (-1: an error) */
    static const int want_transparent[4][5] = {
        {255, 0, 0, 0, 0}, {255, 0, 0, 0, 0}, {-1, 0, 0, 0, 0}, {-1, 0, 0, 0, 0}};
    static const int want_a1111[4][5] = {
        {0, 0, 0, 255, 255}, {0, 0, 0, 255, 255}, {255, 0, 255, 0, 255}, {255, 0, 255, 0, 255}};
    for (int k = 0; k < 4; k++) {
        uint8_t *png = NULL;
        size_t len = 0;
        REQUIRE(flux_image_encode_png(ctx, imgs[k], &png, &len) == FLUX_OK);
        flux_image *m = NULL;
        flux_status st = flux_mask_decode(ctx, png, len, "m.png", FLUX_MASK_TRANSPARENT, &m);
        if (want_transparent[k][0] < 0) {
            CHECK_MSG(st == FLUX_ERR_INVALID_ARG && strstr(flux_error(ctx), k == 2 ? "m.png: the mask has no transparency"
                                                                            : "m.png: the mask has no fully transparent"),
                      "image %d: %s", k, flux_error(ctx));
            CHECK(!m);
        } else {
            REQUIRE_MSG(st == FLUX_OK && m && m->channels == 1, "image %d: %s", k, flux_error(ctx));
            for (int i = 0; i < 5; i++) CHECK_MSG(m->data[i] == want_transparent[k][i], "image %d px %d", k, i);
        }
        flux_image_free(m), m = NULL;
        REQUIRE_MSG(flux_mask_decode(ctx, png, len, "m.png", FLUX_MASK_A1111, &m) == FLUX_OK, "%s", flux_error(ctx));
        for (int i = 0; i < 5; i++) CHECK_MSG(m->data[i] == want_a1111[k][i], "A1111 image %d px %d: %d", k, i, m->data[i]);
        flux_image_free(m), m = NULL;
        REQUIRE(flux_mask_decode(ctx, png, len, "m.png", FLUX_MASK_GRAY, &m) == FLUX_OK);
        CHECK(m->channels == 3 && m->data[0] == gray[0] && m->data[3] == gray[1]);
        flux_image_free(m), m = NULL;
        CHECK(flux_mask_decode(ctx, png, len, "m.png", (flux_mask_source)7, &m) == FLUX_ERR_INVALID_ARG && !m);
        flux_buffer_free(png);
    }
    flux_image *m = NULL;
    CHECK(flux_mask_decode(ctx, (const uint8_t *)"junk", 4, "j.png", FLUX_MASK_TRANSPARENT, &m) == FLUX_ERR_FORMAT);
    CHECK(!m && strstr(flux_error(ctx), "j.png"));
    flux_image_free(rgba), flux_image_free(la), flux_image_free(rgb), flux_image_free(opaque);
    flux_free(ctx);
}

/* The library with a batch: image j of -n 2 equals the single image of seed
 * S + j (the images of a batch are stacked in one transformer run); default
 * precision, so the bf16 path runs img2img too. */
TEST(inpaint_batch_matches_single_runs) {
    const char *gd = fx_test_path("golden/ours-inpaint-ref-48x64-4step");
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", gd);
    fx_npy emb;
    flux_ctx *ctx = fx_gcase_ctx(fx_test_path("golden/model"), 2, FLUX_PRECISION_DEFAULT);
    REQUIRE(ctx);
    REQUIRE(fx_gcase_npy_file(fx_test_path("golden/multiref-48x48-2step/out/emb.npy"), &emb));
    flux_image *init = NULL, *mask = NULL, *ref = NULL, *batch[2] = {0}, *single = NULL;
    char p[1300];
    snprintf(p, sizeof p, "%s/init.png", dir);
    REQUIRE(flux_image_load(ctx, p, &init) == FLUX_OK);
    snprintf(p, sizeof p, "%s/mask.png", dir);
    REQUIRE(flux_image_load(ctx, p, &mask) == FLUX_OK);
    snprintf(p, sizeof p, "%s/ref1.png", dir);
    REQUIRE(flux_image_load(ctx, p, &ref) == FLUX_OK);
    flux_params pa;
    flux_params_init(&pa);
    pa.embeddings = emb.data;
    pa.steps = 4;
    pa.seed = 77;
    pa.init_image = init;
    pa.strength = 0.75;
    pa.mask = mask;
    pa.refs = (const flux_image *const *)&ref;
    pa.n_refs = 1;
    pa.batch = 2;
    CHECK_MSG(flux_generate_batch(ctx, &pa, batch) == FLUX_OK, "%s", flux_error(ctx));
    pa.batch = 1;
    pa.seed = 78;
    CHECK_MSG(flux_generate(ctx, &pa, &single) == FLUX_OK, "%s", flux_error(ctx));
    CHECK(batch[1] && single && fx_test_same_pixels(batch[1], single));
    CHECK(batch[0] && batch[0]->width == 64 && batch[0]->height == 48);
    CHECK(batch[0] && !fx_test_same_pixels(batch[0], batch[1]));
    flux_image_free(batch[0]), flux_image_free(batch[1]), flux_image_free(single);
    flux_image_free(init), flux_image_free(mask), flux_image_free(ref);
    fx_npy_free(&emb);
    flux_free(ctx);
}

/* With a LoRA adapter (flux --lora) inpainting equals the same run on the
 * model with the adapter merged offline by tools/gen_lora (f32; 1e-5). */
TEST(inpaint_lora_equals_merged_model) {
    const char *tmp = fx_test_tmpdir();
    char args[4096];
    snprintf(args, sizeof args, "-d '%s' -o '%s/l.safetensors' --format kohya --rank 4 --merge '%s/merged' --strength 0.7",
             fx_test_path("golden/model"), tmp, tmp);
    REQUIRE(FX_TEST_RUN_TOOL("gen_lora", args) == 0);
    const char *gd = fx_test_path("golden");
    char g[1100], dumps[2][1200];
    snprintf(g, sizeof g, "%s", gd);
    for (int k = 0; k < 2; k++) {
        char model[1200], lora[1300], cmd[12000];
        if (k) snprintf(model, sizeof model, "%s/merged", tmp), lora[0] = '\0';
        else snprintf(model, sizeof model, "%s/model", g), snprintf(lora, sizeof lora, "--lora '%s/l.safetensors:0.7'", tmp);
        snprintf(dumps[k], sizeof dumps[k], "%s/dump%d", tmp, k);
        snprintf(cmd, sizeof cmd,
                 "FLUX_PRECISION=f32 '%s' -d '%s' %s --embeddings '%s/multiref-48x48-2step/out/emb.npy' --noise "
                 "'%s/ours-inpaint-ref-48x64-4step/noise.npy' --init-img '%s/ours-inpaint-ref-48x64-4step/init.png' "
                 "--mask '%s/ours-inpaint-ref-48x64-4step/mask.png' --strength 0.75 -s 4 -S 1 --dump '%s' -o '%s/%d.png' -q",
                 fx_test_flux_bin(), model, lora, g, g, g, g, dumps[k], tmp, k);
        char *log = NULL;
        int rc = fx_test_run(cmd, &log);
        CHECK_MSG(rc == 0, "exit %d: %s", rc, log ? log : "");
        free(log);
        if (rc) return;
    }
    double e = fx_gcase_compare(dumps[0], "latents.npy", dumps[1], "latents.npy");
    CHECK_MSG(e <= 1e-5, "LoRA vs merged latents %.3g", e);
    double d = fx_gcase_compare(dumps[0], "latents.npy", fx_test_path("golden/ours-inpaint-ref-48x64-4step"),
                                "out/latents.npy");
    CHECK_MSG(d > 1e-3, "the adapter changed nothing (%.3g)", d);
    printf("    LoRA vs merged: %.2g; vs no adapter: %.2g\n", e, d);
}

/* Quantized weights: --quant q8_0 with W8A8 (--precision int8) and q4_k run
 * the same inpainting; their latents stay within 5e-2 of the f32 golden
 * (measured 1.2e-2 and 2.4e-2), and differ from it (the quantized path ran). */
TEST(inpaint_quantized_weights) {
    static const char *const opts[2] = {"--quant q8_0 --precision int8", "--quant q4_k"};
    const inpaint_case *c = &cases[1];
    for (int k = 0; k < 2; k++) {
        inpaint_case q = *c;
        char args[1024], tag[16];
        snprintf(args, sizeof args, "%s %s", c->args, opts[k]);
        q.args = args;
        snprintf(tag, sizeof tag, "q%d", k);
        char dump[1200], png[1200];
        if (run_case(&q, NULL, tag, dump, png, sizeof dump)) continue;
        double e = fx_gcase_compare(dump, "latents.npy", fx_test_path("golden/ours-inpaint-ref-48x64-4step"),
                                    "out/latents.npy");
        CHECK_MSG(e > 1e-6 && e < 5e-2, "%s: latents %.3g from the f32 golden", opts[k], e);
        printf("    %s: latents %.2g from the f32 golden\n", opts[k], e);
    }
}

/* Library misuse: each a FLUX_ERR_INVALID_ARG whose message names the field. */
TEST(inpaint_library_bad_params) {
    flux_ctx *ctx = fx_gcase_ctx(fx_test_path("golden/model"), 1, FLUX_PRECISION_F32);
    REQUIRE(ctx);
    fx_npy emb;
    REQUIRE(fx_gcase_npy_file(fx_test_path("golden/multiref-48x48-2step/out/emb.npy"), &emb));
    flux_image *init = flux_image_new(48, 32, 3), *mask = flux_image_new(48, 32, 1);
    REQUIRE(init && mask);
    static const char *const want[] = {"strength", "strength", "strength", "leaves no denoising step", "mask is only",
                                       "mask_invert is set", "init image sets the output size", "at most 16 images",
                                       "mask_blur is set", "must be in 0..64"};
    const flux_image *refs[FLUX_MAX_REFS];
    for (int i = 0; i < FLUX_MAX_REFS; i++) refs[i] = init;
    for (int k = 0; k < 10; k++) {
        flux_params p;
        flux_params_init(&p);
        p.embeddings = emb.data;
        p.steps = 4;
        p.seed = 1;
        p.init_image = init;
        switch (k) {
        case 0: p.strength = -0.1; break;
        case 1: p.strength = 1.5; break;
        case 2: p.strength = NAN; break;
        case 3: p.strength = 1e-17; break;
        case 4: p.init_image = NULL, p.mask = mask; break;
        case 5: p.mask_invert = 1; break;
        case 6: p.width = 64; break;
        case 7: p.refs = refs, p.n_refs = FLUX_MAX_REFS; break;
        case 8: p.mask_blur_y = 4; break;
        case 9: p.mask = mask, p.mask_blur_x = 65; break;
        }
        flux_image *out = NULL;
        flux_status st = flux_generate(ctx, &p, &out);
        CHECK_MSG(st == FLUX_ERR_INVALID_ARG && strstr(flux_error(ctx), want[k]), "case %d: %s: %s", k,
                  flux_status_name(st), flux_error(ctx));
        CHECK(!out);
        flux_image_free(out);
    }
    flux_image_free(init), flux_image_free(mask);
    fx_npy_free(&emb);
    flux_free(ctx);
}

/* Command-line mistakes: exit 2 naming the option (1 for a mask file that
 * exists but is not an image), a one-line message, no output file. */
TEST(inpaint_cli_bad_inputs) {
    const char *cd = fx_test_path("golden/ours-inpaint-ref-48x64-4step");
    char dir[1100], junk[1200], out[1200];
    snprintf(dir, sizeof dir, "%s", cd);
    snprintf(junk, sizeof junk, "%s", fx_test_tmp_path("junk.png"));
    REQUIRE(fx_test_write_file(junk, "not a png", 9) == 0);
    snprintf(out, sizeof out, "%s", fx_test_tmp_path("bad.png"));
    static const struct {
        const char *args, *msg;
        int rc;
    } t[] = {
        {"--init-img '%s/init.png' --strength 1.5", "--strength: 1.5 is out of range", 2},
        {"--init-img '%s/init.png' --strength -0.2", "--strength: -0.2 is out of range", 2},
        {"--init-img '%s/init.png' --strength 0", "--strength: 0 leaves no denoising step", 2},
        {"--init-img '%s/init.png' --strength abc", "--strength: 'abc' is not a number", 2},
        {"--init-img '%s/init.png' --noise '%s/noise.npy' --strength 1e-20",
         "--strength: 1e-20 with 2 steps leaves no denoising step", 2},
        {"--init-img '%s/init.png' --strength nan", "--strength: 'nan' is not a number", 2},
        {"--strength 0.5 -i '%s/init.png'", "--strength: only used with --init-img", 2},
        {"--mask '%s/mask.png'", "--mask: only used with --init-img", 2},
        {"--init-img '%s/init.png' --mask-invert", "--mask-invert: only used with --mask", 2},
        {"--init-img '%s/init.png' --mask-blur 4", "--mask-blur: only used with --mask", 2},
        {"--init-img '%s/init.png' --mask '%s/mask.png' --mask-blur 65", "--mask-blur: 65 is out of range", 2},
        {"--init-img '%s/init.png' -W 64", "-W: not used with --init-img", 2},
        {"--init-img '%s/missing.png'", "--init-img: cannot read", 2},
        {"--init-img '%s/init.png' --mask '%s/missing.png'", "--mask: cannot read", 2},
        {"--init-img '%s/init.png' --noise '%s/noise.npy' --mask '%s'", "--mask:", 1},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        char args[4096], cmd[8192];
        if (i == sizeof t / sizeof *t - 1) snprintf(args, sizeof args, t[i].args, dir, dir, junk);
        else snprintf(args, sizeof args, t[i].args, dir, dir);
        snprintf(cmd, sizeof cmd, "'%s' -d '%s' -p 'a cat' -s 2 %s -o '%s'", fx_test_flux_bin(),
                 fx_test_path("golden/model"), args, out);
        char *log = NULL;
        int rc = fx_test_run(cmd, &log);
        CHECK_MSG(rc == t[i].rc && log && strstr(log, t[i].msg), "%s: exit %d: %s", args, rc, log ? log : "");
        CHECK_MSG(!fx_test_file_exists(out), "%s: an output file was written", args);
        free(log);
    }
}
