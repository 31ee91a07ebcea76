/*
 * tensor_file.c — opened tensor files (tensor_file.h): the reader table,
 * the tensor list and its names, the data section (mapped or read) and
 * the checks that it is still the file that was opened.
 */
#include "tensor_reader.h"

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

#include "map_guard.h"
#include "src/base/file_read.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tensor files are little-endian; flux.c supports little-endian hosts only"
#endif

/* The formats, tried in order on a file's first bytes (as stb_image's loaders). */
static const fx_tensor_reader *const readers[] = {&fx_gguf_reader, &fx_safetensors_reader};

static const fx_tensor_reader *reader_of(const unsigned char *head, size_t len) {
    for (size_t i = 0; i < sizeof readers / sizeof *readers; i++)
        if (readers[i]->probe(head, len)) return readers[i];
    return &fx_safetensors_reader;
}

/* ------------------------------------------------------------------------ */
/* Shapes                                                                   */
/* ------------------------------------------------------------------------ */

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
/* For the readers                                                          */
/* ------------------------------------------------------------------------ */

flux_status fx_tensor_file_bad(fx_err *err, const fx_tensor_file *f, const char *tensor, const char *fmt, ...) {
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (tensor) return fx_fail(err, FLUX_ERR_FORMAT, "%s: tensor '%.200s': %s", f->display, tensor, what);
    return fx_fail(err, FLUX_ERR_FORMAT, "%s: %s", f->display, what);
}

flux_status fx_tensor_file_alloc_tensors(fx_tensor_file *f, size_t n, fx_err *err) {
    f->n = 0;
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    f->index = calloc(n ? n : 1, sizeof *f->index);
    if (!f->tensors || !f->index || fx_name_table_init(&f->names, n))
        return fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory for %zu tensors", f->display, n);
    return FLUX_OK;
}

flux_status fx_tensor_file_index_tensor(fx_tensor_file *f, fx_err *err) {
    fx_tensor *t = &f->tensors[f->n];
    f->index[f->n] = t;
    if (fx_name_table_insert(&f->names, f->index, f->n) >= 0)
        return fx_tensor_file_bad(err, f, t->name, "duplicate tensor name");
    f->n++;
    return FLUX_OK;
}

int fx_tensor_file_read_full(int fd, void *buf, size_t len, uint64_t off) {
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

/* ------------------------------------------------------------------------ */
/* Accessors                                                                */
/* ------------------------------------------------------------------------ */

const char *fx_tensor_file_display(const fx_tensor_file *f) { return f->display; }
const char *fx_tensor_file_path(const fx_tensor_file *f) { return f->path; }
size_t fx_tensor_file_count(const fx_tensor_file *f) { return f->n; }
const fx_tensor *fx_tensor_file_tensor_at(const fx_tensor_file *f, size_t i) { return i < f->n ? &f->tensors[i] : NULL; }

const fx_tensor *fx_tensor_file_find(const fx_tensor_file *f, const char *name) {
    long i = fx_name_table_find(&f->names, f->index, name);
    return i < 0 ? NULL : &f->tensors[i];
}

const char *fx_tensor_file_metadata(const fx_tensor_file *f, const char *key) {
    return f->reader && f->state ? f->reader->metadata(f, key) : NULL;
}

int fx_tensor_file_mapped(const fx_tensor_file *f) { return f && f->map_base && f->data; }

const void *fx_tensor_data(const fx_tensor *t) {
    return t->file->data ? t->file->data + t->offset : NULL;
}

void fx_tensor_file_advise(const fx_tensor_file *f, const void *ptr, size_t len, int dontneed) {
    if (!f->map_base || !len) return;
    const unsigned char *p = ptr;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(page - 1), b = (uintptr_t)(p + len);
    if (dontneed) { /* whole pages inside the range only */
        a = ((uintptr_t)p + page - 1) & ~(page - 1);
        b &= ~(page - 1);
        if (b <= a) return;
    }
    (void)madvise((void *)a, b - a, dontneed ? MADV_DONTNEED : MADV_WILLNEED);
}

void fx_tensor_willneed(const fx_tensor *t) {
    const fx_tensor_file *f = t->file;
    if (f->data) fx_tensor_file_advise(f, f->data + t->offset, (size_t)t->nbytes, 0);
}

/* ------------------------------------------------------------------------ */
/* Opening and closing                                                      */
/* ------------------------------------------------------------------------ */

static fx_tensor_file *file_new(const char *path, const char *display, fx_err *err) {
    fx_tensor_file *f = calloc(1, sizeof *f);
    if (f) {
        f->guard = -1;
        f->display = strdup(display ? display : path ? path : "<memory>");
        if (path) f->path = strdup(path);
    }
    if (!f || !f->display || (path && !f->path)) {
        fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", display ? display : path ? path : "<memory>");
        fx_tensor_file_close(f);
        return NULL;
    }
    return f;
}

fx_tensor_file *fx_tensor_file_new_empty(const char *display, fx_err *err) { return file_new(NULL, display, err); }

flux_status fx_tensor_file_check_unchanged(const fx_tensor_file *f, fx_err *err) {
    if (!f->path) return FLUX_OK;
    return fx_file_identity_check_path(f->path, &f->id, err);
}

flux_status fx_tensor_file_check_faults(const fx_tensor_file *f, fx_err *err) {
    size_t at;
    if (!fx_map_guard_faulted(f->guard, &at)) return FLUX_OK;
    return fx_fail(err, FLUX_ERR_IO,
                   "%s was cut short while in use (a read at byte %zu is past its end now)",
                   f->path, at);
}

flux_status fx_tensor_file_load_data(fx_tensor_file *f, int use_mmap, fx_err *err) {
    if (f->data) return FLUX_OK;
    if (!f->path) return fx_fail(err, FLUX_ERR_STATE, "%s: in-memory file has no data to load", f->display);
    struct stat st;
    int fd = fx_open_regular(f->path, &st, err);
    if (fd < 0) return err ? err->code : FLUX_ERR_IO;
    /* the header was parsed from the file as opened: data of another file
     * (same size or not) would be read through the old tensor table */
    if (fx_file_identity_check(f->path, &f->id, &st, err)) {
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
    if (fx_tensor_file_read_full(fd, buf, (size_t)data_size, off)) {
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

void fx_tensor_file_drop_data(fx_tensor_file *f) {
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

fx_tensor_file *fx_tensor_file_open(const char *path, const char *display, int use_mmap, fx_err *err) {
    fx_tensor_file *f = file_new(path, display, err);
    if (!f) return NULL;
    struct stat st;
    int fd = fx_open_regular(f->path, &st, err);
    if (fd < 0) goto fail;
    f->file_size = (uint64_t)st.st_size;
    f->id = fx_file_identity_of(&st);
    unsigned char head[8];
    size_t head_len = f->file_size < 8 ? (size_t)f->file_size : 8;
    if (fx_tensor_file_read_full(fd, head, head_len, 0)) {
        fx_fail(err, FLUX_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        close(fd);
        goto fail;
    }
    /* a file shorter than the probe is answered by safetensors' length check */
    f->reader = head_len < 8 ? &fx_safetensors_reader : reader_of(head, head_len);
    flux_status st_parse = f->reader->parse(f, fd, NULL, err);
    close(fd);
    if (st_parse || (use_mmap >= 0 && fx_tensor_file_load_data(f, use_mmap, err))) goto fail;
    return f;
fail:
    fx_tensor_file_close(f);
    return NULL;
}

fx_tensor_file *fx_tensor_file_open_memory(const void *buf, size_t len, const char *display, fx_err *err) {
    fx_tensor_file *f = file_new(NULL, display ? display : "<memory>", err);
    if (!f) return NULL;
    f->file_size = len;
    f->reader = reader_of(buf, len < 8 ? len : 8);
    if (f->reader->parse(f, -1, buf, err)) {
        fx_tensor_file_close(f);
        return NULL;
    }
    f->data = (const unsigned char *)buf + f->data_off;
    return f;
}

void fx_tensor_file_close(fx_tensor_file *f) {
    if (!f) return;
    fx_tensor_file_drop_data(f);
    if (f->reader && f->state) f->reader->free_state(f->state);
    free(f->owned);
    fx_name_table_free(&f->names);
    free(f->tensors);
    free(f->index);
    free(f->display);
    free(f->path);
    free(f);
}

/* ------------------------------------------------------------------------ */
/* Conversions                                                              */
/* ------------------------------------------------------------------------ */

void fx_tensor_convert_f32(const void *src, fx_dtype t, int64_t n, float *dst) {
    if (t == FX_DTYPE_F32) memcpy(dst, src, (size_t)n * 4);
    else if (fx_dtype_is_weight(t)) fx_dequantize_row(t, src, n, dst); /* exact; unaligned bytes are fine */
    else
        for (int64_t i = 0; i < n; i++) dst[i] = 0.0f; /* callers check the dtype first */
}
