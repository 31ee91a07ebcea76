/*
 * groupnorm.c — GroupNorm over channels-last data x [pixels, channels]
 * (the VAE's norm: 32 groups, biased variance, affine), with optional fused
 * SiLU.
 *
 * Statistics: pixels are cut into chunks whose size depends only on the
 * pixel count (>= 256 pixels, at most 64 chunks). Each chunk sums every
 * channel in double, pixels in order (row table gn_sums), then folds its
 * channels into per-group partials in ascending channel order; the chunks'
 * partials are added in chunk order. Nothing depends on the thread count,
 * and since the channel sums are double on every ISA, the statistics are
 * bit-identical across ISAs too.
 *
 * Apply: the group statistics are expanded to per-channel mean, factor
 * a = rstd·gamma and beta, then y = (x − mean)·a + beta per pixel.
 */
#include "rowops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GN_CHUNK_MIN 256
#define GN_MAX_CHUNKS 64
#define GN_APPLY_SPAN 64 /* pixels per parallel work item */

static inline int gn_threads(const fx_kctx *kc, int64_t work) {
    return fx_row_threads(kc, work, FX_ROW_PARALLEL_MIN);
}

/* Workspace: the context's rowops scratch slot, or malloc without one. */
static void *gn_workspace(const fx_kctx *kc, size_t bytes, void **owned) {
    *owned = NULL;
    if (kc && kc->scratch) return fx_scratch_slot_get(kc->scratch, FX_SLOT_ROWOPS, bytes);
    *owned = malloc(bytes ? bytes : 1);
    return *owned;
}

static int gn_valid(int64_t pixels, int channels, int groups) {
    return pixels > 0 && channels > 0 && groups > 0 && channels % groups == 0;
}

static int64_t gn_chunk(int64_t pixels) {
    int64_t c = (pixels + GN_MAX_CHUNKS - 1) / GN_MAX_CHUNKS;
    return c < GN_CHUNK_MIN ? GN_CHUNK_MIN : c;
}

static size_t gn_stats_bytes(int64_t pixels, int channels, int groups, int threads) {
    int64_t nchunks = (pixels + gn_chunk(pixels) - 1) / gn_chunk(pixels);
    return sizeof(double) * 2 * ((size_t)nchunks * (size_t)groups + (size_t)threads * (size_t)channels);
}

/* work: gn_stats_bytes() bytes. */
static void gn_stats(const fx_kctx *kc, int64_t pixels, int channels, int groups, const float *x,
                     float eps, float *mean, float *rstd, double *work) {
    const struct fx_row_kernels *rk = fx_row_table(kc);
    int cpg = channels / groups;
    int64_t chunk = gn_chunk(pixels), nchunks = (pixels + chunk - 1) / chunk;
    int threads = gn_threads(kc, pixels * channels); /* as in gn_stats_bytes */
    (void)threads;                                   /* unused without OpenMP */
    double *part = work;                                     /* [nchunks, groups, 2] */
    double *acc_all = work + 2 * (size_t)nchunks * groups;   /* [threads, 2, channels] */
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t k = 0; k < nchunks; k++) {
        double *acc = acc_all + 2 * (size_t)channels * fx_thread_id();
        memset(acc, 0, 2 * sizeof(double) * (size_t)channels);
        int64_t p0 = k * chunk, len = pixels - p0 < chunk ? pixels - p0 : chunk;
        rk->gn_sums(len, channels, x + p0 * channels, acc, acc + channels);
        for (int g = 0; g < groups; g++) {
            double s = 0.0, q = 0.0;
            for (int c = g * cpg; c < (g + 1) * cpg; c++) {
                s += acc[c];
                q += acc[channels + c];
            }
            part[2 * ((size_t)k * groups + g)] = s;
            part[2 * ((size_t)k * groups + g) + 1] = q;
        }
    }
    double n = (double)pixels * cpg;
    for (int g = 0; g < groups; g++) {
        double s = 0.0, q = 0.0;
        for (int64_t k = 0; k < nchunks; k++) {
            s += part[2 * ((size_t)k * groups + g)];
            q += part[2 * ((size_t)k * groups + g) + 1];
        }
        double m = s / n, var = q / n - m * m;
        if (var < 0.0) var = 0.0;
        mean[g] = (float)m;
        rstd[g] = (float)(1.0 / sqrt(var + eps));
    }
}

/* perch: 3·channels floats. */
static void gn_apply(const fx_kctx *kc, int64_t pixels, int channels, int groups, const float *x,
                     const float *mean, const float *rstd, const float *gamma, const float *beta,
                     int fuse_silu, float *y, float *perch) {
    const struct fx_row_kernels *rk = fx_row_table(kc);
    int cpg = channels / groups;
    float *m = perch, *a = perch + channels, *b = perch + 2 * (size_t)channels;
    for (int c = 0; c < channels; c++) {
        m[c] = mean[c / cpg];
        a[c] = gamma ? rstd[c / cpg] * gamma[c] : rstd[c / cpg];
        b[c] = beta ? beta[c] : 0.0f;
    }
    int64_t spans = (pixels + GN_APPLY_SPAN - 1) / GN_APPLY_SPAN;
#pragma omp parallel for schedule(static) num_threads(gn_threads(kc, pixels * channels))
    for (int64_t s = 0; s < spans; s++) {
        int64_t p0 = s * GN_APPLY_SPAN;
        int64_t len = pixels - p0 < GN_APPLY_SPAN ? pixels - p0 : GN_APPLY_SPAN;
        rk->gn_apply(len, channels, x + p0 * channels, m, a, b, fuse_silu, y + p0 * channels);
    }
}

static void fill_nan(float *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) p[i] = NAN;
}

void fx_groupnorm_stats(const fx_kctx *kc, int64_t pixels, int channels, int groups,
                        const float *x, float eps, float *mean, float *rstd) {
    if (!gn_valid(pixels, channels, groups)) return;
    int threads = gn_threads(kc, pixels * channels);
    void *owned;
    double *work = gn_workspace(kc, gn_stats_bytes(pixels, channels, groups, threads), &owned);
    if (!work) { /* out of memory: visible, never a crash */
        fill_nan(mean, groups);
        fill_nan(rstd, groups);
        return;
    }
    gn_stats(kc, pixels, channels, groups, x, eps, mean, rstd, work);
    free(owned);
}

void fx_groupnorm_apply(const fx_kctx *kc, int64_t pixels, int channels, int groups,
                        const float *x, const float *mean, const float *rstd,
                        const float *gamma, const float *beta, int fuse_silu, float *y) {
    if (!gn_valid(pixels, channels, groups)) return;
    void *owned;
    float *perch = gn_workspace(kc, 3 * sizeof(float) * (size_t)channels, &owned);
    if (!perch) {
        fill_nan(y, pixels * channels);
        return;
    }
    gn_apply(kc, pixels, channels, groups, x, mean, rstd, gamma, beta, fuse_silu, y, perch);
    free(owned);
}

/* Streamed statistics: the chunks' partials (as in gn_stats) are added to
 * acc in chunk order. */
void fx_groupnorm_sums(const fx_kctx *kc, int64_t pixels, int channels, int groups, const float *x,
                       double *acc) {
    if (!gn_valid(pixels, channels, groups)) return;
    const struct fx_row_kernels *rk = fx_row_table(kc);
    int cpg = channels / groups;
    int64_t chunk = gn_chunk(pixels), nchunks = (pixels + chunk - 1) / chunk;
    int threads = gn_threads(kc, pixels * channels);
    void *owned;
    double *work = gn_workspace(kc, gn_stats_bytes(pixels, channels, groups, threads), &owned);
    if (!work) { /* out of memory: visible, never a crash */
        for (int g = 0; g < 2 * groups; g++) acc[g] = NAN;
        return;
    }
    double *part = work, *acc_all = work + 2 * (size_t)nchunks * groups;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t k = 0; k < nchunks; k++) {
        double *a = acc_all + 2 * (size_t)channels * fx_thread_id();
        memset(a, 0, 2 * sizeof(double) * (size_t)channels);
        int64_t p0 = k * chunk, len = pixels - p0 < chunk ? pixels - p0 : chunk;
        rk->gn_sums(len, channels, x + p0 * channels, a, a + channels);
        for (int g = 0; g < groups; g++) {
            double s = 0.0, q = 0.0;
            for (int c = g * cpg; c < (g + 1) * cpg; c++) s += a[c], q += a[channels + c];
            part[2 * ((size_t)k * groups + g)] = s;
            part[2 * ((size_t)k * groups + g) + 1] = q;
        }
    }
    for (int64_t k = 0; k < nchunks; k++)
        for (int g = 0; g < groups; g++) {
            acc[2 * g] += part[2 * ((size_t)k * groups + g)];
            acc[2 * g + 1] += part[2 * ((size_t)k * groups + g) + 1];
        }
    free(owned);
}

void fx_groupnorm_finish(int64_t pixels, int channels, int groups, const double *acc, float eps,
                         float *mean, float *rstd) {
    if (!gn_valid(pixels, channels, groups)) return;
    double n = (double)pixels * (channels / groups);
    for (int g = 0; g < groups; g++) {
        double m = acc[2 * g] / n, var = acc[2 * g + 1] / n - m * m;
        if (var < 0.0) var = 0.0;
        mean[g] = (float)m;
        rstd[g] = (float)(1.0 / sqrt(var + eps));
    }
}

void fx_groupnorm(const fx_kctx *kc, int64_t pixels, int channels, int groups, const float *x,
                  const float *gamma, const float *beta, float eps, int fuse_silu, float *y) {
    if (!gn_valid(pixels, channels, groups)) return;
    int threads = gn_threads(kc, pixels * channels);
    size_t stats = gn_stats_bytes(pixels, channels, groups, threads);
    size_t perch = 3 * sizeof(float) * (size_t)channels, ms = 2 * sizeof(float) * (size_t)groups;
    stats = (stats + 63) & ~(size_t)63;
    perch = (perch + 63) & ~(size_t)63;
    void *owned;
    char *work = gn_workspace(kc, stats + perch + ms, &owned);
    if (!work) {
        fill_nan(y, pixels * channels);
        return;
    }
    float *mean = (float *)(work + stats + perch), *rstd = mean + groups;
    gn_stats(kc, pixels, channels, groups, x, eps, mean, rstd, (double *)work);
    gn_apply(kc, pixels, channels, groups, x, mean, rstd, gamma, beta, fuse_silu, y,
             (float *)(work + stats));
    free(owned);
}
