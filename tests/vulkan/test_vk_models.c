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
 *   - a LoKr (Kronecker) adapter beside a low-rank one, then the low-rank
 *     one rescaled and the LoKr removed between two images: both images
 *     within 1e-5 of the CPU's, the second bit for bit a fresh context's;
 *   - fp8 transformer files (E4M3, E5M2; tools/make_single_file), decoded in
 *     the device's GEMM: within the golden f32 tolerance of the CPU run of
 *     the same file; with a low-rank LoRA on top: within 1e-5.
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

/* An f32 context on the CPU or the Vulkan device with dir loaded (--quant
 * quant, NULL: none; the transformer from the single file `transformer`,
 * NULL: dir's) and a LoRA at scale 1 (NULL: none); NULL after a failure. */
static flux_ctx *open_model_file(flux_backend backend, const char *dir, const char *transformer, const char *quant,
                                 const char *lora, const char *tag) {
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
    lo.transformer_file = transformer;
    if (!ctx || flux_load(ctx, dir, &lo) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "flux_load (%s): %s", tag, flux_error(ctx));
        flux_free(ctx);
        return NULL;
    }
    if (lora && flux_lora_load(ctx, lora, 1.0f) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "flux_lora_load (%s): %s", tag, flux_error(ctx));
        flux_free(ctx);
        return NULL;
    }
    if (backend == FLUX_BACKEND_VULKAN)
        CHECK_MSG(!strncmp(flux_backend_name(ctx), "vulkan", 6), "%s runs on %s", tag, flux_backend_name(ctx));
    return ctx;
}

static flux_ctx *open_model(flux_backend backend, const char *dir, const char *quant, const char *lora,
                            const char *tag) {
    return open_model_file(backend, dir, NULL, quant, lora, tag);
}

/* One f32 generation ("a small red boat", 32×32, 1 step, seed 7) on ctx;
 * tag names the dump folder. */
static vk_run generate(flux_ctx *ctx, const char *tag) {
    vk_run r = {0};
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
    return r;
}

/* Fails on validation errors, then frees ctx. */
static void close_model(flux_ctx *ctx, const char *tag) {
    if (!ctx) return;
    const char *first = NULL;
    int nerr = ctx->ops ? fx_ops_device_errors(ctx->ops, &first) : 0;
    CHECK_MSG(nerr == 0, "%s: %d validation error(s), first: %s", tag, nerr, first ? first : "");
    flux_free(ctx);
}

static vk_run run_file_on(flux_backend backend, const char *dir, const char *transformer, const char *quant,
                          const char *lora, const char *tag) {
    flux_ctx *ctx = open_model_file(backend, dir, transformer, quant, lora, tag);
    vk_run r = ctx ? generate(ctx, tag) : (vk_run){0};
    close_model(ctx, tag);
    return r;
}

static vk_run run_on(flux_backend backend, const char *dir, const char *quant, const char *lora, const char *tag) {
    return run_file_on(backend, dir, NULL, quant, lora, tag);
}

static void run_free(vk_run *r) {
    fx_npy_free(&r->latents);
    flux_image_free(r->img);
    memset(r, 0, sizeof *r);
}

/* The device run against the CPU run of the same model (transformer file:
 * NULL for dir's), quant and adapter. */
static void device_matches_cpu_file(const char *dir, const char *transformer, const char *quant, const char *lora,
                                    double tol, const char *tag) {
    if (!vkt_device_ready()) return;
    char tc[64], tv[64];
    snprintf(tc, sizeof tc, "%s-cpu", tag), snprintf(tv, sizeof tv, "%s-vk", tag);
    vk_run cpu = run_file_on(FLUX_BACKEND_CPU, dir, transformer, quant, lora, tc);
    vk_run dev = run_file_on(FLUX_BACKEND_VULKAN, dir, transformer, quant, lora, tv);
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

static void device_matches_cpu(const char *dir, const char *quant, const char *lora, double tol, const char *tag) {
    device_matches_cpu_file(dir, NULL, quant, lora, tol, tag);
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

/* Two runs' latents within tol (relative) and pixels within 1. */
static void check_runs(const vk_run *got, const vk_run *want, double tol, const char *what) {
    if (!got->ok || !want->ok) return;
    REQUIRE(got->latents.count == want->latents.count);
    double e = fx_test_rel_err(got->latents.data, want->latents.data, want->latents.count);
    int px = fx_test_max_pixel_diff(got->img, want->img);
    printf("    %s: latents rel %.2e (tol %.0e), max pixel |Δ| %d\n", what, e, tol, px);
    CHECK_MSG(e <= tol, "%s: latents differ by %.3e relative", what, e);
    CHECK_MSG(px <= 1, "%s: pixels differ by %d", what, px);
}

/* LoKr terms on the device, and adapters changing between two images with
 * the factors resident: a context with a low-rank and a LoKr adapter (W2
 * factored) makes image 1; the low-rank one rescaled to 0.4 and the LoKr
 * removed, image 2. Each within LORA_TOL of the CPU doing the same, and
 * image 2 bit for bit the image of a fresh device context with only the
 * low-rank adapter at 0.4 (no stale factor or gate survives a change). */
TEST(vk_lora_lokr_and_changes_match_cpu) {
    const char *dir = model256();
    char lowrank[PATH_MAX], lokr[PATH_MAX];
    const char *p1 = dir ? gen_lora(dir, "vk-change-lowrank", "--format bfl --rank 4 --seed 31 --strength 0.7") : NULL;
    if (p1) snprintf(lowrank, sizeof lowrank, "%s", p1);
    const char *p2 = p1 ? gen_lora(dir, "vk-change-lokr", "--format lokr --rank 4 --seed 9 --strength 0.7") : NULL;
    if (p2) snprintf(lokr, sizeof lokr, "%s", p2);
    CHECK(p1 && p2);
    if (!p1 || !p2 || !vkt_device_ready()) return;
    vk_run img1[2], img2[2]; /* [CPU, device] */
    memset(img1, 0, sizeof img1), memset(img2, 0, sizeof img2);
    const flux_backend be[2] = {FLUX_BACKEND_CPU, FLUX_BACKEND_VULKAN};
    for (int i = 0; i < 2; i++) {
        const char *tag = i ? "change-vk" : "change-cpu";
        flux_ctx *ctx = open_model(be[i], dir, NULL, lowrank, tag);
        if (!ctx) continue;
        CHECK_MSG(flux_lora_load(ctx, lokr, 1.0f) == FLUX_OK, "flux_lora_load: %s", flux_error(ctx));
        img1[i] = generate(ctx, i ? "change-vk-1" : "change-cpu-1");
        CHECK_MSG(flux_lora_set_scale(ctx, 0, 0.4f) == FLUX_OK && flux_lora_remove(ctx, 1) == FLUX_OK, "%s",
                  flux_error(ctx));
        img2[i] = generate(ctx, i ? "change-vk-2" : "change-cpu-2");
        close_model(ctx, tag);
    }
    flux_ctx *ctx = open_model(FLUX_BACKEND_VULKAN, dir, NULL, NULL, "fresh-vk");
    vk_run fresh = {0};
    if (ctx) {
        CHECK_MSG(flux_lora_load(ctx, lowrank, 0.4f) == FLUX_OK, "flux_lora_load: %s", flux_error(ctx));
        fresh = generate(ctx, "fresh-vk");
        close_model(ctx, "fresh-vk");
    }
    unsetenv("FLUX_VK_VALIDATION");
    check_runs(&img1[1], &img1[0], LORA_TOL, "low-rank + LoKr: device vs CPU");
    check_runs(&img2[1], &img2[0], LORA_TOL, "rescaled, LoKr removed: device vs CPU");
    if (img2[1].ok && fresh.ok) {
        REQUIRE(fresh.latents.count == img2[1].latents.count);
        CHECK_MSG(!memcmp(fresh.latents.data, img2[1].latents.data, fresh.latents.count * sizeof(float)),
                  "after the changes the device's latents differ from a fresh context's");
        double effect = fx_test_rel_err(img1[1].latents.data, img2[1].latents.data, fresh.latents.count);
        printf("    effect of the change on the device: %.2e\n", effect);
        CHECK_MSG(effect > 100 * LORA_TOL, "the change moved the latents by only %.3e", effect);
    }
    for (int i = 0; i < 2; i++) run_free(&img1[i]), run_free(&img2[i]);
    run_free(&fresh);
}

/* make_single_file of dir's transformer as an fp8 file (`flags`) into
 * <tmp>/<name>.safetensors (static buffer), or NULL after a failure. */
static const char *fp8_file(const char *dir, const char *layout, const char *flags, const char *name) {
    static char path[PATH_MAX];
    char all[4 * PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.safetensors", fx_test_tmpdir(), name);
    snprintf(all, sizeof all, "--layout %s -d '%s' -o '%s' %s", layout, dir, path, flags);
    return FX_TEST_RUN_TOOL("make_single_file", all) ? NULL : path;
}

/* fp8 transformer files (README "fp8 checkpoints"): ComfyUI E4M3 with the
 * scaled-fp8 keys and diffusers E5M2 with '.weight_scale', each on the
 * device (bytes decoded in the GEMM) within the golden f32 tolerance of the
 * CPU run of the same file. */
TEST(vk_model_fp8_matches_cpu) {
    static const struct {
        const char *layout, *flags, *tag;
    } files[2] = {{"comfyui", "--fp8 e4m3 --fp8-legacy", "fp8-e4m3"}, {"diffusers", "--fp8 e5m2", "fp8-e5m2"}};
    const char *dir = model256();
    for (int f = 0; f < 2 && dir; f++) {
        char file[PATH_MAX];
        const char *p = fp8_file(dir, files[f].layout, files[f].flags, files[f].tag);
        CHECK(p != NULL);
        if (!p) continue;
        snprintf(file, sizeof file, "%s", p);
        device_matches_cpu_file(dir, file, NULL, NULL, FX_GCASE_TOL_F32, files[f].tag);
    }
}

/* The d = 256 model's transformer as an fp8 file (`flags`, into file
 * [PATH_MAX]) and an adapter for it (gen_lora `args`, static buffer), or
 * NULL after a failure. */
static const char *fp8_with_adapter(const char *flags, const char *tag, const char *lora_args, char *file) {
    const char *dir = model256();
    char name[64];
    snprintf(name, sizeof name, "%s-base", tag);
    const char *p = dir ? fp8_file(dir, "comfyui", flags, name) : NULL;
    if (p) snprintf(file, PATH_MAX, "%s", p);
    const char *lora = p ? gen_lora(dir, tag, lora_args) : NULL;
    CHECK(p && lora);
    return lora;
}

/* A low-rank adapter on an fp8 transformer: fp8 weights and terms. */
TEST(vk_lora_on_fp8_matches_cpu) {
    char file[PATH_MAX];
    const char *lora = fp8_with_adapter("--fp8 e4m3", "vk-lowrank-fp8", "--format bfl --rank 4 --seed 23 --strength 0.8",
                                        file);
    if (lora) device_matches_cpu_file(model256(), file, NULL, lora, LORA_TOL, "lora-fp8");
}

/* DoRA stays on the CPU (any weight type): on an fp8 transformer the device
 * refuses it by name at the first adapted layer, never a result without it. */
TEST(vk_dora_on_fp8_is_refused_by_name) {
    char file[PATH_MAX];
    const char *dora = fp8_with_adapter("--fp8 e5m2", "vk-dora-fp8", "--format bfl --rank 4 --seed 5 --dora out", file);
    if (!dora || !vkt_device_ready()) return;
    flux_ctx *ctx = open_model_file(FLUX_BACKEND_VULKAN, model256(), file, NULL, dora, "dora-fp8-vk");
    if (ctx) {
        flux_params prm;
        flux_params_init(&prm);
        prm.prompt = "a small red boat";
        prm.width = prm.height = 32;
        prm.steps = 1, prm.seed = 7;
        flux_image *img = NULL;
        CHECK_EQ_INT(flux_generate(ctx, &prm, &img), FLUX_ERR_UNSUPPORTED);
        CHECK_MSG(img == NULL && strstr(flux_error(ctx), "DoRA") && strstr(flux_error(ctx), "Vulkan"), "error: %s",
                  flux_error(ctx));
        flux_image_free(img);
        close_model(ctx, "dora-fp8-vk");
    }
    unsetenv("FLUX_VK_VALIDATION");
}
