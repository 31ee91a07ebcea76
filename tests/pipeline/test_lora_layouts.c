/*
 * test_lora_layouts.c — adapters in each trainer's key layout
 * (tests/formats/lora_layouts: ai-toolkit LoRA and DoRA, kohya/musubi,
 * diffusers PEFT, PEFT DoRA, LyCORIS LoCon+DoRA, LoKr, LoHa+DoRA; made by
 * tools/gen_lora_layouts.py, whose MANIFEST.txt names the Python and NumPy
 * versions) against the weights NumPy merged for them, independently of
 * flux.c.
 *
 * Each adapter is loaded on the tiny golden model (FLUX_PRECISION=f32) at
 * its manifest strength; every linear view of a tensor the adapter changes
 * is run on the identity (fx_linear of I [k, k]: Y = W'ᵀ, the layer's
 * effective weight, terms and DoRA gates included) and compared with the
 * merged tensor: max |W' − expected| <= 1e-5 · max |expected| (f32 products
 * of the factors against float64 merged once to f32: measured 1e-7..4e-7),
 * while the adapter must move the weight by more than 1e-2 · max |W| (so an
 * ignored key cannot pass). The load must report no ignored key.
 */
#include "tests/test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/dit/dit_internal.h"
#include "src/formats/safetensors.h"

#define TOL 1e-5
#define MIN_EFFECT 1e-2

/* Compare the views of `tensor` with the merged tensor `want` [rows, cols]. */
static void check_tensor(const char *layout, fx_dit *dit, const char *tensor, const float *want, int64_t rows,
                         int64_t cols) {
    double worst = 0, scale = 0, effect = 0, wmax = 0;
    int64_t covered = 0;
    for (int64_t i = 0; i < rows * cols; i++) scale = fmax(scale, fabs(want[i]));
    const fx_kctx *kc = fx_ops_kctx(dit->ops);
    for (int v = 0; v < dit->n_linears; v++) {
        const fx_dit_linear *lin = &dit->linears[v];
        if (strcmp(lin->tensor, tensor)) continue;
        const int64_t n = lin->w->n, k = lin->w->k;
        CHECK_EQ_INT(k, cols);
        float *eye = calloc((size_t)(k * k), sizeof *eye), *y = malloc((size_t)(k * n) * sizeof *y),
              *y0 = malloc((size_t)(k * n) * sizeof *y0);
        for (int64_t j = 0; j < k; j++) eye[j * k + j] = 1.0f;
        fx_weight plain = *lin->w;
        plain.delta = NULL;
        fx_linear(kc, k, eye, k, lin->w, y, n, NULL);
        fx_linear(kc, k, eye, k, &plain, y0, n, NULL);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < k; j++) {
                const double w = want[(lin->row0 + i) * cols + j];
                worst = fmax(worst, fabs((double)y[j * n + i] - w));
                effect = fmax(effect, fabs((double)y0[j * n + i] - w));
                wmax = fmax(wmax, fabs((double)y0[j * n + i]));
            }
        covered += n;
        free(eye), free(y), free(y0);
    }
    printf("      %-20s %-44s |W' - numpy| %.2e of max, effect %.2e\n", layout, tensor, worst / scale, effect / wmax);
    CHECK_MSG(covered >= rows, "%s: %s: views cover %lld of %lld rows", layout, tensor, (long long)covered, (long long)rows);
    CHECK_MSG(worst <= TOL * scale, "%s: %s: %.3g from NumPy's merge (tolerance %.3g)", layout, tensor, worst, TOL * scale);
    CHECK_MSG(effect >= MIN_EFFECT * wmax, "%s: %s: the adapter moves the weight by only %.3g", layout, tensor, effect);
}

TEST(lora_layouts_match_numpy_merge) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", fx_test_path("formats/lora_layouts"));
    char path[4400];
    snprintf(path, sizeof path, "%s/MANIFEST.txt", dir);
    size_t len = 0;
    char *manifest = fx_test_read_file(path, &len);
    REQUIRE_MSG(manifest, "%s", path);
    flux_options o;
    flux_options_init(&o);
    o.threads = 2;
    o.precision = FLUX_PRECISION_F32;
    o.no_disk_cache = 1;
    flux_ctx *ctx = flux_new(&o);
    REQUIRE(ctx && flux_load(ctx, fx_test_path("golden/model"), NULL) == FLUX_OK);
    int layouts = 0;
    for (char *line = strtok(manifest, "\n"); line; line = strtok(NULL, "\n")) {
        char name[128];
        float strength;
        if (line[0] == '#' || sscanf(line, "%127s %f", name, &strength) != 2) continue;
        layouts++;
        snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
        flux_lora_clear(ctx);
        if (flux_lora_load(ctx, path, strength) != FLUX_OK) {
            fx_test_fail(__FILE__, __LINE__, "%s: %s", name, flux_error(ctx));
            continue;
        }
        flux_lora_info info;
        REQUIRE(flux_lora_get_info(ctx, 0, &info) == FLUX_OK);
        CHECK_MSG(info.ignored_keys == 0 && !info.warning[0], "%s: %s", name, info.warning);
        fx_dit *dit;
        REQUIRE(fx_dit_get(ctx, &dit) == FLUX_OK);
        snprintf(path, sizeof path, "%s/%s.expected.safetensors", dir, name);
        fx_err err = {0};
        fx_wset *want = fx_wset_open(path, path, 1, &err);
        REQUIRE_MSG(want, "%s", err.msg);
        for (size_t i = 0; i < fx_wset_count(want); i++) {
            const fx_tensor *t = fx_wset_tensor_at(want, i);
            float *w;
            int64_t n;
            REQUIRE_MSG(fx_wset_f32(want, t->name, NULL, &w, &n, &err) == FLUX_OK, "%s", err.msg);
            check_tensor(name, dit, t->name, w, t->shape.d[0], t->shape.d[1]);
            free(w);
        }
        fx_wset_close(want);
    }
    CHECK_EQ_INT(layouts, 8);
    free(manifest);
    flux_free(ctx);
}
