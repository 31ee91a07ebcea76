/*
 * test_vk_pipeline.c — whole generations with --backend vulkan: the golden
 * cases end to end (text encoder and transformer on the device, the VAE on
 * the CPU) against their goldens with the CPU path's tolerances
 * (golden_case.h), validation-layer clean; and the backend choice under
 * bad conditions (no driver with --backend vulkan: exit 1, one message, no
 * output file; auto with only a CPU Vulkan device: the CPU and one -v line).
 */
#include "vk_test.h"

#include "src/model/ctx.h"
#include "src/ops/ops.h"
#include "tests/golden_case.h"
#include "tests/model/vae_cases.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void golden_on_device(const char *name, flux_precision prec) {
    if (!vkt_device_ready()) return;
    fx_gcase_set_backend(FLUX_BACKEND_VULKAN);
    fx_gcase_check(name, prec);
    fx_gcase_set_backend(FLUX_BACKEND_CPU);
    unsetenv("FLUX_VK_VALIDATION");
}

TEST(vk_golden_t2i_f32) { golden_on_device("t2i-32x32-4step", FLUX_PRECISION_F32); }
TEST(vk_golden_t2i_default) { golden_on_device("t2i-48x64-2step", FLUX_PRECISION_DEFAULT); }
/* CFG: conditional and unconditional sequences batched in one transformer run */
TEST(vk_golden_base_cfg_f32) { golden_on_device("base-cfg-48x48-3step", FLUX_PRECISION_F32); }
/* reference images: their tokens projected once, on the device */
TEST(vk_golden_multiref_f32) { golden_on_device("multiref-48x48-2step", FLUX_PRECISION_F32); }

/* inpainting (issue 31): init image as x0 and reference 0, a further
 * reference, the token mask and the blend after every step (host arithmetic
 * on the latents) with the transformer on the device, f32, against the
 * float64 golden ours-inpaint-ref-48x64-4step (tools/reference/inpaint.py) */
TEST(vk_golden_inpaint_f32) {
    if (!vkt_device_ready()) return;
    fx_gcase_set_backend(FLUX_BACKEND_VULKAN);
    flux_ctx *ctx = fx_gcase_ctx(fx_test_path("golden/model"), 2, FLUX_PRECISION_F32);
    fx_gcase_set_backend(FLUX_BACKEND_CPU);
    REQUIRE(ctx);
    char dir[1100], p[1300];
    snprintf(dir, sizeof dir, "%s", fx_test_path("golden/ours-inpaint-ref-48x64-4step"));
    fx_npy emb, noise;
    REQUIRE(fx_gcase_npy_file(fx_test_path("golden/multiref-48x48-2step/out/emb.npy"), &emb));
    REQUIRE(fx_gcase_npy(dir, "noise.npy", &noise));
    flux_image *img[3] = {0}, *out = NULL;
    static const char *const files[3] = {"init.png", "mask.png", "ref1.png"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        REQUIRE_MSG(flux_image_load(ctx, p, &img[i]) == FLUX_OK, "%s", flux_error(ctx));
    }
    flux_params pa;
    flux_params_init(&pa);
    pa.embeddings = emb.data;
    pa.noise = noise.data;
    pa.steps = 4;
    pa.seed = 1;
    pa.init_image = img[0];
    pa.mask = img[1];
    pa.refs = (const flux_image *const *)&img[2];
    pa.n_refs = 1;
    pa.strength = 0.75;
    pa.dump_dir = fx_test_tmpdir();
    CHECK_MSG(flux_generate(ctx, &pa, &out) == FLUX_OK, "%s", flux_error(ctx));
    static const char *const pairs[][2] = {{"ref0_latents.npy", "out/ref0_latents.npy"},
                                           {"ref1_latents.npy", "out/ref1_latents.npy"},
                                           {"mask.npy", "out/mask.npy"},
                                           {"start_latents.npy", "out/start_latents.npy"},
                                           {"velocity_003.npy", "out/steps/step03_v.npy"},
                                           {"latents.npy", "out/latents.npy"},
                                           {"decoded.npy", "out/image.npy"}};
    for (size_t i = 0; out && i < sizeof pairs / sizeof *pairs; i++) {
        double e = fx_gcase_compare(fx_test_tmpdir(), pairs[i][0], dir, pairs[i][1]);
        CHECK_MSG(e <= FX_GCASE_TOL_F32, "%s error %.3g", pairs[i][0], e);
    }
    flux_image_free(out);
    for (int i = 0; i < 3; i++) flux_image_free(img[i]);
    fx_npy_free(&emb), fx_npy_free(&noise);
    flux_free(ctx);
    unsetenv("FLUX_VK_VALIDATION");
}

/* ------------------------------------------------------------------------ */
/* Bad conditions                                                           */
/* ------------------------------------------------------------------------ */

static int run_flux(const char *env, const char *args, char **out) {
    char cmd[16896];
    snprintf(cmd, sizeof cmd, "%s '%s' %s </dev/null", env, fx_test_flux_bin(), args);
    return fx_test_run(cmd, out);
}

TEST(vk_backend_vulkan_without_driver_exits_1) {
    char args[8192], model[1024], emb[1024], noise[1024], png[1024], *out = NULL;
    snprintf(model, sizeof model, "%s", fx_test_path("golden/model"));
    snprintf(emb, sizeof emb, "%s", fx_test_path("golden/t2i-32x32-4step/out/emb.npy"));
    snprintf(noise, sizeof noise, "%s", fx_test_path("golden/t2i-32x32-4step/noise.npy"));
    snprintf(png, sizeof png, "%s", fx_test_tmp_path("vk-no-driver.png"));
    unlink(png);
    snprintf(args, sizeof args, "--backend vulkan -d '%s' --embeddings '%s' --noise '%s' -s 1 -o '%s'", model, emb,
             noise, png);
    int rc = run_flux("VK_DRIVER_FILES=/nonexistent/icd.json VK_ICD_FILENAMES=/nonexistent/icd.json", args, &out);
    CHECK_EQ_INT(rc, 1);
    CHECK_MSG(out && strstr(out, "--backend vulkan") && strstr(out, "Vulkan"), "output: %s", out ? out : "");
    int lines = 0;
    for (const char *s = out; s && *s; s++) lines += *s == '\n';
    CHECK_MSG(lines == 1 && !strncmp(out, "flux: ", 6), "want one 'flux: ' line, got: %s", out);
    CHECK_MSG(access(png, F_OK) != 0, "%s was written", png);
    free(out);
    /* --device past the devices: the same kind of error */
    snprintf(args, sizeof args, "--backend vulkan --device 255 -d '%s' --tokenize -p hi", model);
    rc = run_flux("", args, &out);
    CHECK_EQ_INT(rc, 1);
    free(out);
    /* a bad value is a command-line error (exit 2), before any device is opened */
    CHECK_EQ_INT(run_flux("", "--backend gpu --cpu-info", &out), 2);
    free(out);
    CHECK_EQ_INT(run_flux("", "--backend cpu --device 0 --cpu-info", &out), 2);
    free(out);
}

TEST(vk_backend_auto_skips_cpu_devices) {
    enum { MAXDEV = 16 };
    fx_device_desc d[MAXDEV];
    int n = 0, gpus = 0;
    fx_err err = {0};
    if (fx_ops_list_devices(d, MAXDEV, &n, &err) != FLUX_OK || n == 0) {
        char reason[FX_ERR_MSG_MAX + 32];
        snprintf(reason, sizeof reason, "no Vulkan device: %s", n ? err.msg : "none listed");
        SKIP(reason);
    }
    for (int i = 0; i < n && i < MAXDEV; i++) gpus += strcmp(d[i].type, "CPU") != 0;
    flux_options o;
    flux_options_init(&o);
    CHECK_EQ_INT(o.backend, FLUX_BACKEND_AUTO);
    flux_ctx *ctx = flux_new(&o);
    CHECK(ctx != NULL);
    if (!ctx) return;
    const char *name = flux_backend_name(ctx);
    printf("    %d device(s), %d GPU(s): auto runs on %s\n", n, gpus, name);
    if (gpus) CHECK_MSG(!strncmp(name, "vulkan", 6), "auto with a GPU runs on %s", name);
    else CHECK_MSG(!strcmp(name, "cpu"), "auto with only CPU devices runs on %s", name);
    CHECK_MSG(flux_error(ctx)[0] == '\0', "auto left an error: %s", flux_error(ctx));
    flux_free(ctx);
    if (gpus) return;
    /* the CLI says why in exactly one -v line */
    char args[2048], *out = NULL;
    snprintf(args, sizeof args, "-v -d '%s' --tokenize -p hi 2>&1 >/dev/null", fx_test_path("golden/model"));
    CHECK_EQ_INT(run_flux("", args, &out), 0);
    int hits = 0;
    for (const char *s = out; s && (s = strstr(s, "backend")); s++) hits++;
    CHECK_MSG(out && strstr(out, "backend auto: running on the CPU") && hits == 1, "-v output: %s", out ? out : "");
    free(out);
    /* and --list-devices names every device with its type and driver */
    CHECK_EQ_INT(run_flux("", "--list-devices", &out), 0);
    for (int i = 0; i < n && i < MAXDEV; i++)
        CHECK_MSG(out && strstr(out, d[i].name) && strstr(out, d[i].driver), "--list-devices: %s", out ? out : "");
    free(out);
}

/* ------------------------------------------------------------------------ */
/* The VAE on the device (whole tensors), stage by stage against goldens    */
/* ------------------------------------------------------------------------ */

TEST(vk_vae_decode_golden_f32) {
    if (!vkt_device_ready()) return;
    fx_gcase_set_backend(FLUX_BACKEND_VULKAN);
    fx_vae_whole_decode_check();
    fx_gcase_set_backend(FLUX_BACKEND_CPU);
    unsetenv("FLUX_VK_VALIDATION");
}

TEST(vk_vae_encode_golden_f32) {
    if (!vkt_device_ready()) return;
    fx_gcase_set_backend(FLUX_BACKEND_VULKAN);
    fx_vae_whole_encode_check();
    fx_gcase_set_backend(FLUX_BACKEND_CPU);
    unsetenv("FLUX_VK_VALIDATION");
}

/* A Vulkan context on t2i-32x32-4step with its embeddings and noise in p
 * (steps as given); NULL after a skip or a failure. */
static flux_ctx *device_case(fx_npy *emb, fx_npy *noise, int steps, flux_params *p) {
    if (!vkt_device_ready()) return NULL;
    fx_gcase_set_backend(FLUX_BACKEND_VULKAN);
    fx_gcase c;
    flux_ctx *ctx = fx_gcase_ctx_emb("t2i-32x32-4step", 2, FLUX_PRECISION_F32, &c, emb);
    fx_gcase_set_backend(FLUX_BACKEND_CPU);
    unsetenv("FLUX_VK_VALIDATION");
    if (ctx && !fx_gcase_npy(c.dir, "noise.npy", noise)) {
        flux_free(ctx);
        return NULL;
    }
    if (!ctx) return NULL;
    flux_params_init(p);
    p->embeddings = emb->data;
    p->noise = noise->data;
    p->height = (int)noise->shape[1] * 16, p->width = (int)noise->shape[2] * 16;
    p->steps = steps, p->seed = 1;
    return ctx;
}

/* A device lost in the middle of a generation: an error naming it, no
 * image, and the context keeps failing (it never computes on a dead device). */
TEST(vk_device_lost_fails_the_generation) {
    fx_npy emb = {0}, noise = {0};
    flux_params p;
    flux_ctx *ctx = device_case(&emb, &noise, 2, &p);
    if (!ctx) {
        fx_npy_free(&emb);
        return;
    }
    flux_image *img = NULL;
    fx_ops_inject_device_lost(ctx->ops);
    CHECK(flux_generate(ctx, &p, &img) != FLUX_OK);
    CHECK(img == NULL);
    CHECK_MSG(strstr(flux_error(ctx), "device lost") != NULL, "error: %s", flux_error(ctx));
    CHECK(flux_generate(ctx, &p, &img) != FLUX_OK);
    CHECK(img == NULL);
    flux_image_free(img);
    fx_npy_free(&emb), fx_npy_free(&noise);
    flux_free(ctx);
}
