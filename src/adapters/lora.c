/*
 * lora.c — an adapter file → modules of the model (lora.h).
 *
 *   1. The model's modules: every linear weight of its set under its
 *      diffusers name and its BFL name (single_file.h), in lookup form
 *      (fx_lora_flat_name), each with the rows of the tensors it covers.
 *   2. The file's keys, classified (lora_keys.c) and grouped by module.
 *   3. Each group: text encoder → ignored; refused scheme → error; no
 *      module → ignored with a warning; else checked against the module's
 *      shape and turned into an fx_delta (views into the mapped file, or f32
 *      products built here for factored LoKr / LoHa).
 */
#include "lora.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/json.h"
#include "src/formats/single_file.h"

/* ------------------------------------------------------------------------ */
/* The model's modules                                                      */
/* ------------------------------------------------------------------------ */

typedef struct target {
    char flat[FX_ST_MAX_NAME];
    int bfl;                 /* BFL name (else diffusers) */
    int dotted;              /* the name has a '.' (flattening changes it) */
    int ambiguous;           /* two modules share the lookup form */
    int64_t out, in;
    int n_pieces;
    fx_lora_piece piece[3];
} target;

typedef struct target_table {
    target *t;
    size_t n, cap;
} target_table;

static target *add_target(target_table *tt, const char *name, size_t len, int bfl) {
    if (tt->n == tt->cap) {
        size_t cap = tt->cap ? 2 * tt->cap : 64;
        target *grown = realloc(tt->t, cap * sizeof *grown);
        if (!grown) return NULL;
        tt->t = grown, tt->cap = cap;
    }
    target *t = &tt->t[tt->n++];
    memset(t, 0, sizeof *t);
    fx_lora_flat_name(name, len, t->flat, sizeof t->flat);
    t->bfl = bfl;
    t->dotted = memchr(name, '.', len) != NULL;
    return t;
}

static int cmp_target(const void *a, const void *b) {
    return strcmp(((const target *)a)->flat, ((const target *)b)->flat);
}

static const target *find_target(const target_table *tt, const char *flat) {
    target key;
    snprintf(key.flat, sizeof key.flat, "%s", flat);
    return bsearch(&key, tt->t, tt->n, sizeof *tt->t, cmp_target);
}

static int64_t rows_of(const fx_wset *model, const char *tensor) {
    const fx_tensor *t = fx_wset_find(model, tensor);
    return t && t->shape.ndim == 2 ? t->shape.d[0] : -1;
}

/* The BFL module holding `diffusers` (once per BFL name: the first of its
 * q/k/v thirds adds it). */
static int add_bfl_target(target_table *tt, const fx_wset *model, const char *diffusers, int64_t in) {
    char bfl[FX_ST_MAX_NAME];
    fx_bfl_target tg[3];
    if (!fx_bfl_name_of(diffusers, bfl, sizeof bfl)) return 0;
    int k = fx_bfl_map_name(bfl, bfl, 0, tg);
    if (k < 1 || strcmp(tg[0].name, diffusers)) return 0; /* not the first target: added by it */
    int64_t rows = rows_of(model, tg[0].name), total = k == 3 ? 3 * rows : rows;
    for (int j = 1; j < k; j++)
        if (rows_of(model, tg[j].name) != rows) return 0; /* a third is missing or differs */
    if (rows < 1 || fx_bfl_map_name(bfl, bfl, total, tg) != k) return 0;
    size_t len = strlen(bfl) - strlen(".weight");
    target *t = add_target(tt, bfl, len, 1);
    if (!t) return -1;
    t->out = total, t->in = in;
    for (int j = 0; j < k; j++) {
        int64_t acc = 0;
        for (int r = 0; r < tg[j].n_ranges && t->n_pieces < 3; r++) {
            fx_lora_piece *p = &t->piece[t->n_pieces++];
            _Static_assert(sizeof p->tensor >= sizeof tg[j].name, "piece names hold BFL target names");
            memcpy(p->tensor, tg[j].name, sizeof tg[j].name);
            p->tensor_row0 = acc, p->src_row0 = tg[j].ranges[r].row0, p->rows = tg[j].ranges[r].rows;
            acc += p->rows;
        }
    }
    return 0;
}

static flux_status build_targets(const fx_wset *model, target_table *tt, fx_err *err) {
    const size_t wlen = strlen(".weight");
    for (size_t i = 0; i < fx_wset_count(model); i++) {
        const fx_tensor *w = fx_wset_tensor_at(model, i);
        size_t len = strlen(w->name);
        if (w->shape.ndim != 2 || len <= wlen || strcmp(w->name + len - wlen, ".weight") ||
            len >= FX_ST_MAX_NAME)
            continue;
        target *t = add_target(tt, w->name, len - wlen, 0);
        if (!t) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (LoRA module table)");
        t->out = w->shape.d[0], t->in = w->shape.d[1];
        t->n_pieces = 1;
        snprintf(t->piece[0].tensor, sizeof t->piece[0].tensor, "%s", w->name);
        t->piece[0].rows = t->out;
        if (add_bfl_target(tt, model, w->name, w->shape.d[1]))
            return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (LoRA module table)");
    }
    qsort(tt->t, tt->n, sizeof *tt->t, cmp_target);
    for (size_t i = 1; i < tt->n; i++)
        if (!strcmp(tt->t[i].flat, tt->t[i - 1].flat)) tt->t[i].ambiguous = tt->t[i - 1].ambiguous = 1;
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* The adapter                                                              */
/* ------------------------------------------------------------------------ */

struct fx_lora {
    fx_wset *file;
    fx_lora_module *modules;
    size_t n, cap;
    void **owned;            /* f32 factors built here, module keys */
    size_t n_owned, cap_owned;
};

static int own(fx_lora *l, void *p) {
    if (!p) return -1;
    if (l->n_owned == l->cap_owned) {
        size_t cap = l->cap_owned ? 2 * l->cap_owned : 64;
        void **grown = realloc(l->owned, cap * sizeof *grown);
        if (!grown) {
            free(p);
            return -1;
        }
        l->owned = grown, l->cap_owned = cap;
    }
    l->owned[l->n_owned++] = p;
    return 0;
}

void fx_lora_free(fx_lora *l) {
    if (!l) return;
    for (size_t i = 0; i < l->n_owned; i++) free(l->owned[i]);
    free(l->owned);
    free(l->modules);
    fx_wset_close(l->file);
    free(l);
}

size_t fx_lora_count(const fx_lora *l) { return l->n; }
const fx_lora_module *fx_lora_module_at(const fx_lora *l, size_t i) { return i < l->n ? &l->modules[i] : NULL; }

/* ------------------------------------------------------------------------ */
/* Keys grouped by module                                                   */
/* ------------------------------------------------------------------------ */

typedef struct entry {
    const fx_tensor *t;
    fx_lora_key key;
} entry;

static int cmp_entry(const void *a, const void *b) {
    const entry *x = a, *y = b;
    size_t n = x->key.stem_len < y->key.stem_len ? x->key.stem_len : y->key.stem_len;
    int c = memcmp(x->t->name, y->t->name, n);
    if (c) return c;
    if (x->key.stem_len != y->key.stem_len) return x->key.stem_len < y->key.stem_len ? -1 : 1;
    return (int)x->key.part - (int)y->key.part;
}

static int same_stem(const entry *a, const entry *b) {
    return a->key.stem_len == b->key.stem_len && !memcmp(a->t->name, b->t->name, a->key.stem_len);
}

/* The file's alpha settings from "lora_adapter_metadata" (PEFT/diffusers). */
typedef struct peft_meta {
    fx_json_doc *doc;
    const fx_json *root;
    const char *prefix;      /* "transformer." or "" */
    int has_alpha;
    double alpha;
    int rslora;
    int dora;                /* use_dora: true (every LoRA module has a magnitude) */
} peft_meta;

static const fx_json *meta_get(const peft_meta *pm, const char *name) {
    char key[64];
    snprintf(key, sizeof key, "%s%s", pm->prefix, name);
    return fx_json_get(pm->root, key);
}

static flux_status read_meta(const fx_wset *file, peft_meta *pm, fx_err *err) {
    memset(pm, 0, sizeof *pm);
    const fx_tensor_file *f = fx_wset_file_at(file, 0);
    const char *text = f ? fx_tensor_file_metadata(f, "lora_adapter_metadata") : NULL;
    if (!text) return FLUX_OK;
    fx_err jerr = {0};
    pm->doc = fx_json_parse(text, strlen(text), &jerr);
    if (!pm->doc || !fx_json_is_object(fx_json_root(pm->doc)))
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: header metadata \"lora_adapter_metadata\" is not a JSON object%s%s",
                       fx_wset_display(file), jerr.msg[0] ? ": " : "", jerr.msg);
    pm->root = fx_json_root(pm->doc);
    pm->prefix = fx_json_get(pm->root, "transformer.lora_alpha") || fx_json_get(pm->root, "transformer.r") ||
                         fx_json_get(pm->root, "transformer.use_dora")
                     ? "transformer."
                     : "";
    const fx_json *a = meta_get(pm, "lora_alpha"), *dora = meta_get(pm, "use_dora"), *rs = meta_get(pm, "use_rslora");
    pm->dora = fx_json_is_bool(dora) && fx_json_bool(dora);
    if (a) {
        if (!fx_json_is_number(a) || !isfinite(fx_json_num(a)))
            return fx_fail(err, FLUX_ERR_FORMAT, "%s: lora_adapter_metadata: %slora_alpha is not a finite number",
                           fx_wset_display(file), pm->prefix);
        pm->has_alpha = 1, pm->alpha = fx_json_num(a);
    }
    pm->rslora = fx_json_is_bool(rs) && fx_json_bool(rs);
    return FLUX_OK;
}

/* α of a module from the metadata: an alpha_pattern entry equal to its name
 * or to a dotted suffix of it, else lora_alpha. */
static flux_status meta_alpha(const fx_wset *file, const peft_meta *pm, const char *stem, size_t stem_len,
                              int *has, double *alpha, fx_err *err) {
    *has = pm->has_alpha, *alpha = pm->alpha;
    const fx_json *pat = pm->root ? meta_get(pm, "alpha_pattern") : NULL;
    if (!fx_json_is_object(pat)) return FLUX_OK;
    for (size_t i = 0; i < fx_json_len(pat); i++) {
        const char *k = fx_json_key_at(pat, i);
        size_t kl = strlen(k);
        if (!kl || kl > stem_len || memcmp(stem + stem_len - kl, k, kl) || (kl < stem_len && stem[stem_len - kl - 1] != '.'))
            continue;
        const fx_json *v = fx_json_at(pat, i);
        if (!fx_json_is_number(v) || !isfinite(fx_json_num(v)))
            return fx_fail(err, FLUX_ERR_FORMAT, "%s: lora_adapter_metadata: alpha_pattern '%.200s' is not a finite number",
                           fx_wset_display(file), k);
        *has = 1, *alpha = fx_json_num(v);
    }
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* One module                                                               */
/* ------------------------------------------------------------------------ */

typedef struct group {
    const entry *part[FX_LORA_PART_COUNT];
    const char *stem;        /* the first key (stem = its first stem_len bytes) */
    size_t stem_len;
} group;

typedef struct open_ctx {
    fx_lora *l;
    fx_wset *file;
    const fx_kctx *kc;
    const char *path;
    fx_err *err;
} open_ctx;

static flux_status module_fail(const open_ctx *o, const group *g, flux_status code, const char *fmt, ...) FX_PRINTF(4, 5);
static flux_status module_fail(const open_ctx *o, const group *g, flux_status code, const char *fmt, ...) {
    char what[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return fx_fail(o->err, code, "%s: module '%.*s': %s", o->path, (int)(g->stem_len < 200 ? g->stem_len : 200), g->stem,
                   what);
}

static const char *part_name(const group *g, fx_lora_part p) { return g->part[p]->t->name; }

/* A 2-D factor of the file; rows/cols < 0 = any. */
static flux_status factor(const open_ctx *o, const group *g, fx_lora_part p, int64_t rows, int64_t cols, fx_weight *w) {
    const fx_tensor *t = g->part[p]->t;
    char shape[160];
    fx_shape_str(&t->shape, shape, sizeof shape);
    if (t->shape.ndim != 2 || t->shape.d[0] < 1 || t->shape.d[1] < 1)
        return fx_fail(o->err, FLUX_ERR_MODEL, "%s: tensor '%.200s' has shape %s, expected a non-empty matrix", o->path,
                       t->name, shape);
    if ((rows >= 0 && t->shape.d[0] != rows) || (cols >= 0 && t->shape.d[1] != cols)) {
        char want[80], r[24] = "r", c[24] = "r";
        if (rows >= 0) snprintf(r, sizeof r, "%lld", (long long)rows);
        if (cols >= 0) snprintf(c, sizeof c, "%lld", (long long)cols);
        snprintf(want, sizeof want, "[%s, %s]", r, c);
        return fx_fail(o->err, FLUX_ERR_MODEL, "%s: tensor '%.200s' has shape %s, but module '%.*s' needs %s", o->path,
                       t->name, shape, (int)(g->stem_len < 200 ? g->stem_len : 200), g->stem, want);
    }
    flux_status st = fx_wset_linear(o->file, t->name, t->shape.d[0], t->shape.d[1], w, o->err);
    if (!st && w->dtype != FX_DTYPE_F32 && w->dtype != FX_DTYPE_F16 && w->dtype != FX_DTYPE_BF16)
        return fx_fail(o->err, FLUX_ERR_UNSUPPORTED, "%s: tensor '%.200s' has dtype %s; adapter factors must be F32, "
                       "F16 or BF16", o->path, t->name, fx_dtype_name(w->dtype));
    return st;
}

/* A scalar .alpha of any float or integer dtype. */
static flux_status read_alpha(const open_ctx *o, const group *g, double *alpha) {
    const fx_tensor *t = g->part[FX_LORA_ALPHA]->t;
    const unsigned char *p = fx_tensor_data(t);
    if (fx_shape_numel(&t->shape) != 1 || t->shape.ndim > 1 || !p)
        return fx_fail(o->err, FLUX_ERR_MODEL, "%s: tensor '%.200s': alpha must be a single number", o->path, t->name);
    double v;
    if (fx_dtype_is_weight(t->dtype)) {
        float f;
        fx_tensor_convert_f32(p, t->dtype, 1, &f);
        v = f;
    } else if (t->dtype == FX_DTYPE_F64) {
        memcpy(&v, p, 8);
    } else if (t->dtype == FX_DTYPE_I64 || t->dtype == FX_DTYPE_I32 || t->dtype == FX_DTYPE_I16 || t->dtype == FX_DTYPE_I8 ||
               t->dtype == FX_DTYPE_U8) {
        int64_t i = 0;
        size_t n = fx_dtype_size(t->dtype);
        memcpy(&i, p, n);
        if (t->dtype != FX_DTYPE_U8 && n < 8 && (i >> (8 * n - 1) & 1)) i -= (int64_t)1 << (8 * n); /* sign */
        v = (double)i;
    } else {
        return fx_fail(o->err, FLUX_ERR_MODEL, "%s: tensor '%.200s': alpha has dtype %s", o->path, t->name,
                       fx_dtype_name(t->dtype));
    }
    if (!isfinite(v))
        return fx_fail(o->err, FLUX_ERR_MODEL, "%s: tensor '%.200s': alpha is %g (not finite)", o->path, t->name, v);
    *alpha = v;
    return FLUX_OK;
}

/* An f32 copy of a factor, or its transpose. */
static float *to_f32(const open_ctx *o, const fx_weight *w, int transpose) {
    float *row = malloc((size_t)w->k * sizeof *row), *out = malloc((size_t)(w->n * w->k) * sizeof *out);
    if (!row || !out) {
        free(row), free(out);
        fx_fail(o->err, FLUX_ERR_NOMEM, "%s: out of memory for a %lldx%lld factor", o->path, (long long)w->n,
                (long long)w->k);
        return NULL;
    }
    const fx_dtype st = w->dtype == FX_DTYPE_F32 ? FX_DTYPE_F32 : w->dtype == FX_DTYPE_F16 ? FX_DTYPE_F16 : FX_DTYPE_BF16;
    for (int64_t i = 0; i < w->n; i++) {
        fx_tensor_convert_f32((const char *)w->data + (size_t)(i * w->ld) * fx_dtype_size(w->dtype), st, w->k, row);
        for (int64_t j = 0; j < w->k; j++) out[transpose ? j * w->n + i : i * w->k + j] = row[j];
    }
    free(row);
    return out;
}

/* P = wa·wb in f32 [wa.n, wb.k], owned by the adapter (a temporary with
 * keep = 0: free() it). */
static float *product(const open_ctx *o, const fx_weight *wa, const fx_weight *wb, int keep) {
    float *a = to_f32(o, wa, 0), *bt = a ? to_f32(o, wb, 1) : NULL;
    float *p = bt ? malloc((size_t)(wa->n * wb->k) * sizeof *p) : NULL;
    if (bt && !p)
        fx_fail(o->err, FLUX_ERR_NOMEM, "%s: out of memory for a %lldx%lld product", o->path, (long long)wa->n,
                (long long)wb->k);
    if (p) {
        fx_weight w = {.data = bt, .dtype = FX_DTYPE_F32, .n = wb->k, .k = wb->n, .ld = wb->n}; /* wbᵀ [q, r] */
        fx_linear(o->kc, wa->n, a, wa->k, &w, p, wb->k, NULL);
    }
    free(a), free(bt);
    if (p && keep && own(o->l, p)) {
        fx_fail(o->err, FLUX_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return p;
}

/* A factor given whole (`full`) or as the product of two (`fa`·`fb`). Sets
 * *rank to the inner dimension of a product (0 when whole). With `left`,
 * a product stays two factors: *left = fa, *w = fb; else it is multiplied
 * out in f32. */
static flux_status whole_or_product(const open_ctx *o, const group *g, fx_lora_part full, fx_lora_part fa,
                                    fx_lora_part fb, fx_weight *w, int64_t *rank, fx_weight *left) {
    *rank = 0;
    if (g->part[full]) {
        if (g->part[fa] || g->part[fb])
            return module_fail(o, g, FLUX_ERR_MODEL, "'%s' and its factors '%s' are both given", part_name(g, full),
                               part_name(g, g->part[fa] ? fa : fb));
        return factor(o, g, full, -1, -1, w);
    }
    if (!g->part[fa] && !g->part[fb])
        return module_fail(o, g, FLUX_ERR_MODEL, "LoKr without its W%c factor (lokr_w%c, or lokr_w%c_a and lokr_w%c_b)",
                           full == FX_LORA_LOKR_W1 ? '1' : '2', full == FX_LORA_LOKR_W1 ? '1' : '2',
                           full == FX_LORA_LOKR_W1 ? '1' : '2', full == FX_LORA_LOKR_W1 ? '1' : '2');
    if (!g->part[fa] || !g->part[fb])
        return module_fail(o, g, FLUX_ERR_MODEL, "'%s' has no partner factor", part_name(g, g->part[fa] ? fa : fb));
    fx_weight a = {0}, b = {0};
    TRY(factor(o, g, fa, -1, -1, &a));
    TRY(factor(o, g, fb, a.k, -1, &b));
    *rank = a.k;
    if (left) {
        *left = a, *w = b;
        return FLUX_OK;
    }
    float *p = product(o, &a, &b, 1);
    if (!p) return o->err->code;
    *w = (fx_weight){.data = p, .dtype = FX_DTYPE_F32, .n = a.n, .k = b.k, .ld = b.k};
    return FLUX_OK;
}

/* LoHa: ΔW = (w1a·w1b) ⊙ (w2a·w2b), w1a [out, r1], w1b [r1, in], w2a
 * [out, r2], w2b [r2, in]. Entry (i, j) is Σ_p Σ_q w1a[i,p]·w2a[i,q] ·
 * w1b[p,j]·w2b[q,j]: ΔW = B'·A' of rank r1·r2 (a Khatri–Rao product) with
 * B'[i, p·r2 + q] = w1a[i,p]·w2a[i,q] and A'[p·r2 + q, j] = w1b[p,j]·w2b[q,j].
 * That form is kept (LOWRANK, f32) when it is smaller than ΔW,
 * r1·r2·(out + in) < out·in, as it is for the usual ranks (r ≤ 32 on
 * 3072-wide layers: 4x..24x less memory and work); otherwise ΔW itself is
 * built in f32 (DENSE). */
static flux_status loha_delta(const open_ctx *o, const fx_weight *w1a, const fx_weight *w1b, const fx_weight *w2a,
                              const fx_weight *w2b, fx_delta *d) {
    const int64_t out = w1a->n, in = w1b->k, r1 = w1a->k, r2 = w2a->k, r = r1 * r2;
    if ((double)r * (double)(out + in) < (double)out * (double)in) {
        float *f1a = to_f32(o, w1a, 0), *f1b = f1a ? to_f32(o, w1b, 0) : NULL, *f2a = f1b ? to_f32(o, w2a, 0) : NULL,
              *f2b = f2a ? to_f32(o, w2b, 0) : NULL;
        float *a = f2b ? malloc((size_t)(r * in) * sizeof *a) : NULL, *b = a ? malloc((size_t)(out * r) * sizeof *b) : NULL;
        if (b) {
            for (int64_t p = 0; p < r1; p++)
                for (int64_t q = 0; q < r2; q++)
                    for (int64_t j = 0; j < in; j++) a[(p * r2 + q) * in + j] = f1b[p * in + j] * f2b[q * in + j];
            for (int64_t i = 0; i < out; i++)
                for (int64_t p = 0; p < r1; p++)
                    for (int64_t q = 0; q < r2; q++) b[i * r + p * r2 + q] = f1a[i * r1 + p] * f2a[i * r2 + q];
        }
        free(f1a), free(f1b), free(f2a), free(f2b);
        int failed = !b;
        if (!b) free(a);
        else if (own(o->l, a)) free(b), failed = 1; /* own() frees what it cannot keep */
        else failed = own(o->l, b) != 0;
        if (failed) return fx_fail(o->err, FLUX_ERR_NOMEM, "%s: out of memory for a LoHa of rank %lld", o->path, (long long)r);
        d->kind = FX_DELTA_LOWRANK;
        d->a = (fx_weight){.data = a, .dtype = FX_DTYPE_F32, .n = r, .k = in, .ld = in};
        d->b = (fx_weight){.data = b, .dtype = FX_DTYPE_F32, .n = out, .k = r, .ld = r};
        return FLUX_OK;
    }
    float *p1 = product(o, w1a, w1b, 1), *p2 = p1 ? product(o, w2a, w2b, 0) : NULL;
    if (!p2) return o->err->code;
    for (int64_t i = 0; i < out * in; i++) p1[i] *= p2[i];
    free(p2);
    d->kind = FX_DELTA_DENSE;
    d->a = (fx_weight){.data = p1, .dtype = FX_DTYPE_F32, .n = out, .k = in, .ld = in};
    return FLUX_OK;
}

/* DoRA's magnitude m [out] as f32 (owned): ai-toolkit / PEFT [out], LyCORIS
 * dora_scale [out, 1]; LyCORIS' per-input form [1, in] is refused. */
static flux_status read_magnitude(const open_ctx *o, const group *g, const target *t, const float **out) {
    const fx_lora_part p = g->part[FX_LORA_MAGNITUDE] ? FX_LORA_MAGNITUDE : FX_LORA_DORA_SCALE;
    const fx_tensor *mt = g->part[p]->t;
    const fx_shape *sh = &mt->shape;
    char shape[160];
    fx_shape_str(sh, shape, sizeof shape);
    if (sh->ndim == 2 && sh->d[0] == 1 && sh->d[1] == t->in && !(t->in == t->out && p == FX_LORA_MAGNITUDE))
        return fx_fail(o->err, FLUX_ERR_UNSUPPORTED,
                       "%s: tensor '%.200s' has shape %s: DoRA with norms per input (LyCORIS wd_on_out=False) is not supported",
                       o->path, mt->name, shape);
    const int per_out = (sh->ndim == 1 && sh->d[0] == t->out) || (sh->ndim == 2 && sh->d[0] == t->out && sh->d[1] == 1);
    if (!per_out)
        return fx_fail(o->err, FLUX_ERR_MODEL, "%s: tensor '%.200s' has shape %s, but module '%.*s' needs a DoRA magnitude [%lld]%s",
                       o->path, mt->name, shape, (int)(g->stem_len < 200 ? g->stem_len : 200), g->stem, (long long)t->out,
                       p == FX_LORA_DORA_SCALE ? " or [out, 1]" : "");
    if ((mt->dtype != FX_DTYPE_F32 && mt->dtype != FX_DTYPE_F16 && mt->dtype != FX_DTYPE_BF16) || !fx_tensor_data(mt))
        return fx_fail(o->err, FLUX_ERR_MODEL, "%s: tensor '%.200s': a DoRA magnitude of dtype %s (F32, F16 or BF16 expected)",
                       o->path, mt->name, fx_dtype_name(mt->dtype));
    float *m = malloc((size_t)t->out * sizeof *m);
    if (!m || own(o->l, m)) return fx_fail(o->err, FLUX_ERR_NOMEM, "out of memory");
    fx_tensor_convert_f32(fx_tensor_data(mt), mt->dtype, (size_t)t->out, m);
    for (int64_t i = 0; i < t->out; i++)
        if (!isfinite(m[i]))
            return fx_fail(o->err, FLUX_ERR_MODEL, "%s: tensor '%.200s': magnitude %lld is %g (not finite)", o->path,
                           mt->name, (long long)i, (double)m[i]);
    *out = m;
    return FLUX_OK;
}

static flux_status build_module(const open_ctx *o, const group *g, const target *t, const peft_meta *pm,
                                fx_lora_module *m) {
    const int has_lora = g->part[FX_LORA_A] || g->part[FX_LORA_B];
    const int has_lokr = g->part[FX_LORA_LOKR_W1] || g->part[FX_LORA_LOKR_W1_A] || g->part[FX_LORA_LOKR_W1_B] ||
                         g->part[FX_LORA_LOKR_W2] || g->part[FX_LORA_LOKR_W2_A] || g->part[FX_LORA_LOKR_W2_B];
    const int has_loha = g->part[FX_LORA_HADA_W1_A] || g->part[FX_LORA_HADA_W1_B] || g->part[FX_LORA_HADA_W2_A] ||
                         g->part[FX_LORA_HADA_W2_B];
    const int has_diff = g->part[FX_LORA_DIFF] != NULL;
    const int has_dora = g->part[FX_LORA_MAGNITUDE] || g->part[FX_LORA_DORA_SCALE];
    if (has_lora + has_lokr + has_loha + has_diff == 0)
        return module_fail(o, g, FLUX_ERR_MODEL, "'%s' without any factor to scale",
                           part_name(g, g->part[FX_LORA_ALPHA] ? FX_LORA_ALPHA
                                        : g->part[FX_LORA_MAGNITUDE] ? FX_LORA_MAGNITUDE : FX_LORA_DORA_SCALE));
    if (g->part[FX_LORA_MAGNITUDE] && g->part[FX_LORA_DORA_SCALE])
        return module_fail(o, g, FLUX_ERR_MODEL, "two DoRA magnitudes ('%s' and '%s')", part_name(g, FX_LORA_MAGNITUDE),
                           part_name(g, FX_LORA_DORA_SCALE));
    if (has_lora && pm->dora && !has_dora)
        return module_fail(o, g, FLUX_ERR_MODEL,
                           "lora_adapter_metadata says use_dora: true, but the module has no magnitude (lora_magnitude_vector)");
    if (has_lora + has_lokr + has_loha + has_diff > 1)
        return module_fail(o, g, FLUX_ERR_MODEL, "mixes %s%s%s%sfactors", has_lora ? "LoRA " : "",
                           has_lokr ? "LoKr " : "", has_loha ? "LoHa " : "", has_diff ? "diff " : "");
    double alpha = 0;
    int has_alpha = g->part[FX_LORA_ALPHA] != NULL;
    if (has_alpha) TRY(read_alpha(o, g, &alpha));
    fx_delta *d = &m->delta;
    memset(m, 0, sizeof *m);
    if (has_dora) TRY(read_magnitude(o, g, t, &m->magnitude));
    d->rows = t->out;
    m->in = t->in;
    double scale = 1.0;
    if (has_lora) {
        if (!g->part[FX_LORA_A] || !g->part[FX_LORA_B])
            return module_fail(o, g, FLUX_ERR_MODEL, "'%s' has no partner (%s)",
                               part_name(g, g->part[FX_LORA_A] ? FX_LORA_A : FX_LORA_B),
                               g->part[FX_LORA_A] ? "up / lora_B" : "down / lora_A");
        d->kind = FX_DELTA_LOWRANK;
        TRY(factor(o, g, FX_LORA_A, -1, t->in, &d->a));
        const fx_tensor *b = g->part[FX_LORA_B]->t;
        if (b->shape.ndim == 2 && b->shape.d[1] != d->a.n && b->shape.d[0] == t->out)
            return module_fail(o, g, FLUX_ERR_MODEL, "rank mismatch: '%s' has rank %lld, '%s' has rank %lld",
                               part_name(g, FX_LORA_A), (long long)d->a.n, part_name(g, FX_LORA_B),
                               (long long)b->shape.d[1]);
        TRY(factor(o, g, FX_LORA_B, t->out, d->a.n, &d->b));
        if (!has_alpha) TRY(meta_alpha(o->file, pm, g->stem, g->stem_len, &has_alpha, &alpha, o->err));
        const double r = (double)d->a.n;
        if (has_alpha) scale = alpha / (pm->rslora && !g->part[FX_LORA_ALPHA] ? sqrt(r) : r);
    } else if (has_lokr) {
        int64_t r1, r2;
        d->kind = FX_DELTA_KRON;
        /* W1 is small (multiplied out when factored); a factored W2 stays two
         * factors, used in place: the kernel applies it as a product */
        TRY(whole_or_product(o, g, FX_LORA_LOKR_W1, FX_LORA_LOKR_W1_A, FX_LORA_LOKR_W1_B, &d->b, &r1, NULL));
        TRY(whole_or_product(o, g, FX_LORA_LOKR_W2, FX_LORA_LOKR_W2_A, FX_LORA_LOKR_W2_B, &d->a, &r2, &d->c));
        const int64_t k2 = r2 ? d->c.n : d->a.n, n2 = d->a.k;
        if (d->b.n * k2 != t->out || d->b.k * n2 != t->in)
            return module_fail(o, g, FLUX_ERR_MODEL,
                               "LoKr factors W1 [%lld, %lld] ⊗ W2 [%lld, %lld] make [%lld, %lld], the module is [%lld, %lld]",
                               (long long)d->b.n, (long long)d->b.k, (long long)k2, (long long)n2,
                               (long long)(d->b.n * k2), (long long)(d->b.k * n2), (long long)t->out, (long long)t->in);
        const int64_t dim = r2 ? r2 : r1;
        if (has_alpha && dim) scale = alpha / (double)dim;
    } else if (has_loha) {
        fx_weight w1a = {0}, w1b = {0}, w2a = {0}, w2b = {0};
        for (int p = FX_LORA_HADA_W1_A; p <= FX_LORA_HADA_W2_B; p++)
            if (!g->part[p]) return module_fail(o, g, FLUX_ERR_MODEL, "LoHa without its hada_w%c_%c factor",
                                                p <= FX_LORA_HADA_W1_B ? '1' : '2', (p - FX_LORA_HADA_W1_A) % 2 ? 'b' : 'a');
        TRY(factor(o, g, FX_LORA_HADA_W1_A, t->out, -1, &w1a));
        TRY(factor(o, g, FX_LORA_HADA_W1_B, w1a.k, t->in, &w1b));
        TRY(factor(o, g, FX_LORA_HADA_W2_A, t->out, -1, &w2a));
        TRY(factor(o, g, FX_LORA_HADA_W2_B, w2a.k, t->in, &w2b));
        TRY(loha_delta(o, &w1a, &w1b, &w2a, &w2b, d));
        if (has_alpha) scale = alpha / (double)w1a.k;
    } else {
        d->kind = FX_DELTA_DENSE;
        TRY(factor(o, g, FX_LORA_DIFF, t->out, t->in, &d->a));
    }
    if (!isfinite(scale) || !isfinite((float)scale))
        return module_fail(o, g, FLUX_ERR_MODEL, "scale α/r = %g is not finite", scale);
    d->scale = (float)scale;
    char *key = malloc(g->stem_len + 1);
    if (!key || own(o->l, key)) return fx_fail(o->err, FLUX_ERR_NOMEM, "out of memory");
    memcpy(key, g->stem, g->stem_len);
    key[g->stem_len] = '\0';
    m->key = key;
    m->n_pieces = t->n_pieces;
    memcpy(m->piece, t->piece, sizeof m->piece);
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Opening                                                                  */
/* ------------------------------------------------------------------------ */

/* Note an ignored key: counted, and the first few named in *names. */
static void note_ignored(char *names, size_t size, size_t *count, const char *key) {
    if (*count < 3) {
        size_t len = strlen(names);
        snprintf(names + len, size - len, "%s'%.100s'", len ? ", " : "", key);
    }
    (*count)++;
}

static void add_word(char *list, size_t size, const char *w) {
    if (strstr(list, w)) return;
    size_t len = strlen(list);
    snprintf(list + len, size - len, "%s%s", len ? "+" : "", w);
}

fx_lora *fx_lora_open(const char *path, const fx_wset *model, const fx_kctx *kc, int use_mmap, fx_lora_report *rep,
                      fx_err *err) {
    fx_lora_report local;
    if (!rep) rep = &local;
    memset(rep, 0, sizeof *rep);
    fx_lora *l = calloc(1, sizeof *l);
    target_table tt = {0};
    entry *e = NULL;
    peft_meta pm = {0};
    char unmatched[400] = "", te_first[200] = "";
    size_t te_keys = 0;
    int ok = 0, names_seen[3] = {0, 0, 0}; /* diffusers, BFL, flattened */
    if (!l) {
        fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", path);
        return NULL;
    }
    open_ctx o = {l, NULL, kc, path, err};
    if (!(l->file = fx_wset_open(path, path, use_mmap, err))) goto out;
    o.file = l->file;
    if (build_targets(model, &tt, err) || read_meta(l->file, &pm, err)) goto out;
    const size_t n = fx_wset_count(l->file);
    rep->keys = n;
    e = calloc(n ? n : 1, sizeof *e);
    if (!e) {
        fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", path);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        e[i].t = fx_wset_tensor_at(l->file, i);
        fx_lora_parse_key(e[i].t->name, &e[i].key);
    }
    qsort(e, n, sizeof *e, cmp_entry);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && same_stem(&e[i], &e[j])) j++;
        group g = {.stem = e[i].t->name, .stem_len = e[i].key.stem_len};
        if (e[i].key.text_encoder) {
            for (size_t q = i; q < j; q++) note_ignored(te_first, sizeof te_first, &te_keys, e[q].t->name);
            i = j;
            continue;
        }
        int dup = 0;
        for (size_t q = i; q < j; q++) {
            const entry *x = &e[q];
            if (x->key.part == FX_LORA_REFUSED) {
                fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s: tensor '%.200s': %s is not supported", path, x->t->name,
                        x->key.scheme);
                goto out;
            }
            if (x->key.part == FX_LORA_UNKNOWN) {
                fx_fail(err, FLUX_ERR_UNSUPPORTED,
                        "%s: tensor '%.200s': its suffix is no factor of an adapter scheme flux.c knows (LoRA, LoKr, "
                        "LoHa, diff, DoRA); refused rather than ignored",
                        path, x->t->name);
                goto out;
            }
            if (x->key.part == FX_LORA_DIFF_B) continue;
            if (g.part[x->key.part]) dup = 1;
            g.part[x->key.part] = x;
        }
        if (dup) {
            module_fail(&o, &g, FLUX_ERR_MODEL, "a factor is given twice (e.g. both lora_A and lora_down)");
            goto out;
        }
        char flat[FX_ST_MAX_NAME];
        const target *t = NULL;
        if (fx_lora_flat_name(g.stem, g.stem_len, flat, sizeof flat) <= sizeof flat) t = find_target(&tt, flat);
        int any = 0;
        for (int p = 1; p < FX_LORA_PART_COUNT; p++) any |= g.part[p] != NULL;
        if (t && t->ambiguous) {
            module_fail(&o, &g, FLUX_ERR_MODEL, "the name matches two modules of the model");
            goto out;
        }
        for (size_t q = i; q < j; q++) /* keys we cannot use, whether or not the module resolves */
            if (!t || !any || e[q].key.part == FX_LORA_UNKNOWN || e[q].key.part == FX_LORA_DIFF_B)
                note_ignored(unmatched, sizeof unmatched, &rep->unmatched, e[q].t->name);
        if (t && any) {
            if (l->n == l->cap) {
                size_t cap = l->cap ? 2 * l->cap : 64;
                fx_lora_module *grown = realloc(l->modules, cap * sizeof *grown);
                if (!grown) {
                    fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", path);
                    goto out;
                }
                l->modules = grown, l->cap = cap;
            }
            if (build_module(&o, &g, t, &pm, &l->modules[l->n])) goto out;
            char why[200];
            fx_delta shape = l->modules[l->n].delta;
            shape.scale = 1.0f; /* α = 0 is a valid (inert) module: only the shapes are checked */
            if (fx_delta_check(&shape, t->out, t->in, why, sizeof why)) {
                module_fail(&o, &g, FLUX_ERR_MODEL, "%s", why);
                goto out;
            }
            const fx_delta_kind kind = l->modules[l->n].delta.kind;
            add_word(rep->kinds, sizeof rep->kinds,
                     g.part[FX_LORA_HADA_W1_A] ? "LoHa" : kind == FX_DELTA_LOWRANK ? "LoRA" : kind == FX_DELTA_KRON ? "LoKr" : "diff");
            if (l->modules[l->n].magnitude) add_word(rep->kinds, sizeof rep->kinds, "DoRA");
            size_t bare_len = g.stem_len;
            const char *bare = fx_lora_strip_prefixes(g.stem, &bare_len);
            if (t->dotted) names_seen[!memchr(bare, '.', bare_len) ? 2 : t->bfl] = 1; /* "img_in" tells nothing */
            l->n++;
        }
        i = j;
    }
    rep->modules = l->n;
    rep->text_encoder = te_keys;
    snprintf(rep->naming, sizeof rep->naming, "%s%s%s%s%s", names_seen[0] ? "diffusers" : "",
             names_seen[0] && (names_seen[1] || names_seen[2]) ? " + " : "", names_seen[1] ? "BFL" : "",
             names_seen[1] && names_seen[2] ? " + " : "", names_seen[2] ? "flattened (kohya/LyCORIS)" : "");
    if (!l->n) {
        fx_fail(err, FLUX_ERR_MODEL,
                "%s: no key matches a module of the FLUX.2 transformer (%zu keys%s%s%s%s%s); is it an adapter for another model?",
                path, n, te_keys ? ", text encoder: " : "", te_first, rep->unmatched ? ", unmatched: " : "", unmatched,
                rep->unmatched > 3 ? ", ..." : "");
        goto out;
    }
    if (rep->unmatched || te_keys) {
        size_t len = 0;
        if (rep->unmatched)
            len = (size_t)snprintf(rep->warning, sizeof rep->warning, "%zu key%s match%s no module of the transformer and %s ignored: %s%s",
                                   rep->unmatched, rep->unmatched == 1 ? "" : "s", rep->unmatched == 1 ? "es" : "",
                                   rep->unmatched == 1 ? "is" : "are", unmatched, rep->unmatched > 3 ? ", ..." : "");
        if (te_keys && len < sizeof rep->warning)
            snprintf(rep->warning + len, sizeof rep->warning - len, "%s%zu text-encoder key%s ignored (%s%s)",
                     len ? "; " : "", te_keys, te_keys == 1 ? "" : "s", te_first, te_keys > 3 ? ", ..." : "");
    }
    ok = 1;
out:
    free(e);
    free(tt.t);
    fx_json_free(pm.doc);
    if (!ok) {
        fx_lora_free(l);
        return NULL;
    }
    return l;
}
