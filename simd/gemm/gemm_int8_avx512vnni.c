/*
 * gemm_int8_avx512vnni.c — the AVX512-VNNI int8 kernel of the W8A8 GEMM
 * (gemm_int8.c): 8 rows × 32 columns, vpdpbusd; and the int8 choice of
 * the avx512 / avx512bf16 tables.
 *
 * vpdpbusd multiplies unsigned by signed bytes; both our operands are
 * signed (codes in [-127, 127]). Offset trick: the row's quad is xor-ed
 * with 0x80 (a + 128, in [1, 255] as u8), the instruction sums
 * (a + 128)·b, and 128·Σb of the column — one more vpdpbusd of 0x80 bytes
 * against the same B vector, shared by the 8 rows — is subtracted once
 * per block. Exact: every sum stays below 2^21 in magnitude. (The AVX2
 * kernel's sign transfer, vpsignb, has no 512-bit form; masked negation
 * would cost more per row and quad than this xor, which folds into the
 * broadcast load.)
 * Per 32-block: 16 int32 accumulators (8 rows × 2 vectors) and 2
 * corrections in registers; then the dots are converted (exactly) and
 * fused-multiply-added with the columns' block scales into f32 sums kept
 * in L1, in block order as every int8 kernel.
 */
#include "gemm_int8_avx512.h"

#include <string.h>

enum { MR = 8, NR = 32 };

static inline int32_t quad_at(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Named accumulators and the quad loop unrolled: GCC 12 then keeps all
 * 18 in registers (an array, or a rolled loop, costs copies and spills
 * around the destructive vpdpbusd). */
#define FX_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

static void kernel_8x32(int64_t nb, const int8_t *a, const int8_t *b, const float *bs, const fx_int8_tile *t) {
    _Alignas(64) float acc[MR][NR] = {{0}};
    const __m512i offset = _mm512_set1_epi8((char)0x80);
    for (int64_t blk = 0; blk < nb; blk++, a += 32 * MR, b += 32 * NR, bs += NR) {
        __m512i corr0 = _mm512_setzero_si512(), corr1 = corr0;
#define DECL(i) __m512i d##i##0 = corr0, d##i##1 = corr0;
        FX_ROWS(DECL)
#undef DECL
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++) {
            const __m512i b0 = _mm512_loadu_si512(b + q * NR * 4), b1 = _mm512_loadu_si512(b + q * NR * 4 + 64);
            const int8_t *aq = a + q * MR * 4;
            corr0 = _mm512_dpbusd_epi32(corr0, offset, b0);
            corr1 = _mm512_dpbusd_epi32(corr1, offset, b1);
#define ROW(i)                                                                                     \
    {                                                                                              \
        const __m512i ai = _mm512_xor_si512(_mm512_set1_epi32(quad_at(aq + 4 * (i))), offset);     \
        d##i##0 = _mm512_dpbusd_epi32(d##i##0, ai, b0);                                            \
        d##i##1 = _mm512_dpbusd_epi32(d##i##1, ai, b1);                                            \
    }
            FX_ROWS(ROW)
#undef ROW
        }
        const __m512 s0 = _mm512_loadu_ps(bs), s1 = _mm512_loadu_ps(bs + 16);
#define ACC(i)                                                                                                   \
    _mm512_store_ps(acc[i], _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(d##i##0, corr0)), s0,           \
                                            _mm512_load_ps(acc[i])));                                            \
    _mm512_store_ps(acc[i] + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(d##i##1, corr1)), s1,      \
                                                 _mm512_load_ps(acc[i] + 16)));
        FX_ROWS(ACC)
#undef ACC
    }
    fx_int8_write_tile_avx512(&acc[0][0], NR, t);
}
#undef FX_ROWS

const fx_gemm_int8 fx_gemm_int8_avx512vnni = {"avx512vnni int8 8x32 (vpdpbusd)", MR, NR, kernel_8x32, 0, NULL, NULL};

/* Every AVX-512 CPU since Ice Lake / Zen 4 has VNNI; Skylake-SP keeps the
 * AVX2 kernel. */
const fx_gemm_int8 *fx_gemm_int8_avx512(const fx_cpu_facts *f, int64_t m) {
    return f->avx512vnni ? &fx_gemm_int8_avx512vnni : fx_gemm_int8_avx2(f, m);
}
