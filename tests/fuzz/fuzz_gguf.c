/*
 * fuzz_gguf.c — libFuzzer target for the GGUF header and tensor table.
 *
 * The input is a whole file image. It is parsed by fx_gguf_parse and opened
 * as a weight set in memory and, through an anonymous memfd, as a real file
 * (mapped, read into RAM, header only): all must agree, every error must be
 * FLUX_ERR_FORMAT naming the file. Every accepted tensor's data is read at
 * its last byte and every weight tensor with at most 2^16 elements is
 * dequantized (reads stay inside the buffer, or ASan reports it); the
 * Qwen3 (llama.cpp) and single-file (BFL) name mappers run on the set.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/formats/gguf.h"
#include "src/formats/qwen3_file.h"
#include "src/formats/weight_set.h"
#include "tests/fuzz/fuzz_memfd.h"
#include "src/formats/single_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond) {
    if (!cond) abort();
}

static void exercise(fx_wset *s) {
    fx_err err;
    for (size_t i = 0; i < fx_wset_count(s); i++) {
        const fx_tensor *t = fx_wset_tensor_at(s, i);
        check(fx_wset_find(s, t->name) == t);
        if (!fx_dtype_is_weight(t->dtype) || !fx_wset_data_loaded(s)) continue;
        if (fx_shape_numel(&t->shape) > (1 << 16)) continue;
        float *v = NULL;
        int64_t n = -1;
        if (fx_wset_f32(s, t->name, NULL, &v, &n, &err) == FLUX_OK) {
            check(n == fx_shape_numel(&t->shape));
            free(v);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fx_err err;
    fx_err_clear(&err);
    uint8_t *buf = malloc(size ? size : 1); /* exact size: ASan sees reads past the end */
    if (!buf) return 0;
    memcpy(buf, data, size);
    fx_gguf *g = fx_gguf_parse(buf, size, "fuzz.gguf", &err);
    if (g) {
        for (size_t i = 0; i < g->n_tensors; i++) {
            const fx_gguf_tensor *t = &g->tensors[i];
            check(t->offset % g->alignment == 0 && g->data_start + t->offset + t->nbytes <= size);
            if (t->nbytes) {
                volatile uint8_t x = buf[g->data_start + t->offset + t->nbytes - 1];
                (void)x;
            }
        }
        fx_gguf_free(g);
    } else {
        check(err.code == FLUX_ERR_FORMAT || err.code == FLUX_ERR_NOMEM);
        check(!strncmp(err.msg, "fuzz.gguf: ", 11));
    }
    int gguf = fx_gguf_is_gguf(buf, size);
    int ok_memory = 0;
    if (gguf) {
        fx_err_clear(&err);
        fx_wset *s = fx_wset_open_memory(buf, size, "fuzz.gguf", 0, &err);
        ok_memory = s != NULL;
        check(ok_memory == (g != NULL));
        if (s) {
            exercise(s);
            fx_wset *q = fx_qwen3_file_wrap(s, NULL, &err); /* takes s */
            if (q) {
                exercise(q);
                fx_wset_close(q);
            }
        }
        s = fx_wset_open_memory(buf, size, "fuzz.gguf", 0, &err);
        if (s) {
            fx_wset *sf = fx_single_file_wrap(s, NULL, NULL, &err);
            if (sf) {
                exercise(sf);
                fx_wset_close(sf);
            }
        }
    }
    char path[64];
    int fd = gguf ? fuzz_memfd(data, size, path) : -1;
    if (fd >= 0) {
        for (int mode = 1; mode >= -1; mode--) {
            fx_err_clear(&err);
            fx_wset *s = fx_wset_open(path, "fuzz.gguf", mode, &err);
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
