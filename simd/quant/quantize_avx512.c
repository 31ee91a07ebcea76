/*
 * quantize_avx512.c — the vector quantizers (quant_lanes.h) on 16 lanes of
 * AVX-512, byte-identical to the scalar reference.
 */
#include <math.h>

#include "quant.h"
#include "simd/common/x86.h"

#define QL 16
typedef __m512 vf;
typedef __m512i vi;
typedef __mmask16 vm;

static inline vf vf_set1(float f) { return _mm512_set1_ps(f); }
static inline vf vf_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void vf_store(float *p, vf v) { _mm512_storeu_ps(p, v); }
static inline vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vf_div(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf vf_sqrt(vf a) { return _mm512_sqrt_ps(a); }
static inline vf vf_abs(vf a) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff))); }
static inline vf vf_neg(vf a) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32((int)0x80000000u))); }
static inline vf vf_trunc(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
static inline float vf_hmax(vf a) { return _mm512_reduce_max_ps(a); }
static inline float vf_hmin(vf a) { return _mm512_reduce_min_ps(a); }
static inline vm vf_lt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
static inline vm vf_gt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
static inline vm vf_ge(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
static inline vm vf_eq(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
static inline vm vf_ne(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ); }
static inline vf vf_sel(vm m, vf a, vf b) { return _mm512_mask_blend_ps(m, a, b); }
static inline vm vm_and(vm a, vm b) { return (vm)(a & b); }
static inline vm vm_or(vm a, vm b) { return (vm)(a | b); }
static inline vm vm_andnot(vm a, vm b) { return (vm)(a & ~b); }
static inline int vm_any(vm m) { return m != 0; }
static inline unsigned vm_bits(vm m) { return m; }
static inline vi vi_set1(int i) { return _mm512_set1_epi32(i); }
static inline vi vi_add(vi a, vi b) { return _mm512_add_epi32(a, b); }
static inline vi vi_sub(vi a, vi b) { return _mm512_sub_epi32(a, b); }
static inline vi vi_and(vi a, vi b) { return _mm512_and_si512(a, b); }
static inline vi vi_or(vi a, vi b) { return _mm512_or_si512(a, b); }
static inline vi vi_slli(vi a, int k) { return _mm512_sll_epi32(a, _mm_cvtsi32_si128(k)); }
static inline vi vi_min(vi a, vi b) { return _mm512_min_epi32(a, b); }
static inline vi vi_max(vi a, vi b) { return _mm512_max_epi32(a, b); }
static inline vm vi_ne(vi a, vi b) { return _mm512_cmpneq_epi32_mask(a, b); }
static inline vm vi_nz(vi a) { return _mm512_test_epi32_mask(a, a); }
static inline vi vi_sel(vm m, vi a, vi b) { return _mm512_mask_blend_epi32(m, a, b); }
static inline vi vi_of_bits(vf a) { return _mm512_castps_si512(a); }
static inline vi vi_cvtt(vf a) { return _mm512_cvttps_epi32(a); }
static inline vf vi_to_vf(vi a) { return _mm512_cvtepi32_ps(a); }
static inline void vi_store_u8(uint8_t *p, vi a) { _mm_storeu_si128((__m128i *)(void *)p, _mm512_cvtepi32_epi8(a)); }
#define QNAME(name) fx_quant_##name##_avx512

#include "quant_lanes.h"
