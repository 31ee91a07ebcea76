/*
 * gemm_int8_avx2.c — the AVX2 int8 kernel of the W8A8 GEMM (gemm_int8.c):
 * 4 rows × 16 columns. Per quad of k (4 int8 per 32-bit lane): the row's
 * quad broadcast, |a| (vpsignb a, a) and b·sgn(a) (vpsignb b, a) into
 * vpmaddubsw — products of |a| <= 127 and |b| <= 127 in pairs never
 * saturate 16 bits — then vpmaddwd with ones sums the pairs into int32
 * lanes. Per 32-block the int32 dots are converted (exactly) and fused-
 * multiply-added with the columns' block scales into f32 sums kept in L1.
 * (Without VNNI this is about the op count of the f32 FMA kernel per
 * multiply-add; its gain is half the packed-weight bytes.)
 */
#include "gemm.h"

#include "simd/common/x86.h"

enum { MR = 4, NR = 16 };

static void kernel_4x16(int64_t nb, const int8_t *a, const int8_t *b, const float *bs, const fx_int8_tile *t) {
    __attribute__((aligned(32))) float acc[MR][NR] = {{0}};
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t blk = 0; blk < nb; blk++, a += 32 * MR, b += 32 * NR, bs += NR) {
        __m256i d00 = _mm256_setzero_si256(), d01 = d00, d10 = d00, d11 = d00, d20 = d00, d21 = d00, d30 = d00,
                d31 = d00;
        for (int q = 0; q < 8; q++) {
            const __m256i b0 = _mm256_loadu_si256((const __m256i *)(b + q * NR * 4));
            const __m256i b1 = _mm256_loadu_si256((const __m256i *)(b + q * NR * 4 + 32));
            const int32_t *aq = (const int32_t *)(const void *)(a + q * MR * 4);
#define ROW(i)                                                                                                 \
    {                                                                                                          \
        const __m256i ai = _mm256_set1_epi32(aq[i]), abs_a = _mm256_sign_epi8(ai, ai);                         \
        d##i##0 = _mm256_add_epi32(d##i##0, _mm256_madd_epi16(_mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(b0, ai)), ones)); \
        d##i##1 = _mm256_add_epi32(d##i##1, _mm256_madd_epi16(_mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(b1, ai)), ones)); \
    }
            ROW(0) ROW(1) ROW(2) ROW(3)
#undef ROW
        }
        const __m256 s0 = _mm256_loadu_ps(bs), s1 = _mm256_loadu_ps(bs + 8);
#define ACC(i)                                                                                         \
    _mm256_store_ps(acc[i], _mm256_fmadd_ps(_mm256_cvtepi32_ps(d##i##0), s0, _mm256_load_ps(acc[i])));  \
    _mm256_store_ps(acc[i] + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(d##i##1), s1, _mm256_load_ps(acc[i] + 8)));
        ACC(0) ACC(1) ACC(2) ACC(3)
#undef ACC
    }
    /* the epilogue, as the scalar kernel's (per element, same operations) */
    for (int i = 0; i < t->m; i++) {
        const __m256 sr = _mm256_set1_ps(t->sa[i]);
        float v[NR];
        _mm256_storeu_ps(v, _mm256_mul_ps(_mm256_load_ps(acc[i]), sr));
        _mm256_storeu_ps(v + 8, _mm256_mul_ps(_mm256_load_ps(acc[i] + 8), sr));
        float *c = t->c + i * t->ldc;
        for (int j = 0; j < t->n; j++) {
            float u = t->bias ? v[j] + t->bias[j] : v[j];
            if (t->mode == FX_EPI_STORE) c[j] = u;
            else if (t->mode == FX_EPI_ACCUMULATE) c[j] = c[j] + u;
            else c[j] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(t->gate[j]), _mm_set_ss(u), _mm_set_ss(c[j])));
        }
    }
}

const fx_gemm_int8 fx_gemm_int8_avx2_kernel = {"avx2 int8 4x16 (maddubs)", MR, NR, kernel_4x16, 0, NULL, NULL};

const fx_gemm_int8 *fx_gemm_int8_avx2(const fx_cpu_facts *f, int64_t m) {
    (void)f, (void)m;
    return &fx_gemm_int8_avx2_kernel;
}
