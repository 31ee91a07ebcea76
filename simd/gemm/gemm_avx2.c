/*
 * gemm_avx2.c — the AVX2+FMA GEMM path (f32 FMA; bf16/f16 weights widened
 * while packing): packing, the 6×16 microkernel, the GEMV, the avx2 table.
 *
 * Register tile 6×16: 12 ymm accumulators (6 rows × 2 vectors of 8 output
 * columns), 2 ymm for the B row, 1 for the broadcast A element (15 of 16
 * registers). Per k: 2 B loads + 6 broadcasts feed 12 FMAs (two ymm FMA
 * pipes: 6 cycles). Blocking: KC = 1536 (B micro-panel 96 KiB in L2, reused
 * by every row of the super-block), MC = 576, NC = 8192. On Zen 4 at
 * 768×9216×3072: KC 384 → 82% of the FMA peak, 768 → 85%, 1536 → 91%.
 */
#include "gemm_int8.h"

#include "simd/common/x86.h"

enum { MR = 6, NR = 16 };

/* ------------------------------------------------------------------------ */
/* Packing                                                                  */
/* ------------------------------------------------------------------------ */

/* Transpose 8×8 floats held in r[0..7] (row i in r[i] → column j in r[j]). */
static inline __attribute__((always_inline)) void transpose8x8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int g = 0; g < 8; g += 4) { /* u[g + c] lane l = rows g..g+3 at column 4l + c */
        u[g + 0] = _mm256_shuffle_ps(t[g], t[g + 2], 0x44);
        u[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], 0xEE);
        u[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0x44);
        u[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

/* Lanes [0, n) of an 8-lane mask vector for maskload/maskstore. */
static inline __m256i mask8(int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n)), idx);
}

/* X rows [0, mc) × k [0, kc) → micro-panels [kc][6]: 8×8 blocks (6 rows +
 * 2 zero rows) transposed in registers; each column is stored as 8 lanes
 * at stride 6, the 2 extra lanes rewritten next or in the driver's slack,
 * and whole blocks are stored past a K tail (also into the slack). */
static void pack_x(const fx_gemm_path *p, int64_t mc, int64_t kc, const float *x, int64_t ldx, void *dst) {
    (void)p;
    float *d = dst;
    for (int64_t i0 = 0; i0 < mc; i0 += MR, d += kc * MR) {
        const int rows = (int)(mc - i0 < MR ? mc - i0 : MR);
        for (int64_t k0 = 0; k0 < kc; k0 += 8) {
            const __m256i km = mask8(kc - k0);
            __m256 r[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++)
                r[i] = i < rows ? _mm256_maskload_ps(x + (i0 + i) * ldx + k0, km) : _mm256_setzero_ps();
            transpose8x8(r);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) _mm256_storeu_ps(d + (k0 + j) * MR, r[j]);
        }
    }
}

/* 8 consecutive weights of one row as f32. */
static inline __m256 load_w8(const void *w, fx_dtype dt, int64_t idx) {
    if (dt == FX_DTYPE_F32) return _mm256_loadu_ps((const float *)w + idx);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + idx));
    if (dt == FX_DTYPE_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

static inline float load_w1(const void *w, fx_dtype dt, int64_t idx) {
    if (dt == FX_DTYPE_F32) return ((const float *)w)[idx];
    uint16_t h = ((const uint16_t *)w)[idx];
    return dt == FX_DTYPE_BF16 ? fx_bf16_bits_to_f32(h) : fx_f16_bits_to_f32(h);
}

/* W outputs [0, nc) × k [0, kc) → micro-panels [kc][16] f32: 8×8 blocks
 * transposed in registers, the k tail (< 8) element by element. */
static inline __attribute__((always_inline)) void pack_w_any(fx_dtype dt, int64_t nc, int64_t kc,
                                                             const void *w, int64_t ldw, void *dst) {
    float *d = dst;
    const int64_t kv = kc / 8 * 8;
    for (int64_t j0 = 0; j0 < nc; j0 += NR, d += kc * NR) {
        for (int half = 0; half < 2; half++) {
            const int64_t jh = j0 + half * 8;
            const int rows = (int)(nc - jh < 0 ? 0 : nc - jh < 8 ? nc - jh : 8);
            for (int64_t k0 = 0; k0 < kv; k0 += 8) {
                __m256 r[8];
                for (int i = 0; i < 8; i++)
                    r[i] = i < rows ? load_w8(w, dt, (jh + i) * ldw + k0) : _mm256_setzero_ps();
                transpose8x8(r);
                for (int j = 0; j < 8; j++) _mm256_store_ps(d + (k0 + j) * NR + half * 8, r[j]);
            }
            for (int64_t k = kv; k < kc; k++)
                for (int i = 0; i < 8; i++) d[k * NR + half * 8 + i] = i < rows ? load_w1(w, dt, (jh + i) * ldw + k) : 0.0f;
        }
    }
}

static void pack_w_f32(const fx_gemm_path *p, int64_t nc, int64_t kc, const void *w, int64_t ldw, void *dst) {
    (void)p;
    pack_w_any(FX_DTYPE_F32, nc, kc, w, ldw, dst);
}
static void pack_w_f16(const fx_gemm_path *p, int64_t nc, int64_t kc, const void *w, int64_t ldw, void *dst) {
    (void)p;
    pack_w_any(FX_DTYPE_F16, nc, kc, w, ldw, dst);
}
static void pack_w_bf16(const fx_gemm_path *p, int64_t nc, int64_t kc, const void *w, int64_t ldw, void *dst) {
    (void)p;
    pack_w_any(FX_DTYPE_BF16, nc, kc, w, ldw, dst);
}

/* ------------------------------------------------------------------------ */
/* Microkernel 6×16                                                         */
/* ------------------------------------------------------------------------ */

#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)

static inline __attribute__((always_inline)) void write_row(const fx_gemm_tile *t, int i, __m256 v0, __m256 v1,
                                                            __m256i k0, __m256i k1, __m256 b0, __m256 b1,
                                                            __m256 g0, __m256 g1) {
    if (i >= t->m) return;
    float *c = t->c + i * t->ldc;
    if (t->last) {
        v0 = _mm256_add_ps(v0, b0), v1 = _mm256_add_ps(v1, b1);
        if (t->mode == FX_EPI_ACCUMULATE) {
            v0 = _mm256_add_ps(_mm256_maskload_ps(c, k0), v0);
            v1 = _mm256_add_ps(_mm256_maskload_ps(c + 8, k1), v1);
        } else if (t->mode == FX_EPI_GATED_ACCUMULATE) {
            v0 = _mm256_fmadd_ps(g0, v0, _mm256_maskload_ps(c, k0));
            v1 = _mm256_fmadd_ps(g1, v1, _mm256_maskload_ps(c + 8, k1));
        }
    }
    _mm256_maskstore_ps(c, k0, v0);
    _mm256_maskstore_ps(c + 8, k1, v1);
}

static void kernel_6x16(int64_t ks, const void *a_, const void *b_, const fx_gemm_tile *t) {
    const float *a = a_, *b = b_;
    const __m256i k0 = mask8(t->n), k1 = mask8(t->n - 8);
#define DECL(i) __m256 c##i##a, c##i##b;
    ROWS(DECL)
#undef DECL
    if (t->first) {
#define ZERO(i) c##i##a = c##i##b = _mm256_setzero_ps();
        ROWS(ZERO)
#undef ZERO
    } else {
        const float *pp = t->partial;
        const int64_t ldp = t->ldp;
        const int m = t->m;
#define LOAD(i)                                                                                    \
    c##i##a = i < m ? _mm256_maskload_ps(pp + i * ldp, k0) : _mm256_setzero_ps();                  \
    c##i##b = i < m ? _mm256_maskload_ps(pp + i * ldp + 8, k1) : _mm256_setzero_ps();
        ROWS(LOAD)
#undef LOAD
    }
    fx_gemm_prefetch *pf = t->pf;
    const int64_t pf_every = fx_gemm_prefetch_every(pf, ks);
    int64_t pf_next = pf_every;
    for (int64_t k = 0; k < ks; k++, a += MR, b += NR) {
        if (k == pf_next) pf_next += pf_every, fx_gemm_prefetch_one(pf);
        const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#define STEP(i)                                                                                    \
    {                                                                                              \
        const __m256 ai = _mm256_broadcast_ss(a + i);                                              \
        c##i##a = _mm256_fmadd_ps(ai, b0, c##i##a);                                                \
        c##i##b = _mm256_fmadd_ps(ai, b1, c##i##b);                                                \
    }
        ROWS(STEP)
#undef STEP
    }
    __m256 bias0 = _mm256_setzero_ps(), bias1 = bias0, g0 = bias0, g1 = bias0;
    if (t->last && t->bias) bias0 = _mm256_maskload_ps(t->bias, k0), bias1 = _mm256_maskload_ps(t->bias + 8, k1);
    if (t->last && t->mode == FX_EPI_GATED_ACCUMULATE)
        g0 = _mm256_maskload_ps(t->gate, k0), g1 = _mm256_maskload_ps(t->gate + 8, k1);
#define WRITE(i) write_row(t, i, c##i##a, c##i##b, k0, k1, bias0, bias1, g0, g1);
    ROWS(WRITE)
#undef WRITE
}

/* ------------------------------------------------------------------------ */
/* GEMV (m <= 4): the microkernel of gemm_gemv.h's loops                    */
/* ------------------------------------------------------------------------ */

/* Horizontal sum of 8 lanes, fixed order. */
static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __attribute__((always_inline)) void gemv_tile(const int M, const int R, fx_dtype dt, int64_t j,
                                                            int64_t k, const float *x, int64_t ldx,
                                                            const fx_weight *w, float *y, int64_t ldy,
                                                            const fx_epilogue *epi) {
    __m256 acc[4][4];
    const int64_t kv = k / 8 * 8;
#pragma GCC unroll 4
    for (int i = 0; i < M; i++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) acc[i][r] = _mm256_setzero_ps();
    for (int64_t q = 0; q < kv; q += 8) {
        __m256 wv[4], xv[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) wv[r] = load_w8(w->data, dt, (j + r) * w->ld + q);
#pragma GCC unroll 4
        for (int i = 0; i < M; i++) xv[i] = _mm256_loadu_ps(x + i * ldx + q);
#pragma GCC unroll 4
        for (int i = 0; i < M; i++)
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) acc[i][r] = _mm256_fmadd_ps(xv[i], wv[r], acc[i][r]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < M; i++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            float s = hsum8(acc[i][r]);
            for (int64_t q = kv; q < k; q++) s += x[i * ldx + q] * load_w1(w->data, dt, (j + r) * w->ld + q);
            fx_gemm_epi_scalar(epi, j + r, s, y + i * ldy + j + r);
        }
}

#include "gemm_gemv.h"

static FX_GEMV_ENTRY(gemv_f32, FX_DTYPE_F32)
static FX_GEMV_ENTRY(gemv_f16, FX_DTYPE_F16)
static FX_GEMV_ENTRY(gemv_bf16, FX_DTYPE_BF16)

/* ------------------------------------------------------------------------ */
/* The avx2 table                                                           */
/* ------------------------------------------------------------------------ */

static const fx_gemm_path f32_path = {
    .name = "avx2 f32 6x16",
    .mr = MR, .nr = NR,
    .kc = 1536, .mc = 576, .nc = 8192,
    .kpair = 1, .elem = 4,
    .pack_x = pack_x,
    .pack_w = {pack_w_f32, pack_w_f16, pack_w_bf16},
    .kernel = kernel_6x16,
    .kernel_prefetches = 1,
};

const fx_gemm_kernels fx_gemm_avx2 = {
    .name = "avx2",
    .path = {&f32_path, &f32_path, &f32_path},
    .gemv = {gemv_f32, gemv_f16, gemv_bf16},
    .gemv_bf16_dot = 0,
    .int8 = fx_gemm_int8_avx2,
};
