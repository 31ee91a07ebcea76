/*
 * gemm_int8_neon.c — the NEON int8 kernels of the W8A8 GEMM (gemm_int8.c):
 * 4 rows × 16 columns, the 4 rows' quads of one k-quad in one register
 * (A tile [k/4][4][4] is exactly that). With the ARMv8.2 dot-product
 * extension (sdot, checked at run time) one vdotq_laneq_s32 per (row, 4
 * columns) adds a 4-term int8 dot to each int32 lane; without it, widening
 * multiplies (smull) and pairwise adds do the same sums. Per 32-block the
 * dots are converted and fused-multiply-added with the block scales into f32
 * sums, as every ISA does (bit-identical results).
 */
#include "gemm.h"

#include <arm_neon.h>
#include <math.h>
#include <sys/auxv.h>

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

enum { MR = 4, NR = 16 };

/* acc[i][g] (row i, columns 4g..4g+3) as f32 sums, then the epilogue. */
static void finish(float acc[MR][NR], const fx_int8_tile *t) {
    for (int i = 0; i < t->m; i++) {
        float *c = t->c + i * t->ldc;
        for (int j = 0; j < t->n; j++) {
            float v = acc[i][j] * t->sa[i];
            if (t->bias) v = v + t->bias[j];
            if (t->mode == FX_EPI_STORE) c[j] = v;
            else if (t->mode == FX_EPI_ACCUMULATE) c[j] = c[j] + v;
            else c[j] = vgetq_lane_f32(vfmaq_f32(vdupq_n_f32(c[j]), vdupq_n_f32(t->gate[j]), vdupq_n_f32(v)), 0);
        }
    }
}

static inline void zero_dots(int32x4_t d[MR][4]) {
    for (int i = 0; i < MR; i++)
        for (int g = 0; g < 4; g++) d[i][g] = vdupq_n_s32(0);
}

/* f32 sums += (float)dots · block scales (fused), for one 32-block. */
static inline void add_block(float acc[MR][NR], int32x4_t d[MR][4], const float *bs) {
    for (int i = 0; i < MR; i++)
        for (int g = 0; g < 4; g++)
            vst1q_f32(acc[i] + 4 * g, vfmaq_f32(vld1q_f32(acc[i] + 4 * g), vcvtq_f32_s32(d[i][g]), vld1q_f32(bs + 4 * g)));
}

__attribute__((target("arch=armv8.2-a+dotprod"))) static void kernel_dot(int64_t nb, const int8_t *a, const int8_t *b,
                                                                         const float *bs, const fx_int8_tile *t) {
    float acc[MR][NR] = {{0}};
    for (int64_t blk = 0; blk < nb; blk++, a += 32 * MR, b += 32 * NR, bs += NR) {
        int32x4_t d[MR][4];
        zero_dots(d);
        for (int q = 0; q < 8; q++) {
            const int8x16_t av = vld1q_s8(a + q * 16);
            int8x16_t bv[4];
            for (int g = 0; g < 4; g++) bv[g] = vld1q_s8(b + q * 64 + 16 * g);
            for (int g = 0; g < 4; g++) {
                d[0][g] = vdotq_laneq_s32(d[0][g], bv[g], av, 0);
                d[1][g] = vdotq_laneq_s32(d[1][g], bv[g], av, 1);
                d[2][g] = vdotq_laneq_s32(d[2][g], bv[g], av, 2);
                d[3][g] = vdotq_laneq_s32(d[3][g], bv[g], av, 3);
            }
        }
        add_block(acc, d, bs);
    }
    finish(acc, t);
}

/* The 4 dots of one row quad (broadcast in a) with 4 column quads (b). */
static inline int32x4_t dot4(int8x16_t b, int8x16_t a) {
    int16x8_t lo = vmull_s8(vget_low_s8(b), vget_low_s8(a)), hi = vmull_high_s8(b, a);
    return vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi));
}

static void kernel_base(int64_t nb, const int8_t *a, const int8_t *b, const float *bs, const fx_int8_tile *t) {
    float acc[MR][NR] = {{0}};
    for (int64_t blk = 0; blk < nb; blk++, a += 32 * MR, b += 32 * NR, bs += NR) {
        int32x4_t d[MR][4];
        zero_dots(d);
        for (int q = 0; q < 8; q++) {
            const int32x4_t aq = vreinterpretq_s32_s8(vld1q_s8(a + q * 16));
            for (int i = 0; i < MR; i++) {
                int8x16_t ai = vreinterpretq_s8_s32(vdupq_laneq_s32(aq, 0));
                if (i == 1) ai = vreinterpretq_s8_s32(vdupq_laneq_s32(aq, 1));
                if (i == 2) ai = vreinterpretq_s8_s32(vdupq_laneq_s32(aq, 2));
                if (i == 3) ai = vreinterpretq_s8_s32(vdupq_laneq_s32(aq, 3));
                for (int g = 0; g < 4; g++) d[i][g] = vaddq_s32(d[i][g], dot4(vld1q_s8(b + q * 64 + 16 * g), ai));
            }
        }
        add_block(acc, d, bs);
    }
    finish(acc, t);
}

const fx_gemm_int8 fx_gemm_int8_neon_dot = {"neon int8 4x16 (sdot)", MR, NR, kernel_dot, 0, NULL, NULL};
const fx_gemm_int8 fx_gemm_int8_neon_base = {"neon int8 4x16 (smull)", MR, NR, kernel_base, 0, NULL, NULL};

/* sdot is not among the CPU facts: the kernel asks the auxiliary vector */
const fx_gemm_int8 *fx_gemm_int8_neon(const fx_cpu_facts *f, int64_t m) {
    (void)f, (void)m;
    return getauxval(AT_HWCAP) & HWCAP_ASIMDDP ? &fx_gemm_int8_neon_dot : &fx_gemm_int8_neon_base;
}
