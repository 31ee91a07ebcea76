// gemm_common.glsl — operands of the GEMM shaders:
//   Y[m, n] (op)= A[m, k] · W[n, k]ᵀ (+ bias)
// A is X [m, k] (linear), or the implicit im2col matrix of a channels-last
// conv input (CONV=1: row = output pixel, k = (ky, kx, ci), zero padding,
// stride, nearest ×2 upsampling folded into the indexing). W is a device
// weight: WTYPE 0 f32, 1 bf16 and 2 f16 as packed uint pairs, rows ld
// elements apart (16-byte multiples); or ggml blocks as stored (WTYPE 3
// Q8_0, 4 Q4_0, 5 Q4_K, 6 Q5_K, 7 Q6_K, 8 Q4_1, 9 Q5_0, 10 Q5_1, 11 Q2_K,
// 12 Q3_K, 13 IQ4_NL, 14 IQ4_XS, read as bytes), rows ld BYTES apart
// and w_base a byte offset, dequantized element by element as the tile
// loads (exactly the CPU reference's f32 operations, hence `precise`);
// or fp8 bytes (WTYPE 15 F8_E4M3, 16 F8_E5M2), one an element, rows ld
// bytes apart, each loaded as f32(fp8)·w_scale (the CPU's value).
// All other offsets are element indices inside the bound windows.
#ifndef WTYPE
#define WTYPE 0
#endif
#ifndef CONV
#define CONV 0
#endif
#define W_BLOCKS (WTYPE >= 3 && WTYPE <= 14)
#define W_FP8 (WTYPE == 15 || WTYPE == 16)

layout(std430, binding = 0) readonly buffer BufX { float X[]; };
#if WTYPE == 0
layout(std430, binding = 1) readonly buffer BufW { float W[]; };
#else // 16-bit pairs, block or fp8 bytes
layout(std430, binding = 1) readonly buffer BufW { uint W[]; };
#endif
layout(std430, binding = 2) buffer BufY { float Y[]; };
layout(std430, binding = 3) readonly buffer BufBias { float Bias[]; };
layout(std430, binding = 4) readonly buffer BufGate { float Gate[]; };

layout(push_constant) uniform Push {
    uint m, n, k;            // this pass: rows of Y, columns of Y, reduction
    uint x_base, ldx;        // linear: X rows; conv: the input window
    uint w_base, ldw;
    uint y_base, ldy;
    uint bias_base, gate_base;
    uint mode;               // 0 store, 1 accumulate, 2 gated accumulate
    uint has_bias;
    uint h, w, cin, kh, kw, stride, pad_top, pad_left, up, wo;
    uint row0;               // first output row (conv) of this pass
    uint in_row0;            // first input row in the X window (conv)
    float gate_scale;        // mode 2 adds (gate_scale·Gate)·t (1: a plain layer)
    float w_scale;           // fp8: the weight's per-tensor scale (1: unscaled)
} pc;

#if WTYPE >= 3
uint wbyte(uint b) { return (W[b >> 2] >> ((b & 3u) * 8u)) & 0xFFu; }
#endif

#if W_FP8
// An fp8 byte as f32, exact (simd/quant/quant.h): E4M3FN bias 7,
// subnormals m·2⁻⁹, no infinities, 0x7F / 0xFF NaN; E5M2 the upper byte
// of an IEEE half (bias 15, subnormals m·2⁻¹⁶, infinities and NaNs).
// Built from bits (normal f32 results, so no denormal flushing applies).
float fp8_f32(uint b) {
    const uint sign = (b & 0x80u) << 24;
#if WTYPE == 15
    const uint e = (b >> 3) & 15u, m = b & 7u;
    if (e == 15u && m == 7u) return uintBitsToFloat(sign | 0x7FC00000u);
    if (e == 0u) return uintBitsToFloat(sign | floatBitsToUint(float(m) * 0.001953125)); // m·2⁻⁹
    return uintBitsToFloat(sign | ((e + 120u) << 23) | (m << 20));
#else
    const uint e = (b >> 2) & 31u, m = b & 3u;
    if (e == 31u) return uintBitsToFloat(sign | 0x7F800000u | (m << 21)); // ±inf (m = 0), NaN
    if (e == 0u) return uintBitsToFloat(sign | floatBitsToUint(float(m) * 0.0000152587890625)); // m·2⁻¹⁶
    return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 21));
#endif
}

// The weight's value of one fp8 byte: f32(fp8)·scale, one f32 rounding.
float fp8_value(uint b) {
    precise float x = fp8_f32(b) * pc.w_scale;
    return x;
}
#endif

#if W_BLOCKS
#if WTYPE == 13 || WTYPE == 14 // the IQ4_NL / IQ4_XS non-linear grid
const int IQ4NL[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
#endif
float wf16(uint b) { return unpackHalf2x16(wbyte(b) | (wbyte(b + 1u) << 8)).x; }

// Element kidx of the block row starting at byte rb.
float w_block(uint rb, uint kidx) {
#if WTYPE == 3 // Q8_0: 34 B / 32 — d f16, qs[32] i8; x = q·d
    uint b = rb + (kidx >> 5) * 34u;
    int q = int(wbyte(b + 2u + (kidx & 31u)) << 24) >> 24;
    precise float x = float(q) * wf16(b);
    return x;
#elif WTYPE == 4 // Q4_0: 18 B / 32 — d, qs[16]; element j < 16 low nibble of qs[j], j + 16 high
    uint b = rb + (kidx >> 5) * 18u, j = kidx & 31u;
    uint q = (wbyte(b + 2u + (j & 15u)) >> (j < 16u ? 0u : 4u)) & 15u;
    precise float x = float(int(q) - 8) * wf16(b);
    return x;
#elif WTYPE == 5 || WTYPE == 6 // Q4_K 144 B / Q5_K 176 B per 256: x = (d·sc)·q − dmin·mn
    const uint bytes = WTYPE == 5 ? 144u : 176u, qs = WTYPE == 5 ? 16u : 48u;
    uint b = rb + (kidx >> 8) * bytes, e = kidx & 255u, j = e >> 5, l = e & 31u;
    uint s = b + 4u, sc, mn; // 12-byte packing of 8 (6-bit scale, 6-bit min)
    if (j < 4u) {
        sc = wbyte(s + j) & 63u;
        mn = wbyte(s + j + 4u) & 63u;
    } else {
        sc = (wbyte(s + j + 4u) & 15u) | ((wbyte(s + j - 4u) >> 6) << 4);
        mn = (wbyte(s + j + 4u) >> 4) | ((wbyte(s + j) >> 6) << 4);
    }
    uint q = (wbyte(b + qs + 32u * (j >> 1) + l) >> ((j & 1u) * 4u)) & 15u;
#if WTYPE == 6
    q |= ((wbyte(b + 16u + l) >> j) & 1u) << 4;
#endif
    precise float dl = wf16(b) * float(sc), ml = wf16(b + 2u) * float(mn);
    precise float t = dl * float(q);
    precise float x = t - ml;
    return x;
#elif WTYPE == 7 // Q6_K 210 B / 256: ql[128], qh[64], scales[16] i8, d; x = (d·sc)·(q − 32)
    uint b = rb + (kidx >> 8) * 210u, e = kidx & 255u, h = e >> 7, t = (e & 127u) >> 5, l = e & 31u;
    uint lb = wbyte(b + 64u * h + 32u * (t & 1u) + l);
    uint q = (t < 2u ? lb & 15u : lb >> 4) | (((wbyte(b + 128u + 32u * h + l) >> (2u * t)) & 3u) << 4);
    int sc = int(wbyte(b + 192u + (e >> 4)) << 24) >> 24;
    precise float dl = wf16(b + 208u) * float(sc);
    precise float x = dl * float(int(q) - 32);
    return x;
#elif WTYPE == 8 // Q4_1: 20 B / 32 — d, m, qs[16]; x = q·d + m
    uint b = rb + (kidx >> 5) * 20u, j = kidx & 31u;
    uint q = (wbyte(b + 4u + (j & 15u)) >> (j < 16u ? 0u : 4u)) & 15u;
    precise float t = float(q) * wf16(b);
    precise float x = t + wf16(b + 2u);
    return x;
#elif WTYPE == 9 || WTYPE == 10 // Q5_0 22 B: d, qh u32, qs[16]; x = (q − 16)·d
    // Q5_1 24 B: d, m, qh, qs[16]; x = q·d + m. 5th bit of element j: bit j of qh
    const uint bytes = WTYPE == 9 ? 22u : 24u, qh = WTYPE == 9 ? 2u : 4u;
    uint b = rb + (kidx >> 5) * bytes, j = kidx & 31u;
    uint q = (wbyte(b + qh + 4u + (j & 15u)) >> (j < 16u ? 0u : 4u)) & 15u;
    q |= ((wbyte(b + qh + (j >> 3)) >> (j & 7u)) & 1u) << 4;
#if WTYPE == 9
    precise float x = float(int(q) - 16) * wf16(b);
#else
    precise float t = float(q) * wf16(b);
    precise float x = t + wf16(b + 2u);
#endif
    return x;
#elif WTYPE == 11 // Q2_K 84 B / 256: scales[16] (lo scale, hi min), qs[64], d, dmin
    // x = (d·sc)·q − dmin·mn; element e: q = (qs[32h + l] >> 2t) & 3 (h = e/128, t = (e%128)/32, l = e%32)
    uint b = rb + (kidx >> 8) * 84u, e = kidx & 255u, h = e >> 7, t = (e & 127u) >> 5, l = e & 31u;
    uint sc = wbyte(b + (e >> 4));
    uint q = (wbyte(b + 16u + 32u * h + l) >> (2u * t)) & 3u;
    precise float dl = wf16(b + 80u) * float(sc & 15u), ml = wf16(b + 82u) * float(sc >> 4);
    precise float v = dl * float(q);
    precise float x = v - ml;
    return x;
#elif WTYPE == 12 // Q3_K 110 B / 256: hmask[32], qs[64], scales[12] (16 × 6 bit), d
    // x = (d·(s − 32))·(q2 − 4·!hbit), q2 as Q2_K, hbit = bit e/32 of hmask[e%32]
    uint b = rb + (kidx >> 8) * 110u, e = kidx & 255u, h = e >> 7, t = (e & 127u) >> 5, l = e & 31u;
    uint s = e >> 4, sb = b + 96u;
    uint lo = s < 8u ? wbyte(sb + s) & 15u : wbyte(sb + s - 8u) >> 4;
    uint hi = (wbyte(sb + 8u + (s & 3u)) >> (2u * (s >> 2))) & 3u;
    int q = int((wbyte(b + 32u + 32u * h + l) >> (2u * t)) & 3u) - (((wbyte(b + l) >> (e >> 5)) & 1u) != 0u ? 0 : 4);
    precise float dl = wf16(b + 108u) * float(int(lo | (hi << 4)) - 32);
    precise float x = dl * float(q);
    return x;
#elif WTYPE == 13 // IQ4_NL: 18 B / 32 — d, qs[16] (nibbles as Q4_0); x = d·K[q]
    uint b = rb + (kidx >> 5) * 18u, j = kidx & 31u;
    uint q = (wbyte(b + 2u + (j & 15u)) >> (j < 16u ? 0u : 4u)) & 15u;
    precise float x = wf16(b) * float(IQ4NL[q]);
    return x;
#else // IQ4_XS 136 B / 256: d, scales_h u16, scales_l[4], qs[128]; x = (d·(ls − 32))·K[q]
    // sub-block j = e/32: ls = 4 bits of scales_l[j/2] (low for even j) | 2 bits of scales_h << 4;
    // element i = e%32 from qs[16j + i%16], low nibble for i < 16
    uint b = rb + (kidx >> 8) * 136u, e = kidx & 255u, j = e >> 5, i = e & 31u;
    uint sh = wbyte(b + 2u) | (wbyte(b + 3u) << 8);
    uint ls = ((wbyte(b + 4u + (j >> 1)) >> (4u * (j & 1u))) & 15u) | (((sh >> (2u * j)) & 3u) << 4);
    uint q = (wbyte(b + 8u + 16u * j + (i & 15u)) >> (i < 16u ? 0u : 4u)) & 15u;
    precise float dl = wf16(b) * float(int(ls) - 32);
    precise float x = dl * float(IQ4NL[q]);
    return x;
#endif
}
#endif

float w_at(uint idx) {
#if W_FP8
    return fp8_value(wbyte(idx));
#elif W_BLOCKS
    return 0.0; // block rows are read through w_el
#elif WTYPE == 0
    return W[idx];
#elif WTYPE == 1
    uint v = W[idx >> 1];
    return (idx & 1u) != 0u ? bf16_hi(v) : bf16_lo(v);
#else
    vec2 h = unpackHalf2x16(W[idx >> 1]);
    return (idx & 1u) != 0u ? h.y : h.x;
#endif
}

// Element kidx of the weight row that starts at `row` (element index, or
// byte offset for block types).
float w_el(uint row, uint kidx) {
#if W_BLOCKS
    return w_block(row, kidx);
#else
    return w_at(row + kidx);
#endif
}

// Four consecutive weights from idx (idx + 3 stays inside the padded row).
vec4 w4_at(uint idx) {
#if W_BLOCKS
    return vec4(0.0);
#elif W_FP8
    return vec4(w_at(idx), w_at(idx + 1u), w_at(idx + 2u), w_at(idx + 3u));
#elif WTYPE == 0
    return vec4(W[idx], W[idx + 1], W[idx + 2], W[idx + 3]);
#else
    if ((idx & 1u) == 0u) {
        uint a = W[idx >> 1], b = W[(idx >> 1) + 1];
#if WTYPE == 1
        return vec4(bf16_lo(a), bf16_hi(a), bf16_lo(b), bf16_hi(b));
#else
        return vec4(unpackHalf2x16(a), unpackHalf2x16(b));
#endif
    }
    return vec4(w_at(idx), w_at(idx + 1), w_at(idx + 2), w_at(idx + 3));
#endif
}

#if CONV
// Word index in X of input pixel (iy, ix) for output pixel p (row of this
// pass) and tap (ky, kx), or -1 where the tap reads padding.
int conv_src(uint p, uint ky, uint kx) {
    uint P = pc.row0 * pc.wo + p;
    int oy = int(P / pc.wo), ox = int(P % pc.wo);
    int iy = oy * int(pc.stride) + int(ky) - int(pc.pad_top);
    int ix = ox * int(pc.stride) + int(kx) - int(pc.pad_left);
    int hh = int(pc.h << pc.up), ww = int(pc.w << pc.up);
    if (iy < 0 || ix < 0 || iy >= hh || ix >= ww) return -1;
    iy >>= pc.up;
    ix >>= pc.up;
    return int(pc.x_base) + ((iy - int(pc.in_row0)) * int(pc.w) + ix) * int(pc.cin);
}
#endif

// A[row, kidx] (0 outside the matrix).
float a_at(uint row, uint kidx) {
    if (row >= pc.m || kidx >= pc.k) return 0.0;
#if CONV
    uint tap = kidx / pc.cin, ci = kidx - tap * pc.cin;
    uint ky = tap / pc.kw, kx = tap - ky * pc.kw;
    int s = conv_src(row, ky, kx);
    return s < 0 ? 0.0 : X[uint(s) + ci];
#else
    return X[pc.x_base + row * pc.ldx + kidx];
#endif
}

void store_out(uint row, uint col, float t) {
    if (pc.has_bias != 0u) t += Bias[pc.bias_base + col];
    uint o = pc.y_base + row * pc.ldy + col;
    if (pc.mode == 0u) Y[o] = t;
    else if (pc.mode == 1u) Y[o] += t;
    else {
        precise float g = pc.gate_scale * Gate[pc.gate_base + col];
        Y[o] += g * t;
    }
}
