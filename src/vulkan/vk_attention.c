/*
 * vk_attention.c — fx_vk_attention: argument checks (as fx_attention),
 * the shader for the device (CPU devices: attention_rows, one query row per
 * invocation, for d <= 128; otherwise the shared-memory tiles, which must
 * hold the Q block and a K and a V tile of DMAX floats per row), and passes
 * over query rows when Q/O exceed one binding or the grid limit. K and V
 * are bound whole.
 */
#include "vk_internal.h"

#include <math.h>
#include <string.h>

typedef struct attn_push {
    uint32_t sq, sk, hq, hkv, d;
    uint32_t q_base, ldq, k_base, ldk, v_base, ldv, o_base, ldo;
    float qscale;
    uint32_t causal;
    int32_t causal_offset;
    uint32_t has_mask, mask_base, row0;
} attn_push;

enum {
    ATTN_T = 8,   /* attention.comp: invocations per query row */
    ROWS_WG = 32  /* attention_rows.comp: query rows (invocations) per workgroup */
};

static uint64_t shared_bytes(uint32_t br, uint32_t bc, uint32_t dmax) {
    return 4ull * ((uint64_t)br * dmax + 2ull * bc * dmax + (uint64_t)br * bc) + 256;
}

static flux_status check_args(const fx_vk_attn_args *a, fx_err *err) {
    static const char *op = "attention";
    if (!a) return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan attention: args is NULL");
    if (a->sq < 0 || a->sk < 0)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan attention: sequence lengths must be >= 0 (sq=%lld, sk=%lld)",
                       (long long)a->sq, (long long)a->sk);
    if (a->hq < 1 || a->hkv < 1 || a->hq % a->hkv)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "Vulkan attention: query heads (hq=%d) must be a positive multiple of kv heads (hkv=%d)",
                       a->hq, a->hkv);
    if (a->d < 2 || a->d % 2)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan attention: head dim d=%d must be even and >= 2", a->d);
    if (!isfinite(a->scale))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan attention: scale %g is not finite", (double)a->scale);
    const int64_t qw = (int64_t)a->hq * a->d, kw = (int64_t)a->hkv * a->d;
    if (a->sq > 0) {
        TRY(vk_check_mat(op, "q", a->q, a->sq, qw, err));
        TRY(vk_check_mat(op, "o", a->o, a->sq, qw, err));
    }
    if (a->sk > 0 && a->sq > 0) {
        TRY(vk_check_mat(op, "k", a->k, a->sk, kw, err));
        TRY(vk_check_mat(op, "v", a->v, a->sk, kw, err));
        if (a->key_mask) {
            if (a->key_mask_off < 0 || a->key_mask_off % 4 ||
                (uint64_t)(a->key_mask_off + a->sk) > fx_vk_buf_bytes(a->key_mask))
                return fx_fail(err, FLUX_ERR_INVALID_ARG,
                               "Vulkan attention: key_mask needs %lld bytes at a multiple of 4 inside its buffer",
                               (long long)a->sk);
        }
    }
    return FLUX_OK;
}

flux_status fx_vk_attention(fx_vk *vk, const fx_vk_attn_args *a, fx_err *err) {
    TRY(vk_check_alive(vk, err));
    TRY(check_args(a, err));
    if (a->sq == 0) return FLUX_OK;
    const int64_t qw = (int64_t)a->hq * a->d, kw = (int64_t)a->hkv * a->d;
    const int cpu = vk_cpu_tuned(vk) && vk->info.subgroup_size >= 8 && a->d <= 128;
    const vk_pipeline *p;
    uint32_t br;
    if (cpu) {
        /* RQ query rows per invocation (attention_rows.comp: 2 for head
         * dims up to 64, 1 above, as shaders.mk builds them), q and o of
         * DMAX floats each in registers: no shared memory. */
        br = ROWS_WG * (a->d <= 64 ? 2 : 1);
        const uint32_t spec[1] = {ROWS_WG};
        const vk_shader_id sh = a->d <= 32 ? VK_SH_attention_rows_d32
                                : a->d <= 64 ? VK_SH_attention_rows_d64 : VK_SH_attention_rows_d128;
        TRY(vk_pipeline_get(vk, sh, 5, sizeof(attn_push), spec, 1, &p, err));
    } else {
        const uint32_t dmax = (uint32_t)((a->d + ATTN_T - 1) / ATTN_T * ATTN_T);
        br = 16;
        uint32_t bc = 32;
        while (shared_bytes(br, bc, dmax) > vk->info.shared_memory && bc > 4) bc /= 2;
        while (shared_bytes(br, bc, dmax) > vk->info.shared_memory && br > 1) br /= 2;
        if (shared_bytes(br, bc, dmax) > vk->info.shared_memory)
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "Vulkan attention: head dim %d needs more shared memory than the device's %u bytes", a->d,
                           vk->info.shared_memory);
        const uint32_t spec[5] = {br * ATTN_T, br, bc, ATTN_T, dmax};
        TRY(vk_pipeline_get(vk, VK_SH_attention, 5, sizeof(attn_push), spec, 5, &p, err));
    }

    attn_push pc = {
        .sk = (uint32_t)a->sk, .hq = (uint32_t)a->hq, .hkv = (uint32_t)a->hkv, .d = (uint32_t)a->d,
        .ldq = (uint32_t)a->q.ld, .ldk = (uint32_t)a->k.ld, .ldv = (uint32_t)a->v.ld, .ldo = (uint32_t)a->o.ld,
        .qscale = (float)((double)a->scale * 1.4426950408889634074),
        .causal = a->causal ? 1 : 0, .causal_offset = (int32_t)a->causal_offset,
        .has_mask = a->key_mask && a->sk > 0 ? 1 : 0,
    };
    vk_bind b[5];
    if (a->sk > 0) {
        TRY(vk_window_rows(vk, a->k, 0, a->sk, kw, 0, &b[1], &pc.k_base, err));
        TRY(vk_window_rows(vk, a->v, 0, a->sk, kw, 0, &b[2], &pc.v_base, err));
    } else {
        TRY(vk_window(vk, NULL, 0, 0, 0, &b[1], &pc.k_base, err));
        TRY(vk_window(vk, NULL, 0, 0, 0, &b[2], &pc.v_base, err));
    }
    if (pc.has_mask) {
        uint32_t words;
        TRY(vk_window(vk, a->key_mask, (uint64_t)a->key_mask_off, (uint64_t)(a->key_mask_off + a->sk), 0, &b[4],
                      &words, err));
        pc.mask_base = words * 4;
    } else {
        TRY(vk_window(vk, NULL, 0, 0, 0, &b[4], &pc.mask_base, err));
    }
    const int64_t lds[2] = {a->q.ld, a->o.ld};
    int64_t rows;
    TRY(vk_rows_per_pass(vk, "attention", lds, 2, qw, (int64_t)65535 * br, &rows, err));
    for (int64_t r0 = 0; r0 < a->sq; r0 += rows) {
        const int64_t nr = a->sq - r0 < rows ? a->sq - r0 : rows;
        pc.sq = (uint32_t)nr;
        pc.row0 = (uint32_t)r0;
        TRY(vk_window_rows(vk, a->q, r0, nr, qw, 0, &b[0], &pc.q_base, err));
        TRY(vk_window_rows(vk, a->o, r0, nr, qw, 1, &b[3], &pc.o_base, err));
        TRY(vk_dispatch(vk, p, b, &pc, (uint32_t)((nr + br - 1) / br), (uint32_t)a->hq, 1, err));
    }
    return FLUX_OK;
}
