/*
 * npy.c — NumPy .npy reading and writing (see npy.h).
 *
 * File layout: "\x93NUMPY", major, minor, header length (u16 LE for v1,
 * u32 LE for v2/v3), then a Python dict literal
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (128, 3, 4), }
 * padded with spaces and a final '\n', then the raw little-endian data.
 */
#include "npy.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "file_read.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* Headers are a few hundred bytes; numpy itself refuses more than 10000
 * by default. Anything beyond this is not a file we wrote or want. */
#define NPY_MAX_HEADER (1u << 20)
/* numpy.save leaves room for the first axis to grow to this many digits. */
#define NPY_GROWTH_AXIS_MAX_DIGITS 21

/* The on-disk element types we accept. */
typedef enum { SRC_F4, SRC_I4, SRC_F8, SRC_I8 } src_type;
static const char *const src_descr[] = {"<f4", "<i4", "<f8", "<i8"};
static const size_t src_size[] = {4, 4, 8, 8};

typedef struct npy_header {
    src_type type;
    int ndim;
    int64_t shape[FX_NPY_MAX_DIMS];
    size_t count;
    size_t data_offset;
} npy_header;

static int host_is_le(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

void fx_npy_shape_str(int ndim, const int64_t *shape, char *buf, size_t size) {
    size_t n = 0;
    if (size == 0) return;
    buf[0] = '\0';
    n += (size_t)snprintf(buf + n, size - n, "(");
    for (int i = 0; i < ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (n < size) snprintf(buf + n, size - n, ndim == 1 ? ",)" : ")");
}

/* ---------------------------------------------------------------- header */

typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int accept(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A quoted Python string without escapes, into buf. */
static int parse_string(cursor *c, char *buf, size_t size) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= size) return 0;
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end) return 0;
    c->p++;
    buf[n] = '\0';
    return 1;
}

static int parse_word(cursor *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n)) return 0;
    c->p += n;
    return 1;
}

/* A shape tuple: "()", "(5,)", "(2, 3)", "(2, 3,)"; Python 2 "3L" ints. */
static int parse_shape(cursor *c, npy_header *h, const char **why) {
    *why = "shape is not a tuple of non-negative integers";
    if (!accept(c, '(')) return 0;
    int n = 0, trailing_comma = 0;
    for (;;) {
        skip_ws(c);
        if (c->p < c->end && *c->p == ')') break;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9') return 0;
        int64_t v = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            v = v * 10 + (*c->p++ - '0');
            if (v > ((int64_t)1 << 48)) {
                *why = "a dimension is absurdly large";
                return 0;
            }
        }
        if (c->p < c->end && *c->p == 'L') c->p++;
        if (n == FX_NPY_MAX_DIMS) {
            *why = "more than 8 dimensions";
            return 0;
        }
        h->shape[n++] = v;
        trailing_comma = accept(c, ',');
        if (!trailing_comma) {
            skip_ws(c);
            if (c->p >= c->end || *c->p != ')') return 0;
        }
    }
    c->p++; /* ')' */
    if (n == 1 && !trailing_comma) {
        *why = "shape '(N)' is a number, not a tuple (expected '(N,)')";
        return 0;
    }
    h->ndim = n;
    return 1;
}

/* Parse the dict literal; *why explains a failure. */
static int parse_dict(const char *text, size_t len, npy_header *h, const char **why) {
    cursor c = {text, text + len};
    int have_descr = 0, have_order = 0, have_shape = 0;
    char key[32], descr[32];
    *why = "header is not a Python dict literal";
    if (!accept(&c, '{')) return 0;
    for (;;) {
        if (accept(&c, '}')) break;
        if (!parse_string(&c, key, sizeof key) || !accept(&c, ':')) return 0;
        if (!strcmp(key, "descr") && !have_descr) {
            have_descr = 1;
            if (!parse_string(&c, descr, sizeof descr)) {
                *why = "'descr' is not a simple type string (structured dtypes are not supported)";
                return 0;
            }
            int found = 0;
            for (int t = 0; t < 4; t++)
                if (!strcmp(descr, src_descr[t])) h->type = (src_type)t, found = 1;
            if (!found) {
                *why = descr[0] == '>' ? "big-endian data is not supported (expected '<f4' or '<i4')"
                                       : "dtype is not supported (expected '<f4' or '<i4'; '<f8'/'<i8' are "
                                         "converted)";
                return 0;
            }
        } else if (!strcmp(key, "fortran_order") && !have_order) {
            have_order = 1;
            if (parse_word(&c, "True")) {
                *why = "fortran_order is True: only C-order arrays are supported (save with "
                       "np.ascontiguousarray)";
                return 0;
            }
            if (!parse_word(&c, "False")) {
                *why = "fortran_order is neither True nor False";
                return 0;
            }
        } else if (!strcmp(key, "shape") && !have_shape) {
            have_shape = 1;
            if (!parse_shape(&c, h, why)) return 0;
        } else {
            *why = "header has an unknown or repeated key (expected descr, fortran_order, shape)";
            return 0;
        }
        if (accept(&c, ',')) continue;
        if (accept(&c, '}')) break;
        *why = "header dict is malformed";
        return 0;
    }
    skip_ws(&c);
    if (c.p != c.end) {
        *why = "junk after the header dict";
        return 0;
    }
    if (!have_descr || !have_order || !have_shape) {
        *why = "header lacks one of descr, fortran_order, shape";
        return 0;
    }
    return 1;
}

/* Validate preamble + header of a file of `file_size` bytes whose first
 * `avail` bytes are in buf. */
static flux_status parse_header(const uint8_t *buf, size_t avail, size_t file_size, const char *name,
                                npy_header *h, fx_err *err) {
    memset(h, 0, sizeof *h);
    if (file_size < 10 || avail < 10 || memcmp(buf, NPY_MAGIC, NPY_MAGIC_LEN))
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: not a NumPy .npy file (bad magic)", name);
    int major = buf[6], minor = buf[7];
    size_t hlen, pre;
    if (major == 1 && minor == 0) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        pre = 10;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (avail < 12) return fx_fail(err, FLUX_ERR_FORMAT, "%s: truncated .npy header", name);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        pre = 12;
    } else {
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: unsupported .npy format version %d.%d (expected 1.0, 2.0, 3.0)",
                       name, major, minor);
    }
    if (hlen > NPY_MAX_HEADER)
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: .npy header length %zu is absurd", name, hlen);
    if (pre + hlen > avail || pre + hlen > file_size)
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: truncated .npy header (%zu bytes declared, file has %zu)", name,
                       hlen, file_size - pre);
    const char *why = NULL;
    if (!parse_dict((const char *)buf + pre, hlen, h, &why))
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: bad .npy header: %s", name, why);

    size_t count = 1;
    for (int i = 0; i < h->ndim; i++) {
        if (h->shape[i] != 0 && count > SIZE_MAX / 16 / (size_t)h->shape[i])
            return fx_fail(err, FLUX_ERR_FORMAT, "%s: .npy shape is too large", name);
        count *= (size_t)h->shape[i];
    }
    h->count = count;
    h->data_offset = pre + hlen;
    size_t need = count * src_size[h->type], have = file_size - h->data_offset;
    if (have != need) {
        char shp[160];
        fx_npy_shape_str(h->ndim, h->shape, shp, sizeof shp);
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: %s data: shape %s of %s needs %zu bytes, the file has %zu", name,
                       have < need ? "truncated" : "unexpected length of", shp, src_descr[h->type], need, have);
    }
    return FLUX_OK;
}

/* ------------------------------------------------------------ conversion */

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* Convert `count` elements at src into dst (float or int32_t). dst may
 * alias src for 4-byte types. */
static flux_status convert(const uint8_t *src, src_type type, size_t count, void *dst, const char *name,
                           fx_err *err) {
    if ((type == SRC_F4 || type == SRC_I4) && host_is_le()) {
        memmove(dst, src, count * 4);
        return FLUX_OK;
    }
    for (size_t i = 0; i < count; i++) {
        switch (type) {
        case SRC_F4: {
            uint32_t u = le32(src + 4 * i);
            memcpy((float *)dst + i, &u, 4);
            break;
        }
        case SRC_I4: ((int32_t *)dst)[i] = (int32_t)le32(src + 4 * i); break;
        case SRC_F8: {
            uint64_t u = le64(src + 8 * i);
            double d;
            memcpy(&d, &u, 8);
            if (isfinite(d) && fabs(d) > FLT_MAX)
                return fx_fail(err, FLUX_ERR_FORMAT, "%s: element %zu (%g) does not fit in float32", name, i, d);
            ((float *)dst)[i] = (float)d;
            break;
        }
        case SRC_I8: {
            int64_t v = (int64_t)le64(src + 8 * i);
            if (v < INT32_MIN || v > INT32_MAX)
                return fx_fail(err, FLUX_ERR_FORMAT, "%s: element %zu (%lld) does not fit in int32", name, i,
                               (long long)v);
            ((int32_t *)dst)[i] = (int32_t)v;
            break;
        }
        }
    }
    return FLUX_OK;
}

static void fill_result(const npy_header *h, fx_npy *out) {
    out->dtype = h->type == SRC_F4 || h->type == SRC_F8 ? FX_NPY_F32 : FX_NPY_I32;
    out->ndim = h->ndim;
    memcpy(out->shape, h->shape, sizeof out->shape);
    out->count = h->count;
}

flux_status fx_npy_parse(const uint8_t *buf, size_t n, const char *name, fx_npy *out, fx_err *err) {
    memset(out, 0, sizeof *out);
    npy_header h;
    flux_status s = parse_header(buf, n, n, name, &h, err);
    if (s != FLUX_OK) return s;
    void *data = malloc(h.count ? h.count * 4 : 1);
    if (!data) return fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory (%zu elements)", name, h.count);
    s = convert(buf + h.data_offset, h.type, h.count, data, name, err);
    if (s != FLUX_OK) {
        free(data);
        return s;
    }
    fill_result(&h, out);
    out->data = data;
    return FLUX_OK;
}

flux_status fx_npy_read(const char *path, fx_npy *out, fx_err *err) {
    memset(out, 0, sizeof *out);
    uint8_t *buf;
    size_t size;
    flux_status rs = fx_read_file(path, NULL, UINT64_MAX, "a .npy array", &buf, &size, err);
    if (rs != FLUX_OK) return rs;
    npy_header h;
    flux_status s = parse_header(buf, size, size, path, &h, err);
    if (s != FLUX_OK) {
        free(buf);
        return s;
    }
    /* Convert in place at the start of the buffer (4-byte results never
     * overtake 4- or 8-byte sources), then trim: no second copy. */
    s = convert(buf + h.data_offset, h.type, h.count, buf, path, err);
    if (s != FLUX_OK) {
        free(buf);
        return s;
    }
    void *data = realloc(buf, h.count ? h.count * 4 : 1);
    fill_result(&h, out);
    out->data = data ? data : buf;
    return FLUX_OK;
}

void fx_npy_free(fx_npy *a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

flux_status fx_npy_expect(const fx_npy *a, const char *what, fx_npy_dtype dtype, int ndim, const int64_t *shape,
                          fx_err *err) {
    int ok = a->dtype == dtype && a->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        if (shape[i] >= 0 && shape[i] != a->shape[i]) ok = 0;
    if (ok) return FLUX_OK;
    char want[200], got[200];
    size_t n = 0;
    n += (size_t)snprintf(want + n, sizeof want - n, "(");
    for (int i = 0; i < ndim && n < sizeof want; i++) {
        if (shape[i] >= 0) n += (size_t)snprintf(want + n, sizeof want - n, i ? ", %lld" : "%lld", (long long)shape[i]);
        else n += (size_t)snprintf(want + n, sizeof want - n, i ? ", any" : "any");
    }
    if (n < sizeof want) snprintf(want + n, sizeof want - n, ndim == 1 ? ",)" : ")");
    fx_npy_shape_str(a->ndim, a->shape, got, sizeof got);
    const char *tn[] = {"float32", "int32"};
    return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: expected %s %s, found %s %s", what, tn[dtype], want,
                   tn[a->dtype], got);
}

/* ---------------------------------------------------------------- writing */

static flux_status write_npy(const char *path, const char *descr, const void *data, int ndim,
                             const int64_t *shape, fx_err *err) {
    if (ndim < 0 || ndim > FX_NPY_MAX_DIMS || (ndim > 0 && !shape))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "cannot write %s: %d dimensions (0..8 supported)", path, ndim);
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] > 0 && count > SIZE_MAX / 8 / (size_t)shape[i]))
            return fx_fail(err, FLUX_ERR_INVALID_ARG, "cannot write %s: bad shape", path);
        count *= (size_t)shape[i];
    }
    if (count && !data) return fx_fail(err, FLUX_ERR_INVALID_ARG, "cannot write %s: no data", path);

    /* Header exactly as numpy 1.x writes it: sorted keys, repr values,
     * spare room for the first axis, then pad to 64 with ' ' and '\n'. */
    char shp[200], hdr[512];
    fx_npy_shape_str(ndim, shape, shp, sizeof shp);
    int len = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shp);
    if (ndim > 0) {
        char first[32];
        int digits = snprintf(first, sizeof first, "%lld", (long long)shape[0]);
        for (int i = digits; i < NPY_GROWTH_AXIS_MAX_DIGITS; i++) hdr[len++] = ' ';
    }
    int total = NPY_MAGIC_LEN + 2 + 2 + len + 1;
    int pad = 64 - total % 64;
    for (int i = 0; i < pad; i++) hdr[len++] = ' ';
    hdr[len++] = '\n';
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(len & 0xFF), (uint8_t)(len >> 8)};

    fx_atomic_file af;
    flux_status s = fx_atomic_open(&af, path, err);
    if (s != FLUX_OK) return s;
    int ok = fwrite(pre, 1, 10, af.f) == 10 && fwrite(hdr, 1, (size_t)len, af.f) == (size_t)len;
    if (ok && count == 0) {
        /* shape with a zero: header only */
    } else if (ok && host_is_le()) {
        ok = fwrite(data, 4, count, af.f) == count;
    } else {
        const uint8_t *src = data;
        for (size_t i = 0; ok && i < count; i++) {
            uint8_t le[4] = {src[4 * i + 3], src[4 * i + 2], src[4 * i + 1], src[4 * i]};
            ok = fwrite(le, 1, 4, af.f) == 4;
        }
    }
    if (!ok) {
        s = fx_fail(err, FLUX_ERR_IO, "cannot write %s: %s", path, strerror(errno ? errno : EIO));
        fx_atomic_abort(&af);
        return s;
    }
    return fx_atomic_commit(&af, err);
}

flux_status fx_npy_write_f32(const char *path, const float *data, int ndim, const int64_t *shape, fx_err *err) {
    return write_npy(path, "<f4", data, ndim, shape, err);
}

flux_status fx_npy_write_i32(const char *path, const int32_t *data, int ndim, const int64_t *shape, fx_err *err) {
    return write_npy(path, "<i4", data, ndim, shape, err);
}
