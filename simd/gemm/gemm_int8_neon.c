/*
 * gemm_int8_neon.c — the NEON kernels of the int8 GEMM (gemm_int8.c):
 * 4 channels × 8 tokens over the whole K. X panels hold 4 tokens' k-quads
 * per 16-byte register. With the ARMv8.2 dot-product extension (sdot,
 * checked at run time) each channel's row is loaded 16 bytes (4 k-quads)
 * at a time and vdotq_laneq_s32 adds quad l of it against the X register of
 * quad l; without it, widening multiplies (smull) and pairwise adds give
 * the same sums. The int32 sums run over the whole K; then the scalar
 * epilogue (fx_int8_finish_c), whose fmaf is one fused instruction here.
 */
#include "gemm_int8.h"

#include <arm_neon.h>
#include <string.h>
#include <sys/auxv.h>

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

enum { MR = 4, NR = 8 };

static void finish(int32x4_t acc[MR][2], const fx_int8_tile *t) {
    int32_t d[MR * NR];
    for (int j = 0; j < MR; j++) vst1q_s32(d + j * NR, acc[j][0]), vst1q_s32(d + j * NR + 4, acc[j][1]);
    fx_int8_finish_c(d, NR, 0, t);
}

__attribute__((target("arch=armv8.2-a+dotprod"))) static void kernel_dot(int64_t kq, const int8_t *w, int64_t ldw,
                                                                         const uint8_t *x, const fx_int8_tile *t) {
    int32x4_t acc[MR][2];
    for (int j = 0; j < MR; j++) acc[j][0] = acc[j][1] = vdupq_n_s32(0);
    const int8_t *xs = (const int8_t *)x;
    for (int64_t q = 0; q < kq; q += 4, xs += 4 * 4 * NR) { /* kq is a multiple of 16 */
        int8x16_t xv[4][2];
        for (int l = 0; l < 4; l++) xv[l][0] = vld1q_s8(xs + l * 4 * NR), xv[l][1] = vld1q_s8(xs + l * 4 * NR + 16);
        for (int j = 0; j < MR; j++) {
            const int8x16_t wv = vld1q_s8(w + j * ldw + 4 * q);
            acc[j][0] = vdotq_laneq_s32(acc[j][0], xv[0][0], wv, 0);
            acc[j][1] = vdotq_laneq_s32(acc[j][1], xv[0][1], wv, 0);
            acc[j][0] = vdotq_laneq_s32(acc[j][0], xv[1][0], wv, 1);
            acc[j][1] = vdotq_laneq_s32(acc[j][1], xv[1][1], wv, 1);
            acc[j][0] = vdotq_laneq_s32(acc[j][0], xv[2][0], wv, 2);
            acc[j][1] = vdotq_laneq_s32(acc[j][1], xv[2][1], wv, 2);
            acc[j][0] = vdotq_laneq_s32(acc[j][0], xv[3][0], wv, 3);
            acc[j][1] = vdotq_laneq_s32(acc[j][1], xv[3][1], wv, 3);
        }
    }
    finish(acc, t);
}

/* The 4 dots of 4 tokens' quads (x) with one weight quad broadcast (wq). */
static inline int32x4_t dot4(int8x16_t x, int8x16_t wq) {
    int16x8_t lo = vmull_s8(vget_low_s8(x), vget_low_s8(wq)), hi = vmull_high_s8(x, wq);
    return vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi));
}

static void kernel_base(int64_t kq, const int8_t *w, int64_t ldw, const uint8_t *x, const fx_int8_tile *t) {
    int32x4_t acc[MR][2];
    for (int j = 0; j < MR; j++) acc[j][0] = acc[j][1] = vdupq_n_s32(0);
    const int8_t *xs = (const int8_t *)x;
    for (int64_t q = 0; q < kq; q++, xs += 4 * NR) {
        const int8x16_t x0 = vld1q_s8(xs), x1 = vld1q_s8(xs + 16);
        for (int j = 0; j < MR; j++) {
            int32_t quad;
            memcpy(&quad, w + j * ldw + 4 * q, 4);
            const int8x16_t wq = vreinterpretq_s8_s32(vdupq_n_s32(quad));
            acc[j][0] = vaddq_s32(acc[j][0], dot4(x0, wq));
            acc[j][1] = vaddq_s32(acc[j][1], dot4(x1, wq));
        }
    }
    finish(acc, t);
}

const fx_gemm_int8 fx_gemm_int8_neon_dot = {"neon int8 4x8 (sdot)", MR, NR, kernel_dot, 0, NULL, NULL};
const fx_gemm_int8 fx_gemm_int8_neon_base = {"neon int8 4x8 (smull)", MR, NR, kernel_base, 0, NULL, NULL};

/* sdot is not among the CPU facts: the kernel asks the auxiliary vector */
const fx_gemm_int8 *fx_gemm_int8_neon(const fx_cpu_facts *f, int64_t m) {
    (void)f, (void)m;
    return getauxval(AT_HWCAP) & HWCAP_ASIMDDP ? &fx_gemm_int8_neon_dot : &fx_gemm_int8_neon_base;
}
