#version 450
// groupnorm_finish.comp — second pass: one workgroup per group merges the
// chunk partials (mean_c, M2_c, n_c) by the law of total variance,
//   mean = Σ n_c·mean_c / N,  var = Σ (M2_c + n_c·(mean_c − mean)²) / N,
// whose terms are all non-negative, and writes stats[g] = mean,
// stats[groups + g] = 1/sqrt(var + eps).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer BufPart { float Part[]; };
layout(std430, binding = 1) buffer BufStats { float Stats[]; };

layout(push_constant) uniform Push {
    uint nchunks, chunk, pixels, cpg, groups, part_base, stats_base;
    float eps;
} pc;

float chunk_count(uint c) { return float(min(pc.chunk, pc.pixels - c * pc.chunk) * pc.cpg); }

void main() {
    const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, g = gl_WorkGroupID.x;
    const float N = float(pc.pixels) * float(pc.cpg);
    float sw = 0.0;
    for (uint c = lid; c < pc.nchunks; c += wg)
        sw += chunk_count(c) * Part[pc.part_base + (c * pc.groups + g) * 2u];
    const float mean = wg_sum(sw) / N;
    float sm = 0.0;
    for (uint c = lid; c < pc.nchunks; c += wg) {
        uint o = pc.part_base + (c * pc.groups + g) * 2u;
        float dm = Part[o] - mean;
        sm += Part[o + 1u] + chunk_count(c) * dm * dm;
    }
    const float var = wg_sum(sm) / N;
    if (lid == 0u) {
        Stats[pc.stats_base + g] = mean;
        Stats[pc.stats_base + pc.groups + g] = inversesqrt(var + pc.eps);
    }
}
