/* rope_avx512.c — the RoPE rotation (rope_simd.h) compiled for avx512. */
#include "simd/rowops/rowops.h"
#include "simd/common/vec_avx512.h"
#include "rope_simd.h"

void fx_rope_avx512(float *x, int pairs, fx_rope_layout layout, const float *cos, const float *sin) {
    rope_v(x, pairs, layout, cos, sin);
}
