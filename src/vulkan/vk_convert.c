/*
 * vk_convert.c — fx_vk_convert: f32 ↔ bf16 / f16 between device buffers,
 * bit-identical to src/base/float16.h (integer arithmetic in convert.comp),
 * in passes that keep both windows within one binding.
 */
#include "vk_internal.h"

#define GRID_MAX 65535

typedef struct convert_push {
    uint32_t n, src_base, dst_base, mode;
} convert_push;

static uint64_t esize(fx_dtype t) { return t == FX_DTYPE_F32 ? 4 : 2; }

flux_status fx_vk_convert(fx_vk *vk, int64_t n, fx_vk_buf *src, int64_t src_off, fx_dtype src_type, fx_vk_buf *dst,
                          int64_t dst_off, fx_dtype dst_type, fx_err *err) {
    TRY(vk_check_alive(vk, err));
    uint32_t mode;
    if (src_type == FX_DTYPE_BF16 && dst_type == FX_DTYPE_F32) mode = 0;
    else if (src_type == FX_DTYPE_F32 && dst_type == FX_DTYPE_BF16) mode = 1;
    else if (src_type == FX_DTYPE_F16 && dst_type == FX_DTYPE_F32) mode = 2;
    else if (src_type == FX_DTYPE_F32 && dst_type == FX_DTYPE_F16) mode = 3;
    else
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan convert: %s to %s is not a conversion",
                       fx_dtype_name(src_type), fx_dtype_name(dst_type));
    if (n < 0 || src_off < 0 || dst_off < 0 || !src || !dst)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan convert: invalid arguments");
    if (n == 0) return FLUX_OK;
    if ((esize(src_type) == 2 && src_off % 2) || (esize(dst_type) == 2 && dst_off % 2))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan convert: 16-bit offsets must be even");
    if ((uint64_t)(src_off + n) * esize(src_type) > fx_vk_buf_bytes(src) ||
        (uint64_t)(dst_off + n) * esize(dst_type) > fx_vk_buf_bytes(dst))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan convert: %lld elements exceed a buffer", (long long)n);
    const uint32_t wg = vk_cpu_tuned(vk) ? 64 : 256, spec[1] = {wg};
    const vk_pipeline *p;
    TRY(vk_pipeline_get(vk, VK_SH_convert, 2, sizeof(convert_push), spec, 1, &p, err));
    /* Elements per pass: an even count whose f32 side fits one binding. */
    int64_t per = vk_rows_per_window(vk, 4, 4) & ~(int64_t)1;
    const int64_t grid = (int64_t)GRID_MAX * GRID_MAX * wg;
    if (per > grid) per = grid;
    for (int64_t i0 = 0; i0 < n; i0 += per) {
        const int64_t len = n - i0 < per ? n - i0 : per;
        convert_push pc = {(uint32_t)len, 0, 0, mode};
        vk_bind b[2];
        uint32_t sw, dw;
        const uint64_t ss = esize(src_type), ds = esize(dst_type);
        TRY(vk_window(vk, src, (uint64_t)(src_off + i0) * ss, (uint64_t)(src_off + i0 + len) * ss, 0, &b[0], &sw,
                      err));
        TRY(vk_window(vk, dst, (uint64_t)(dst_off + i0) * ds, (uint64_t)(dst_off + i0 + len) * ds, 1, &b[1], &dw,
                      err));
        pc.src_base = (uint32_t)(sw * 4 / ss);
        pc.dst_base = (uint32_t)(dw * 4 / ds);
        const int64_t items = mode == 0 || mode == 2 ? len : (len + 1) / 2;
        const int64_t groups = (items + wg - 1) / wg;
        const uint32_t gx = (uint32_t)(groups < GRID_MAX ? groups : GRID_MAX);
        TRY(vk_dispatch(vk, p, b, &pc, gx, (uint32_t)((groups + gx - 1) / gx), 1, err));
    }
    return FLUX_OK;
}
