#version 450
// groupnorm_partial.comp — first pass of GroupNorm statistics over
// channels-last x [pixels, channels] (grid: x = pixel chunks of the pass,
// y = groups). Each workgroup reduces one chunk of one group (chunk·cpg
// values) to its mean and centred sum of squares M2, summing x − K with K
// the chunk's first value of the group (shifted sums: no cancellation from
// a large mean). Writes part[(chunk0 + chunk)·groups + g)·2 + {0, 1}] =
// (mean, M2) (chunk0: the pass's first chunk inside the partials window).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer BufX { float X[]; };
layout(std430, binding = 1) buffer BufPart { float Part[]; };

layout(push_constant) uniform Push {
    uint channels, cpg, groups, chunk, pixels, x_base, part_base, chunk0;
} pc;

void main() {
    const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    const uint ck = gl_WorkGroupID.x, g = gl_WorkGroupID.y;
    const uint p0 = ck * pc.chunk, np = min(pc.chunk, pc.pixels - p0), cnt = np * pc.cpg;
    const uint base = pc.x_base + p0 * pc.channels + g * pc.cpg;
    const float K = X[base];
    float s1 = 0.0, s2 = 0.0;
    for (uint e = lid; e < cnt; e += wg) {
        uint p = e / pc.cpg, c = e - p * pc.cpg;
        float v = X[base + p * pc.channels + c] - K;
        s1 += v;
        s2 += v * v;
    }
    s1 = wg_sum(s1);
    s2 = wg_sum(s2);
    if (lid == 0u) {
        float n = float(cnt);
        uint o = pc.part_base + ((pc.chunk0 + ck) * pc.groups + g) * 2u;
        Part[o] = K + s1 / n;
        Part[o + 1u] = max(s2 - s1 * (s1 / n), 0.0);
    }
}
