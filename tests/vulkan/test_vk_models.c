/*
 * test_vk_models.c — quantized models and LoRA adapters end to end on the
 * Vulkan backend, each against the CPU f32 run of the same model, with the
 * validation layer clean. The model is generated with transformer widths
 * that are multiples of 256 (d = 256; text encoder hidden 32, so its
 * 32-blocks quantize too):
 *   - --quant q8_0 and q4_k: block weights uploaded as stored, within the
 *     golden f32 tolerances (latents: relative error 1e-4; pixels: max |Δ| 1);
 *   - a low-rank LoRA (tools/gen_lora, BFL names, every module, gated
 *     layers included) and a dense-difference adapter: latents within 1e-5
 *     relative, pixels max |Δ| 1;
 *   - a LoKr (Kronecker) adapter is refused on the device by name, no image.
 */
#include "vk_test.h"

#include "flux.h"
#include "src/base/npy.h"
#include "src/model/ctx.h"
#include "src/ops/ops.h"
#include "tests/golden_case.h"
#include "tests/golden_cases.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* The d = 256 test model in this test's tmpdir (static buffer), or NULL. */
static const char *model256(void) { return fx_gen_model_in_tmpdir("model256", FX_GEN_ARGS_D256); }

typedef struct vk_run {
    fx_npy latents;
    flux_image *img;
    int ok;
} vk_run;

/* One f32 generation ("a small red boat", 32×32, 1 step, seed 7) of dir
 * with --quant quant (NULL: none) and a LoRA at scale 1 (NULL: none), on
 * the CPU or the Vulkan device; tag names the dump folder. */
static vk_run run_on(flux_backend backend, const char *dir, const char *quant, const char *lora, const char *tag) {
    vk_run r = {0};
    flux_options o;
    flux_options_init(&o);
    o.backend = backend;
    o.threads = 2;
    o.precision = FLUX_PRECISION_F32;
    o.no_disk_cache = 1;
    flux_ctx *ctx = flux_new(&o);
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.quant = quant;
    if (!ctx || flux_load(ctx, dir, &lo) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "flux_load (%s): %s", tag, flux_error(ctx));
        flux_free(ctx);
        return r;
    }
    if (lora && flux_lora_load(ctx, lora, 1.0f) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "flux_lora_load (%s): %s", tag, flux_error(ctx));
        flux_free(ctx);
        return r;
    }
    if (backend == FLUX_BACKEND_VULKAN)
        CHECK_MSG(!strncmp(flux_backend_name(ctx), "vulkan", 6), "%s runs on %s", tag, flux_backend_name(ctx));
    flux_params p;
    flux_params_init(&p);
    p.prompt = "a small red boat";
    p.width = p.height = 32;
    p.steps = 1, p.seed = 7;
    char dump[PATH_MAX];
    snprintf(dump, sizeof dump, "%s/dump-%s", fx_test_tmpdir(), tag);
    mkdir(dump, 0777);
    p.dump_dir = dump;
    if (flux_generate(ctx, &p, &r.img) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "generate (%s): %s", tag, flux_error(ctx));
    } else {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/latents.npy", dump);
        fx_err err = {0};
        r.ok = fx_npy_read(path, &r.latents, &err) == FLUX_OK;
        if (!r.ok) fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
    }
    const char *first = NULL;
    int nerr = ctx->ops ? fx_ops_device_errors(ctx->ops, &first) : 0;
    CHECK_MSG(nerr == 0, "%s: %d validation error(s), first: %s", tag, nerr, first ? first : "");
    flux_free(ctx);
    return r;
}

static void run_free(vk_run *r) {
    fx_npy_free(&r->latents);
    flux_image_free(r->img);
    memset(r, 0, sizeof *r);
}

/* The device run against the CPU run of the same model, quant and adapter. */
static void device_matches_cpu(const char *dir, const char *quant, const char *lora, double tol, const char *tag) {
    if (!vkt_device_ready()) return;
    char tc[64], tv[64];
    snprintf(tc, sizeof tc, "%s-cpu", tag), snprintf(tv, sizeof tv, "%s-vk", tag);
    vk_run cpu = run_on(FLUX_BACKEND_CPU, dir, quant, lora, tc);
    vk_run dev = run_on(FLUX_BACKEND_VULKAN, dir, quant, lora, tv);
    unsetenv("FLUX_VK_VALIDATION");
    if (cpu.ok && dev.ok) {
        REQUIRE(cpu.latents.count == dev.latents.count);
        double e = fx_test_rel_err(dev.latents.data, cpu.latents.data, cpu.latents.count);
        int px = fx_test_max_pixel_diff(dev.img, cpu.img);
        printf("    %s: device vs CPU latents rel %.2e (tol %.0e), max pixel |Δ| %d\n", tag, e, tol, px);
        CHECK_MSG(e <= tol, "%s: latents differ by %.3e relative", tag, e);
        CHECK_MSG(px <= 1, "%s: pixels differ by %d", tag, px);
    }
    run_free(&cpu), run_free(&dev);
}

TEST(vk_model_q8_0_matches_cpu) {
    const char *dir = model256();
    if (dir) device_matches_cpu(dir, "q8_0", NULL, FX_GCASE_TOL_F32, "q8_0");
}

TEST(vk_model_q4_k_matches_cpu) {
    const char *dir = model256();
    if (dir) device_matches_cpu(dir, "q4_k", NULL, FX_GCASE_TOL_F32, "q4_k");
}

/* gen_lora with `args` on dir into <tmp>/<name>.safetensors (static
 * buffer), or NULL after a failure. */
static const char *gen_lora(const char *dir, const char *name, const char *args) {
    static char path[PATH_MAX];
    char all[4 * PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.safetensors", fx_test_tmpdir(), name);
    snprintf(all, sizeof all, "-d '%s' -o '%s' %s", dir, path, args);
    return FX_TEST_RUN_TOOL("gen_lora", all) ? NULL : path;
}

#define LORA_TOL 1e-5

TEST(vk_lora_lowrank_matches_cpu) {
    const char *dir = model256();
    const char *lora = dir ? gen_lora(dir, "vk-lowrank", "--format bfl --rank 4 --seed 31 --strength 0.7") : NULL;
    CHECK(lora != NULL);
    if (!lora) return;
    device_matches_cpu(dir, NULL, lora, LORA_TOL, "lora-lowrank");
    /* the adapter changes the result far beyond that tolerance */
    vk_run with = run_on(FLUX_BACKEND_VULKAN, dir, NULL, lora, "lora-effect-with");
    vk_run without = run_on(FLUX_BACKEND_VULKAN, dir, NULL, NULL, "lora-effect-without");
    unsetenv("FLUX_VK_VALIDATION");
    if (with.ok && without.ok) {
        double effect = fx_test_rel_err(with.latents.data, without.latents.data, with.latents.count);
        printf("    effect of the adapter on the device: %.2e\n", effect);
        CHECK_MSG(effect > 100 * LORA_TOL, "the adapter changed the latents by only %.3e", effect);
    }
    run_free(&with), run_free(&without);
}

/* A low-rank adapter on a quantized transformer: block weights and terms. */
TEST(vk_lora_on_q4_k_matches_cpu) {
    const char *dir = model256();
    const char *lora = dir ? gen_lora(dir, "vk-lowrank-q", "--format comfy --rank 8 --seed 5 --strength 0.9") : NULL;
    CHECK(lora != NULL);
    if (lora) device_matches_cpu(dir, "q4_k", lora, LORA_TOL, "lora-q4_k");
}

TEST(vk_lora_dense_matches_cpu) {
    const char *dir = model256();
    const char *lora = dir ? gen_lora(dir, "vk-diff", "--format diff --seed 11 --strength 0.5") : NULL;
    CHECK(lora != NULL);
    if (lora) device_matches_cpu(dir, NULL, lora, LORA_TOL, "lora-dense");
}
