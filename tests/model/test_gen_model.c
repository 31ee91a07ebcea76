/* test_gen_model.c — tools/gen_model: shapes, layout and reproducible weights. */
#include <glob.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/golden_cases.h"
#include "tests/test.h"

/* Parameter counts of the published checkpoints. */
TEST(gen_model_param_counts_match_spec) {
    const char *gen = fx_gen_model_bin();
    REQUIRE(gen);
    char cmd[4200], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' --preset klein-4b --dry-run", gen);
    CHECK_EQ_INT(fx_test_run(cmd, &out), 0);
    REQUIRE(out);
    CHECK_MSG(strstr(out, "3,875,544,576 params"), "4B transformer count: %s", out);
    CHECK_MSG(strstr(out, "4,022,468,096 params"), "Qwen3-4B count: %s", out);
    CHECK_MSG(strstr(out, "84,046,371 params"), "VAE count: %s", out);
    CHECK_MSG(strstr(out, "2 shards"), "Qwen3-4B is split into 2 files at 5 GB: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' --preset klein-9b --dry-run", gen);
    CHECK_EQ_INT(fx_test_run(cmd, &out), 0);
    REQUIRE(out);
    CHECK_MSG(strstr(out, "9,078,581,248 params"), "9B transformer count: %s", out);
    free(out);
}

static int same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = fx_test_read_file(a, &na), *y = fx_test_read_file(b, &nb);
    int same = x && y && na == nb && !memcmp(x, y, na);
    free(x), free(y);
    return same;
}

/* The safetensors header (length prefix + JSON) of a file, malloc'd. */
static unsigned char *header(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char pre[8];
    unsigned char *h = NULL;
    if (fread(pre, 1, 8, f) == 8) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = n << 8 | pre[i];
        if (n < (1u << 24) && (h = malloc(8 + n)) != NULL) {
            memcpy(h, pre, 8);
            if (fread(h + 8, 1, n, f) != n) free(h), h = NULL;
            else *len = 8 + n;
        }
    }
    fclose(f);
    return h;
}

/* The tiny preset reproduces the official tiny golden model's files: same
 * configs, same shard index, byte-identical safetensors headers (names, dtypes,
 * shapes, offsets, order, padding). */
TEST(gen_model_tiny_has_official_layout) {
    const char *gen = fx_gen_model_bin();
    REQUIRE(gen);
    char dir[1024], cmd[4200], *out = NULL;
    snprintf(dir, sizeof dir, "%s/tiny", fx_test_tmpdir());
    snprintf(cmd, sizeof cmd, "'%s' -q --preset tiny -o '%s' --tokenizer '%s' --link-tokenizer", gen, dir,
             fx_test_path("fixtures/qwen3-tokenizer.json"));
    REQUIRE_MSG(fx_test_run(cmd, &out) == 0, "gen_model failed: %s", out ? out : "");
    free(out);
    static const char *same[] = {
        "model_index.json", "transformer/config.json", "text_encoder/config.json",
        "vae/config.json", "scheduler/scheduler_config.json",
        "text_encoder/model.safetensors.index.json"};
    static const char *weights[] = {
        "transformer/diffusion_pytorch_model.safetensors", "vae/diffusion_pytorch_model.safetensors",
        "text_encoder/model-00001-of-00002.safetensors", "text_encoder/model-00002-of-00002.safetensors"};
    char a[1200], b[4200];
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        snprintf(a, sizeof a, "%s/%s", dir, same[i]);
        snprintf(b, sizeof b, "%s", fx_test_path("golden/model"));
        strncat(b, "/", sizeof b - strlen(b) - 1);
        strncat(b, same[i], sizeof b - strlen(b) - 1);
        CHECK_MSG(same_file(a, b), "%s differs from the official tiny model", same[i]);
    }
    for (size_t i = 0; i < sizeof weights / sizeof *weights; i++) {
        snprintf(a, sizeof a, "%s/%s", dir, weights[i]);
        snprintf(b, sizeof b, "%s/%s", fx_test_path("golden/model"), weights[i]);
        size_t na = 0, nb = 0;
        unsigned char *ha = header(a, &na), *hb = header(b, &nb);
        CHECK_MSG(ha && hb && na == nb && !memcmp(ha, hb, na), "%s: header differs", weights[i]);
        free(ha), free(hb);
    }
    snprintf(a, sizeof a, "%s/tokenizer/tokenizer.json", dir);
    CHECK_MSG(same_file(a, fx_test_path("fixtures/qwen3-tokenizer.json")), "tokenizer.json not linked");
}

/* Every ours-* golden case's model rebuilds bit-identically (the weights the
 * golden data was made from): SHA-256 of every file, and once more with one
 * thread to show the weights do not depend on the thread count. */
TEST(gen_model_rebuilds_golden_models) {
    glob_t g;
    REQUIRE(glob(fx_test_path("golden/ours-*/case.txt"), 0, NULL, &g) == 0);
    char root[4096] = "";
    int built = 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s", g.gl_pathv[i]);
        char *case_name = basename(dirname(path));
        const char *model = fx_golden_case_model(case_name);
        CHECK_MSG(model, "no model for %s", case_name);
        if (!model) continue;
        snprintf(root, sizeof root, "%s", model);
        dirname(root); /* <build>/golden-models */
        built++;
    }
    globfree(&g);
    REQUIRE_MSG(built >= 10, "only %d ours-* cases found", built);
    char cmd[12000], *out = NULL;
    snprintf(cmd, sizeof cmd, "cd '%s' && sha256sum --quiet -c '%s'", root,
             fx_test_path("golden/ours-models.sha256"));
    CHECK_MSG(fx_test_run(cmd, &out) == 0, "rebuilt models differ: %s", out ? out : "");
    free(out);

    char *args = fx_golden_case_get("ours-t2i-32x64-2step-vae", "gen_model");
    const char *gen = fx_gen_model_bin();
    REQUIRE(args && gen);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && OMP_NUM_THREADS=1 '%s' -q -o tiny-vae %s && grep ' tiny-vae/' '%s' | sha256sum --quiet -c -",
             fx_test_tmpdir(), gen, args, fx_test_path("golden/ours-models.sha256"));
    CHECK_MSG(fx_test_run(cmd, &out) == 0, "1-thread build differs: %s", out ? out : "");
    free(out);
    free(args);
}

/* Bad options fail with a message and write nothing. */
TEST(gen_model_rejects_bad_options) {
    const char *gen = fx_gen_model_bin();
    REQUIRE(gen);
    static const char *bad[] = {
        "--preset tiny --axes 8,8,8,9",       /* axes must add up to the head dim */
        "--preset tiny --text-layers 26",     /* hidden state 27 is needed */
        "--preset tiny --vae-channels 32,48,64,64",
        "--preset tiny --text-heads 3 --text-kv-heads 2",
        "--preset tiny --dtype f64",
        "--preset huge",
        "--preset tiny --heads",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char dir[1024], cmd[4200], *out = NULL;
        snprintf(dir, sizeof dir, "%s/bad%zu", fx_test_tmpdir(), i);
        snprintf(cmd, sizeof cmd, "'%s' -o '%s' %s", gen, dir, bad[i]);
        int st = fx_test_run(cmd, &out);
        CHECK_MSG(st != 0, "accepted: %s", bad[i]);
        CHECK_MSG(out && strstr(out, "gen_model: "), "no message for: %s", bad[i]);
        CHECK_MSG(access(dir, F_OK) != 0, "wrote %s for: %s", dir, bad[i]);
        free(out);
    }
}
