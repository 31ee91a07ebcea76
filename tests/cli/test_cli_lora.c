/*
 * test_cli_lora.c — LoRA adapters on the command line (--lora FILE[:SCALE])
 * and in interactive mode (!lora FILE [SCALE], !lora off, !loras): parsing,
 * errors (one "flux: " line, exit 2 for the command line, 1 for a file the
 * library refuses, no output file), the PNG metadata, and a session that
 * adds, rescales and removes an adapter without reloading the model (scale
 * 0 and "off" give the pixels of the model without adapters). The !lora
 * lines themselves are parsed in test_repl.c.
 */
#include "tests/test.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/app/app_args.c" /* cli_parse, not in libflux */
#include "src/formats/safetensors_write.h"

static char g_model[PATH_MAX];

static const char *model(void) {
    if (!g_model[0]) snprintf(g_model, sizeof g_model, "%s", fx_test_path("golden/model"));
    return g_model;
}

/* A BFL-named adapter for the tiny model (rank 2) at <tmp>/<name>.safetensors. */
static const char *make_lora(const char *name) {
    static char paths[4][PATH_MAX];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, PATH_MAX, "%s/%s.safetensors", fx_test_tmpdir(), name);
    char args[3 * PATH_MAX];
    snprintf(args, sizeof args, "-d '%s' -o '%s' --format bfl --rank 2 --seed 3", model(), path);
    return FX_TEST_RUN_TOOL("gen_lora", args) ? NULL : path;
}

/* Run flux with args and stdin from `input` (NULL = /dev/null) in the
 * test's folder; stdout in *out, stderr in *err. */
static int run(const char *args, const char *input, char **out, char **err) {
    char in_path[PATH_MAX + 16], err_path[PATH_MAX + 16], cmd[16384], bin[PATH_MAX];
    snprintf(in_path, sizeof in_path, "%s/stdin.txt", fx_test_tmpdir());
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", fx_test_tmpdir());
    fx_test_write_file(in_path, input ? input : "", input ? strlen(input) : 0);
    if (!realpath(fx_test_flux_bin(), bin)) snprintf(bin, sizeof bin, "%s", fx_test_flux_bin());
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s <'%s' 2>'%s'", fx_test_tmpdir(), bin, args, in_path, err_path);
    int rc = fx_test_run(cmd, out);
    *err = fx_test_read_file(err_path, NULL);
    if (!*err) *err = strdup("");
    return rc;
}

/* A failing run: exit `code`, exactly one "flux: " line containing fragment. */
static void expect_fail(int line, const char *args, int code, const char *fragment) {
    char *out = NULL, *err = NULL;
    int rc = run(args, NULL, &out, &err);
    int lines = 0;
    for (const char *p = err; *p; p++) lines += *p == '\n';
    if (rc != code || !strstr(err, fragment) || lines != 1 || strncmp(err, "flux: ", 6))
        fx_test_fail(__FILE__, line, "flux %s: exit %d (want %d), stderr: %s", args, rc, code, err);
    free(out), free(err);
}

/* ------------------------------------------------------------------------ */
/* Parsing                                                                  */
/* ------------------------------------------------------------------------ */

TEST(cli_lora_option_parsing) {
    const char *f = fx_test_tmp_path("style.safetensors");
    REQUIRE(fx_test_write_file(f, "x", 1) == 0);
    char arg[PATH_MAX + 16], colon_dir[PATH_MAX], colon_file[PATH_MAX + 32];
    snprintf(colon_dir, sizeof colon_dir, "%s/a:b", fx_test_tmpdir());
    REQUIRE(mkdir(colon_dir, 0777) == 0);
    snprintf(colon_file, sizeof colon_file, "%s/x.safetensors", colon_dir);
    REQUIRE(fx_test_write_file(colon_file, "x", 1) == 0);
    char *argv[16], msg[512];
    cli_args a;
    int argc = 0;
    argv[argc++] = "flux", argv[argc++] = "-d", argv[argc++] = (char *)model();
    argv[argc++] = "--lora", argv[argc++] = (char *)f;
    snprintf(arg, sizeof arg, "%s:0.5", f);
    argv[argc++] = "--lora", argv[argc++] = arg;
    argv[argc++] = "--lora", argv[argc++] = colon_file; /* ':' in the path, no scale */
    char neg[PATH_MAX + 16];
    snprintf(neg, sizeof neg, "--lora=%s:-1.25", f);
    argv[argc++] = neg;
    REQUIRE_MSG(cli_parse(argc, argv, &a, msg, sizeof msg) == CLI_EXIT_OK, "%s", msg);
    CHECK_EQ_INT(a.n_loras, 4);
    CHECK(!strcmp(a.lora_file[0], f) && a.lora_scale[0] == 1.0f);
    CHECK(!strcmp(a.lora_file[1], f) && a.lora_scale[1] == 0.5f);
    CHECK(!strcmp(a.lora_file[2], colon_file) && a.lora_scale[2] == 1.0f);
    CHECK(!strcmp(a.lora_file[3], f) && a.lora_scale[3] == -1.25f);

    char args[4 * PATH_MAX];
    snprintf(args, sizeof args, "-d '%s' --lora '%s:abc'", model(), f);
    expect_fail(__LINE__, args, 2, "--lora: 'abc' is not a scale");
    snprintf(args, sizeof args, "-d '%s' --lora '%s:1e3'", model(), f);
    expect_fail(__LINE__, args, 2, "--lora: scale 1e3 is out of range (-100..100)");
    snprintf(args, sizeof args, "-d '%s' --lora '%s:nan'", model(), f);
    expect_fail(__LINE__, args, 2, "is not a scale");
    snprintf(args, sizeof args, "-d '%s' --lora :0.5", model());
    expect_fail(__LINE__, args, 2, "--lora: no file before the scale");
    snprintf(args, sizeof args, "-d '%s' --lora '%s/none.safetensors:0.5'", model(), fx_test_tmpdir());
    expect_fail(__LINE__, args, 2, "--lora: cannot read");
    snprintf(args, sizeof args, "-d '%s' --lora '%s'", model(), fx_test_tmpdir());
    expect_fail(__LINE__, args, 2, "is a directory");
    snprintf(args, sizeof args, "-d '%s'", model());
    for (int i = 0; i <= CLI_MAX_LORAS; i++) snprintf(args + strlen(args), sizeof args - strlen(args), " --lora '%s'", f);
    expect_fail(__LINE__, args, 2, "--lora: too many adapters (at most 16)");
}

/* ------------------------------------------------------------------------ */
/* Runs                                                                     */
/* ------------------------------------------------------------------------ */

TEST(cli_lora_generate_and_errors) {
    const char *lora = make_lora("style");
    REQUIRE(lora);
    char noise[PATH_MAX], args[4 * PATH_MAX], *out = NULL, *err = NULL;
    snprintf(noise, sizeof noise, "%s", fx_test_path("golden/t2i-48x64-2step/noise.npy"));
    /* with the adapter at 0.5, at 0, and without */
    const char *outs[3] = {"with.png", "zero.png", "none.png"}, *opts[3] = {":0.5", ":0", NULL};
    for (int i = 0; i < 3; i++) {
        if (opts[i]) snprintf(args, sizeof args, "-d '%s' -p 'a cat' -S 4 -s 1 --noise '%s' -o %s --lora '%s%s'", model(), noise,
                              outs[i], lora, opts[i]);
        else snprintf(args, sizeof args, "-d '%s' -p 'a cat' -S 4 -s 1 --noise '%s' -o %s", model(), noise, outs[i]);
        int rc = run(args, NULL, &out, &err);
        CHECK_MSG(rc == 0, "flux %s: exit %d: %s", args, rc, err);
        if (opts[i]) CHECK_MSG(strstr(err, i == 1 ? "flux: lora style: scale 0, 29 modules (LoRA, BFL names)"
                                                          : "flux: lora style: scale 0.5, 29 modules (LoRA, BFL names)"),
                               "stderr: %s", err);
        free(out), free(err);
    }
    flux_ctx *ctx = flux_new(NULL);
    flux_image *img[3] = {0};
    for (int i = 0; i < 3; i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/%s", fx_test_tmpdir(), outs[i]);
        CHECK_MSG(flux_image_load(ctx, path, &img[i]) == FLUX_OK, "%s", flux_error(ctx));
    }
    if (img[0] && img[1] && img[2]) {
        CHECK(!strncmp(flux_image_get_text(img[0], "parameters"), "a cat <lora:style:0.5>\nSteps: 1,", 32));
        CHECK(!strcmp(flux_image_get_text(img[0], "loras"), "style:0.5"));
        CHECK(!flux_image_get_text(img[1], "loras") && !strncmp(flux_image_get_text(img[1], "parameters"), "a cat\n", 6));
        CHECK_MSG(fx_test_same_pixels(img[1], img[2]), "--lora FILE:0 changed the image");
        CHECK_MSG(!fx_test_same_pixels(img[0], img[2]), "--lora FILE:0.5 did not change the image");
    }
    for (int i = 0; i < 3; i++) flux_image_free(img[i]);
    flux_free(ctx);

    /* refused files: exit 1, the library's message, no output */
    const char *dora = fx_test_tmp_path("dora.safetensors");
    static float zeros[64 * 64];
    const fx_safetensors_out t[] = {{"diffusion_model.img_in.lora_A.weight", FX_DTYPE_F32, FX_SHAPE(2, 128), zeros},
                           {"diffusion_model.img_in.lora_B.weight", FX_DTYPE_F32, FX_SHAPE(64, 2), zeros},
                           {"diffusion_model.img_in.dora_scale", FX_DTYPE_F32, FX_SHAPE(1, 128), zeros}};
    fx_err e = {0};
    REQUIRE(fx_safetensors_write(dora, t, 3, NULL, 0, &e) == FLUX_OK);
    snprintf(args, sizeof args, "-d '%s' -p 'a cat' -o bad.png --lora '%s'", model(), dora);
    expect_fail(__LINE__, args, 1, "tensor 'diffusion_model.img_in.dora_scale' has shape [1, 128]: DoRA with norms per input");
    const char *rank = fx_test_tmp_path("rank.safetensors");
    const fx_safetensors_out r[] = {{"lora_unet_img_in.lora_down.weight", FX_DTYPE_F32, FX_SHAPE(2, 128), zeros},
                           {"lora_unet_img_in.lora_up.weight", FX_DTYPE_F32, FX_SHAPE(64, 3), zeros}};
    REQUIRE(fx_safetensors_write(rank, r, 2, NULL, 0, &e) == FLUX_OK);
    snprintf(args, sizeof args, "-d '%s' -p 'a cat' -o bad.png --lora '%s'", model(), rank);
    expect_fail(__LINE__, args, 1, "rank mismatch");
    CHECK(!fx_test_file_exists(fx_test_tmp_path("bad.png")));

    /* keys that match nothing: a warning, and the image */
    const char *partial = fx_test_tmp_path("partial.safetensors");
    const fx_safetensors_out p[] = {{"lora_unet_img_in.lora_down.weight", FX_DTYPE_F32, FX_SHAPE(2, 128), zeros},
                           {"lora_unet_img_in.lora_up.weight", FX_DTYPE_F32, FX_SHAPE(64, 2), zeros},
                           {"lora_unet_double_blocks_9_img_mlp_0.lora_up.weight", FX_DTYPE_F32, FX_SHAPE(64, 2), zeros}};
    REQUIRE(fx_safetensors_write(partial, p, 3, NULL, 0, &e) == FLUX_OK);
    snprintf(args, sizeof args, "-d '%s' -p 'a cat' -S 4 -s 1 --noise '%s' -o partial.png --lora '%s'", model(), noise,
             partial);
    CHECK_EQ_INT(run(args, NULL, &out, &err), 0);
    CHECK_MSG(strstr(err, "flux: warning: ") && strstr(err, "1 key matches no module of the transformer and is ignored: "
                                                              "'lora_unet_double_blocks_9_img_mlp_0.lora_up.weight'"),
              "stderr: %s", err);
    free(out), free(err);
}

TEST(cli_lora_interactive_switching) {
    const char *lora = make_lora("look");
    REQUIRE(lora);
    char args[2 * PATH_MAX], input[4 * PATH_MAX], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "-d '%s' -S 9 -s 1 -W 64 -H 64 -v", model());
    snprintf(input, sizeof input,
             "a cat\n"
             "!lora %s 0.8\n!loras\na cat\n"
             "!lora %s 0\na cat\n"
             "!lora %s -0.5\na cat\n"
             "!lora off\n!loras\na cat\n"
             "!lora %s/missing.safetensors\n",
             lora, lora, lora, fx_test_tmpdir());
    int rc = run(args, input, &out, &err);
    CHECK_EQ_INT(rc, 1); /* the last line failed */
    CHECK_MSG(strstr(out, "look  scale 0.8  29 modules (LoRA, BFL names)  ") && strstr(out, lora), "stdout: %s", out);
    CHECK_MSG(strstr(err, "flux: lora look: scale 0.8, 29 modules") && strstr(err, "flux: lora look: scale 0\n") &&
                  strstr(err, "flux: lora look: scale -0.5\n") && strstr(err, "flux: LoRA adapters off") &&
                  strstr(err, "flux: no LoRA adapters") && strstr(err, "missing.safetensors"),
              "stderr: %s", err);
    /* the model was loaded once; the adapter file once */
    const char *first = strstr(err, "loaded model");
    CHECK_MSG(first && !strstr(first + 1, "loaded model"), "stderr: %s", err);
    flux_ctx *ctx = flux_new(NULL);
    flux_image *img[5] = {0};
    int n = 0;
    for (const char *p = out; (p = strchr(p, '$')) && n < 5; p++) {
        char path[PATH_MAX];
        int h;
        if (sscanf(p, "$%d %4095s", &h, path) == 2 && h == n && flux_image_load(ctx, path, &img[n]) == FLUX_OK) n++;
    }
    CHECK_EQ_INT(n, 5);
    if (n == 5) {
        CHECK_MSG(!fx_test_same_pixels(img[1], img[0]), "the adapter at 0.8 changed nothing");
        CHECK_MSG(fx_test_same_pixels(img[2], img[0]), "the adapter at 0 changed the image");
        CHECK_MSG(!fx_test_same_pixels(img[3], img[0]) && !fx_test_same_pixels(img[3], img[1]), "-0.5 is not its own image");
        CHECK_MSG(fx_test_same_pixels(img[4], img[0]), "!lora off did not restore the model");
        CHECK(strstr(flux_image_get_text(img[1], "parameters"), "<lora:look:0.8>"));
        CHECK(!flux_image_get_text(img[4], "loras"));
    }
    for (int i = 0; i < 5; i++) flux_image_free(img[i]);
    flux_free(ctx);
    free(out), free(err);
}
