/*
 * dtypes.c — the element types' facts (simd/dtype.h) as a table, and the
 * questions asked of it.
 */
#include "quant.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    int64_t block;  /* elements per block */
    size_t bytes;   /* bytes per block */
    int ggml;       /* ggml type id, -1: none */
    int flags;      /* FX_DT_* */
} info[FX_DTYPE_COUNT] = {
#define FX_DTYPE_ROW_(id, name, block, bytes, ggml, flags) [FX_DTYPE_##id] = {name, block, bytes, ggml, flags},
    FX_DTYPE_LIST(FX_DTYPE_ROW_)
#undef FX_DTYPE_ROW_
};

static int known(fx_dtype t) { return (unsigned)t < FX_DTYPE_COUNT; }

size_t fx_dtype_size(fx_dtype t) { return known(t) && info[t].block == 1 ? info[t].bytes : 0; }

const char *fx_dtype_name(fx_dtype t) { return known(t) ? info[t].name : "unknown"; }

int fx_dtype_parse(const char *name) {
    for (int t = 0; name && t < FX_DTYPE_COUNT; t++)
        if (!strcasecmp(name, info[t].name)) return t;
    return -1;
}

int fx_dtype_is_block(fx_dtype t) { return known(t) && info[t].block > 1; }

int fx_dtype_is_fp8(fx_dtype t) { return t == FX_DTYPE_F8_E4M3 || t == FX_DTYPE_F8_E5M2; }

int fx_dtype_is_scaled(fx_dtype t) { return fx_dtype_is_fp8(t) || t == FX_DTYPE_I8 || t == FX_DTYPE_F4_E2M1; }

int fx_dtype_is_expanded(fx_dtype t) { return fx_dtype_is_block(t) || fx_dtype_is_scaled(t); }

int fx_dtype_is_weight(fx_dtype t) { return known(t) && (info[t].flags & FX_DT_WEIGHT); }

int fx_dtype_in_safetensors(fx_dtype t) { return known(t) && (info[t].flags & FX_DT_SAFETENSORS); }

char *fx_dtype_weight_names(char *buf, size_t size) {
    size_t n = 0;
    if (!size) return buf;
    buf[0] = '\0';
    for (int t = 0; t < FX_DTYPE_COUNT && n < size; t++)
        if (info[t].flags & FX_DT_WEIGHT) n += (size_t)snprintf(buf + n, size - n, n ? ", %s" : "%s", info[t].name);
    return buf;
}

int fx_dtype_ggml_id(fx_dtype t) { return known(t) ? info[t].ggml : -1; }

int fx_dtype_of_ggml(uint32_t ggml_id) {
    for (int t = 0; t < FX_DTYPE_COUNT; t++)
        if (info[t].ggml >= 0 && (uint32_t)info[t].ggml == ggml_id) return t;
    return -1;
}

int64_t fx_dtype_block(fx_dtype t) { return known(t) ? info[t].block : 0; }

size_t fx_dtype_block_bytes(fx_dtype t) { return known(t) ? info[t].bytes : 0; }

int64_t fx_dtype_row_bytes(fx_dtype t, int64_t n) {
    if (!known(t) || n < 0 || n % info[t].block) return -1;
    int64_t r;
    if (__builtin_mul_overflow(n / info[t].block, (int64_t)info[t].bytes, &r)) return -1;
    return r;
}

fx_weight fx_weight_rows(const fx_weight *w, int64_t r0, int64_t n) {
    fx_weight s = *w;
    s.data = (const char *)w->data + fx_dtype_row_bytes(w->dtype, r0 * w->ld);
    s.n = n;
    s.row0 = w->row0 + r0;
    s.delta = NULL; /* additive terms belong to the whole weight's outputs */
    return s;
}

int fx_weight_has_scales(const fx_weight *w) {
    return w->scales || (fx_dtype_is_scaled(w->dtype) && fx_weight_scaled(w->scale));
}

void fx_weight_values(const fx_weight *w, int64_t r, int64_t c0, int64_t n, float *x) {
    const fx_weight_scales *g = w->scales;
    if (!g) {
        if (fx_dtype_is_scaled(w->dtype)) fx_weight_scale_row(w->scale, n, x);
        return;
    }
    const float *row = g->s + (w->row0 + r) / g->rows * g->ld;
    for (int64_t i = 0; i < n;) { /* one scale per run of columns */
        const int64_t c = c0 + i, end = (c / g->cols + 1) * g->cols - c0;
        const float s = row[c / g->cols];
        for (const int64_t stop = end < n ? end : n; i < stop; i++) x[i] *= s;
    }
}
