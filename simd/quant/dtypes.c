/*
 * dtypes.c — the weight dtypes: names, element and block sizes.
 */
#include "quant.h"

#include <strings.h>

static const struct {
    const char *name;
    int64_t block;  /* elements per block */
    size_t bytes;   /* bytes per block */
} info[FX_DTYPE_COUNT] = {
    [FX_DTYPE_F32] = {"F32", 1, 4},        [FX_DTYPE_F16] = {"F16", 1, 2},
    [FX_DTYPE_BF16] = {"BF16", 1, 2},      [FX_DTYPE_Q8_0] = {"Q8_0", 32, 34},
    [FX_DTYPE_Q4_0] = {"Q4_0", 32, 18},    [FX_DTYPE_Q4_1] = {"Q4_1", 32, 20},
    [FX_DTYPE_Q5_0] = {"Q5_0", 32, 22},    [FX_DTYPE_Q5_1] = {"Q5_1", 32, 24},
    [FX_DTYPE_Q2_K] = {"Q2_K", 256, 84},   [FX_DTYPE_Q3_K] = {"Q3_K", 256, 110},
    [FX_DTYPE_Q4_K] = {"Q4_K", 256, 144},  [FX_DTYPE_Q5_K] = {"Q5_K", 256, 176},
    [FX_DTYPE_Q6_K] = {"Q6_K", 256, 210},  [FX_DTYPE_IQ4_NL] = {"IQ4_NL", 32, 18},
    [FX_DTYPE_IQ4_XS] = {"IQ4_XS", 256, 136}, [FX_DTYPE_F8_E4M3] = {"F8_E4M3", 1, 1},
    [FX_DTYPE_F8_E5M2] = {"F8_E5M2", 1, 1},
};

size_t fx_dtype_size(fx_dtype t) { return (unsigned)t < FX_DTYPE_COUNT && info[t].block == 1 ? info[t].bytes : 0; }

const char *fx_dtype_name(fx_dtype t) { return (unsigned)t < FX_DTYPE_COUNT ? info[t].name : "unknown"; }

int fx_dtype_parse(const char *name) {
    for (int t = 0; name && t < FX_DTYPE_COUNT; t++)
        if (!strcasecmp(name, info[t].name)) return t;
    return -1;
}

int fx_dtype_is_block(fx_dtype t) { return (unsigned)t < FX_DTYPE_COUNT && info[t].block > 1; }

int fx_dtype_is_fp8(fx_dtype t) { return t == FX_DTYPE_F8_E4M3 || t == FX_DTYPE_F8_E5M2; }

int fx_dtype_is_expanded(fx_dtype t) { return fx_dtype_is_block(t) || fx_dtype_is_fp8(t); }

int64_t fx_dtype_block(fx_dtype t) { return (unsigned)t < FX_DTYPE_COUNT ? info[t].block : 0; }

size_t fx_dtype_block_bytes(fx_dtype t) { return (unsigned)t < FX_DTYPE_COUNT ? info[t].bytes : 0; }

int64_t fx_dtype_row_bytes(fx_dtype t, int64_t n) {
    if ((unsigned)t >= FX_DTYPE_COUNT || n < 0 || n % info[t].block) return -1;
    int64_t r;
    if (__builtin_mul_overflow(n / info[t].block, (int64_t)info[t].bytes, &r)) return -1;
    return r;
}

fx_weight fx_weight_rows(const fx_weight *w, int64_t r0, int64_t n) {
    fx_weight s = *w;
    s.data = (const char *)w->data + fx_dtype_row_bytes(w->dtype, r0 * w->ld);
    s.n = n;
    s.delta = NULL; /* additive terms belong to the whole weight's outputs */
    return s;
}
