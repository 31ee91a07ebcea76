/*
 * quantize_avx2.c — the vector quantizers (quant_lanes.h) on 8 lanes of
 * AVX2, byte-identical to the scalar reference. Masks are all-ones lanes.
 */
#include <math.h>

#include "quant.h"
#include "simd/common/x86.h"

#define QL 8
typedef __m256 vf;
typedef __m256i vi;
typedef __m256 vm;

static inline vf vf_set1(float f) { return _mm256_set1_ps(f); }
static inline vf vf_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void vf_store(float *p, vf v) { _mm256_storeu_ps(p, v); }
static inline vf vf_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vf_div(vf a, vf b) { return _mm256_div_ps(a, b); }
static inline vf vf_sqrt(vf a) { return _mm256_sqrt_ps(a); }
static inline vf vf_abs(vf a) { return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }
static inline vf vf_neg(vf a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
static inline vf vf_trunc(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
static inline float vf_hmax(vf a) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
}
static inline float vf_hmin(vf a) {
    __m128 m = _mm_min_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_min_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_min_ss(m, _mm_shuffle_ps(m, m, 1)));
}
static inline vm vf_lt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
static inline vm vf_gt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
static inline vm vf_ge(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
static inline vm vf_eq(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
static inline vm vf_ne(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_NEQ_UQ); }
static inline vf vf_sel(vm m, vf a, vf b) { return _mm256_blendv_ps(a, b, m); }
static inline vm vm_and(vm a, vm b) { return _mm256_and_ps(a, b); }
static inline vm vm_or(vm a, vm b) { return _mm256_or_ps(a, b); }
static inline vm vm_andnot(vm a, vm b) { return _mm256_andnot_ps(b, a); }
static inline int vm_any(vm m) { return _mm256_movemask_ps(m) != 0; }
static inline unsigned vm_bits(vm m) { return (unsigned)_mm256_movemask_ps(m); }
static inline vi vi_set1(int i) { return _mm256_set1_epi32(i); }
static inline vi vi_add(vi a, vi b) { return _mm256_add_epi32(a, b); }
static inline vi vi_sub(vi a, vi b) { return _mm256_sub_epi32(a, b); }
static inline vi vi_and(vi a, vi b) { return _mm256_and_si256(a, b); }
static inline vi vi_or(vi a, vi b) { return _mm256_or_si256(a, b); }
static inline vi vi_slli(vi a, int k) { return _mm256_sll_epi32(a, _mm_cvtsi32_si128(k)); }
static inline vi vi_min(vi a, vi b) { return _mm256_min_epi32(a, b); }
static inline vi vi_max(vi a, vi b) { return _mm256_max_epi32(a, b); }
static inline vm vi_ne(vi a, vi b) {
    return _mm256_castsi256_ps(_mm256_xor_si256(_mm256_cmpeq_epi32(a, b), _mm256_set1_epi32(-1)));
}
static inline vm vi_nz(vi a) { return vi_ne(a, _mm256_setzero_si256()); }
static inline vi vi_sel(vm m, vi a, vi b) {
    return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), m));
}
static inline vi vi_of_bits(vf a) { return _mm256_castps_si256(a); }
static inline vi vi_cvtt(vf a) { return _mm256_cvttps_epi32(a); }
static inline vf vi_to_vf(vi a) { return _mm256_cvtepi32_ps(a); }
static inline void vi_store_u8(uint8_t *p, vi a) {
    const __m256i low = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                         0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i t = _mm256_shuffle_epi8(a, low);
    __m128i r = _mm_unpacklo_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    _mm_storel_epi64((__m128i *)(void *)p, r);
}
#define QNAME(name) fx_quant_##name##_avx2

#include "quant_lanes.h"
