/*
 * vk_kron.c — fx_vk_kron_gather: the two reorderings a Kronecker (LoKr)
 * adapter term needs between its GEMMs (kron_gather.comp), so the term runs
 * on the device as the CPU runs it (simd/gemm/delta.c apply_kron).
 */
#include "vk_internal.h"

#define GRID_MAX 65535

typedef struct kron_push {
    uint32_t cols, src_base, src_ld, dst_base, ldd, skip, p, q, mode, gate_base;
    float gate_scale;
} kron_push;

flux_status fx_vk_kron_gather(fx_vk *vk, int64_t tokens, int64_t cols, fx_vk_vec src, int64_t src_ld, int64_t skip,
                              int64_t p, int64_t q, fx_vk_mat dst, const fx_vk_epilogue *epi, fx_err *err) {
    static const char *op = "kron_gather";
    TRY(vk_check_alive(vk, err));
    const int gated = epi && epi->mode == FX_EPI_GATED_ACCUMULATE;
    if (tokens < 0 || cols < 0 || p < 1 || q < 1 || skip < 0 || skip + cols > p * q || p * q > src_ld ||
        src_ld > UINT32_MAX / 2 || (epi && epi->mode != FX_EPI_STORE && !gated))
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "Vulkan %s: %lld of %lld x %lld elements from %lld (row %lld apart), epilogue %d", op,
                       (long long)cols, (long long)p, (long long)q, (long long)skip, (long long)src_ld,
                       epi ? (int)epi->mode : 0);
    if (!tokens || !cols) return FLUX_OK;
    const fx_vk_mat s = {src.buf, src.off, src_ld};
    TRY(vk_check_mat(op, "src", s, tokens, p * q, err));
    TRY(vk_check_mat(op, "dst", dst, tokens, cols, err));
    if (gated) TRY(vk_check_vec(op, "gate", epi->gate, cols, 0, err));
    const uint32_t wg = vk_cpu_tuned(vk) ? 64 : 256, spec[1] = {wg};
    const vk_pipeline *pl;
    TRY(vk_pipeline_get(vk, VK_SH_kron_gather, 3, sizeof(kron_push), spec, 1, &pl, err));
    const int64_t lds[2] = {src_ld, dst.ld};
    int64_t per;
    TRY(vk_rows_per_pass(vk, op, lds, 2, p * q > cols ? p * q : cols, GRID_MAX, &per, err));
    for (int64_t t0 = 0; t0 < tokens; t0 += per) {
        const int64_t nt = tokens - t0 < per ? tokens - t0 : per;
        kron_push pc = {.cols = (uint32_t)cols, .src_ld = (uint32_t)src_ld, .ldd = (uint32_t)dst.ld,
                        .skip = (uint32_t)skip, .p = (uint32_t)p, .q = (uint32_t)q, .mode = gated ? 2u : 0u,
                        .gate_scale = gated && epi->gate_scale != 0.0f ? epi->gate_scale : 1.0f};
        vk_bind b[3];
        TRY(vk_window_rows(vk, s, t0, nt, p * q, 0, &b[0], &pc.src_base, err));
        TRY(vk_window_rows(vk, dst, t0, nt, cols, 1, &b[1], &pc.dst_base, err));
        TRY(vk_window_vec(vk, gated ? epi->gate : (fx_vk_vec){0}, cols, 0, &b[2], &pc.gate_base, err));
        TRY(vk_dispatch(vk, pl, b, &pc, (uint32_t)((cols + wg - 1) / wg), (uint32_t)nt, 1, err));
    }
    return FLUX_OK;
}
