/* test_refs.c — reference images (img2img, multi-reference; issue 6):
 *
 *   - Lanczos resampling against Pillow (tests/resize/, made by
 *     tools/gen_resize_cases.py with Pillow 9.4): every output byte equal;
 *   - reference pre-processing (area cap, centre crop, limits) against the
 *     diffusers klein pre-processing run with Pillow (SHA-256 of the RGB8
 *     result for images of up to 4000x500 computed from a formula);
 *   - the golden reference cases end to end through flux_generate from
 *     the reference PNGs, the golden embeddings and noise: reference latents,
 *     every step's velocity, final latents, decoded image, PNG pixels;
 *   - the same through the CLI (-i ... --dump) and interactive mode ($0);
 *   - a 1-pixel shift of the crop is detected by the reference latents;
 *   - batches and CFG pairs share the references (bit-identical to single
 *     runs), references are encoded once per generation, output size
 *     defaults to the first reference's processed size;
 *   - bad inputs (library and CLI): clear errors, no output file.
 *
 * Errors are max|ours − golden| / max|golden| per array; the tolerances
 * (f32 mode 1e-4, PNG pixels within 1 LSB; default bf16 mode
 * FX_GCASE_TOL_BF16_*) are in golden_case.h, with the end-to-end run of a
 * case (fx_gcase_check). */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/image/image_resize.h"
#include "src/pipeline/ref_image.h"
#include "src/base/sha256.h"
#include "tests/golden_case.h"

#define TOL_F32 FX_GCASE_TOL_F32

static flux_image *load_png(flux_ctx *ctx, const char *path) {
    flux_image *img = NULL;
    if (flux_image_load(ctx, path, &img) != FLUX_OK) fx_test_fail(__FILE__, __LINE__, "%s", flux_error(ctx));
    return img;
}

/* ------------------------------------------------------------------------ */
/* Lanczos against Pillow                                                   */
/* ------------------------------------------------------------------------ */

/* Compare two equally sized byte arrays; returns the max |Δ| (0 = equal). */
static int max_byte_diff(const uint8_t *a, const uint8_t *b, size_t n, size_t *first) {
    int worst = 0;
    *first = n;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        if (d && *first == n) *first = i;
        if (d > worst) worst = d;
    }
    return worst;
}

TEST(refs_lanczos_matches_pillow) {
    char *cases = fx_test_read_file(fx_test_path("resize/cases.txt"), NULL);
    REQUIRE_MSG(cases, "tests/resize/cases.txt is missing");
    flux_ctx *ctx = flux_new(NULL);
    int n_cases = 0;
    for (char *line = strtok(cases, "\n"); line; line = strtok(NULL, "\n")) {
        char name[64];
        int iw, ih, ow, oh;
        if (sscanf(line, "resize %63s %d %d %d %d", name, &iw, &ih, &ow, &oh) != 5) continue;
        char path[1200];
        snprintf(path, sizeof path, "%s/%s-in.png", fx_test_path("resize"), name);
        flux_image *in = load_png(ctx, path);
        snprintf(path, sizeof path, "%s/%s-out.png", fx_test_path("resize"), name);
        flux_image *want = load_png(ctx, path);
        if (!in || !want) {
            flux_image_free(in), flux_image_free(want);
            continue;
        }
        CHECK(in->width == iw && in->height == ih && want->width == ow && want->height == oh);
        size_t on = (size_t)ow * oh, first;
        uint8_t *got = malloc(on * 4), *one_in = malloc((size_t)iw * ih * 4), *one_out = malloc(on * 4);
        REQUIRE(got && one_in && one_out);
        /* RGB (the loader replicates gray, so gray cases check that too) */
        REQUIRE(fx_resize_lanczos(in->data, iw, ih, 3, got, ow, oh, NULL) == FLUX_OK);
        int d = max_byte_diff(got, want->data, on * 3, &first);
        CHECK_MSG(d == 0, "%s: %dx%d -> %dx%d differs from Pillow by up to %d (first at byte %zu: %d vs %d)", name, iw,
                  ih, ow, oh, d, first, first < on * 3 ? got[first] : 0, first < on * 3 ? want->data[first] : 0);
        /* one channel alone, and 4 channels with a 4th unrelated one: channels are independent */
        for (size_t i = 0; i < (size_t)iw * ih; i++) one_in[i] = in->data[i * 3 + 1];
        REQUIRE(fx_resize_lanczos(one_in, iw, ih, 1, one_out, ow, oh, NULL) == FLUX_OK);
        for (size_t i = 0; i < on; i++) CHECK_MSG(one_out[i] == want->data[i * 3 + 1], "%s: 1-channel pixel %zu", name, i);
        for (size_t i = 0; i < (size_t)iw * ih; i++) {
            memcpy(one_in + i * 4, in->data + i * 3, 3);
            one_in[i * 4 + 3] = (uint8_t)(i * 37);
        }
        REQUIRE(fx_resize_lanczos(one_in, iw, ih, 4, got, ow, oh, NULL) == FLUX_OK);
        int bad4 = 0;
        for (size_t i = 0; i < on; i++) bad4 |= memcmp(got + i * 4, want->data + i * 3, 3) != 0;
        CHECK_MSG(!bad4, "%s: 4-channel resize differs in RGB", name);
        printf("      %-12s %3dx%-3d -> %3dx%-3d  %s\n", name, iw, ih, ow, oh, d == 0 && !bad4 ? "exact" : "DIFFERS");
        free(got), free(one_in), free(one_out);
        flux_image_free(in), flux_image_free(want);
        n_cases++;
    }
    CHECK_MSG(n_cases >= 8, "only %d resize cases found", n_cases);
    free(cases);
    flux_free(ctx);
}

TEST(refs_lanczos_bad_args) {
    uint8_t px[16] = {0}, out[16];
    fx_err err = {0};
    CHECK_EQ_INT(fx_resize_lanczos(px, 0, 2, 3, out, 1, 1, &err), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(fx_resize_lanczos(px, 2, 2, 5, out, 1, 1, &err), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(fx_resize_lanczos(px, 2, 2, 1, out, 1, 0, &err), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(fx_resize_lanczos(NULL, 2, 2, 1, out, 1, 1, &err), FLUX_ERR_INVALID_ARG);
    /* same size: a copy */
    for (int i = 0; i < 12; i++) px[i] = (uint8_t)(i * 20);
    REQUIRE(fx_resize_lanczos(px, 2, 2, 3, out, 2, 2, &err) == FLUX_OK);
    CHECK(!memcmp(px, out, 12));
    /* a flat image stays flat at any scale (weights sum to one in fixed point) */
    uint8_t flat[40 * 30 * 3], small[7 * 11 * 3];
    memset(flat, 173, sizeof flat);
    REQUIRE(fx_resize_lanczos(flat, 40, 30, 3, small, 7, 11, &err) == FLUX_OK);
    for (size_t i = 0; i < sizeof small; i++) CHECK_EQ_INT(small[i], 173);
}

/* ------------------------------------------------------------------------ */
/* Pre-processing                                                           */
/* ------------------------------------------------------------------------ */

/* The formula images of tools/gen_resize_cases.py pattern(). */
static flux_image *pattern(const char *kind, int w, int h) {
    flux_image *img = flux_image_new(w, h, 3);
    if (!img) return NULL;
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++)
            for (int64_t c = 0; c < 3; c++) {
                int64_t v = !strcmp(kind, "zone") ? ((x * x + 3 * y * y + (c + 1) * x * y) >> 6) & 255
                                                  : ((x / 37) * 53 + (y / 29) * 101 + c * 85) & 255;
                img->data[(y * w + x) * 3 + c] = (uint8_t)v;
            }
    return img;
}

TEST(refs_prepare_matches_diffusers) {
    char *cases = fx_test_read_file(fx_test_path("resize/cases.txt"), NULL);
    REQUIRE(cases);
    int n_cases = 0;
    for (char *line = strtok(cases, "\n"); line; line = strtok(NULL, "\n")) {
        char kind[32], hex[80];
        int w, h, sw, sh, x0, y0, w16, h16;
        if (sscanf(line, "prep %31s %d %d %d %d %d %d %d %d %79s", kind, &w, &h, &sw, &sh, &x0, &y0, &w16, &h16, hex) != 10)
            continue;
        flux_image *img = pattern(kind, w, h);
        REQUIRE(img);
        fx_ref_geom g;
        uint8_t *rgb = NULL;
        fx_err err = {0};
        flux_status st = fx_ref_prepare_rgb8(img, 16, "test", &g, &rgb, &err);
        CHECK_MSG(st == FLUX_OK, "%s %dx%d: %s", kind, w, h, err.msg);
        if (st == FLUX_OK) {
            CHECK_MSG(g.scaled_w == sw && g.scaled_h == sh && g.crop_x == x0 && g.crop_y == y0 && g.width == w16 &&
                          g.height == h16,
                      "%s %dx%d: geometry %dx%d crop (%d,%d) %dx%d, diffusers %dx%d (%d,%d) %dx%d", kind, w, h,
                      g.scaled_w, g.scaled_h, g.crop_x, g.crop_y, g.width, g.height, sw, sh, x0, y0, w16, h16);
            uint8_t d[FX_SHA256_BYTES];
            fx_sha256_buf(rgb, (size_t)g.width * g.height * 3, d);
            char got[2 * FX_SHA256_BYTES + 1];
            for (int i = 0; i < FX_SHA256_BYTES; i++) snprintf(got + 2 * i, 3, "%02x", d[i]);
            CHECK_MSG(!strcmp(got, hex), "%s %dx%d -> %dx%d: pixels differ from Pillow/diffusers (sha256 %s)", kind, w, h,
                      g.width, g.height, got);
            printf("      %-6s %4dx%-4d -> %4dx%-4d crop (%d,%d) -> %4dx%-4d %s\n", kind, w, h, g.scaled_w, g.scaled_h,
                   g.crop_x, g.crop_y, g.width, g.height, strcmp(got, hex) ? "DIFFERS" : "exact");
        }
        free(rgb);
        flux_image_free(img);
        n_cases++;
    }
    CHECK_MSG(n_cases >= 5, "only %d prep cases", n_cases);
    free(cases);
}

TEST(refs_prepare_geometry_and_limits) {
    fx_ref_geom g;
    fx_err err = {0};
    /* no resize: centre crop with floored offsets (the bigref golden case) */
    REQUIRE(fx_ref_geometry(84, 100, 16, "r", &g, &err) == FLUX_OK);
    CHECK(g.scaled_w == 84 && g.scaled_h == 100 && g.width == 80 && g.height == 96 && g.crop_x == 2 && g.crop_y == 2);
    REQUIRE(fx_ref_geometry(33, 47, 16, "r", &g, &err) == FLUX_OK);
    CHECK(g.width == 32 && g.height == 32 && g.crop_x == 0 && g.crop_y == 7); /* (47 − 32) / 2 = 7 */
    /* limits: sides >= 16, aspect <= 8:1 (8:1 itself is accepted, as diffusers) */
    CHECK(fx_ref_geometry(16, 16, 16, "r", &g, &err) == FLUX_OK && g.width == 16);
    CHECK(fx_ref_geometry(16, 128, 16, "r", &g, &err) == FLUX_OK);
    CHECK(fx_ref_geometry(128, 16, 16, "r", &g, &err) == FLUX_OK);
    static const struct {
        int w, h;
        const char *msg;
    } bad[] = {{15, 100, "too small"}, {100, 8, "too small"}, {16, 129, "aspect ratio of 8.1:1"},
               {600, 40, "aspect ratio of 15.0:1"}, {0, 10, "invalid"}, {20000, 9000, "invalid or too large"},
               {-5, 30, "invalid"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        flux_status st = fx_ref_geometry(bad[i].w, bad[i].h, 16, "reference image 3", &g, &err);
        CHECK_MSG(st == FLUX_ERR_INVALID_ARG, "%dx%d accepted", bad[i].w, bad[i].h);
        CHECK_MSG(strstr(err.msg, bad[i].msg) && strstr(err.msg, "reference image 3"), "%dx%d: '%s'", bad[i].w,
                  bad[i].h, err.msg);
    }
    /* pixels: gray and RGBA become RGB, values 2·p/255 − 1 */
    flux_image *gray = flux_image_new(16, 16, 1), *rgba = flux_image_new(16, 16, 4);
    REQUIRE(gray && rgba);
    for (int i = 0; i < 256; i++) {
        gray->data[i] = (uint8_t)i;
        for (int c = 0; c < 4; c++) rgba->data[i * 4 + c] = (uint8_t)(c == 3 ? 0 : (i + 85 * c) & 255);
    }
    float *x = NULL;
    REQUIRE(fx_ref_prepare(gray, 16, "g", &g, &x, &err) == FLUX_OK);
    for (int i = 0; i < 256; i++)
        for (int c = 0; c < 3; c++) CHECK_NEAR(x[c * 256 + i], 2.0 * i / 255.0 - 1.0, 1e-7);
    CHECK(x[0] == -1.0f && x[255] == 1.0f);
    free(x);
    REQUIRE(fx_ref_prepare(rgba, 16, "a", &g, &x, &err) == FLUX_OK);
    for (int i = 0; i < 256; i++)
        for (int c = 0; c < 3; c++) CHECK_NEAR(x[c * 256 + i], 2.0 * ((i + 85 * c) & 255) / 255.0 - 1.0, 1e-7);
    free(x);
    flux_image_free(gray), flux_image_free(rgba);
}

/* ------------------------------------------------------------------------ */
/* Golden cases end to end                                                  */
/* ------------------------------------------------------------------------ */

static const char *const ref_cases[] = {"multiref-48x48-2step", "ours-multiref-48x48-2step",
                                        "ours-img2img-bigref-32x32-1step", "ours-base-cfg-ref-32x32-1step"};

TEST(refs_golden_multiref_f32) { fx_gcase_check("multiref-48x48-2step", FLUX_PRECISION_F32); }
TEST(refs_golden_multiref_default) { fx_gcase_check("multiref-48x48-2step", FLUX_PRECISION_DEFAULT); }
TEST(refs_ours_f32) {
    for (size_t i = 1; i < sizeof ref_cases / sizeof *ref_cases; i++) fx_gcase_check(ref_cases[i], FLUX_PRECISION_F32);
}
TEST(refs_ours_default) {
    for (size_t i = 1; i < sizeof ref_cases / sizeof *ref_cases; i++) fx_gcase_check(ref_cases[i], FLUX_PRECISION_DEFAULT);
}

/* ------------------------------------------------------------------------ */
/* Pipeline behaviour                                                       */
/* ------------------------------------------------------------------------ */

/* A 1-pixel shift of the crop is visible in the reference latents: the
 * bigref case's 100x84 reference is centre-cropped at (2, 2); crops of the
 * same size at (1, 2), (3, 2), (2, 1), (2, 3) fed as already-cropped 96x80
 * references give latents far from the golden ones. So the match of
 * refs_ours_* proves there is no border shift on the pipeline's path
 * (pre-processing crop, VAE padding, patchify and packing). */
TEST(refs_crop_shift_is_detected) {
    const char *name = "ours-img2img-bigref-32x32-1step";
    fx_gcase c;
    fx_npy emb, noise;
    flux_ctx *ctx = fx_gcase_ctx_emb(name, 2, FLUX_PRECISION_F32, &c, &emb);
    REQUIRE(ctx);
    REQUIRE(fx_gcase_npy(c.dir, "noise.npy", &noise));
    flux_image *src = NULL;
    REQUIRE(fx_gcase_refs(&c, &src));
    REQUIRE(src->width == 84 && src->height == 100);
    static const int off[5][2] = {{-1, -1}, {1, 2}, {3, 2}, {2, 1}, {2, 3}}; /* first: the whole image */
    double err[5];
    for (int k = 0; k < 5; k++) {
        flux_image *ref = src, *crop = NULL;
        if (off[k][0] >= 0) {
            crop = flux_image_new(80, 96, 3);
            REQUIRE(crop);
            for (int y = 0; y < 96; y++)
                memcpy(crop->data + (size_t)y * 80 * 3, src->data + ((size_t)(y + off[k][1]) * 84 + (size_t)off[k][0]) * 3,
                       80 * 3);
            ref = crop;
        }
        char dump[1200];
        snprintf(dump, sizeof dump, "%s/shift-%d", fx_test_tmpdir(), k);
        mkdir(dump, 0755);
        flux_params p;
        flux_params_init(&p);
        p.embeddings = emb.data, p.noise = noise.data, p.width = p.height = 32, p.steps = 1, p.seed = 1;
        const flux_image *refs[1] = {ref};
        p.refs = refs, p.n_refs = 1, p.dump_dir = dump;
        flux_image *img = NULL;
        REQUIRE_MSG(flux_generate(ctx, &p, &img) == FLUX_OK, "%s", flux_error(ctx));
        err[k] = fx_gcase_compare(dump, "ref0_latents.npy", c.dir, "out/ref0_latents.npy");
        flux_image_free(img), flux_image_free(crop);
    }
    printf("      crop at (2,2): %.2e;  (1,2) %.2e  (3,2) %.2e  (2,1) %.2e  (2,3) %.2e\n", err[0], err[1], err[2], err[3],
           err[4]);
    CHECK(err[0] <= TOL_F32);
    for (int k = 1; k < 5; k++)
        CHECK_MSG(err[k] > 1000 * TOL_F32, "a crop shifted to (%d,%d) is not detected (%.3g)", off[k][0], off[k][1], err[k]);
    flux_image_free(src);
    fx_npy_free(&emb), fx_npy_free(&noise);
    flux_free(ctx);
}

typedef struct stage_log {
    int encode_calls, encode_substeps, encode_last, encode_total, denoise_steps, order_ok, last_stage;
} stage_log;

static int on_stage(void *user, flux_stage stage, int step, int total, int sub, int subtotal) {
    stage_log *l = user;
    if ((int)stage < l->last_stage) l->order_ok = 0;
    l->last_stage = stage;
    if (stage == FLUX_STAGE_VAE_ENCODE && subtotal) l->encode_substeps++; /* encoder stages */
    if (stage == FLUX_STAGE_VAE_ENCODE && !subtotal) {
        l->encode_calls++;
        l->encode_last = step;
        l->encode_total = total;
    }
    if (stage == FLUX_STAGE_DENOISE && !subtotal && step > 0) l->denoise_steps++;
    return 0;
}

/* Batches with CFG stack 2 x N sequences that all read the same reference
 * tokens: each image equals its single run bit for bit; the references are
 * encoded once per generation (not per step or per image) and the caller's
 * images are not modified. */
TEST(refs_batch_cfg_share_references) {
    const char *name = "ours-base-cfg-ref-32x32-1step";
    fx_gcase c;
    fx_npy emb, neg;
    flux_ctx *ctx = fx_gcase_ctx_emb(name, 2, FLUX_PRECISION_DEFAULT, &c, &emb);
    REQUIRE(ctx);
    REQUIRE(c.cfg && c.n_refs == 1);
    REQUIRE(fx_gcase_npy(c.dir, "out/neg_emb.npy", &neg));
    flux_image *refs[2] = {NULL, NULL};
    REQUIRE(fx_gcase_refs(&c, refs));
    refs[1] = pattern("zone", 40, 24); /* a second reference of another size */
    REQUIRE(refs[1]);
    uint8_t *before = malloc((size_t)refs[0]->width * refs[0]->height * 3);
    REQUIRE(before);
    memcpy(before, refs[0]->data, (size_t)refs[0]->width * refs[0]->height * 3);
    flux_params p;
    flux_params_init(&p);
    p.embeddings = emb.data, p.negative_embeddings = neg.data, p.guidance = 2.5f;
    p.width = 48, p.height = 32, p.steps = 2, p.seed = 70, p.batch = 3;
    p.refs = (const flux_image *const *)refs, p.n_refs = 2;
    stage_log l = {.order_ok = 1};
    p.progress = on_stage, p.progress_user = &l;
    flux_image *batch[3] = {NULL, NULL, NULL};
    REQUIRE_MSG(flux_generate_batch(ctx, &p, batch) == FLUX_OK, "%s", flux_error(ctx));
    CHECK_EQ_INT(l.encode_calls, 3); /* reference 0, reference 1, done */
    CHECK_EQ_INT(l.encode_substeps, 2 * 6); /* per reference: 4 levels, mid block, output */
    CHECK_EQ_INT(l.encode_last, 2);
    CHECK_EQ_INT(l.encode_total, 2);
    CHECK_EQ_INT(l.denoise_steps, 2); /* 3 images in one stacked run */
    CHECK(l.order_ok);
    CHECK_MSG(!memcmp(before, refs[0]->data, (size_t)refs[0]->width * refs[0]->height * 3), "the reference was modified");
    for (int i = 0; i < 3; i++) {
        flux_params q = p;
        q.batch = 1, q.seed = 70 + (uint64_t)i, q.progress = NULL;
        flux_image *one = NULL;
        REQUIRE_MSG(flux_generate(ctx, &q, &one) == FLUX_OK, "%s", flux_error(ctx));
        CHECK_MSG(!memcmp(one->data, batch[i]->data, (size_t)48 * 32 * 3), "batch image %d differs from its single run", i);
        flux_image_free(one);
    }
    CHECK(memcmp(batch[0]->data, batch[1]->data, (size_t)48 * 32 * 3));
    for (int i = 0; i < 3; i++) flux_image_free(batch[i]);
    flux_image_free(refs[0]), flux_image_free(refs[1]);
    free(before);
    fx_npy_free(&emb), fx_npy_free(&neg);
    flux_free(ctx);
}

/* Without references there is no reference-encoding stage at all. */
TEST(refs_no_encode_stage_without_references) {
    fx_npy emb;
    flux_ctx *ctx = fx_gcase_ctx_emb("t2i-48x64-2step", 1, FLUX_PRECISION_DEFAULT, NULL, &emb);
    REQUIRE(ctx);
    flux_params p;
    flux_params_init(&p);
    p.embeddings = emb.data, p.width = p.height = 32, p.steps = 1, p.seed = 1;
    stage_log l = {.order_ok = 1};
    p.progress = on_stage, p.progress_user = &l;
    flux_image *img = NULL;
    REQUIRE_MSG(flux_generate(ctx, &p, &img) == FLUX_OK, "%s", flux_error(ctx));
    CHECK_EQ_INT(l.encode_calls, 0);
    CHECK_EQ_INT(l.denoise_steps, 1);
    CHECK(l.order_ok);
    flux_image_free(img);
    fx_npy_free(&emb);
    flux_free(ctx);
}

/* Guidance 1 on the base model is no CFG: the same image as the model
 * forced to the distilled path (one pass per step, no negative). */
TEST(refs_base_guidance1_equals_no_cfg) {
    const char *name = "ours-base-cfg-ref-32x32-1step";
    fx_gcase c;
    REQUIRE(fx_gcase_load(name, &c));
    fx_npy emb;
    REQUIRE(fx_gcase_npy(c.dir, "out/emb.npy", &emb));
    flux_image *refs[1] = {NULL};
    REQUIRE(fx_gcase_refs(&c, refs));
    flux_image *img[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        flux_options o;
        flux_options_init(&o);
        o.threads = 2;
        flux_ctx *ctx = flux_new(&o);
        flux_load_options lo;
        flux_load_options_init(&lo);
        lo.distilled = k; /* 0: base (as the folder says), 1: forced distilled */
        REQUIRE_MSG(flux_load(ctx, c.model, &lo) == FLUX_OK, "%s", flux_error(ctx));
        flux_model_info info;
        REQUIRE(flux_get_model_info(ctx, &info) == FLUX_OK && info.distilled == k);
        flux_params p;
        flux_params_init(&p);
        p.embeddings = emb.data, p.guidance = 1.0f, p.width = p.height = 32, p.steps = 2, p.seed = 9;
        p.refs = (const flux_image *const *)refs, p.n_refs = 1;
        REQUIRE_MSG(flux_generate(ctx, &p, &img[k]) == FLUX_OK, "%s", flux_error(ctx));
        flux_free(ctx);
    }
    CHECK_MSG(!memcmp(img[0]->data, img[1]->data, (size_t)32 * 32 * 3), "base g = 1 differs from no CFG");
    CHECK(!strcmp(flux_image_get_text(img[0], "guidance"), "1"));
    flux_image_free(img[0]), flux_image_free(img[1]), flux_image_free(refs[0]);
    fx_npy_free(&emb);
}

/* Without a size, the output takes the first reference's processed size
 * (each side separately when only one is given). */
TEST(refs_default_size_is_first_reference) {
    const char *name = "ours-multiref-48x48-2step";
    fx_gcase c;
    fx_npy emb;
    flux_ctx *ctx = fx_gcase_ctx_emb(name, 2, FLUX_PRECISION_DEFAULT, &c, &emb);
    REQUIRE(ctx);
    flux_image *refs[3] = {NULL, NULL, NULL};
    REQUIRE(fx_gcase_refs(&c, refs));
    REQUIRE(refs[0]->width == 48 && refs[0]->height == 32 && refs[1]->width == 32 && refs[1]->height == 64);
    refs[2] = pattern("blocks", 100, 84); /* processed 96x80 */
    static const struct {
        int first, w, h, want_w, want_h;
    } cases[] = {{0, 0, 0, 48, 32}, {1, 0, 0, 32, 64}, {2, 0, 0, 96, 80}, {2, 64, 0, 64, 80}, {0, 0, 64, 48, 64}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const flux_image *order[3] = {refs[cases[i].first], refs[(cases[i].first + 1) % 3], refs[(cases[i].first + 2) % 3]};
        flux_params p;
        flux_params_init(&p);
        p.embeddings = emb.data, p.steps = 1, p.seed = 2, p.width = cases[i].w, p.height = cases[i].h;
        p.refs = order, p.n_refs = 3;
        flux_image *img = NULL;
        REQUIRE_MSG(flux_generate(ctx, &p, &img) == FLUX_OK, "%s", flux_error(ctx));
        CHECK_MSG(img->width == cases[i].want_w && img->height == cases[i].want_h, "case %zu: %dx%d, expected %dx%d", i,
                  img->width, img->height, cases[i].want_w, cases[i].want_h);
        flux_image_free(img);
    }
    for (int k = 0; k < 3; k++) flux_image_free(refs[k]);
    fx_npy_free(&emb);
    flux_free(ctx);
}

/* Bad references and options the model cannot use: clear errors, no image. */
TEST(refs_bad_params) {
    fx_npy emb;
    flux_ctx *ctx = fx_gcase_ctx_emb("t2i-48x64-2step", 1, FLUX_PRECISION_DEFAULT, NULL, &emb);
    REQUIRE(ctx);
    flux_image *ok = pattern("zone", 32, 32), *tiny = pattern("zone", 8, 8), *wide = pattern("zone", 144, 16);
    flux_image nodata = *ok, fivech = *ok;
    nodata.data = NULL, nodata.n_text = 0;
    fivech.channels = 5, fivech.n_text = 0;
    REQUIRE(ok && tiny && wide);
    const flux_image *many[FLUX_MAX_REFS + 1];
    for (int i = 0; i <= FLUX_MAX_REFS; i++) many[i] = ok;
    const flux_image *null_ref[1] = {NULL}, *r_tiny[2] = {ok, tiny}, *r_wide[1] = {wide}, *r_nodata[1] = {&nodata},
                     *r_five[1] = {&fivech}, *r_ok[1] = {ok};
    static const char *neg_text = "blurry";
    struct {
        const flux_image *const *refs;
        int n_refs;
        float guidance;
        const char *negative;
        int neg_emb;
        const char *msg;
    } bad[] = {
        {many, FLUX_MAX_REFS + 1, -1, NULL, 0, "n_refs must be in 0..16, got 17"},
        {NULL, 1, -1, NULL, 0, "refs is NULL"},
        {null_ref, 1, -1, NULL, 0, "reference image 0: not a valid image (NULL)"},
        {r_tiny, 2, -1, NULL, 0, "reference image 1: 8x8 is too small"},
        {r_wide, 1, -1, NULL, 0, "aspect ratio of 9.0:1; at most 8:1"},
        {r_nodata, 1, -1, NULL, 0, "no pixel data"},
        {r_five, 1, -1, NULL, 0, "channels must be 1..4"},
        {r_ok, 1, 4.0f, NULL, 0, "only the base model has"},
        {NULL, 0, 1.5f, NULL, 0, "is distilled"},
        {NULL, 0, -1, neg_text, 0, "a negative prompt needs classifier-free guidance"},
        {NULL, 0, -1, NULL, 1, "a negative prompt needs classifier-free guidance"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        flux_params p;
        flux_params_init(&p);
        p.embeddings = emb.data, p.width = p.height = 32, p.steps = 1, p.seed = 1;
        p.refs = bad[i].refs, p.n_refs = bad[i].n_refs, p.guidance = bad[i].guidance;
        p.negative_prompt = bad[i].negative, p.negative_embeddings = bad[i].neg_emb ? emb.data : NULL;
        flux_image *img = (flux_image *)1;
        flux_status st = flux_generate(ctx, &p, &img);
        CHECK_MSG(st == FLUX_ERR_INVALID_ARG, "case %zu: %s (%s)", i, flux_status_name(st), flux_error(ctx));
        CHECK_MSG(strstr(flux_error(ctx), bad[i].msg), "case %zu: '%s' lacks '%s'", i, flux_error(ctx), bad[i].msg);
        CHECK_MSG(img == NULL || img == (flux_image *)1, "case %zu: an image came back", i);
    }
    /* guidance 1 and 0 are fine on a distilled model (no CFG either way) */
    for (int g = 0; g <= 1; g++) {
        flux_params p;
        flux_params_init(&p);
        p.embeddings = emb.data, p.width = p.height = 32, p.steps = 1, p.seed = 1, p.guidance = (float)g;
        flux_image *img = NULL;
        CHECK_MSG(flux_generate(ctx, &p, &img) == FLUX_OK, "guidance %d: %s", g, flux_error(ctx));
        flux_image_free(img);
    }
    flux_free(ctx);
    /* the base model without CFG refuses a negative; forced base accepts CFG */
    flux_ctx *base = fx_gcase_ctx(fx_test_path("golden/model-base"), 1, FLUX_PRECISION_DEFAULT);
    REQUIRE(base);
    flux_params p;
    flux_params_init(&p);
    p.embeddings = emb.data, p.width = p.height = 32, p.steps = 1, p.seed = 1, p.guidance = 1.0f;
    p.negative_embeddings = emb.data;
    flux_image *img = NULL;
    CHECK_EQ_INT(flux_generate(base, &p, &img), FLUX_ERR_INVALID_ARG);
    CHECK_MSG(strstr(flux_error(base), "only used with classifier-free guidance (guidance > 1); guidance is 1"), "%s",
              flux_error(base));
    flux_free(base);
    flux_options o;
    flux_options_init(&o);
    o.threads = 1;
    flux_ctx *forced = flux_new(&o);
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.distilled = 0;
    REQUIRE(flux_load(forced, fx_test_path("golden/model"), &lo) == FLUX_OK);
    p.guidance = 3.0f;
    p.refs = r_ok, p.n_refs = 1;
    CHECK_MSG(flux_generate(forced, &p, &img) == FLUX_OK, "%s", flux_error(forced));
    flux_image_free(img);
    flux_free(forced);
    flux_image_free(ok), flux_image_free(tiny), flux_image_free(wide);
    fx_npy_free(&emb);
}

/* ------------------------------------------------------------------------ */
/* CLI and interactive mode                                                 */
/* ------------------------------------------------------------------------ */

/* The official multi-reference case through flux -i -i --dump (f32). */
TEST(refs_cli_multiref_golden) {
    const char *gd = fx_test_path("golden/multiref-48x48-2step");
    char dir[1100], dump[1200], out[1200], cmd[12000];
    snprintf(dir, sizeof dir, "%s", gd);
    snprintf(dump, sizeof dump, "%s/cli-dump", fx_test_tmpdir());
    snprintf(out, sizeof out, "%s/cli.png", fx_test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "FLUX_PRECISION=f32 '%s' -d '%s' --embeddings '%s/out/emb.npy' --noise '%s/noise.npy' -i '%s/ref0.png' "
             "-i '%s/ref1.png' -s 2 -S 3 --dump '%s' -o '%s' -v",
             fx_test_flux_bin(), fx_test_path("golden/model"), dir, dir, dir, dir, dump, out);
    char *log = NULL;
    int rc = fx_test_run(cmd, &log);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, log ? log : "");
    CHECK_MSG(log && strstr(log, "reference 1: 32x48 -> 32x48 (6 tokens)"), "log: %s", log ? log : "");
    free(log);
    REQUIRE(rc == 0);
    static const char *pairs[][2] = {{"ref0_latents.npy", "out/ref0_latents.npy"},
                                     {"ref1_latents.npy", "out/ref1_latents.npy"},
                                     {"velocity_000.npy", "out/steps/step00_v.npy"},
                                     {"velocity_001.npy", "out/steps/step01_v.npy"},
                                     {"latents.npy", "out/latents.npy"},
                                     {"decoded.npy", "out/image.npy"}};
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        double e = fx_gcase_compare(dump, pairs[i][0], dir, pairs[i][1]);
        CHECK_MSG(e <= TOL_F32, "CLI %s error %.3g", pairs[i][0], e);
    }
    /* the pre-processed pixels: 2·p/255 − 1 of the PNG (no resize, no crop) */
    fx_npy pix;
    REQUIRE(fx_gcase_npy(dump, "ref1_image.npy", &pix));
    CHECK(pix.ndim == 3 && pix.shape[0] == 3 && pix.shape[1] == 48 && pix.shape[2] == 32);
    flux_ctx *ctx = flux_new(NULL);
    char png[1200];
    snprintf(png, sizeof png, "%s/ref1.png", dir);
    flux_image *r1 = load_png(ctx, png);
    REQUIRE(r1);
    for (int i = 0; i < 48 * 32; i++)
        for (int c = 0; c < 3; c++) CHECK(((float *)pix.data)[c * 48 * 32 + i] == 2.0f * (r1->data[i * 3 + c] / 255.0f) - 1.0f);
    flux_image *img = load_png(ctx, out);
    REQUIRE(img);
    int maxd;
    double mean;
    snprintf(png, sizeof png, "%s/out/image.png", dir);
    fx_gcase_pixel_diff(img, png, &maxd, &mean);
    CHECK_MSG(maxd <= 1, "CLI PNG differs by %d", maxd);
    CHECK(flux_image_get_text(img, "references") && !strcmp(flux_image_get_text(img, "references"), "2"));
    flux_image_free(img), flux_image_free(r1);
    fx_npy_free(&pix);
    flux_free(ctx);
}

/* Bad reference files and options the model cannot use: the CLI fails with
 * a clear message (exit 2 for command-line problems, 1 for file contents
 * and model conflicts) and writes no output file. */
TEST(refs_cli_bad_inputs) {
    const char *tmp = fx_test_tmpdir();
    char path[16][1100];
    int np = 0;
    flux_ctx *ctx = flux_new(NULL);
    /* files */
    snprintf(path[np], sizeof path[np], "%s/empty.png", tmp);
    fx_test_write_file(path[np++], "", 0);
    size_t n = 0;
    char *png = fx_test_read_file(fx_test_path("resize/tiny-in.png"), &n);
    REQUIRE(png && n > 60);
    snprintf(path[np], sizeof path[np], "%s/corrupt.png", tmp);
    png[n / 2] ^= 0x5a, png[n / 2 + 1] ^= 0xa5; /* inside the pixel data: a CRC/zlib error */
    fx_test_write_file(path[np++], png, n);
    png[n / 2] ^= 0x5a, png[n / 2 + 1] ^= 0xa5;
    snprintf(path[np], sizeof path[np], "%s/truncated.png", tmp);
    fx_test_write_file(path[np++], png, n / 2);
    /* a valid PNG header claiming 20000 x 20000 pixels */
    uint8_t *huge = (uint8_t *)png;
    fx_test_put_be32(huge + 16, 20000), fx_test_put_be32(huge + 20, 20000);
    fx_test_put_be32(huge + 29, fx_test_crc32(huge + 12, 17));
    snprintf(path[np], sizeof path[np], "%s/huge.png", tmp);
    fx_test_write_file(path[np++], huge, n);
    snprintf(path[np], sizeof path[np], "%s/huge.ppm", tmp);
    fx_test_write_file(path[np++], "P6\n16384 16385\n255\n\0\0\0", 22);
    snprintf(path[np], sizeof path[np], "%s/text.png", tmp);
    fx_test_write_file(path[np++], "hello, not an image\n", 20);
    flux_image *small = pattern("zone", 8, 8), *wide = pattern("zone", 144, 16), *okimg = pattern("zone", 64, 64),
               *tiny = pattern("zone", 32, 32);
    snprintf(path[np], sizeof path[np], "%s/tiny.png", tmp);
    REQUIRE(flux_image_save(ctx, tiny, path[np++]) == FLUX_OK);
    snprintf(path[np], sizeof path[np], "%s/small.png", tmp);
    REQUIRE(flux_image_save(ctx, small, path[np++]) == FLUX_OK);
    snprintf(path[np], sizeof path[np], "%s/wide.png", tmp);
    REQUIRE(flux_image_save(ctx, wide, path[np++]) == FLUX_OK);
    snprintf(path[np], sizeof path[np], "%s/ok.png", tmp);
    REQUIRE(flux_image_save(ctx, okimg, path[np++]) == FLUX_OK);
    const char *ok = path[np - 1];
    free(png);
    flux_image_free(small), flux_image_free(wide), flux_image_free(okimg), flux_image_free(tiny);
    flux_free(ctx);

    static char seventeen[17 * 1200];
    seventeen[0] = '\0';
    for (int i = 0; i < 17; i++) {
        size_t len = strlen(seventeen);
        snprintf(seventeen + len, sizeof seventeen - len, " -i '%.1100s'", ok);
    }
    static char iarg[16][1300];
    for (int i = 0; i < np; i++) snprintf(iarg[i], sizeof iarg[i], "-i '%.1100s'", path[i]);
    char missing[1300], dirarg[1300];
    snprintf(missing, sizeof missing, "-i '%s/nope.png'", tmp);
    snprintf(dirarg, sizeof dirarg, "-i '%s'", tmp);
    struct {
        const char *args;
        int rc;
        const char *msg;
    } bad[] = {
        {iarg[0], 1, "empty file (0 bytes)"},
        {iarg[1], 1, "corrupt.png"},
        {iarg[2], 1, "truncated.png"},
        {iarg[3], 1, "huge.png"},
        {iarg[4], 1, "too large"},
        {iarg[5], 1, "not a PNG or binary PPM"},
        {iarg[6], 2, "the output size would be 32x32, outside 64..2048: give -W and -H"},
        {iarg[7], 1, "8x8 is too small: both sides must be at least 16 pixels"},
        {iarg[8], 1, "aspect ratio of 9.0:1; at most 8:1"},
        {missing, 2, "-i: cannot read"},
        {dirarg, 2, "is a directory"},
        {seventeen, 2, "too many reference images (at most 16)"},
        {"-g 4", 1, "only the base model has"},
        {"--negative 'ugly'", 1, "a negative prompt needs classifier-free guidance"},
    };
    char out[1200], model[1100], emb[1100];
    snprintf(out, sizeof out, "%s/never.png", tmp);
    snprintf(model, sizeof model, "%s", fx_test_path("golden/model"));
    snprintf(emb, sizeof emb, "%s", fx_test_path("golden/t2i-48x64-2step/out/emb.npy"));
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char cmd[30000], *log = NULL;
        snprintf(cmd, sizeof cmd, "'%s' -d '%s' --embeddings '%s' -s 1 -S 1 %s -o '%s'", fx_test_flux_bin(), model, emb,
                 bad[i].args, out);
        int rc = fx_test_run(cmd, &log);
        CHECK_MSG(rc == bad[i].rc, "case %zu: exit %d, expected %d: %s", i, rc, bad[i].rc, log ? log : "");
        CHECK_MSG(log && strstr(log, bad[i].msg), "case %zu: output lacks '%s': %s", i, bad[i].msg, log ? log : "");
        CHECK_MSG(access(out, F_OK) != 0, "case %zu wrote an output file", i);
        free(log);
    }
    /* the good reference works, and sets the size */
    char cmd[12000], *log = NULL;
    snprintf(cmd, sizeof cmd, "'%s' -q -d '%s' --embeddings '%s' -s 1 -S 1 -i '%.1100s' -o '%s'", fx_test_flux_bin(), model, emb,
             ok, out);
    CHECK_MSG(fx_test_run(cmd, &log) == 0, "%s", log ? log : "");
    free(log);
    flux_ctx *c2 = flux_new(NULL);
    flux_image *img = load_png(c2, out);
    CHECK(img && img->width == 64 && img->height == 64);
    flux_image_free(img);
    flux_free(c2);
}

/* Interactive mode: "$0 prompt" with an -i image is img2img at the
 * reference's processed size, the same pixels as flux -p -i. */
TEST(refs_interactive_img2img) {
    const char *tmp = fx_test_tmpdir();
    char ref[1200], in_path[1200], single[1200], cmd[8000], model[1100];
    snprintf(ref, sizeof ref, "%s", fx_test_path("golden/ours-img2img-bigref-32x32-1step/ref0.png"));
    snprintf(in_path, sizeof in_path, "%s/stdin.txt", tmp);
    snprintf(single, sizeof single, "%s/single.png", tmp);
    const char *input = "!seed 5\n$0 make it winter\n$ $0 again\n";
    fx_test_write_file(in_path, input, strlen(input));
    setenv("TMPDIR", tmp, 1);
    snprintf(model, sizeof model, "%s", fx_test_path("golden/model"));
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' -q -t 1 -d '%s' -s 1 -i '%s' <'%s'", tmp, fx_test_flux_bin(), model, ref,
             in_path);
    char *out = NULL;
    int rc = fx_test_run(cmd, &out);
    REQUIRE_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
    CHECK_MSG(strstr(out, "\n$1 ") || !strncmp(out, "$1 ", 3), "stdout: %s", out);
    CHECK_MSG(strstr(out, "(80x96, seed 5,"), "stdout: %s", out);
    CHECK_MSG(strstr(out, "\n$2 "), "stdout: %s", out); /* two references: the last image and $0 */
    char img1[2048] = "";
    const char *p = strstr(out, "$1 ");
    REQUIRE(p);
    snprintf(img1, sizeof img1, "%.*s", (int)strcspn(p + 3, " \n"), p + 3);
    snprintf(cmd, sizeof cmd, "'%s' -q -t 1 -d '%s' -s 1 -S 5 -i '%s' -p 'make it winter' -o '%s'", fx_test_flux_bin(),
             model, ref, single);
    char *log = NULL;
    CHECK_MSG(fx_test_run(cmd, &log) == 0, "%s", log ? log : "");
    flux_ctx *ctx = flux_new(NULL);
    flux_image *a = load_png(ctx, img1), *b = load_png(ctx, single);
    REQUIRE(a && b);
    CHECK(a->width == 80 && a->height == 96 && b->width == 80 && b->height == 96);
    CHECK_MSG(!memcmp(a->data, b->data, (size_t)80 * 96 * 3), "interactive img2img differs from flux -p -i");
    flux_image_free(a), flux_image_free(b);
    flux_free(ctx);
    free(out), free(log);
}

/* flux-bench dit --cfg --refs --sequential (the closing-note measurements)
 * runs and reports what it measured; no timing is asserted. */
TEST(refs_bench_dit_options) {
    const char *bench = getenv("FLUX_BENCH");
    if (!bench) SKIP("FLUX_BENCH is not set (make test sets it)");
    char cmd[4000], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "'%s' dit --model '%s' --width 32 --height 48 --cfg --refs 2 --ref-width 64 --ref-height 16 --sequential "
             "--reps 1 --threads 1 --json",
             bench, fx_test_path("golden/model"));
    int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
    static const char *keys[] = {"\"op\":\"dit\"", "\"batch\":1", "\"cfg\":1", "\"refs\":2", "\"ref_width\":64",
                                 "\"ref_height\":16", "\"sequential_s\":", "\"stacked_speedup\":"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) CHECK_MSG(out && strstr(out, keys[i]), "no %s in: %s", keys[i], out);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' dit --model '%s' --refs 17", bench, fx_test_path("golden/model"));
    CHECK(fx_test_run(cmd, &out) != 0);
    free(out);
}
