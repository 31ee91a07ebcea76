/*
 * x86_simde.h — portable x86 intrinsics for the emulation build
 * (FX_X86_EMULATED; included through simd/common/x86.h only).
 *
 * SIMDe (Debian libsimde-dev, header-only, a test-only dependency)
 * implements the SSE…AVX-512 intrinsics in C under their Intel names.
 * SIMDe 0.7.4 lacks some that the kernels use; they are defined below from
 * the instruction definitions (Intel SDM), together with an exact model of
 * the bf16 instructions (vcvtne2ps2bf16, vdpbf16ps): round to nearest
 * even, denormal inputs read as zero, denormal results flushed, and
 * vdpbf16ps adding the odd pair element before the even one.
 *
 * SIMDe 0.7.4 computes the FMA intrinsics as a product and a sum (two
 * roundings); the hardware rounds once, and the int8 kernels must equal
 * the scalar reference's fmaf bit for bit, so they are replaced by fma
 * per lane.
 *
 * Masked loads and stores touch only the selected lanes, like the
 * hardware's fault suppression: the kernels rely on it at buffer ends
 * (SIMDe's AVX vmaskmovps reads every lane, so it is replaced too).
 */
#ifndef FX_X86_SIMDE_H
#define FX_X86_SIMDE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "simd/common/amx_emu.h"
#include "src/base/float16.h"

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>
#include <simde/x86/fma.h>

/* Names SIMDe 0.7.4 does not alias (defined by the compiler's headers when
 * they are included natively). */
#if !defined(_AVX512FINTRIN_H_INCLUDED) && !defined(__AVX512FINTRIN_H)
typedef simde__mmask8 __mmask8;
typedef simde__mmask16 __mmask16;
typedef simde__mmask32 __mmask32;
typedef simde__mmask64 __mmask64;
#endif
#ifndef _MM_FROUND_NO_EXC
#define _MM_FROUND_NO_EXC SIMDE_MM_FROUND_NO_EXC
#endif

#define FX_EMU static inline __attribute__((unused))

/* ---- masked loads and stores (only selected lanes are accessed) ------- */

FX_EMU simde__m512 fx_emu_mm512_maskz_loadu_ps(simde__mmask16 k, const void *p) {
    simde__m512_private r;
    const float *f = p;
    for (int i = 0; i < 16; i++) r.f32[i] = (k >> i) & 1 ? f[i] : 0.0f;
    return simde__m512_from_private(r);
}
FX_EMU void fx_emu_mm512_mask_storeu_ps(void *p, simde__mmask16 k, simde__m512 a) {
    simde__m512_private v = simde__m512_to_private(a);
    float *f = p;
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1) f[i] = v.f32[i];
}
FX_EMU simde__m512i fx_emu_mm512_maskz_loadu_epi16(simde__mmask32 k, const void *p) {
    simde__m512i_private r;
    const uint16_t *h = p;
    for (int i = 0; i < 32; i++) r.u16[i] = (k >> i) & 1 ? h[i] : 0;
    return simde__m512i_from_private(r);
}
FX_EMU void fx_emu_mm512_mask_storeu_epi16(void *p, simde__mmask32 k, simde__m512i a) {
    simde__m512i_private v = simde__m512i_to_private(a);
    uint16_t *h = p;
    for (int i = 0; i < 32; i++)
        if ((k >> i) & 1) h[i] = v.u16[i];
}
FX_EMU simde__m256i fx_emu_mm256_maskz_loadu_epi16(simde__mmask16 k, const void *p) {
    simde__m256i_private r;
    const uint16_t *h = p;
    for (int i = 0; i < 16; i++) r.u16[i] = (k >> i) & 1 ? h[i] : 0;
    return simde__m256i_from_private(r);
}

/* AVX's vmaskmovps: a lane takes part when the top bit of its mask lane is set. */
FX_EMU simde__m256 fx_emu_mm256_maskload_ps(const float *p, simde__m256i mask) {
    simde__m256i_private m = simde__m256i_to_private(mask);
    simde__m256_private r;
    for (int i = 0; i < 8; i++) r.f32[i] = m.i32[i] < 0 ? p[i] : 0.0f;
    return simde__m256_from_private(r);
}
FX_EMU void fx_emu_mm256_maskstore_ps(float *p, simde__m256i mask, simde__m256 a) {
    simde__m256i_private m = simde__m256i_to_private(mask);
    simde__m256_private v = simde__m256_to_private(a);
    for (int i = 0; i < 8; i++)
        if (m.i32[i] < 0) p[i] = v.f32[i];
}

/* ---- conversions and lane moves --------------------------------------- */

FX_EMU simde__m512i fx_emu_mm512_cvtepu16_epi32(simde__m256i a) {
    simde__m256i_private v = simde__m256i_to_private(a);
    simde__m512i_private r;
    for (int i = 0; i < 16; i++) r.u32[i] = v.u16[i];
    return simde__m512i_from_private(r);
}
/* vpmovdw: truncation to the low 16 bits. */
FX_EMU simde__m256i fx_emu_mm512_cvtepi32_epi16(simde__m512i a) {
    simde__m512i_private v = simde__m512i_to_private(a);
    simde__m256i_private r;
    for (int i = 0; i < 16; i++) r.u16[i] = (uint16_t)v.u32[i];
    return simde__m256i_from_private(r);
}
/* vpmovsxbd: 16 int8 sign-extended. */
FX_EMU simde__m512i fx_emu_mm512_cvtepi8_epi32(simde__m128i a) {
    simde__m128i_private v = simde__m128i_to_private(a);
    simde__m512i_private r;
    for (int i = 0; i < 16; i++) r.i32[i] = v.i8[i];
    return simde__m512i_from_private(r);
}
/* vpmovdb: truncation to the low 8 bits. */
FX_EMU simde__m128i fx_emu_mm512_cvtepi32_epi8(simde__m512i a) {
    simde__m512i_private v = simde__m512i_to_private(a);
    simde__m128i_private r;
    for (int i = 0; i < 16; i++) r.u8[i] = (uint8_t)v.u32[i];
    return simde__m128i_from_private(r);
}
/* vcvttps2dq: toward zero; NaN and out of range give 0x80000000. */
FX_EMU simde__m512i fx_emu_mm512_cvttps_epi32(simde__m512 a) {
    simde__m512_private v = simde__m512_to_private(a);
    simde__m512i_private r;
    for (int i = 0; i < 16; i++)
        r.i32[i] = v.f32[i] > -2147483904.0f && v.f32[i] < 2147483648.0f ? (int32_t)v.f32[i] : INT32_MIN;
    return simde__m512i_from_private(r);
}
FX_EMU simde__mmask16 fx_emu_mm512_cmpneq_epi32_mask(simde__m512i a, simde__m512i b) {
    simde__m512i_private x = simde__m512i_to_private(a), y = simde__m512i_to_private(b);
    simde__mmask16 m = 0;
    for (int i = 0; i < 16; i++) m |= (simde__mmask16)((x.i32[i] != y.i32[i]) << i);
    return m;
}
/* vrndscaleps with scale 0 (imm8 bits 0–1: nearest even, down, up, toward
 * zero); SIMDe 0.7 mishandles some of these. */
FX_EMU simde__m512 fx_emu_mm512_roundscale_ps(simde__m512 a, int imm8) {
    simde__m512_private v = simde__m512_to_private(a);
    for (int i = 0; i < 16; i++) {
        float f = v.f32[i];
        switch (imm8 & 3) {
        case 0: f = nearbyintf(f); break;
        case 1: f = floorf(f); break;
        case 2: f = ceilf(f); break;
        default: f = truncf(f); break;
        }
        v.f32[i] = f;
    }
    return simde__m512_from_private(v);
}
/* Reductions of finite lanes (max/min are exact in any order). */
FX_EMU float fx_emu_mm512_reduce_max_ps(simde__m512 a) {
    simde__m512_private v = simde__m512_to_private(a);
    float m = v.f32[0];
    for (int i = 1; i < 16; i++) m = v.f32[i] > m ? v.f32[i] : m;
    return m;
}
FX_EMU float fx_emu_mm512_reduce_min_ps(simde__m512 a) {
    simde__m512_private v = simde__m512_to_private(a);
    float m = v.f32[0];
    for (int i = 1; i < 16; i++) m = v.f32[i] < m ? v.f32[i] : m;
    return m;
}
/* ---- fused multiply-add: one rounding per lane ----------------------------- */

#define FX_EMU_FMA(name, vec, lane, n, fn)                                                         \
    FX_EMU vec name(vec a, vec b, vec c) {                                                       \
        vec##_private x = vec##_to_private(a), y = vec##_to_private(b), z = vec##_to_private(c); \
        for (int i = 0; i < (n); i++) z.lane[i] = fn(x.lane[i], y.lane[i], z.lane[i]);           \
        return vec##_from_private(z);                                                            \
    }
FX_EMU_FMA(fx_emu_mm512_fmadd_ps, simde__m512, f32, 16, fmaf)
FX_EMU_FMA(fx_emu_mm256_fmadd_ps, simde__m256, f32, 8, fmaf)
FX_EMU_FMA(fx_emu_mm512_fmadd_pd, simde__m512d, f64, 8, fma)
FX_EMU_FMA(fx_emu_mm256_fmadd_pd, simde__m256d, f64, 4, fma)
/* vfmadd213ss: lane 0 fused, lanes 1..3 from a */
FX_EMU simde__m128 fx_emu_mm_fmadd_ss(simde__m128 a, simde__m128 b, simde__m128 c) {
    simde__m128_private x = simde__m128_to_private(a), y = simde__m128_to_private(b), z = simde__m128_to_private(c);
    x.f32[0] = fmaf(x.f32[0], y.f32[0], z.f32[0]);
    return simde__m128_from_private(x);
}

/* vcvtdq2ps with the default rounding (nearest even; exact below 2^24). */
FX_EMU simde__m512 fx_emu_mm512_cvtepi32_ps(simde__m512i a) {
    simde__m512i_private v = simde__m512i_to_private(a);
    simde__m512_private r;
    for (int i = 0; i < 16; i++) r.f32[i] = (float)v.i32[i];
    return simde__m512_from_private(r);
}
/* vcvtps2dq with the default rounding (nearest even); NaN and out of range
 * give the integer indefinite 0x80000000. */
FX_EMU simde__m512i fx_emu_mm512_cvtps_epi32(simde__m512 a) {
    simde__m512_private v = simde__m512_to_private(a);
    simde__m512i_private r;
    for (int i = 0; i < 16; i++) {
        float x = nearbyintf(v.f32[i]);
        r.i32[i] = (x >= -2147483648.0f && x < 2147483648.0f) ? (int32_t)x : INT32_MIN;
    }
    return simde__m512i_from_private(r);
}
FX_EMU simde__m512d fx_emu_mm512_cvtps_pd(simde__m256 a) {
    simde__m256_private v = simde__m256_to_private(a);
    simde__m512d_private r;
    for (int i = 0; i < 8; i++) r.f64[i] = v.f32[i];
    return simde__m512d_from_private(r);
}
FX_EMU simde__m256 fx_emu_mm512_extractf32x8_ps(simde__m512 a, int imm) {
    simde__m512_private v = simde__m512_to_private(a);
    simde__m256_private r;
    for (int i = 0; i < 8; i++) r.f32[i] = v.f32[(imm & 1) * 8 + i];
    return simde__m256_from_private(r);
}
/* vpermilps with an immediate: the same 4-lane pattern in every 128 bits. */
FX_EMU simde__m512 fx_emu_mm512_permute_ps(simde__m512 a, int imm) {
    simde__m512_private v = simde__m512_to_private(a), r;
    for (int i = 0; i < 16; i++) r.f32[i] = v.f32[(i & ~3) + ((imm >> (2 * (i & 3))) & 3)];
    return simde__m512_from_private(r);
}
FX_EMU simde__m512i fx_emu_mm512_srai_epi32(simde__m512i a, unsigned imm) {
    simde__m512i_private v = simde__m512i_to_private(a), r;
    const unsigned s = imm > 31 ? 31 : imm;
    for (int i = 0; i < 16; i++) r.i32[i] = v.i32[i] < 0 ? ~(~v.i32[i] >> s) : v.i32[i] >> s;
    return simde__m512i_from_private(r);
}
/* GCC's order: halves of 256, then 128, then 64, then 32 bits. */
FX_EMU float fx_emu_mm512_reduce_add_ps(simde__m512 a) {
    simde__m512_private v = simde__m512_to_private(a);
    float s[8];
    for (int i = 0; i < 8; i++) s[i] = v.f32[8 + i] + v.f32[i];
    for (int i = 0; i < 4; i++) s[i] = s[4 + i] + s[i];
    for (int i = 0; i < 2; i++) s[i] = s[i] + s[i + 2];
    return s[0] + s[1];
}

/* ---- half precision (vcvtph2ps / vcvtps2ph: float16.h is exact and
 * treats NaNs as the hardware does) ------------------------------------ */

FX_EMU simde__m512 fx_emu_mm512_cvtph_ps(simde__m256i a) {
    simde__m256i_private v = simde__m256i_to_private(a);
    simde__m512_private r;
    for (int i = 0; i < 16; i++) r.f32[i] = fx_f16_bits_to_f32(v.u16[i]);
    return simde__m512_from_private(r);
}
FX_EMU simde__m256i fx_emu_mm512_cvtps_ph(simde__m512 a, int imm) {
    (void)imm; /* the kernels only use round to nearest even */
    simde__m512_private v = simde__m512_to_private(a);
    simde__m256i_private r;
    for (int i = 0; i < 16; i++) r.u16[i] = fx_f32_to_f16_bits(v.f32[i]);
    return simde__m256i_from_private(r);
}

/* F16C's 8-lane forms: SIMDe's do not keep NaN payloads as the hardware does. */
FX_EMU simde__m256 fx_emu_mm256_cvtph_ps(simde__m128i a) {
    simde__m128i_private v = simde__m128i_to_private(a);
    simde__m256_private r;
    for (int i = 0; i < 8; i++) r.f32[i] = fx_f16_bits_to_f32(v.u16[i]);
    return simde__m256_from_private(r);
}
FX_EMU simde__m128i fx_emu_mm256_cvtps_ph(simde__m256 a, int imm) {
    (void)imm;
    simde__m256_private v = simde__m256_to_private(a);
    simde__m128i_private r;
    for (int i = 0; i < 8; i++) r.u16[i] = fx_f32_to_f16_bits(v.f32[i]);
    return simde__m128i_from_private(r);
}

/* ---- bf16 (AVX512_BF16) ----------------------------------------------- */

/* convert_fp32_to_bfloat16 of the SDM: zeros and subnormals → signed zero,
 * else round to nearest even (NaN stays NaN, quiet). */
FX_EMU uint16_t fx_emu_f32_to_bf16(float f) { return fx_f32_to_bf16_bits(fx_f32_flush_subnormal(f)); }

/* Lanes 0..15 from b, 16..31 from a (vcvtne2ps2bf16). */
FX_EMU simde__m512bh fx_emu_mm512_cvtne2ps_pbh(simde__m512 a, simde__m512 b) {
    simde__m512_private va = simde__m512_to_private(a), vb = simde__m512_to_private(b);
    simde__m512i_private r;
    for (int i = 0; i < 16; i++) {
        r.u16[i] = fx_emu_f32_to_bf16(vb.f32[i]);
        r.u16[16 + i] = fx_emu_f32_to_bf16(va.f32[i]);
    }
    simde__m512bh out;
    memcpy(&out, &r, sizeof out);
    return out;
}
/* vdpbf16ps: per lane, src += a[2i+1]·b[2i+1], then += a[2i]·b[2i], each
 * an f32 FMA with DAZ, FTZ and round to nearest even. */
FX_EMU simde__m512 fx_emu_mm512_dpbf16_ps(simde__m512 src, simde__m512bh a, simde__m512bh b) {
    simde__m512_private s = simde__m512_to_private(src);
    uint16_t ah[32], bh[32];
    memcpy(ah, &a, sizeof ah);
    memcpy(bh, &b, sizeof bh);
    for (int i = 0; i < 16; i++) {
        float acc = fx_f32_flush_subnormal(s.f32[i]);
        for (int e = 1; e >= 0; e--) {
            const float x = fx_f32_flush_subnormal(fx_bf16_bits_to_f32(ah[2 * i + e]));
            const float y = fx_f32_flush_subnormal(fx_bf16_bits_to_f32(bh[2 * i + e]));
            acc = fx_f32_flush_subnormal(fx_fma_bf16(x, y, acc));
        }
        s.f32[i] = acc;
    }
    return simde__m512_from_private(s);
}

/* ---- the Intel names ---------------------------------------------------- */

#undef _mm512_maskz_loadu_ps
#undef _mm512_mask_storeu_ps
#undef _mm512_maskz_loadu_epi16
#undef _mm512_mask_storeu_epi16
#undef _mm256_maskz_loadu_epi16
#undef _mm512_cvtepu16_epi32
#undef _mm512_cvtepi32_epi16
#undef _mm512_cvtepi8_epi32
#undef _mm512_cvtepi32_epi8
#undef _mm512_cvttps_epi32
#undef _mm512_cmpneq_epi32_mask
#undef _mm512_reduce_max_ps
#undef _mm512_reduce_min_ps
#undef _mm512_roundscale_ps
#undef _mm512_cvtps_epi32
#undef _mm512_cvtepi32_ps
#undef _mm512_fmadd_ps
#undef _mm256_fmadd_ps
#undef _mm512_fmadd_pd
#undef _mm256_fmadd_pd
#undef _mm_fmadd_ss
#undef _mm512_cvtps_pd
#undef _mm512_extractf32x8_ps
#undef _mm512_permute_ps
#undef _mm512_srai_epi32
#undef _mm512_reduce_add_ps
#undef _mm512_cvtph_ps
#undef _mm512_cvtps_ph
#undef _mm512_cvtne2ps_pbh
#undef _mm512_dpbf16_ps
#undef _mm256_cvtph_ps
#undef _mm256_cvtps_ph
#undef _mm256_maskload_ps
#undef _mm256_maskstore_ps
#define _mm512_maskz_loadu_ps fx_emu_mm512_maskz_loadu_ps
#define _mm512_mask_storeu_ps fx_emu_mm512_mask_storeu_ps
#define _mm512_maskz_loadu_epi16 fx_emu_mm512_maskz_loadu_epi16
#define _mm512_mask_storeu_epi16 fx_emu_mm512_mask_storeu_epi16
#define _mm256_maskz_loadu_epi16 fx_emu_mm256_maskz_loadu_epi16
#define _mm512_cvtepu16_epi32 fx_emu_mm512_cvtepu16_epi32
#define _mm512_cvtepi32_epi16 fx_emu_mm512_cvtepi32_epi16
#define _mm512_cvtepi8_epi32 fx_emu_mm512_cvtepi8_epi32
#define _mm512_cvtepi32_epi8 fx_emu_mm512_cvtepi32_epi8
#define _mm512_cvttps_epi32 fx_emu_mm512_cvttps_epi32
#define _mm512_cmpneq_epi32_mask fx_emu_mm512_cmpneq_epi32_mask
#define _mm512_reduce_max_ps fx_emu_mm512_reduce_max_ps
#define _mm512_reduce_min_ps fx_emu_mm512_reduce_min_ps
#define _mm512_roundscale_ps fx_emu_mm512_roundscale_ps
#define _mm512_cvtps_epi32 fx_emu_mm512_cvtps_epi32
#define _mm512_cvtepi32_ps fx_emu_mm512_cvtepi32_ps
#define _mm512_fmadd_ps fx_emu_mm512_fmadd_ps
#define _mm256_fmadd_ps fx_emu_mm256_fmadd_ps
#define _mm512_fmadd_pd fx_emu_mm512_fmadd_pd
#define _mm256_fmadd_pd fx_emu_mm256_fmadd_pd
#define _mm_fmadd_ss fx_emu_mm_fmadd_ss
#define _mm512_cvtps_pd fx_emu_mm512_cvtps_pd
#define _mm512_extractf32x8_ps fx_emu_mm512_extractf32x8_ps
#define _mm512_permute_ps fx_emu_mm512_permute_ps
#define _mm512_srai_epi32 fx_emu_mm512_srai_epi32
#define _mm512_reduce_add_ps fx_emu_mm512_reduce_add_ps
#define _mm512_cvtph_ps fx_emu_mm512_cvtph_ps
#define _mm512_cvtps_ph fx_emu_mm512_cvtps_ph
#define _mm512_cvtne2ps_pbh fx_emu_mm512_cvtne2ps_pbh
#define _mm512_dpbf16_ps fx_emu_mm512_dpbf16_ps
#define _mm256_cvtph_ps fx_emu_mm256_cvtph_ps
#define _mm256_cvtps_ph fx_emu_mm256_cvtps_ph
#define _mm256_maskload_ps fx_emu_mm256_maskload_ps
#define _mm256_maskstore_ps fx_emu_mm256_maskstore_ps
/* AVX-VNNI's VEX vpdpbusd computes what the AVX512-VL form does */
#define _mm256_dpbusd_avx_epi32 simde_mm256_dpbusd_epi32

#endif
