#version 450
// gemm_tiled.comp — GEMM / implicit-GEMM conv for GPUs: a workgroup
// computes a BM×BN tile of Y; per K-slab of BK it loads the A and W tiles
// into shared memory (k-major, rows padded by one float so the stores of
// consecutive k do not hit one bank), then each invocation accumulates a
// TM×TN register block in f32: rows tr + i·BM/TM and columns tc + j·BN/TN
// of the tile, so neighbouring invocations read neighbouring shared words
// (no bank conflicts) and store neighbouring columns of Y. Dense weights
// enter the tile eight k at a time as one 16-byte load (gemm_vec.glsl)
// while the row starts are aligned; the last partial slab, unaligned views
// and block types load element by element. WG = (BM/TM)·(BN/TN)
// invocations. Grid: x over BN column tiles, y over BM row tiles.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "gemm_common.glsl"
#include "gemm_vec.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16; // a multiple of 8
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;

shared float As[BK * (BM + 1)];
shared float Bs[BK * (BN + 1)];

void main() {
    const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    const uint tile_m = gl_WorkGroupID.y * BM, tile_n = gl_WorkGroupID.x * BN;
    const uint tc = lid % (BN / TN), tr = lid / (BN / TN);
    const uint am = BM + 1u, bn = BN + 1u;
    const bool vec_w = w_vec_ok(pc.w_base);
    float acc[TM][TN];
    [[unroll]] for (uint i = 0; i < TM; i++)
        [[unroll]] for (uint j = 0; j < TN; j++) acc[i][j] = 0.0;

    for (uint k0 = 0; k0 < pc.k; k0 += BK) {
        // Consecutive invocations read consecutive k of one row.
        for (uint e = lid; e < BM * BK; e += wg) {
            uint r = e / BK, kk = e % BK;
            As[kk * am + r] = a_at(tile_m + r, k0 + kk);
        }
        if (vec_w && k0 + BK <= pc.k) {
            // One invocation per eight k of a W row; columns past n load
            // the last row (never stored).
            for (uint e = lid; e < BN * (BK / 8u); e += wg) {
                uint c = e / (BK / 8u), kq = (e % (BK / 8u)) * 8u;
                vec4 lo, hi;
                w_vec8(pc.w_base + min(tile_n + c, pc.n - 1u) * pc.ldw + k0 + kq, lo, hi);
                [[unroll]] for (uint q = 0; q < 4u; q++) {
                    Bs[(kq + q) * bn + c] = lo[q];
                    Bs[(kq + 4u + q) * bn + c] = hi[q];
                }
            }
        } else {
            for (uint e = lid; e < BN * BK; e += wg) {
                uint c = e / BK, kk = e % BK;
                uint col = tile_n + c, kidx = k0 + kk;
                Bs[kk * bn + c] = (col < pc.n && kidx < pc.k) ? w_el(pc.w_base + col * pc.ldw, kidx) : 0.0;
            }
        }
        barrier();
        for (uint kk = 0; kk < BK; kk++) {
            float a[TM], b[TN];
            [[unroll]] for (uint i = 0; i < TM; i++) a[i] = As[kk * am + tr + i * (BM / TM)];
            [[unroll]] for (uint j = 0; j < TN; j++) b[j] = Bs[kk * bn + tc + j * (BN / TN)];
            [[unroll]] for (uint i = 0; i < TM; i++)
                [[unroll]] for (uint j = 0; j < TN; j++) acc[i][j] += a[i] * b[j];
        }
        barrier();
    }
    [[unroll]] for (uint i = 0; i < TM; i++)
        [[unroll]] for (uint j = 0; j < TN; j++) {
            uint row = tile_m + tr + i * (BM / TM), col = tile_n + tc + j * (BN / TN);
            if (row < pc.m && col < pc.n) store_out(row, col, acc[i][j]);
        }
}
