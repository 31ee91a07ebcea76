/*
 * quant_input.h — the inputs of the quantizer golden test: QI_ROWS rows of
 * QI_COLS floats, each row a different kind of data, generated from
 * integers only (exact on every machine). Shared by
 * test_kernel_quant.c and tools/gen_quant_golden.c, which quantizes these
 * rows with ggml's reference quantizers to make tests/golden/quant/.
 */
#ifndef FX_TEST_QUANT_INPUT_H
#define FX_TEST_QUANT_INPUT_H

#include <stdint.h>

#define QI_ROWS 8
#define QI_COLS 512

static inline const char *qi_row_kind(int row) {
    static const char *const kinds[QI_ROWS] = {
        "gaussian-like", "gaussian-like with outliers", "all positive", "all negative, small",
        "sparse tiny values", "few levels with ties", "zeros", "wide range"};
    return row >= 0 && row < QI_ROWS ? kinds[row] : "?";
}

/* xorshift64 on a caller-held state */
static inline uint64_t qi_next(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* x[QI_ROWS][QI_COLS] */
static inline void qi_fill(float *x) {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int r = 0; r < QI_ROWS; r++)
        for (int i = 0; i < QI_COLS; i++) {
            float *v = x + r * QI_COLS + i;
            int64_t u = 0; /* sum of 4 uniform integers: a bell shape in [-4096, 4096] */
            for (int k = 0; k < 4; k++) u += (int64_t)(qi_next(&s) % 2049) - 1024;
            int64_t w = (int64_t)(qi_next(&s) % 65536);
            switch (r) {
            case 0: *v = (float)u * 0x1p-17f; break;
            case 1: *v = (float)u * 0x1p-17f + (w % 61 == 0 ? (float)(w - 32768) * 0x1p-16f : 0.0f); break;
            case 2: *v = 1.0f + (float)w * 0x1p-16f; break;
            case 3: *v = -(float)(w + 1) * 0x1p-26f; break;
            case 4: *v = w % 5 == 0 ? (float)(w - 32768) * 0x1p-40f : 0.0f; break;
            case 5: *v = (float)(w % 7 - 3) * 0.25f; break;
            case 6: *v = 0.0f; break;
            default: *v = (float)u * (float)(1 + w % 1000) * 0x1p-6f; break;
            }
        }
}

#endif
