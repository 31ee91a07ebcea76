/* golden_case.c — golden case settings and models (golden_case.h). */
#include "golden_case.h"
#include "src/model/ctx.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test.h"
#include "src/formats/weight_set.h"

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

int fx_gcase_npy_file(const char *path, fx_npy *a) {
    fx_err err = {0};
    if (fx_npy_read(path, a, &err) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return 0;
    }
    return 1;
}

int fx_gcase_npy(const char *dir, const char *rel, fx_npy *a) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    return fx_gcase_npy_file(path, a);
}

fx_wset *fx_gcase_transformer(const char *model) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/transformer", model);
    fx_err err = {0};
    fx_wset *w = fx_wset_open_component(dir, "transformer", "diffusion_pytorch_model.safetensors", 1, &err);
    if (!w) fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
    return w;
}

static flux_backend g_backend = FLUX_BACKEND_CPU;

void fx_gcase_set_backend(flux_backend b) { g_backend = b; }

static const char *g_transformer_file, *g_text_encoder_file;

void fx_gcase_set_files(const char *transformer_file, const char *text_encoder_file) {
    g_transformer_file = transformer_file;
    g_text_encoder_file = text_encoder_file;
}

flux_ctx *fx_gcase_ctx(const char *model, int threads, flux_precision prec) {
    flux_options o;
    flux_options_init(&o);
    o.threads = threads;
    o.precision = prec;
    o.backend = g_backend;
    flux_ctx *ctx = flux_new(&o);
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.transformer_file = g_transformer_file;
    lo.text_encoder_file = g_text_encoder_file;
    if (ctx && flux_load(ctx, model, &lo) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "flux_load %s: %s", model, flux_error(ctx));
        flux_free(ctx);
        return NULL;
    }
    return ctx;
}

flux_ctx *fx_gcase_ctx_emb(const char *name, int threads, flux_precision prec, fx_gcase *c, fx_npy *emb) {
    fx_gcase local;
    if (!c) c = &local;
    if (!fx_gcase_load(name, c)) return NULL;
    flux_ctx *ctx = fx_gcase_ctx(c->model, threads, prec);
    if (ctx && !fx_gcase_npy(c->dir, "out/emb.npy", emb)) {
        flux_free(ctx);
        return NULL;
    }
    return ctx;
}

/* An image file through flux_image_load (as the CLI reads it); NULL after a failure. */
static flux_image *load_image(flux_ctx *ctx, const char *path) {
    flux_image *img = NULL;
    if (flux_image_load(ctx, path, &img) != FLUX_OK) fx_test_fail(__FILE__, __LINE__, "%s", flux_error(ctx));
    return img;
}

int fx_gcase_refs(const fx_gcase *c, flux_image **refs) {
    flux_ctx *ctx = flux_new(NULL);
    int ok = 1;
    for (int k = 0; k < c->n_refs; k++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/ref%d.png", c->dir, k);
        ok &= (refs[k] = load_image(ctx, path)) != NULL;
    }
    flux_free(ctx);
    return ok;
}

double fx_gcase_compare(const char *dump, const char *ours, const char *gdir, const char *golden) {
    fx_npy a, b;
    if (!fx_gcase_npy(dump, ours, &a)) return 1e9;
    if (!fx_gcase_npy(gdir, golden, &b)) {
        fx_npy_free(&a);
        return 1e9;
    }
    double e = 1e9;
    if (a.count != b.count || a.ndim != b.ndim)
        fx_test_fail(__FILE__, __LINE__, "%s: %zu values, golden %s has %zu", ours, a.count, golden, b.count);
    else
        e = fx_test_rel_err(a.data, b.data, a.count);
    fx_npy_free(&a), fx_npy_free(&b);
    return e;
}

void fx_gcase_pixel_diff(const flux_image *img, const char *png, int *max_d, double *mean_d) {
    flux_ctx *ctx = flux_new(NULL);
    flux_image *g = load_image(ctx, png);
    *max_d = 999, *mean_d = 999;
    if (g && (g->width != img->width || g->height != img->height)) {
        fx_test_fail(__FILE__, __LINE__, "%s is %dx%d, ours %dx%d", png, g->width, g->height, img->width, img->height);
    } else if (g) {
        size_t n = (size_t)g->width * g->height * 3;
        long sum = 0;
        *max_d = 0;
        for (size_t i = 0; i < n; i++) {
            int d = abs((int)g->data[i] - (int)img->data[i]);
            sum += d;
            if (d > *max_d) *max_d = d;
        }
        *mean_d = (double)sum / (double)n;
    }
    flux_image_free(g);
    flux_free(ctx);
}

/* The worst error over count dumped arrays: <dump>/<ours_fmt % k> against
 * <gdir>/<golden_fmt % k>. */
static double worst_of(int count, const char *dump, const char *ours_fmt, const char *gdir, const char *golden_fmt) {
    double worst = 0;
    for (int k = 0; k < count; k++) {
        char a[64], b[64];
        snprintf(a, sizeof a, ours_fmt, k);
        snprintf(b, sizeof b, golden_fmt, k);
        double e = fx_gcase_compare(dump, a, gdir, b);
        if (e > worst) worst = e;
    }
    return worst;
}

void fx_gcase_run(const char *name, flux_precision prec, fx_gcase_result *res) {
    memset(res, 0, sizeof *res);
    res->refs = res->steps = res->latents = res->image = 1e9;
    res->max_px = 999;
    fx_gcase c;
    if (!fx_gcase_load(name, &c)) return;
    res->n_refs = c.n_refs;
    flux_ctx *ctx = fx_gcase_ctx(c.model, 2, prec);
    if (!ctx) return;
    fx_npy emb = {0}, neg = {0}, noise = {0};
    flux_image *refs[FLUX_MAX_REFS] = {NULL}, *img = NULL;
    char dump[1200];
    snprintf(dump, sizeof dump, "%s/dump-%s-%d", fx_test_tmpdir(), name, (int)prec);
    mkdir(dump, 0755);
    if (!fx_gcase_npy(c.dir, "out/emb.npy", &emb) || !fx_gcase_npy(c.dir, "noise.npy", &noise) ||
        (c.cfg && !fx_gcase_npy(c.dir, "out/neg_emb.npy", &neg)) || !fx_gcase_refs(&c, refs))
        goto out;
    flux_params p;
    flux_params_init(&p);
    p.embeddings = emb.data;
    p.negative_embeddings = c.cfg ? neg.data : NULL;
    p.noise = noise.data;
    p.height = (int)noise.shape[1] * 16;
    p.width = (int)noise.shape[2] * 16;
    p.steps = c.steps;
    p.guidance = c.guidance;
    p.schedule = c.schedule;
    p.refs = (const flux_image *const *)refs;
    p.n_refs = c.n_refs;
    p.seed = 1;
    p.dump_dir = dump;
    if (flux_generate(ctx, &p, &img) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "%s: flux_generate: %s", name, flux_error(ctx));
        goto out;
    }
    CHECK(img->width == p.width && img->height == p.height && img->channels == 3);
    /* σ: the official float32 schedule has 0.99999994 for σ_0 at some sizes */
    double es = fx_gcase_compare(dump, "sigmas.npy", c.dir, "out/sigmas.npy");
    CHECK_MSG(es <= 1e-6, "%s: sigmas differ by %.3g", name, es);
    CHECK_MSG(fx_gcase_compare(dump, "noise.npy", c.dir, "noise.npy") == 0.0, "%s: noise.npy is not the given noise",
              name);
    CHECK_MSG(fx_gcase_compare(dump, "text_embeddings.npy", c.dir, "out/emb.npy") == 0.0, "%s: text_embeddings.npy",
              name);
    res->refs = worst_of(c.n_refs, dump, "ref%d_latents.npy", c.dir, "out/ref%d_latents.npy");
    res->steps = worst_of(c.steps, dump, "velocity_%03d.npy", c.dir, "out/steps/step%02d_v.npy");
    res->latents = fx_gcase_compare(dump, "latents.npy", c.dir, "out/latents.npy");
    res->image = fx_gcase_compare(dump, "decoded.npy", c.dir, "out/image.npy");
    char png[1200];
    snprintf(png, sizeof png, "%s/out/image.png", c.dir);
    fx_gcase_pixel_diff(img, png, &res->max_px, &res->mean_px);
    const char *seed = flux_image_get_text(img, "seed"), *n_refs = flux_image_get_text(img, "references");
    CHECK_MSG(seed && !strcmp(seed, "1"), "%s: seed metadata '%s'", name, seed ? seed : "(none)");
    if (c.n_refs) {
        char want[16];
        snprintf(want, sizeof want, "%d", c.n_refs);
        CHECK_MSG(n_refs && !strcmp(n_refs, want), "%s: references metadata '%s', want %s", name,
                  n_refs ? n_refs : "(none)", want);
    } else {
        CHECK_MSG(!n_refs, "%s: references metadata '%s' without references", name, n_refs);
    }
    char refs_err[32] = "";
    if (c.n_refs) snprintf(refs_err, sizeof refs_err, "refs %.2e  ", res->refs);
    printf("      %-32s %s: %ssteps %.2e  latents %.2e  image %.2e  pixels max %d mean %.3f\n", name,
           prec == FLUX_PRECISION_F32 ? "f32 " : "bf16", refs_err, res->steps, res->latents, res->image, res->max_px,
           res->mean_px);
out:
    if (g_backend == FLUX_BACKEND_VULKAN) { /* the run was on the device, validation-clean */
        const char *first;
        CHECK_MSG(!strncmp(flux_backend_name(ctx), "vulkan", 6), "%s: ran on %s", name, flux_backend_name(ctx));
        int n = fx_ops_device_errors(ctx->ops, &first);
        CHECK_MSG(n == 0, "%s: %d Vulkan validation error(s), first: %s", name, n, first);
    }
    for (int k = 0; k < FLUX_MAX_REFS; k++) flux_image_free(refs[k]);
    flux_image_free(img);
    fx_npy_free(&emb), fx_npy_free(&neg), fx_npy_free(&noise);
    flux_free(ctx);
}

void fx_gcase_check(const char *name, flux_precision prec) {
    fx_gcase_result r;
    fx_gcase_run(name, prec, &r);
    /* the tolerance set of the math this CPU runs (golden_case.h) */
    const int f32 = prec == FLUX_PRECISION_F32, dot = !f32 && fx_test_bf16_dot(prec);
    const double tol_ref = f32 ? FX_GCASE_TOL_F32 : dot ? FX_GCASE_TOL_BF16_REF : FX_GCASE_TOL_DEF_REF;
    const double tol_step = f32 ? FX_GCASE_TOL_F32 : dot ? FX_GCASE_TOL_BF16_STEP : FX_GCASE_TOL_DEF_STEP;
    const double tol_image = f32 ? FX_GCASE_TOL_F32 : dot ? FX_GCASE_TOL_BF16_IMAGE : FX_GCASE_TOL_DEF_IMAGE;
    const int tol_px = f32 ? 1 : dot ? FX_GCASE_TOL_BF16_PIXELS : FX_GCASE_TOL_DEF_PIXELS;
    if (r.n_refs) CHECK_MSG(r.refs <= tol_ref, "%s: reference latents error %.3g > %.3g", name, r.refs, tol_ref);
    CHECK_MSG(r.steps <= tol_step, "%s: velocity error %.3g > %.3g", name, r.steps, tol_step);
    CHECK_MSG(r.latents <= tol_step, "%s: latents error %.3g > %.3g", name, r.latents, tol_step);
    CHECK_MSG(r.image <= tol_image, "%s: image error %.3g > %.3g", name, r.image, tol_image);
    CHECK_MSG(r.max_px <= tol_px, "%s: a pixel differs by %d > %d", name, r.max_px, tol_px);
}
