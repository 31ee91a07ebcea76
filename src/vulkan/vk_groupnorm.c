/*
 * vk_groupnorm.c — GroupNorm over channels-last x [pixels, channels] on the
 * device, in two reductions and an elementwise pass:
 *   partial  one workgroup per (chunk of pixels, group): chunk mean and
 *            centred sum of squares (shifted sums, subgroup reductions)
 *   finish   one workgroup per group merges the chunks (law of total
 *            variance) into mean and rstd
 *   apply    y = (x − mean)·rstd·gamma + beta (+ SiLU)
 * The whole tensor is on the device, so the CPU's strip-wise sums are not
 * needed; tensors over one binding are reduced in passes of whole chunks
 * whose partials land in one scratch array.
 */
#include "vk_internal.h"

#define GRID_MAX 65535
#define CHUNK_MIN 256 /* pixels per partial workgroup, at least */

typedef struct partial_push {
    uint32_t channels, cpg, groups, chunk, pixels, x_base, part_base, chunk0;
} partial_push;

typedef struct finish_push {
    uint32_t nchunks, chunk, pixels, cpg, groups, part_base, stats_base;
    float eps;
} finish_push;

typedef struct apply_push {
    uint32_t n, channels, cpg, groups, x_base, y_base, stats_base, gamma_base, beta_base;
    uint32_t has_gamma, has_beta, silu;
} apply_push;

static uint32_t wg_size(const fx_vk *vk) { return vk_cpu_tuned(vk) ? 64 : 256; }

/* Pixels per partial workgroup: CHUNK_MIN or more, so few that all the
 * partials ([chunks, groups, 2] floats) fit one binding for the finish
 * pass; fewer when one binding holds fewer pixels. 0 if both cannot hold
 * (only with an artificially small binding limit). */
static int64_t chunk_pixels(const fx_vk *vk, int64_t pixels, int channels, int groups) {
    int64_t c = CHUNK_MIN;
    int64_t parts_per_window = vk_rows_per_window(vk, 8 * (uint64_t)groups, 8 * (uint64_t)groups);
    int64_t fit = parts_per_window > 0 ? (pixels + parts_per_window - 1) / parts_per_window : INT64_MAX;
    int64_t win = vk_rows_per_window(vk, (uint64_t)channels * 4, (uint64_t)channels * 4);
    if (c > win) c = win;
    if (c < fit) c = fit;
    return c <= win ? c : 0;
}

static flux_status check(const char *op, int64_t pixels, int channels, int groups, fx_vk_vec x, fx_err *err) {
    if (pixels < 1 || channels < 1 || groups < 1 || channels % groups || groups > GRID_MAX)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "Vulkan %s: %lld pixels, %d channels in %d groups (channels must be a multiple)", op,
                       (long long)pixels, channels, groups);
    return vk_check_vec(op, "x", x, pixels * channels, 0, err);
}

/* Statistics into stats [2·groups], partials in part (floats at part_off). */
static flux_status gn_stats(fx_vk *vk, int64_t pixels, int channels, int groups, fx_vk_vec x, float eps,
                            fx_vk_vec stats, fx_vk_vec part, fx_err *err) {
    const uint32_t wg = wg_size(vk);
    const int64_t chunk = chunk_pixels(vk, pixels, channels, groups);
    if (chunk < 1)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "Vulkan groupnorm: %lld pixels of %d channels need more than the binding limit of %llu bytes",
                       (long long)pixels, channels, (unsigned long long)vk->max_binding);
    const int64_t nchunks = (pixels + chunk - 1) / chunk;
    const vk_pipeline *pp, *pf;
    const uint32_t spec[1] = {wg};
    TRY(vk_pipeline_get(vk, VK_SH_groupnorm_partial, 2, sizeof(partial_push), spec, 1, &pp, err));
    TRY(vk_pipeline_get(vk, VK_SH_groupnorm_finish, 2, sizeof(finish_push), spec, 1, &pf, err));
    /* Whole chunks per pass, within one binding and the grid. */
    int64_t per = vk_rows_per_window(vk, (uint64_t)channels * 4, (uint64_t)channels * 4) / chunk;
    if (per > GRID_MAX) per = GRID_MAX;
    vk_bind b[2];
    for (int64_t c0 = 0; c0 < nchunks; c0 += per) {
        const int64_t nc = nchunks - c0 < per ? nchunks - c0 : per;
        const int64_t p0 = c0 * chunk, np = pixels - p0 < nc * chunk ? pixels - p0 : nc * chunk;
        partial_push pc = {(uint32_t)channels, (uint32_t)(channels / groups), (uint32_t)groups, (uint32_t)chunk,
                           (uint32_t)np, 0, 0, 0};
        TRY(vk_window_vec(vk, (fx_vk_vec){x.buf, x.off + p0 * channels}, np * channels, 0, &b[0], &pc.x_base, err));
        TRY(vk_window_vec(vk, (fx_vk_vec){part.buf, part.off + c0 * groups * 2}, nc * groups * 2, 1, &b[1],
                          &pc.part_base, err));
        TRY(vk_dispatch(vk, pp, b, &pc, (uint32_t)nc, (uint32_t)groups, 1, err));
    }
    finish_push fc = {(uint32_t)nchunks, (uint32_t)chunk, (uint32_t)pixels, (uint32_t)(channels / groups),
                      (uint32_t)groups, 0, 0, eps};
    TRY(vk_window_vec(vk, part, nchunks * groups * 2, 0, &b[0], &fc.part_base, err));
    TRY(vk_window_vec(vk, stats, 2 * (int64_t)groups, 1, &b[1], &fc.stats_base, err));
    return vk_dispatch(vk, pf, b, &fc, (uint32_t)groups, 1, 1, err);
}

static int64_t partial_floats(const fx_vk *vk, int64_t pixels, int channels, int groups) {
    int64_t chunk = chunk_pixels(vk, pixels, channels, groups);
    return chunk < 1 ? 2 : (pixels + chunk - 1) / chunk * groups * 2;
}

flux_status fx_vk_groupnorm_stats(fx_vk *vk, int64_t pixels, int channels, int groups, fx_vk_vec x, float eps,
                                  fx_vk_vec stats, fx_err *err) {
    TRY(vk_check_alive(vk, err));
    TRY(check("groupnorm_stats", pixels, channels, groups, x, err));
    TRY(vk_check_vec("groupnorm_stats", "stats", stats, 2 * (int64_t)groups, 0, err));
    fx_vk_buf *s;
    TRY(vk_scratch(vk, (uint64_t)partial_floats(vk, pixels, channels, groups) * 4, &s, err));
    return gn_stats(vk, pixels, channels, groups, x, eps, stats, (fx_vk_vec){s, 0}, err);
}

flux_status fx_vk_groupnorm_apply(fx_vk *vk, int64_t pixels, int channels, int groups, fx_vk_vec x,
                                  fx_vk_vec stats, fx_vk_vec gamma, fx_vk_vec beta, int fuse_silu, fx_vk_vec y,
                                  fx_err *err) {
    static const char *op = "groupnorm_apply";
    TRY(vk_check_alive(vk, err));
    TRY(check(op, pixels, channels, groups, x, err));
    TRY(vk_check_vec(op, "y", y, pixels * channels, 0, err));
    TRY(vk_check_vec(op, "stats", stats, 2 * (int64_t)groups, 0, err));
    TRY(vk_check_vec(op, "gamma", gamma, channels, 1, err));
    TRY(vk_check_vec(op, "beta", beta, channels, 1, err));
    const uint32_t wg = wg_size(vk), spec[1] = {wg};
    const vk_pipeline *p;
    TRY(vk_pipeline_get(vk, VK_SH_groupnorm_apply, 5, sizeof(apply_push), spec, 1, &p, err));
    int64_t per = vk_rows_per_window(vk, (uint64_t)channels * 4, (uint64_t)channels * 4);
    if (per < 1)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan groupnorm: a pixel of %d channels exceeds one binding",
                       channels);
    const int64_t grid_pixels = (int64_t)GRID_MAX * GRID_MAX * wg / channels;
    if (per > grid_pixels) per = grid_pixels;
    for (int64_t p0 = 0; p0 < pixels; p0 += per) {
        const int64_t np = pixels - p0 < per ? pixels - p0 : per, n = np * channels;
        apply_push pc = {.n = (uint32_t)n, .channels = (uint32_t)channels, .cpg = (uint32_t)(channels / groups),
                         .groups = (uint32_t)groups, .has_gamma = gamma.buf != NULL, .has_beta = beta.buf != NULL,
                         .silu = fuse_silu ? 1 : 0};
        vk_bind b[5];
        TRY(vk_window_vec(vk, (fx_vk_vec){x.buf, x.off + p0 * channels}, n, 0, &b[0], &pc.x_base, err));
        TRY(vk_window_vec(vk, (fx_vk_vec){y.buf, y.off + p0 * channels}, n, 1, &b[1], &pc.y_base, err));
        TRY(vk_window_vec(vk, stats, 2 * (int64_t)groups, 0, &b[2], &pc.stats_base, err));
        TRY(vk_window_vec(vk, gamma, channels, 0, &b[3], &pc.gamma_base, err));
        TRY(vk_window_vec(vk, beta, channels, 0, &b[4], &pc.beta_base, err));
        int64_t groups_needed = (n + wg - 1) / wg;
        uint32_t gx = (uint32_t)(groups_needed < GRID_MAX ? groups_needed : GRID_MAX);
        uint32_t gy = (uint32_t)((groups_needed + gx - 1) / gx);
        TRY(vk_dispatch(vk, p, b, &pc, gx, gy, 1, err));
    }
    return FLUX_OK;
}

flux_status fx_vk_groupnorm(fx_vk *vk, int64_t pixels, int channels, int groups, fx_vk_vec x, fx_vk_vec gamma,
                            fx_vk_vec beta, float eps, int fuse_silu, fx_vk_vec y, fx_err *err) {
    TRY(vk_check_alive(vk, err));
    TRY(check("groupnorm", pixels, channels, groups, x, err));
    const int64_t nparts = partial_floats(vk, pixels, channels, groups);
    fx_vk_buf *s;
    TRY(vk_scratch(vk, (uint64_t)(nparts + 2 * (int64_t)groups) * 4, &s, err));
    fx_vk_vec stats = {s, nparts};
    TRY(gn_stats(vk, pixels, channels, groups, x, eps, stats, (fx_vk_vec){s, 0}, err));
    return fx_vk_groupnorm_apply(vk, pixels, channels, groups, x, stats, gamma, beta, fuse_silu, y, err);
}
