/*
 * test_vae.c — the VAE decoder and encoder against the golden data of the
 * official reference (tests/golden/README.md) and of our float64 reference
 * (ours-*), stage by stage; memory-plan and streaming invariants; thread
 * invariance; and the encoder's geometry (no border shift).
 *
 * Error = max|ours − golden| / max|golden| per array.
 *  - FLUX_PRECISION=f32: ≤ 1e-4 (spec of the project).
 *  - default mode on AVX512_BF16: conv and linear inputs are rounded to bf16
 *    (relative 2⁻⁹) and the activations of the two largest levels are stored
 *    in bf16; each layer adds errors of that size and the GroupNorms rescale
 *    them. Measured: decoded images ≤ 9.8e-3 (16 cases), encoder means
 *    ≤ 1.1e-2, internal stages ≤ 1.9e-2; with bf16 storage at every level
 *    ≤ 1.1e-2 on t2i-48x64. Tolerances are about 2× the worst value.
 */
#include "tests/test.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/model/ctx.h"
#include "src/dit/latents.h"
#include "src/model/model.h"
#include "src/base/npy.h"
#include "src/vae/vae.h"
#include "tests/golden_case.h"
#include "tests/model/vae_cases.h"
#include "tests/golden_cases.h"

#define TOL_F32 1e-4
#define TOL_BF16_STAGE 4e-2 /* any internal stage, default mode */
#define TOL_BF16_IMAGE 3e-2 /* decoded image / encoder mean, default mode with bf16 dot products */
/* Default mode without bf16 dot products (AVX2, NEON): the f32 math with the
 * activations stored in bf16; about 2x the worst measured on a Zen 3 over
 * every case: decoded image 7.1e-3, encoder mean 1.03e-2. */
#define TOL_DEF_IMAGE 1.5e-2
#define TOL_DEF_MEAN 2e-2

static double tol_default_image(void) { return fx_test_bf16_dot(FLUX_PRECISION_DEFAULT) ? TOL_BF16_IMAGE : TOL_DEF_IMAGE; }
static double tol_default_mean(void) { return fx_test_bf16_dot(FLUX_PRECISION_DEFAULT) ? TOL_BF16_IMAGE : TOL_DEF_MEAN; }

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static int read_rel(const char *rel, fx_npy *a) {
    fx_err err = {0};
    if (fx_npy_read(fx_test_path(rel), a, &err) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return 0;
    }
    return 1;
}

static fx_vae *vae_of(flux_ctx *ctx) {
    fx_vae *v = NULL;
    if (fx_vae_get(ctx, &v) != FLUX_OK) fx_test_fail(__FILE__, __LINE__, "fx_vae_get: %s", flux_error(ctx));
    return v;
}

/* Observer comparing each stage with <dir>/<name>.npy when that file exists. */
typedef struct stage_check {
    const char *dir; /* relative to tests/ */
    double tol, worst;
    int compared, quiet;
} stage_check;

static void check_stage(void *user, const char *name, const float *chw, int c, int h, int w) {
    stage_check *sc = user;
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.npy", sc->dir, name);
    fx_npy g;
    fx_err err = {0};
    if (fx_npy_read(fx_test_path(rel), &g, &err) != FLUX_OK) return; /* not every stage has a golden */
    if (g.ndim != 3 || g.shape[0] != c || g.shape[1] != h || g.shape[2] != w) {
        fx_test_fail(__FILE__, __LINE__, "%s: shape [%d, %d, %d], golden (%lld, %lld, %lld)", name, c, h, w,
                     (long long)g.shape[0], (long long)(g.ndim > 1 ? g.shape[1] : 0),
                     (long long)(g.ndim > 2 ? g.shape[2] : 0));
        fx_npy_free(&g);
        return;
    }
    double e = fx_test_rel_err(chw, g.data, g.count);
    if (!sc->quiet) printf("      %-40s %.2e\n", name, e);
    CHECK_MSG(e <= sc->tol, "%s: relative error %.3g > %g", name, e, sc->tol);
    if (e > sc->worst) sc->worst = e;
    sc->compared++;
    fx_npy_free(&g);
}

/* 1: run the whole-tensor plan (vae_whole.c) instead of the streamed one. */
static int g_whole;

/* Decode `in_rel` ([lat, h8, w8]) on `model` and compare with `out_rel`;
 * internals_dir (or NULL) names the per-stage goldens. Returns the image
 * error (or 1e30 on failure). */
static double decode_case_opts(const char *model_path, const char *in_rel, const char *out_rel,
                               flux_precision prec, int threads, double tol, const char *internals_dir, int quiet,
                               int strip_pixels, fx_vae_storage storage) {
    char model[1024]; /* fx_test_path returns a static buffer */
    snprintf(model, sizeof model, "%s", model_path);
    fx_npy z, img;
    if (!read_rel(in_rel, &z)) return 1e30;
    if (!read_rel(out_rel, &img)) {
        fx_npy_free(&z);
        return 1e30;
    }
    double e = 1e30;
    flux_ctx *ctx = fx_gcase_ctx(model, threads, prec);
    fx_vae *v = ctx ? vae_of(ctx) : NULL;
    if (v && z.ndim == 3 && img.ndim == 3) {
        stage_check sc = {internals_dir, tol, 0, 0, quiet};
        if (internals_dir) fx_vae_set_observer(v, check_stage, &sc);
        fx_vae_set_strip_pixels(v, strip_pixels);
        fx_vae_set_storage(v, storage);
        fx_vae_set_whole_tensors(v, g_whole);
        float *out = malloc(sizeof(float) * img.count);
        flux_status st = fx_vae_decode(ctx, v, z.data, (int)z.shape[1], (int)z.shape[2], out);
        CHECK_MSG(st == FLUX_OK, "fx_vae_decode: %s", flux_error(ctx));
        CHECK_EQ_INT(img.shape[1], 8 * z.shape[1]);
        if (st == FLUX_OK) {
            e = fx_test_rel_err(out, img.data, img.count);
            if (!quiet) printf("      %-40s %.2e\n", out_rel, e);
            CHECK_MSG(e <= tol, "%s: relative error %.3g > %g", out_rel, e, tol);
        }
        if (internals_dir) CHECK_MSG(sc.compared >= 10, "only %d stages compared", sc.compared);
        free(out);
    }
    flux_free(ctx);
    fx_npy_free(&z);
    fx_npy_free(&img);
    return e;
}

static double decode_case(const char *model_path, const char *in_rel, const char *out_rel, flux_precision prec,
                          int threads, double tol, const char *internals_dir, int quiet) {
    return decode_case_opts(model_path, in_rel, out_rel, prec, threads, tol, internals_dir, quiet, 0,
                            FX_VAE_STORAGE_AUTO);
}

/* ------------------------------------------------------------------------ */
/* Decoder                                                                  */
/* ------------------------------------------------------------------------ */

#define T2I "golden/t2i-48x64-2step/"

TEST(vae_decode_golden_f32) {
    decode_case(fx_test_path("golden/model"), T2I "decode_decoder_in.npy", T2I "decode.npy", FLUX_PRECISION_F32, 2,
                TOL_F32, T2I "internals_decode", 0);
}

/* One-row strips: every layer streams with many strips, in place. */
TEST(vae_decode_golden_f32_small_strips) {
    decode_case_opts(fx_test_path("golden/model"), T2I "decode_decoder_in.npy", T2I "decode.npy",
                     FLUX_PRECISION_F32, 2, TOL_F32, T2I "internals_decode", 1, 16, FX_VAE_STORAGE_AUTO);
}

/* The default mode with the activations stored in f32, in bf16 at every
 * level, and automatically (bf16 at the two largest levels): all within
 * the default tolerance. */
TEST(vae_decode_golden_storage) {
    static const char *names[3] = {"auto", "f32", "bf16"};
    for (int s = 0; s < 3; s++) {
        printf("      storage %s\n", names[s]);
        decode_case_opts(fx_test_path("golden/model"), T2I "decode_decoder_in.npy", T2I "decode.npy",
                         FLUX_PRECISION_DEFAULT, 2, tol_default_image(), NULL, 0, 0, (fx_vae_storage)s);
    }
}

TEST(vae_decode_golden_default) {
    decode_case(fx_test_path("golden/model"), T2I "decode_decoder_in.npy", T2I "decode.npy",
                FLUX_PRECISION_DEFAULT, 2, TOL_BF16_STAGE, T2I "internals_decode", 0);
}

/* Every golden case's out/decoder_in.npy → out/image.npy (official cases on
 * the committed model, ours-* on their rebuilt models: other seeds, F16 and
 * F32 weights, VAE channels 32,64,64,96 with 3 resnets per level). */
static void decode_all_cases(flux_precision prec, double tol) {
    DIR *d = opendir(fx_test_path("golden"));
    REQUIRE(d);
    char names[64][256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64) {
        char rel[512];
        snprintf(rel, sizeof rel, "golden/%s/out/decoder_in.npy", e->d_name);
        if (access(fx_test_path(rel), R_OK) == 0) snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    }
    closedir(d);
    CHECK_MSG(n >= 16, "only %d cases with out/decoder_in.npy", n);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        const char *model = fx_golden_case_model(names[i]);
        CHECK_MSG(model, "%s: no model", names[i]);
        if (!model) continue;
        char in[512], out[512];
        snprintf(in, sizeof in, "golden/%.200s/out/decoder_in.npy", names[i]);
        snprintf(out, sizeof out, "golden/%.200s/out/image.npy", names[i]);
        double err = decode_case(model, in, out, prec, 2, tol, NULL, 0);
        if (err > worst) worst = err;
    }
    printf("      worst %.2e over %d cases\n", worst, n);
}

TEST(vae_decode_cases_f32) { decode_all_cases(FLUX_PRECISION_F32, TOL_F32); }
TEST(vae_decode_cases_default) { decode_all_cases(FLUX_PRECISION_DEFAULT, tol_default_image()); }

/* ------------------------------------------------------------------------ */
/* Encoder                                                                  */
/* ------------------------------------------------------------------------ */

/* A PNG → [3, H, W] in [−1, 1] (pixel/255·2 − 1, as the reference). */
static float *load_image(flux_ctx *ctx, const char *rel, int *h, int *w) {
    flux_image *img = NULL;
    if (flux_image_load(ctx, fx_test_path(rel), &img) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "%s: %s", rel, flux_error(ctx));
        return NULL;
    }
    *h = img->height, *w = img->width;
    int64_t hw = (int64_t)img->height * img->width;
    float *x = malloc(sizeof(float) * 3 * (size_t)hw);
    for (int64_t i = 0; i < hw; i++)
        for (int c = 0; c < 3; c++) x[c * hw + i] = (float)(img->data[i * img->channels + c] / 255.0 * 2.0 - 1.0);
    flux_image_free(img);
    return x;
}

/* BN-normalised packed latents (the transformer's view) of a mean. */
static float *ref_latents(flux_ctx *ctx, const float *mean, int h8, int w8) {
    const fx_vae_config *c = &ctx->model->vae;
    const int lat = c->latent_channels, ph = c->patch[0], pw = c->patch[1], C = lat * ph * pw;
    float *p = malloc(sizeof(float) * (size_t)lat * h8 * w8), *bm = NULL, *bv = NULL;
    fx_err err = {0};
    fx_shape s = FX_SHAPE(C);
    if (fx_wset_f32(ctx->model->vae_w, "bn.running_mean", &s, &bm, NULL, &err) ||
        fx_wset_f32(ctx->model->vae_w, "bn.running_var", &s, &bv, NULL, &err))
        fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
    fx_patchify(mean, lat, h8 / ph, w8 / pw, ph, pw, p);
    if (bm && bv) fx_bn_normalize(p, C, (int64_t)(h8 / ph) * (w8 / pw), bm, bv, c->batch_norm_eps);
    free(bm), free(bv);
    return p;
}

static void encode_case_strips(const char *case_name, flux_precision prec, double tol, double stage_tol,
                               int strip_pixels) {
    char model[1024], rel[512], dir[512];
    const char *m = fx_golden_case_model(case_name);
    REQUIRE_MSG(m, "%s: no model", case_name);
    snprintf(model, sizeof model, "%s", m);
    flux_ctx *ctx = fx_gcase_ctx(model, 2, prec);
    REQUIRE(ctx);
    fx_vae *v = vae_of(ctx);
    int h = 0, w = 0;
    snprintf(rel, sizeof rel, "golden/%s/image.png", case_name);
    float *img = v ? load_image(ctx, rel, &h, &w) : NULL;
    fx_npy mean = {0}, ref = {0};
    snprintf(rel, sizeof rel, "golden/%s/mean.npy", case_name);
    int ok = img && read_rel(rel, &mean);
    snprintf(rel, sizeof rel, "golden/%s/ref_latents.npy", case_name);
    ok = ok && read_rel(rel, &ref);
    if (ok) {
        snprintf(dir, sizeof dir, "golden/%s/internals_encode", case_name);
        stage_check sc = {dir, stage_tol, 0, 0, 0};
        fx_vae_set_observer(v, check_stage, &sc);
        fx_vae_set_strip_pixels(v, strip_pixels);
        fx_vae_set_whole_tensors(v, g_whole);
        float *out = malloc(sizeof(float) * mean.count);
        flux_status st = fx_vae_encode(ctx, v, img, h, w, out);
        CHECK_MSG(st == FLUX_OK, "fx_vae_encode: %s", flux_error(ctx));
        CHECK_EQ_INT(mean.count, (size_t)ctx->model->vae.latent_channels * (h / 8) * (w / 8));
        if (st == FLUX_OK) {
            double e = fx_test_rel_err(out, mean.data, mean.count);
            printf("      %-40s %.2e\n", "mean", e);
            CHECK_MSG(e <= tol, "mean: relative error %.3g > %g", e, tol);
            float *p = ref_latents(ctx, out, h / 8, w / 8);
            CHECK_EQ_INT(ref.count, mean.count);
            e = fx_test_rel_err(p, ref.data, ref.count);
            printf("      %-40s %.2e\n", "ref_latents (patchify + BN)", e);
            CHECK_MSG(e <= tol, "ref_latents: relative error %.3g > %g", e, tol);
            free(p);
        }
        free(out);
    }
    free(img);
    fx_npy_free(&mean), fx_npy_free(&ref);
    flux_free(ctx);
}

static void encode_case(const char *case_name, flux_precision prec, double tol, double stage_tol) {
    encode_case_strips(case_name, prec, tol, stage_tol, 0);
}

TEST(vae_encode_golden_f32_small_strips) {
    encode_case_strips("vae-encode-64x48", FLUX_PRECISION_F32, TOL_F32, TOL_F32, 16);
}

TEST(vae_encode_golden_f32) { encode_case("vae-encode-64x48", FLUX_PRECISION_F32, TOL_F32, TOL_F32); }
TEST(vae_encode_golden_default) {
    encode_case("vae-encode-64x48", FLUX_PRECISION_DEFAULT, tol_default_mean(), TOL_BF16_STAGE);
}
/* The whole-tensor plan (what a device backend runs) against the same
 * goldens, every stage included; on the CPU backend here, on Vulkan in
 * tests/vulkan (through the backend of fx_gcase_set_backend). */
void fx_vae_whole_decode_check(void) {
    g_whole = 1;
    decode_case(fx_test_path("golden/model"), T2I "decode_decoder_in.npy", T2I "decode.npy", FLUX_PRECISION_F32, 2,
                TOL_F32, T2I "internals_decode", 0);
    g_whole = 0;
}

void fx_vae_whole_encode_check(void) {
    g_whole = 1;
    encode_case("vae-encode-64x48", FLUX_PRECISION_F32, TOL_F32, TOL_F32);
    encode_case("ours-vae-encode-48x80", FLUX_PRECISION_F32, TOL_F32, TOL_F32);
    g_whole = 0;
}

TEST(vae_whole_tensors_decode_golden_f32) { fx_vae_whole_decode_check(); }
TEST(vae_whole_tensors_encode_golden_f32) { fx_vae_whole_encode_check(); }

TEST(vae_encode_ours_f32) { encode_case("ours-vae-encode-48x80", FLUX_PRECISION_F32, TOL_F32, TOL_F32); }
TEST(vae_encode_ours_default) {
    encode_case("ours-vae-encode-48x80", FLUX_PRECISION_DEFAULT, tol_default_mean(), TOL_BF16_STAGE);
}

/* ------------------------------------------------------------------------ */
/* Geometry: transparent weights                                            */
/* ------------------------------------------------------------------------ */

/* With conv2 of every resnet and to_out of the attentions set to zero (and
 * their biases), every resnet and attention block is the identity (plus the
 * identity 1×1 shortcut where channels change); with delta kernels (centre
 * tap 1 on the diagonal) conv_in, the resamplers, conv_out and the 1×1 convs
 * pass channels through. The conv1 / q / k / v weights stay random (they are
 * computed, then multiplied by zero). What remains is pure geometry:
 *   encoder: mean[c][j][i] = silu(GN_out(x[c][8j + 7][8i + 7]))  (c < 3)
 *     — each downsample (pad right/bottom, stride 2) samples tap 1 of rows
 *       2r, 2r+1, 2r+2, i.e. row 2r + 1; three levels give 8j + 7. A
 *       symmetric padding would sample 8j (a 7 px shift).
 *   decoder: image[c][y][x] = silu(GN_out(z[c][y/8][x/8]))  (nearest ×2 ×3)
 * The tests compare against these formulas in double, which pins the
 * padding, the strides, the upsampling and the whole streaming machinery. */

#include "src/vae/vae_weights.h"

typedef struct owned_list {
    void *p[256];
    int n;
} owned_list;

static uint16_t *bf16_delta(owned_list *o, int cout, int cin, int k) {
    uint16_t *w = calloc((size_t)cout * cin * k * k, sizeof *w);
    for (int c = 0; c < cout && c < cin; c++) w[((size_t)c * cin + c) * k * k + (k / 2) * k + k / 2] = 0x3f80; /* 1.0 */
    o->p[o->n++] = w;
    return w;
}

static void set_weight(owned_list *o, fx_weight *w, int cout, int cin, int k, int zero) {
    uint16_t *d = zero ? calloc((size_t)cout * cin * k * k, 2) : bf16_delta(o, cout, cin, k);
    if (zero) o->p[o->n++] = d;
    w->data = d, w->dtype = FX_DTYPE_BF16, w->n = cout, w->k = (int64_t)cin * k * k, w->ld = w->k;
}

static void transparent_conv(owned_list *o, vae_conv *c, int zero) {
    set_weight(o, &c->w, c->cout, c->cin, c->k, zero);
    memset(c->bias, 0, sizeof(float) * (size_t)c->cout);
}

static void transparent_resnet(owned_list *o, vae_resnet *r) {
    transparent_conv(o, &r->conv2, 1);
    if (r->cin != r->cout) transparent_conv(o, &r->shortcut, 0);
}

static void transparent_half(owned_list *o, vae_half *h, int levels) {
    transparent_conv(o, &h->conv_in, 0);
    transparent_conv(o, &h->conv_out, 0);
    for (int i = 0; i < levels; i++) {
        for (int j = 0; j < h->level[i].n_res; j++) transparent_resnet(o, &h->level[i].res[j]);
        if (h->level[i].has_sample) transparent_conv(o, &h->level[i].sample, 0);
    }
    transparent_resnet(o, &h->mid.res[0]);
    transparent_resnet(o, &h->mid.res[1]);
    if (h->mid.has_attn) {
        vae_attn *a = &h->mid.attn;
        set_weight(o, &a->out, a->channels, a->channels, 1, 1);
        memset(a->bout, 0, sizeof(float) * (size_t)a->channels);
    }
}

static void make_transparent(fx_vae *v, owned_list *o) {
    transparent_half(o, &fx_vae_layers(v)->enc, fx_vae_layers(v)->c.levels);
    transparent_half(o, &fx_vae_layers(v)->dec, fx_vae_layers(v)->c.levels);
    if (fx_vae_layers(v)->has_quant) transparent_conv(o, &fx_vae_layers(v)->quant, 0);
    if (fx_vae_layers(v)->has_post_quant) transparent_conv(o, &fx_vae_layers(v)->post_quant, 0);
}

static double silu_d(double x) { return x / (1.0 + exp(-x)); }

/* silu(GN(t)) of t [C, P] (double, in place) with `groups` groups. */
static void gn_silu_ref(double *t, int C, int64_t P, int groups, const float *gamma, const float *beta, double eps) {
    int cpg = C / groups;
    for (int g = 0; g < groups; g++) {
        double s = 0, q = 0, n = (double)cpg * P;
        for (int c = g * cpg; c < (g + 1) * cpg; c++)
            for (int64_t i = 0; i < P; i++) s += t[c * P + i];
        double m = s / n;
        for (int c = g * cpg; c < (g + 1) * cpg; c++)
            for (int64_t i = 0; i < P; i++) q += (t[c * P + i] - m) * (t[c * P + i] - m);
        double rstd = 1.0 / sqrt(q / n + eps);
        for (int c = g * cpg; c < (g + 1) * cpg; c++)
            for (int64_t i = 0; i < P; i++) t[c * P + i] = silu_d((t[c * P + i] - m) * rstd * gamma[c] + beta[c]);
    }
}

/* A photo-like test image [3, H, W] in [−1, 1]: smooth gradients, hard
 * edges (a rectangle, a diagonal), fine texture. */
static float *photo(int H, int W) {
    float *x = malloc(sizeof(float) * 3 * (size_t)H * W);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < H; y++)
            for (int xx = 0; xx < W; xx++) {
                double u = (double)xx / W, vv = (double)y / H;
                double val = 0.6 * sin(2.5 * u + 1.3 * c) * cos(1.7 * vv) - 0.3 * vv;   /* gradients */
                if (y > H / 4 && y < H / 2 && xx > W / 3 && xx < 2 * W / 3) val += 0.5;  /* rectangle */
                if (xx > y + W / 5) val -= 0.4;                                           /* diagonal */
                val += 0.15 * sin(1.9 * xx + 0.7 * c) * sin(2.3 * y);                     /* texture */
                x[((size_t)c * H + y) * W + xx] = (float)(val > 1 ? 1 : val < -1 ? -1 : val);
            }
    return x;
}

/* Expected transparent encoder mean [lat, H/8, W/8] sampling pixel 8j + off. */
static void expected_mean(fx_vae *v, const float *img, int H, int W, int off, double *mean) {
    const int C = fx_vae_layers(v)->enc.conv_out.cin, lat = fx_vae_layers(v)->c.latent_channels, h = H / 8, w = W / 8;
    const int64_t P = (int64_t)h * w;
    double *t = calloc((size_t)C * P, sizeof *t);
    for (int c = 0; c < 3; c++)
        for (int j = 0; j < h; j++)
            for (int i = 0; i < w; i++) {
                int y = 8 * j + off, x = 8 * i + off;
                t[c * P + j * w + i] = y < H && x < W ? img[((size_t)c * H + y) * W + x] : 0.0;
            }
    gn_silu_ref(t, C, P, fx_vae_layers(v)->c.norm_num_groups, fx_vae_layers(v)->enc.norm_out.gamma, fx_vae_layers(v)->enc.norm_out.beta, fx_vae_layers(v)->c.norm_eps);
    memcpy(mean, t, sizeof(double) * (size_t)lat * P);
    free(t);
}

static double rel_err_d(const float *a, const double *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (d > num) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return den > 0 ? num / den : num;
}

static void transparent_roundtrip(flux_precision prec, double tol) {
    const int Hh = 96, Ww = 128; /* latent 12×16 */
    flux_ctx *ctx = fx_gcase_ctx(fx_test_path("golden/model"), 2, prec);
    REQUIRE(ctx);
    fx_vae *v = vae_of(ctx);
    owned_list o = {{0}, 0};
    if (v) {
        make_transparent(v, &o);
        fx_vae_set_strip_pixels(v, 200); /* many strips: exercise the in-place streaming */
        const fx_vae_config *c = &ctx->model->vae;
        const int lat = c->latent_channels, h = Hh / 8, w = Ww / 8;
        const int64_t P = (int64_t)h * w;
        float *img = photo(Hh, Ww), *mean = malloc(sizeof(float) * (size_t)lat * P);
        double *expect = malloc(sizeof(double) * (size_t)lat * P);
        CHECK_MSG(fx_vae_encode(ctx, v, img, Hh, Ww, mean) == FLUX_OK, "encode: %s", flux_error(ctx));

        /* the encoder samples pixel 8j + 7 (asymmetric padding), not 8j or 8j + 3 */
        double e[3];
        const int offs[3] = {7, 0, 3};
        for (int k = 0; k < 3; k++) {
            expected_mean(v, img, Hh, Ww, offs[k], expect);
            e[k] = rel_err_d(mean, expect, (size_t)lat * P);
        }
        printf("      encoder samples 8j+7: %.2e   (8j: %.2e, 8j+3: %.2e)\n", e[0], e[1], e[2]);
        CHECK_MSG(e[0] <= tol, "encoder geometry: error %.3g vs the official sampling", e[0]);
        CHECK_MSG(e[1] > 0.1 && e[2] > 0.1, "the geometry check cannot tell paddings apart (%.3g, %.3g)", e[1], e[2]);

        /* round trip: patchify → BN normalise → BN de-normalise → unpatchify → decode */
        float *p = ref_latents(ctx, mean, h, w), *bm = NULL, *bv = NULL, *z = malloc(sizeof(float) * (size_t)lat * P);
        fx_err err = {0};
        fx_shape s = FX_SHAPE(lat * c->patch[0] * c->patch[1]);
        CHECK(!fx_wset_f32(ctx->model->vae_w, "bn.running_mean", &s, &bm, NULL, &err));
        CHECK(!fx_wset_f32(ctx->model->vae_w, "bn.running_var", &s, &bv, NULL, &err));
        fx_bn_denormalize(p, (int)s.d[0], P / 4, bm, bv, c->batch_norm_eps);
        fx_unpatchify(p, lat, h / 2, w / 2, 2, 2, z);
        double zerr = fx_test_rel_err(z, mean, (size_t)lat * P);
        CHECK_MSG(zerr <= 1e-6, "normalise/de-normalise round trip: %.3g", zerr);
        float *out = malloc(sizeof(float) * 3 * Hh * Ww);
        CHECK(fx_vae_decode(ctx, v, z, h, w, out) == FLUX_OK);

        /* expected: block (by, bx) of the output shows input pixel (8by + 7, 8bx + 7) */
        const int dc = fx_vae_layers(v)->dec.conv_out.cin;
        const int64_t HW = (int64_t)Hh * Ww;
        double *u = calloc((size_t)dc * HW, sizeof *u), *ref = malloc(sizeof(double) * 3 * HW);
        for (int ch = 0; ch < dc && ch < lat; ch++)
            for (int y = 0; y < Hh; y++)
                for (int x = 0; x < Ww; x++) u[ch * HW + (int64_t)y * Ww + x] = z[ch * P + (y / 8) * w + x / 8];
        gn_silu_ref(u, dc, HW, c->norm_num_groups, fx_vae_layers(v)->dec.norm_out.gamma, fx_vae_layers(v)->dec.norm_out.beta, c->norm_eps);
        memcpy(ref, u, sizeof(double) * 3 * HW);
        double de = rel_err_d(out, ref, 3 * HW);
        printf("      decoder nearest x8 + GN: %.2e\n", de);
        CHECK_MSG(de <= tol, "decoder geometry: error %.3g", de);
        free(u), free(ref), free(out), free(p), free(bm), free(bv), free(z);
        free(img), free(mean), free(expect);
    }
    flux_free(ctx);
    for (int i = 0; i < o.n; i++) free(o.p[i]);
}

TEST(vae_geometry_roundtrip_f32) { transparent_roundtrip(FLUX_PRECISION_F32, 1e-5); }
TEST(vae_geometry_roundtrip_default) { transparent_roundtrip(FLUX_PRECISION_DEFAULT, 2e-2); }

/* ------------------------------------------------------------------------ */
/* The downsample padding against a reference convolution                   */
/* ------------------------------------------------------------------------ */

typedef struct capture {
    const char *names[2];
    float *data[2];
    int c[2], h[2], w[2];
} capture;

static void capture_stage(void *user, const char *name, const float *chw, int c, int h, int w) {
    capture *cap = user;
    for (int k = 0; k < 2; k++)
        if (!strcmp(name, cap->names[k])) {
            free(cap->data[k]);
            cap->data[k] = malloc(sizeof(float) * (size_t)c * h * w);
            memcpy(cap->data[k], chw, sizeof(float) * (size_t)c * h * w);
            cap->c[k] = c, cap->h[k] = h, cap->w[k] = w;
        }
}

/* 3×3 stride-2 conv of x [C, H, W] in double with zero padding (t, l, b, r). */
static double *conv_s2_ref(const vae_conv *cv, const float *x, int C, int H, int W, int pt, int pl, int pb, int pr,
                           int *ho, int *wo) {
    *ho = (H + pt + pb - 3) / 2 + 1, *wo = (W + pl + pr - 3) / 2 + 1;
    double *y = calloc((size_t)cv->cout * *ho * *wo, sizeof *y);
    const uint16_t *wt = cv->w.data;
    for (int co = 0; co < cv->cout; co++)
        for (int oy = 0; oy < *ho; oy++)
            for (int ox = 0; ox < *wo; ox++) {
                double s = cv->bias[co];
                for (int ci = 0; ci < C; ci++)
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            int iy = 2 * oy - pt + ky, ix = 2 * ox - pl + kx;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                            s += (double)fx_bf16_bits_to_f32(wt[((size_t)co * C + ci) * 9 + ky * 3 + kx]) *
                                 x[((size_t)ci * H + iy) * W + ix];
                        }
                y[((size_t)co * *ho + oy) * *wo + ox] = s;
            }
    return y;
}

TEST(vae_downsample_padding_reference) {
    flux_ctx *ctx = fx_gcase_ctx(fx_test_path("golden/model"), 2, FLUX_PRECISION_F32);
    REQUIRE(ctx);
    fx_vae *v = vae_of(ctx);
    int h = 0, w = 0;
    float *img = v ? load_image(ctx, "golden/vae-encode-64x48/image.png", &h, &w) : NULL;
    if (img) {
        REQUIRE(fx_vae_layers(v)->enc.level[0].sample.w.dtype == FX_DTYPE_BF16);
        capture cap = {{"encoder.down_blocks.0.resnets.0", "encoder.down_blocks.0.downsamplers.0"}, {0}, {0}, {0}, {0}};
        fx_vae_set_observer(v, capture_stage, &cap);
        float *mean = malloc(sizeof(float) * (size_t)fx_vae_layers(v)->c.latent_channels * (h / 8) * (w / 8));
        CHECK(fx_vae_encode(ctx, v, img, h, w, mean) == FLUX_OK);
        REQUIRE(cap.data[0] && cap.data[1]);
        int ho, wo;
        double *asym = conv_s2_ref(&fx_vae_layers(v)->enc.level[0].sample, cap.data[0], cap.c[0], cap.h[0], cap.w[0], 0, 0, 1, 1, &ho, &wo);
        CHECK_EQ_INT(ho, cap.h[1]);
        CHECK_EQ_INT(wo, cap.w[1]);
        double e_asym = rel_err_d(cap.data[1], asym, (size_t)cap.c[1] * ho * wo);
        double *sym = conv_s2_ref(&fx_vae_layers(v)->enc.level[0].sample, cap.data[0], cap.c[0], cap.h[0], cap.w[0], 1, 1, 1, 1, &ho, &wo);
        double e_sym = ho == cap.h[1] && wo == cap.w[1] ? rel_err_d(cap.data[1], sym, (size_t)cap.c[1] * ho * wo) : 1;
        printf("      pad right/bottom: %.2e   symmetric pad 1: %.2e\n", e_asym, e_sym);
        CHECK_MSG(e_asym <= 1e-5, "downsampler vs the right/bottom-padded reference: %.3g", e_asym);
        CHECK_MSG(e_sym > 0.05, "a symmetric padding is indistinguishable (%.3g)", e_sym);
        free(asym), free(sym), free(mean), free(cap.data[0]), free(cap.data[1]);
    }
    free(img);
    flux_free(ctx);
}

/* ------------------------------------------------------------------------ */
/* Threads, strips, memory, arguments                                       */
/* ------------------------------------------------------------------------ */

static float *random_latent(int lat, int h8, int w8, uint64_t seed) {
    fx_test_rng rng;
    fx_test_rng_seed(&rng, seed);
    float *z = malloc(sizeof(float) * (size_t)lat * h8 * w8);
    for (size_t i = 0; i < (size_t)lat * h8 * w8; i++) z[i] = fx_test_rng_normal(&rng);
    return z;
}

/* Decode (and encode) at 192×256 with 1 and 2 threads: bitwise equal. */
static void threads_case(flux_precision prec) {
    const int h8 = 24, w8 = 32, H = 8 * h8, W = 8 * w8;
    float *out[2] = {0}, *mean[2] = {0};
    int lat = 0;
    for (int t = 0; t < 2; t++) {
        flux_ctx *ctx = fx_gcase_ctx(fx_test_path("golden/model"), t + 1, prec);
        REQUIRE(ctx);
        fx_vae *v = vae_of(ctx);
        if (v) {
            lat = fx_vae_layers(v)->c.latent_channels;
            float *z = random_latent(lat, h8, w8, 7), *img = photo(H, W);
            out[t] = malloc(sizeof(float) * 3 * H * W);
            mean[t] = malloc(sizeof(float) * (size_t)lat * h8 * w8);
            CHECK(fx_vae_decode(ctx, v, z, h8, w8, out[t]) == FLUX_OK);
            CHECK(fx_vae_encode(ctx, v, img, H, W, mean[t]) == FLUX_OK);
            free(z), free(img);
        }
        flux_free(ctx);
    }
    if (out[0] && out[1]) {
        CHECK_MSG(!memcmp(out[0], out[1], sizeof(float) * 3 * H * W), "decode: 1 vs 2 threads differ");
        CHECK_MSG(!memcmp(mean[0], mean[1], sizeof(float) * (size_t)lat * h8 * w8), "encode: 1 vs 2 threads differ");
    }
    for (int t = 0; t < 2; t++) free(out[t]), free(mean[t]);
}

TEST(vae_threads_bitwise_default) { threads_case(FLUX_PRECISION_DEFAULT); }
TEST(vae_threads_bitwise_f32) { threads_case(FLUX_PRECISION_F32); }

/* The strip height changes only the summation order of the GroupNorm
 * statistics: 1-row strips vs the default, f32 mode, random weights. */
TEST(vae_strips_invariance) {
    const int h8 = 16, w8 = 20, H = 8 * h8, W = 8 * w8;
    flux_ctx *ctx = fx_gcase_ctx(fx_test_path("golden/model"), 2, FLUX_PRECISION_F32);
    REQUIRE(ctx);
    fx_vae *v = vae_of(ctx);
    if (v) {
        const int lat = fx_vae_layers(v)->c.latent_channels;
        float *z = random_latent(lat, h8, w8, 3), *img = photo(H, W);
        float *o[2], *m[2];
        for (int k = 0; k < 2; k++) {
            o[k] = malloc(sizeof(float) * 3 * H * W), m[k] = malloc(sizeof(float) * (size_t)lat * h8 * w8);
            fx_vae_set_strip_pixels(v, k ? 1 : 0);
            CHECK(fx_vae_decode(ctx, v, z, h8, w8, o[k]) == FLUX_OK);
            CHECK(fx_vae_encode(ctx, v, img, H, W, m[k]) == FLUX_OK);
        }
        double ed = fx_test_rel_err(o[1], o[0], 3 * (size_t)H * W), ee = fx_test_rel_err(m[1], m[0], (size_t)lat * h8 * w8);
        printf("      1-row strips vs default: decode %.2e, encode %.2e\n", ed, ee);
        CHECK(ed <= 1e-5);
        CHECK(ee <= 1e-5);
        for (int k = 0; k < 2; k++) free(o[k]), free(m[k]);
        free(z), free(img);
    }
    flux_free(ctx);
}

/* The activation arena is the largest level region (the storage plan's
 * goal), bf16 in the default mode and f32 with FLUX_PRECISION=f32; strip
 * buffers and packed weights stay small. 512×512 on the tiny model. */
TEST(vae_memory_plan) {
    const int h8 = 64, w8 = 64;
    for (int f32 = 0; f32 < 2; f32++) {
        flux_ctx *ctx = fx_gcase_ctx(fx_test_path("golden/model"), 2, f32 ? FLUX_PRECISION_F32 : FLUX_PRECISION_DEFAULT);
        REQUIRE(ctx);
        fx_vae *v = vae_of(ctx);
        if (v) {
            const fx_vae_config *c = &fx_vae_layers(v)->c;
            const int L = c->levels;
            size_t largest = 0, es = f32 ? 4 : 2;
            for (int i = 0; i < L; i++) {
                const vae_resnet *r0 = &fx_vae_layers(v)->dec.level[i].res[0];
                size_t pitch = (size_t)(r0->cin > 2 * r0->cout ? r0->cin : 2 * r0->cout) * (w8 << i);
                size_t b = (size_t)(h8 << i) * pitch * es;
                if (b > largest) largest = b;
            }
            float *z = random_latent(c->latent_channels, h8, w8, 5), *out = malloc(sizeof(float) * 3 * 64 * h8 * w8);
            CHECK(fx_vae_decode(ctx, v, z, h8, w8, out) == FLUX_OK);
            const fx_vae_stats *st = fx_vae_last_stats(v);
            printf("      %s: arena %.1f MiB (largest level %.1f MiB), peak %.1f MiB, %.3f s\n", f32 ? "f32" : "default",
                   st->arena_bytes / 1048576.0, largest / 1048576.0, st->peak_bytes / 1048576.0, st->seconds);
            CHECK(st->arena_bytes >= largest && st->arena_bytes <= largest + 4096);
            CHECK(st->peak_bytes <= st->arena_bytes + ((size_t)24 << 20));
            free(z), free(out);
        }
        flux_free(ctx);
    }
}

TEST(vae_bad_arguments) {
    flux_ctx *ctx = fx_gcase_ctx(fx_test_path("golden/model"), 1, FLUX_PRECISION_DEFAULT);
    REQUIRE(ctx);
    fx_vae *v = vae_of(ctx);
    if (v) {
        float buf[3 * 64 * 64] = {0};
        CHECK(fx_vae_decode(ctx, v, NULL, 1, 1, buf) == FLUX_ERR_INVALID_ARG);
        CHECK(fx_vae_decode(ctx, v, buf, 0, 4, buf) == FLUX_ERR_INVALID_ARG);
        CHECK(fx_vae_decode(ctx, v, buf, 4, 100000, buf) == FLUX_ERR_INVALID_ARG);
        CHECK(fx_vae_encode(ctx, v, buf, 12, 16, buf) == FLUX_ERR_INVALID_ARG); /* not a multiple of 8 */
        CHECK(fx_vae_encode(ctx, v, buf, 0, 16, buf) == FLUX_ERR_INVALID_ARG);
        CHECK(strstr(flux_error(ctx), "multiple of 8") != NULL);
    }
    flux_free(ctx);
}
