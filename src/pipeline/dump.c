/*
 * dump.c — the .npy files of `--dump DIR` (dump.h).
 */
#include "dump.h"

#include <stdio.h>
#include <stdlib.h>

#include "src/base/npy.h"

/* "<dir>/<name>" into buf. */
static flux_status join(char *buf, size_t size, const char *dir, const char *name, fx_err *err) {
    int n = snprintf(buf, size, "%s/%s", dir, name);
    if (n > 0 && (size_t)n < size) return FLUX_OK;
    return fx_fail(err, FLUX_ERR_INVALID_ARG, "--dump: path '%s/%s' is too long", dir, name);
}

flux_status fx_dump_f32(const char *dir, const char *name, const float *data, int ndim, const int64_t *shape,
                        fx_err *err) {
    char path[4096];
    if (!dir) return FLUX_OK;
    TRY(join(path, sizeof path, dir, name, err));
    return fx_npy_write_f32(path, data, ndim, shape, err);
}

flux_status fx_dump_i32(const char *dir, const char *name, const int32_t *data, int ndim, const int64_t *shape,
                        fx_err *err) {
    char path[4096];
    if (!dir) return FLUX_OK;
    TRY(join(path, sizeof path, dir, name, err));
    return fx_npy_write_i32(path, data, ndim, shape, err);
}

flux_status fx_dump_tokens(const char *dir, const int32_t *ids, const uint8_t *mask, int n, fx_err *err) {
    if (!dir) return FLUX_OK;
    int32_t *m = malloc((size_t)n * sizeof *m);
    if (!m) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (--dump)");
    for (int i = 0; i < n; i++) m[i] = mask[i];
    int64_t shape[1] = {n};
    flux_status st = fx_dump_i32(dir, "tokens.npy", ids, 1, shape, err);
    if (!st) st = fx_dump_i32(dir, "attention_mask.npy", m, 1, shape, err);
    free(m);
    return st;
}

flux_status fx_dump_velocity(const char *dir, int step, const float *v, int64_t tokens, int channels, fx_err *err) {
    char name[64];
    snprintf(name, sizeof name, "velocity_%03d.npy", step);
    int64_t shape[2] = {tokens, channels};
    return fx_dump_f32(dir, name, v, 2, shape, err);
}

flux_status fx_dump_chw(const char *dir, const char *name, const float *x, int c, int h, int w, fx_err *err) {
    int64_t shape[3] = {c, h, w};
    return fx_dump_f32(dir, name, x, 3, shape, err);
}
