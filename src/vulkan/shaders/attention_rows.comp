#version 450
// attention_rows.comp — fused multi-head attention with an online softmax
// for CPU drivers (the math of attention.comp, a different data flow):
//   O[i, h] = Σ_j softmax_j(scale · Q[i, h]·K[j, g]) V[j, g],  g = h / (hq/hkv)
// Each invocation owns RQ query rows of one head (grid: x = blocks of WG·RQ
// rows, y = hq) with their scaled q and outputs in registers; no shared
// memory, no barriers. lavapipe (Mesa 22.3) loads each storage-buffer
// component with a loop over the lanes (~100 cycles), so the key and value
// rows, the same for every lane, are loaded once per subgroup: lane l loads
// dims d0 + (l mod 8) of the row and subgroupBroadcast hands the eight values
// to all lanes (register extracts). Keys go one at a time: score, new max,
// the output rescaled by 2^(m_old − m_new) as p·V is added.
// Scores are in the log2 domain (Q pre-scaled by scale·log2 e); hidden keys
// (past sk, key_mask 0, causal: j > i + causal_offset) get probability 0; a
// row that sees no key writes zeros. f32 throughout. Needs subgroups of at
// least 8, all lanes active (rows past sq compute and do not store).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_ballot : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
// DMAX: head-dim capacity (32, 64 or 128), a compile-time constant so that
// glslc unrolls the loops over the head dim: q and o stay in registers
// (drivers leave long loops with specialization-constant bounds rolled, and
// the arrays then live in memory, ~10× slower on lavapipe).
#ifndef DMAX
#define DMAX 128
#endif
const uint DC = DMAX / 8u;                     // dim chunks of eight

layout(std430, binding = 0) readonly buffer BufQ { float Q[]; };
layout(std430, binding = 1) readonly buffer BufK { float K[]; };
layout(std430, binding = 2) readonly buffer BufV { float V[]; };
layout(std430, binding = 3) buffer BufO { float O[]; };
layout(std430, binding = 4) readonly buffer BufMask { uint Mask[]; };

layout(push_constant) uniform Push {
    uint sq, sk, hq, hkv, d;
    uint q_base, ldq, k_base, ldk, v_base, ldv, o_base, ldo;
    float qscale;
    uint causal;
    int causal_offset;
    uint has_mask, mask_base;
    uint row0;
} pc;

// RQ: query rows per invocation (each K/V value loaded serves RQ rows).
#ifndef RQ
#define RQ 1
#endif

float q[RQ][DMAX], o[RQ][DMAX];

// Eight broadcasts of x (lane u's value, u a literal: a register extract),
// each used for the RQ rows.
#define BCAST8(x, body) body(0, x) body(1, x) body(2, x) body(3, x) body(4, x) body(5, x) body(6, x) body(7, x)
#define QK(u, x)                                                                 \
    {                                                                            \
        const float b = subgroupBroadcast(x, u);                                 \
        [[unroll]] for (uint r = 0; r < RQ; r++) t[r] += q[r][dc * 8u + u] * b; \
    }
#define PV(u, x)                                                                                      \
    {                                                                                                 \
        const float b = subgroupBroadcast(x, u);                                                      \
        [[unroll]] for (uint r = 0; r < RQ; r++) o[r][dc * 8u + u] = o[r][dc * 8u + u] * alpha[r] + p[r] * b; \
    }

bool key_on(uint j) {
    if (pc.has_mask == 0u) return true;
    uint b = pc.mask_base + j;
    return ((Mask[b >> 2] >> ((b & 3u) * 8u)) & 0xffu) != 0u;
}

void main() {
    const uint lk = gl_SubgroupInvocationID % 8u;
    const uint h = gl_WorkGroupID.y, g = h / (pc.hq / pc.hkv), d = pc.d;
    const uint qcol = h * d, kcol = g * d;
    // Rows i0 + RQ·lid + r of this workgroup's RQ·WG.
    const uint i0 = gl_WorkGroupID.x * gl_WorkGroupSize.x * RQ;
    const uint ib = i0 + gl_LocalInvocationID.x * RQ;
    [[unroll]] for (uint r = 0; r < RQ; r++) {
        const uint ic = min(ib + r, pc.sq - 1u);
        [[unroll]] for (uint dc = 0; dc < DC; dc++)
            [[unroll]] for (uint u = 0; u < 8u; u++) {
                const uint e = dc * 8u + u;
                q[r][e] = e < d ? Q[pc.q_base + ic * pc.ldq + qcol + e] * pc.qscale : 0.0;
                o[r][e] = 0.0;
            }
    }
    float m[RQ], l[RQ];
    [[unroll]] for (uint r = 0; r < RQ; r++) m[r] = NEG_INF, l[r] = 0.0;
    const int last_row = int(min(i0 + gl_WorkGroupSize.x * RQ, pc.sq)) - 1;
    int kend = int(pc.sk);
    if (pc.causal != 0u) kend = min(kend, int(pc.row0) + last_row + pc.causal_offset + 1);
    const int iabs = int(pc.row0 + ib);

    for (uint j = 0u; j < uint(kend); j++) {
        const uint kr = pc.k_base + j * pc.ldk + kcol, vr = pc.v_base + j * pc.ldv + kcol;
        float t[RQ];
        [[unroll]] for (uint r = 0; r < RQ; r++) t[r] = 0.0;
        [[unroll]] for (uint dc = 0; dc < DC; dc++) {
            const uint e = dc * 8u + lk;
            const float kv = e < d ? K[kr + e] : 0.0;
            BCAST8(kv, QK)
        }
        const bool on = key_on(j);
        // One key at a time: the rescale is d multiplies, cheap beside the
        // loads on the devices this shader is for.
        float alpha[RQ], p[RQ];
        [[unroll]] for (uint r = 0; r < RQ; r++) {
            const bool vis = on && (pc.causal == 0u || int(j) <= iabs + int(r) + pc.causal_offset);
            const float s = vis ? t[r] : NEG_INF, mx = max(m[r], s);
            alpha[r] = 1.0, p[r] = 0.0;
            if (mx != NEG_INF) {
                alpha[r] = m[r] == NEG_INF ? 0.0 : exp2(m[r] - mx);
                p[r] = s == NEG_INF ? 0.0 : exp2(s - mx);
                l[r] = l[r] * alpha[r] + p[r];
                m[r] = mx;
            }
        }
        [[unroll]] for (uint dc = 0; dc < DC; dc++) {
            const uint e = dc * 8u + lk;
            const float vv = e < d ? V[vr + e] : 0.0;
            BCAST8(vv, PV)
        }
    }
    [[unroll]] for (uint r = 0; r < RQ; r++) {
        const uint i = ib + r;
        if (i < pc.sq) {
            const float inv = l[r] > 0.0 ? 1.0 / l[r] : 0.0;
            for (uint e = 0; e < d; e++) O[pc.o_base + i * pc.ldo + qcol + e] = o[r][e] * inv;
        }
    }
}
