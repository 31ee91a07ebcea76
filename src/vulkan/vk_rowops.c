/*
 * vk_rowops.c — row and elementwise operations on the device (semantics of
 * the kernels.h functions of the same names): RMSNorm, LayerNorm +
 * modulation, softmax (one workgroup per row, subgroup reductions), SiLU,
 * SwiGLU, gated add (elementwise grids), QK-norm + RoPE (one workgroup per
 * head of a row), and the RoPE table upload.
 *
 * Every operation runs in passes of rows so that each operand's window
 * fits one binding and each grid dimension stays within 65535.
 */
#include "vk_internal.h"

#include <stdlib.h>
#include <string.h>

#define GRID_MAX 65535

/* Workgroup size of the row reductions and elementwise grids. */
static uint32_t row_wg(const fx_vk *vk) { return vk_cpu_tuned(vk) ? 64 : 256; }

/* 1-D work of `groups` workgroups folded into a grid x·y. */
static void fold(int64_t groups, uint32_t *gx, uint32_t *gy) {
    *gx = (uint32_t)(groups < GRID_MAX ? groups : GRID_MAX);
    *gy = (uint32_t)((groups + *gx - 1) / *gx);
}

static flux_status check_rows(const char *op, int64_t rows, int64_t cols, fx_err *err) {
    if (rows < 0 || cols < 0)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan %s: shape [%lld, %lld]", op, (long long)rows,
                       (long long)cols);
    if (cols > UINT32_MAX / 2)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan %s: %lld columns", op, (long long)cols);
    return FLUX_OK;
}

static flux_status pipeline(fx_vk *vk, vk_shader_id sh, int nbind, uint32_t push, uint32_t wg,
                            const vk_pipeline **p, fx_err *err) {
    const uint32_t spec[1] = {wg};
    return vk_pipeline_get(vk, sh, nbind, push, spec, 1, p, err);
}

/* ------------------------------------------------------------------------ */
/* Row reductions                                                           */
/* ------------------------------------------------------------------------ */

typedef struct norm_push {
    uint32_t cols, x_base, ldx, y_base, ldy, a_base, b_base;
    float eps;
} norm_push; /* rmsnorm: a = w, b = has_w; layernorm: a = shift, b = scale */

flux_status fx_vk_rmsnorm(fx_vk *vk, int64_t rows, int64_t cols, fx_vk_mat x, fx_vk_vec w, float eps, fx_vk_mat y,
                          fx_err *err) {
    static const char *op = "rmsnorm";
    TRY(vk_check_alive(vk, err));
    TRY(check_rows(op, rows, cols, err));
    if (!rows || !cols) return FLUX_OK;
    TRY(vk_check_mat(op, "x", x, rows, cols, err));
    TRY(vk_check_mat(op, "y", y, rows, cols, err));
    TRY(vk_check_vec(op, "w", w, cols, 1, err));
    const vk_pipeline *p;
    TRY(pipeline(vk, VK_SH_rmsnorm, 3, sizeof(norm_push), row_wg(vk), &p, err));
    const int64_t lds[2] = {x.ld, y.ld};
    int64_t per;
    TRY(vk_rows_per_pass(vk, op, lds, 2, cols, GRID_MAX, &per, err));
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        const int64_t nr = rows - r0 < per ? rows - r0 : per;
        norm_push pc = {.cols = (uint32_t)cols, .ldx = (uint32_t)x.ld, .ldy = (uint32_t)y.ld, .b_base = w.buf != NULL,
                        .eps = eps};
        vk_bind b[3];
        TRY(vk_window_rows(vk, x, r0, nr, cols, 0, &b[0], &pc.x_base, err));
        TRY(vk_window_rows(vk, y, r0, nr, cols, 1, &b[1], &pc.y_base, err));
        TRY(vk_window_vec(vk, w, cols, 0, &b[2], &pc.a_base, err));
        TRY(vk_dispatch(vk, p, b, &pc, (uint32_t)nr, 1, 1, err));
    }
    return FLUX_OK;
}

flux_status fx_vk_layernorm_modulate(fx_vk *vk, int64_t rows, int64_t cols, fx_vk_mat x, fx_vk_vec shift,
                                     fx_vk_vec scale, float eps, fx_vk_mat y, fx_err *err) {
    static const char *op = "layernorm_modulate";
    TRY(vk_check_alive(vk, err));
    TRY(check_rows(op, rows, cols, err));
    if (!rows || !cols) return FLUX_OK;
    TRY(vk_check_mat(op, "x", x, rows, cols, err));
    TRY(vk_check_mat(op, "y", y, rows, cols, err));
    TRY(vk_check_vec(op, "shift", shift, cols, 0, err));
    TRY(vk_check_vec(op, "scale", scale, cols, 0, err));
    const vk_pipeline *p;
    TRY(pipeline(vk, VK_SH_layernorm_modulate, 4, sizeof(norm_push), row_wg(vk), &p, err));
    const int64_t lds[2] = {x.ld, y.ld};
    int64_t per;
    TRY(vk_rows_per_pass(vk, op, lds, 2, cols, GRID_MAX, &per, err));
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        const int64_t nr = rows - r0 < per ? rows - r0 : per;
        norm_push pc = {.cols = (uint32_t)cols, .ldx = (uint32_t)x.ld, .ldy = (uint32_t)y.ld, .eps = eps};
        vk_bind b[4];
        TRY(vk_window_rows(vk, x, r0, nr, cols, 0, &b[0], &pc.x_base, err));
        TRY(vk_window_rows(vk, y, r0, nr, cols, 1, &b[1], &pc.y_base, err));
        TRY(vk_window_vec(vk, shift, cols, 0, &b[2], &pc.a_base, err));
        TRY(vk_window_vec(vk, scale, cols, 0, &b[3], &pc.b_base, err));
        TRY(vk_dispatch(vk, p, b, &pc, (uint32_t)nr, 1, 1, err));
    }
    return FLUX_OK;
}

flux_status fx_vk_softmax_rows(fx_vk *vk, int64_t rows, int64_t cols, fx_vk_mat x, fx_err *err) {
    static const char *op = "softmax";
    TRY(vk_check_alive(vk, err));
    TRY(check_rows(op, rows, cols, err));
    if (!rows || !cols) return FLUX_OK;
    TRY(vk_check_mat(op, "x", x, rows, cols, err));
    const vk_pipeline *p;
    TRY(pipeline(vk, VK_SH_softmax, 1, 3 * sizeof(uint32_t), row_wg(vk), &p, err));
    int64_t per;
    TRY(vk_rows_per_pass(vk, op, &x.ld, 1, cols, GRID_MAX, &per, err));
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        const int64_t nr = rows - r0 < per ? rows - r0 : per;
        uint32_t pc[3] = {(uint32_t)cols, 0, (uint32_t)x.ld};
        vk_bind b[1];
        TRY(vk_window_rows(vk, x, r0, nr, cols, 1, &b[0], &pc[1], err));
        TRY(vk_dispatch(vk, p, b, pc, (uint32_t)nr, 1, 1, err));
    }
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Elementwise                                                              */
/* ------------------------------------------------------------------------ */

flux_status fx_vk_silu(fx_vk *vk, int64_t n, fx_vk_vec x, fx_err *err) {
    TRY(vk_check_alive(vk, err));
    if (n < 0) return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan silu: n = %lld", (long long)n);
    if (!n) return FLUX_OK;
    TRY(vk_check_vec("silu", "x", x, n, 0, err));
    const uint32_t wg = row_wg(vk);
    const vk_pipeline *p;
    TRY(pipeline(vk, VK_SH_silu, 1, 2 * sizeof(uint32_t), wg, &p, err));
    int64_t per = vk_rows_per_window(vk, 4, 4);
    if (per > (int64_t)GRID_MAX * GRID_MAX * wg) per = (int64_t)GRID_MAX * GRID_MAX * wg;
    for (int64_t i0 = 0; i0 < n; i0 += per) {
        const int64_t len = n - i0 < per ? n - i0 : per;
        uint32_t pc[2] = {(uint32_t)len, 0}, gx, gy;
        vk_bind b[1];
        TRY(vk_window_vec(vk, (fx_vk_vec){x.buf, x.off + i0}, len, 1, &b[0], &pc[1], err));
        fold((len + wg - 1) / wg, &gx, &gy);
        TRY(vk_dispatch(vk, p, b, pc, gx, gy, 1, err));
    }
    return FLUX_OK;
}

flux_status fx_vk_swiglu(fx_vk *vk, int64_t rows, int64_t cols, fx_vk_mat gate, fx_vk_mat up, fx_vk_mat out,
                         fx_err *err) {
    static const char *op = "swiglu";
    TRY(vk_check_alive(vk, err));
    TRY(check_rows(op, rows, cols, err));
    if (!rows || !cols) return FLUX_OK;
    TRY(vk_check_mat(op, "gate", gate, rows, cols, err));
    TRY(vk_check_mat(op, "up", up, rows, cols, err));
    TRY(vk_check_mat(op, "out", out, rows, cols, err));
    const uint32_t wg = row_wg(vk);
    const vk_pipeline *p;
    TRY(pipeline(vk, VK_SH_swiglu, 3, 7 * sizeof(uint32_t), wg, &p, err));
    const int64_t lds[3] = {gate.ld, up.ld, out.ld};
    int64_t per;
    TRY(vk_rows_per_pass(vk, op, lds, 3, cols, GRID_MAX, &per, err));
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        const int64_t nr = rows - r0 < per ? rows - r0 : per;
        uint32_t pc[7] = {(uint32_t)cols, 0, (uint32_t)gate.ld, 0, (uint32_t)up.ld, 0, (uint32_t)out.ld};
        vk_bind b[3];
        TRY(vk_window_rows(vk, gate, r0, nr, cols, 0, &b[0], &pc[1], err));
        TRY(vk_window_rows(vk, up, r0, nr, cols, 0, &b[1], &pc[3], err));
        TRY(vk_window_rows(vk, out, r0, nr, cols, 1, &b[2], &pc[5], err));
        TRY(vk_dispatch(vk, p, b, pc, (uint32_t)((cols + wg - 1) / wg), (uint32_t)nr, 1, err));
    }
    return FLUX_OK;
}

flux_status fx_vk_gated_add(fx_vk *vk, int64_t rows, int64_t cols, fx_vk_mat y, fx_vk_vec gate, fx_vk_mat x,
                            fx_err *err) {
    static const char *op = "gated_add";
    TRY(vk_check_alive(vk, err));
    TRY(check_rows(op, rows, cols, err));
    if (!rows || !cols) return FLUX_OK;
    TRY(vk_check_mat(op, "y", y, rows, cols, err));
    TRY(vk_check_mat(op, "x", x, rows, cols, err));
    TRY(vk_check_vec(op, "gate", gate, cols, 1, err));
    const uint32_t wg = row_wg(vk);
    const vk_pipeline *p;
    TRY(pipeline(vk, VK_SH_gated_add, 3, 7 * sizeof(uint32_t), wg, &p, err));
    const int64_t lds[2] = {y.ld, x.ld};
    int64_t per;
    TRY(vk_rows_per_pass(vk, op, lds, 2, cols, GRID_MAX, &per, err));
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        const int64_t nr = rows - r0 < per ? rows - r0 : per;
        uint32_t pc[7] = {(uint32_t)cols, 0, (uint32_t)y.ld, 0, gate.buf != NULL, 0, (uint32_t)x.ld};
        vk_bind b[3];
        TRY(vk_window_rows(vk, y, r0, nr, cols, 1, &b[0], &pc[1], err));
        TRY(vk_window_vec(vk, gate, cols, 0, &b[1], &pc[3], err));
        TRY(vk_window_rows(vk, x, r0, nr, cols, 0, &b[2], &pc[5], err));
        TRY(vk_dispatch(vk, p, b, pc, (uint32_t)((cols + wg - 1) / wg), (uint32_t)nr, 1, err));
    }
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* QK-norm + RoPE                                                           */
/* ------------------------------------------------------------------------ */

flux_status fx_vk_rope_upload(fx_vk *vk, const fx_rope_table *t, fx_vk_rope *out, fx_err *err) {
    memset(out, 0, sizeof *out);
    if (!t || !t->cos || t->seq < 1 || t->rot_dim < 2 || t->rot_dim % 2)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan rope: the table is not initialised");
    const uint64_t half = (uint64_t)t->seq * (uint64_t)(t->rot_dim / 2) * 4;
    fx_vk_buf *b;
    TRY(fx_vk_buf_new(vk, 2 * half, "the RoPE table", &b, err));
    flux_status st = fx_vk_upload(vk, b, 0, t->cos, half, err);
    if (st == FLUX_OK) st = fx_vk_upload(vk, b, half, t->sin, half, err);
    if (st != FLUX_OK) {
        fx_vk_buf_free(vk, b);
        return st;
    }
    *out = (fx_vk_rope){b, t->seq, t->rot_dim, t->layout};
    return FLUX_OK;
}

void fx_vk_rope_free(fx_vk *vk, fx_vk_rope *r) {
    if (!r) return;
    fx_vk_buf_free(vk, r->buf);
    memset(r, 0, sizeof *r);
}

typedef struct qk_push {
    uint32_t head_dim, x_base, ldx, has_norm, w_base;
    float eps;
    uint32_t pairs, ppr, interleaved, cos_base, sin_base, rope_rows;
} qk_push;

flux_status fx_vk_qk_norm_rope(fx_vk *vk, fx_vk_mat x, int64_t rows, int heads, int head_dim, fx_vk_vec norm_w,
                               float eps, const fx_vk_rope *rope, int64_t rope_row0, fx_err *err) {
    static const char *op = "qk_norm_rope";
    TRY(vk_check_alive(vk, err));
    if (rows < 0 || heads < 0 || head_dim < 0 || rope_row0 < 0)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan qk_norm_rope: negative shape");
    if (!rows || !heads || !head_dim || (!norm_w.buf && !rope)) return FLUX_OK;
    if (heads > GRID_MAX) return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan qk_norm_rope: %d heads", heads);
    const int64_t cols = (int64_t)heads * head_dim;
    TRY(vk_check_mat(op, "x", x, rows, cols, err));
    TRY(vk_check_vec(op, "norm_w", norm_w, head_dim, 1, err));
    if (rope && (!rope->buf || rope->rot_dim < 2))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan qk_norm_rope: the RoPE table is not on the device");
    const vk_pipeline *p;
    TRY(pipeline(vk, VK_SH_qk_norm_rope, 3, sizeof(qk_push), 64, &p, err));
    /* As fx_qk_norm_rope: rotate min(rot_dim, head_dim)/2 pairs, rows with a table row only. */
    const int pairs = rope ? (rope->rot_dim < head_dim ? rope->rot_dim : head_dim) / 2 : 0;
    const int64_t ppr = rope ? rope->rot_dim / 2 : 0;
    const int64_t table_rows = rope ? (rope->seq > rope_row0 ? rope->seq - rope_row0 : 0) : 0;
    int64_t per;
    TRY(vk_rows_per_pass(vk, op, &x.ld, 1, cols, GRID_MAX, &per, err));
    if (rope) { /* the table window (cos and sin rows of a pass) must fit as well */
        int64_t t = vk_rows_per_window(vk, (uint64_t)ppr * 4, (uint64_t)rope->seq * ppr * 4 + (uint64_t)ppr * 4);
        if (t < 1)
            return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan qk_norm_rope: the RoPE table exceeds one binding");
        if (t < per) per = t;
    }
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        const int64_t nr = rows - r0 < per ? rows - r0 : per;
        qk_push pc = {.head_dim = (uint32_t)head_dim, .ldx = (uint32_t)x.ld, .has_norm = norm_w.buf != NULL,
                      .eps = eps, .pairs = (uint32_t)pairs, .ppr = (uint32_t)ppr,
                      .interleaved = rope && rope->layout == FX_ROPE_INTERLEAVED};
        vk_bind b[3];
        TRY(vk_window_rows(vk, x, r0, nr, cols, 1, &b[0], &pc.x_base, err));
        TRY(vk_window_vec(vk, norm_w, head_dim, 0, &b[1], &pc.w_base, err));
        int64_t have = table_rows - r0; /* rows of this pass with a table row */
        pc.rope_rows = (uint32_t)(have < 0 ? 0 : have < nr ? have : nr);
        if (rope && pc.rope_rows) {
            const int64_t t0 = rope_row0 + r0, cos0 = t0 * ppr, sin0 = rope->seq * ppr + t0 * ppr;
            uint32_t base;
            TRY(vk_window(vk, rope->buf, (uint64_t)cos0 * 4, (uint64_t)(sin0 + (int64_t)pc.rope_rows * ppr) * 4, 0,
                          &b[2], &base, err));
            pc.cos_base = base;
            pc.sin_base = base + (uint32_t)(sin0 - cos0);
        } else {
            TRY(vk_window(vk, NULL, 0, 0, 0, &b[2], &pc.cos_base, err));
            pc.pairs = 0;
        }
        TRY(vk_dispatch(vk, p, b, &pc, (uint32_t)heads, (uint32_t)nr, 1, err));
    }
    return FLUX_OK;
}
