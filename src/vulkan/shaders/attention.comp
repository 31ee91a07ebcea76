#version 450
// attention.comp — fused multi-head attention with an online softmax
// (flash style), never materialising the [sq, sk] scores:
//   O[i, h] = Σ_j softmax_j(scale · Q[i, h]·K[j, g]) V[j, g],  g = h / (hq/hkv)
// A workgroup owns BR query rows of one head (grid: x = row blocks, y = hq)
// and walks the keys in tiles of BC: the tile's K and V go to shared memory,
// each of the T invocations of a row computes scores of BC/T keys, then
// every invocation of the row rescales its DMAX/T output dims by
// 2^(m_old − m_new) and adds p·V. Scores are in the log2 domain (Q is
// pre-scaled by scale·log2 e, as the CPU kernels do). Hidden keys (past
// sk, key_mask 0, causal: j > i + causal_offset) get probability 0; causal
// blocks stop at the last key their last row sees. A row that sees no key
// writes zeros. f32 throughout.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BR = 8;     // query rows per workgroup
layout(constant_id = 2) const uint BC = 16;    // keys per tile
layout(constant_id = 3) const uint T = 8;      // invocations per query row (WG = BR·T)
layout(constant_id = 4) const uint DMAX = 128; // head-dim capacity, a multiple of T
const uint DPT = DMAX / T;

layout(std430, binding = 0) readonly buffer BufQ { float Q[]; };
layout(std430, binding = 1) readonly buffer BufK { float K[]; };
layout(std430, binding = 2) readonly buffer BufV { float V[]; };
layout(std430, binding = 3) buffer BufO { float O[]; };
layout(std430, binding = 4) readonly buffer BufMask { uint Mask[]; };

layout(push_constant) uniform Push {
    uint sq, sk, hq, hkv, d;
    uint q_base, ldq, k_base, ldk, v_base, ldv, o_base, ldo;
    float qscale;            // scale · log2(e)
    uint causal;
    int causal_offset;
    uint has_mask, mask_base; // mask: byte index of key 0 in the window
    uint row0;                // absolute index of this pass's first query row
} pc;

shared float Qs[BR * DMAX];
shared float Ks[BC * DMAX];
shared float Vs[BC * DMAX];
shared float S[BR * BC];

bool key_on(uint j) {
    if (pc.has_mask == 0u) return true;
    uint b = pc.mask_base + j;
    return ((Mask[b >> 2] >> ((b & 3u) * 8u)) & 0xffu) != 0u;
}

void main() {
    const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    const uint r = lid / T, t = lid % T;
    const uint h = gl_WorkGroupID.y, g = h / (pc.hq / pc.hkv);
    const uint i0 = gl_WorkGroupID.x * BR, d = pc.d;
    const uint qcol = h * d, kcol = g * d;

    for (uint e = lid; e < BR * d; e += wg) {
        uint rr = e / d, dd = e % d, i = i0 + rr;
        Qs[rr * DMAX + dd] = i < pc.sq ? Q[pc.q_base + i * pc.ldq + qcol + dd] * pc.qscale : 0.0;
    }
    float o[DPT];
    for (uint q = 0; q < DPT; q++) o[q] = 0.0;
    float m = NEG_INF, l = 0.0;

    const int last_row = int(min(i0 + BR, pc.sq)) - 1;
    int kend = int(pc.sk);
    if (pc.causal != 0u) kend = min(kend, int(pc.row0) + last_row + pc.causal_offset + 1);
    const int iabs = int(pc.row0 + i0 + r);

    for (int j0 = 0; j0 < kend; j0 += int(BC)) {
        barrier(); // the previous tile's readers are done
        for (uint e = lid; e < BC * d; e += wg) {
            uint c = e / d, dd = e % d, j = uint(j0) + c;
            bool in_range = j < pc.sk;
            Ks[c * DMAX + dd] = in_range ? K[pc.k_base + j * pc.ldk + kcol + dd] : 0.0;
            Vs[c * DMAX + dd] = in_range ? V[pc.v_base + j * pc.ldv + kcol + dd] : 0.0;
        }
        barrier();
        for (uint c = t; c < BC; c += T) {
            uint j = uint(j0) + c;
            bool vis = j < pc.sk && (pc.causal == 0u || int(j) <= iabs + pc.causal_offset) && key_on(j);
            float s = NEG_INF;
            if (vis) {
                s = 0.0;
                for (uint dd = 0; dd < d; dd++) s += Qs[r * DMAX + dd] * Ks[c * DMAX + dd];
            }
            S[r * BC + c] = s;
        }
        barrier();
        float mx = m;
        for (uint c = 0; c < BC; c++) mx = max(mx, S[r * BC + c]);
        if (mx != NEG_INF) {
            float alpha = m == NEG_INF ? 0.0 : exp2(m - mx);
            for (uint q = 0; q < DPT; q++) o[q] *= alpha;
            float psum = 0.0;
            for (uint c = 0; c < BC; c++) {
                float s = S[r * BC + c];
                float p = s == NEG_INF ? 0.0 : exp2(s - mx);
                psum += p;
                for (uint q = 0; q < DPT; q++) o[q] += p * Vs[c * DMAX + t + q * T];
            }
            l = l * alpha + psum;
            m = mx;
        }
    }
    const uint i = i0 + r;
    if (i < pc.sq) {
        float inv = l > 0.0 ? 1.0 / l : 0.0;
        for (uint q = 0; q < DPT; q++) {
            uint dd = t + q * T;
            if (dd < d) O[pc.o_base + i * pc.ldo + qcol + dd] = o[q] * inv;
        }
    }
}
