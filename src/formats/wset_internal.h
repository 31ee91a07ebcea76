/*
 * wset_internal.h — inside the weight sets (weight_set.c, wset_shards.c,
 * wset_view.c): the set's fields and what the three files share.
 */
#ifndef FX_WSET_INTERNAL_H
#define FX_WSET_INTERNAL_H

#include "src/base/json.h"
#include "tensor_reader.h"
#include "weight_set.h"

struct fx_wset {
    char *display;
    fx_tensor_file **files;
    size_t n_files;
    const fx_tensor **tensors; /* visible tensors */
    size_t n;
    fx_name_table names;
    fx_json_doc *index_doc;    /* sharded: the index (names point into the shards) */
    void **copies;             /* aligned copies of misaligned tensors */
    size_t n_copies;
    /* views (fx_wset_view_new): files and data belong to base */
    fx_wset *base;
    struct view_tensor **views; /* [capacity], owned */
    size_t capacity;
    fx_tensor_file *stacked;       /* pseudo file (no data) of two-range tensors */
    struct wset_grid **grids;      /* fp8 side scales as f32 grids (wset_quant.c) */
    size_t n_grids;
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

static inline const view_tensor *as_view_tensor(const fx_wset *s, const fx_tensor *t) {
    return s->base && t ? (const view_tensor *)(const void *)t : NULL;
}

/* 1 if t is a two-range tensor of view s (no single data pointer). */
static inline int is_stacked(const fx_wset *s, const fx_tensor *t) { return t && s->stacked && t->file == s->stacked; }

/* Open the shards of the index at path into s (wset_shards.c). */
flux_status fx_wset_open_sharded(fx_wset *s, const char *path, int use_mmap, fx_err *err);

/* fp8 scales (wset_quant.c): out->scale / scales / row0 of the fp8 tensor t
 * of s (a view's tensor: its source's), a side-scale grid made once and
 * owned by the set that stores t; free them all (on drop and close). */
flux_status fx_wset_weight_scales(fx_wset *s, const fx_tensor *t, fx_weight *out, fx_err *err);
void fx_wset_free_grids(fx_wset *s);
/* NVFP4 weights (U8 [n, k/2] with an F8_E4M3 '.weight_scale' and a
 * '.weight_scale_2') read as F4_E2M1 [n, k]: called on every opened set. */
void fx_wset_adopt_nvfp4(fx_wset *s);
/* x [n rows of t from row0, whole rows] ·= their fp8 scales; other dtypes
 * unchanged. */
flux_status fx_wset_scaled_rows(const fx_wset *s, const fx_tensor *t, int64_t row0, int64_t n, float *x,
                                fx_err *err);

/* The [rows, cols] matrix view of a tensor of s (weight_set.c). */
flux_status fx_wset_matrix_view(fx_wset *s, const char *name, const fx_shape *expect, int64_t rows, int64_t cols,
                                fx_weight *out, fx_err *err);

#endif
