/* test_transformer.c — one transformer call against the official golden
 * (tests/golden/t2i-48x64-2step: velocity_t1.npy = F(noise, σ = 1) with
 * out/emb.npy, and every block's output in internals_velocity_t1/), in f32
 * mode (≤ 1e-4 relative per array) and in the default bf16 mode (tolerance
 * below), plus batching (B stacked sequences = B separate calls) and thread
 * invariance. Error = max|ours − golden| / max|golden| per array. */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>

#include "src/dit/latents.h"
#include "src/base/npy.h"
#include "src/dit/schedule.h"
#include "src/dit/transformer.h"
#include "tests/golden_case.h"

#define CASE "golden/t2i-48x64-2step/"

/* Default mode on AVX512_BF16: GEMM and attention inputs are rounded to
 * bf16 (8-bit mantissa, relative step 2^-8 = 3.9e-3), f32 accumulation.
 * Measured on this case: 5.0e-3 for the velocity, ≤ 5e-3 for every block;
 * the tolerance keeps a 2x margin. (On CPUs without bf16 dot products the
 * default mode is f32 math and lands near the f32 numbers.) */
#define TOL_F32 1e-4
#define TOL_BF16 1e-2

static flux_ctx *new_ctx(int threads, flux_precision prec) {
    return fx_gcase_ctx(fx_test_path("golden/model"), threads, prec);
}

static int read_npy(const char *rel, fx_npy *a) { return fx_gcase_npy_file(fx_test_path(rel), a); }

/* Observer: compare each internal tensor of sequence 0 with its golden file. */
typedef struct check_state {
    double tol, worst;
    int compared;
    int quiet;
} check_state;

static void check_internal(void *user, const char *name, int b, const float *x, int64_t rows, int64_t cols,
                           int64_t ld) {
    check_state *cs = user;
    if (b != 0) return;
    char rel[256];
    snprintf(rel, sizeof rel, CASE "internals_velocity_t1/%s.npy", name);
    fx_npy g;
    fx_err err = {0};
    if (fx_npy_read(fx_test_path(rel), &g, &err) != FLUX_OK) return; /* not every tensor has a golden */
    if ((int64_t)g.count != rows * cols) {
        fx_test_fail(__FILE__, __LINE__, "%s: %lld x %lld values, golden has %zu", name, (long long)rows,
                     (long long)cols, g.count);
        fx_npy_free(&g);
        return;
    }
    float *dense = malloc((size_t)(rows * cols) * sizeof(float));
    for (int64_t i = 0; i < rows; i++) memcpy(dense + i * cols, x + i * ld, (size_t)cols * sizeof(float));
    double e = fx_test_rel_err(dense, g.data, g.count);
    if (!cs->quiet) printf("      %-34s %.2e\n", name, e);
    CHECK_MSG(e <= cs->tol, "%s: relative error %.3g > %g", name, e, cs->tol);
    if (e > cs->worst) cs->worst = e;
    cs->compared++;
    free(dense);
    fx_npy_free(&g);
}

/* One call on the golden inputs; returns the velocity [N, 128] (malloc'd). */
static float *golden_call(flux_ctx *ctx, int batch, check_state *cs) {
    fx_npy noise, emb;
    if (!read_npy(CASE "noise.npy", &noise)) return NULL;
    if (!read_npy(CASE "out/emb.npy", &emb)) return NULL;
    int h = (int)noise.shape[1], w = (int)noise.shape[2], N = h * w;
    fx_dit *dit = NULL;
    fx_dit_run *run = NULL;
    float *v = NULL;
    if (fx_dit_get(ctx, &dit) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "fx_dit_get: %s", flux_error(ctx));
        goto out;
    }
    fx_dit_layout lay = {.batch = batch, .text_len = 512, .n_images = 1, .grid_h = {h}, .grid_w = {w}};
    if (fx_dit_run_new(ctx, dit, &lay, &run) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "fx_dit_run_new: %s", flux_error(ctx));
        goto out;
    }
    if (cs) fx_dit_run_set_observer(run, check_internal, cs);
    /* Sequence b > 0 gets other inputs: scaled noise and reversed text rows. */
    int64_t D = emb.shape[1];
    float *x = malloc((size_t)batch * N * 128 * sizeof(float));
    float *embs = malloc((size_t)batch * 512 * D * sizeof(float));
    const float *ep[8];
    for (int b = 0; b < batch; b++) {
        fx_latents_pack(noise.data, 128, h, w, x + (size_t)b * N * 128, 128);
        for (int i = 0; i < N * 128; i++) x[(size_t)b * N * 128 + i] *= 1.0f + 0.25f * b;
        for (int l = 0; l < 512; l++)
            memcpy(embs + ((size_t)b * 512 + l) * D, (float *)emb.data + (size_t)(b ? 511 - l : l) * D,
                   (size_t)D * sizeof(float));
        ep[b] = embs + (size_t)b * 512 * D;
    }
    v = malloc((size_t)batch * N * 128 * sizeof(float));
    if (fx_dit_run_set_text(run, ep) != FLUX_OK || fx_dit_forward(run, x, 1.0f, v) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "forward: %s", flux_error(ctx));
        free(v);
        v = NULL;
    }
    free(x);
    free(embs);
out:
    fx_dit_run_free(run);
    fx_npy_free(&noise);
    fx_npy_free(&emb);
    return v;
}

static void golden_velocity(flux_precision prec, double tol) {
    flux_ctx *ctx = new_ctx(2, prec);
    REQUIRE(ctx);
    check_state cs = {.tol = tol};
    float *v = golden_call(ctx, 1, &cs);
    fx_npy g;
    if (v && read_npy(CASE "velocity_t1.npy", &g)) {
        double e = fx_test_rel_err(v, g.data, g.count);
        printf("      %-34s %.2e (worst internal %.2e, %d compared)\n", "velocity_t1", e, cs.worst, cs.compared);
        CHECK_MSG(e <= tol, "velocity: relative error %.3g > %g", e, tol);
        CHECK_EQ_INT(cs.compared, 2 + 2 * 2 + 2 + 2); /* temb, x/context embedder, 2×2 double, 2 single, proj_out */
        fx_npy_free(&g);
    }
    free(v);
    flux_free(ctx);
}

TEST(transformer_golden_f32) { golden_velocity(FLUX_PRECISION_F32, TOL_F32); }

/* without bf16 dot products the default precision is the f32 math */
static double tol_default(void) { return fx_test_bf16_dot(FLUX_PRECISION_DEFAULT) ? TOL_BF16 : TOL_F32; }

TEST(transformer_golden_default) { golden_velocity(FLUX_PRECISION_DEFAULT, tol_default()); }

/* Sequence 0 of a batch of 3 gives exactly the single-sequence result, and
 * the other sequences exactly their own single runs. */
TEST(transformer_batch_equals_single) {
    flux_ctx *ctx = new_ctx(2, FLUX_PRECISION_DEFAULT);
    REQUIRE(ctx);
    float *v3 = golden_call(ctx, 3, NULL);
    float *v1 = golden_call(ctx, 1, NULL);
    REQUIRE(v1 && v3);
    const int n = 12 * 128;
    CHECK_MSG(memcmp(v1, v3, n * sizeof(float)) == 0, "batch sequence 0 differs from the single run (%.3g)",
              fx_test_rel_err(v3, v1, n));
    /* sequence 1 and 2 have different inputs, so different outputs */
    CHECK(fx_test_rel_err(v3 + n, v1, n) > 1e-3);
    CHECK(fx_test_rel_err(v3 + 2 * n, v3 + n, n) > 1e-3);
    free(v1);
    free(v3);
    flux_free(ctx);
}

TEST(transformer_threads_bit_identical) {
    float *v[2] = {NULL, NULL};
    for (int t = 0; t < 2; t++) {
        flux_ctx *ctx = new_ctx(t + 1, FLUX_PRECISION_DEFAULT);
        REQUIRE(ctx);
        v[t] = golden_call(ctx, 2, NULL);
        flux_free(ctx);
    }
    REQUIRE(v[0] && v[1]);
    CHECK(memcmp(v[0], v[1], 2 * 12 * 128 * sizeof(float)) == 0);
    free(v[0]);
    free(v[1]);
}

TEST(transformer_timestep_embedding) {
    /* cos half first; t = 0 → [1…1, 0…0]; f_0 = 1 → e[0] = cos t, e[half] = sin t */
    float e[256];
    fx_timestep_embedding(0.0, 256, e);
    for (int i = 0; i < 128; i++) {
        CHECK(e[i] == 1.0f);
        CHECK(e[128 + i] == 0.0f);
    }
    fx_timestep_embedding(973.7, 256, e);
    CHECK_NEAR(e[0], cos(973.7), 1e-7);
    CHECK_NEAR(e[128], sin(973.7), 1e-7);
    CHECK_NEAR(e[64], cos(973.7 * exp(-log(10000.0) * 0.5)), 1e-7);
    CHECK_NEAR(e[255], sin(973.7 * exp(-log(10000.0) * 127 / 128.0)), 1e-7);
}

TEST(transformer_bad_layout) {
    flux_ctx *ctx = new_ctx(1, FLUX_PRECISION_DEFAULT);
    REQUIRE(ctx);
    fx_dit *dit = NULL;
    REQUIRE(fx_dit_get(ctx, &dit) == FLUX_OK);
    fx_dit_run *run = NULL;
    fx_dit_layout lay = {.batch = 0, .text_len = 512, .n_images = 1, .grid_h = {2}, .grid_w = {2}};
    CHECK_EQ_INT(fx_dit_run_new(ctx, dit, &lay, &run), FLUX_ERR_INVALID_ARG);
    CHECK(strstr(flux_error(ctx), "batch"));
    lay.batch = 1, lay.grid_w[0] = 0;
    CHECK_EQ_INT(fx_dit_run_new(ctx, dit, &lay, &run), FLUX_ERR_INVALID_ARG);
    lay.grid_w[0] = 2, lay.n_images = 2; /* reference grid 0x0 */
    CHECK_EQ_INT(fx_dit_run_new(ctx, dit, &lay, &run), FLUX_ERR_INVALID_ARG);
    /* forward before the text is set */
    lay.n_images = 1;
    REQUIRE(fx_dit_run_new(ctx, dit, &lay, &run) == FLUX_OK);
    float x[4 * 128] = {0}, v[4 * 128];
    CHECK_EQ_INT(fx_dit_forward(run, x, 0.5f, v), FLUX_ERR_STATE);
    fx_dit_run_free(run);
    flux_free(ctx);
}

/* ------------------------------------------------------------ references */

/* Euler sampling through fx_dit with reference tokens (the golden
 * BN-normalised reference latents out/refK_latents.npy, so no VAE encoder
 * is involved): every step's velocity and the final latents. With CFG the
 * unconditional and conditional passes are the two stacked sequences. */
static void sample_with_refs(const char *name, flux_precision prec, double tol) {
    fx_gcase c;
    if (!fx_gcase_load(name, &c)) return;
    flux_ctx *ctx = fx_gcase_ctx(c.model, 2, prec);
    if (!ctx) return;
    fx_npy noise = {0}, emb = {0}, neg = {0}, refs[4];
    memset(refs, 0, sizeof refs);
    fx_dit *dit = NULL;
    fx_dit_run *run = NULL;
    float *x = NULL, *xin = NULL, *v = NULL, *tok[4] = {NULL};
    if (!fx_gcase_npy(c.dir, "noise.npy", &noise) || !fx_gcase_npy(c.dir, "out/emb.npy", &emb) ||
        (c.cfg && !fx_gcase_npy(c.dir, "out/neg_emb.npy", &neg)))
        goto out;
    const int B = c.cfg ? 2 : 1, gh = (int)noise.shape[1], gw = (int)noise.shape[2], N = gh * gw;
    fx_dit_layout lay = {.batch = B, .text_len = 512, .n_images = 1 + c.n_refs, .grid_h = {gh}, .grid_w = {gw}};
    for (int k = 0; k < c.n_refs; k++) {
        char rel[64];
        snprintf(rel, sizeof rel, "out/ref%d_latents.npy", k);
        if (!fx_gcase_npy(c.dir, rel, &refs[k])) goto out;
        lay.grid_h[k + 1] = (int)refs[k].shape[1];
        lay.grid_w[k + 1] = (int)refs[k].shape[2];
        tok[k] = malloc(refs[k].count * sizeof(float));
        fx_latents_pack(refs[k].data, 128, lay.grid_h[k + 1], lay.grid_w[k + 1], tok[k], 128);
    }
    REQUIRE(fx_dit_get(ctx, &dit) == FLUX_OK);
    REQUIRE_MSG(fx_dit_run_new(ctx, dit, &lay, &run) == FLUX_OK, "%s", flux_error(ctx));
    const float *texts[2] = {c.cfg ? neg.data : emb.data, emb.data};
    REQUIRE(fx_dit_run_set_text(run, texts) == FLUX_OK);
    for (int k = 0; k < c.n_refs; k++) REQUIRE(fx_dit_run_set_image(run, k + 1, tok[k]) == FLUX_OK);
    float sig[16];
    REQUIRE(fx_schedule_sigmas(c.schedule, c.steps, N, 2.0, sig, NULL) == FLUX_OK);
    x = malloc((size_t)N * 128 * sizeof(float));
    xin = malloc((size_t)B * N * 128 * sizeof(float));
    v = malloc((size_t)B * N * 128 * sizeof(float));
    fx_latents_pack(noise.data, 128, gh, gw, x, 128);
    double worst = 0;
    for (int i = 0; i < c.steps; i++) {
        for (int b = 0; b < B; b++) memcpy(xin + (size_t)b * N * 128, x, (size_t)N * 128 * sizeof(float));
        REQUIRE_MSG(fx_dit_forward(run, xin, sig[i], v) == FLUX_OK, "%s", flux_error(ctx));
        if (c.cfg)
            for (int e = 0; e < N * 128; e++) v[e] = v[e] + c.guidance * (v[N * 128 + e] - v[e]);
        char rel[64];
        snprintf(rel, sizeof rel, "out/steps/step%02d_v.npy", i);
        fx_npy g;
        if (fx_gcase_npy(c.dir, rel, &g)) {
            double e = fx_test_rel_err(v, g.data, g.count);
            if (e > worst) worst = e;
            fx_npy_free(&g);
        }
        for (int e = 0; e < N * 128; e++) x[e] += (sig[i + 1] - sig[i]) * v[e];
    }
    fx_npy lat;
    if (fx_gcase_npy(c.dir, "out/latents_packed.npy", &lat)) {
        double e = fx_test_rel_err(x, lat.data, lat.count);
        printf("      %-34s %s: steps %.2e  latents %.2e  (%d refs%s)\n", name, prec ? "f32 " : "bf16", worst, e,
               c.n_refs, c.cfg ? ", CFG" : "");
        CHECK_MSG(e <= tol, "%s: latents error %.3g > %g", name, e, tol);
        fx_npy_free(&lat);
    }
    CHECK_MSG(worst <= tol, "%s: velocity error %.3g > %g", name, worst, tol);
out:
    for (int k = 0; k < 4; k++) fx_npy_free(&refs[k]), free(tok[k]);
    fx_npy_free(&noise), fx_npy_free(&emb), fx_npy_free(&neg);
    free(x), free(xin), free(v);
    fx_dit_run_free(run);
    flux_free(ctx);
}

static const char *const ref_cases[] = {"multiref-48x48-2step", "ours-multiref-48x48-2step",
                                        "ours-img2img-bigref-32x32-1step", "ours-base-cfg-ref-32x32-1step"};

TEST(transformer_references_f32) {
    for (size_t i = 0; i < sizeof ref_cases / sizeof *ref_cases; i++) sample_with_refs(ref_cases[i], FLUX_PRECISION_F32, TOL_F32);
}

TEST(transformer_references_default) {
    for (size_t i = 0; i < sizeof ref_cases / sizeof *ref_cases; i++)
        sample_with_refs(ref_cases[i], FLUX_PRECISION_DEFAULT, 2 * tol_default()); /* CFG amplifies: 6.5e-3 measured */
}
