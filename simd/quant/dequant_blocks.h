/*
 * dequant_blocks.h — the x86 block dequantizers, written once over 16
 * codes at a time and included by dequant_avx2.c and dequant_avx512.c,
 * which define how 16 int8 codes become 16 outputs:
 *
 *   dqv                       the broadcast scale type; dq_set1(f)
 *   put16_mul(q, d, y)        y[0..15] = (float)q · d
 *   put16_mul_sub(q, d, m, y) y[0..15] = d · (float)q − m
 *   put16_mul_add(q, d, m, y) y[0..15] = (float)q · d + m
 *   DQ_OUT                    the output element (float, or uint16_t bf16)
 *   DQ(name)                  the name of this instance's function
 *
 * Bit-identical to dequant.c: codes are widened to int32 and converted
 * exactly, then the same multiplies (and subtractions / additions) per
 * lane in the same order as the reference — separate instructions, never
 * an FMA (this folder is built with -ffp-contract=off). The file may be
 * included more than once (f32 and bf16 outputs); the byte helpers once.
 */
#ifndef FX_DEQUANT_BLOCKS_HELPERS
#define FX_DEQUANT_BLOCKS_HELPERS

/* The table entries of the instance whose names P(dq_...) gives. */
#define FX_DQ_ENTRIES(P)                                                                             \
    [FX_DTYPE_Q8_0] = P(dq_q8_0), [FX_DTYPE_Q4_0] = P(dq_q4_0), [FX_DTYPE_Q4_1] = P(dq_q4_1),         \
    [FX_DTYPE_Q5_0] = P(dq_q5_0), [FX_DTYPE_Q5_1] = P(dq_q5_1), [FX_DTYPE_Q2_K] = P(dq_q2_k),         \
    [FX_DTYPE_Q3_K] = P(dq_q3_k), [FX_DTYPE_Q4_K] = P(dq_q4_k), [FX_DTYPE_Q5_K] = P(dq_q5_k),         \
    [FX_DTYPE_Q6_K] = P(dq_q6_k), [FX_DTYPE_IQ4_NL] = P(dq_iq4_nl), [FX_DTYPE_IQ4_XS] = P(dq_iq4_xs)

static inline __m128i lo_nibbles(__m128i v) { return _mm_and_si128(v, _mm_set1_epi8(15)); }
static inline __m128i hi_nibbles(__m128i v) { return _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(15)); }

/* The 32 bits of qh as 32 bytes of 0x10 (bit set) or 0 (byte j = bit j):
 * low 16 in *lo, high 16 in *hi. */
static inline void q5_high_bits(uint32_t qh, __m128i *lo, __m128i *hi) {
    const __m128i sel = _mm_set1_epi64x((long long)0x8040201008040201ull);
    __m128i v = _mm_cvtsi32_si128((int)qh);
    __m128i b0 = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    __m128i b1 = _mm_shuffle_epi8(v, _mm_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    *lo = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(b0, sel), sel), _mm_set1_epi8(16));
    *hi = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(b1, sel), sel), _mm_set1_epi8(16));
}

/* IQ4: codes through the 16-entry grid (one pshufb), then d·K. */
static inline __m128i iq4_grid(__m128i nib) {
    return _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)fx_iq4nl_values), nib);
}


/* 2-bit field t (0..3) of 16 bytes. */
static inline __m128i field2(__m128i v, int t) {
    return _mm_and_si128(_mm_srl_epi16(v, _mm_cvtsi32_si128(2 * t)), _mm_set1_epi8(3));
}

#endif

/* ------------------------------------------------------------------------ */
/* 32-element blocks                                                        */
/* ------------------------------------------------------------------------ */

static void DQ(dq_q8_0)(const uint8_t *b, int64_t nb, DQ_OUT *y) {
    for (int64_t i = 0; i < nb; i++, b += 34, y += 32) {
        const dqv d = dq_set1(fx_q_f16(b));
        put16_mul(_mm_loadu_si128((const __m128i *)(b + 2)), d, y);
        put16_mul(_mm_loadu_si128((const __m128i *)(b + 18)), d, y + 16);
    }
}

static void DQ(dq_q4_0)(const uint8_t *b, int64_t nb, DQ_OUT *y) {
    const __m128i eight = _mm_set1_epi8(8);
    for (int64_t i = 0; i < nb; i++, b += 18, y += 32) {
        const dqv d = dq_set1(fx_q_f16(b));
        __m128i q = _mm_loadu_si128((const __m128i *)(b + 2));
        put16_mul(_mm_sub_epi8(lo_nibbles(q), eight), d, y);
        put16_mul(_mm_sub_epi8(hi_nibbles(q), eight), d, y + 16);
    }
}

static void DQ(dq_q4_1)(const uint8_t *b, int64_t nb, DQ_OUT *y) {
    for (int64_t i = 0; i < nb; i++, b += 20, y += 32) {
        const dqv d = dq_set1(fx_q_f16(b)), m = dq_set1(fx_q_f16(b + 2));
        __m128i q = _mm_loadu_si128((const __m128i *)(b + 4));
        put16_mul_add(lo_nibbles(q), d, m, y);
        put16_mul_add(hi_nibbles(q), d, m, y + 16);
    }
}

static void DQ(dq_q5_0)(const uint8_t *b, int64_t nb, DQ_OUT *y) {
    const __m128i sixteen = _mm_set1_epi8(16);
    for (int64_t i = 0; i < nb; i++, b += 22, y += 32) {
        const dqv d = dq_set1(fx_q_f16(b));
        __m128i hl, hh;
        q5_high_bits(fx_q_u32(b + 2), &hl, &hh);
        __m128i q = _mm_loadu_si128((const __m128i *)(b + 6));
        put16_mul(_mm_sub_epi8(_mm_or_si128(lo_nibbles(q), hl), sixteen), d, y);
        put16_mul(_mm_sub_epi8(_mm_or_si128(hi_nibbles(q), hh), sixteen), d, y + 16);
    }
}

static void DQ(dq_q5_1)(const uint8_t *b, int64_t nb, DQ_OUT *y) {
    for (int64_t i = 0; i < nb; i++, b += 24, y += 32) {
        const dqv d = dq_set1(fx_q_f16(b)), m = dq_set1(fx_q_f16(b + 2));
        __m128i hl, hh;
        q5_high_bits(fx_q_u32(b + 4), &hl, &hh);
        __m128i q = _mm_loadu_si128((const __m128i *)(b + 8));
        put16_mul_add(_mm_or_si128(lo_nibbles(q), hl), d, m, y);
        put16_mul_add(_mm_or_si128(hi_nibbles(q), hh), d, m, y + 16);
    }
}

static void DQ(dq_iq4_nl)(const uint8_t *b, int64_t nb, DQ_OUT *y) {
    const dqv zero = dq_set1(0.0f);
    for (int64_t i = 0; i < nb; i++, b += 18, y += 32) {
        const dqv d = dq_set1(fx_q_f16(b));
        __m128i q = _mm_loadu_si128((const __m128i *)(b + 2));
        put16_mul_sub(iq4_grid(lo_nibbles(q)), d, zero, y);      /* d·K − 0 = d·K exactly */
        put16_mul_sub(iq4_grid(hi_nibbles(q)), d, zero, y + 16);
    }
}

/* ------------------------------------------------------------------------ */
/* 256-element super-blocks                                                 */
/* ------------------------------------------------------------------------ */

static void DQ(dq_q2_k)(const uint8_t *b, int64_t nb, DQ_OUT *y) {
    for (int64_t i = 0; i < nb; i++, b += 84) {
        const uint8_t *sc = b, *qs = b + 16;
        const float d = fx_q_f16(b + 80), dmin = fx_q_f16(b + 82);
        for (int s = 0; s < 16; s++, y += 16) { /* elements 16s.. : half h, field t, bytes l0.. */
            const int h = s / 8, t = (s % 8) / 2, l0 = 16 * (s % 2);
            const dqv dl = dq_set1(d * (float)(sc[s] & 15)), ml = dq_set1(dmin * (float)(sc[s] >> 4));
            __m128i q = field2(_mm_loadu_si128((const __m128i *)(qs + 32 * h + l0)), t);
            put16_mul_sub(q, dl, ml, y);
        }
    }
}

static void DQ(dq_q3_k)(const uint8_t *b, int64_t nb, DQ_OUT *y) {
    const dqv zero = dq_set1(0.0f);
    for (int64_t i = 0; i < nb; i++, b += 110) {
        const uint8_t *hm = b, *qs = b + 32;
        const float d = fx_q_f16(b + 108);
        int8_t sc[16];
        fx_q3k_scales(b + 96, sc);
        for (int s = 0; s < 16; s++, y += 16) {
            const int h = s / 8, t = (s % 8) / 2, l0 = 16 * (s % 2), bit = s / 2;
            const dqv dl = dq_set1(d * (float)sc[s]);
            __m128i q = field2(_mm_loadu_si128((const __m128i *)(qs + 32 * h + l0)), t);
            __m128i hb = _mm_and_si128(_mm_loadu_si128((const __m128i *)(hm + l0)), _mm_set1_epi8((char)(1 << bit)));
            __m128i minus4 = _mm_andnot_si128(_mm_cmpeq_epi8(hb, _mm_set1_epi8((char)(1 << bit))), _mm_set1_epi8(4));
            put16_mul_sub(_mm_sub_epi8(q, minus4), dl, zero, y);
        }
    }
}

static void DQ(dq_q45_k)(const uint8_t *b, int64_t nb, DQ_OUT *y, int five) {
    const size_t bytes = five ? 176 : 144;
    for (int64_t i = 0; i < nb; i++, b += bytes) {
        const float d = fx_q_f16(b), dmin = fx_q_f16(b + 2);
        const uint8_t *scales = b + 4, *qh = b + 16, *qs = b + (five ? 48 : 16);
        for (int j = 0; j < 8; j++, y += 32) {
            uint8_t sc, mn;
            fx_q_scale_min_k4(j, scales, &sc, &mn);
            const dqv dl = dq_set1(d * (float)sc), ml = dq_set1(dmin * (float)mn);
            const uint8_t *q = qs + 32 * (j / 2);
            for (int half = 0; half < 2; half++) {
                __m128i v = _mm_loadu_si128((const __m128i *)(q + 16 * half));
                v = j & 1 ? hi_nibbles(v) : lo_nibbles(v);
                if (five) {
                    __m128i h = _mm_loadu_si128((const __m128i *)(qh + 16 * half));
                    __m128i m = _mm_set1_epi8((char)(1 << j));
                    v = _mm_or_si128(v, _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(h, m), m), _mm_set1_epi8(16)));
                }
                put16_mul_sub(v, dl, ml, y + 16 * half);
            }
        }
    }
}

static void DQ(dq_q4_k)(const uint8_t *b, int64_t nb, DQ_OUT *y) { DQ(dq_q45_k)(b, nb, y, 0); }
static void DQ(dq_q5_k)(const uint8_t *b, int64_t nb, DQ_OUT *y) { DQ(dq_q45_k)(b, nb, y, 1); }

static void DQ(dq_q6_k)(const uint8_t *b, int64_t nb, DQ_OUT *y) {
    const dqv zero = dq_set1(0.0f);
    for (int64_t i = 0; i < nb; i++, b += 210) {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        const float d = fx_q_f16(b + 208);
        for (int s = 0; s < 16; s++, y += 16) {
            const int h = s / 8, t = (s % 8) / 2, l0 = 16 * (s % 2);
            const dqv dl = dq_set1(d * (float)sc[s]);
            __m128i lb = _mm_loadu_si128((const __m128i *)(ql + 64 * h + 32 * (t & 1) + l0));
            __m128i lo = t < 2 ? lo_nibbles(lb) : hi_nibbles(lb);
            __m128i hi = field2(_mm_loadu_si128((const __m128i *)(qh + 32 * h + l0)), t);
            __m128i q = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
            put16_mul_sub(q, dl, zero, y);
        }
    }
}

static void DQ(dq_iq4_xs)(const uint8_t *b, int64_t nb, DQ_OUT *y) {
    const dqv zero = dq_set1(0.0f);
    for (int64_t i = 0; i < nb; i++, b += 136) {
        const float d = fx_q_f16(b);
        const unsigned sh = (unsigned)(b[2] | b[3] << 8);
        const uint8_t *sl = b + 4, *qs = b + 8;
        for (int j = 0; j < 8; j++, y += 32, qs += 16) {
            int ls = ((sl[j / 2] >> (4 * (j & 1))) & 15) | (int)((sh >> (2 * j)) & 3) << 4;
            const dqv dl = dq_set1(d * (float)(ls - 32));
            __m128i q = _mm_loadu_si128((const __m128i *)qs);
            put16_mul_sub(iq4_grid(lo_nibbles(q)), dl, zero, y);
            put16_mul_sub(iq4_grid(hi_nibbles(q)), dl, zero, y + 16);
        }
    }
}
