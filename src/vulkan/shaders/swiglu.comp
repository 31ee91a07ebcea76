#version 450
// swiglu.comp — out[r, c] = silu(gate[r, c]) · up[r, c] (grid: x over
// columns, y = rows of the pass). out may be gate.
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer BufG { float G[]; };
layout(std430, binding = 1) readonly buffer BufU { float U[]; };
layout(std430, binding = 2) buffer BufO { float O[]; };

layout(push_constant) uniform Push {
    uint cols, g_base, ldg, u_base, ldu, o_base, ldo;
} pc;

void main() {
    uint c = gl_GlobalInvocationID.x, r = gl_WorkGroupID.y;
    if (c >= pc.cols) return;
    float g = G[pc.g_base + r * pc.ldg + c];
    O[pc.o_base + r * pc.ldo + c] = g / (1.0 + exp(-g)) * U[pc.u_base + r * pc.ldu + c];
}
