/* golden_cases.c — locate or build the model of a golden case (golden_cases.h). */
#include "golden_cases.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

char *fx_golden_case_get(const char *case_name, const char *key) {
    char rel[512];
    snprintf(rel, sizeof rel, "golden/%s/case.txt", case_name);
    char *text = fx_test_read_file(fx_test_path(rel), NULL);
    if (!text) return NULL;
    char *out = NULL;
    const size_t klen = strlen(key);
    for (char *line = text; line && *line && !out;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = 0;
        if (line[0] != '#' && !strncmp(line, key, klen) && line[klen] == ':') {
            const char *v = line + klen + 1;
            while (*v == ' ' || *v == '\t') v++;
            size_t n = strlen(v);
            while (n && (v[n - 1] == ' ' || v[n - 1] == '\r')) n--;
            out = strndup(v, n);
        }
        line = next;
    }
    free(text);
    return out;
}

const char *fx_gen_model_bin(void) {
    const char *bin = fx_test_tool("gen_model");
    if (!bin) {
        const char *tools = getenv("FLUX_TOOLS");
        printf("    gen_model not found (FLUX_TOOLS=%s): build it with `make tools` in the same "
               "BUILD directory as the tests\n", tools ? tools : "(unset)");
    }
    return bin;
}

const char *fx_gen_model_in_tmpdir(const char *name, const char *args) {
    static char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", fx_test_tmpdir(), name);
    if (fx_test_file_exists(dir)) return dir;
    const char *gen = fx_gen_model_bin();
    if (!gen) { /* a test without its model fails: it must not pass having checked nothing */
        fx_test_fail(__FILE__, __LINE__, "gen_model is needed for the model %s", name);
        return NULL;
    }
    char cmd[4 * PATH_MAX], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' -q -o '%s' %s --tokenizer '%s' --link-tokenizer", gen, dir, args,
             fx_test_path("fixtures/qwen3-tokenizer.json"));
    int rc = fx_test_run(cmd, &out);
    if (rc) fx_test_fail(__FILE__, __LINE__, "%s: %s", cmd, out);
    free(out);
    return rc ? NULL : dir;
}

const char *fx_golden_case_model(const char *case_name) {
    static char dir[PATH_MAX + 64];
    char *args = fx_golden_case_get(case_name, "gen_model");
    if (!args) { /* an official case: the committed tiny model */
        char rel[512];
        snprintf(rel, sizeof rel, "golden/%s/neg/tokens.npy", case_name);
        snprintf(dir, sizeof dir, "%s", fx_test_path(access(fx_test_path(rel), F_OK) == 0
                                                         ? "golden/model-base" : "golden/model"));
        return dir;
    }
    char *id = fx_golden_case_get(case_name, "model");
    const char *gen = fx_gen_model_bin();
    if (!id || !gen) {
        if (!id) printf("    %s/case.txt has gen_model but no model id\n", case_name);
        free(args), free(id);
        return NULL;
    }
    /* <build>/tools/gen_model -> <build>/golden-models/<id> */
    char root[PATH_MAX];
    snprintf(root, sizeof root, "%s", gen);
    for (int k = 0; k < 2; k++) {
        char *slash = strrchr(root, '/');
        if (slash) *slash = 0;
    }
    snprintf(dir, sizeof dir, "%s/golden-models/%s", root, id);
    char stamp_path[PATH_MAX + 160];
    snprintf(stamp_path, sizeof stamp_path, "%s/.gen_model_args", dir);
    char *stamp = fx_test_read_file(stamp_path, NULL);
    int ok = stamp && !strcmp(stamp, args);
    free(stamp);
    if (!ok) {
        /* Build into a private directory, then rename: never a half-built model. */
        char tmp[PATH_MAX + 96], cmd[4 * PATH_MAX + 1024], *out = NULL;
        snprintf(tmp, sizeof tmp, "%s.tmp%ld", dir, (long)getpid());
        snprintf(cmd, sizeof cmd,
                 "mkdir -p '%s/golden-models' && rm -rf '%s' && '%s' -q -o '%s' %s "
                 "--tokenizer '%s' --link-tokenizer",
                 root, tmp, gen, tmp, args, fx_test_path("fixtures/qwen3-tokenizer.json"));
        int st = fx_test_run(cmd, &out);
        if (st != 0) {
            printf("    building model %s failed (%d): %s\n", id, st, out ? out : "");
            free(out), free(args), free(id);
            return NULL;
        }
        free(out);
        snprintf(stamp_path, sizeof stamp_path, "%s/.gen_model_args", tmp);
        fx_test_write_file(stamp_path, args, strlen(args));
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && mv '%s' '%s'", dir, tmp, dir);
        if (fx_test_run(cmd, &out) != 0) {
            printf("    installing model %s failed: %s\n", id, out ? out : "");
            free(out), free(args), free(id);
            return NULL;
        }
        free(out);
    }
    free(args), free(id);
    return dir;
}
