#version 450
// gemm_tiled.comp — GEMM / implicit-GEMM conv for GPUs: a workgroup
// computes a BM×BN tile of Y; per K-slab of BK it loads the A and W tiles
// into shared memory (k-major, so the inner loop reads contiguous rows),
// then each invocation accumulates a TM×TN register block in f32.
// WG = (BM/TM)·(BN/TN) invocations. Grid: x over BN column tiles, y over BM
// row tiles.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "gemm_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;

shared float As[BK * BM];
shared float Bs[BK * BN];

void main() {
    const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    const uint tile_m = gl_WorkGroupID.y * BM, tile_n = gl_WorkGroupID.x * BN;
    const uint tc = lid % (BN / TN), tr = lid / (BN / TN);
    float acc[TM][TN];
    for (uint i = 0; i < TM; i++)
        for (uint j = 0; j < TN; j++) acc[i][j] = 0.0;

    for (uint k0 = 0; k0 < pc.k; k0 += BK) {
        // Consecutive invocations read consecutive k of one row.
        for (uint e = lid; e < BM * BK; e += wg) {
            uint r = e / BK, kk = e % BK;
            As[kk * BM + r] = a_at(tile_m + r, k0 + kk);
        }
        for (uint e = lid; e < BN * BK; e += wg) {
            uint c = e / BK, kk = e % BK;
            uint col = tile_n + c, kidx = k0 + kk;
            Bs[kk * BN + c] = (col < pc.n && kidx < pc.k) ? w_el(pc.w_base + col * pc.ldw, kidx) : 0.0;
        }
        barrier();
        for (uint kk = 0; kk < BK; kk++) {
            float a[TM], b[TN];
            for (uint i = 0; i < TM; i++) a[i] = As[kk * BM + tr * TM + i];
            for (uint j = 0; j < TN; j++) b[j] = Bs[kk * BN + tc * TN + j];
            for (uint i = 0; i < TM; i++)
                for (uint j = 0; j < TN; j++) acc[i][j] += a[i] * b[j];
        }
        barrier();
    }
    for (uint i = 0; i < TM; i++)
        for (uint j = 0; j < TN; j++) {
            uint row = tile_m + tr * TM + i, col = tile_n + tc * TN + j;
            if (row < pc.m && col < pc.n) store_out(row, col, acc[i][j]);
        }
}
