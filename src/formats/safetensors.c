/*
 * safetensors.c — strict safetensors reader and weight sets (safetensors.h).
 *
 * Opening reads only the 8-byte length and the JSON header (pread), parses
 * it with our JSON parser (the document stays alive: tensor names point
 * into it) and validates every entry. The data section is then mmap'd or
 * read; nothing else is touched, so opening a 1000-tensor 8 GB file costs
 * about a millisecond.
 */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "src/base/file_read.h"
#include "src/base/float16.h"
#include "src/base/json.h"
#include "map_guard.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; flux.c supports little-endian hosts only"
#endif

/* ------------------------------------------------------------------------ */
/* Dtypes and shapes                                                        */
/* ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    size_t size;
} dtype_info[FX_ST_DTYPE_COUNT] = {
    [FX_ST_BOOL] = {"BOOL", 1},       [FX_ST_U8] = {"U8", 1},
    [FX_ST_I8] = {"I8", 1},           [FX_ST_I16] = {"I16", 2},
    [FX_ST_U16] = {"U16", 2},         [FX_ST_F16] = {"F16", 2},
    [FX_ST_BF16] = {"BF16", 2},       [FX_ST_I32] = {"I32", 4},
    [FX_ST_U32] = {"U32", 4},         [FX_ST_F32] = {"F32", 4},
    [FX_ST_F64] = {"F64", 8},         [FX_ST_I64] = {"I64", 8},
    [FX_ST_U64] = {"U64", 8},         [FX_ST_F8_E4M3] = {"F8_E4M3", 1},
    [FX_ST_F8_E5M2] = {"F8_E5M2", 1}, [FX_ST_F8_E8M0] = {"F8_E8M0", 1},
    [FX_ST_C64] = {"C64", 8},
};

/* block types: FX_ST_Q8_0 + i is FX_DTYPE_Q8_0 + i */
static int is_block(fx_st_dtype t) { return t >= FX_ST_Q8_0 && t < FX_ST_DTYPE_COUNT; }
static fx_dtype block_dtype(fx_st_dtype t) { return (fx_dtype)(FX_DTYPE_Q8_0 + (t - FX_ST_Q8_0)); }

const char *fx_st_dtype_name(fx_st_dtype t) {
    if (is_block(t)) return fx_dtype_name(block_dtype(t));
    return (unsigned)t < FX_ST_SAFETENSORS_COUNT ? dtype_info[t].name : "?";
}

size_t fx_st_dtype_size(fx_st_dtype t) {
    return (unsigned)t < FX_ST_SAFETENSORS_COUNT ? dtype_info[t].size : 0;
}

int64_t fx_st_row_bytes(fx_st_dtype t, int64_t n) {
    if (is_block(t)) return fx_dtype_row_bytes(block_dtype(t), n);
    int64_t r;
    if (n < 0 || __builtin_mul_overflow(n, (int64_t)fx_st_dtype_size(t), &r)) return -1;
    return r;
}

int fx_st_weight_dtype(fx_st_dtype t) {
    switch (t) {
    case FX_ST_F32: return FX_DTYPE_F32;
    case FX_ST_F16: return FX_DTYPE_F16;
    case FX_ST_BF16: return FX_DTYPE_BF16;
    case FX_ST_F8_E4M3: return FX_DTYPE_F8_E4M3;
    case FX_ST_F8_E5M2: return FX_DTYPE_F8_E5M2;
    default: return is_block(t) ? (int)block_dtype(t) : -1;
    }
}

fx_st_dtype fx_st_dtype_of_weight(fx_dtype t) {
    switch (t) {
    case FX_DTYPE_F32: return FX_ST_F32;
    case FX_DTYPE_F16: return FX_ST_F16;
    case FX_DTYPE_BF16: return FX_ST_BF16;
    case FX_DTYPE_F8_E4M3: return FX_ST_F8_E4M3;
    case FX_DTYPE_F8_E5M2: return FX_ST_F8_E5M2;
    default: return (fx_st_dtype)(FX_ST_Q8_0 + (t - FX_DTYPE_Q8_0));
    }
}

static int parse_dtype(const char *s, fx_st_dtype *out) {
    for (int t = 0; t < FX_ST_SAFETENSORS_COUNT; t++)
        if (!strcmp(s, dtype_info[t].name)) { *out = (fx_st_dtype)t; return 0; }
    return -1;
}

char *fx_shape_str(const fx_shape *s, char *buf, size_t size) {
    size_t n = 0;
    if (size == 0) return buf;
    buf[0] = '\0';
    n += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < s->ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, i ? ", %lld" : "%lld", (long long)s->d[i]);
    if (n < size) snprintf(buf + n, size - n, "]");
    return buf;
}

int fx_shape_eq(const fx_shape *a, const fx_shape *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->d[i] != b->d[i]) return 0;
    return 1;
}

int64_t fx_shape_numel(const fx_shape *s) {
    /* a zero dimension first: the other dimensions of an empty tensor may
     * be anything a file claims, and their product overflow (fuzz_gguf) */
    for (int i = 0; i < s->ndim; i++)
        if (s->d[i] == 0) return 0;
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        if (__builtin_mul_overflow(n, s->d[i], &n)) return INT64_MAX;
    return n;
}

/* ------------------------------------------------------------------------ */
/* Name → index hash table (open addressing, FNV-1a)                        */
/* ------------------------------------------------------------------------ */

typedef struct name_table {
    uint32_t *slots; /* index + 1; 0 = empty */
    size_t mask;
} name_table;

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int table_init(name_table *t, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    t->slots = calloc(cap, sizeof *t->slots);
    t->mask = cap - 1;
    return t->slots ? 0 : -1;
}

/* Insert index i with name; returns the index of an existing entry with
 * the same name (duplicate) or -1 when inserted. */
static long table_insert(name_table *t, const fx_tensor *const *items, size_t i) {
    const char *name = items[i]->name;
    for (size_t h = fnv1a(name) & t->mask;; h = (h + 1) & t->mask) {
        uint32_t v = t->slots[h];
        if (!v) { t->slots[h] = (uint32_t)(i + 1); return -1; }
        if (!strcmp(items[v - 1]->name, name)) return (long)(v - 1);
    }
}

static long table_find(const name_table *t, const fx_tensor *const *items, const char *name) {
    if (!t->slots) return -1;
    for (size_t h = fnv1a(name) & t->mask;; h = (h + 1) & t->mask) {
        uint32_t v = t->slots[h];
        if (!v) return -1;
        if (!strcmp(items[v - 1]->name, name)) return (long)(v - 1);
    }
}

/* ------------------------------------------------------------------------ */
/* Files                                                                    */
/* ------------------------------------------------------------------------ */

/* A file as opened: device, inode, size and modification time. Another
 * file at the path (replaced), or this one rewritten, differs in one of
 * them; the parsed header would then describe bytes that are not there. */
typedef struct file_identity {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} file_identity;

static file_identity identity_of(const struct stat *st) {
    file_identity id = {st->st_dev, st->st_ino, st->st_size, st->st_mtim};
    return id;
}

/* "" when same, else what changed ("size 1024 -> 512", "inode", ...). */
static const char *identity_change(const file_identity *was, const file_identity *now, char *buf, size_t size) {
    if (was->size != now->size)
        snprintf(buf, size, "its size changed from %lld to %lld bytes", (long long)was->size, (long long)now->size);
    else if (was->dev != now->dev || was->ino != now->ino)
        snprintf(buf, size, "it was replaced by another file");
    else if (was->mtime.tv_sec != now->mtime.tv_sec || was->mtime.tv_nsec != now->mtime.tv_nsec)
        snprintf(buf, size, "it was rewritten (modification time changed)");
    else
        buf[0] = '\0';
    return buf;
}

struct fx_st_file {
    char *display;
    char *path;               /* NULL for in-memory files */
    uint64_t file_size;
    file_identity id;         /* what the header was read from */
    uint64_t header_len;
    uint64_t data_off;        /* start of the data section in the file */
    fx_json_doc *doc;         /* the header; names point into it */
    fx_gguf *gguf;            /* GGUF files: the parsed header (names point into it) */
    const fx_json *metadata;  /* __metadata__ object or NULL */
    fx_tensor *tensors;       /* header order */
    const fx_tensor **index;  /* &tensors[i], for the name table */
    size_t n;
    name_table names;
    /* data section */
    const unsigned char *data;
    void *map_base;
    size_t map_len;
    int guard;                /* its map_guard slot (-1: none) */
    void *ram;
    void *owned;              /* in-memory image owned by the file (freed on close) */
};

const char *fx_st_display(const fx_st_file *f) { return f->display; }
const char *fx_st_path(const fx_st_file *f) { return f->path; }
size_t fx_st_count(const fx_st_file *f) { return f->n; }
const fx_tensor *fx_st_tensor_at(const fx_st_file *f, size_t i) { return i < f->n ? &f->tensors[i] : NULL; }

const fx_tensor *fx_st_find(const fx_st_file *f, const char *name) {
    long i = table_find(&f->names, f->index, name);
    return i < 0 ? NULL : &f->tensors[i];
}

const char *fx_st_metadata(const fx_st_file *f, const char *key) {
    const char *v = NULL;
    if (f->gguf) return fx_gguf_get_str(f->gguf, key, &v) ? NULL : v;
    return fx_json_get_str(f->metadata, key, NULL);
}

const struct fx_gguf *fx_st_gguf(const fx_st_file *f) { return f->gguf; }

int fx_st_mapped(const fx_st_file *f) { return f && f->map_base && f->data; }

const void *fx_tensor_data(const fx_tensor *t) {
    return t->file->data ? t->file->data + t->offset : NULL;
}

static void madvise_range_advice(const fx_st_file *f, const unsigned char *p, size_t len, int advice) {
    if (!f->map_base || !len) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(page - 1), b = (uintptr_t)(p + len);
    if (advice == MADV_DONTNEED) { /* whole pages inside the range only */
        a = ((uintptr_t)p + page - 1) & ~(page - 1);
        b &= ~(page - 1);
        if (b <= a) return;
    }
    (void)madvise((void *)a, b - a, advice);
}

static void madvise_range(const fx_st_file *f, const unsigned char *p, size_t len) {
    madvise_range_advice(f, p, len, MADV_WILLNEED);
}

void fx_tensor_willneed(const fx_tensor *t) {
    const fx_st_file *f = t->file;
    if (f->data) madvise_range(f, f->data + t->offset, (size_t)t->nbytes);
}

static int cmp_by_offset(const void *a, const void *b) {
    const fx_tensor *x = *(const fx_tensor *const *)a, *y = *(const fx_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

static flux_status bad(fx_err *err, const fx_st_file *f, const char *tensor, const char *fmt, ...)
    FX_PRINTF(4, 5);

/* A FLUX_ERR_FORMAT naming the file and (if given) the tensor. */
static flux_status bad(fx_err *err, const fx_st_file *f, const char *tensor, const char *fmt, ...) {
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (tensor) return fx_fail(err, FLUX_ERR_FORMAT, "%s: tensor '%.200s': %s", f->display, tensor, what);
    return fx_fail(err, FLUX_ERR_FORMAT, "%s: %s", f->display, what);
}

/* Validate one header entry and fill *t. */
static flux_status parse_entry(fx_st_file *f, const char *name, size_t name_len, const fx_json *v,
                               uint64_t data_size, fx_tensor *t, fx_err *err) {
    if (strlen(name) != name_len) return bad(err, f, name, "name contains a NUL character");
    if (!fx_json_is_object(v))
        return bad(err, f, name, "entry is a %s, expected an object with dtype, shape and data_offsets",
                   fx_json_type_name(fx_json_typeof(v)));
    t->name = name;
    t->file = f;

    const fx_json *dt = fx_json_get(v, "dtype");
    if (!dt) return bad(err, f, name, "missing \"dtype\"");
    if (!fx_json_is_string(dt)) return bad(err, f, name, "\"dtype\" is not a string");
    if (parse_dtype(fx_json_str(dt), &t->dtype))
        return bad(err, f, name, "unknown dtype '%.40s'", fx_json_str(dt));

    const fx_json *sh = fx_json_get(v, "shape");
    if (!sh) return bad(err, f, name, "missing \"shape\"");
    if (!fx_json_is_array(sh)) return bad(err, f, name, "\"shape\" is not an array");
    size_t nd = fx_json_len(sh);
    if (nd > FX_ST_MAX_DIMS)
        return bad(err, f, name, "shape has %zu dimensions (at most %d supported)", nd, FX_ST_MAX_DIMS);
    t->shape.ndim = (int)nd;
    int has_zero = 0;
    for (size_t i = 0; i < nd; i++) {
        const fx_json *d = fx_json_at(sh, i);
        if (!fx_json_is_int(d) || fx_json_int(d) < 0)
            return bad(err, f, name, "shape dimension %zu is not a non-negative integer", i);
        t->shape.d[i] = fx_json_int(d);
        if (t->shape.d[i] == 0) has_zero = 1;
    }
    /* byte size without overflow (a shape containing 0 has 0 bytes) */
    char sbuf[160];
    int64_t nbytes = (int64_t)fx_st_dtype_size(t->dtype);
    for (size_t i = 0; i < nd && !has_zero; i++)
        if (__builtin_mul_overflow(nbytes, t->shape.d[i], &nbytes))
            return bad(err, f, name, "shape %s × %s overflows the byte size",
                       fx_shape_str(&t->shape, sbuf, sizeof sbuf), fx_st_dtype_name(t->dtype));
    if (has_zero) nbytes = 0;

    const fx_json *off = fx_json_get(v, "data_offsets");
    if (!off) return bad(err, f, name, "missing \"data_offsets\"");
    if (!fx_json_is_array(off) || fx_json_len(off) != 2 || !fx_json_is_int(fx_json_at(off, 0)) ||
        !fx_json_is_int(fx_json_at(off, 1)) || fx_json_int(fx_json_at(off, 0)) < 0 ||
        fx_json_int(fx_json_at(off, 1)) < 0)
        return bad(err, f, name, "\"data_offsets\" must be an array of two non-negative integers");
    int64_t b = fx_json_int(fx_json_at(off, 0)), e = fx_json_int(fx_json_at(off, 1));
    if (b > e) return bad(err, f, name, "data_offsets [%lld, %lld]: begin is after end", (long long)b, (long long)e);
    if ((uint64_t)e > data_size)
        return bad(err, f, name, "data_offsets [%lld, %lld] run past the end of the data section (%llu bytes)",
                   (long long)b, (long long)e, (unsigned long long)data_size);
    if (e - b != nbytes)
        return bad(err, f, name, "shape %s × %s = %lld bytes, but data_offsets [%lld, %lld] span %lld bytes",
                   fx_shape_str(&t->shape, sbuf, sizeof sbuf), fx_st_dtype_name(t->dtype),
                   (long long)nbytes, (long long)b, (long long)e, (long long)(e - b));
    t->offset = b;
    t->nbytes = nbytes;
    return FLUX_OK;
}

/* Parse and validate the header text [hdr, hdr + f->header_len). */
static flux_status parse_header(fx_st_file *f, const char *hdr, fx_err *err) {
    uint64_t data_size = f->file_size - 8 - f->header_len;
    f->data_off = 8 + f->header_len;
    f->doc = fx_json_parse(hdr, (size_t)f->header_len, err);
    if (!f->doc) {
        if (err && err->code == FLUX_ERR_NOMEM) return fx_prefix(err, "%s", f->display);
        return fx_prefix(err, "%s: header is not valid JSON", f->display);
    }
    const fx_json *root = fx_json_root(f->doc);
    if (!fx_json_is_object(root))
        return bad(err, f, NULL, "header is a JSON %s, expected an object",
                   fx_json_type_name(fx_json_typeof(root)));
    size_t members = fx_json_len(root);
    f->tensors = calloc(members ? members : 1, sizeof *f->tensors);
    f->index = calloc(members ? members : 1, sizeof *f->index);
    if (!f->tensors || !f->index || table_init(&f->names, members))
        return fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory for %zu tensors", f->display, members);

    int seen_meta = 0;
    for (size_t i = 0; i < members; i++) {
        const char *name = fx_json_key_at(root, i);
        const fx_json *v = fx_json_at(root, i);
        if (!strcmp(name, "__metadata__")) {
            if (seen_meta) return bad(err, f, NULL, "duplicate \"__metadata__\"");
            seen_meta = 1;
            if (!fx_json_is_object(v))
                return bad(err, f, NULL, "\"__metadata__\" is a %s, expected an object of strings",
                           fx_json_type_name(fx_json_typeof(v)));
            for (size_t k = 0; k < fx_json_len(v); k++)
                if (!fx_json_is_string(fx_json_at(v, k)))
                    return bad(err, f, NULL, "\"__metadata__\" entry '%.200s' is a %s, expected a string",
                               fx_json_key_at(v, k), fx_json_type_name(fx_json_typeof(fx_json_at(v, k))));
            f->metadata = v;
            continue;
        }
        fx_tensor *t = &f->tensors[f->n];
        flux_status st = parse_entry(f, name, fx_json_key_len_at(root, i), v, data_size, t, err);
        if (st) return st;
        f->index[f->n] = t;
        if (table_insert(&f->names, f->index, f->n) >= 0) return bad(err, f, name, "duplicate tensor name");
        f->n++;
    }

    /* no two non-empty byte ranges may overlap */
    const fx_tensor **order = malloc((f->n ? f->n : 1) * sizeof *order);
    if (!order) return fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory", f->display);
    memcpy(order, f->index, f->n * sizeof *order);
    qsort(order, f->n, sizeof *order, cmp_by_offset);
    const fx_tensor *reach = NULL; /* tensor with the furthest end so far */
    flux_status st = FLUX_OK;
    for (size_t i = 0; i < f->n; i++) {
        const fx_tensor *t = order[i];
        if (t->nbytes == 0) continue;
        if (reach && t->offset < reach->offset + reach->nbytes) {
            st = bad(err, f, t->name, "data_offsets [%lld, %lld] overlap tensor '%.200s' [%lld, %lld]",
                     (long long)t->offset, (long long)(t->offset + t->nbytes), reach->name,
                     (long long)reach->offset, (long long)(reach->offset + reach->nbytes));
            break;
        }
        if (!reach || t->offset + t->nbytes > reach->offset + reach->nbytes) reach = t;
    }
    free(order);
    return st;
}

/* A GGUF file: validate its header from the image [img, img + size) and
 * list its tensors with PyTorch-order shapes. */
static flux_status parse_gguf(fx_st_file *f, const void *img, fx_err *err) {
    if (!(f->gguf = fx_gguf_parse(img, f->file_size, f->display, err))) return err ? err->code : FLUX_ERR_FORMAT;
    const fx_gguf *g = f->gguf;
    f->data_off = g->data_start;
    f->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *f->tensors);
    f->index = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *f->index);
    if (!f->tensors || !f->index || table_init(&f->names, g->n_tensors))
        return fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory for %zu tensors", f->display, g->n_tensors);
    for (size_t i = 0; i < g->n_tensors; i++) {
        const fx_gguf_tensor *gt = &g->tensors[i];
        fx_tensor *t = &f->tensors[i];
        t->name = gt->name;
        t->file = f;
        if (gt->weight) t->dtype = fx_st_dtype_of_weight(gt->dtype);
        else t->dtype = gt->ggml_type == FX_GGML_I8    ? FX_ST_I8
                        : gt->ggml_type == FX_GGML_I16 ? FX_ST_I16
                        : gt->ggml_type == FX_GGML_I32 ? FX_ST_I32
                        : gt->ggml_type == FX_GGML_I64 ? FX_ST_I64
                                                       : FX_ST_F64;
        t->shape.ndim = gt->n_dims;
        for (int d = 0; d < gt->n_dims; d++) t->shape.d[d] = gt->ne[gt->n_dims - 1 - d];
        t->offset = (int64_t)gt->offset;
        t->nbytes = (int64_t)gt->nbytes;
        f->index[i] = t;
        table_insert(&f->names, f->index, i); /* names are unique (checked by the parser) */
        f->n++;
    }
    return FLUX_OK;
}

/* Check the 8-byte length against the file size. */
static flux_status check_header_len(fx_st_file *f, const unsigned char len8[8], fx_err *err) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | len8[i];
    if (n == 0) return bad(err, f, NULL, "header length is 0");
    if (n > FX_ST_MAX_HEADER)
        return bad(err, f, NULL, "header length %llu exceeds the %u-byte limit (not a safetensors file?)",
                   (unsigned long long)n, FX_ST_MAX_HEADER);
    if (n > f->file_size - 8)
        return bad(err, f, NULL, "header length %llu runs past the end of the file (%llu bytes)",
                   (unsigned long long)n, (unsigned long long)f->file_size);
    f->header_len = n;
    return FLUX_OK;
}

static fx_st_file *file_new(const char *path, const char *display, fx_err *err) {
    fx_st_file *f = calloc(1, sizeof *f);
    if (f) {
        f->guard = -1;
        f->display = strdup(display ? display : path ? path : "<memory>");
        if (path) f->path = strdup(path);
    }
    if (!f || !f->display || (path && !f->path)) {
        fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", display ? display : path ? path : "<memory>");
        fx_st_close(f);
        return NULL;
    }
    return f;
}

static int read_full(int fd, void *buf, size_t len, uint64_t off) {
    unsigned char *p = buf;
    while (len) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : len;
        ssize_t r = pread(fd, p, chunk, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO;
            return -1;
        }
        p += r, off += (uint64_t)r, len -= (size_t)r;
    }
    return 0;
}

/* The file at f->path (as *st) is still the one whose header was parsed. */
static flux_status check_identity(const fx_st_file *f, const struct stat *st, fx_err *err) {
    file_identity now = identity_of(st);
    char why[160];
    if (*identity_change(&f->id, &now, why, sizeof why))
        return fx_fail(err, FLUX_ERR_IO, "%s changed since the model was loaded: %s", f->path, why);
    return FLUX_OK;
}

flux_status fx_st_check_unchanged(const fx_st_file *f, fx_err *err) {
    if (!f->path) return FLUX_OK;
    struct stat st;
    if (stat(f->path, &st) != 0)
        return fx_fail(err, FLUX_ERR_IO, "%s: %s since the model was loaded", f->path, strerror(errno));
    return check_identity(f, &st, err);
}

flux_status fx_st_check_faults(const fx_st_file *f, fx_err *err) {
    size_t at;
    if (!fx_map_guard_faulted(f->guard, &at)) return FLUX_OK;
    return fx_fail(err, FLUX_ERR_IO,
                   "%s was cut short while in use (a read at byte %zu is past its end now)",
                   f->path, at);
}

flux_status fx_st_load_data(fx_st_file *f, int use_mmap, fx_err *err) {
    if (f->data) return FLUX_OK;
    if (!f->path) return fx_fail(err, FLUX_ERR_STATE, "%s: in-memory file has no data to load", f->display);
    struct stat st;
    int fd = fx_open_regular(f->path, &st, err);
    if (fd < 0) return err ? err->code : FLUX_ERR_IO;
    /* the header was parsed from the file as opened: data of another file
     * (same size or not) would be read through the old tensor table */
    if (check_identity(f, &st, err)) {
        close(fd);
        return err ? err->code : FLUX_ERR_IO;
    }
    const uint64_t size = (uint64_t)st.st_size;
    uint64_t off = f->data_off, data_size = size - off;
    if (size > SIZE_MAX) {
        close(fd);
        return fx_fail(err, FLUX_ERR_NOMEM, "%s: %llu bytes do not fit the address space", f->display,
                       (unsigned long long)size);
    }
    if (use_mmap) {
        void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (m == MAP_FAILED)
            return fx_fail(err, FLUX_ERR_IO, "cannot mmap %s (%llu bytes): %s", f->path,
                           (unsigned long long)size, strerror(errno));
        f->map_base = m;
        f->map_len = (size_t)size;
        f->guard = fx_map_guard_add(m, (size_t)size); /* a truncation under us: map_guard.h */
        f->data = (const unsigned char *)m + off;
        return FLUX_OK;
    }
    void *buf = NULL;
    if (posix_memalign(&buf, 64, data_size ? (size_t)data_size : 64)) {
        close(fd);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory reading %s (%llu bytes)", f->display,
                       (unsigned long long)data_size);
    }
    if (read_full(fd, buf, (size_t)data_size, off)) {
        int e = errno;
        close(fd);
        free(buf);
        return fx_fail(err, FLUX_ERR_IO, "cannot read %s: %s", f->path, strerror(e));
    }
    close(fd);
    f->ram = buf;
    f->data = buf;
    return FLUX_OK;
}

void fx_st_drop_data(fx_st_file *f) {
    if (!f || !f->path) return; /* in-memory files do not own their data */
    fx_map_guard_remove(f->guard);
    f->guard = -1;
    if (f->map_base) munmap(f->map_base, f->map_len);
    free(f->ram);
    f->map_base = NULL;
    f->map_len = 0;
    f->ram = NULL;
    f->data = NULL;
}

fx_st_file *fx_st_open(const char *path, const char *display, int use_mmap, fx_err *err) {
    fx_st_file *f = file_new(path, display, err);
    if (!f) return NULL;
    char *hdr = NULL;
    struct stat st;
    int fd = fx_open_regular(f->path, &st, err);
    if (fd < 0) goto fail;
    f->file_size = (uint64_t)st.st_size;
    f->id = identity_of(&st);
    if (f->file_size < 8) {
        bad(err, f, NULL, "file is %llu bytes, shorter than the 8-byte header length",
            (unsigned long long)f->file_size);
        goto fail_fd;
    }
    unsigned char len8[8];
    if (read_full(fd, len8, 8, 0)) {
        fx_fail(err, FLUX_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        goto fail_fd;
    }
    if (fx_gguf_is_gguf(len8, 8)) { /* GGUF: the header is parsed from a mapping of the file */
        if (f->file_size > SIZE_MAX) {
            fx_fail(err, FLUX_ERR_NOMEM, "%s: too large for the address space", f->display);
            goto fail_fd;
        }
        void *m = mmap(NULL, (size_t)f->file_size, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (m == MAP_FAILED) {
            fx_fail(err, FLUX_ERR_IO, "cannot mmap %s: %s", path, strerror(errno));
            goto fail;
        }
        flux_status parsed = parse_gguf(f, m, err);
        munmap(m, (size_t)f->file_size);
        if (parsed || (use_mmap >= 0 && fx_st_load_data(f, use_mmap, err))) goto fail;
        return f;
    }
    if (check_header_len(f, len8, err)) goto fail_fd;
    hdr = malloc((size_t)f->header_len);
    if (!hdr) {
        fx_fail(err, FLUX_ERR_NOMEM, "out of memory reading the header of %s", f->display);
        goto fail_fd;
    }
    if (read_full(fd, hdr, (size_t)f->header_len, 8)) {
        fx_fail(err, FLUX_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        goto fail_fd;
    }
    close(fd);
    fd = -1;
    if (parse_header(f, hdr, err)) goto fail;
    free(hdr);
    hdr = NULL;
    if (use_mmap >= 0 && fx_st_load_data(f, use_mmap, err)) goto fail;
    return f;
fail_fd:
    close(fd);
fail:
    free(hdr);
    fx_st_close(f);
    return NULL;
}

fx_st_file *fx_st_open_memory(const void *buf, size_t len, const char *display, fx_err *err) {
    fx_st_file *f = file_new(NULL, display ? display : "<memory>", err);
    if (!f) return NULL;
    f->file_size = len;
    if (fx_gguf_is_gguf(buf, len)) {
        if (parse_gguf(f, buf, err)) goto fail;
        f->data = (const unsigned char *)buf + f->data_off;
        return f;
    }
    if (len < 8) {
        bad(err, f, NULL, "file is %zu bytes, shorter than the 8-byte header length", len);
        goto fail;
    }
    if (check_header_len(f, buf, err)) goto fail;
    if (parse_header(f, (const char *)buf + 8, err)) goto fail;
    f->data = (const unsigned char *)buf + 8 + f->header_len;
    return f;
fail:
    fx_st_close(f);
    return NULL;
}

void fx_st_close(fx_st_file *f) {
    if (!f) return;
    fx_st_drop_data(f);
    fx_json_free(f->doc);
    fx_gguf_free(f->gguf);
    free(f->owned);
    free(f->names.slots);
    free(f->tensors);
    free(f->index);
    free(f->display);
    free(f->path);
    free(f);
}

/* ------------------------------------------------------------------------ */
/* Conversions                                                              */
/* ------------------------------------------------------------------------ */

void fx_st_convert_f32(const void *src, fx_st_dtype t, int64_t n, float *dst) {
    const unsigned char *p = src;
    switch (t) {
    case FX_ST_F32:
        memcpy(dst, p, (size_t)n * 4);
        break;
    case FX_ST_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = fx_bf16_bits_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        break;
    case FX_ST_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = fx_f16_bits_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        break;
    default:
        if (is_block(t) || t == FX_ST_F8_E4M3 || t == FX_ST_F8_E5M2) { /* fp8: unscaled */
            fx_dequantize_row((fx_dtype)fx_st_weight_dtype(t), src, n, dst);
            break;
        }
        for (int64_t i = 0; i < n; i++) dst[i] = 0.0f; /* callers check the dtype first */
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* Weight sets                                                              */
/* ------------------------------------------------------------------------ */

struct fx_wset {
    char *display;
    fx_st_file **files;
    size_t n_files;
    const fx_tensor **tensors; /* visible tensors */
    size_t n;
    name_table names;
    fx_json_doc *index_doc;    /* sharded: the index (names point into the shards) */
    void **copies;             /* aligned copies of misaligned tensors */
    size_t n_copies;
    /* views (fx_wset_view_new): files and data belong to base */
    fx_wset *base;
    struct view_tensor **views; /* [capacity], owned */
    size_t capacity;
    fx_st_file *stacked;       /* pseudo file (no data) of two-range tensors */
};

/* A tensor of a view: t is what lookups return (first member, so a view's
 * fx_tensor pointers convert back). */
typedef struct view_tensor {
    fx_tensor t;
    const fx_tensor *src[2];
    int64_t row0[2], rows[2];
    int n;
    char name[];
} view_tensor;

static const view_tensor *as_view_tensor(const fx_wset *s, const fx_tensor *t) {
    return s->base && t ? (const view_tensor *)(const void *)t : NULL;
}

const char *fx_wset_display(const fx_wset *s) { return s->display; }
size_t fx_wset_count(const fx_wset *s) { return s->n; }
const fx_tensor *fx_wset_tensor_at(const fx_wset *s, size_t i) { return i < s->n ? s->tensors[i] : NULL; }
size_t fx_wset_file_count(const fx_wset *s) { return s->n_files; }
const fx_st_file *fx_wset_file_at(const fx_wset *s, size_t i) { return i < s->n_files ? s->files[i] : NULL; }

static void free_copies(fx_wset *s) {
    for (size_t i = 0; i < s->n_copies; i++) free(s->copies[i]);
    free(s->copies);
    s->copies = NULL;
    s->n_copies = 0;
}

void fx_wset_close(fx_wset *s) {
    if (!s) return;
    free_copies(s);
    if (s->base) { /* a view: the files are base's */
        for (size_t i = 0; i < s->n; i++) free(s->views[i]);
        free(s->views);
        fx_st_close(s->stacked);
        fx_wset_close(s->base);
        s->files = NULL;
        s->n_files = 0;
    }
    for (size_t i = 0; i < s->n_files; i++) fx_st_close(s->files[i]);
    free(s->files);
    free(s->tensors);
    free(s->names.slots);
    fx_json_free(s->index_doc);
    free(s->display);
    free(s);
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* "dir/" part of a path (including the slash), or "" */
static char *dir_part(const char *path) {
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path + 1) : 0;
    char *d = malloc(n + 1);
    if (d) memcpy(d, path, n), d[n] = '\0';
    return d;
}

static char *join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (s) memcpy(s, a, la), memcpy(s + la, b, lb + 1);
    return s;
}

/* The set of one opened file (s->files[0]): all its tensors. */
static flux_status wset_of_file(fx_wset *s, fx_err *err) {
    s->n_files = 1;
    const fx_st_file *f = s->files[0];
    s->tensors = malloc((f->n ? f->n : 1) * sizeof *s->tensors);
    if (!s->tensors || table_init(&s->names, f->n))
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", s->display);
    for (s->n = 0; s->n < f->n; s->n++) {
        s->tensors[s->n] = f->index[s->n];
        table_insert(&s->names, s->tensors, s->n); /* names are unique within a file */
    }
    return FLUX_OK;
}

static flux_status wset_single(fx_wset *s, const char *path, int use_mmap, fx_err *err) {
    s->files = calloc(1, sizeof *s->files);
    if (!s->files) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", s->display);
    s->files[0] = fx_st_open(path, s->display, use_mmap, err);
    if (!s->files[0]) return err ? err->code : FLUX_ERR_IO;
    return wset_of_file(s, err);
}

/* A shard name from an index must be a plain file name next to it. */
static int plain_file_name(const char *n) {
    return *n && strcmp(n, ".") && strcmp(n, "..") && !strchr(n, '/') && !strchr(n, '\\');
}

static flux_status wset_sharded(fx_wset *s, const char *path, int use_mmap, fx_err *err) {
    s->index_doc = fx_json_parse_file(path, s->display, err);
    if (!s->index_doc) return err ? err->code : FLUX_ERR_FORMAT;
    const fx_json *root = fx_json_root(s->index_doc);
    const fx_json *map = fx_json_get(root, "weight_map");
    if (!fx_json_is_object(map))
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: no \"weight_map\" object in the shard index", s->display);
    size_t n = fx_json_len(map);

    /* distinct shard names, in first-use order */
    const char **shards = calloc(n ? n : 1, sizeof *shards);
    size_t *shard_of = calloc(n ? n : 1, sizeof *shard_of);
    char *real_dir = dir_part(path), *disp_dir = dir_part(s->display);
    flux_status st = FLUX_OK;
    size_t n_shards = 0;
    if (!shards || !shard_of || !real_dir || !disp_dir) {
        st = fx_fail(err, FLUX_ERR_NOMEM, "out of memory reading %s", s->display);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const fx_json *v = fx_json_at(map, i);
        const char *tname = fx_json_key_at(map, i);
        if (strlen(tname) != fx_json_key_len_at(map, i)) {
            st = fx_fail(err, FLUX_ERR_FORMAT, "%s: weight_map: tensor name contains a NUL character", s->display);
            goto done;
        }
        if (!fx_json_is_string(v) || !plain_file_name(fx_json_str(v)) ||
            strlen(fx_json_str(v)) != fx_json_str_len(v)) {
            st = fx_fail(err, FLUX_ERR_FORMAT,
                         "%s: weight_map: tensor '%.200s' maps to %s, expected a shard file name in the same folder",
                         s->display, tname, fx_json_is_string(v) ? "an invalid file name" : "a non-string");
            goto done;
        }
        const char *sn = fx_json_str(v);
        size_t k = 0;
        while (k < n_shards && strcmp(shards[k], sn)) k++;
        if (k == n_shards) shards[n_shards++] = sn;
        shard_of[i] = k;
    }

    s->files = calloc(n_shards ? n_shards : 1, sizeof *s->files);
    s->tensors = calloc(n ? n : 1, sizeof *s->tensors);
    if (!s->files || !s->tensors || table_init(&s->names, n)) {
        st = fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", s->display);
        goto done;
    }
    for (size_t k = 0; k < n_shards; k++) {
        char *rp = join(real_dir, shards[k]), *dp = join(disp_dir, shards[k]);
        if (!rp || !dp) {
            free(rp), free(dp);
            st = fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", s->display);
            goto done;
        }
        s->files[k] = fx_st_open(rp, dp, use_mmap, err);
        free(rp), free(dp);
        if (!s->files[k]) {
            size_t first = 0;
            while (shard_of[first] != k) first++;
            st = fx_prefix(err, "%s: shard '%s' (listed for tensor '%.200s')", s->display, shards[k],
                           fx_json_key_at(map, first));
            goto done;
        }
        s->n_files++;
    }
    for (size_t i = 0; i < n; i++) {
        const char *tname = fx_json_key_at(map, i);
        const fx_tensor *t = fx_st_find(s->files[shard_of[i]], tname);
        if (!t) {
            st = fx_fail(err, FLUX_ERR_MODEL,
                         "%s: tensor '%.200s' is listed in shard '%s', but that shard does not contain it",
                         s->display, tname, shards[shard_of[i]]);
            goto done;
        }
        s->tensors[s->n] = t;
        if (table_insert(&s->names, s->tensors, s->n) >= 0) {
            st = fx_fail(err, FLUX_ERR_FORMAT, "%s: weight_map lists tensor '%.200s' twice", s->display, tname);
            goto done;
        }
        s->n++;
    }
done:
    free(shards);
    free(shard_of);
    free(real_dir);
    free(disp_dir);
    return st;
}

fx_wset *fx_wset_open(const char *path, const char *display, int use_mmap, fx_err *err) {
    fx_wset *s = calloc(1, sizeof *s);
    if (!s || !(s->display = strdup(display ? display : path))) {
        free(s);
        fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", path);
        return NULL;
    }
    flux_status st = ends_with(path, ".index.json") ? wset_sharded(s, path, use_mmap, err)
                                                    : wset_single(s, path, use_mmap, err);
    if (st) {
        fx_wset_close(s);
        return NULL;
    }
    return s;
}

fx_wset *fx_wset_open_memory(void *buf, size_t len, const char *display, int own, fx_err *err) {
    fx_wset *s = calloc(1, sizeof *s);
    if (!s || !(s->display = strdup(display)) || !(s->files = calloc(1, sizeof *s->files))) {
        if (s) free(s->display), free(s);
        if (own) free(buf);
        fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", display);
        return NULL;
    }
    if (!(s->files[0] = fx_st_open_memory(buf, len, display, err))) {
        if (own) free(buf);
        fx_wset_close(s);
        return NULL;
    }
    if (own) s->files[0]->owned = buf;
    if (wset_of_file(s, err)) {
        fx_wset_close(s);
        return NULL;
    }
    return s;
}

fx_wset *fx_wset_open_component(const char *dir, const char *display_dir, const char *base, int use_mmap,
                                fx_err *err) {
    char path[4096], disp[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, base);
    snprintf(disp, sizeof disp, "%s/%s", display_dir, base);
    if (stat(path, &st) == 0) return fx_wset_open(path, disp, use_mmap, err);
    int e = errno;
    char ipath[4096 + 16], idisp[1024 + 16];
    snprintf(ipath, sizeof ipath, "%s.index.json", path);
    snprintf(idisp, sizeof idisp, "%s.index.json", disp);
    if (stat(ipath, &st) == 0) return fx_wset_open(ipath, idisp, use_mmap, err);
    fx_fail(err, FLUX_ERR_IO, "cannot open %s (nor a sharded %s.index.json): %s", path, base, strerror(e));
    return NULL;
}

flux_status fx_wset_load_data(fx_wset *s, int use_mmap, fx_err *err) {
    for (size_t i = 0; i < s->n_files; i++) {
        flux_status st = fx_st_load_data(s->files[i], use_mmap, err);
        if (st) return st;
    }
    return FLUX_OK;
}

void fx_wset_drop_data(fx_wset *s) {
    free_copies(s);
    if (s->base) {
        fx_wset_drop_data(s->base);
        return;
    }
    for (size_t i = 0; i < s->n_files; i++) fx_st_drop_data(s->files[i]);
}

flux_status fx_wset_check_faults(const fx_wset *s, fx_err *err) {
    for (size_t i = 0; i < s->n_files; i++) TRY(fx_st_check_faults(s->files[i], err));
    return FLUX_OK;
}

flux_status fx_wset_check_unchanged(const fx_wset *s, fx_err *err) {
    for (size_t i = 0; i < s->n_files; i++) TRY(fx_st_check_unchanged(s->files[i], err));
    return FLUX_OK;
}

int fx_wset_data_loaded(const fx_wset *s) {
    for (size_t i = 0; i < s->n_files; i++)
        if (!s->files[i]->data) return 0;
    return 1;
}

void fx_wset_willneed(const fx_wset *s) {
    for (size_t i = 0; i < s->n_files; i++) {
        const fx_st_file *f = s->files[i];
        if (f->data) madvise_range(f, f->data, (size_t)(f->file_size - f->data_off));
    }
}

long fx_wset_index(const fx_wset *s, const char *name) { return table_find(&s->names, s->tensors, name); }

const fx_tensor *fx_wset_find(const fx_wset *s, const char *name) {
    long i = table_find(&s->names, s->tensors, name);
    return i < 0 ? NULL : s->tensors[i];
}

flux_status fx_wset_get(const fx_wset *s, const char *name, const fx_shape *expect, const fx_tensor **out,
                        fx_err *err) {
    const fx_tensor *t = fx_wset_find(s, name);
    if (out) *out = t;
    if (!t) return fx_fail(err, FLUX_ERR_MODEL, "%s: tensor '%.200s' not found", s->display, name);
    if (expect && !fx_shape_eq(&t->shape, expect)) {
        char a[160], b[160], origin[600] = "";
        const view_tensor *v = as_view_tensor(s, t);
        for (int i = 0; v && i < v->n; i++) {
            size_t len = strlen(origin);
            snprintf(origin + len, sizeof origin - len, "%s rows %lld..%lld of '%.200s'", i ? " and" : " (from",
                     (long long)v->row0[i], (long long)(v->row0[i] + v->rows[i]), v->src[i]->name);
        }
        if (v) strcat(origin, ")");
        return fx_fail(err, FLUX_ERR_MODEL, "%s: tensor '%.200s'%s has shape %s, expected %s", t->file->display,
                       name, origin, fx_shape_str(&t->shape, a, sizeof a), fx_shape_str(expect, b, sizeof b));
    }
    return FLUX_OK;
}

flux_status fx_wset_check_weight(const fx_wset *s, const char *name, const fx_shape *expect, fx_err *err) {
    const fx_tensor *t;
    flux_status st = fx_wset_get(s, name, expect, &t, err);
    if (st) return st;
    if (fx_st_weight_dtype(t->dtype) < 0)
        return fx_fail(err, FLUX_ERR_MODEL,
                       "%s: tensor '%.200s' has dtype %s; weights must be F32, F16, BF16, F8_E4M3, F8_E5M2 or a "
                       "GGUF block type",
                       t->file->display, name, fx_st_dtype_name(t->dtype));
    return FLUX_OK;
}

/* The checked tensor with its data present. */
static flux_status weight_tensor(const fx_wset *s, const char *name, const fx_shape *expect,
                                 const fx_tensor **out, fx_err *err) {
    flux_status st = fx_wset_check_weight(s, name, expect, err);
    if (st) return st;
    *out = fx_wset_find(s, name);
    if (!(*out)->file->data)
        return fx_fail(err, FLUX_ERR_STATE, "%s: data of tensor '%.200s' is not loaded", (*out)->file->display,
                       name);
    return FLUX_OK;
}

/* ---- fp8 weights: the per-tensor scale beside them ----
 * ComfyUI's conventions (README "fp8 checkpoints" gives the sources):
 * '<layer>.weight' F8_E4M3 / F8_E5M2 with '<layer>.weight_scale' (the
 * mixed-quant files) or '<layer>.scale_weight' (the older "scaled_fp8"
 * files), one f32 value, weight = f32(fp8)·scale; no scale tensor: scale 1
 * (plain fp8 casts). '.input_scale' / '.scale_input' only matter to fp8
 * activation matmuls; the dequantized product ignores them. */

/* The set and name a tensor of s is stored under (views: their source). */
static const fx_wset *stored_as(const fx_wset *s, const fx_tensor *t, const char **name) {
    const view_tensor *v = as_view_tensor(s, t);
    *name = v ? v->src[0]->name : t->name;
    return v ? s->base : s;
}

/* The scale tensor of fp8 weight `name` in s (NULL: none); FLUX_ERR_MODEL
 * when both conventions are present. */
static flux_status fp8_scale_tensor(const fx_wset *s, const char *name, const fx_tensor **out, fx_err *err) {
    static const char *const suffix[2] = {".weight_scale", ".scale_weight"};
    const size_t len = strlen(name);
    *out = NULL;
    if (len < 7 || strcmp(name + len - 7, ".weight")) return FLUX_OK;
    char key[FX_ST_MAX_NAME + 16];
    const fx_tensor *found[2];
    for (int i = 0; i < 2; i++) {
        snprintf(key, sizeof key, "%.*s%s", (int)(len - 7), name, suffix[i]);
        found[i] = fx_wset_find(s, key);
    }
    if (found[0] && found[1])
        return fx_fail(err, FLUX_ERR_MODEL, "%s: fp8 tensor '%.200s' has two scales, '%s' and '%s' (one convention expected)",
                       fx_wset_display(s), name, found[0]->name, found[1]->name);
    *out = found[0] ? found[0] : found[1];
    return FLUX_OK;
}

/* The scale of fp8 tensor t of s: 1 without a scale tensor; a scale must
 * be one finite, nonzero F32/BF16/F16 value (shape [] or [1]). */
static flux_status fp8_scale(const fx_wset *s, const fx_tensor *t, float *scale, fx_err *err) {
    const char *name;
    const fx_wset *base = stored_as(s, t, &name);
    const fx_tensor *st;
    *scale = 1.0f;
    flux_status rc = fp8_scale_tensor(base, name, &st, err);
    if (rc || !st) return rc;
    char sh[96];
    if (fx_shape_numel(&st->shape) != 1 || st->shape.ndim > 1)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "%s: scale '%.200s' has shape %s; fp8 weights take one per-tensor scale (shape [] or [1]), "
                       "per-channel or block scales are not supported",
                       fx_wset_display(base), st->name, fx_shape_str(&st->shape, sh, sizeof sh));
    if (st->dtype != FX_ST_F32 && st->dtype != FX_ST_BF16 && st->dtype != FX_ST_F16)
        return fx_fail(err, FLUX_ERR_MODEL, "%s: scale '%.200s' has dtype %s, expected F32", fx_wset_display(base),
                       st->name, fx_st_dtype_name(st->dtype));
    if (!fx_tensor_data(st))
        return fx_fail(err, FLUX_ERR_STATE, "%s: data of tensor '%.200s' is not loaded", st->file->display, st->name);
    fx_st_convert_f32(fx_tensor_data(st), st->dtype, 1, scale);
    if (!(*scale == *scale) || *scale == 0.0f || *scale - *scale != 0.0f)
        return fx_fail(err, FLUX_ERR_MODEL, "%s: scale '%.200s' is %g; an fp8 scale must be finite and nonzero",
                       fx_wset_display(base), st->name, (double)*scale);
    return FLUX_OK;
}

static int st_is_fp8(fx_st_dtype t) { return t == FX_ST_F8_E4M3 || t == FX_ST_F8_E5M2; }

int fx_st_fp8_companion(const char *name) {
    static const char *const suffix[] = {".weight_scale", ".scale_weight", ".input_scale", ".scale_input",
                                         ".comfy_quant"};
    const size_t len = strlen(name);
    for (size_t i = 0; i < sizeof suffix / sizeof *suffix; i++) {
        const size_t sl = strlen(suffix[i]);
        if (len > sl && !strcmp(name + len - sl, suffix[i])) return 1;
    }
    /* the marker tensor "<prefix>scaled_fp8" */
    return len >= 10 && !strcmp(name + len - 10, "scaled_fp8") && (len == 10 || name[len - 11] == '.');
}

flux_status fx_wset_check_fp8(const fx_wset *s, fx_err *err) {
    static const char *const suffix[] = {".weight_scale", ".scale_weight"};
    if (s->base) s = s->base; /* views: the stored names */
    for (size_t i = 0; i < s->n; i++) {
        const fx_tensor *t = s->tensors[i];
        const size_t len = strlen(t->name);
        for (int j = 0; j < 2; j++) {
            const size_t sl = strlen(suffix[j]);
            if (len <= sl || strcmp(t->name + len - sl, suffix[j])) continue;
            char wname[FX_ST_MAX_NAME + 16];
            snprintf(wname, sizeof wname, "%.*s.weight", (int)(len - sl), t->name);
            const fx_tensor *w = fx_wset_find(s, wname);
            if (!w)
                return fx_fail(err, FLUX_ERR_MODEL, "%s: scale '%.200s' has no weight '%.200s'", fx_wset_display(s),
                               t->name, wname);
            if (!st_is_fp8(w->dtype))
                return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                               "%s: scale '%.200s' belongs to '%.200s' of dtype %s; only fp8 (F8_E4M3, F8_E5M2) "
                               "weights take a per-tensor scale",
                               fx_wset_display(s), t->name, wname, fx_st_dtype_name(w->dtype));
        }
    }
    return FLUX_OK;
}

static flux_status matrix_view(fx_wset *s, const char *name, const fx_shape *expect, int64_t rows,
                               int64_t cols, fx_weight *out, fx_err *err) {
    const fx_tensor *t = fx_wset_find(s, name);
    if (t && s->stacked && t->file == s->stacked)
        return fx_fail(err, FLUX_ERR_MODEL,
                       "%s: tensor '%.200s' is stored as two row ranges; it can only be used by rows "
                       "(fx_wset_linear_rows)",
                       fx_wset_display(s), name);
    flux_status st = weight_tensor(s, name, expect, &t, err);
    if (st) return st;
    const void *data = fx_tensor_data(t);
    size_t es = is_block(t->dtype) ? 1 : fx_st_dtype_size(t->dtype); /* blocks are read bytewise */
    if ((uintptr_t)data % es) { /* rare: keep kernels' loads aligned to the element */
        void *copy = NULL;
        void **grown = realloc(s->copies, (s->n_copies + 1) * sizeof *grown);
        if (!grown || posix_memalign(&copy, 64, t->nbytes ? (size_t)t->nbytes : 64)) {
            if (grown) s->copies = grown;
            return fx_fail(err, FLUX_ERR_NOMEM, "out of memory copying misaligned tensor '%.200s'", name);
        }
        memcpy(copy, data, (size_t)t->nbytes);
        s->copies = grown;
        s->copies[s->n_copies++] = copy;
        data = copy;
    }
    float scale = 0.0f;
    if (st_is_fp8(t->dtype) && (st = fp8_scale(s, t, &scale, err))) return st;
    *out = (fx_weight){data, (fx_dtype)fx_st_weight_dtype(t->dtype), rows, cols, cols, NULL, scale};
    return FLUX_OK;
}

flux_status fx_wset_linear(fx_wset *s, const char *name, int64_t rows, int64_t cols, fx_weight *out,
                           fx_err *err) {
    return matrix_view(s, name, &FX_SHAPE(rows, cols), rows, cols, out, err);
}

flux_status fx_wset_conv(fx_wset *s, const char *name, int64_t cout, int64_t cin, int64_t kh, int64_t kw,
                         fx_weight *out, fx_err *err) {
    return matrix_view(s, name, &FX_SHAPE(cout, cin, kh, kw), cout, cin * kh * kw, out, err);
}

flux_status fx_wset_linearf(fx_wset *s, fx_weight *out, int64_t rows, int64_t cols, fx_err *err,
                            const char *fmt, ...) {
    char name[FX_ST_MAX_NAME];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return fx_wset_linear(s, name, rows, cols, out, err);
}

flux_status fx_wset_vecf(const fx_wset *s, float **out, int64_t n, fx_err *err, const char *fmt, ...) {
    char name[FX_ST_MAX_NAME];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return fx_wset_f32(s, name, &FX_SHAPE(n), out, NULL, err);
}

/* The file of s whose loaded data holds w's first byte, or NULL. */
static const fx_st_file *weight_file(const fx_wset *s, const fx_weight *w) {
    if (s->base) s = s->base;
    const unsigned char *p = w->data;
    for (size_t i = 0; i < s->n_files; i++) {
        const fx_st_file *f = s->files[i];
        if (f->data && p >= f->data && p < f->data + (f->file_size - f->data_off)) return f;
    }
    return NULL;
}

static void weight_advice(const fx_wset *s, const fx_weight *w, int advice) {
    const fx_st_file *f = weight_file(s, w);
    size_t len = w->n > 0 ? (size_t)fx_dtype_row_bytes(w->dtype, (w->n - 1) * w->ld + w->k) : 0;
    if (f) madvise_range_advice(f, w->data, len, advice);
}

int fx_wset_weight_mapped(const fx_wset *s, const fx_weight *w) {
    const fx_st_file *f = weight_file(s, w);
    return f && f->map_base;
}

void fx_wset_weight_willneed(const fx_wset *s, const fx_weight *w) { weight_advice(s, w, MADV_WILLNEED); }
void fx_wset_weight_dontneed(const fx_wset *s, const fx_weight *w) { weight_advice(s, w, MADV_DONTNEED); }

/* n elements of tensor t of s from src into f32 (fp8: times its scale,
 * the weight's value). */
static flux_status convert_f32(const fx_wset *s, const fx_tensor *t, const void *src, int64_t n, float *dst,
                               fx_err *err) {
    fx_st_convert_f32(src, t->dtype, n, dst);
    if (!st_is_fp8(t->dtype)) return FLUX_OK;
    float scale;
    flux_status st = fp8_scale(s, t, &scale, err);
    if (!st) fx_weight_scale_row(scale, n, dst);
    return st;
}

/* A two-range view tensor converted range by range into dst. */
static flux_status read_stacked(const fx_wset *base, const view_tensor *v, float *dst, fx_err *err) {
    for (int i = 0; i < v->n; i++) {
        const fx_tensor *src = v->src[i];
        if (!fx_tensor_data(src))
            return fx_fail(err, FLUX_ERR_STATE, "%s: data of tensor '%.200s' is not loaded", src->file->display,
                           src->name);
        int64_t row_elems = src->shape.d[0] ? fx_shape_numel(&src->shape) / src->shape.d[0] : 0;
        flux_status st = convert_f32(base, src,
                                     (const char *)fx_tensor_data(src) + fx_st_row_bytes(src->dtype, v->row0[i] * row_elems),
                                     v->rows[i] * row_elems, dst, err);
        if (st) return st;
        dst += v->rows[i] * row_elems;
    }
    return FLUX_OK;
}

flux_status fx_wset_read_f32(const fx_wset *s, const char *name, const fx_shape *expect, float *dst,
                             fx_err *err) {
    const fx_tensor *t = fx_wset_find(s, name);
    if (t && s->stacked && t->file == s->stacked) {
        flux_status st = fx_wset_check_weight(s, name, expect, err);
        return st ? st : read_stacked(s->base, as_view_tensor(s, t), dst, err);
    }
    flux_status st = weight_tensor(s, name, expect, &t, err);
    if (st) return st;
    return convert_f32(s, t, fx_tensor_data(t), fx_shape_numel(&t->shape), dst, err);
}

flux_status fx_wset_f32(const fx_wset *s, const char *name, const fx_shape *expect, float **out,
                        int64_t *numel, fx_err *err) {
    const fx_tensor *t = fx_wset_find(s, name);
    *out = NULL;
    int stacked = t && s->stacked && t->file == s->stacked;
    flux_status st = stacked ? fx_wset_check_weight(s, name, expect, err) : weight_tensor(s, name, expect, &t, err);
    if (st) return st;
    int64_t n = fx_shape_numel(&t->shape);
    float *buf = malloc(n ? (size_t)n * sizeof *buf : sizeof *buf);
    if (!buf) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory reading tensor '%.200s'", name);
    if (stacked && (st = read_stacked(s->base, as_view_tensor(s, t), buf, err))) {
        free(buf);
        return st;
    }
    if (!stacked && (st = convert_f32(s, t, fx_tensor_data(t), n, buf, err))) {
        free(buf);
        return st;
    }
    *out = buf;
    if (numel) *numel = n;
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Row views and view sets                                                  */
/* ------------------------------------------------------------------------ */

flux_status fx_wset_linear_rows(fx_wset *s, const char *name, int64_t rows, int64_t cols, int64_t row0, int64_t n,
                                fx_weight *out, fx_err *err) {
    if (row0 < 0 || n < 0 || row0 + n > rows)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: rows [%lld, %lld) of tensor '%.200s' are outside [0, %lld)",
                       fx_wset_display(s), (long long)row0, (long long)(row0 + n), name, (long long)rows);
    const fx_tensor *t = fx_wset_find(s, name);
    if (t && s->stacked && t->file == s->stacked) {
        flux_status st = fx_wset_check_weight(s, name, &FX_SHAPE(rows, cols), err);
        if (st) return st;
        const view_tensor *v = as_view_tensor(s, t);
        int64_t start = 0;
        for (int i = 0; i < v->n; start += v->rows[i], i++) {
            if (row0 < start || row0 + n > start + v->rows[i]) continue;
            const fx_tensor *src = v->src[i];
            st = matrix_view(s->base, src->name, &src->shape, src->shape.d[0], cols, out, err);
            if (st) return st;
            out->data = (const char *)out->data + fx_st_row_bytes(src->dtype, (v->row0[i] + row0 - start) * cols);
            out->n = n;
            return FLUX_OK;
        }
        return fx_fail(err, FLUX_ERR_MODEL, "%s: rows [%lld, %lld) of tensor '%.200s' span both of its stored ranges",
                       fx_wset_display(s), (long long)row0, (long long)(row0 + n), name);
    }
    flux_status st = fx_wset_linear(s, name, rows, cols, out, err);
    if (st) return st;
    out->data = (const char *)out->data + fx_st_row_bytes(fx_wset_find(s, name)->dtype, row0 * cols);
    out->n = n;
    return FLUX_OK;
}

fx_wset *fx_wset_view_new(fx_wset *base, const char *display, size_t capacity, fx_err *err) {
    fx_wset *v = calloc(1, sizeof *v);
    const char *disp = display ? display : base->display;
    if (!v || !(v->display = strdup(disp)) || !(v->views = calloc(capacity ? capacity : 1, sizeof *v->views)) ||
        !(v->tensors = calloc(capacity ? capacity : 1, sizeof *v->tensors)) || table_init(&v->names, capacity) ||
        !(v->stacked = file_new(NULL, disp, err))) {
        if (v) {
            free(v->display);
            free(v->views);
            free(v->tensors);
            free(v->names.slots);
            free(v);
        }
        fx_wset_close(base);
        fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", disp);
        return NULL;
    }
    v->base = base;
    v->capacity = capacity;
    v->files = base->files; /* borrowed: loading and dropping data go to base */
    v->n_files = base->n_files;
    return v;
}

flux_status fx_wset_view_add(fx_wset *view, const char *name, const fx_wset_range *ranges, int n, fx_err *err) {
    if (!view->base || n < 1 || n > 2)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "fx_wset_view_add: not a view, or %d ranges (1 or 2)", n);
    if (view->n == view->capacity)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: view is full (%zu tensors)", view->display, view->capacity);
    size_t len = strlen(name);
    view_tensor *v = calloc(1, sizeof *v + len + 1);
    if (!v) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory mapping tensor '%.200s'", name);
    memcpy(v->name, name, len + 1);
    v->n = n;
    int64_t total_rows = 0;
    for (int i = 0; i < n; i++) {
        const fx_tensor *src = fx_wset_find(view->base, ranges[i].src);
        const char *problem = NULL;
        if (!src) problem = "not found";
        else if (src->shape.ndim < 1) problem = "is a scalar (no rows)";
        else if (ranges[i].row0 < 0 || ranges[i].rows < 0 || ranges[i].row0 + ranges[i].rows > src->shape.d[0])
            problem = "has fewer rows than the range";
        else if (i && (src->dtype != v->src[0]->dtype || src->shape.ndim != v->src[0]->shape.ndim ||
                       memcmp(src->shape.d + 1, v->src[0]->shape.d + 1, (size_t)(src->shape.ndim - 1) * sizeof(int64_t))))
            problem = "differs from the first range in dtype or trailing dimensions";
        if (problem) {
            char shape[160] = "";
            if (src) fx_shape_str(&src->shape, shape, sizeof shape);
            flux_status st = fx_fail(err, FLUX_ERR_MODEL, "%s: tensor '%.200s' %s (%s%s%s rows %lld..%lld wanted for '%.200s')",
                                     fx_wset_display(view->base), ranges[i].src, problem, src ? "shape " : "", shape,
                                     src ? "," : "", (long long)ranges[i].row0,
                                     (long long)(ranges[i].row0 + ranges[i].rows), name);
            free(v);
            return st;
        }
        v->src[i] = src;
        v->row0[i] = ranges[i].row0;
        v->rows[i] = ranges[i].rows;
        total_rows += ranges[i].rows;
    }
    const fx_tensor *first = v->src[0];
    int64_t row_bytes = first->shape.d[0] ? first->nbytes / first->shape.d[0] : 0;
    v->t.name = v->name;
    v->t.dtype = first->dtype;
    v->t.shape = first->shape;
    v->t.shape.d[0] = total_rows;
    v->t.nbytes = total_rows * row_bytes;
    if (n == 1) { /* an ordinary tensor: a range of the same file */
        v->t.file = first->file;
        v->t.offset = first->offset + v->row0[0] * row_bytes;
    } else {      /* no single data pointer */
        v->t.file = view->stacked;
        v->t.offset = 0;
    }
    view->views[view->n] = v;
    view->tensors[view->n] = &v->t;
    if (table_insert(&view->names, view->tensors, view->n) >= 0) {
        view->views[view->n] = NULL;
        free(v);
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: tensor '%.200s' mapped twice", view->display, name);
    }
    view->n++;
    return FLUX_OK;
}

const fx_wset *fx_wset_view_base(const fx_wset *s) { return s->base; }
