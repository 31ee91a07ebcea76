#version 450
// layernorm_modulate.comp — y = LN(x)·(1 + scale) + shift per row (LN
// without affine, biased variance, mean first then the centred sum of
// squares); one workgroup per row. y may be x.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer BufX { float X[]; };
layout(std430, binding = 1) buffer BufY { float Y[]; };
layout(std430, binding = 2) readonly buffer BufShift { float Shift[]; };
layout(std430, binding = 3) readonly buffer BufScale { float Scale[]; };

layout(push_constant) uniform Push {
    uint cols, x_base, ldx, y_base, ldy, shift_base, scale_base;
    float eps;
} pc;

void main() {
    const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, row = gl_WorkGroupID.x;
    const uint xb = pc.x_base + row * pc.ldx, yb = pc.y_base + row * pc.ldy;
    const float n = float(pc.cols);
    float s = 0.0;
    for (uint c = lid; c < pc.cols; c += wg) s += X[xb + c];
    const float mean = wg_sum(s) / n;
    float v = 0.0;
    for (uint c = lid; c < pc.cols; c += wg) {
        float dlt = X[xb + c] - mean;
        v += dlt * dlt;
    }
    const float rr = inversesqrt(wg_sum(v) / n + pc.eps);
    for (uint c = lid; c < pc.cols; c += wg) {
        float t = (X[xb + c] - mean) * rr;
        Y[yb + c] = t * (1.0 + Scale[pc.scale_base + c]) + Shift[pc.shift_base + c];
    }
}
