#version 450
// silu.comp — x = x·sigmoid(x) = x / (1 + e^−x) over n contiguous floats;
// a 2-D grid folds the element count past 65535 workgroups.
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) buffer BufX { float X[]; };

layout(push_constant) uniform Push {
    uint n, x_base;
} pc;

void main() {
    uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x +
             gl_LocalInvocationID.x;
    if (i >= pc.n) return;
    float v = X[pc.x_base + i];
    X[pc.x_base + i] = v / (1.0 + exp(-v));
}
