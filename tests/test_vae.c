/*
 * test_vae.c — the VAE decoder and encoder against the golden data of the
 * official reference (tests/golden/README.md) and of our float64 reference
 * (ours-*), stage by stage; memory-plan and streaming invariants; thread
 * invariance; and the encoder's geometry (no border shift).
 *
 * Error = max|ours − golden| / max|golden| per array.
 *  - FLUX_PRECISION=f32: ≤ 1e-4 (spec of the project).
 *  - default mode on AVX512_BF16: conv and linear inputs are rounded to bf16
 *    (relative 2⁻⁹) and the stored activations are bf16 too; each layer adds
 *    errors of that size and the GroupNorms rescale them. Tolerances below
 *    are about 2× the worst measured value.
 */
#include "test.h"

#include <stdlib.h>
#include <string.h>

#include "../src/ctx.h"
#include "../src/latents.h"
#include "../src/model.h"
#include "../src/npy.h"
#include "../src/vae.h"
#include "golden_case.h"

#define TOL_F32 1e-4
#define TOL_BF16_STAGE 3e-2 /* any internal stage, default mode */
#define TOL_BF16_IMAGE 3e-2 /* decoded image / encoder mean, default mode */

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

/* Decode `in_rel` ([lat, h8, w8]) on `model` and compare with `out_rel`;
 * internals_dir (or NULL) names the per-stage goldens. Returns the image
 * error (or 1e30 on failure). */
static double decode_case(const char *model_path, const char *in_rel, const char *out_rel, flux_precision prec,
                          int threads, double tol, const char *internals_dir, int quiet) {
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

/* ------------------------------------------------------------------------ */
/* Decoder                                                                  */
/* ------------------------------------------------------------------------ */

#define T2I "golden/t2i-48x64-2step/"

TEST(vae_decode_golden_f32) {
    decode_case(fx_test_path("golden/model"), T2I "decode_decoder_in.npy", T2I "decode.npy", FLUX_PRECISION_F32, 2,
                TOL_F32, T2I "internals_decode", 0);
}

TEST(vae_decode_golden_default) {
    decode_case(fx_test_path("golden/model"), T2I "decode_decoder_in.npy", T2I "decode.npy",
                FLUX_PRECISION_DEFAULT, 2, TOL_BF16_STAGE, T2I "internals_decode", 0);
}
