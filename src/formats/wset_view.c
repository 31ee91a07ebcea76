/*
 * wset_view.c — view sets (weight_set.h): another set's tensors under new
 * names, each one row range of a base tensor or two stacked; rows of
 * weights viewed in place, also inside two-range tensors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wset_internal.h"

flux_status fx_wset_linear_rows(fx_wset *s, const char *name, int64_t rows, int64_t cols, int64_t row0, int64_t n,
                                fx_weight *out, fx_err *err) {
    if (row0 < 0 || n < 0 || row0 + n > rows)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: rows [%lld, %lld) of tensor '%.200s' are outside [0, %lld)",
                       fx_wset_display(s), (long long)row0, (long long)(row0 + n), name, (long long)rows);
    const fx_tensor *t = fx_wset_find(s, name);
    if (is_stacked(s, t)) {
        flux_status st = fx_wset_check_weight(s, name, &FX_SHAPE(rows, cols), err);
        if (st) return st;
        const view_tensor *v = as_view_tensor(s, t);
        int64_t start = 0;
        for (int i = 0; i < v->n; start += v->rows[i], i++) {
            if (row0 < start || row0 + n > start + v->rows[i]) continue;
            const fx_tensor *src = v->src[i];
            st = fx_wset_matrix_view(s->base, src->name, &src->shape, src->shape.d[0], cols, out, err);
            if (st) return st;
            *out = fx_weight_rows(out, v->row0[i] + row0 - start, n); /* keeps its place for side scales */
            return FLUX_OK;
        }
        return fx_fail(err, FLUX_ERR_MODEL, "%s: rows [%lld, %lld) of tensor '%.200s' span both of its stored ranges",
                       fx_wset_display(s), (long long)row0, (long long)(row0 + n), name);
    }
    flux_status st = fx_wset_linear(s, name, rows, cols, out, err);
    if (st) return st;
    *out = fx_weight_rows(out, row0, n);
    return FLUX_OK;
}

fx_wset *fx_wset_view_new(fx_wset *base, const char *display, size_t capacity, fx_err *err) {
    fx_wset *v = calloc(1, sizeof *v);
    const char *disp = display ? display : base->display;
    if (!v || !(v->display = strdup(disp)) || !(v->views = calloc(capacity ? capacity : 1, sizeof *v->views)) ||
        !(v->tensors = calloc(capacity ? capacity : 1, sizeof *v->tensors)) || fx_name_table_init(&v->names, capacity) ||
        !(v->stacked = fx_tensor_file_new_empty(disp, err))) {
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
    if (fx_name_table_insert(&view->names, view->tensors, view->n) >= 0) {
        view->views[view->n] = NULL;
        free(v);
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: tensor '%.200s' mapped twice", view->display, name);
    }
    view->n++;
    return FLUX_OK;
}

flux_status fx_wset_view_as_matrix(fx_wset *view, const char *name, fx_err *err) {
    const fx_tensor *t = view->base ? fx_wset_find(view, name) : NULL;
    if (!t) return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: no view tensor '%.200s'", fx_wset_display(view), name);
    view_tensor *v = (view_tensor *)as_view_tensor(view, t);
    int nd = v->t.shape.ndim;
    while (nd > 2 && v->t.shape.d[nd - 1] == 1) nd--;
    if (nd != 2) {
        char shape[160];
        fx_shape_str(&v->t.shape, shape, sizeof shape);
        return fx_fail(err, FLUX_ERR_MODEL, "%s: tensor '%.200s' %s is not a matrix or a 1×1 convolution",
                       fx_wset_display(view), v->src[0]->name, shape);
    }
    v->t.shape.ndim = nd; /* same bytes: [r, c, 1, 1] → [r, c] */
    return FLUX_OK;
}

const fx_wset *fx_wset_view_base(const fx_wset *s) { return s->base; }
