/*
 * test_fp8_quantize.c — `flux quantize --type fp8` / `fp8_e5m2` (ComfyUI's
 * fp8 safetensors convention, README "fp8 checkpoints") on the golden tiny
 * model:
 *   - every tensor of the source (the transformer in BFL names, written by
 *     tools/make_single_file's own mapping; the text encoder's Hugging Face
 *     tensors) is in the file under its name and shape; 1-D tensors F32, the
 *     transformer's img_in / txt_in / time_in / final_layer and the text
 *     encoder's embedding table BF16 with the source values, every other
 *     weight fp8 with one F32 '<layer>.weight_scale' = max|W| / fp8 max,
 *     and the weights as loaded (f32(code)·scale) equal scale·fp8(W / scale)
 *     bit for bit; nothing else is in the file;
 *   - a run on the fp8 files (f32 mode) matches the run on those files
 *     dequantized to F32 safetensors within 1e-5 (relative to max), the
 *     README's fp8 rule;
 *   - an independent reader (python3, json + struct, tests/pipeline/
 *     fp8_listing.py) parses the file: dtypes, shapes, offsets tiling the
 *     data, ComfyUI's _quantization_metadata, the scales against max|W| /
 *     448 computed from the source BF16;
 *   - bad types and outputs are refused by name; a full disk is named, a
 *     cancel reported; nothing is written in either case.
 */
#include "tests/test.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "simd/kernels.h"
#include "simd/quant/quant.h"
#include "src/formats/safetensors_write.h"
#include "src/formats/weight_set.h"
#include "tests/golden_case.h"

/* `flux quantize` of the golden model's component into tmpdir/<name>; path
 * (static, 4 rotating) or NULL after a failure. */
static const char *quantize(const char *component, const char *type, const char *name) {
    static char paths[4][PATH_MAX];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, PATH_MAX, "%s/%s", fx_test_tmpdir(), name);
    char cmd[4 * PATH_MAX], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' quantize -q -d '%s' --type %s --component %s -o '%s'", fx_test_flux_bin(),
             fx_test_path("golden/model"), type, component, path);
    int rc = fx_test_run(cmd, &out);
    if (rc) fx_test_fail(__FILE__, __LINE__, "%s: %s", cmd, out);
    free(out);
    return rc ? NULL : path;
}

/* The golden transformer with BFL names, as stored (BF16). */
static const char *bfl_reference(void) {
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/bfl.safetensors", fx_test_tmpdir());
    char args[3 * PATH_MAX];
    snprintf(args, sizeof args, "--layout bfl -d '%s' -o '%s'", fx_test_path("golden/model"), path);
    return FX_TEST_RUN_TOOL("make_single_file", args) ? NULL : path;
}

static const char *te_source(void) { return fx_test_path("golden/model/text_encoder/model.safetensors.index.json"); }

static fx_wset *open_file(const char *path) {
    fx_err err = {0};
    fx_wset *s = fx_wset_open(path, NULL, 1, &err);
    if (!s) fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
    return s;
}

static float *values(const fx_wset *s, const char *name, int64_t *n) {
    float *v = NULL;
    fx_err err = {0};
    if (fx_wset_f32(s, name, NULL, &v, n, &err)) fx_test_fail(__FILE__, __LINE__, "%s: %s", name, err.msg);
    return v;
}

static float decode(fx_dtype t, uint8_t c) { return t == FX_DTYPE_F8_E5M2 ? fx_f8_e5m2_to_f32(c) : fx_f8_e4m3_to_f32(c); }

/* The dtype the plan gives a source tensor (README "fp8 checkpoints"). */
static fx_dtype planned(const fx_tensor *t, fx_dtype fp8) {
    static const char *const bf16[] = {"img_in.", "txt_in.", "time_in.", "final_layer.", "model.embed_tokens."};
    if (t->shape.ndim == 1) return FX_DTYPE_F32;
    for (size_t i = 0; i < sizeof bf16 / sizeof *bf16; i++)
        if (!strncmp(t->name, bf16[i], strlen(bf16[i]))) return FX_DTYPE_BF16;
    return fp8;
}

/* The fp8 file q against its source set src (see the top). */
static void check_file(const char *what, const fx_wset *src, const fx_wset *q, fx_dtype fp8) {
    size_t n_fp8 = 0, bad = 0;
    for (size_t i = 0; i < fx_wset_count(src); i++) {
        const fx_tensor *s = fx_wset_tensor_at(src, i), *t = fx_wset_find(q, s->name);
        if (!t || !fx_shape_eq(&s->shape, &t->shape) || t->dtype != planned(s, fp8)) {
            fx_test_fail(__FILE__, __LINE__, "%s: '%s' %s, want %s of the source's shape", what, s->name,
                         t ? fx_dtype_name(t->dtype) : "missing", fx_dtype_name(planned(s, fp8)));
            continue;
        }
        int64_t n = 0, m = 0;
        float *w = values(src, s->name, &n), *got = values(q, s->name, &m);
        if (!w || !got || n != m) {
            free(w), free(got);
            continue;
        }
        if (t->dtype != fp8) {
            if (memcmp(w, got, (size_t)n * 4) && bad++ < 5)
                fx_test_fail(__FILE__, __LINE__, "%s: '%s' (%s) differs from the source", what, s->name,
                             fx_dtype_name(t->dtype));
        } else {
            n_fp8++;
            char sname[FX_ST_MAX_NAME];
            snprintf(sname, sizeof sname, "%.*s.weight_scale", (int)strlen(s->name) - 7, s->name);
            const fx_tensor *st = fx_wset_find(q, sname);
            float amax = 0.0f, scale = 0.0f;
            for (int64_t k = 0; k < n; k++) amax = fmaxf(amax, fabsf(w[k]));
            const float want_scale = amax > 0.0f ? amax / fx_fp8_max(fp8) : 1.0f;
            if (st && st->dtype == FX_DTYPE_F32 && st->shape.ndim == 0) memcpy(&scale, fx_tensor_data(st), 4);
            if (!st || memcmp(&scale, &want_scale, 4)) {
                fx_test_fail(__FILE__, __LINE__, "%s: '%s' is %a, want an F32 [] of max|W| / fp8 max = %a", what, sname,
                             scale, want_scale);
            } else {
                int64_t diff = 0;
                for (int64_t k = 0; k < n; k++) {
                    const float want = decode(fp8, fx_f32_to_fp8(fp8, w[k] / want_scale)) * want_scale;
                    diff += memcmp(&want, &got[k], 4) != 0;
                }
                if (diff && bad++ < 5)
                    fx_test_fail(__FILE__, __LINE__, "%s: '%s': %lld of %lld loaded values differ from scale·fp8(W / scale)",
                                 what, s->name, (long long)diff, (long long)n);
            }
        }
        free(w), free(got);
    }
    CHECK_MSG(n_fp8 > 0, "%s: no fp8 weight", what);
    CHECK_MSG(fx_wset_count(q) == fx_wset_count(src) + n_fp8, "%s: %zu tensors, want %zu (source + one scale per fp8)",
              what, fx_wset_count(q), fx_wset_count(src) + n_fp8);
}

TEST(fp8_quantize_writes_scaled_weights_in_comfyui_convention) {
    const char *ref = bfl_reference();
    REQUIRE(ref);
    static const struct {
        const char *type;
        fx_dtype t;
    } types[2] = {{"fp8", FX_DTYPE_F8_E4M3}, {"fp8_e5m2", FX_DTYPE_F8_E5M2}};
    for (int k = 0; k < 2; k++) {
        char name[64];
        snprintf(name, sizeof name, "t-%s.safetensors", types[k].type);
        const char *tq = quantize("transformer", types[k].type, name);
        snprintf(name, sizeof name, "te-%s.safetensors", types[k].type);
        const char *teq = quantize("text-encoder", types[k].type, name);
        REQUIRE(tq && teq);
        fx_wset *src = open_file(ref), *q = open_file(tq), *tsrc = open_file(te_source()), *teq_set = open_file(teq);
        if (src && q) check_file("transformer", src, q, types[k].t);
        if (tsrc && teq_set) check_file("text encoder", tsrc, teq_set, types[k].t);
        fx_wset_close(src), fx_wset_close(q), fx_wset_close(tsrc), fx_wset_close(teq_set);
    }
}

/* The file's tensors as F32 values under the same names, scales dropped:
 * the dequantized reference. 0 or -1. */
static int write_dequantized(const char *fp8_path, const char *out) {
    fx_wset *q = open_file(fp8_path);
    if (!q) return -1;
    const size_t n = fx_wset_count(q);
    fx_safetensors_out *t = calloc(n, sizeof *t);
    size_t k = 0;
    int rc = t ? 0 : -1;
    for (size_t i = 0; !rc && i < n; i++) {
        const fx_tensor *s = fx_wset_tensor_at(q, i);
        if (fx_wset_fp8_companion(s->name)) continue;
        int64_t m = 0;
        float *v = values(q, s->name, &m);
        if (!v) rc = -1;
        else t[k++] = (fx_safetensors_out){s->name, FX_DTYPE_F32, s->shape, v};
    }
    fx_err err = {0};
    if (!rc && fx_safetensors_write(out, t, k, NULL, 0, &err)) {
        fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
        rc = -1;
    }
    for (size_t i = 0; i < k; i++) free((void *)t[i].data);
    free(t);
    fx_wset_close(q);
    return rc;
}

/* One f32-mode run with the given files into dump folder <tag>; 0 or -1. */
static int run_dump(const char *transformer, const char *text_encoder, const char *tag) {
    char cmd[8 * PATH_MAX], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "'%s' -q -d '%s' --transformer '%s' --text-encoder '%s' -p 'a red fox in snow' -W 80 -H 64 -s 2 -S 11 "
             "--precision f32 --dump '%s/%s' -o '%s/%s.png'",
             fx_test_flux_bin(), fx_test_path("golden/model"), transformer, text_encoder, fx_test_tmpdir(), tag,
             fx_test_tmpdir(), tag);
    int rc = fx_test_run(cmd, &out);
    if (rc) fx_test_fail(__FILE__, __LINE__, "%s: %s", cmd, out);
    free(out);
    return rc ? -1 : 0;
}

TEST(fp8_quantize_run_matches_the_dequantized_files_run) {
    const char *p = quantize("transformer", "fp8", "run-t.safetensors");
    REQUIRE(p);
    char t[PATH_MAX], te[PATH_MAX], td[PATH_MAX], ted[PATH_MAX];
    snprintf(t, sizeof t, "%s", p);
    REQUIRE((p = quantize("text-encoder", "fp8_e5m2", "run-te.safetensors")));
    snprintf(te, sizeof te, "%s", p);
    snprintf(td, sizeof td, "%s/run-t-f32.safetensors", fx_test_tmpdir());
    snprintf(ted, sizeof ted, "%s/run-te-f32.safetensors", fx_test_tmpdir());
    REQUIRE(write_dequantized(t, td) == 0 && write_dequantized(te, ted) == 0);
    REQUIRE(run_dump(t, te, "fp8") == 0 && run_dump(td, ted, "deq") == 0);
    char a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof a, "%s/fp8", fx_test_tmpdir());
    snprintf(b, sizeof b, "%s/deq", fx_test_tmpdir());
    static const char *const arrays[] = {"text_embeddings.npy", "velocity_000.npy", "latents.npy"};
    for (int i = 0; i < 3; i++) {
        const double e = fx_gcase_compare(a, arrays[i], b, arrays[i]);
        printf("    %s: max |fp8 run - dequantized run| / max = %.3g\n", arrays[i], e);
        CHECK_MSG(e <= 1e-5, "%s: relative difference %.3g > 1e-5", arrays[i], e);
    }
}

TEST(fp8_quantize_file_parses_with_python) {
    char *out = NULL;
    if (fx_test_run("python3 -c 'import json, struct'", &out)) {
        free(out);
        SKIP("python3 not available");
    }
    free(out);
    const char *ref = bfl_reference();
    REQUIRE(ref);
    char r[PATH_MAX];
    snprintf(r, sizeof r, "%s", ref);
    static const char *const types[2] = {"fp8", "fp8_e5m2"};
    for (int k = 0; k < 2; k++) {
        char name[64];
        snprintf(name, sizeof name, "py-%s.safetensors", types[k]);
        const char *q = quantize("transformer", types[k], name);
        REQUIRE(q);
        char cmd[4 * PATH_MAX];
        snprintf(cmd, sizeof cmd, "python3 '%s' '%s' '%s'", fx_test_path("pipeline/fp8_listing.py"), q, r);
        int rc = fx_test_run(cmd, &out);
        printf("    %s: %s", types[k], out ? out : "\n");
        CHECK_MSG(rc == 0, "%s: the independent reader refused the file", types[k]);
        free(out);
        out = NULL;
    }
}

TEST(fp8_quantize_refuses_bad_requests) {
    static const struct {
        const char *args, *msg;
    } cases[] = {
        {"--type fp9 --component transformer -o x.safetensors", "'fp9' is not a quantization type"},
        {"--type fp8 --component transformer -o x.gguf", "does not end in .safetensors"},
        {"--type q8_0 --component transformer -o x.safetensors", "does not end in .gguf"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char cmd[4 * PATH_MAX], *out = NULL;
        snprintf(cmd, sizeof cmd, "cd '%s' && '%s' quantize -q -d '%s' %s", fx_test_tmpdir(), fx_test_flux_bin(),
                 fx_test_path("golden/model"), cases[i].args);
        int rc = fx_test_run(cmd, &out);
        CHECK_MSG(rc == 2 && out && strstr(out, cases[i].msg), "%s: exit %d, '%s'", cases[i].args, rc, out ? out : "");
        free(out);
    }
    /* the library API names the type too */
    flux_ctx *ctx = flux_new(NULL);
    REQUIRE(ctx);
    flux_quantize_options o;
    flux_quantize_options_init(&o);
    o.type = "f8_e8m0";
    o.component = "transformer";
    CHECK(flux_quantize(ctx, fx_test_path("golden/model"), &o, fx_test_tmp_path("api.safetensors")) ==
          FLUX_ERR_INVALID_ARG);
    CHECK_MSG(strstr(flux_error(ctx), "'f8_e8m0'") && strstr(flux_error(ctx), "fp8_e5m2"), "%s", flux_error(ctx));
    CHECK(!fx_test_file_exists(fx_test_tmp_path("api.safetensors")));
    flux_free(ctx);
}

static int cancel_at_third(void *user, int done, int total, uint64_t bytes_done, uint64_t bytes_total) {
    (void)user, (void)total, (void)bytes_done, (void)bytes_total;
    return done == 3;
}

/* A write that fails for room names the reason (file-size limit of 64 KiB;
 * the file is ~480 KB) and leaves nothing; a cancel from the progress
 * callback too. */
TEST(fp8_quantize_full_disk_and_cancel_leave_nothing) {
    char dir[PATH_MAX], cmd[4 * PATH_MAX], *out = NULL;
    snprintf(dir, sizeof dir, "%s/full", fx_test_tmpdir());
    REQUIRE(mkdir(dir, 0755) == 0);
    snprintf(cmd, sizeof cmd, "ulimit -f 64 && '%s' quantize -q -d '%s' --type fp8 --component transformer -o '%s/t.safetensors'",
             fx_test_flux_bin(), fx_test_path("golden/model"), dir);
    int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 1 && out && strstr(out, "File too large") && strstr(out, "t.safetensors"), "exit %d: %s", rc,
              out ? out : "");
    free(out);
    CHECK_MSG(fx_test_dir_entries(dir) == 0, "%d files left", fx_test_dir_entries(dir));

    flux_ctx *ctx = flux_new(NULL);
    REQUIRE(ctx);
    flux_quantize_options o;
    flux_quantize_options_init(&o);
    o.type = "fp8_e5m2";
    o.component = "text-encoder";
    o.progress = cancel_at_third;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/te.safetensors", dir);
    CHECK(flux_quantize(ctx, fx_test_path("golden/model"), &o, path) == FLUX_ERR_CANCELLED);
    CHECK_MSG(fx_test_dir_entries(dir) == 0, "%d files left after the cancel", fx_test_dir_entries(dir));
    flux_free(ctx);
}
