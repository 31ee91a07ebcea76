#version 450
// convert.comp — f32 ↔ bf16 / f16 with integer arithmetic, bit-identical to
// src/base/float16.h: exact widening (f16 subnormals normalised), narrowing
// with round-to-nearest-even, overflow to ±inf, NaNs kept quiet. 16-bit
// data are packed uint pairs (element 2i low half). Widening: one
// invocation per element. Narrowing: one per output word (two elements;
// a last odd element keeps the word's other half).
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer BufS { uint Src[]; };
layout(std430, binding = 1) buffer BufD { uint Dst[]; };

layout(push_constant) uniform Push {
    uint n, src_base, dst_base; // element indices (16-bit bases even)
    uint mode;                  // 0 bf16→f32, 1 f32→bf16, 2 f16→f32, 3 f32→f16
} pc;

uint half_at(uint e) { return (Src[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu; }

uint f32_to_bf16(uint u) {
    if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) | 0x40u) & 0xffffu;
    return ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) & 0xffffu;
}

uint f16_to_f32(uint h) {
    uint sign = (h & 0x8000u) << 16, ex = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (ex == 0x1fu) return sign | 0x7f800000u | (mant != 0u ? (0x400000u | (mant << 13)) : 0u);
    if (ex == 0u) {
        if (mant == 0u) return sign;
        int msb = findMSB(mant); // the leading 1 moves to bit 10
        uint sh = uint(10 - msb);
        return sign | (uint(127 - 14 - int(sh)) << 23) | (((mant << sh) & 0x3ffu) << 13);
    }
    return sign | ((ex + 112u) << 23) | (mant << 13);
}

uint f32_to_f16(uint u) {
    uint sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u | ((a >> 13) & 0x3ffu);
    if (a >= 0x477ff000u) return sign | 0x7c00u;
    if (a >= 0x38800000u) {
        uint r = a - (112u << 23);
        return sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13);
    }
    if (a <= 0x33000000u) return sign;
    uint e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, s = 126u - e;
    uint q = m >> s, rem = m & ((1u << s) - 1u), hf = 1u << (s - 1u);
    if (rem > hf || (rem == hf && (q & 1u) != 0u)) q++;
    return sign | q;
}

void main() {
    uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x +
             gl_LocalInvocationID.x;
    if (pc.mode == 0u || pc.mode == 2u) {
        if (i >= pc.n) return;
        uint h = half_at(pc.src_base + i);
        Dst[pc.dst_base + i] = pc.mode == 0u ? h << 16 : f16_to_f32(h);
        return;
    }
    uint e = 2u * i;
    if (e >= pc.n) return;
    uint lo = Src[pc.src_base + e];
    lo = pc.mode == 1u ? f32_to_bf16(lo) : f32_to_f16(lo);
    uint w = (pc.dst_base >> 1) + i, hi;
    if (e + 1u < pc.n) {
        hi = Src[pc.src_base + e + 1u];
        hi = pc.mode == 1u ? f32_to_bf16(hi) : f32_to_f16(hi);
    } else {
        hi = Dst[w] >> 16;
    }
    Dst[w] = lo | (hi << 16);
}
