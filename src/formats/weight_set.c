/*
 * weight_set.c — weight sets (weight_set.h): opening a component, lookups
 * by name with shape and dtype checks, weights viewed in place, f32 reads
 * (a two-range tensor of a view set range by range), and the data of all
 * the set's files loaded, dropped and checked together.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "wset_internal.h"

static void free_copies(fx_wset *s) {
    fx_wset_free_grids(s);
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
        fx_tensor_file_close(s->stacked);
        fx_wset_close(s->base);
        s->files = NULL;
        s->n_files = 0;
    }
    for (size_t i = 0; i < s->n_files; i++) fx_tensor_file_close(s->files[i]);
    free(s->files);
    free(s->tensors);
    fx_name_table_free(&s->names);
    fx_json_free(s->index_doc);
    free(s->display);
    free(s);
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* The set of one opened file (s->files[0]): all its tensors. */
static flux_status wset_of_file(fx_wset *s, fx_err *err) {
    s->n_files = 1;
    const fx_tensor_file *f = s->files[0];
    s->tensors = malloc((f->n ? f->n : 1) * sizeof *s->tensors);
    if (!s->tensors || fx_name_table_init(&s->names, f->n))
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", s->display);
    for (s->n = 0; s->n < f->n; s->n++) {
        s->tensors[s->n] = f->index[s->n];
        fx_name_table_insert(&s->names, s->tensors, s->n); /* names are unique within a file */
    }
    return FLUX_OK;
}

static flux_status wset_single(fx_wset *s, const char *path, int use_mmap, fx_err *err) {
    s->files = calloc(1, sizeof *s->files);
    if (!s->files) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", s->display);
    s->files[0] = fx_tensor_file_open(path, s->display, use_mmap, err);
    if (!s->files[0]) return err ? err->code : FLUX_ERR_IO;
    return wset_of_file(s, err);
}

fx_wset *fx_wset_open(const char *path, const char *display, int use_mmap, fx_err *err) {
    fx_wset *s = calloc(1, sizeof *s);
    if (!s || !(s->display = strdup(display ? display : path))) {
        free(s);
        fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", path);
        return NULL;
    }
    flux_status st = ends_with(path, ".index.json") ? fx_wset_open_sharded(s, path, use_mmap, err)
                                                    : wset_single(s, path, use_mmap, err);
    if (st) {
        fx_wset_close(s);
        return NULL;
    }
    fx_wset_adopt_nvfp4(s);
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
    if (!(s->files[0] = fx_tensor_file_open_memory(buf, len, display, err))) {
        if (own) free(buf);
        fx_wset_close(s);
        return NULL;
    }
    if (own) s->files[0]->owned = buf;
    if (wset_of_file(s, err)) {
        fx_wset_close(s);
        return NULL;
    }
    fx_wset_adopt_nvfp4(s);
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
        flux_status st = fx_tensor_file_load_data(s->files[i], use_mmap, err);
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
    for (size_t i = 0; i < s->n_files; i++) fx_tensor_file_drop_data(s->files[i]);
}

flux_status fx_wset_check_faults(const fx_wset *s, fx_err *err) {
    for (size_t i = 0; i < s->n_files; i++) TRY(fx_tensor_file_check_faults(s->files[i], err));
    return FLUX_OK;
}

flux_status fx_wset_check_unchanged(const fx_wset *s, fx_err *err) {
    for (size_t i = 0; i < s->n_files; i++) TRY(fx_tensor_file_check_unchanged(s->files[i], err));
    return FLUX_OK;
}

int fx_wset_data_loaded(const fx_wset *s) {
    for (size_t i = 0; i < s->n_files; i++)
        if (!s->files[i]->data) return 0;
    return 1;
}

void fx_wset_willneed(const fx_wset *s) {
    for (size_t i = 0; i < s->n_files; i++) {
        const fx_tensor_file *f = s->files[i];
        if (f->data) fx_tensor_file_advise(f, f->data, (size_t)(f->file_size - f->data_off), 0);
    }
}

long fx_wset_index(const fx_wset *s, const char *name) { return fx_name_table_find(&s->names, s->tensors, name); }

/* " (from rows a..b of 'src')" for a view tensor, "" for others. */
static const char *view_origin(const fx_wset *s, const fx_tensor *t, char *buf, size_t size) {
    const view_tensor *v = as_view_tensor(s, t);
    buf[0] = '\0';
    for (int i = 0; v && i < v->n; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s rows %lld..%lld of '%.200s'", i ? " and" : " (from",
                 (long long)v->row0[i], (long long)(v->row0[i] + v->rows[i]), v->src[i]->name);
    }
    if (v && strlen(buf) + 1 < size) strcat(buf, ")");
    return buf;
}

flux_status fx_wset_get(const fx_wset *s, const char *name, const fx_shape *expect, const fx_tensor **out,
                        fx_err *err) {
    const fx_tensor *t = fx_wset_find(s, name);
    if (out) *out = t;
    if (!t) return fx_fail(err, FLUX_ERR_MODEL, "%s: tensor '%.200s' not found", s->display, name);
    if (expect && !fx_shape_eq(&t->shape, expect)) {
        char a[160], b[160], origin[600];
        return fx_fail(err, FLUX_ERR_MODEL, "%s: tensor '%.200s'%s has shape %s, expected %s", t->file->display,
                       name, view_origin(s, t, origin, sizeof origin), fx_shape_str(&t->shape, a, sizeof a),
                       fx_shape_str(expect, b, sizeof b));
    }
    return FLUX_OK;
}

flux_status fx_wset_check_weight(const fx_wset *s, const char *name, const fx_shape *expect, fx_err *err) {
    const fx_tensor *t;
    flux_status st = fx_wset_get(s, name, expect, &t, err);
    if (st) return st;
    if (!fx_dtype_is_weight(t->dtype)) {
        /* a block type without kernels is a valid file flux.c cannot run; a
         * plain type (I64, ...) is no weight at all */
        char origin[600], names[200];
        int block = fx_dtype_is_block(t->dtype);
        return fx_fail(err, block ? FLUX_ERR_UNSUPPORTED : FLUX_ERR_MODEL,
                       "%s: tensor '%.200s'%s has dtype %s%s; weights must be %s", t->file->display, name,
                       view_origin(s, t, origin, sizeof origin), fx_dtype_name(t->dtype),
                       block ? ", which flux.c cannot decode" : "", fx_dtype_weight_names(names, sizeof names));
    }
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

int fx_wset_fp8_companion(const char *name) {
    static const char *const suffix[] = {".weight_scale", ".scale_weight", ".weight_scale_inv", ".weight_scale_2",
                                         ".input_scale", ".scale_input", ".comfy_quant"};
    const size_t len = strlen(name);
    for (size_t i = 0; i < sizeof suffix / sizeof *suffix; i++) {
        const size_t sl = strlen(suffix[i]);
        if (len > sl && !strcmp(name + len - sl, suffix[i])) return 1;
    }
    /* the marker tensor "<prefix>scaled_fp8" */
    return len >= 10 && !strcmp(name + len - 10, "scaled_fp8") && (len == 10 || name[len - 11] == '.');
}

/* n elements of tensor t of s (whole rows from row0) from src into f32:
 * the weight's values (fp8: times its scales, wset_quant.c). */
static flux_status convert_f32(const fx_wset *s, const fx_tensor *t, const void *src, int64_t row0, int64_t n,
                               float *dst, fx_err *err) {
    fx_tensor_convert_f32(src, t->dtype, n, dst);
    const int64_t cols = t->shape.ndim == 2 ? t->shape.d[1] : n;
    return fx_wset_scaled_rows(s, t, row0, cols ? n / cols : 0, dst, err);
}

flux_status fx_wset_matrix_view(fx_wset *s, const char *name, const fx_shape *expect, int64_t rows, int64_t cols,
                                fx_weight *out, fx_err *err) {
    const fx_tensor *t = fx_wset_find(s, name);
    if (is_stacked(s, t))
        return fx_fail(err, FLUX_ERR_MODEL,
                       "%s: tensor '%.200s' is stored as two row ranges; it can only be used by rows "
                       "(fx_wset_linear_rows)",
                       fx_wset_display(s), name);
    flux_status st = weight_tensor(s, name, expect, &t, err);
    if (st) return st;
    const void *data = fx_tensor_data(t);
    size_t es = fx_dtype_is_block(t->dtype) ? 1 : fx_dtype_size(t->dtype); /* blocks are read bytewise */
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
    *out = (fx_weight){.data = data, .dtype = t->dtype, .n = rows, .k = cols, .ld = cols};
    return fx_dtype_is_scaled(t->dtype) ? fx_wset_weight_scales(s, t, out, err) : FLUX_OK;
}

flux_status fx_wset_linear(fx_wset *s, const char *name, int64_t rows, int64_t cols, fx_weight *out,
                           fx_err *err) {
    return fx_wset_matrix_view(s, name, &FX_SHAPE(rows, cols), rows, cols, out, err);
}

flux_status fx_wset_conv(fx_wset *s, const char *name, int64_t cout, int64_t cin, int64_t kh, int64_t kw,
                         fx_weight *out, fx_err *err) {
    return fx_wset_matrix_view(s, name, &FX_SHAPE(cout, cin, kh, kw), cout, cin * kh * kw, out, err);
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
static const fx_tensor_file *weight_file(const fx_wset *s, const fx_weight *w) {
    if (s->base) s = s->base;
    const unsigned char *p = w->data;
    for (size_t i = 0; i < s->n_files; i++) {
        const fx_tensor_file *f = s->files[i];
        if (f->data && p >= f->data && p < f->data + (f->file_size - f->data_off)) return f;
    }
    return NULL;
}

static void weight_advice(const fx_wset *s, const fx_weight *w, int dontneed) {
    const fx_tensor_file *f = weight_file(s, w);
    size_t len = w->n > 0 ? (size_t)fx_dtype_row_bytes(w->dtype, (w->n - 1) * w->ld + w->k) : 0;
    if (f) fx_tensor_file_advise(f, w->data, len, dontneed);
}

int fx_wset_weight_mapped(const fx_wset *s, const fx_weight *w) {
    const fx_tensor_file *f = weight_file(s, w);
    return f && f->map_base;
}

void fx_wset_weight_willneed(const fx_wset *s, const fx_weight *w) { weight_advice(s, w, 0); }
void fx_wset_weight_dontneed(const fx_wset *s, const fx_weight *w) { weight_advice(s, w, 1); }

/* A two-range view tensor converted range by range into dst. */
static flux_status read_stacked(const fx_wset *base, const view_tensor *v, float *dst, fx_err *err) {
    for (int i = 0; i < v->n; i++) {
        const fx_tensor *src = v->src[i];
        if (!fx_tensor_data(src))
            return fx_fail(err, FLUX_ERR_STATE, "%s: data of tensor '%.200s' is not loaded", src->file->display,
                           src->name);
        int64_t row_elems = src->shape.d[0] ? fx_shape_numel(&src->shape) / src->shape.d[0] : 0;
        flux_status st = convert_f32(
            base, src, (const char *)fx_tensor_data(src) + fx_dtype_row_bytes(src->dtype, v->row0[i] * row_elems),
            v->row0[i], v->rows[i] * row_elems, dst, err);
        if (st) return st;
        dst += v->rows[i] * row_elems;
    }
    return FLUX_OK;
}

flux_status fx_wset_read_f32(const fx_wset *s, const char *name, const fx_shape *expect, float *dst,
                             fx_err *err) {
    const fx_tensor *t = fx_wset_find(s, name);
    if (is_stacked(s, t)) {
        flux_status st = fx_wset_check_weight(s, name, expect, err);
        return st ? st : read_stacked(s->base, as_view_tensor(s, t), dst, err);
    }
    flux_status st = weight_tensor(s, name, expect, &t, err);
    if (st) return st;
    return convert_f32(s, t, fx_tensor_data(t), 0, fx_shape_numel(&t->shape), dst, err);
}

flux_status fx_wset_f32(const fx_wset *s, const char *name, const fx_shape *expect, float **out,
                        int64_t *numel, fx_err *err) {
    const fx_tensor *t = fx_wset_find(s, name);
    *out = NULL;
    int stacked = is_stacked(s, t);
    flux_status st = stacked ? fx_wset_check_weight(s, name, expect, err) : weight_tensor(s, name, expect, &t, err);
    if (st) return st;
    int64_t n = fx_shape_numel(&t->shape);
    float *buf = malloc(n ? (size_t)n * sizeof *buf : sizeof *buf);
    if (!buf) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory reading tensor '%.200s'", name);
    st = stacked ? read_stacked(s->base, as_view_tensor(s, t), buf, err)
                 : convert_f32(s, t, fx_tensor_data(t), 0, n, buf, err);
    if (st) {
        free(buf);
        return st;
    }
    *out = buf;
    if (numel) *numel = n;
    return FLUX_OK;
}

