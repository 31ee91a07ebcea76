/*
 * fuzz_npy.c — libFuzzer target for the .npy reader (`make fuzz`).
 *
 * Any input either parses into an array whose element count matches the
 * file's data bytes, or fails with a message; a parsed array written back
 * and read again must give the same shape and bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/base/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fx_npy a;
    fx_err err;
    if (fx_npy_parse(data, size, "fuzz.npy", &a, &err) != FLUX_OK) {
        if (a.data || !err.msg[0]) abort();
        return 0;
    }
    size_t count = 1;
    for (int i = 0; i < a.ndim; i++) count *= (size_t)a.shape[i];
    if (count != a.count || !a.data || a.count * 4 > size) abort();
    if (a.count <= 4096) { /* write back and read again */
        char path[64];
        snprintf(path, sizeof path, "/tmp/fuzz-npy-%d.npy", (int)getpid());
        flux_status s = a.dtype == FX_NPY_F32 ? fx_npy_write_f32(path, a.data, a.ndim, a.shape, &err)
                                              : fx_npy_write_i32(path, a.data, a.ndim, a.shape, &err);
        if (s != FLUX_OK) abort();
        fx_npy b;
        if (fx_npy_read(path, &b, &err) != FLUX_OK) abort();
        if (b.ndim != a.ndim || b.count != a.count || b.dtype != a.dtype ||
            memcmp(b.shape, a.shape, sizeof a.shape) || memcmp(b.data, a.data, a.count * 4))
            abort();
        fx_npy_free(&b);
        unlink(path);
    }
    fx_npy_free(&a);
    return 0;
}
