/*
 * gemm_neon.c — the aarch64 NEON GEMM path (f32 FMA; bf16/f16 weights
 * widened while packing): the 8×12 microkernel, the GEMV, the neon table.
 *
 * Register tile 8×12: 24 q-register accumulators (8 rows × 3 vectors of 4
 * output columns), 3 for the B row, 2 holding the 8 A values of this k
 * (used lane by lane with fmla-by-element): 29 of 32 registers.
 * Blocking: KC = 512 (B micro-panel 24 KiB), MC = 256, NC = 3072. Packing
 * uses the portable routines; the driver issues the weight prefetches.
 */
#include "gemm_int8.h"

#include <arm_neon.h>
#include <math.h>

enum { MR = 8, NR = 12 };

#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

static inline void write_row(const fx_gemm_tile *t, int i, float32x4_t v0, float32x4_t v1, float32x4_t v2) {
    if (i >= t->m) return;
    float tmp[12];
    vst1q_f32(tmp, v0), vst1q_f32(tmp + 4, v1), vst1q_f32(tmp + 8, v2);
    float *c = t->c + i * t->ldc;
    if (!t->last) {
        for (int j = 0; j < t->n; j++) c[j] = tmp[j];
        return;
    }
    for (int j = 0; j < t->n; j++) {
        float v = tmp[j] + (t->bias ? t->bias[j] : 0.0f);
        if (t->mode == FX_EPI_STORE) c[j] = v;
        else if (t->mode == FX_EPI_ACCUMULATE) c[j] += v;
        else c[j] = fmaf(t->gate[j], v, c[j]);
    }
}

static inline float32x4_t load_partial(const float *p, int n) {
    if (n >= 4) return vld1q_f32(p);
    float tmp[4] = {0, 0, 0, 0};
    for (int j = 0; j < n; j++) tmp[j] = p[j];
    return vld1q_f32(tmp);
}

static void kernel_8x12(int64_t ks, const void *a_, const void *b_, const fx_gemm_tile *t) {
    const float *a = a_, *b = b_;
#define DECL(i) float32x4_t c##i##a, c##i##b, c##i##c;
    ROWS(DECL)
#undef DECL
    if (t->first) {
#define ZERO(i) c##i##a = c##i##b = c##i##c = vdupq_n_f32(0);
        ROWS(ZERO)
#undef ZERO
    } else {
        const float *pp = t->partial;
        const int64_t ldp = t->ldp;
        const int m = t->m, n = t->n;
#define LOAD(i)                                                                                    \
    c##i##a = c##i##b = c##i##c = vdupq_n_f32(0);                                                  \
    if (i < m) {                                                                                   \
        c##i##a = load_partial(pp + i * ldp, n);                                                   \
        c##i##b = load_partial(pp + i * ldp + 4, n - 4);                                           \
        c##i##c = load_partial(pp + i * ldp + 8, n - 8);                                           \
    }
        ROWS(LOAD)
#undef LOAD
    }
    for (int64_t k = 0; k < ks; k++, a += MR, b += NR) {
        const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8);
        const float32x4_t a0 = vld1q_f32(a), a1 = vld1q_f32(a + 4);
#define STEP(i)                                                                                    \
    c##i##a = vfmaq_laneq_f32(c##i##a, b0, i < 4 ? a0 : a1, i & 3);                                \
    c##i##b = vfmaq_laneq_f32(c##i##b, b1, i < 4 ? a0 : a1, i & 3);                                \
    c##i##c = vfmaq_laneq_f32(c##i##c, b2, i < 4 ? a0 : a1, i & 3);
        ROWS(STEP)
#undef STEP
    }
#define WRITE(i) write_row(t, i, c##i##a, c##i##b, c##i##c);
    ROWS(WRITE)
#undef WRITE
}

/* ------------------------------------------------------------------------ */
/* GEMV (m <= 4): one W row at a time against every X row, 4-lane chains    */
/* ------------------------------------------------------------------------ */

static inline float32x4_t load_w4(const void *w, fx_dtype dt, int64_t idx) {
    if (dt == FX_DTYPE_F32) return vld1q_f32((const float *)w + idx);
    uint16x4_t h = vld1_u16((const uint16_t *)w + idx);
    if (dt == FX_DTYPE_BF16) return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

static inline float load_w1(const void *w, fx_dtype dt, int64_t idx) {
    if (dt == FX_DTYPE_F32) return ((const float *)w)[idx];
    uint16_t h = ((const uint16_t *)w)[idx];
    return dt == FX_DTYPE_BF16 ? fx_bf16_bits_to_f32(h) : fx_f16_bits_to_f32(h);
}

static void gemv_neon(int64_t m, int64_t n0, int64_t n1, int64_t k, const float *x, int64_t ldx,
                      const uint16_t *xb, const fx_weight *w, float *y, int64_t ldy, const fx_epilogue *epi) {
    (void)xb;
    const int64_t kv = k / 4 * 4;
    for (int64_t j = n0; j < n1; j++) {
        float32x4_t acc[FX_GEMV_MAX_M];
        for (int i = 0; i < FX_GEMV_MAX_M; i++) acc[i] = vdupq_n_f32(0);
        for (int64_t q = 0; q < kv; q += 4) {
            float32x4_t wv = load_w4(w->data, w->dtype, j * w->ld + q);
            for (int64_t i = 0; i < m; i++) acc[i] = vfmaq_f32(acc[i], vld1q_f32(x + i * ldx + q), wv);
        }
        for (int64_t i = 0; i < m; i++) {
            float s = vaddvq_f32(acc[i]);
            for (int64_t q = kv; q < k; q++) s += x[i * ldx + q] * load_w1(w->data, w->dtype, j * w->ld + q);
            fx_gemm_epi_scalar(epi, j, s, y + i * ldy + j);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The neon table                                                           */
/* ------------------------------------------------------------------------ */

static const fx_gemm_path f32_path = {
    .name = "neon f32 8x12",
    .mr = MR, .nr = NR,
    .kc = 512, .mc = 256, .nc = 3072,
    .kpair = 1, .elem = 4,
    .pack_x = fx_gemm_pack_x_f32_c,
    .pack_w = {fx_gemm_pack_w_f32_c, fx_gemm_pack_w_f16_c, fx_gemm_pack_w_bf16_c},
    .kernel = kernel_8x12,
};

const fx_gemm_kernels fx_gemm_neon = {
    .name = "neon",
    .path = {&f32_path, &f32_path, &f32_path},
    .gemv = {gemv_neon, gemv_neon, gemv_neon},
    .gemv_bf16_dot = 0,
    .int8 = fx_gemm_int8_neon,
};
