#version 450
// softmax.comp — softmax of every row in place (max-subtracted, f32); one
// workgroup per row, subgroup max and sum.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(std430, binding = 0) buffer BufX { float X[]; };

layout(push_constant) uniform Push {
    uint cols, x_base, ldx;
} pc;

void main() {
    const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, row = gl_WorkGroupID.x;
    const uint xb = pc.x_base + row * pc.ldx;
    float mx = NEG_INF;
    for (uint c = lid; c < pc.cols; c += wg) mx = max(mx, X[xb + c]);
    mx = wg_max(mx);
    float s = 0.0;
    for (uint c = lid; c < pc.cols; c += wg) {
        float e = exp(X[xb + c] - mx);
        X[xb + c] = e;
        s += e;
    }
    const float inv = 1.0 / wg_sum(s);
    for (uint c = lid; c < pc.cols; c += wg) X[xb + c] *= inv;
}
