/*
 * fuzz_safetensors.c — libFuzzer target for the safetensors validator.
 *
 * The input is a whole file image. It is validated in memory and, through
 * an anonymous memfd, as a real file with mmap, with read() and header-only;
 * all paths must agree. Every accepted tensor is looked up by name and every
 * float tensor converted to f32 (reads stay inside the buffer, or ASan
 * reports it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/formats/weight_set.h"
#include "tests/fuzz/fuzz_memfd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond) {
    if (!cond) abort();
}

static void exercise(fx_wset *s) {
    fx_err err;
    (void)fx_wset_check_quant(s, &err); /* the scale layouts: pass or a clean refusal */
    for (size_t i = 0; i < fx_wset_count(s); i++) {
        const fx_tensor *t = fx_wset_tensor_at(s, i);
        check(fx_wset_find(s, t->name) == t);
        check(fx_wset_get(s, t->name, &t->shape, NULL, &err) == FLUX_OK);
        if (!fx_dtype_is_weight(t->dtype) || !fx_wset_data_loaded(s)) continue;
        float *v = NULL;
        int64_t n = -1;
        if (fx_wset_f32(s, t->name, NULL, &v, &n, &err) == FLUX_OK) {
            check(n == fx_shape_numel(&t->shape));
            free(v);
        }
        if (t->shape.ndim == 2) {
            fx_weight w;
            if (fx_wset_linear(s, t->name, t->shape.d[0], t->shape.d[1], &w, &err) == FLUX_OK && t->nbytes) {
                volatile uint8_t x = ((const uint8_t *)w.data)[t->nbytes - 1];
                (void)x;
                float row[64]; /* the last row's first values with their scales (side-scale grids) */
                int64_t k = w.k < 64 ? w.k : 64;
                k -= k % fx_dtype_block(w.dtype);
                if (w.n > 0 && k > 0) {
                    fx_tensor_convert_f32((const char *)w.data + fx_dtype_row_bytes(w.dtype, (w.n - 1) * w.ld), w.dtype,
                                          k, row);
                    fx_weight_values(&w, w.n - 1, 0, k, row);
                }
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fx_err err;
    fx_err_clear(&err);
    /* exact-size heap copy so ASan sees any read past the end */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    fx_tensor_file *f = fx_tensor_file_open_memory(buf, size, "fuzz.safetensors", &err);
    int ok_memory = f != NULL;
    if (f) {
        for (size_t i = 0; i < fx_tensor_file_count(f); i++) {
            const fx_tensor *t = fx_tensor_file_tensor_at(f, i);
            check(fx_tensor_file_find(f, t->name) != NULL);
            check(t->offset >= 0 && t->nbytes >= 0);
            if (t->nbytes) {
                volatile uint8_t x = ((const uint8_t *)fx_tensor_data(t))[t->nbytes - 1];
                (void)x;
            }
        }
        (void)fx_tensor_file_metadata(f, "format");
        fx_tensor_file_close(f);
    } else {
        check(err.code == FLUX_ERR_FORMAT && !strncmp(err.msg, "fuzz.safetensors: ", 18));
    }

    char path[64];
    int fd = fuzz_memfd(data, size, path);
    if (fd >= 0) {
        for (int mode = 1; mode >= -1; mode--) {
            fx_err_clear(&err);
            fx_wset *s = fx_wset_open(path, "fuzz.safetensors", mode, &err);
            check((s != NULL) == ok_memory); /* file and memory readers agree */
            if (s) {
                exercise(s);
                fx_wset_close(s);
            }
        }
        close(fd);
    }
    free(buf);
    return 0;
}
