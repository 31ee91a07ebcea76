/*
 * quantize_neon.c — the vector quantizers (quant_lanes.h) on 4 lanes of
 * NEON, byte-identical to the scalar reference. Masks are all-ones lanes.
 */
#include <arm_neon.h>
#include <math.h>

#include "quant.h"

#define QL 4
typedef float32x4_t vf;
typedef int32x4_t vi;
typedef uint32x4_t vm;

static inline vf vf_set1(float f) { return vdupq_n_f32(f); }
static inline vf vf_load(const float *p) { return vld1q_f32(p); }
static inline void vf_store(float *p, vf v) { vst1q_f32(p, v); }
static inline vf vf_add(vf a, vf b) { return vaddq_f32(a, b); }
static inline vf vf_sub(vf a, vf b) { return vsubq_f32(a, b); }
static inline vf vf_mul(vf a, vf b) { return vmulq_f32(a, b); }
static inline vf vf_div(vf a, vf b) { return vdivq_f32(a, b); }
static inline vf vf_sqrt(vf a) { return vsqrtq_f32(a); }
static inline vf vf_abs(vf a) { return vabsq_f32(a); }
static inline vf vf_neg(vf a) { return vnegq_f32(a); }
static inline vf vf_trunc(vf a) { return vrndq_f32(a); }
static inline float vf_hmax(vf a) { return vmaxvq_f32(a); }
static inline float vf_hmin(vf a) { return vminvq_f32(a); }
static inline vm vf_lt(vf a, vf b) { return vcltq_f32(a, b); }
static inline vm vf_gt(vf a, vf b) { return vcgtq_f32(a, b); }
static inline vm vf_ge(vf a, vf b) { return vcgeq_f32(a, b); }
static inline vm vf_eq(vf a, vf b) { return vceqq_f32(a, b); }
static inline vm vf_ne(vf a, vf b) { return vmvnq_u32(vceqq_f32(a, b)); }
static inline vf vf_sel(vm m, vf a, vf b) { return vbslq_f32(m, b, a); }
static inline vm vm_and(vm a, vm b) { return vandq_u32(a, b); }
static inline vm vm_or(vm a, vm b) { return vorrq_u32(a, b); }
static inline vm vm_andnot(vm a, vm b) { return vbicq_u32(a, b); }
static inline int vm_any(vm m) { return vmaxvq_u32(m) != 0; }
static inline unsigned vm_bits(vm m) {
    const int32_t shifts[4] = {0, 1, 2, 3};
    return vaddvq_u32(vshlq_u32(vshrq_n_u32(m, 31), vld1q_s32(shifts)));
}
static inline vi vi_set1(int i) { return vdupq_n_s32(i); }
static inline vi vi_add(vi a, vi b) { return vaddq_s32(a, b); }
static inline vi vi_sub(vi a, vi b) { return vsubq_s32(a, b); }
static inline vi vi_and(vi a, vi b) { return vandq_s32(a, b); }
static inline vi vi_or(vi a, vi b) { return vorrq_s32(a, b); }
static inline vi vi_slli(vi a, int k) { return vshlq_s32(a, vdupq_n_s32(k)); }
static inline vi vi_min(vi a, vi b) { return vminq_s32(a, b); }
static inline vi vi_max(vi a, vi b) { return vmaxq_s32(a, b); }
static inline vm vi_ne(vi a, vi b) { return vmvnq_u32(vceqq_s32(a, b)); }
static inline vm vi_nz(vi a) { return vtstq_s32(a, a); }
static inline vi vi_sel(vm m, vi a, vi b) { return vbslq_s32(m, b, a); }
static inline vi vi_of_bits(vf a) { return vreinterpretq_s32_f32(a); }
static inline vi vi_cvtt(vf a) { return vcvtq_s32_f32(a); }
static inline vf vi_to_vf(vi a) { return vcvtq_f32_s32(a); }
static inline void vi_store_u8(uint8_t *p, vi a) {
    uint8x8_t b = vmovn_u16(vcombine_u16(vmovn_u32(vreinterpretq_u32_s32(a)), vdup_n_u16(0)));
    uint32_t v = vget_lane_u32(vreinterpret_u32_u8(b), 0);
    memcpy(p, &v, 4);
}
#define QNAME(name) fx_quant_##name##_neon

#include "quant_lanes.h"
