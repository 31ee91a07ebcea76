/* rope_neon.c — the RoPE rotation (rope_simd.h) compiled for neon. */
#include "simd/rowops/rowops.h"
#include "simd/common/vec_neon.h"
#include "rope_simd.h"

void fx_rope_neon(float *x, int pairs, fx_rope_layout layout, const float *cos, const float *sin) {
    rope_v(x, pairs, layout, cos, sin);
}
