#version 450
// qk_norm_rope.comp — in place on one head of one row (grid: x = heads,
// y = rows of the pass): optional RMSNorm over head_dim with weight w, then
// rotation of `pairs` pairs with the cos/sin table row (interleaved pairs
// (2p, 2p+1), or half-split (p, p + pairs)). The sum of squares is complete
// (barrier inside wg_sum) before any invocation writes; afterwards each
// element is read and written by the one invocation that owns its pair.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(std430, binding = 0) buffer BufX { float X[]; };
layout(std430, binding = 1) readonly buffer BufW { float Wt[]; };
layout(std430, binding = 2) readonly buffer BufRope { float Rope[]; };

layout(push_constant) uniform Push {
    uint head_dim, x_base, ldx, has_norm, w_base;
    float eps;
    uint pairs;        // pairs rotated (0 = no rope)
    uint ppr;          // table row stride (rot_dim/2)
    uint interleaved;
    uint cos_base, sin_base;
    uint rope_rows;    // rows of this pass that have a table row
} pc;

float normed(uint base, uint e, float rr) {
    float v = X[base + e];
    return pc.has_norm != 0u ? (v * rr) * Wt[pc.w_base + e] : v;
}

void main() {
    const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    const uint row = gl_WorkGroupID.y, hd = pc.head_dim;
    const uint base = pc.x_base + row * pc.ldx + gl_WorkGroupID.x * hd;
    float rr = 1.0;
    if (pc.has_norm != 0u) {
        float ss = 0.0;
        for (uint e = lid; e < hd; e += wg) {
            float v = X[base + e];
            ss += v * v;
        }
        rr = inversesqrt(wg_sum(ss) / float(hd) + pc.eps);
    }
    const uint pairs = row < pc.rope_rows ? pc.pairs : 0u;
    for (uint p = lid; p < pairs; p += wg) {
        uint ia = pc.interleaved != 0u ? 2u * p : p;
        uint ib = pc.interleaved != 0u ? ia + 1u : p + pairs;
        float a = normed(base, ia, rr), b = normed(base, ib, rr);
        float c = Rope[pc.cos_base + row * pc.ppr + p], s = Rope[pc.sin_base + row * pc.ppr + p];
        X[base + ia] = a * c - b * s;
        X[base + ib] = b * c + a * s;
    }
    if (pc.has_norm != 0u)
        for (uint e = 2u * pairs + lid; e < hd; e += wg) X[base + e] = normed(base, e, rr);
}
