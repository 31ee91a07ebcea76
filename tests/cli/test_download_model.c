/*
 * test_download_model.c — tools/download_model.sh against a local mirror
 * (HF_ENDPOINT=file://...: curl reads the files as it would download them):
 * the repo each option picks (--9b, --base), --minimal fetching only the
 * configs, the tokenizer and the VAE (and a folder flux then loads with the
 * transformer and text encoder given as files), a sharded transformer
 * behind an index (the 9B layout), and a missing file failing the script.
 */
#include "tests/test.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A mirror of the golden model under <tmp>/hub/black-forest-labs/<repo>/resolve/main. */
static void mirror(const char *repo, int sharded_transformer) {
    char cmd[4 * PATH_MAX];
    const char *g = fx_test_path("golden/model");
    snprintf(cmd, sizeof cmd,
             "set -e; d='%s/hub/black-forest-labs/%s/resolve/main'; mkdir -p \"$d\"; cp -rL '%s'/. \"$d\"/; "
             "if [ %d = 1 ]; then t=\"$d/transformer\"; "
             "mv \"$t/diffusion_pytorch_model.safetensors\" \"$t/diffusion_pytorch_model-00001-of-00001.safetensors\"; "
             "printf '{\"metadata\":{},\"weight_map\":{\"x\":\"diffusion_pytorch_model-00001-of-00001.safetensors\"}}' "
             "> \"$t/diffusion_pytorch_model.safetensors.index.json\"; fi",
             fx_test_tmpdir(), repo, g, sharded_transformer);
    char *out = NULL;
    int rc = fx_test_run(cmd, &out);
    if (rc) fx_test_fail(__FILE__, __LINE__, "mirror: %s", out ? out : "");
    free(out);
}

static int download(const char *options, const char *dest, char **out) {
    char cmd[4 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "command -v curl >/dev/null || exit 99; HF_ENDPOINT='file://%s/hub' bash '%s' '%s/%s' %s",
             fx_test_tmpdir(), fx_test_path("../tools/download_model.sh"), fx_test_tmpdir(), dest, options);
    return fx_test_run(cmd, out);
}

static int have(const char *dest, const char *rel) {
    char p[2 * PATH_MAX];
    snprintf(p, sizeof p, "%s/%s/%s", fx_test_tmpdir(), dest, rel);
    return fx_test_file_exists(p);
}

TEST(download_model_options_and_minimal) {
    mirror("FLUX.2-klein-base-9B", 1);
    mirror("FLUX.2-klein-4B", 0);
    char *out = NULL;
    int rc = download("--minimal", "min", &out);
    if (rc == 99) {
        free(out);
        SKIP("curl not installed");
    }
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    CHECK_MSG(strstr(out, "FLUX.2-klein-4B") && strstr(out, "(configs, tokenizer, VAE)"), "%s", out);
    free(out);
    CHECK(have("min", "model_index.json") && have("min", "tokenizer/tokenizer.json"));
    CHECK(have("min", "transformer/config.json") && have("min", "text_encoder/config.json"));
    CHECK(have("min", "vae/diffusion_pytorch_model.safetensors") && have("min", "scheduler/scheduler_config.json"));
    CHECK(!have("min", "transformer/diffusion_pytorch_model.safetensors"));
    CHECK(!have("min", "text_encoder/model.safetensors.index.json"));

    /* the minimal folder runs with the transformer and text encoder as files */
    char cmd[6 * PATH_MAX];
    snprintf(cmd, sizeof cmd,
             "'%s' -d '%s/min' --transformer '%s/transformer/diffusion_pytorch_model.safetensors' "
             "--text-encoder '%s/text_encoder/model.safetensors.index.json' --tokenize -p 'a cat'",
             fx_test_flux_bin(), fx_test_tmpdir(), fx_test_path("golden/model"), fx_test_path("golden/model"));
    rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0 && strstr(out, "151644"), "exit %d: %s", rc, out);
    free(out);

    /* --9b --base: the base 9B repo, its transformer in shards behind an index */
    rc = download("--9b --base", "b9", &out);
    CHECK_MSG(rc == 0 && strstr(out, "FLUX.2-klein-base-9B"), "exit %d: %s", rc, out);
    free(out);
    CHECK(have("b9", "transformer/diffusion_pytorch_model.safetensors.index.json"));
    CHECK(have("b9", "transformer/diffusion_pytorch_model-00001-of-00001.safetensors"));
    CHECK(have("b9", "text_encoder/model-00001-of-00002.safetensors") &&
          have("b9", "text_encoder/model-00002-of-00002.safetensors"));

    /* a repo that is not there: the script fails */
    rc = download("--9b", "none", &out);
    CHECK_MSG(rc != 0, "exit %d: %s", rc, out);
    free(out);
}
