/*
 * linear.c — the entry point of a linear layer (kernels.h):
 *   Y [m, n] = epilogue(X [m, k] · Wᵀ)  then  + each additive term of W
 * The product is fx_gemm_linear (gemm.c: packing, microkernels, threads;
 * block-typed weights run W8A8 there when kc->int8), or for a weight whose
 * int8 form was made at load, the int8 GEMM on that form (gemm_int8.c);
 * the terms (LoRA / LyCORIS, fx_delta) follow with the same epilogue
 * (delta.c).
 */
#include "gemm.h"

static const fx_epilogue store = {FX_EPI_STORE, NULL, NULL};

void fx_linear(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_weight *w, float *y, int64_t ldy,
               const fx_epilogue *epi) {
    if (!epi) epi = &store;
    fx_gemm_linear(kc, m, x, ldx, w, y, ldy, epi);
    fx_delta_apply(kc, m, x, ldx, w, y, ldy, epi);
}

void fx_linear_int8w(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_weight *w,
                     const struct fx_int8w *f, float *y, int64_t ldy, const fx_epilogue *epi) {
    if (!epi) epi = &store;
    /* without scratch memory (or the mode), the blocks: their pages come
     * back from the file */
    if (!f || !kc->int8 || fx_linear_int8(kc, NULL, m, x, ldx, w, f, y, ldy, epi)) fx_gemm_linear(kc, m, x, ldx, w, y, ldy, epi);
    fx_delta_apply(kc, m, x, ldx, w, y, ldy, epi);
}
