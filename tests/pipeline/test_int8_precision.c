/*
 * test_int8_precision.c — `--precision int8` on a bf16 folder (FX_INT8_ALL):
 * every transformer and text-encoder weight runs W8A8 from its int8 form,
 * made at load from the bf16 rows (the mapped rows released), the VAE as
 * before. On the golden tiny model (CLI, --dump):
 *   - the text embeddings and the latents differ from the default run's
 *     (both the text encoder and the transformer ran int8), and stay close
 *     to the f32 run's: the error is printed and bounded;
 *   - bit-identical for 1 and 2 threads (exact int32 sums);
 *   - the embedding cache keeps the modes apart (a default run's entry
 *     is never served to an int8 run);
 *   - -v reports the forms (converted weights) that the default run has
 *     not.
 * Tolerance: relative to max, the latents within 5e-2 of the f32 run and
 * the image within 8 levels on average (measured and printed: the int8
 * activations of 8 bits per token move the tiny model's latents by a few
 * 1e-3; README "--precision int8" states the figures).
 */
#include "tests/test.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/npy.h"

/* flux on the golden model into dump folder `tag` (and <tag>.png);
 * returns the output of the command (caller frees) or NULL on failure. */
static char *run(const char *tag, const char *args) {
    char cmd[4 * PATH_MAX], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' -d '%s' -p 'a red lighthouse' -W 64 -H 80 -s 2 -S 5 -o '%s/%s.png' --dump '%s/%s' %s",
             fx_test_flux_bin(), fx_test_path("golden/model"), fx_test_tmpdir(), tag, fx_test_tmpdir(), tag, args);
    const int rc = fx_test_run(cmd, &out);
    if (rc) {
        fx_test_fail(__FILE__, __LINE__, "%s: exit %d: %s", cmd, rc, out ? out : "");
        free(out);
        return NULL;
    }
    return out;
}

static int read_stage(const char *tag, const char *file, fx_npy *a) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s/%s", fx_test_tmpdir(), tag, file);
    fx_err err = {0};
    return fx_npy_read(path, a, &err) == FLUX_OK ? 0 : -1;
}

/* max |a − b| / max |b|; -1 when the shapes differ */
static double rel(const fx_npy *a, const fx_npy *b) {
    if (a->count != b->count) return -1;
    const float *x = a->data, *y = b->data;
    double d = 0, m = 0;
    for (size_t i = 0; i < a->count; i++) {
        d = fmax(d, fabs((double)x[i] - y[i]));
        m = fmax(m, fabs((double)y[i]));
    }
    return m > 0 ? d / m : d;
}

static double stage_diff(const char *a, const char *b, const char *file) {
    fx_npy x = {0}, y = {0};
    double d = -1;
    if (!read_stage(a, file, &x) && !read_stage(b, file, &y)) d = rel(&x, &y);
    fx_npy_free(&x), fx_npy_free(&y);
    return d;
}

static int same_file(const char *a, const char *b) {
    char cmd[2 * PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    return fx_test_run(cmd, NULL) == 0;
}

TEST(int8_precision_runs_every_weight_as_int8) {
    char *f32 = run("f32", "--precision f32 --no-cache -q");
    char *def = run("default", "--no-cache -v");
    char *i8 = run("int8", "--precision int8 --no-cache -v");
    char *i8t1 = run("int8-t1", "--precision int8 --no-cache -q -t 1");
    REQUIRE(f32 && def && i8 && i8t1);
    const double emb_def = stage_diff("int8", "default", "text_embeddings.npy");
    const double lat_def = stage_diff("int8", "default", "latents.npy");
    const double emb_f32 = stage_diff("int8", "f32", "text_embeddings.npy");
    const double lat_f32 = stage_diff("int8", "f32", "latents.npy");
    const double img_f32 = stage_diff("int8", "f32", "decoded.npy");
    const double lat_def_f32 = stage_diff("default", "f32", "latents.npy");
    printf("    int8 against f32: embeddings %.3g, latents %.3g, image %.3g (default against f32: latents %.3g)\n",
           emb_f32, lat_f32, img_f32, lat_def_f32);
    CHECK_MSG(emb_def > 0 && lat_def > 0, "int8 did not change the text encoder (%g) or the transformer (%g)", emb_def,
              lat_def);
    CHECK_MSG(lat_f32 >= 0 && lat_f32 <= 5e-2, "latents %g from the f32 run", lat_f32);
    CHECK_MSG(img_f32 >= 0 && img_f32 <= 5e-2, "image %g from the f32 run", img_f32);
    char a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof a, "%s/int8.png", fx_test_tmpdir());
    snprintf(b, sizeof b, "%s/int8-t1.png", fx_test_tmpdir());
    CHECK_MSG(same_file(a, b), "int8 on 1 and 2 threads differ");
    /* the forms: converted weights reported by the int8 run, not by the default run */
    const char *cw = strstr(i8, "converted weights "), *cd = strstr(def, "converted weights ");
    CHECK_MSG(cw && strncmp(cw, "converted weights 0 KB", 22), "-v: %s", i8);
    CHECK_MSG(cd && !strncmp(cd, "converted weights 0 KB", 22), "-v: %s", def);
    free(f32), free(def), free(i8), free(i8t1);
}

/* A default run fills the cache; an int8 run with the same cache folder
 * computes its own embeddings (and stores them under its own key). */
TEST(int8_precision_has_its_own_cache_entries) {
    char cache[PATH_MAX + 32], args[2 * PATH_MAX];
    snprintf(cache, sizeof cache, "%s/int8-cache", fx_test_tmpdir());
    snprintf(args, sizeof args, "--cache-dir '%s' -q", cache);
    char *d = run("cache-default", args);
    snprintf(args, sizeof args, "--cache-dir '%s' -q --precision int8", cache);
    char *i = run("cache-int8", args);
    char *i2 = run("cache-int8-again", args);
    REQUIRE(d && i && i2);
    CHECK_MSG(stage_diff("cache-int8", "cache-default", "text_embeddings.npy") > 0, "the int8 run took the default's entry");
    char a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof a, "%s/cache-int8.png", fx_test_tmpdir());
    snprintf(b, sizeof b, "%s/cache-int8-again.png", fx_test_tmpdir());
    CHECK_MSG(same_file(a, b), "the cached int8 run differs from the computed one");
    free(d), free(i), free(i2);
}
