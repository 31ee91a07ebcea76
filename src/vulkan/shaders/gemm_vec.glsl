// gemm_vec.glsl — eight consecutive dense weights as one 16-byte load
// (after gemm_common.glsl): the weight binding seen as vec4 (f32) or
// uvec4 (four bf16/f16 pairs); fp8 as one 8-byte uvec2. Valid when the
// element index is a multiple of 8 and the row starts are too (the device
// layout pads rows to 8 elements, fp8 rows to 16; w_vec_ok checks the
// window's base and stride).
#if WTYPE <= 2
#if WTYPE == 0
layout(std430, binding = 1) readonly buffer BufW4 { vec4 W4[]; };
#else
layout(std430, binding = 1) readonly buffer BufW4 { uvec4 W4[]; };
#endif

bool w_vec_ok(uint first) { return first % 8u == 0u && pc.ldw % 8u == 0u; }

// Weights idx .. idx + 7 (idx a multiple of 8) as two vec4.
void w_vec8(uint idx, out vec4 lo, out vec4 hi) {
#if WTYPE == 0
    lo = W4[idx / 4u];
    hi = W4[idx / 4u + 1u];
#else
    uvec4 q = W4[idx / 8u];
#if WTYPE == 1
    lo = vec4(bf16_lo(q.x), bf16_hi(q.x), bf16_lo(q.y), bf16_hi(q.y));
    hi = vec4(bf16_lo(q.z), bf16_hi(q.z), bf16_lo(q.w), bf16_hi(q.w));
#else
    lo = vec4(unpackHalf2x16(q.x), unpackHalf2x16(q.y));
    hi = vec4(unpackHalf2x16(q.z), unpackHalf2x16(q.w));
#endif
#endif
}
#elif W_FP8
// fp8: eight bytes (two words) per load; rows padded to 16 bytes.
layout(std430, binding = 1) readonly buffer BufW2 { uvec2 W2[]; };

bool w_vec_ok(uint first) { return first % 8u == 0u && pc.ldw % 8u == 0u; }

void w_vec8(uint idx, out vec4 lo, out vec4 hi) {
    uvec2 q = W2[idx / 8u];
    lo = vec4(fp8_value(q.x & 0xFFu), fp8_value((q.x >> 8) & 0xFFu), fp8_value((q.x >> 16) & 0xFFu),
              fp8_value(q.x >> 24));
    hi = vec4(fp8_value(q.y & 0xFFu), fp8_value((q.y >> 8) & 0xFFu), fp8_value((q.y >> 16) & 0xFFu),
              fp8_value(q.y >> 24));
}
#else
bool w_vec_ok(uint first) { return false; } // block rows: element by element
void w_vec8(uint idx, out vec4 lo, out vec4 hi) { lo = hi = vec4(0.0); }
#endif
