/*
 * fuzz_single_file.c — libFuzzer target for single-file transformer
 * checkpoints (src/formats/single_file.c, compiled in, over the loader layer; make
 * fuzz). The input is a whole .safetensors file, handed over through a
 * memfd: opening must succeed or fail cleanly, and a mapped set must be
 * usable — its quantized layouts checked (wset_quant.c), and when they
 * pass every tensor read as f32 (two-range ones assembled, fp8 / int8 /
 * NVFP4 with their scales), viewed by rows, shape checks run — without
 * touching memory outside the file.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_memfd.h"

#include "src/formats/single_file.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond) {
    if (!cond) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_memfd(data, size, path);
    if (fd < 0) return 0;
    fx_err err = {0};
    fx_single_file_info info;
    fx_wset *w = fx_single_file_open(path, (int)(size & 1), NULL, &info, &err);
    if (!w) {
        check(err.code != FLUX_OK && err.msg[0]);
        close(fd);
        return 0;
    }
    check(info.mapped == fx_wset_count(w));
    const int scales_ok = fx_wset_check_quant(w, &err) == FLUX_OK; /* else: refused cleanly, at load */
    check(scales_ok || (err.code != FLUX_OK && err.msg[0]));
    for (size_t i = 0; i < fx_wset_count(w); i++) {
        const fx_tensor *t = fx_wset_tensor_at(w, i);
        check(fx_wset_find(w, t->name) == t);
        int64_t n = fx_shape_numel(&t->shape);
        if (!scales_ok || !fx_dtype_is_weight(t->dtype) || n > (1 << 20)) continue;
        float *x = malloc((size_t)(n ? n : 1) * sizeof *x);
        if (!x) continue;
        check(fx_wset_read_f32(w, t->name, &t->shape, x, &err) == FLUX_OK);
        if (t->shape.ndim == 2 && t->shape.d[0] > 0) {
            fx_weight v;
            int64_t rows = t->shape.d[0], cols = t->shape.d[1];
            flux_status st = fx_wset_linear_rows(w, t->name, rows, cols, 0, 1, &v, &err);
            if (st == FLUX_OK) { /* first row: equals the f32 read */
                float row[64];
                int64_t k = cols < 64 ? cols : 64;
                k -= k % fx_dtype_block(t->dtype);
                fx_tensor_convert_f32(v.data, t->dtype, k, row);
                fx_weight_values(&v, 0, 0, k, row); /* its scales */
                check(!memcmp(row, x, (size_t)k * sizeof(float)) || x[0] != x[0]);
            }
        }
        fx_shape wrong = t->shape;
        wrong.d[0] = wrong.ndim ? wrong.d[0] + 1 : 0;
        if (wrong.ndim) check(fx_wset_check_weight(w, t->name, &wrong, &err) == FLUX_ERR_MODEL);
        free(x);
    }
    fx_wset_close(w);
    close(fd);
    return 0;
}
