/*
 * test_gguf_fixtures_run.c — the GGUF files other tools wrote from the
 * golden tiny model (tests/formats/gguf_fixtures/README.md) run end to end
 * against the official goldens, in f32 mode (FLUX_PRECISION=f32):
 *   - each transformer file (ComfyUI-GGUF layout by gguf-py; stable-
 *     diffusion.cpp's -M convert) in place of the folder's transformer runs
 *     the golden case t2i-48x64-2step (golden embeddings and noise): the
 *     velocities, final latents and decoded image within the tolerance of
 *     its type (README "GGUF files made by other tools"), the file's
 *     quantization error (the bf16 folder itself is within 1e-4);
 *   - the llama.cpp-layout Qwen3 file in place of the folder's text encoder
 *     encodes the case's prompt within its tolerance of out/emb.npy;
 *   - gguf-py's Q8_0 / Q5_0 blocks in the ComfyUI-layout files and sd.cpp's
 *     Q8_0 blocks are byte for byte the blocks `flux quantize` (ggml's
 *     reference quantizers) writes for the same tensors of the golden folder.
 * Tolerances (max|ours − golden| / max|golden|): about 2x what was measured
 * on Zen 5 (f32 math is the same on every ISA within 1e-4).
 */
#include "tests/test.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/formats/weight_set.h"
#include "tests/golden_case.h"

#define CASE "t2i-48x64-2step"

/* measured on Zen 5 (velocities / latents / image): Q8_0 1.05e-2 / 3.8e-3 /
 * 5.1e-3, Q5_0 6.6e-2 / 2.7e-2 / 3.4e-2, Q4_0 1.34e-1 / 6.7e-2 / 6.9e-2; text
 * embeddings (Q8_0 + F16) 1.1e-2 */
#define TOL_Q8_0 2e-2
#define TOL_Q5_0 1.5e-1
#define TOL_Q4_0 3e-1
#define TOL_TE_Q8_0 2.5e-2

static const char *fixture(const char *file) {
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%sformats/gguf_fixtures/%s", fx_test_path(""), file);
    return path;
}

/* One transformer file through the golden case; every error within tol. */
static void run_transformer(const char *file, double tol) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", fixture(file));
    fx_gcase_set_files(path, NULL);
    fx_gcase_result r;
    fx_gcase_run(CASE, FLUX_PRECISION_F32, &r);
    fx_gcase_set_files(NULL, NULL);
    printf("      %s: velocities %.2e latents %.2e image %.2e (tolerance %.1e)\n", file, r.steps, r.latents, r.image,
           tol);
    CHECK_MSG(r.steps <= tol, "%s: velocities differ by %.3g > %g", file, r.steps, tol);
    CHECK_MSG(r.latents <= tol, "%s: latents differ by %.3g > %g", file, r.latents, tol);
    CHECK_MSG(r.image <= tol, "%s: image differs by %.3g > %g", file, r.image, tol);
}

TEST(gguf_fixture_comfyui_layout_runs_the_golden_case) {
    run_transformer("flux2-comfy-Q8_0.gguf", TOL_Q8_0);
    run_transformer("flux2-comfy-Q5_0.gguf", TOL_Q5_0);
}

TEST(gguf_fixture_stable_diffusion_cpp_runs_the_golden_case) {
    run_transformer("flux2-sdcpp-q8_0.gguf", TOL_Q8_0);
    run_transformer("flux2-sdcpp-q4_0.gguf", TOL_Q4_0);
}

TEST(gguf_fixture_llama_cpp_qwen3_encodes_the_golden_prompt) {
    fx_gcase c;
    REQUIRE(fx_gcase_load(CASE, &c));
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", fixture("qwen3-te-Q8_0.gguf"));
    fx_gcase_set_files(NULL, path);
    flux_ctx *ctx = fx_gcase_ctx(c.model, 2, FLUX_PRECISION_F32);
    fx_gcase_set_files(NULL, NULL);
    REQUIRE(ctx);
    fx_npy g = {0};
    float *got = NULL;
    if (fx_gcase_npy(c.dir, "out/emb.npy", &g)) {
        got = malloc(g.count * sizeof *got);
        flux_status st = flux_encode_text(ctx, "a cat on a skateboard", got);
        CHECK_MSG(st == FLUX_OK, "flux_encode_text: %s", flux_error(ctx));
        if (st == FLUX_OK) {
            double e = fx_test_rel_err(got, g.data, g.count);
            printf("      qwen3-te-Q8_0.gguf: embeddings %.2e (tolerance %.1e)\n", e, TOL_TE_Q8_0);
            CHECK_MSG(e <= TOL_TE_Q8_0, "embeddings differ by %.3g > %g", e, TOL_TE_Q8_0);
        }
    }
    free(got);
    fx_npy_free(&g);
    flux_free(ctx);
}

/* gguf-py's Python quantizer, sd.cpp's ggml and ours (= ggml's
 * quantize_row_*_ref) agree. */
TEST(gguf_fixture_blocks_equal_flux_quantize) {
    static const struct { const char *file, *type; fx_dtype dtype; } files[] = {
        {"flux2-comfy-Q8_0.gguf", "q8_0", FX_DTYPE_Q8_0},
        {"flux2-comfy-Q5_0.gguf", "q5_0", FX_DTYPE_Q5_0},
        {"flux2-sdcpp-q8_0.gguf", "q8_0", FX_DTYPE_Q8_0},
        /* not sd.cpp's Q4_0: it always passes ggml an importance matrix of
         * ones, so its blocks come from quantize_row_q4_0_impl's weighted
         * search (other scales and codes), not from the _ref quantizer */
    };
    static const char prefix[] = "model.diffusion_model."; /* sd.cpp's */
    for (size_t k = 0; k < sizeof files / sizeof *files; k++) {
        char ours[PATH_MAX], cmd[3 * PATH_MAX], *out = NULL;
        snprintf(ours, sizeof ours, "%s/ours-%s.gguf", fx_test_tmpdir(), files[k].type);
        snprintf(cmd, sizeof cmd, "'%s' quantize -q -d '%sgolden/model' --type %s --component transformer -o '%s'",
                 fx_test_flux_bin(), fx_test_path(""), files[k].type, ours);
        int rc = fx_test_run(cmd, &out);
        CHECK_MSG(rc == 0, "%s: %s", cmd, out ? out : "");
        free(out);
        if (rc) continue;
        fx_err err = {0};
        fx_wset *a = fx_wset_open(fixture(files[k].file), files[k].file, 1, &err);
        fx_wset *b = a ? fx_wset_open(ours, "flux quantize", 1, &err) : NULL;
        if (!b) {
            CHECK_MSG(0, "%s", err.msg);
            fx_wset_close(a);
            continue;
        }
        int compared = 0;
        for (size_t i = 0; i < fx_wset_count(a); i++) {
            const fx_tensor *x = fx_wset_tensor_at(a, i);
            const char *bfl = strncmp(x->name, prefix, sizeof prefix - 1) ? x->name : x->name + sizeof prefix - 1;
            const fx_tensor *y = fx_wset_find(b, bfl);
            if (x->dtype != files[k].dtype) continue;
            CHECK_MSG(y && y->dtype == x->dtype && y->nbytes == x->nbytes, "%s: '%s' not %s in flux quantize's file",
                      files[k].file, x->name, files[k].type);
            if (!y || y->nbytes != x->nbytes) continue;
            CHECK_MSG(!memcmp(fx_tensor_data(x), fx_tensor_data(y), (size_t)x->nbytes),
                      "%s: '%s': gguf-py's blocks differ from flux quantize's", files[k].file, x->name);
            compared++;
        }
        CHECK_MSG(compared == 23, "%s: %d %s tensors compared", files[k].file, compared, files[k].type);
        fx_wset_close(b);
        fx_wset_close(a);
    }
}
