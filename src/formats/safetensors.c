/*
 * safetensors.c — the strict safetensors reader (safetensors.h), an entry
 * of the tensor-file reader table.
 *
 * Parsing reads only the 8-byte length and the JSON header (pread), parses
 * it with our JSON parser (the document stays alive: tensor names point
 * into it) and validates every entry; the common code (tensor_file.c) then
 * maps or reads the data section. Opening a 1000-tensor 8 GB file costs
 * about a millisecond.
 */
#include "safetensors.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/json.h"
#include "tensor_reader.h"

/* The parsed header: names point into doc. */
typedef struct st_header {
    fx_json_doc *doc;
    const fx_json *metadata;  /* __metadata__ object or NULL */
    uint64_t header_len;
} st_header;

#define bad fx_tensor_file_bad

/* A dtype name of the safetensors list (the weight types and the plain ones). */
static int parse_dtype(const char *s, fx_dtype *out) {
    int t = fx_dtype_parse(s);
    if (t < 0 || !fx_dtype_in_safetensors((fx_dtype)t) || strcmp(s, fx_dtype_name((fx_dtype)t))) return -1;
    *out = (fx_dtype)t;
    return 0;
}

static int cmp_by_offset(const void *a, const void *b) {
    const fx_tensor *x = *(const fx_tensor *const *)a, *y = *(const fx_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

/* Validate one header entry and fill *t. */
static flux_status parse_entry(fx_tensor_file *f, const char *name, size_t name_len, const fx_json *v,
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
    int64_t nbytes = (int64_t)fx_dtype_size(t->dtype);
    for (size_t i = 0; i < nd && !has_zero; i++)
        if (__builtin_mul_overflow(nbytes, t->shape.d[i], &nbytes))
            return bad(err, f, name, "shape %s × %s overflows the byte size",
                       fx_shape_str(&t->shape, sbuf, sizeof sbuf), fx_dtype_name(t->dtype));
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
                   fx_shape_str(&t->shape, sbuf, sizeof sbuf), fx_dtype_name(t->dtype),
                   (long long)nbytes, (long long)b, (long long)e, (long long)(e - b));
    t->offset = b;
    t->nbytes = nbytes;
    return FLUX_OK;
}

/* Parse and validate the header text [hdr, hdr + h->header_len). */
static flux_status parse_header(fx_tensor_file *f, st_header *h, const char *hdr, fx_err *err) {
    uint64_t data_size = f->file_size - 8 - h->header_len;
    f->data_off = 8 + h->header_len;
    h->doc = fx_json_parse(hdr, (size_t)h->header_len, err);
    if (!h->doc) {
        if (err && err->code == FLUX_ERR_NOMEM) return fx_prefix(err, "%s", f->display);
        return fx_prefix(err, "%s: header is not valid JSON", f->display);
    }
    const fx_json *root = fx_json_root(h->doc);
    if (!fx_json_is_object(root))
        return bad(err, f, NULL, "header is a JSON %s, expected an object",
                   fx_json_type_name(fx_json_typeof(root)));
    size_t members = fx_json_len(root);
    TRY(fx_tensor_file_alloc_tensors(f, members, err));

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
            h->metadata = v;
            continue;
        }
        fx_tensor *t = &f->tensors[f->n];
        flux_status st = parse_entry(f, name, fx_json_key_len_at(root, i), v, data_size, t, err);
        if (st) return st;
        TRY(fx_tensor_file_index_tensor(f, err));
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

/* Check the 8-byte length against the file size. */
static flux_status check_header_len(fx_tensor_file *f, st_header *h, const unsigned char len8[8], fx_err *err) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | len8[i];
    if (n == 0) return bad(err, f, NULL, "header length is 0");
    if (n > FX_ST_MAX_HEADER)
        return bad(err, f, NULL, "header length %llu exceeds the %u-byte limit (not a safetensors file?)",
                   (unsigned long long)n, FX_ST_MAX_HEADER);
    if (n > f->file_size - 8)
        return bad(err, f, NULL, "header length %llu runs past the end of the file (%llu bytes)",
                   (unsigned long long)n, (unsigned long long)f->file_size);
    h->header_len = n;
    return FLUX_OK;
}

/* Any file that is not another format's is read as safetensors. */
static int probe(const unsigned char *head, size_t len) {
    (void)head, (void)len;
    return 1;
}

static flux_status parse(fx_tensor_file *f, int fd, const unsigned char *img, fx_err *err) {
    st_header *h = calloc(1, sizeof *h);
    if (!h) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", f->display);
    f->state = h;
    if (f->file_size < 8)
        return bad(err, f, NULL, "file is %llu bytes, shorter than the 8-byte header length",
                   (unsigned long long)f->file_size);
    if (img) {
        TRY(check_header_len(f, h, img, err));
        return parse_header(f, h, (const char *)img + 8, err);
    }
    unsigned char len8[8];
    if (fx_tensor_file_read_full(fd, len8, 8, 0)) return fx_fail(err, FLUX_ERR_IO, "cannot read %s: %s", f->path, strerror(errno));
    TRY(check_header_len(f, h, len8, err));
    char *hdr = malloc((size_t)h->header_len);
    if (!hdr) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory reading the header of %s", f->display);
    if (fx_tensor_file_read_full(fd, hdr, (size_t)h->header_len, 8)) {
        free(hdr);
        return fx_fail(err, FLUX_ERR_IO, "cannot read %s: %s", f->path, strerror(errno));
    }
    flux_status st = parse_header(f, h, hdr, err);
    free(hdr);
    return st;
}

static const char *metadata(const fx_tensor_file *f, const char *key) {
    const st_header *h = f->state;
    return fx_json_get_str(h->metadata, key, NULL);
}

static void free_state(void *state) {
    st_header *h = state;
    fx_json_free(h->doc);
    free(h);
}

const fx_tensor_reader fx_safetensors_reader = {"safetensors", probe, parse, metadata, free_state};
