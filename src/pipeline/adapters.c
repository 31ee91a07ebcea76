/*
 * adapters.c — flux_lora_* (flux.h): LoRA files loaded against the model,
 * kept with their strengths, and re-attached to the transformer after
 * every change (fx_dit_set_adapters), so nothing is ever reloaded.
 */
#include "adapters.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/dit/transformer.h"
#include "src/adapters/lora.h"
#include "src/model/model.h"

typedef struct adapter {
    fx_lora *lora;
    char *path, *name;
    float scale;
    fx_lora_report rep;
} adapter;

struct fx_adapters {
    adapter a[FLUX_MAX_LORAS];
    int n;
};

static void adapter_free(adapter *a) {
    fx_lora_free(a->lora);
    free(a->path);
    free(a->name);
    memset(a, 0, sizeof *a);
}

void fx_adapters_free(flux_ctx *ctx) {
    if (!ctx || !ctx->adapters) return;
    for (int i = 0; i < ctx->adapters->n; i++) adapter_free(&ctx->adapters->a[i]);
    free(ctx->adapters);
    ctx->adapters = NULL;
}

/* Attach the current list (strengths as they are) to the transformer. */
static flux_status attach(flux_ctx *ctx) {
    const fx_lora *loras[FLUX_MAX_LORAS];
    float scales[FLUX_MAX_LORAS];
    int n = ctx->adapters ? ctx->adapters->n : 0;
    for (int i = 0; i < n; i++) loras[i] = ctx->adapters->a[i].lora, scales[i] = ctx->adapters->a[i].scale;
    fx_dit *dit;
    TRY(fx_dit_get(ctx, &dit));
    return fx_dit_set_adapters(dit, loras, scales, n, &ctx->err);
}

/* The A1111 tag name of a path: the file name without .safetensors. */
static char *tag_name(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 12 && !strcmp(base + n - 12, ".safetensors")) n -= 12;
    char *s = malloc(n + 1);
    if (!s) return NULL;
    for (size_t i = 0; i < n; i++) s[i] = base[i] == ':' || base[i] == '<' || base[i] == '>' ? '_' : base[i];
    s[n] = '\0';
    return s;
}

static flux_status check_scale(flux_ctx *ctx, float scale) {
    if (!isfinite(scale)) return fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG, "LoRA scale %g is not a finite number", (double)scale);
    return FLUX_OK;
}

static flux_status check_index(const flux_ctx *ctx, int index, const char *fn) {
    int n = flux_lora_count(ctx);
    if (index < 0 || index >= n)
        return fx_fail((fx_err *)&ctx->err, FLUX_ERR_INVALID_ARG, "%s: no adapter %d (%d loaded)", fn, index, n);
    return FLUX_OK;
}

flux_status flux_lora_load(flux_ctx *ctx, const char *path, float scale) {
    if (!ctx) return FLUX_ERR_INVALID_ARG;
    fx_err_clear(&ctx->err);
    if (!path || !*path) return fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG, "flux_lora_load: no file given");
    if (!ctx->model || !ctx->model->transformer_w)
        return fx_fail(&ctx->err, FLUX_ERR_STATE, "%s: load a model before its LoRA adapters", path);
    TRY(check_scale(ctx, scale));
    if (flux_lora_count(ctx) == FLUX_MAX_LORAS)
        return fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG, "%s: at most %d adapters", path, FLUX_MAX_LORAS);
    if (!ctx->adapters && !(ctx->adapters = calloc(1, sizeof *ctx->adapters)))
        return fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory");
    adapter *a = &ctx->adapters->a[ctx->adapters->n];
    memset(a, 0, sizeof *a); /* a free slot owns nothing (adapter_free below frees only this load's) */
    a->lora = fx_lora_open(path, ctx->model->transformer_w, &ctx->kc, ctx->opt.use_mmap, &a->rep, &ctx->err);
    if (!a->lora) {
        adapter_free(a);
        return ctx->err.code;
    }
    a->path = strdup(path);
    a->name = tag_name(path);
    a->scale = scale;
    if (!a->path || !a->name) {
        adapter_free(a);
        return fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory");
    }
    ctx->adapters->n++;
    flux_status st = attach(ctx);
    if (st) { /* leave the context as it was */
        ctx->adapters->n--;
        adapter_free(a);
        fx_err keep = ctx->err;
        attach(ctx);
        ctx->err = keep;
        return st;
    }
    fx_log(&ctx->log, 1, "flux: %s: %s, %zu modules (%s names), scale %g%s%s", path, a->rep.kinds, a->rep.modules,
           a->rep.naming, (double)scale, a->rep.warning[0] ? "; " : "", a->rep.warning);
    return FLUX_OK;
}

flux_status flux_lora_set_scale(flux_ctx *ctx, int index, float scale) {
    if (!ctx) return FLUX_ERR_INVALID_ARG;
    fx_err_clear(&ctx->err);
    TRY(check_index(ctx, index, "flux_lora_set_scale"));
    TRY(check_scale(ctx, scale));
    float old = ctx->adapters->a[index].scale;
    ctx->adapters->a[index].scale = scale;
    flux_status st = attach(ctx);
    if (st) {
        fx_err keep = ctx->err;
        ctx->adapters->a[index].scale = old;
        attach(ctx);
        ctx->err = keep;
    }
    return st;
}

flux_status flux_lora_remove(flux_ctx *ctx, int index) {
    if (!ctx) return FLUX_ERR_INVALID_ARG;
    fx_err_clear(&ctx->err);
    TRY(check_index(ctx, index, "flux_lora_remove"));
    struct fx_adapters *as = ctx->adapters;
    adapter gone = as->a[index];
    memmove(&as->a[index], &as->a[index + 1], (size_t)(as->n - index - 1) * sizeof *as->a);
    as->n--;
    memset(&as->a[as->n], 0, sizeof *as->a); /* the vacated slot keeps no copy of a live adapter */
    flux_status st = attach(ctx); /* the transformer lets go of the file before it is freed */
    if (st) { /* cannot happen for fewer terms, but never free what is still attached */
        memmove(&as->a[index + 1], &as->a[index], (size_t)(as->n - index) * sizeof *as->a); /* slot n refilled */
        as->a[index] = gone;
        as->n++;
        return st;
    }
    adapter_free(&gone);
    return FLUX_OK;
}

void fx_adapters_forget(flux_ctx *ctx) {
    for (int i = 0; i < ctx->reload.n_lora; i++) free(ctx->reload.lora_path[i]);
    ctx->reload.n_lora = 0;
}

flux_status fx_adapters_remember(flux_ctx *ctx) {
    fx_adapters_forget(ctx);
    for (int i = 0; i < flux_lora_count(ctx); i++) {
        const adapter *a = &ctx->adapters->a[i];
        if (!(ctx->reload.lora_path[i] = strdup(a->path))) {
            fx_adapters_forget(ctx);
            return fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory");
        }
        ctx->reload.lora_scale[i] = a->scale;
        ctx->reload.n_lora = i + 1;
    }
    return FLUX_OK;
}

flux_status fx_adapters_restore(flux_ctx *ctx) {
    int done = 0;
    flux_status st = FLUX_OK;
    for (; done < ctx->reload.n_lora; done++) {
        const char *path = ctx->reload.lora_path[done];
        if ((st = flux_lora_load(ctx, path, ctx->reload.lora_scale[done])) != FLUX_OK) {
            fx_prefix(&ctx->err, "the model was loaded again (its files changed), but its LoRA adapter %s could not "
                      "be attached again", path);
            break;
        }
    }
    for (int i = 0; i < done; i++) free(ctx->reload.lora_path[i]);
    const int left = ctx->reload.n_lora - done;
    memmove(ctx->reload.lora_path, ctx->reload.lora_path + done, (size_t)left * sizeof *ctx->reload.lora_path);
    memmove(ctx->reload.lora_scale, ctx->reload.lora_scale + done, (size_t)left * sizeof *ctx->reload.lora_scale);
    ctx->reload.n_lora = left;
    return st;
}

void flux_lora_clear(flux_ctx *ctx) {
    if (ctx) fx_adapters_forget(ctx); /* adapters waiting for a model loaded again too */
    if (!ctx || !ctx->adapters) return;
    if (ctx->transformer) fx_dit_set_adapters(ctx->transformer, NULL, NULL, 0, &ctx->err);
    fx_adapters_free(ctx);
}

int flux_lora_count(const flux_ctx *ctx) { return ctx && ctx->adapters ? ctx->adapters->n : 0; }

flux_status flux_lora_get_info(const flux_ctx *ctx, int index, flux_lora_info *info) {
    if (!ctx || !info) return FLUX_ERR_INVALID_ARG;
    TRY(check_index(ctx, index, "flux_lora_get_info"));
    const adapter *a = &ctx->adapters->a[index];
    memset(info, 0, sizeof *info);
    info->path = a->path;
    info->name = a->name;
    info->scale = a->scale;
    info->modules = (int)a->rep.modules;
    info->kinds = a->rep.kinds;
    info->naming = a->rep.naming;
    info->ignored_keys = (int)(a->rep.unmatched + a->rep.text_encoder);
    info->warning = a->rep.warning;
    return FLUX_OK;
}

flux_status fx_adapters_tags(const flux_ctx *ctx, const char *prompt, char **tagged, char **list) {
    *tagged = *list = NULL;
    size_t cap = strlen(prompt ? prompt : "") + 1, used = 0, lused = 0;
    const int n = flux_lora_count(ctx);
    for (int i = 0; i < n; i++) cap += strlen(ctx->adapters->a[i].name) + 48;
    char *t = malloc(cap), *l = malloc(cap);
    if (!t || !l) {
        free(t), free(l);
        return FLUX_ERR_NOMEM;
    }
    used = (size_t)snprintf(t, cap, "%s", prompt ? prompt : "");
    l[0] = '\0';
    for (int i = 0; i < n; i++) {
        const adapter *a = &ctx->adapters->a[i];
        if (a->scale == 0.0f) continue;
        used += (size_t)snprintf(t + used, cap - used, " <lora:%s:%g>", a->name, (double)a->scale);
        lused += (size_t)snprintf(l + lused, cap - lused, "%s%s:%g", lused ? ", " : "", a->name, (double)a->scale);
    }
    *tagged = t;
    if (lused) *list = l;
    else free(l);
    return FLUX_OK;
}
