#version 450
// gemm_reg.comp — GEMM / implicit-GEMM conv with register blocking and no
// shared memory: each invocation computes a TM×TN block of Y from four-wide
// loads of A rows and W rows. No barriers, so it suits CPU drivers
// (lavapipe, where barriers are costly) and is the portable fallback.
// Grid: x over column blocks (TN), y over row blocks (TM).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "gemm_common.glsl"

layout(local_size_x_id = 0, local_size_y_id = 1) in;
layout(constant_id = 2) const uint TM = 4;
layout(constant_id = 3) const uint TN = 4;

void main() {
    uint col0 = gl_GlobalInvocationID.x * TN, row0 = gl_GlobalInvocationID.y * TM;
    if (col0 >= pc.n || row0 >= pc.m) return;
    float acc[TM][TN];
    for (uint i = 0; i < TM; i++)
        for (uint j = 0; j < TN; j++) acc[i][j] = 0.0;
    uint wr[TN];
    for (uint j = 0; j < TN; j++) wr[j] = pc.w_base + min(col0 + j, pc.n - 1) * pc.ldw;

#if CONV
    const uint taps = pc.kh * pc.kw, seg = pc.cin;
#else
    const uint taps = 1u, seg = pc.k;
#endif
    const uint seg4 = seg & ~3u;
    for (uint tap = 0; tap < taps; tap++) {
        // Row starts in X for this tap; rows past m repeat the last row and
        // padding taps read nothing (valid = 0).
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
        for (uint kk = 0; kk < seg4; kk += 4) {
            vec4 a[TM];
            for (uint i = 0; i < TM; i++)
                a[i] = valid[i] ? vec4(X[xr[i] + kk], X[xr[i] + kk + 1], X[xr[i] + kk + 2], X[xr[i] + kk + 3])
                                : vec4(0.0);
            for (uint j = 0; j < TN; j++) {
                vec4 b = w4_at(wr[j] + wk + kk);
                for (uint i = 0; i < TM; i++) acc[i][j] += dot(a[i], b);
            }
        }
        for (uint kk = seg4; kk < seg; kk++) {
            float a[TM];
            for (uint i = 0; i < TM; i++) a[i] = valid[i] ? X[xr[i] + kk] : 0.0;
            for (uint j = 0; j < TN; j++) {
                float b = w_at(wr[j] + wk + kk);
                for (uint i = 0; i < TM; i++) acc[i][j] += a[i] * b;
            }
        }
    }
    for (uint i = 0; i < TM; i++)
        for (uint j = 0; j < TN; j++)
            if (row0 + i < pc.m && col0 + j < pc.n) store_out(row0 + i, col0 + j, acc[i][j]);
}
