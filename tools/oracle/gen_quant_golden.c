/*
 * gen_quant_golden.c — write tests/golden/quant/<TYPE>.bin: the rows of
 * tests/kernels/quant_input.h quantized by ggml's own reference quantizers
 * (quantize_row_*_ref of ggml's src/ggml-quants.c), so the test suite can
 * check that our quantizers are byte-identical to ggml's.
 *
 * Not built by `make tools` (it needs a ggml checkout). Build by hand, e.g.
 *   cc -O2 -c -I<ggml>/include -I<ggml>/src -I<ggml>/src/ggml-cpu <ggml>/src/ggml-quants.c
 *   cc -O2 -I. tools/oracle/gen_quant_golden.c ggml-quants.o -lm -o gen_quant_golden
 * (ggml-quants.o needs ggml_abort, ggml_row_size, ggml_type_name and
 * ggml_type_size, which this file stubs), then run it from the repository
 * root: ./gen_quant_golden tests/golden/quant
 */
#include <stdio.h>
#include <stdlib.h>

#include "tests/kernels/quant_input.h"

typedef void (*quant_fn)(const float *x, void *y, int64_t k);
void quantize_row_q8_0_ref(const float *, void *, int64_t);
void quantize_row_q4_0_ref(const float *, void *, int64_t);
void quantize_row_q4_1_ref(const float *, void *, int64_t);
void quantize_row_q5_0_ref(const float *, void *, int64_t);
void quantize_row_q5_1_ref(const float *, void *, int64_t);
void quantize_row_q2_K_ref(const float *, void *, int64_t);
void quantize_row_q3_K_ref(const float *, void *, int64_t);
void quantize_row_q4_K_ref(const float *, void *, int64_t);
void quantize_row_q5_K_ref(const float *, void *, int64_t);
void quantize_row_q6_K_ref(const float *, void *, int64_t);

/* the symbols ggml-quants.o needs from the rest of ggml (never called by the _ref functions) */
void ggml_abort(const char *file, int line, const char *fmt, ...) {
    fprintf(stderr, "ggml_abort %s:%d\n", file, line);
    abort();
}
size_t ggml_row_size(int type, int64_t ne) { abort(); }
const char *ggml_type_name(int type) { return "?"; }
size_t ggml_type_size(int type) { abort(); }

int main(int argc, char **argv) {
    static const struct { const char *name; quant_fn fn; int block, bytes; } types[] = {
        {"Q8_0", quantize_row_q8_0_ref, 32, 34},   {"Q4_0", quantize_row_q4_0_ref, 32, 18},
        {"Q4_1", quantize_row_q4_1_ref, 32, 20},   {"Q5_0", quantize_row_q5_0_ref, 32, 22},
        {"Q5_1", quantize_row_q5_1_ref, 32, 24},   {"Q2_K", quantize_row_q2_K_ref, 256, 84},
        {"Q3_K", quantize_row_q3_K_ref, 256, 110}, {"Q4_K", quantize_row_q4_K_ref, 256, 144},
        {"Q5_K", quantize_row_q5_K_ref, 256, 176}, {"Q6_K", quantize_row_q6_K_ref, 256, 210},
    };
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
        return 2;
    }
    static float x[QI_ROWS * QI_COLS];
    static unsigned char out[QI_ROWS * QI_COLS * 2];
    qi_fill(x);
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        size_t rb = (size_t)(QI_COLS / types[t].block * types[t].bytes);
        for (int r = 0; r < QI_ROWS; r++) types[t].fn(x + r * QI_COLS, out + r * rb, QI_COLS);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.bin", argv[1], types[t].name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(out, 1, QI_ROWS * rb, f) != QI_ROWS * rb || fclose(f)) {
            perror(path);
            return 1;
        }
    }
    return 0;
}
