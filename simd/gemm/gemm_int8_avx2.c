/*
 * gemm_int8_avx2.c — the AVX2 kernel of the int8 GEMM (gemm_int8.c):
 * 4 channels × 16 tokens over the whole K, and the int8 choice of the avx2
 * table (AVX-VNNI when the CPU has it).
 *
 * Per k-quad: X (s8 codes, 8 tokens × 4 per ymm) loaded twice; per channel
 * its weight quad broadcast from the row in place, |w| (vpabsb) as the
 * unsigned operand of vpmaddubsw and x·sgn(w) (vpsignb) as the signed one
 * — products of |w| <= 127 and |x| <= 127 in pairs never saturate 16 bits
 * — then vpmaddwd with ones sums the pairs into int32 lanes. 4 uops per
 * 32 multiply-adds; the int32 sums run over the whole K.
 */
#include "gemm_int8_avx2.h"

#include <string.h>

enum { MR = 4, NR = 16 };

static void kernel_4x16(int64_t kq, const int8_t *w, int64_t ldw, const uint8_t *x, const fx_int8_tile *t) {
    __m256i d00 = _mm256_setzero_si256(), d01 = d00, d10 = d00, d11 = d00, d20 = d00, d21 = d00, d30 = d00, d31 = d00;
    const __m256i ones = _mm256_set1_epi16(1);
    const int8_t *w0 = w, *w1 = w + ldw, *w2 = w + 2 * ldw, *w3 = w + 3 * ldw;
    for (int64_t q = 0; q < kq; q++, x += 4 * NR) {
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)x);
        const __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(x + 32));
#define ROW(j)                                                                                                  \
    {                                                                                                           \
        int32_t quad;                                                                                           \
        memcpy(&quad, w##j + 4 * q, 4);                                                                         \
        const __m256i wj = _mm256_set1_epi32(quad), aw = _mm256_abs_epi8(wj);                                  \
        d##j##0 = _mm256_add_epi32(d##j##0, _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(x0, wj)), ones)); \
        d##j##1 = _mm256_add_epi32(d##j##1, _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(x1, wj)), ones)); \
    }
        ROW(0) ROW(1) ROW(2) ROW(3)
#undef ROW
    }
    _Alignas(32) int32_t d[MR * NR];
    _mm256_store_si256((__m256i *)(void *)(d + 0), d00), _mm256_store_si256((__m256i *)(void *)(d + 8), d01);
    _mm256_store_si256((__m256i *)(void *)(d + 16), d10), _mm256_store_si256((__m256i *)(void *)(d + 24), d11);
    _mm256_store_si256((__m256i *)(void *)(d + 32), d20), _mm256_store_si256((__m256i *)(void *)(d + 40), d21);
    _mm256_store_si256((__m256i *)(void *)(d + 48), d30), _mm256_store_si256((__m256i *)(void *)(d + 56), d31);
    fx_int8_finish_avx2(d, MR, NR, 0, t);
}

const fx_gemm_int8 fx_gemm_int8_avx2_kernel = {"avx2 int8 4x16 (maddubs)", MR, NR, kernel_4x16, 0, NULL, NULL};

/* AVX-VNNI (VEX vpdpbusd on ymm: Alder Lake and later client cores, Zen 5)
 * does in one uop what vpmaddubsw + vpmaddwd + vpaddd do here. */
const fx_gemm_int8 *fx_gemm_int8_avx2(const fx_cpu_facts *f, int64_t m) {
    (void)m;
    return f->avxvnni ? &fx_gemm_int8_avxvnni : &fx_gemm_int8_avx2_kernel;
}
