/*
 * test_quant_layouts.c — the quantized safetensors layouts other tools
 * write (README "fp8 checkpoints"), made by an independent writer
 * (tests/formats/gen_quant_layouts.py, NumPy only) from the golden tiny
 * model, each with its decoded twin (the same weights dequantized to F32):
 *   - every layout's whole run (the CLI, text encoder + transformer + VAE,
 *     --precision f32) is within 1e-5 (relative to max) of its twin's run:
 *     text embeddings, first velocity, final latents;
 *   - the files of formats flux.c does not read (GPTQ, bitsandbytes
 *     NF4, SVDQuant), and files of the read layouts with a broken scale (a
 *     NaN, a wrong shape, E8M0 255), are refused at load: non-zero exit,
 *     the format or the scale named, nothing 'loaded'.
 */
#include "tests/test.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simd/quant/quant.h"
#include "tests/golden_case.h"

/* A python3 that has NumPy ("python3" first, then the system one), or NULL. */
static const char *numpy_python(void) {
    static const char *const candidates[] = {"python3", "/usr/bin/python3"};
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        char cmd[128], *out = NULL;
        snprintf(cmd, sizeof cmd, "%s -c 'import numpy' 2>&1", candidates[i]);
        int rc = fx_test_run(cmd, &out);
        free(out);
        if (!rc) return candidates[i];
    }
    return NULL;
}

/* The layouts written once into <tmp>/ql; its path, or NULL (failure recorded). */
static const char *layouts_dir(const char *python) {
    static char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/ql", fx_test_tmpdir());
    char cmd[4 * PATH_MAX], script[PATH_MAX], *out = NULL;
    snprintf(script, sizeof script, "%s", fx_test_path("formats/gen_quant_layouts.py")); /* a static buffer */
    snprintf(cmd, sizeof cmd, "%s '%s' '%s' '%s' 2>&1", python, script, fx_test_path("golden/model"), dir);
    int rc = fx_test_run(cmd, &out);
    if (rc) fx_test_fail(__FILE__, __LINE__, "%s: %s", cmd, out ? out : "");
    free(out);
    return rc ? NULL : dir;
}

/* One f32-mode run of the CLI (text encoder file optional) dumping into
 * <dir>/<tag>; the CLI's output into *out when out is non-NULL. Exit code. */
static int run(const char *dir, const char *transformer, const char *text_encoder, const char *tag, char **out) {
    char cmd[8 * PATH_MAX], te[PATH_MAX + 32] = "";
    if (text_encoder) snprintf(te, sizeof te, "--text-encoder '%s/%s'", dir, text_encoder);
    snprintf(cmd, sizeof cmd,
             "'%s' -v -d '%s' --transformer '%s/%s' %s -p 'a red fox in snow' -W 80 -H 64 -s 2 -S 11 "
             "--precision f32 --dump '%s/%s' -o '%s/%s.png' 2>&1",
             fx_test_flux_bin(), fx_test_path("golden/model"), dir, transformer, te, dir, tag, dir, tag);
    char *local = NULL;
    int rc = fx_test_run(cmd, out ? out : &local);
    free(local);
    return rc;
}

TEST(quant_layouts_match_their_decoded_twins) {
    const char *python = numpy_python();
    if (!python) SKIP("no python3 with NumPy");
    const char *dir = layouts_dir(python);
    REQUIRE(dir);
    static const struct {
        const char *transformer, *text_encoder; /* layout names; NULL: the folder's BF16 text encoder */
    } runs[] = {{"rowwise", "rowwise"}, {"block128", "block128"}, {"mxfp8", NULL}, {"block64", NULL}, {"int8", "int8"}, {"nvfp4", "nvfp4"}};
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        char t[128], tt[128], te[128], tet[128], tag[64], twin[64], *out = NULL;
        snprintf(t, sizeof t, "transformer-%s.safetensors", runs[i].transformer);
        snprintf(tt, sizeof tt, "transformer-%s-twin.safetensors", runs[i].transformer);
        if (runs[i].text_encoder) {
            snprintf(te, sizeof te, "text_encoder-%s.safetensors", runs[i].text_encoder);
            snprintf(tet, sizeof tet, "text_encoder-%s-twin.safetensors", runs[i].text_encoder);
        }
        snprintf(tag, sizeof tag, "run-%zu", i);
        snprintf(twin, sizeof twin, "twin-%zu", i);
        const char *a = runs[i].text_encoder ? te : NULL, *b = runs[i].text_encoder ? tet : NULL;
        int rc = run(dir, t, a, tag, &out);
        CHECK_MSG(rc == 0, "%s: %s", t, out ? out : "");
        if (rc == 0) /* -v says which layouts were read */
            CHECK_MSG(strstr(out, "scaled weights, expanded in place") != NULL, "%s: no -v line on its layouts:\n%s", t, out);
        if (i == 0) CHECK_MSG(rc == 0 && strstr(out, "warning:") && strstr(out, "ignored"), "stray scale not warned:\n%s",
                              out ? out : "");
        free(out);
        REQUIRE(rc == 0 && run(dir, tt, b, twin, NULL) == 0);
        char da[PATH_MAX], db[PATH_MAX];
        snprintf(da, sizeof da, "%s/%s", dir, tag);
        snprintf(db, sizeof db, "%s/%s", dir, twin);
        static const char *const arrays[] = {"text_embeddings.npy", "velocity_000.npy", "latents.npy"};
        for (int k = 0; k < 3; k++) {
            const double e = fx_gcase_compare(da, arrays[k], db, arrays[k]);
            printf("    transformer %-8s text encoder %-8s %-20s |layout - twin| / max = %.3g\n", runs[i].transformer,
                   runs[i].text_encoder ? runs[i].text_encoder : "(BF16)", arrays[k], e);
            CHECK_MSG(e <= 1e-5, "%s %s: relative difference %.3g > 1e-5", runs[i].transformer, arrays[k], e);
        }
    }
}

TEST(quant_layouts_other_formats_refused_at_load) {
    const char *python = numpy_python();
    if (!python) SKIP("no python3 with NumPy");
    const char *dir = layouts_dir(python);
    REQUIRE(dir);
    static const struct {
        const char *file, *names;
    } cases[] = {{"transformer-gptq.safetensors", "belongs to the GPTQ / AWQ"},
                 {"transformer-bnb-nf4.safetensors", "bitsandbytes NF4"},
                 {"transformer-svdquant.safetensors", "SVDQuant / Nunchaku"},
                 /* layouts flux.c reads, with broken scales */
                 {"transformer-rowwise-nan.safetensors", "is nan at one element; per-row scales must be finite"},
                 {"transformer-rowwise-shape.safetensors", "has shape [65]; fp8 weight"},
                 {"transformer-mxfp8-e255.safetensors", "is nan at one element; MXFP8 scales must be finite"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *out = NULL;
        int rc = run(dir, cases[i].file, NULL, "refused", &out);
        CHECK_MSG(rc != 0, "%s: accepted", cases[i].file);
        CHECK_MSG(out && strstr(out, cases[i].names), "%s: the format is not named:\n%s", cases[i].file, out ? out : "");
        CHECK_MSG(out && !strstr(out, "loaded") && !strstr(out, "seed"), "%s: refused only after loading:\n%s",
                  cases[i].file, out ? out : "");
        free(out);
    }
}

/* The element decoders against their definitions, every code: E2M1 pairs
 * (OCP MX 1.0 FP4: (-1)^s · 2^(e-1) · (1 + m/2), e = 0: (-1)^s · m/2; the
 * even element in the high nibble, comfy-kitchen hi_first) and int8. */
TEST(quant_layouts_element_decoders) {
    for (int b = 0; b < 256; b++) {
        const uint8_t byte = (uint8_t)b;
        float y[2];
        fx_dequantize_row(FX_DTYPE_F4_E2M1, &byte, 2, y);
        for (int h = 0; h < 2; h++) {
            const int c = h ? b & 15 : b >> 4, s = c >> 3, e = (c >> 1) & 3, m = c & 1;
            const double mag = e ? ldexp(1.0 + m / 2.0, e - 1) : m / 2.0;
            CHECK_MSG(y[h] == (float)(s ? -mag : mag), "byte 0x%02x element %d: %g", b, h, (double)y[h]);
        }
        float v;
        fx_dequantize_row(FX_DTYPE_I8, &byte, 1, &v);
        CHECK(v == (float)(b < 128 ? b : b - 256));
    }
}

/* int8 checkpoints in --precision int8: the transformer's I8 weights become
 * the W8A8 form as stored — the file's codes (-128 included) and its scale
 * per output row or tensor, a row slice keeping its place — not requantized. */
TEST(quant_layouts_int8_form_is_the_file) {
    enum { N = 3, K = 64 };
    static int8_t codes[N * K];
    for (int i = 0; i < N * K; i++) codes[i] = (int8_t)((i * 37) % 256 - 128);
    static const float row_scale[N] = {0.5f, 0.25f, 3.0f};
    const fx_weight_scales g = {row_scale, 1, K, 1};
    const fx_kctx kc = {.threads = 1};
    for (int per_tensor = 0; per_tensor < 2; per_tensor++) {
        fx_weight w = {.data = codes, .dtype = FX_DTYPE_I8, .n = N, .k = K, .ld = K};
        if (per_tensor) w.scale = 0.75f;
        else w.scales = &g;
        for (int r0 = 0; r0 < 2; r0++) {
            const fx_weight v = fx_weight_rows(&w, r0, N - r0);
            fx_int8w *f = fx_int8w_new(&kc, &v);
            REQUIRE(f);
            for (int j = 0; j < N - r0; j++) {
                int32_t sum = 0;
                for (int c = 0; c < K; c++) {
                    CHECK(f->q[j * f->ldq + c] == codes[(r0 + j) * K + c]);
                    sum += codes[(r0 + j) * K + c];
                }
                CHECK(f->sum[j] == sum);
                CHECK_MSG(f->scale[j] == (per_tensor ? 0.75f : row_scale[r0 + j]), "row %d: %g", r0 + j,
                          (double)f->scale[j]);
            }
            fx_int8w_free(f);
        }
    }
}

/* And the whole int8 run: within the W8A8 rule's distance of the f32 run
 * of the same file (activations quantized per token), and not the
 * weight-only (bf16) run — the form was used. */
TEST(quant_layouts_int8_runs_w8a8) {
    const char *python = numpy_python();
    if (!python) SKIP("no python3 with NumPy");
    const char *dir = layouts_dir(python);
    REQUIRE(dir);
    static const char *const precs[3] = {"f32", "int8", "bf16"};
    for (int p = 0; p < 3; p++) {
        char cmd[8 * PATH_MAX], *out = NULL;
        snprintf(cmd, sizeof cmd,
                 "'%s' -v -d '%s' --transformer '%s/transformer-int8.safetensors' -p 'a red fox in snow' -W 80 -H 64 "
                 "-s 2 -S 11 --precision %s --dump '%s/w8a8-%s' -o '%s/w8a8-%s.png' 2>&1",
                 fx_test_flux_bin(), fx_test_path("golden/model"), dir, precs[p], dir, precs[p], dir, precs[p]);
        int rc = fx_test_run(cmd, &out);
        CHECK_MSG(rc == 0, "%s", out ? out : "");
        free(out);
        REQUIRE(rc == 0);
    }
    char f32[PATH_MAX], i8[PATH_MAX], bf[PATH_MAX];
    snprintf(f32, sizeof f32, "%s/w8a8-f32", dir);
    snprintf(i8, sizeof i8, "%s/w8a8-int8", dir);
    snprintf(bf, sizeof bf, "%s/w8a8-bf16", dir);
    const double e = fx_gcase_compare(i8, "velocity_000.npy", f32, "velocity_000.npy");
    const double b = fx_gcase_compare(i8, "velocity_000.npy", bf, "velocity_000.npy");
    printf("    int8 file, --precision int8: velocity %.3g from the f32 run, %.3g from the bf16 run\n", e, b);
    CHECK_MSG(e <= 3e-2, "W8A8 velocity %.3g from the f32 run (rule 3e-2)", e);
    CHECK_MSG(b > 0, "the int8 run equals the weight-only run: no W8A8");
}
