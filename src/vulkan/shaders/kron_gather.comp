#version 450
// kron_gather.comp — the reorderings of a Kronecker (LoKr) adapter term,
// per token t (grid y) and element j < cols (grid x), o = skip + j:
//   v = Src[src_base + t·src_ld + (o mod p)·q + o / p]
//   mode 0: Dst[dst_base + t·ldd + j] = v
//   mode 2: Dst[...] += (gate_scale·Gate[gate_base + j])·v  (as fx_linear's terms)
// With p = m1, q = k2 it turns Z [m1, k2] into Zᵀ; with p = k2, q = l it
// reads (W1·Z)ᵀ [k2, l] in the flattened row order i1·k2 + i2 of W1 ⊗ W2.
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer BufSrc { float Src[]; };
layout(std430, binding = 1) buffer BufDst { float Dst[]; };
layout(std430, binding = 2) readonly buffer BufGate { float Gate[]; };

layout(push_constant) uniform Push {
    uint cols, src_base, src_ld, dst_base, ldd, skip, p, q, mode, gate_base;
    float gate_scale;
} pc;

void main() {
    uint j = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
    if (j >= pc.cols) return;
    uint o = pc.skip + j;
    float v = Src[pc.src_base + t * pc.src_ld + (o % pc.p) * pc.q + o / pc.p];
    uint d = pc.dst_base + t * pc.ldd + j;
    if (pc.mode == 0u) {
        Dst[d] = v;
    } else {
        precise float g = pc.gate_scale * Gate[pc.gate_base + j];
        precise float y = Dst[d] + g * v;
        Dst[d] = y;
    }
}
