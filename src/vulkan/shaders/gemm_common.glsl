// gemm_common.glsl — operands of the GEMM shaders:
//   Y[m, n] (op)= A[m, k] · W[n, k]ᵀ (+ bias)
// A is X [m, k] (linear), or the implicit im2col matrix of a channels-last
// conv input (CONV=1: row = output pixel, k = (ky, kx, ci), zero padding,
// stride, nearest ×2 upsampling folded into the indexing). W is a device
// weight: WTYPE 0 f32, 1 bf16 and 2 f16 as packed uint pairs, rows ld
// elements apart (16-byte multiples). All offsets are element indices
// inside the bound windows.
#ifndef WTYPE
#define WTYPE 0
#endif
#ifndef CONV
#define CONV 0
#endif

layout(std430, binding = 0) readonly buffer BufX { float X[]; };
#if WTYPE == 0
layout(std430, binding = 1) readonly buffer BufW { float W[]; };
#else
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
} pc;

float w_at(uint idx) {
#if WTYPE == 0
    return W[idx];
#elif WTYPE == 1
    uint v = W[idx >> 1];
    return (idx & 1u) != 0u ? bf16_hi(v) : bf16_lo(v);
#else
    vec2 h = unpackHalf2x16(W[idx >> 1]);
    return (idx & 1u) != 0u ? h.y : h.x;
#endif
}

// Four consecutive weights from idx (idx + 3 stays inside the padded row).
vec4 w4_at(uint idx) {
#if WTYPE == 0
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
    else Y[o] += Gate[pc.gate_base + col] * t;
}
