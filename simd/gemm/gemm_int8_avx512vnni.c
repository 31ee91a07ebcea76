/*
 * gemm_int8_avx512vnni.c — the AVX512-VNNI kernel of the int8 GEMM
 * (gemm_int8.c): 8 channels × 32 tokens, vpdpbusd over the whole K; and
 * the int8 choice of the avx512 / avx512bf16 tables.
 *
 * vpdpbusd multiplies unsigned by signed bytes: X is packed as code + 128
 * (u8, the vector operand: 16 tokens × one k-quad per zmm), the weight
 * quad of a channel is the signed operand, broadcast from its row in
 * place (the {1to16} memory form: no shuffle uop). The dots then hold
 * 128·Σ_k w[j], the row's code sum made once at load (fx_int8w.sum),
 * subtracted in the epilogue. Exact: |Σ| <= 255·127·K < 2^31 (K <= 65536).
 * Per k-quad: 2 loads of X, 8 broadcast weight quads, 16 vpdpbusd into 16
 * accumulators; no per-block work: the int32 sums run over the whole K.
 */
#include "gemm_int8_avx512.h"

#include <string.h>

enum { MR = 8, NR = 32 };

static inline int32_t quad_at(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Named accumulators and an unrolled row list: GCC 12 keeps all 16 in
 * registers (an array costs copies around the destructive vpdpbusd). */
#define FX_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

static void kernel_8x32(int64_t kq, const int8_t *w, int64_t ldw, const uint8_t *x, const fx_int8_tile *t) {
#define DECL(j) __m512i d##j##0 = _mm512_setzero_si512(), d##j##1 = d##j##0; const int8_t *w##j = w + (j) * ldw;
    FX_ROWS(DECL)
#undef DECL
    for (int64_t q = 0; q < kq; q++, x += 4 * NR) {
        const __m512i x0 = _mm512_loadu_si512(x), x1 = _mm512_loadu_si512(x + 64);
#define ROW(j)                                                                                     \
    {                                                                                              \
        const __m512i wj = _mm512_set1_epi32(quad_at(w##j + 4 * q));                               \
        d##j##0 = _mm512_dpbusd_epi32(d##j##0, x0, wj);                                            \
        d##j##1 = _mm512_dpbusd_epi32(d##j##1, x1, wj);                                            \
    }
        FX_ROWS(ROW)
#undef ROW
    }
    _Alignas(64) int32_t d[MR * NR];
#define STORE(j) _mm512_store_si512(d + (j) * NR, d##j##0), _mm512_store_si512(d + (j) * NR + 16, d##j##1);
    FX_ROWS(STORE)
#undef STORE
    fx_int8_finish_avx512(d, MR, NR, 1, t);
}
#undef FX_ROWS

const fx_gemm_int8 fx_gemm_int8_avx512vnni = {"avx512vnni int8 8x32 (vpdpbusd)", MR, NR, kernel_8x32, 1, NULL, NULL};

/* Every AVX-512 CPU since Ice Lake / Zen 4 has VNNI; Skylake-SP keeps the
 * AVX2 kernel. */
const fx_gemm_int8 *fx_gemm_int8_avx512(const fx_cpu_facts *f, int64_t m) {
    return f->avx512vnni ? &fx_gemm_int8_avx512vnni : fx_gemm_int8_avx2(f, m);
}
