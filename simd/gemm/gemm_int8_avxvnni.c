/*
 * gemm_int8_avxvnni.c — the AVX-VNNI kernel of the int8 GEMM
 * (gemm_int8.c): 4 channels × 24 tokens, VEX vpdpbusd on ymm over the
 * whole K (Alder Lake and later client cores, Zen 5: the dot-product
 * instruction without AVX-512).
 *
 * As the AVX512-VNNI kernel: X packed as code + 128 (the unsigned vector
 * operand), each channel's weight quad broadcast from its row in place
 * (the signed operand), 128·sum[j] subtracted in the epilogue. Per k-quad
 * 3 loads of X, 4 broadcasts, 12 vpdpbusd into 12 accumulators (of 16
 * ymm registers).
 */
#include "gemm_int8_avx2.h"

#include <string.h>

enum { MR = 4, NR = 24 };

#define FX_ROWS(X) X(0) X(1) X(2) X(3)

static void kernel_4x24(int64_t kq, const int8_t *w, int64_t ldw, const uint8_t *x, const fx_int8_tile *t) {
#define DECL(j) __m256i d##j##0 = _mm256_setzero_si256(), d##j##1 = d##j##0, d##j##2 = d##j##0; const int8_t *w##j = w + (j) * ldw;
    FX_ROWS(DECL)
#undef DECL
    for (int64_t q = 0; q < kq; q++, x += 4 * NR) {
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)x);
        const __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(x + 32));
        const __m256i x2 = _mm256_loadu_si256((const __m256i *)(const void *)(x + 64));
#define ROW(j)                                                                                     \
    {                                                                                              \
        int32_t quad;                                                                              \
        memcpy(&quad, w##j + 4 * q, 4);                                                            \
        const __m256i wj = _mm256_set1_epi32(quad);                                                \
        d##j##0 = _mm256_dpbusd_avx_epi32(d##j##0, x0, wj);                                        \
        d##j##1 = _mm256_dpbusd_avx_epi32(d##j##1, x1, wj);                                        \
        d##j##2 = _mm256_dpbusd_avx_epi32(d##j##2, x2, wj);                                        \
    }
        FX_ROWS(ROW)
#undef ROW
    }
    _Alignas(32) int32_t d[MR * NR];
#define STORE(j)                                                                                   \
    _mm256_store_si256((__m256i *)(void *)(d + (j) * NR), d##j##0);                                \
    _mm256_store_si256((__m256i *)(void *)(d + (j) * NR + 8), d##j##1);                            \
    _mm256_store_si256((__m256i *)(void *)(d + (j) * NR + 16), d##j##2);
    FX_ROWS(STORE)
#undef STORE
    fx_int8_finish_avx2(d, MR, NR, 1, t);
}
#undef FX_ROWS

const fx_gemm_int8 fx_gemm_int8_avxvnni = {"avxvnni int8 4x24 (ymm vpdpbusd)", MR, NR, kernel_4x24, 1, NULL, NULL};
