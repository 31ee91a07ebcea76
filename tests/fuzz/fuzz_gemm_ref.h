/*
 * fuzz_gemm_ref.h — the GEMM behind fx_linear for the adapter fuzz targets
 * (fuzz_lora, fuzz_adapters): a plain reference loop in place of the
 * kernels (fx_gemm_linear), so LoKr / LoHa factor products run without the
 * per-ISA code; the kernels are tested elsewhere. Include it in exactly one
 * file of a target (it defines the functions).
 */
#ifndef FX_FUZZ_GEMM_REF_H
#define FX_FUZZ_GEMM_REF_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "simd/gemm/gemm_int8.h"

static float weight_at(const fx_weight *w, int64_t r, int64_t c) {
    const char *p = (const char *)w->data + (size_t)(r * w->ld + c) * fx_dtype_size(w->dtype);
    uint16_t h;
    float f;
    if (w->dtype == FX_DTYPE_F32) {
        memcpy(&f, p, 4);
        return f;
    }
    memcpy(&h, p, 2);
    return w->dtype == FX_DTYPE_BF16 ? fx_bf16_bits_to_f32(h) : fx_f16_bits_to_f32(h);
}

void fx_gemm_linear(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_weight *w, float *y,
                    int64_t ldy, const fx_epilogue *epi) {
    (void)kc;
    if (epi && epi->mode != FX_EPI_STORE) abort();
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < w->n; j++) {
            float s = 0;
            for (int64_t k = 0; k < w->k; k++) s += x[i * ldx + k] * weight_at(w, j, k);
            y[i * ldy + j] = s;
        }
}

/* linear.c also holds the int8-form entry, which adapters never reach. */
int fx_linear_int8(const fx_kctx *kc, const fx_gemm_int8 *p, int64_t m, const float *x, int64_t ldx,
                   const fx_weight *w, const struct fx_int8w *f, float *y, int64_t ldy, const fx_epilogue *epi) {
    (void)kc, (void)p, (void)m, (void)x, (void)ldx, (void)w, (void)f, (void)y, (void)ldy, (void)epi;
    abort();
}

#endif
