/*
 * vk_linear.c — the GEMM family: fx_vk_linear (Y = X·Wᵀ) and fx_vk_conv2d
 * (the same shaders with an implicit im2col A), on weights of vk_weights.c.
 *
 * Two shader variants (vk.h fx_vk_gemm_variant): register-blocked without
 * shared memory (CPU devices, portable) and shared-memory tiled (GPUs).
 * Tile and workgroup sizes are specialization constants chosen here.
 *
 * Large operands: the work is cut into passes of output columns (rows of W)
 * and output rows, each binding only its windows of X, W and Y, so no
 * binding exceeds maxStorageBufferRange and no grid exceeds 65535 groups.
 */
#include "vk_internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The GEMM passes                                                          */
/* ------------------------------------------------------------------------ */

/* Mirrors `Push` of gemm_common.glsl. */
typedef struct gemm_push {
    uint32_t m, n, k, x_base, ldx, w_base, ldw, y_base, ldy, bias_base, gate_base, mode, has_bias;
    uint32_t h, w, cin, kh, kw, stride, pad_top, pad_left, up, wo, row0, in_row0;
    float gate_scale;
    float w_scale; /* fp8 weights: their per-tensor scale (1 when unscaled) */
} gemm_push;

typedef struct gemm_cfg {
    int tiled;
    uint32_t spec[6];
    int nspec;
    uint32_t rows_per_group, cols_per_group; /* output block of one workgroup */
} gemm_cfg;

/* The variant and its tiles for an m×n output. */
static gemm_cfg choose_cfg(const fx_vk *vk, int64_t m, int64_t n) {
    gemm_cfg c = {0};
    fx_vk_gemm_variant v = vk->opts.gemm;
    if (v == FX_VK_GEMM_AUTO) v = vk_cpu_tuned(vk) ? FX_VK_GEMM_REG : FX_VK_GEMM_TILED;
    /* gemm_reg broadcasts eight A values across a subgroup. */
    if (vk->info.subgroup_size < 8) v = FX_VK_GEMM_TILED;
    if (v == FX_VK_GEMM_TILED) {
        c.tiled = 1;
        c.nspec = 6;
        if (m >= 128 && n >= 128) {
            /* 128×128 tiles, 8×8 per invocation (256): 64 FMAs per 16 shared
             * loads. BK 16 needs 16.5 KiB of shared memory, BK 8 half. */
            const uint32_t bk = vk->info.shared_memory >= 2 * 16 * 129 * 4 + 1024 ? 16 : 8;
            const uint32_t spec[6] = {256, 128, 128, bk, 8, 8};
            memcpy(c.spec, spec, sizeof spec);
            c.rows_per_group = c.cols_per_group = 128;
        } else {
            /* Small outputs: 64×64 tiles, BK 16, 4×4 per invocation (256). */
            const uint32_t spec[6] = {256, 64, 64, 16, 4, 4};
            memcpy(c.spec, spec, sizeof spec);
            c.rows_per_group = c.cols_per_group = 64;
        }
    } else {
        /* 32 invocations, 8×4 outputs each: 8 rows × 128 columns per
         * group. lavapipe's loads cost ~100 cycles per component and lane,
         * its FMAs almost nothing, so larger blocks run faster (16×8: ~1.5×
         * at 768×512×512), but their first-dispatch JIT took over the 60 s
         * fence limit under the validation layer on a loaded host. */
        uint32_t spec[3] = {32, 8, 4};
        memcpy(c.spec, spec, sizeof spec);
        c.nspec = 3;
        c.rows_per_group = 8;
        c.cols_per_group = 32 * 4;
    }
    return c;
}

/* The GEMM shaders of each ggml block type, which dequantize as they load
 * (gemm_common.glsl WTYPE 3..14): every block type the CPU reads. */
typedef struct block_shaders {
    vk_shader_id reg, tiled;
} block_shaders;

static const block_shaders block_gemm[FX_DTYPE_COUNT] = {
    [FX_DTYPE_Q8_0] = {VK_SH_gemm_reg_q8_0, VK_SH_gemm_tiled_q8_0},
    [FX_DTYPE_Q4_0] = {VK_SH_gemm_reg_q4_0, VK_SH_gemm_tiled_q4_0},
    [FX_DTYPE_Q4_1] = {VK_SH_gemm_reg_q4_1, VK_SH_gemm_tiled_q4_1},
    [FX_DTYPE_Q5_0] = {VK_SH_gemm_reg_q5_0, VK_SH_gemm_tiled_q5_0},
    [FX_DTYPE_Q5_1] = {VK_SH_gemm_reg_q5_1, VK_SH_gemm_tiled_q5_1},
    [FX_DTYPE_Q2_K] = {VK_SH_gemm_reg_q2_k, VK_SH_gemm_tiled_q2_k},
    [FX_DTYPE_Q3_K] = {VK_SH_gemm_reg_q3_k, VK_SH_gemm_tiled_q3_k},
    [FX_DTYPE_Q4_K] = {VK_SH_gemm_reg_q4_k, VK_SH_gemm_tiled_q4_k},
    [FX_DTYPE_Q5_K] = {VK_SH_gemm_reg_q5_k, VK_SH_gemm_tiled_q5_k},
    [FX_DTYPE_Q6_K] = {VK_SH_gemm_reg_q6_k, VK_SH_gemm_tiled_q6_k},
    [FX_DTYPE_IQ4_NL] = {VK_SH_gemm_reg_iq4_nl, VK_SH_gemm_tiled_iq4_nl},
    [FX_DTYPE_IQ4_XS] = {VK_SH_gemm_reg_iq4_xs, VK_SH_gemm_tiled_iq4_xs},
};

static vk_shader_id gemm_shader(int tiled, int conv, fx_dtype t) {
    if (vk_w_blocks(t)) return tiled ? block_gemm[t].tiled : block_gemm[t].reg; /* linear only */
    if (t == FX_DTYPE_F8_E4M3) return tiled ? VK_SH_gemm_tiled_f8_e4m3 : VK_SH_gemm_reg_f8_e4m3; /* linear only */
    if (t == FX_DTYPE_F8_E5M2) return tiled ? VK_SH_gemm_tiled_f8_e5m2 : VK_SH_gemm_reg_f8_e5m2;
    static const vk_shader_id ids[2][2][3] = {
        {{VK_SH_gemm_reg_f32, VK_SH_gemm_reg_f16, VK_SH_gemm_reg_bf16},
         {VK_SH_conv_reg_f32, VK_SH_conv_reg_f16, VK_SH_conv_reg_bf16}},
        {{VK_SH_gemm_tiled_f32, VK_SH_gemm_tiled_f16, VK_SH_gemm_tiled_bf16},
         {VK_SH_conv_tiled_f32, VK_SH_conv_tiled_f16, VK_SH_conv_tiled_bf16}},
    };
    return ids[tiled][conv][t];
}

static uint32_t div_up(int64_t a, int64_t b) { return (uint32_t)((a + b - 1) / b); }

/* Workgroups for an mr×nc output: a 2-D grid of output tiles. */
static void grid_for(const gemm_cfg *c, int64_t mr, int64_t nc, uint32_t *gx, uint32_t *gy) {
    *gx = div_up(nc, c->cols_per_group), *gy = div_up(mr, c->rows_per_group);
}

/* Window of W rows [n0, n0 + nc); *base in elements (block types: bytes; fp8: both). */
static flux_status weight_window(fx_vk *vk, const fx_vk_weight *w, int64_t n0, int64_t nc, vk_bind *b,
                                 uint32_t *base, fx_err *err) {
    const uint64_t lo = vk_w_row_at(w, n0), hi = vk_w_row_at(w, n0 + nc);
    uint32_t words;
    TRY(vk_window(vk, w->buf, lo, hi, 0, b, &words, err));
    const int bytes = vk_w_blocks(w->dtype) || vk_dtype_bytes(w->dtype) == 1; /* block and fp8 rows */
    *base = bytes ? (uint32_t)(words * 4 + (lo & 3)) : (uint32_t)(words * 4 / vk_dtype_bytes(w->dtype));
    return FLUX_OK;
}

/* Epilogue vectors: windows over columns [n0, n0 + nc). */
static flux_status epi_windows(fx_vk *vk, const fx_vk_epilogue *epi, int64_t n0, int64_t nc, vk_bind *b,
                               gemm_push *pc, fx_err *err) {
    fx_vk_vec bias = epi ? epi->bias : (fx_vk_vec){0};
    fx_vk_vec gate = epi && epi->mode == FX_EPI_GATED_ACCUMULATE ? epi->gate : (fx_vk_vec){0};
    if (bias.buf) bias.off += n0;
    if (gate.buf) gate.off += n0;
    TRY(vk_window_vec(vk, bias, nc, 0, &b[3], &pc->bias_base, err));
    TRY(vk_window_vec(vk, gate, nc, 0, &b[4], &pc->gate_base, err));
    pc->has_bias = bias.buf != NULL;
    pc->mode = epi ? (uint32_t)epi->mode : 0;
    pc->gate_scale = epi && epi->gate_scale != 0.0f ? epi->gate_scale : 1.0f;
    return FLUX_OK;
}

/* Columns per pass: W rows in one window, grid x within 65535. */
static flux_status cols_per_pass(fx_vk *vk, const fx_vk_weight *w, const gemm_cfg *c, int64_t *out,
                                 fx_err *err) {
    int64_t nc = vk_rows_per_window(vk, vk_w_row_bytes(w), vk_w_row_bytes(w));
    if (nc < 1)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan: one row of weight %s exceeds the binding limit",
                       w->buf->what);
    int64_t grid = (int64_t)65535 * c->cols_per_group;
    *out = nc < grid ? nc : grid;
    return FLUX_OK;
}

static flux_status check_epi(const char *op, const fx_vk_epilogue *epi, int64_t n, fx_err *err) {
    if (!epi) return FLUX_OK;
    if (epi->mode < FX_EPI_STORE || epi->mode > FX_EPI_GATED_ACCUMULATE)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan %s: unknown epilogue mode %d", op, (int)epi->mode);
    TRY(vk_check_vec(op, "bias", epi->bias, n, 1, err));
    if (epi->mode == FX_EPI_GATED_ACCUMULATE) TRY(vk_check_vec(op, "gate", epi->gate, n, 0, err));
    return FLUX_OK;
}

static flux_status check_weight(const char *op, const fx_vk_weight *w, fx_err *err) {
    if (!w || !w->buf) return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan %s: weight is not on the device", op);
    const int blocks = vk_w_blocks(w->dtype), fp8 = fx_dtype_is_fp8(w->dtype);
    if (((unsigned)w->dtype > FX_DTYPE_BF16 && !blocks && !fp8) || w->off < 0 ||
        (blocks ? w->k < 1 || w->k % fx_dtype_block(w->dtype) || w->ld < fx_dtype_row_bytes(w->dtype, w->k)
                : w->ld < w->k || (vk_dtype_bytes(w->dtype) == 2 && (w->off % 2 || w->ld % 2))))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan %s: weight %s has an invalid layout", op, w->buf->what);
    if (vk_w_row_at(w, w->n) > w->buf->bytes)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan %s: weight [%lld, %lld] exceeds its buffer %s", op,
                       (long long)w->n, (long long)w->k, w->buf->what);
    return FLUX_OK;
}

/* Do views x [m, k] and y [m, n] of one buffer share an element? Column
 * slices of one wider matrix (same ld, disjoint columns: the DiT reads the
 * AdaLN output and writes Q K V into other columns of its workspace) do not. */
static int views_share(fx_vk_mat x, int64_t k, fx_vk_mat y, int64_t n, int64_t m) {
    int64_t xa = x.off, xb = x.off + (m - 1) * x.ld + k, ya = y.off, yb = y.off + (m - 1) * y.ld + n;
    if (!(xa < yb && ya < xb)) return 0;
    if (m == 1 || x.ld != y.ld) return 1;
    int64_t cx = x.off % x.ld, cy = y.off % y.ld;
    if (cx + k > x.ld || cy + n > y.ld) return 1; /* a row wraps into the next */
    return cx < cy + n && cy < cx + k;
}

flux_status fx_vk_linear(fx_vk *vk, int64_t m, fx_vk_mat x, const fx_vk_weight *w, fx_vk_mat y,
                         const fx_vk_epilogue *epi, fx_err *err) {
    static const char *op = "linear";
    TRY(vk_check_alive(vk, err));
    TRY(vk_weight_use(vk, w, err)); /* a weight over the budget is uploaded now */
    TRY(check_weight(op, w, err));
    const int64_t n = w->n, k = w->k;
    if (m < 0) return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan linear: m = %lld", (long long)m);
    if (m == 0) return FLUX_OK;
    if (k > 0) TRY(vk_check_mat(op, "x", x, m, k, err));
    TRY(vk_check_mat(op, "y", y, m, n, err));
    TRY(check_epi(op, epi, n, err));
    if (x.buf && x.buf == y.buf && k > 0 && views_share(x, k, y, n, m))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan linear: x and y overlap");
    const gemm_cfg c = choose_cfg(vk, m, n);
    const vk_pipeline *p;
    TRY(vk_pipeline_get(vk, gemm_shader(c.tiled, 0, w->dtype), 5, sizeof(gemm_push), c.spec, c.nspec, &p, err));

    int64_t nc_max = 0, mr_max = 0;
    TRY(cols_per_pass(vk, w, &c, &nc_max, err));
    for (int64_t n0 = 0; n0 < n; n0 += nc_max) {
        const int64_t nc = n - n0 < nc_max ? n - n0 : nc_max;
        const int64_t xld[1] = {x.ld}, yld[1] = {y.ld};
        int64_t rx = 0;
        TRY(vk_rows_per_pass(vk, op, xld, 1, k > 0 ? k : 1, (int64_t)65535 * c.rows_per_group, &rx, err));
        TRY(vk_rows_per_pass(vk, op, yld, 1, nc, rx, &mr_max, err));
        for (int64_t r0 = 0; r0 < m; r0 += mr_max) {
            const int64_t mr = m - r0 < mr_max ? m - r0 : mr_max;
            gemm_push pc = {.m = (uint32_t)mr, .n = (uint32_t)nc, .k = (uint32_t)k,
                            .ldx = (uint32_t)x.ld, .ldw = (uint32_t)w->ld, .ldy = (uint32_t)y.ld,
                            .w_scale = w->scale != 0.0f ? w->scale : 1.0f};
            vk_bind b[5];
            fx_vk_mat ycols = {y.buf, y.off + n0, y.ld};
            if (k > 0) TRY(vk_window_rows(vk, x, r0, mr, k, 0, &b[0], &pc.x_base, err));
            else TRY(vk_window(vk, NULL, 0, 0, 0, &b[0], &pc.x_base, err));
            TRY(weight_window(vk, w, n0, nc, &b[1], &pc.w_base, err));
            TRY(vk_window_rows(vk, ycols, r0, mr, nc, 1, &b[2], &pc.y_base, err));
            TRY(epi_windows(vk, epi, n0, nc, b, &pc, err));
            uint32_t gx, gy;
            grid_for(&c, mr, nc, &gx, &gy);
            TRY(vk_dispatch(vk, p, b, &pc, gx, gy, 1, err));
        }
    }
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* conv2d                                                                   */
/* ------------------------------------------------------------------------ */

/* Output rows per pass: the input rows they read, their output rows and the
 * grid must fit (halving from all rows). */
static flux_status conv_rows_per_pass(fx_vk *vk, const fx_conv2d_geom *g, int ho, int wo, const gemm_cfg *c,
                                      int64_t nc, int *out, fx_err *err) {
    int rows = ho;
    const uint64_t in_row_bytes = (uint64_t)g->w * g->cin * 4, slack = 64;
    for (;;) {
        int64_t in_rows = 0; /* the widest input window of any strip */
        for (int r0 = 0; r0 < ho; r0 += rows) {
            int in0, in1;
            fx_conv2d_input_rows(g, r0, r0 + rows < ho ? r0 + rows : ho, &in0, &in1);
            if (in1 - in0 > in_rows) in_rows = in1 - in0;
        }
        uint64_t out_bytes = ((uint64_t)(rows - 1) * wo * g->cout + nc) * 4;
        int64_t groups = ((int64_t)rows * wo + c->rows_per_group - 1) / c->rows_per_group;
        if ((uint64_t)in_rows * in_row_bytes + slack <= vk->max_binding && out_bytes + slack <= vk->max_binding &&
            groups <= 65535)
            break;
        if (rows == 1)
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "Vulkan conv2d: one output row (%d x %d x %d) does not fit the device's limits", wo,
                           g->cout, g->cin);
        rows = (rows + 1) / 2;
    }
    *out = rows;
    return FLUX_OK;
}

flux_status fx_vk_conv2d(fx_vk *vk, const fx_conv2d_geom *g, fx_vk_vec x, const fx_vk_weight *w,
                         const fx_vk_epilogue *epi, fx_vk_vec y, fx_err *err) {
    static const char *op = "conv2d";
    TRY(vk_check_alive(vk, err));
    TRY(vk_weight_use(vk, w, err)); /* a weight over the budget is uploaded now */
    TRY(check_weight(op, w, err));
    if (vk_w_blocks(w->dtype) || fx_dtype_is_fp8(w->dtype))
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan conv2d: weight %s is %s (linear layers only)",
                       w->buf->what, fx_dtype_name(w->dtype));
    int ho, wo;
    if (!g) return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan conv2d: geometry is NULL");
    fx_conv2d_out_size(g, &ho, &wo);
    if (ho <= 0 || wo <= 0)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan conv2d: invalid geometry (%dx%dx%d, kernel %dx%d)",
                       g->h, g->w, g->cin, g->kh, g->kw);
    if (w->n != g->cout || w->k != (int64_t)g->kh * g->kw * g->cin)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan conv2d: weight [%lld, %lld] does not match the geometry",
                       (long long)w->n, (long long)w->k);
    TRY(vk_check_vec(op, "x", x, (int64_t)g->h * g->w * g->cin, 0, err));
    TRY(vk_check_vec(op, "y", y, (int64_t)ho * wo * g->cout, 0, err));
    TRY(check_epi(op, epi, g->cout, err));
    const gemm_cfg c = choose_cfg(vk, (int64_t)ho * wo, g->cout);
    const vk_pipeline *p;
    TRY(vk_pipeline_get(vk, gemm_shader(c.tiled, 1, w->dtype), 5, sizeof(gemm_push), c.spec, c.nspec, &p, err));

    int64_t nc_max = 0;
    TRY(cols_per_pass(vk, w, &c, &nc_max, err));
    for (int64_t n0 = 0; n0 < g->cout; n0 += nc_max) {
        const int64_t nc = g->cout - n0 < nc_max ? g->cout - n0 : nc_max;
        int rows = 1;
        TRY(conv_rows_per_pass(vk, g, ho, wo, &c, nc, &rows, err));
        for (int row0 = 0; row0 < ho; row0 += rows) {
            const int row1 = row0 + rows < ho ? row0 + rows : ho;
            int in0, in1;
            fx_conv2d_input_rows(g, row0, row1, &in0, &in1);
            if (in1 <= in0) in0 = 0, in1 = 1; /* all padding: bind any row */
            gemm_push pc = {
                .m = (uint32_t)((int64_t)(row1 - row0) * wo), .n = (uint32_t)nc, .k = (uint32_t)w->k,
                .ldx = (uint32_t)g->cin, .ldw = (uint32_t)w->ld, .ldy = (uint32_t)g->cout,
                .h = (uint32_t)g->h, .w = (uint32_t)g->w, .cin = (uint32_t)g->cin, .kh = (uint32_t)g->kh,
                .kw = (uint32_t)g->kw, .stride = (uint32_t)g->stride, .pad_top = (uint32_t)g->pad_top,
                .pad_left = (uint32_t)g->pad_left, .up = g->upsample2x ? 1 : 0, .wo = (uint32_t)wo,
                .row0 = (uint32_t)row0, .in_row0 = (uint32_t)in0,
            };
            vk_bind b[5];
            const int64_t row_floats = (int64_t)g->w * g->cin;
            TRY(vk_window(vk, x.buf, (uint64_t)(x.off + in0 * row_floats) * 4,
                          (uint64_t)(x.off + in1 * row_floats) * 4, 0, &b[0], &pc.x_base, err));
            TRY(weight_window(vk, w, n0, nc, &b[1], &pc.w_base, err));
            fx_vk_mat ym = {y.buf, y.off + (int64_t)row0 * wo * g->cout + n0, g->cout};
            TRY(vk_window_rows(vk, ym, 0, pc.m, nc, 1, &b[2], &pc.y_base, err));
            TRY(epi_windows(vk, epi, n0, nc, b, &pc, err));
            uint32_t gx, gy;
            grid_for(&c, pc.m, nc, &gx, &gy);
            TRY(vk_dispatch(vk, p, b, &pc, gx, gy, 1, err));
        }
    }
    return FLUX_OK;
}
