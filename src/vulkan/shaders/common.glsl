// common.glsl — helpers shared by the compute shaders: 16-bit float
// unpacking from packed uint pairs and workgroup reductions built on
// subgroup arithmetic (per-subgroup partials in shared memory, then every
// invocation adds the partials in the same order, so all see one value).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#define NEG_INF uintBitsToFloat(0xff800000u)

// bf16 halves of a word: element 2i in the low half, 2i+1 in the high half.
float bf16_lo(uint w) { return uintBitsToFloat(w << 16); }
float bf16_hi(uint w) { return uintBitsToFloat(w & 0xffff0000u); }

// Workgroups of up to 256 invocations with subgroups of at least 4.
shared float wg_red[64];

float wg_sum(float v) {
    v = subgroupAdd(v);
    if (subgroupElect()) wg_red[gl_SubgroupID] = v;
    barrier();
    float t = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; i++) t += wg_red[i];
    barrier();
    return t;
}

float wg_max(float v) {
    v = subgroupMax(v);
    if (subgroupElect()) wg_red[gl_SubgroupID] = v;
    barrier();
    float t = wg_red[0];
    for (uint i = 1; i < gl_NumSubgroups; i++) t = max(t, wg_red[i]);
    barrier();
    return t;
}
