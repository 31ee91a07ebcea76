#version 450
// gemm_reg.comp — GEMM / implicit-GEMM conv with register blocking, no
// shared memory and no barriers: the variant for CPU drivers. lavapipe
// (Mesa 22.3) runs each invocation as one SIMD lane and loads every
// component of a storage buffer with a loop over the lanes (bounds check,
// scalar load, insert), about a hundred cycles per component: the arithmetic
// is free beside the loads, so this shader is built to load each value once
// per lane and use it as often as possible.
//
// Each invocation owns a TM×TN block of Y. The invocations of a subgroup
// share the block's rows (grid y = row blocks of TM) and take consecutive
// column blocks (grid x). The reduction goes in chunks of KC = 8: lane l
// loads A[row, k0 + (l mod 8)] for its TM rows (one load per row for eight
// k) and subgroupBroadcast hands each of the eight values to every lane;
// each lane loads its own TN weight rows, eight elements as one 16-byte
// load (uvec4 of bf16/f16 pairs, two vec4 of f32) when the row starts are
// 16-byte aligned, else (and for block types) element by element through
// w_el. Needs subgroups
// of at least 8 invocations, all active (no early return). The order of the
// sums depends only on the shape, never on the device's subgroup size.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_ballot : require
#include "common.glsl"
#include "gemm_common.glsl"
#include "gemm_vec.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TM = 8;
layout(constant_id = 2) const uint TN = 4;
const uint KC = 8u; // reduction chunk: one A load per row and lane

float acc[TM][TN];
float av[TM]; // lane l: A[row0 + i, k0 + l mod 8]

// acc += A[:, chunk element c] · b[c] for the TN columns (c a literal, so
// the broadcast is a register extract).
#define MAC(c, bj)                                                             \
    {                                                                          \
        [[unroll]] for (uint i = 0; i < TM; i++) {                             \
            float a = subgroupBroadcast(av[i], c);                             \
            [[unroll]] for (uint j = 0; j < TN; j++) acc[i][j] += a * bj[j][c]; \
        }                                                                      \
    }
// Lane c's value of v (c < 8 and the same in every lane).
float bcast8(float v, uint c) {
    switch (c) {
    case 0u: return subgroupBroadcast(v, 0u);
    case 1u: return subgroupBroadcast(v, 1u);
    case 2u: return subgroupBroadcast(v, 2u);
    case 3u: return subgroupBroadcast(v, 3u);
    case 4u: return subgroupBroadcast(v, 4u);
    case 5u: return subgroupBroadcast(v, 5u);
    case 6u: return subgroupBroadcast(v, 6u);
    default: return subgroupBroadcast(v, 7u);
    }
}

#define MAC8(bj) MAC(0, bj) MAC(1, bj) MAC(2, bj) MAC(3, bj) MAC(4, bj) MAC(5, bj) MAC(6, bj) MAC(7, bj)

void main() {
    const uint row0 = gl_WorkGroupID.y * TM;
    const uint col0 = (gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x) * TN;
    const uint lk = gl_SubgroupInvocationID % KC;
#if CONV
    const uint taps = pc.kh * pc.kw, seg = pc.cin;
#else
    const uint taps = 1u, seg = pc.k;
#endif
    [[unroll]] for (uint i = 0; i < TM; i++)
        [[unroll]] for (uint j = 0; j < TN; j++) acc[i][j] = 0.0;
    uint wr[TN]; // weight row starts; columns past n repeat the last one
    [[unroll]] for (uint j = 0; j < TN; j++) wr[j] = pc.w_base + min(col0 + j, pc.n - 1u) * pc.ldw;

    for (uint tap = 0; tap < taps; tap++) {
        // Row starts in X for this tap (the same in every lane); rows past m
        // repeat the last row, taps that read padding contribute nothing.
        uint xr[TM];
        bool valid[TM];
        [[unroll]] for (uint i = 0; i < TM; i++) {
            uint r = min(row0 + i, pc.m - 1u);
#if CONV
            int s = conv_src(r, tap / pc.kw, tap % pc.kw);
            valid[i] = s >= 0;
            xr[i] = s >= 0 ? uint(s) : 0u;
#else
            valid[i] = true;
            xr[i] = pc.x_base + r * pc.ldx;
#endif
        }
        const uint wk = tap * seg;
        const bool vec_w = w_vec_ok(pc.w_base + wk);
        for (uint k0 = 0u; k0 < seg; k0 += KC) {
            [[unroll]] for (uint i = 0; i < TM; i++)
                av[i] = valid[i] && k0 + lk < seg ? X[xr[i] + k0 + lk] : 0.0;
            if (vec_w) {
                // A last partial chunk reads weights past seg (the row's zero
                // padding, or the next tap's weights) against A = 0.
                float b[TN][KC];
                [[unroll]] for (uint j = 0; j < TN; j++) {
                    vec4 lo, hi;
                    w_vec8(wr[j] + wk + k0, lo, hi);
                    b[j] = float[KC](lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
                }
                MAC8(b)
            } else {
                // Unaligned rows and block types: element by element, the
                // chunk loop rolled to keep the shader small.
                for (uint c = 0u; c < KC && k0 + c < seg; c++) {
                    float bw[TN];
                    [[unroll]] for (uint j = 0; j < TN; j++) bw[j] = w_el(wr[j], wk + k0 + c);
                    [[unroll]] for (uint i = 0; i < TM; i++) {
                        const float a = bcast8(av[i], c);
                        [[unroll]] for (uint j = 0; j < TN; j++) acc[i][j] += a * bw[j];
                    }
                }
            }
        }
    }
    [[unroll]] for (uint i = 0; i < TM; i++)
        [[unroll]] for (uint j = 0; j < TN; j++)
            if (row0 + i < pc.m && col0 + j < pc.n) store_out(row0 + i, col0 + j, acc[i][j]);
}
