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
 * Errors are max|ours − golden| / max|golden| per array. f32 mode
 * (FLUX_PRECISION=f32): 1e-4 for every array, PNG pixels within 1 LSB.
 * Default mode (bf16 dot products on AVX512_BF16): see TOL_BF16_* (about 2x
 * the worst measured over the four reference cases). */
#include "test.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/image_resize.h"
#include "../src/ref_image.h"
#include "../src/sha256.h"
#include "golden_case.h"

#define TOL_F32 1e-4
#define TOL_BF16_REF 4e-2    /* reference latents (VAE encoder in bf16; 1.8e-2 measured) */
#define TOL_BF16_STEP 3e-2   /* velocities and latents */
#define TOL_BF16_IMAGE 5e-2  /* decoded image */
#define TOL_BF16_PIXELS 8    /* max |Δ| of a pixel value (of 255) */

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

static double compare(const char *dump, const char *ours, const char *gdir, const char *golden) {
    fx_npy a, b;
    if (!fx_gcase_npy(dump, ours, &a)) return 1e9;
    if (!fx_gcase_npy(gdir, golden, &b)) {
        fx_npy_free(&a);
        return 1e9;
    }
    double e = 1e9;
    if (a.count != b.count) fx_test_fail(__FILE__, __LINE__, "%s: %zu values, golden %s has %zu", ours, a.count, golden, b.count);
    else e = fx_test_rel_err(a.data, b.data, a.count);
    fx_npy_free(&a), fx_npy_free(&b);
    return e;
}

static void pixel_diff(const flux_image *img, const char *png, int *max_d, double *mean_d) {
    flux_ctx *ctx = flux_new(NULL);
    flux_image *g = load_png(ctx, png);
    *max_d = 999, *mean_d = 999;
    if (g && g->width == img->width && g->height == img->height) {
        size_t n = (size_t)g->width * g->height * 3;
        long sum = 0;
        *max_d = 0;
        for (size_t i = 0; i < n; i++) {
            int d = abs((int)g->data[i] - (int)img->data[i]);
            sum += d;
            if (d > *max_d) *max_d = d;
        }
        *mean_d = (double)sum / (double)n;
    } else if (g) {
        fx_test_fail(__FILE__, __LINE__, "%s is %dx%d, ours %dx%d", png, g->width, g->height, img->width, img->height);
    }
    flux_image_free(g);
    flux_free(ctx);
}

typedef struct ref_result {
    double refs, steps, latents, image, mean_px;
    int max_px;
} ref_result;

/* The golden references refK.png of a case (flux_image_load, as the CLI). */
static int load_case_refs(const fx_gcase *c, flux_image **refs) {
    flux_ctx *ctx = flux_new(NULL);
    int ok = 1;
    for (int k = 0; k < c->n_refs; k++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/ref%d.png", c->dir, k);
        ok &= (refs[k] = load_png(ctx, path)) != NULL;
    }
    flux_free(ctx);
    return ok;
}

/* Generate a case from its reference PNGs + golden embeddings + noise with
 * a dump; compare every array with the golden one. */
static void run_ref_case(const char *name, flux_precision prec, ref_result *res) {
    memset(res, 0, sizeof *res);
    res->refs = res->steps = res->latents = res->image = 1e9;
    fx_gcase c;
    if (!fx_gcase_load(name, &c)) return;
    flux_ctx *ctx = fx_gcase_ctx(c.model, 2, prec);
    if (!ctx) return;
    fx_npy emb = {0}, neg = {0}, noise = {0};
    flux_image *refs[4] = {NULL}, *img = NULL;
    char dump[1200];
    snprintf(dump, sizeof dump, "%s/dump-%s-%d", fx_test_tmpdir(), name, (int)prec);
    mkdir(dump, 0755);
    if (!fx_gcase_npy(c.dir, "out/emb.npy", &emb) || !fx_gcase_npy(c.dir, "noise.npy", &noise) ||
        (c.cfg && !fx_gcase_npy(c.dir, "out/neg_emb.npy", &neg)) || !load_case_refs(&c, refs))
        goto out;
    flux_params p;
    flux_params_init(&p);
    p.embeddings = emb.data;
    p.negative_embeddings = c.cfg ? neg.data : NULL;
    p.noise = noise.data;
    p.height = (int)noise.shape[1] * 16;
    p.width = (int)noise.shape[2] * 16;
    p.steps = c.steps;
    p.guidance = c.guidance;
    p.schedule = c.schedule;
    p.refs = (const flux_image *const *)refs;
    p.n_refs = c.n_refs;
    p.seed = 1;
    p.dump_dir = dump;
    if (flux_generate(ctx, &p, &img) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "%s: flux_generate: %s", name, flux_error(ctx));
        goto out;
    }
    res->refs = 0;
    for (int k = 0; k < c.n_refs; k++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "ref%d_latents.npy", k);
        snprintf(b, sizeof b, "out/ref%d_latents.npy", k);
        double e = compare(dump, a, c.dir, b);
        if (e > res->refs) res->refs = e;
    }
    res->steps = 0;
    for (int i = 0; i < c.steps; i++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "velocity_%03d.npy", i);
        snprintf(b, sizeof b, "out/steps/step%02d_v.npy", i);
        double e = compare(dump, a, c.dir, b);
        if (e > res->steps) res->steps = e;
    }
    res->latents = compare(dump, "latents.npy", c.dir, "out/latents.npy");
    res->image = compare(dump, "decoded.npy", c.dir, "out/image.npy");
    char png[1200];
    snprintf(png, sizeof png, "%s/out/image.png", c.dir);
    pixel_diff(img, png, &res->max_px, &res->mean_px);
    CHECK(img->width == p.width && img->height == p.height);
    char want[16];
    snprintf(want, sizeof want, "%d", c.n_refs);
    CHECK(flux_image_get_text(img, "references") && !strcmp(flux_image_get_text(img, "references"), want));
    printf("      %-32s %s: refs %.2e  steps %.2e  latents %.2e  image %.2e  pixels max %d mean %.3f\n", name,
           prec == FLUX_PRECISION_F32 ? "f32 " : "bf16", res->refs, res->steps, res->latents, res->image, res->max_px,
           res->mean_px);
out:
    for (int k = 0; k < 4; k++) flux_image_free(refs[k]);
    flux_image_free(img);
    fx_npy_free(&emb), fx_npy_free(&neg), fx_npy_free(&noise);
    flux_free(ctx);
}

static const char *const ref_cases[] = {"multiref-48x48-2step", "ours-multiref-48x48-2step",
                                        "ours-img2img-bigref-32x32-1step", "ours-base-cfg-ref-32x32-1step"};

static void check_f32(const char *name) {
    ref_result r;
    run_ref_case(name, FLUX_PRECISION_F32, &r);
    CHECK_MSG(r.refs <= TOL_F32, "%s: reference latents error %.3g", name, r.refs);
    CHECK_MSG(r.steps <= TOL_F32, "%s: velocity error %.3g", name, r.steps);
    CHECK_MSG(r.latents <= TOL_F32, "%s: latents error %.3g", name, r.latents);
    CHECK_MSG(r.image <= TOL_F32, "%s: image error %.3g", name, r.image);
    CHECK_MSG(r.max_px <= 1, "%s: a pixel differs by %d", name, r.max_px);
}

static void check_default(const char *name) {
    ref_result r;
    run_ref_case(name, FLUX_PRECISION_DEFAULT, &r);
    CHECK_MSG(r.refs <= TOL_BF16_REF, "%s: reference latents error %.3g", name, r.refs);
    CHECK_MSG(r.steps <= TOL_BF16_STEP, "%s: velocity error %.3g", name, r.steps);
    CHECK_MSG(r.latents <= TOL_BF16_STEP, "%s: latents error %.3g", name, r.latents);
    CHECK_MSG(r.image <= TOL_BF16_IMAGE, "%s: image error %.3g", name, r.image);
    CHECK_MSG(r.max_px <= TOL_BF16_PIXELS, "%s: a pixel differs by %d", name, r.max_px);
}

TEST(refs_golden_multiref_f32) { check_f32("multiref-48x48-2step"); }
TEST(refs_golden_multiref_default) { check_default("multiref-48x48-2step"); }
TEST(refs_ours_f32) {
    for (size_t i = 1; i < sizeof ref_cases / sizeof *ref_cases; i++) check_f32(ref_cases[i]);
}
TEST(refs_ours_default) {
    for (size_t i = 1; i < sizeof ref_cases / sizeof *ref_cases; i++) check_default(ref_cases[i]);
}
