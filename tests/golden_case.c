/* golden_case.c — golden case settings and models (golden_case.h). */
#include "golden_case.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test.h"

/* Value of "key: value" in case.txt (static buffer), or NULL. */
static const char *case_value(const char *text, const char *key) {
    static char val[512];
    size_t kl = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (!strncmp(l, key, kl) && l[kl] == ':') {
            const char *v = l + kl + 1;
            while (*v == ' ') v++;
            size_t n = strcspn(v, "\n");
            if (n >= sizeof val) n = sizeof val - 1;
            memcpy(val, v, n);
            val[n] = 0;
            return val;
        }
    }
    return NULL;
}

/* Build the model of an ours-* case with gen_model (once per test). */
static int make_model(const char *text, char *dir, size_t size) {
    const char *tools = getenv("FLUX_TOOLS");
    const char *id = case_value(text, "model");
    const char *args = case_value(text, "gen_model");
    if (!id || !args) {
        fx_test_fail(__FILE__, __LINE__, "case.txt lacks model: or gen_model:");
        return 0;
    }
    snprintf(dir, size, "%s/model-%s", fx_test_tmpdir(), id);
    struct stat st;
    if (stat(dir, &st) == 0) return 1;
    if (!tools) {
        fx_test_fail(__FILE__, __LINE__, "FLUX_TOOLS is not set (make test sets it; or point it at build/<variant>/tools)");
        return 0;
    }
    char a[512], tok[1024], cmd[4096];
    snprintf(a, sizeof a, "%s", args);
    snprintf(tok, sizeof tok, "%s", fx_test_path("fixtures/qwen3-tokenizer.json"));
    snprintf(cmd, sizeof cmd, "'%s/gen_model' -q -o '%s' %s --tokenizer '%s' --link-tokenizer", tools, dir, a, tok);
    char *out = NULL;
    int rc = fx_test_run(cmd, &out);
    if (rc != 0) fx_test_fail(__FILE__, __LINE__, "%s: exit %d: %s", cmd, rc, out ? out : "");
    free(out);
    return rc == 0;
}

int fx_gcase_load(const char *name, fx_gcase *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->dir, sizeof c->dir, "%s", fx_test_path("golden"));
    size_t n = strlen(c->dir);
    snprintf(c->dir + n, sizeof c->dir - n, "/%s", name);
    c->guidance = 1.0f;
    c->schedule = FLUX_SCHEDULE_SHIFTED;
    char path[1100];
    snprintf(path, sizeof path, "%s/case.txt", c->dir);
    char *text = fx_test_read_file(path, NULL);
    if (!text) { /* an official case (README.md) */
        int base = !strncmp(name, "base", 4);
        snprintf(c->model, sizeof c->model, "%s", fx_test_path(base ? "golden/model-base" : "golden/model"));
        c->steps = strstr(name, "-4step") ? 4 : strstr(name, "-3step") ? 3 : 2;
        if (base) c->guidance = 4.0f, c->cfg = 1;
        if (!strncmp(name, "multiref", 8)) c->n_refs = 2;
        return 1;
    }
    int ok = make_model(text, c->model, sizeof c->model);
    const char *v;
    if ((v = case_value(text, "steps"))) c->steps = atoi(v);
    if ((v = case_value(text, "guidance"))) c->guidance = (float)atof(v);
    if ((v = case_value(text, "schedule")) && !strcmp(v, "linear")) c->schedule = FLUX_SCHEDULE_LINEAR;
    if ((v = case_value(text, "refs")))
        for (c->n_refs = 1; (v = strchr(v, ' ')); v++) c->n_refs++;
    v = case_value(text, "gen_model");
    c->cfg = v && strstr(v, "--distilled 0") && c->guidance > 1.0f;
    free(text);
    return ok;
}

int fx_gcase_npy(const char *dir, const char *rel, fx_npy *a) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    fx_err err = {0};
    if (fx_npy_read(path, a, &err) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return 0;
    }
    return 1;
}

flux_ctx *fx_gcase_ctx(const char *model, int threads, flux_precision prec) {
    flux_options o;
    flux_options_init(&o);
    o.threads = threads;
    o.precision = prec;
    flux_ctx *ctx = flux_new(&o);
    if (ctx && flux_load(ctx, model, NULL) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "flux_load %s: %s", model, flux_error(ctx));
        flux_free(ctx);
        return NULL;
    }
    return ctx;
}
