#version 450
// gated_add.comp — y[r, c] += gate[c] · x[r, c] (no gate: plain add);
// grid: x over columns, y = rows of the pass.
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) buffer BufY { float Y[]; };
layout(std430, binding = 1) readonly buffer BufGate { float Gate[]; };
layout(std430, binding = 2) readonly buffer BufX { float X[]; };

layout(push_constant) uniform Push {
    uint cols, y_base, ldy, gate_base, has_gate, x_base, ldx;
} pc;

void main() {
    uint c = gl_GlobalInvocationID.x, r = gl_WorkGroupID.y;
    if (c >= pc.cols) return;
    float v = X[pc.x_base + r * pc.ldx + c];
    if (pc.has_gate != 0u) v = Gate[pc.gate_base + c] * v;
    Y[pc.y_base + r * pc.ldy + c] += v;
}
