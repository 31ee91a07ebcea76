#version 450
// groupnorm_apply.comp — y = (x − mean_g)·(rstd_g·gamma[c]) + beta[c], then
// SiLU if asked, over n = pixels·channels values of the pass (2-D grid
// folding past 65535 workgroups). y may be x.
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer BufX { float X[]; };
layout(std430, binding = 1) buffer BufY { float Y[]; };
layout(std430, binding = 2) readonly buffer BufStats { float Stats[]; };
layout(std430, binding = 3) readonly buffer BufGamma { float Gamma[]; };
layout(std430, binding = 4) readonly buffer BufBeta { float Beta[]; };

layout(push_constant) uniform Push {
    uint n, channels, cpg, groups, x_base, y_base, stats_base, gamma_base, beta_base;
    uint has_gamma, has_beta, silu;
} pc;

void main() {
    uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x +
             gl_LocalInvocationID.x;
    if (i >= pc.n) return;
    uint c = i % pc.channels, g = c / pc.cpg;
    float a = Stats[pc.stats_base + pc.groups + g];
    if (pc.has_gamma != 0u) a *= Gamma[pc.gamma_base + c];
    float b = pc.has_beta != 0u ? Beta[pc.beta_base + c] : 0.0;
    float v = (X[pc.x_base + i] - Stats[pc.stats_base + g]) * a + b;
    Y[pc.y_base + i] = pc.silu != 0u ? v / (1.0 + exp(-v)) : v;
}
