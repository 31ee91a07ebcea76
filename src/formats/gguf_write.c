/*
 * gguf_write.c — GGUF layout and header bytes (gguf_write.h).
 */
#include "gguf_write.h"

#include <stdlib.h>
#include <string.h>

#include "gguf.h"

#define ALIGN FX_GGUF_DEFAULT_ALIGNMENT

typedef struct wkv {
    char *key;
    fx_gguf_vtype type;
    char *str;
    uint32_t u32;
    float f32;
} wkv;

typedef struct wtensor {
    char *name;
    int ndim;
    int64_t ne[FX_GGUF_MAX_DIMS]; /* ggml order */
    uint32_t ggml_type;
    uint64_t offset, nbytes;      /* offset from the data start */
} wtensor;

struct fx_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    uint64_t data_bytes;          /* running, padded */
};

static uint64_t align_up(uint64_t v) { return (v + ALIGN - 1) / ALIGN * ALIGN; }

fx_gguf_writer *fx_gguf_writer_new(void) { return calloc(1, sizeof(fx_gguf_writer)); }

void fx_gguf_writer_free(fx_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) free(w->kv[i].key), free(w->kv[i].str);
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

static wkv *new_kv(fx_gguf_writer *w, const char *key, fx_gguf_vtype type) {
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        wkv *g = realloc(w->kv, cap * sizeof *g);
        if (!g) return NULL;
        w->kv = g, w->cap_kv = cap;
    }
    wkv *kv = &w->kv[w->n_kv];
    memset(kv, 0, sizeof *kv);
    if (!(kv->key = strdup(key))) return NULL;
    kv->type = type;
    w->n_kv++;
    return kv;
}

int fx_gguf_writer_str(fx_gguf_writer *w, const char *key, const char *value) {
    wkv *kv = new_kv(w, key, FX_GGUF_STRING);
    return kv && (kv->str = strdup(value)) ? 0 : -1;
}

int fx_gguf_writer_u32(fx_gguf_writer *w, const char *key, uint32_t value) {
    wkv *kv = new_kv(w, key, FX_GGUF_U32);
    if (!kv) return -1;
    kv->u32 = value;
    return 0;
}

int fx_gguf_writer_f32(fx_gguf_writer *w, const char *key, float value) {
    wkv *kv = new_kv(w, key, FX_GGUF_F32);
    if (!kv) return -1;
    kv->f32 = value;
    return 0;
}

int fx_gguf_writer_tensor(fx_gguf_writer *w, const char *name, int ndim, const int64_t *shape, fx_dtype dtype) {
    int id = fx_dtype_ggml_id(dtype);
    if (ndim < 1 || ndim > FX_GGUF_MAX_DIMS || id < 0) return -1;
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0 || __builtin_mul_overflow(numel, shape[d], &numel)) return -1;
    int64_t nbytes = fx_dtype_row_bytes(dtype, numel);
    if (nbytes < 0 || shape[ndim - 1] % fx_dtype_block(dtype)) return -1;
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *g = realloc(w->t, cap * sizeof *g);
        if (!g) return -1;
        w->t = g, w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return -1;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->ne[d] = shape[ndim - 1 - d];
    t->ggml_type = (uint32_t)id;
    t->offset = w->data_bytes;
    t->nbytes = (uint64_t)nbytes;
    w->data_bytes = align_up(w->data_bytes + t->nbytes);
    return (int)w->n_t++;
}

/* ---- serialisation ---- */

typedef struct out {
    unsigned char *p; /* NULL: only count */
    size_t n;
} out;

static void put(out *o, const void *src, size_t len) {
    if (o->p) memcpy(o->p + o->n, src, len);
    o->n += len;
}
static void put_u32(out *o, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    put(o, b, 4);
}
static void put_u64(out *o, uint64_t v) {
    put_u32(o, (uint32_t)v);
    put_u32(o, (uint32_t)(v >> 32));
}
static void put_str(out *o, const char *s) {
    size_t len = strlen(s);
    put_u64(o, len);
    put(o, s, len);
}

static size_t serialise(const fx_gguf_writer *w, unsigned char *buf) {
    out o = {buf, 0};
    put(&o, FX_GGUF_MAGIC, 4);
    put_u32(&o, 3);
    put_u64(&o, w->n_t);
    put_u64(&o, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        const wkv *kv = &w->kv[i];
        put_str(&o, kv->key);
        put_u32(&o, (uint32_t)kv->type);
        if (kv->type == FX_GGUF_STRING) put_str(&o, kv->str);
        else if (kv->type == FX_GGUF_U32) put_u32(&o, kv->u32);
        else {
            uint32_t u;
            memcpy(&u, &kv->f32, 4);
            put_u32(&o, u);
        }
    }
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        put_str(&o, t->name);
        put_u32(&o, (uint32_t)t->ndim);
        for (int d = 0; d < t->ndim; d++) put_u64(&o, (uint64_t)t->ne[d]);
        put_u32(&o, t->ggml_type);
        put_u64(&o, t->offset);
    }
    size_t pad = (size_t)(align_up(o.n) - o.n);
    if (o.p) memset(o.p + o.n, 0, pad);
    return o.n + pad;
}

size_t fx_gguf_writer_header_size(const fx_gguf_writer *w) { return serialise(w, NULL); }
uint64_t fx_gguf_writer_file_size(const fx_gguf_writer *w) { return fx_gguf_writer_header_size(w) + w->data_bytes; }
uint64_t fx_gguf_writer_offset(const fx_gguf_writer *w, int i) { return fx_gguf_writer_header_size(w) + w->t[i].offset; }
uint64_t fx_gguf_writer_nbytes(const fx_gguf_writer *w, int i) { return w->t[i].nbytes; }
void fx_gguf_writer_header(const fx_gguf_writer *w, void *buf) { serialise(w, buf); }
