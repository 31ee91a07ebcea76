/*
 * attention_amx.c — the attention hooks with both products on AMX tiles
 * (the amx table). The driver is attention.c (rows of a task in R = 48·n
 * rows, key tiles of KT = 64), the online softmax in AVX-512 is
 * attention_simd.h (as avx512bf16), bf16 packing attention_bf16.h. Here:
 *
 *   Sᵀ [KT][R] = K_tile · Qᵀ     A = K rows [key][dpad] bf16 (16 keys ×
 *                                 32 dims per tile), B = Q as pairs of
 *                                 dims [dpad/2][R] (16 pair rows × 16
 *                                 task rows); 2×2 tiles of 32 keys × 32
 *                                 rows, dpad/32 steps. Keys-major, as the
 *                                 shared softmax and masking expect.
 *   softmax in AVX-512            p = 2^(s − m) per key pair, stored as
 *                                 bf16 pairs of keys pp [KT/2][R]
 *   Oᵀ [Dp][R] = α·Oᵀ + Vᵀ·P      A = Vᵀ [Dp][KT] bf16 (16 dims × 32 keys
 *                                 per tile), B = pp as it is (16 key-pair
 *                                 rows × 16 task rows); 2×2 tiles of 32
 *                                 dims × 32 rows, KT/32 steps; Oᵀ is
 *                                 scaled by α in AVX-512 and loaded into
 *                                 the accumulator tiles
 *   out = O / l                   Oᵀ transposed back in 16×16 blocks
 * Computing Sᵀ and Oᵀ rather than S and O keeps every operand in the
 * layout the other step produces: no transposes per key tile.
 *
 * K and V are packed once per call, key tile by key tile (pack_kv):
 * K [KT][dpad] bf16 (dpad = d rounded up to 32, zero dims past d and
 * zero keys past sk) and Vᵀ [Dp][KT] bf16 (zero rows past d).
 * Edges: rows come in blocks of 16 (R is a multiple of 48: the last
 * block of 16 uses 2×1 tiles), dims in blocks of 16 (Dp), keys in 64s.
 *
 * Numerics as the avx512bf16 variant (Q·scale·log2 e, K, P, V in bf16;
 * f32 sums), in the tile unit's summation order. Each thread loads the
 * tile configuration before its first task and releases it after its
 * last (thread_begin / thread_end).
 *
 * Per-task scratch: qp [dpad/2][R] pairs, pp [KT/2][R] pairs, then the
 * driver's s [KT][R], o (here Oᵀ [Dp][R]), m, l, alpha [R].
 */
#include <stdint.h>

#include "attention_avx512_common.h"
#include "attention_bf16.h"
#include "attention_simd.h"
#include "simd/common/amx.h"

static int dpad_of(int d) { return (d + 31) & ~31; }

static fx_attn_layout amx_layout(const fx_attn_plan *p) {
    const size_t R = (size_t)p->rows_pad, d = (size_t)p->a.d, dp = (d + 15) & ~(size_t)15;
    const size_t dpad = (size_t)dpad_of(p->a.d);
    fx_attn_layout l = {
        .q_bytes = 4 * (dpad / 2) * R,
        .p_bytes = 4 * (size_t)(KT / 2) * R,
        .k_tile_bytes = 2 * (size_t)KT * dpad,
        .v_tile_bytes = 2 * dp * (size_t)KT,
    };
    return l;
}

/* Q rows as pairs of dims, zero up to dpad/2 pairs; o (free until the
 * first key tile, R·Dp floats >= R·dpad/2 pairs) holds the rows first. */
static void amx_pack_q(const fx_attn_plan *p, const fx_attn_task *k, const fx_attn_bufs *b) {
    const int dpad = dpad_of(b->d);
    pack_q_pairs(p, k, b->R, b->d, (uint32_t *)b->o, dpad / 2, b->qp, dpad / 2);
}

/* Key tile kb of kv head g → K rows (bf16, dpad wide) and Vᵀ [Dp][KT]. */
static void amx_pack_kv(const fx_attn_plan *p, int g, int64_t kb, void *kdst, void *vdst) {
    const int d = p->a.d, dp = (d + 15) & ~15, dpad = dpad_of(d);
    const __m512 one = _mm512_set1_ps(1.0f);
    _Alignas(64) uint32_t blk[16 * 16];
    for (int jj = 0; jj < KT; jj++) {
        const int64_t j = kb * KT + jj;
        uint16_t *kd = (uint16_t *)kdst + (size_t)jj * dpad;
        const float *kr = j < p->a.sk ? p->a.k + j * p->a.ldk + (int64_t)g * d : NULL;
        for (int e = 0; e < dpad; e += 32)
            _mm512_storeu_si512(kd + e, kr ? row_bf16(kr + e, d - e, one) : _mm512_setzero_si512());
    }
    /* Vᵀ of the tile: 16 key pairs × 16 dims at a time as pairs of keys
     * per dim, transposed to rows of dims */
    uint32_t *vt = vdst;
    for (int c = 0; c < dp; c += 16)
        for (int t0 = 0; t0 < KT / 2; t0 += 16) {
            for (int i = 0; i < 16; i++) {
                const int64_t j = kb * KT + 2 * (t0 + i);
                const __mmask16 mk = lanes(d - c);
                const __m512 v0 = j < p->a.sk
                                      ? _mm512_maskz_loadu_ps(mk, p->a.v + j * p->a.ldv + (int64_t)g * d + c)
                                      : _mm512_setzero_ps();
                const __m512 v1 = j + 1 < p->a.sk
                                      ? _mm512_maskz_loadu_ps(mk, p->a.v + (j + 1) * p->a.ldv + (int64_t)g * d + c)
                                      : _mm512_setzero_ps();
                _mm512_store_si512(blk + 16 * i, pair_bf16(v0, v1));
            }
            transpose16(blk, 16, vt + (size_t)c * (KT / 2) + t0, KT / 2, 16);
        }
}

/* ---- Sᵀ = K · Qᵀ ------------------------------------------------------------ */

/* Keys jb..jb+31 × rows rb..rb+15 (and rb+16..rb+31 when two_r). */
static inline __attribute__((always_inline)) void score_block(const int two_r, const fx_attn_bufs *b, int jb, int rb) {
    const int R = b->R, dpad = dpad_of(b->d), steps = dpad / 32;
    const char *ka = (const char *)((const uint16_t *)b->kp + (size_t)jb * dpad);
    const char *qb = (const char *)((const uint32_t *)b->qp + rb);
    const int64_t lda = (int64_t)dpad * 2, ldb = (int64_t)R * 4;
    FX_TILE_ZERO(FX_TMM_C00);
    FX_TILE_ZERO(FX_TMM_C10);
    if (two_r) {
        FX_TILE_ZERO(FX_TMM_C01);
        FX_TILE_ZERO(FX_TMM_C11);
    }
    for (int s = 0; s < steps; s++) {
        FX_TILE_LOAD(FX_TMM_A0, ka + s * 64, lda);
        FX_TILE_LOAD(FX_TMM_A1, ka + 16 * lda + s * 64, lda);
        FX_TILE_LOAD(FX_TMM_B0, qb + (int64_t)s * 16 * ldb, ldb);
        if (two_r) FX_TILE_LOAD(FX_TMM_B1, qb + (int64_t)s * 16 * ldb + 64, ldb);
        FX_TDPBF16PS(FX_TMM_C00, FX_TMM_A0, FX_TMM_B0);
        FX_TDPBF16PS(FX_TMM_C10, FX_TMM_A1, FX_TMM_B0);
        if (two_r) {
            FX_TDPBF16PS(FX_TMM_C01, FX_TMM_A0, FX_TMM_B1);
            FX_TDPBF16PS(FX_TMM_C11, FX_TMM_A1, FX_TMM_B1);
        }
    }
    float *s0 = b->s + (size_t)jb * R + rb;
    FX_TILE_STORE(FX_TMM_C00, s0, ldb);
    FX_TILE_STORE(FX_TMM_C10, s0 + 16 * R, ldb);
    if (two_r) {
        FX_TILE_STORE(FX_TMM_C01, s0 + 16, ldb);
        FX_TILE_STORE(FX_TMM_C11, s0 + 16 * R + 16, ldb);
    }
}

static void scores(const fx_attn_bufs *b) {
    for (int jb = 0; jb < KT; jb += 32)
        for (int rb = 0; rb < b->R; rb += 32) {
            if (rb + 16 < b->R) score_block(1, b, jb, rb);
            else score_block(0, b, jb, rb);
        }
}

/* ---- Oᵀ = α·Oᵀ + Vᵀ · P -------------------------------------------------------- */

/* Dims db..db+15 (db+16..db+31 when two_d) × rows rb..rb+15 (rb+16..
 * when two_r): Oᵀ (already scaled by α, or zero on the first tile) plus
 * Vᵀ · P over the tile's KT keys. */
static inline __attribute__((always_inline)) void pv_block(const int two_d, const int two_r, const fx_attn_bufs *b,
                                                           int db, int rb, int first) {
    const int R = b->R;
    const int64_t ldo = (int64_t)R * 4, ldv = KT * 2;
    float *o = b->o + (size_t)db * R + rb;
    const char *va = (const char *)((const uint16_t *)b->vp + (size_t)db * KT);
    const char *pb = (const char *)((const uint32_t *)b->pp + rb);
    if (first) {
        FX_TILE_ZERO(FX_TMM_C00);
        if (two_r) FX_TILE_ZERO(FX_TMM_C01);
        if (two_d) FX_TILE_ZERO(FX_TMM_C10);
        if (two_d && two_r) FX_TILE_ZERO(FX_TMM_C11);
    } else {
        FX_TILE_LOAD(FX_TMM_C00, o, ldo);
        if (two_r) FX_TILE_LOAD(FX_TMM_C01, o + 16, ldo);
        if (two_d) FX_TILE_LOAD(FX_TMM_C10, o + 16 * R, ldo);
        if (two_d && two_r) FX_TILE_LOAD(FX_TMM_C11, o + 16 * R + 16, ldo);
    }
    for (int s = 0; s < KT / 32; s++) {
        FX_TILE_LOAD(FX_TMM_A0, va + s * 64, ldv);
        if (two_d) FX_TILE_LOAD(FX_TMM_A1, va + 16 * ldv + s * 64, ldv);
        FX_TILE_LOAD(FX_TMM_B0, pb + (int64_t)s * 16 * ldo, ldo);
        if (two_r) FX_TILE_LOAD(FX_TMM_B1, pb + (int64_t)s * 16 * ldo + 64, ldo);
        FX_TDPBF16PS(FX_TMM_C00, FX_TMM_A0, FX_TMM_B0);
        if (two_r) FX_TDPBF16PS(FX_TMM_C01, FX_TMM_A0, FX_TMM_B1);
        if (two_d) FX_TDPBF16PS(FX_TMM_C10, FX_TMM_A1, FX_TMM_B0);
        if (two_d && two_r) FX_TDPBF16PS(FX_TMM_C11, FX_TMM_A1, FX_TMM_B1);
    }
    FX_TILE_STORE(FX_TMM_C00, o, ldo);
    if (two_r) FX_TILE_STORE(FX_TMM_C01, o + 16, ldo);
    if (two_d) FX_TILE_STORE(FX_TMM_C10, o + 16 * R, ldo);
    if (two_d && two_r) FX_TILE_STORE(FX_TMM_C11, o + 16 * R + 16, ldo);
}

static void pv_tile(const fx_attn_bufs *b, int first) {
    const int R = b->R, dp = b->dp;
    if (!first) /* Oᵀ[dim][row] *= α[row]: rows lie in the lanes */
        for (int dd = 0; dd < dp; dd++)
            for (int rb = 0; rb < R; rb += 16) {
                float *o = b->o + (size_t)dd * R + rb;
                _mm512_store_ps(o, _mm512_mul_ps(_mm512_load_ps(o), _mm512_load_ps(b->alpha + rb)));
            }
    for (int db = 0; db < dp; db += 32)
        for (int rb = 0; rb < R; rb += 32) {
            const int two_d = db + 16 < dp, two_r = rb + 16 < R;
            if (two_d && two_r) pv_block(1, 1, b, db, rb, first);
            else if (two_d) pv_block(1, 0, b, db, rb, first);
            else if (two_r) pv_block(0, 1, b, db, rb, first);
            else pv_block(0, 0, b, db, rb, first);
        }
}

/* out[row] = Oᵀ[·][row] / l[row], 16 rows × 16 dims at a time. */
static void store_output(const fx_attn_plan *p, const fx_attn_task *k, const fx_attn_bufs *b, int any) {
    const int R = b->R, d = b->d;
    _Alignas(64) uint32_t blk[16 * 16];
    for (int r0 = 0; r0 < k->rows; r0 += 16) {
        const int nr = k->rows - r0 < 16 ? k->rows - r0 : 16;
        float inv[16];
        for (int y = 0; y < nr; y++) {
            const float lr = any ? b->l[r0 + y] : 0.0f;
            inv[y] = lr > 0.0f ? 1.0f / lr : 0.0f;
        }
        for (int dd0 = 0; dd0 < d; dd0 += 16) {
            transpose16((const uint32_t *)(b->o + (size_t)dd0 * R + r0), (size_t)R, blk, 16, 16);
            for (int y = 0; y < nr; y++) {
                const __m512 v = inv[y] > 0.0f ? _mm512_mul_ps(_mm512_load_ps((const float *)(blk + 16 * y)),
                                                               _mm512_set1_ps(inv[y]))
                                               : _mm512_setzero_ps();
                _mm512_mask_storeu_ps(fx_attn_o_row(p, k, r0 + y) + dd0, lanes(d - dd0), v);
            }
        }
    }
}

const struct fx_attn_kernels fx_attn_amx = {
    .name = "amx bf16 tiles (bf16 Q, K, P, V; f32 sums; softmax in avx512)",
    .qt = QT,
    .row_align = ROW_ALIGN,
    .kt = KT,
    .layout = amx_layout,
    .pack_kv = amx_pack_kv,
    .pack_q = amx_pack_q,
    .scores = scores,
    .softmax = softmax_tile,
    .pv = pv_tile,
    .store = store_output,
    .thread_begin = fx_amx_tiles_begin,
    .thread_end = fx_amx_tiles_end,
};
