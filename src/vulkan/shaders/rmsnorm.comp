#version 450
// rmsnorm.comp — y = x / sqrt(mean(x²) + eps) ⊙ w per row; one workgroup
// per row (grid x = rows of the pass), subgroup + shared-memory sum.
// y may be x (each element is read and written by one invocation).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer BufX { float X[]; };
layout(std430, binding = 1) buffer BufY { float Y[]; };
layout(std430, binding = 2) readonly buffer BufW { float Wt[]; };

layout(push_constant) uniform Push {
    uint cols, x_base, ldx, y_base, ldy, w_base, has_w;
    float eps;
} pc;

void main() {
    const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, row = gl_WorkGroupID.x;
    const uint xb = pc.x_base + row * pc.ldx, yb = pc.y_base + row * pc.ldy;
    float ss = 0.0;
    for (uint c = lid; c < pc.cols; c += wg) {
        float v = X[xb + c];
        ss += v * v;
    }
    ss = wg_sum(ss);
    float rr = inversesqrt(ss / float(pc.cols) + pc.eps);
    for (uint c = lid; c < pc.cols; c += wg) {
        float t = X[xb + c] * rr;
        Y[yb + c] = pc.has_w != 0u ? t * Wt[pc.w_base + c] : t;
    }
}
