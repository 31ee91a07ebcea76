/*
 * npy.h — NumPy .npy files: the format of `--noise`, `--embeddings`,
 * `--dump` and of the golden test data.
 *
 * Reading: format versions 1.0, 2.0 and 3.0; dtypes '<f4' and '<i4', plus
 * '<f8' and '<i8' converted to float32 / int32 (a finite value that does not
 * fit is an error naming its index). C order only. The file length must be
 * exactly header + data. Writing: float32 or int32, version 1.0, header laid
 * out byte for byte as numpy.save writes it (64-byte aligned, with numpy's
 * spare room for growing the first axis), atomically.
 */
#ifndef FX_NPY_H
#define FX_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define FX_NPY_MAX_DIMS 8

typedef enum fx_npy_dtype { FX_NPY_F32 = 0, FX_NPY_I32 = 1 } fx_npy_dtype;

typedef struct fx_npy {
    fx_npy_dtype dtype;                /* after conversion */
    int ndim;                          /* 0..FX_NPY_MAX_DIMS */
    int64_t shape[FX_NPY_MAX_DIMS];
    size_t count;                      /* product of the shape */
    void *data;                        /* float[count] or int32_t[count], malloc'd
                                          (never NULL after success) */
} fx_npy;

/* Read a .npy file. `*out` is zeroed on failure. */
flux_status fx_npy_read(const char *path, fx_npy *out, fx_err *err);
/* Parse a whole .npy file held in memory (`name` for messages). */
flux_status fx_npy_parse(const uint8_t *buf, size_t n, const char *name, fx_npy *out, fx_err *err);
void fx_npy_free(fx_npy *a);

/* Check dtype and shape: `shape` has `ndim` entries, −1 meaning any size.
 * The error names `what`, the expected and the found shape. */
flux_status fx_npy_expect(const fx_npy *a, const char *what, fx_npy_dtype dtype, int ndim, const int64_t *shape,
                          fx_err *err);

/* Write float32 / int32 data of the given shape (ndim 0..8). */
flux_status fx_npy_write_f32(const char *path, const float *data, int ndim, const int64_t *shape, fx_err *err);
flux_status fx_npy_write_i32(const char *path, const int32_t *data, int ndim, const int64_t *shape, fx_err *err);

/* "(128, 3, 4)", "(512,)", "()" — Python's tuple repr, as in messages. */
void fx_npy_shape_str(int ndim, const int64_t *shape, char *buf, size_t size);

#endif
