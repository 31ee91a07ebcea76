/*
 * gguf.c — the GGUF header reader (gguf.h): a bounds-checked cursor over
 * the file image, the key/value section, the tensor table and its checks.
 */
#include "gguf.h"
#include "name_table.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STRING (1ull << 30) /* as ggml: longer strings and arrays are refused */
#define MAX_NAME 65535

/* ------------------------------------------------------------------------ */
/* Cursor                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct cursor {
    const unsigned char *p;
    uint64_t pos, size;
    const char *display;
    fx_err *err;
} cursor;

static flux_status bad(cursor *c, const char *fmt, ...) FX_PRINTF(2, 3);
static flux_status bad(cursor *c, const char *fmt, ...) {
    char what[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return fx_fail(c->err, FLUX_ERR_FORMAT, "%s: GGUF: %s", c->display, what);
}

static uint64_t left(const cursor *c) { return c->size - c->pos; }

/* n bytes at the cursor (advancing), or NULL after reporting `what`. */
static const unsigned char *take(cursor *c, uint64_t n, const char *what) {
    if (n > left(c)) {
        bad(c, "file ends inside %s (offset %llu, %llu bytes needed, %llu left)", what, (unsigned long long)c->pos,
            (unsigned long long)n, (unsigned long long)left(c));
        return NULL;
    }
    const unsigned char *p = c->p + c->pos;
    c->pos += n;
    return p;
}

static uint64_t le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static flux_status rd_u32(cursor *c, uint32_t *v, const char *what) {
    const unsigned char *p = take(c, 4, what);
    if (!p) return FLUX_ERR_FORMAT;
    *v = (uint32_t)le(p, 4);
    return FLUX_OK;
}

static flux_status rd_u64(cursor *c, uint64_t *v, const char *what) {
    const unsigned char *p = take(c, 8, what);
    if (!p) return FLUX_ERR_FORMAT;
    *v = le(p, 8);
    return FLUX_OK;
}

/* A string's length and bytes (not copied). */
static flux_status rd_str(cursor *c, const unsigned char **s, uint64_t *len, const char *what) {
    TRY(rd_u64(c, len, what));
    if (*len > MAX_STRING) return bad(c, "%s is %llu bytes long (at most 2^30)", what, (unsigned long long)*len);
    *s = take(c, *len, what);
    return *s ? FLUX_OK : FLUX_ERR_FORMAT;
}

static char *dup_bytes(const unsigned char *s, uint64_t len) {
    char *d = malloc((size_t)len + 1);
    if (d) memcpy(d, s, (size_t)len), d[len] = '\0';
    return d;
}

/* A key or tensor name: non-empty, no NUL, at most MAX_NAME bytes; copied. */
static flux_status rd_name(cursor *c, char **out, const char *what) {
    const unsigned char *s;
    uint64_t len;
    TRY(rd_str(c, &s, &len, what));
    if (len == 0) return bad(c, "empty %s at offset %llu", what, (unsigned long long)(c->pos - 8));
    if (len > MAX_NAME) return bad(c, "%s of %llu bytes (at most %d)", what, (unsigned long long)len, MAX_NAME);
    if (memchr(s, 0, (size_t)len)) return bad(c, "%s '%.*s' contains a NUL byte", what, (int)strnlen((const char *)s, 200), s);
    if (!(*out = dup_bytes(s, len))) return fx_fail(c->err, FLUX_ERR_NOMEM, "%s: out of memory", c->display);
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Key/value section                                                        */
/* ------------------------------------------------------------------------ */

static const int vtype_size[FX_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const vtype_names[FX_GGUF_VTYPE_COUNT] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                                             "bool", "string", "array", "u64", "i64", "f64"};

/* A scalar of type t (not string/array) into kv. */
static flux_status rd_scalar(cursor *c, fx_gguf_vtype t, fx_gguf_kv *kv) {
    const unsigned char *p = take(c, (uint64_t)vtype_size[t], "a value");
    if (!p) return FLUX_ERR_FORMAT;
    uint64_t v = le(p, vtype_size[t]);
    switch (t) {
    case FX_GGUF_U8: case FX_GGUF_U16: case FX_GGUF_U32: case FX_GGUF_U64: kv->u = v; break;
    case FX_GGUF_I8: kv->i = (int8_t)v; break;
    case FX_GGUF_I16: kv->i = (int16_t)v; break;
    case FX_GGUF_I32: kv->i = (int32_t)v; break;
    case FX_GGUF_I64: kv->i = (int64_t)v; break;
    case FX_GGUF_F32: {
        float f;
        uint32_t u = (uint32_t)v;
        memcpy(&f, &u, 4);
        kv->f = f;
        break;
    }
    case FX_GGUF_F64: memcpy(&kv->f, &v, 8); break;
    case FX_GGUF_BOOL:
        if (v > 1) return bad(c, "key '%.200s': bool value %llu (must be 0 or 1)", kv->key, (unsigned long long)v);
        kv->u = v;
        break;
    default: break;
    }
    return FLUX_OK;
}

/* An array: element type, count, elements (skipped; strings length-checked). */
static flux_status rd_array(cursor *c, fx_gguf_kv *kv) {
    uint32_t et;
    uint64_t n;
    TRY(rd_u32(c, &et, "an array element type"));
    if (et >= FX_GGUF_VTYPE_COUNT) return bad(c, "key '%.200s': unknown array element type %u", kv->key, et);
    if (et == FX_GGUF_ARRAY) return bad(c, "key '%.200s': arrays of arrays are not supported", kv->key);
    TRY(rd_u64(c, &n, "an array length"));
    if (n > MAX_STRING) return bad(c, "key '%.200s': array of %llu elements (at most 2^30)", kv->key, (unsigned long long)n);
    kv->elem = (fx_gguf_vtype)et;
    kv->len = n;
    if (et == FX_GGUF_STRING) {
        if (n > left(c) / 8)
            return bad(c, "key '%.200s': %llu strings cannot fit in the %llu bytes left", kv->key, (unsigned long long)n,
                       (unsigned long long)left(c));
        for (uint64_t i = 0; i < n; i++) {
            const unsigned char *s;
            uint64_t len;
            TRY(rd_str(c, &s, &len, "an array string"));
        }
        return FLUX_OK;
    }
    const uint64_t es = (uint64_t)vtype_size[et];
    if (n > left(c) / es)
        return bad(c, "key '%.200s': array of %llu %s values runs past the end of the file", kv->key,
                   (unsigned long long)n, vtype_names[et]);
    const unsigned char *p = take(c, n * es, "an array");
    if (!p) return FLUX_ERR_FORMAT;
    if (et == FX_GGUF_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (p[i] > 1) return bad(c, "key '%.200s': bool element %llu is %u (must be 0 or 1)", kv->key, (unsigned long long)i, p[i]);
    return FLUX_OK;
}

static flux_status rd_kv(cursor *c, fx_gguf_kv *kv) {
    uint32_t t;
    TRY(rd_name(c, &kv->key, "key"));
    TRY(rd_u32(c, &t, "a value type"));
    if (t >= FX_GGUF_VTYPE_COUNT) return bad(c, "key '%.200s': unknown value type %u", kv->key, t);
    kv->type = (fx_gguf_vtype)t;
    if (t == FX_GGUF_ARRAY) return rd_array(c, kv);
    if (t == FX_GGUF_STRING) {
        const unsigned char *s;
        TRY(rd_str(c, &s, &kv->len, "a string value"));
        if (!(kv->str = dup_bytes(s, kv->len))) return fx_fail(c->err, FLUX_ERR_NOMEM, "%s: out of memory", c->display);
        return FLUX_OK;
    }
    return rd_scalar(c, kv->type, kv);
}

/* ------------------------------------------------------------------------ */
/* Tensor table                                                             */
/* ------------------------------------------------------------------------ */

static flux_status rd_tensor(cursor *c, fx_gguf_tensor *t) {
    uint32_t nd;
    TRY(rd_name(c, &t->name, "tensor name"));
    TRY(rd_u32(c, &nd, "a dimension count"));
    if (nd < 1 || nd > FX_GGUF_MAX_DIMS)
        return bad(c, "tensor '%.200s': %u dimensions (1 to %d supported)", t->name, nd, FX_GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    int64_t numel = 1;
    for (int i = 0; i < FX_GGUF_MAX_DIMS; i++) t->ne[i] = 1;
    for (uint32_t i = 0; i < nd; i++) {
        uint64_t ne;
        TRY(rd_u64(c, &ne, "a dimension"));
        if (ne > (uint64_t)INT64_MAX)
            return bad(c, "tensor '%.200s': dimension %u is %llu (negative as a signed size)", t->name, i,
                       (unsigned long long)ne);
        t->ne[i] = (int64_t)ne;
        if (numel && __builtin_mul_overflow(numel, t->ne[i], &numel))
            return bad(c, "tensor '%.200s': the element count overflows", t->name);
    }
    TRY(rd_u32(c, &t->ggml_type, "a tensor type"));
    TRY(rd_u64(c, &t->offset, "a tensor offset"));
    int dt = fx_dtype_of_ggml(t->ggml_type);
    if (dt < 0) return bad(c, "tensor '%.200s': unknown ggml type id %u", t->name, t->ggml_type);
    t->dtype = (fx_dtype)dt;
    const char *tn = fx_dtype_name(t->dtype);
    int64_t block = fx_dtype_block(t->dtype), bytes = (int64_t)fx_dtype_block_bytes(t->dtype);
    if (t->ne[0] % block)
        return bad(c, "tensor '%.200s': row length ne[0] = %lld is not a multiple of the %s block (%lld)", t->name,
                   (long long)t->ne[0], tn, (long long)block);
    int64_t nbytes;
    if (__builtin_mul_overflow(numel / block, bytes, &nbytes))
        return bad(c, "tensor '%.200s': the byte size overflows", t->name);
    t->nbytes = (uint64_t)nbytes;
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Whole header                                                             */
/* ------------------------------------------------------------------------ */

static int cmp_offset(const void *a, const void *b) {
    const fx_gguf_tensor *x = *(const fx_gguf_tensor *const *)a, *y = *(const fx_gguf_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* Index of the first item whose name (a char * at the start of each
 * elem-byte item) equals an earlier one's, or -1 (a hash set of indices). */
static long first_duplicate(const void *base, size_t elem, size_t n, int *nomem) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    size_t *slot = calloc(cap, sizeof *slot);
    if (!slot) {
        *nomem = 1;
        return -1;
    }
    long dup = -1;
    for (size_t i = 0; i < n && dup < 0; i++) {
        const char *name = *(char *const *)(const void *)((const char *)base + i * elem);
        for (size_t h = fx_fnv1a(name) & (cap - 1);; h = (h + 1) & (cap - 1)) {
            if (!slot[h]) {
                slot[h] = i + 1;
                break;
            }
            if (!strcmp(*(char *const *)(const void *)((const char *)base + (slot[h] - 1) * elem), name)) {
                dup = (long)i;
                break;
            }
        }
    }
    free(slot);
    return dup;
}

static flux_status parse(fx_gguf *g, cursor *c) {
    if (c->size < 24)
        return bad(c, "file is %llu bytes, shorter than the 24-byte GGUF header", (unsigned long long)c->size);
    if (memcmp(c->p, FX_GGUF_MAGIC, 4)) return bad(c, "bad magic (not a GGUF file)");
    c->pos = 4;
    uint64_t n_tensors, n_kv;
    TRY(rd_u32(c, &g->version, "the version"));
    if (g->version && !(g->version & 0xffff))
        return bad(c, "version %u looks byte-swapped: big-endian GGUF files are not supported", g->version);
    if (g->version == 1) return bad(c, "version 1 (32-bit counts) is not supported; convert the file to version 3");
    if (g->version != 2 && g->version != 3) return bad(c, "unsupported version %u (2 and 3 are supported)", g->version);
    TRY(rd_u64(c, &n_tensors, "the tensor count"));
    TRY(rd_u64(c, &n_kv, "the key/value count"));
    /* smallest records: key/name 8+1 bytes, kv type 4 + value 1; tensor 8+1 + 4 + 8 + 4 + 8 */
    if (n_kv > left(c) / 14)
        return bad(c, "%llu key/value pairs cannot fit in the %llu bytes after the header", (unsigned long long)n_kv,
                   (unsigned long long)left(c));
    if (n_tensors > left(c) / 33)
        return bad(c, "%llu tensors cannot fit in the %llu bytes after the header", (unsigned long long)n_tensors,
                   (unsigned long long)left(c));
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) return fx_fail(c->err, FLUX_ERR_NOMEM, "%s: out of memory", c->display);

    for (g->n_kv = 0; g->n_kv < n_kv;) {
        flux_status st = rd_kv(c, &g->kv[g->n_kv]);
        g->n_kv++; /* owned strings are freed even when this entry failed */
        TRY(st);
    }
    int nomem = 0;
    long dup = first_duplicate(g->kv, sizeof *g->kv, g->n_kv, &nomem);
    if (nomem) return fx_fail(c->err, FLUX_ERR_NOMEM, "%s: out of memory", c->display);
    if (dup >= 0) return bad(c, "duplicate key '%.200s'", g->kv[dup].key);
    g->alignment = FX_GGUF_DEFAULT_ALIGNMENT;
    const fx_gguf_kv *al = fx_gguf_find(g, "general.alignment");
    if (al) {
        if (al->type != FX_GGUF_U32)
            return bad(c, "general.alignment has type %s (must be u32)", vtype_names[al->type]);
        if (al->u == 0 || (al->u & (al->u - 1)))
            return bad(c, "general.alignment %llu is not a power of two", (unsigned long long)al->u);
        g->alignment = (uint32_t)al->u;
    }

    for (g->n_tensors = 0; g->n_tensors < n_tensors;) {
        flux_status st = rd_tensor(c, &g->tensors[g->n_tensors]);
        g->n_tensors++;
        TRY(st);
    }
    dup = first_duplicate(g->tensors, sizeof *g->tensors, g->n_tensors, &nomem);
    if (nomem) return fx_fail(c->err, FLUX_ERR_NOMEM, "%s: out of memory", c->display);
    if (dup >= 0) return bad(c, "duplicate tensor name '%.200s'", g->tensors[dup].name);

    /* data section: aligned start, every tensor inside the file, aligned, disjoint */
    uint64_t a = g->alignment;
    g->data_start = c->pos % a ? c->pos + (a - c->pos % a) : c->pos;
    if (g->data_start > c->size) {
        if (n_tensors)
            return bad(c, "the data section would start at %llu, past the end of the file (%llu bytes)",
                       (unsigned long long)g->data_start, (unsigned long long)c->size);
        g->data_start = c->size; /* no tensors: the padding may be missing */
    }
    const uint64_t data_size = c->size > g->data_start ? c->size - g->data_start : 0;
    for (size_t i = 0; i < g->n_tensors; i++) {
        const fx_gguf_tensor *t = &g->tensors[i];
        if (t->offset % a)
            return bad(c, "tensor '%.200s': offset %llu is not a multiple of the alignment %llu", t->name,
                       (unsigned long long)t->offset, (unsigned long long)a);
        if (t->offset > data_size || t->nbytes > data_size - t->offset)
            return bad(c, "tensor '%.200s': %llu bytes at offset %llu run past the end of the data section (%llu bytes)",
                       t->name, (unsigned long long)t->nbytes, (unsigned long long)t->offset,
                       (unsigned long long)data_size);
    }
    const fx_gguf_tensor **order = malloc((g->n_tensors ? g->n_tensors : 1) * sizeof *order);
    if (!order) return fx_fail(c->err, FLUX_ERR_NOMEM, "%s: out of memory", c->display);
    for (size_t i = 0; i < g->n_tensors; i++) order[i] = &g->tensors[i];
    qsort(order, g->n_tensors, sizeof *order, cmp_offset);
    flux_status st = FLUX_OK;
    const fx_gguf_tensor *reach = NULL;
    for (size_t i = 0; i < g->n_tensors && !st; i++) {
        const fx_gguf_tensor *t = order[i];
        if (!t->nbytes) continue;
        if (reach && t->offset < reach->offset + reach->nbytes)
            st = bad(c, "tensor '%.200s' (bytes %llu..%llu) overlaps tensor '%.200s' (bytes %llu..%llu)", t->name,
                     (unsigned long long)t->offset, (unsigned long long)(t->offset + t->nbytes), reach->name,
                     (unsigned long long)reach->offset, (unsigned long long)(reach->offset + reach->nbytes));
        if (!reach || t->offset + t->nbytes > reach->offset + reach->nbytes) reach = t;
    }
    free(order);
    return st;
}

int fx_gguf_is_gguf(const void *head, size_t len) { return len >= 4 && !memcmp(head, FX_GGUF_MAGIC, 4); }

fx_gguf *fx_gguf_parse(const void *buf, uint64_t size, const char *display, fx_err *err) {
    fx_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory", display);
        return NULL;
    }
    g->file_size = size;
    cursor c = {buf, 0, size, display, err};
    if (parse(g, &c)) {
        fx_gguf_free(g);
        return NULL;
    }
    return g;
}

void fx_gguf_free(fx_gguf *g) {
    if (!g) return;
    for (size_t i = 0; i < g->n_kv; i++) free(g->kv[i].key), free(g->kv[i].str);
    for (size_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g);
}

const fx_gguf_kv *fx_gguf_find(const fx_gguf *g, const char *key) {
    for (size_t i = 0; g && i < g->n_kv; i++)
        if (g->kv[i].key && !strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

int fx_gguf_get_str(const fx_gguf *g, const char *key, const char **out) {
    const fx_gguf_kv *kv = fx_gguf_find(g, key);
    if (!kv || kv->type != FX_GGUF_STRING) return -1;
    *out = kv->str;
    return 0;
}

int fx_gguf_get_uint(const fx_gguf *g, const char *key, uint64_t *out) {
    const fx_gguf_kv *kv = fx_gguf_find(g, key);
    if (!kv) return -1;
    switch (kv->type) {
    case FX_GGUF_U8: case FX_GGUF_U16: case FX_GGUF_U32: case FX_GGUF_U64: *out = kv->u; return 0;
    case FX_GGUF_I8: case FX_GGUF_I16: case FX_GGUF_I32: case FX_GGUF_I64:
        if (kv->i < 0) return -1;
        *out = (uint64_t)kv->i;
        return 0;
    default: return -1;
    }
}

int fx_gguf_get_float(const fx_gguf *g, const char *key, double *out) {
    const fx_gguf_kv *kv = fx_gguf_find(g, key);
    if (!kv || (kv->type != FX_GGUF_F32 && kv->type != FX_GGUF_F64)) return -1;
    *out = kv->f;
    return 0;
}
