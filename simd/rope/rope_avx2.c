/* rope_avx2.c — the RoPE rotation (rope_simd.h) compiled for avx2. */
#include "simd/rowops/rowops.h"
#include "simd/common/vec_avx2.h"
#include "rope_simd.h"

void fx_rope_avx2(float *x, int pairs, fx_rope_layout layout, const float *cos, const float *sin) {
    rope_v(x, pairs, layout, cos, sin);
}
