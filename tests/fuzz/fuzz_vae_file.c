/*
 * fuzz_vae_file.c — libFuzzer target for single-file VAEs
 * (src/formats/vae_file.c: BFL / LDM names mapped onto the diffusers ones;
 * make fuzz). The input is a whole .safetensors file, handed over through a
 * memfd: opening must succeed or fail cleanly, every mapped tensor must be
 * found by its name and read as f32 without touching memory outside the
 * file, and a config derived from the shapes must be checked or refused.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_memfd.h"

#include "src/formats/vae_file.h"
#include "src/model/config_derive.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond) {
    if (!cond) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_memfd(data, size, path);
    if (fd < 0) return 0;
    fx_err err = {0};
    fx_wset *w = fx_vae_file_open(path, (int)(size & 1), NULL, &err);
    if (!w) {
        check(err.code != FLUX_OK && err.msg[0]);
        close(fd);
        return 0;
    }
    for (size_t i = 0; i < fx_wset_count(w); i++) {
        const fx_tensor *t = fx_wset_tensor_at(w, i);
        check(fx_wset_find(w, t->name) == t);
        int64_t n = fx_shape_numel(&t->shape);
        if (!fx_dtype_is_weight(t->dtype) || n > (1 << 20)) continue;
        float *x = malloc((size_t)(n ? n : 1) * sizeof *x);
        if (x) check(fx_wset_read_f32(w, t->name, &t->shape, x, &err) == FLUX_OK);
        free(x);
    }
    fx_vae_config c;
    if (fx_vae_config_derive(w, &c, &err) != FLUX_OK) check(err.code != FLUX_OK && err.msg[0]);
    fx_wset_close(w);
    close(fd);
    return 0;
}
