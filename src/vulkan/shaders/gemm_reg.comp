#version 450
// gemm_reg.comp — GEMM / implicit-GEMM conv with register blocking, no
// shared memory and no barriers (CPU drivers such as lavapipe, where
// barriers are costly, and the portable fallback).
//
// Each subgroup computes one TM×TN block of Y; its lanes split the
// reduction (lane l takes k = l, l + S, ... with S the subgroup size), so the
// lanes of a load read consecutive addresses of a row of A and of W (vector
// loads on SIMD CPUs, coalesced on GPUs). Each lane keeps TM×TN partial sums;
// subgroupAdd combines them at the end. Blocks are walked grid-stride, so
// the result does not depend on the subgroup size the driver picks.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "gemm_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TM = 4;
layout(constant_id = 2) const uint TN = 4;

void main() {
    const uint lane = gl_SubgroupInvocationID, S = gl_SubgroupSize;
    const uint blocks_n = (pc.n + TN - 1) / TN, blocks = ((pc.m + TM - 1) / TM) * blocks_n;
#if CONV
    const uint taps = pc.kh * pc.kw, seg = pc.cin;
#else
    const uint taps = 1u, seg = pc.k;
#endif
    for (uint blk = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; blk < blocks;
         blk += gl_NumWorkGroups.x * gl_NumSubgroups) {
        const uint row0 = (blk / blocks_n) * TM, col0 = (blk % blocks_n) * TN;
        float acc[TM][TN];
        for (uint i = 0; i < TM; i++)
            for (uint j = 0; j < TN; j++) acc[i][j] = 0.0;
        uint wr[TN];
        for (uint j = 0; j < TN; j++) wr[j] = pc.w_base + min(col0 + j, pc.n - 1) * pc.ldw;
        for (uint tap = 0; tap < taps; tap++) {
            // Row starts in X for this tap; rows past m repeat the last row,
            // taps that read padding contribute nothing.
            uint xr[TM];
            bool valid[TM];
            for (uint i = 0; i < TM; i++) {
                uint r = min(row0 + i, pc.m - 1);
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
#if WTYPE == 1 || WTYPE == 2
            // 16-bit weights: each lane takes whole words (k pairs) when the
            // segment starts on a word (rows start even; taps of an even cin).
            if (taps == 1u || (seg & 1u) == 0u) {
                for (uint kw = lane; 2u * kw < seg; kw += S) {
                    const uint kk = 2u * kw;
                    const bool two = kk + 1u < seg;
                    vec2 a[TM];
                    for (uint i = 0; i < TM; i++)
                        a[i] = valid[i] ? vec2(X[xr[i] + kk], two ? X[xr[i] + kk + 1u] : 0.0) : vec2(0.0);
                    for (uint j = 0; j < TN; j++) {
                        uint wd = W[(wr[j] + wk + kk) >> 1];
#if WTYPE == 1
                        vec2 b = vec2(bf16_lo(wd), bf16_hi(wd));
#else
                        vec2 b = unpackHalf2x16(wd);
#endif
                        for (uint i = 0; i < TM; i++) acc[i][j] += dot(a[i], b);
                    }
                }
                continue;
            }
#endif
            for (uint kk = lane; kk < seg; kk += S) {
                float a[TM];
                for (uint i = 0; i < TM; i++) a[i] = valid[i] ? X[xr[i] + kk] : 0.0;
                for (uint j = 0; j < TN; j++) {
                    float b = w_el(wr[j], wk + kk);
                    for (uint i = 0; i < TM; i++) acc[i][j] += a[i] * b;
                }
            }
        }
        for (uint i = 0; i < TM; i++)
            for (uint j = 0; j < TN; j++) {
                float t = subgroupAdd(acc[i][j]);
                if (lane == 0u && row0 + i < pc.m && col0 + j < pc.n) store_out(row0 + i, col0 + j, t);
            }
    }
}
