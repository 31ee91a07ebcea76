/*
 * vk_test.h — helpers of the Vulkan backend tests (built with VULKAN=1).
 *
 * vkt_open gives each test its own context on the best device, a CPU device
 * (lavapipe) included, or on FLUX_VK_DEVICE=<index>. The Khronos validation
 * layer is enabled whenever it is installed (under CI=true it must be) and
 * vkt_close fails the test on any validation error. Without a Vulkan device
 * the test is skipped with the reason, which under CI=true is a failure.
 *
 * Reference results come from the CPU scalar kernels (one thread).
 */
#ifndef FX_TEST_VK_H
#define FX_TEST_VK_H

#include <stdlib.h>

#include "simd/kernels.h"
#include "src/vulkan/vk.h"
#include "tests/test.h"

/* NULL after reporting a skip or a failure; opts may be NULL. */
fx_vk *vkt_open(const fx_vk_opts *opts);
void vkt_close(fx_vk *vk);
/* For whole generations through flux.h: 1 when a Vulkan device opens
 * through the ops seam, with FLUX_VK_VALIDATION set for the contexts made
 * next (the validation layer when installed; under CI=true it must be);
 * else the test is skipped (a failure under CI=true) and 0. */
int vkt_device_ready(void);
/* vkt_open with a GEMM variant, a binding limit (0 = the device's) and
 * GPU tile sizes forced on (what a GPU runs, exercised on lavapipe). */
fx_vk *vkt_open_limits(fx_vk_gemm_variant gemm, uint64_t max_binding, int gpu_tuning);
/* Prints the dispatches recorded for ncases cases; with a binding limit
 * (operations split into passes) fails unless there were more than
 * `more_than`. */
void vkt_check_passes(fx_vk *vk, const char *label, size_t ncases, uint64_t max_binding, uint64_t more_than);

/* Scalar reference kernel context (one thread); free with vkt_kctx_free. */
void vkt_kctx(fx_kctx *kc);
void vkt_kctx_free(fx_kctx *kc);

/* A device buffer holding n floats of host (NULL: zeros); NULL after a failure. */
fx_vk_buf *vkt_upload(fx_vk *vk, const float *host, size_t n, const char *what);
/* n floats from float index off of b (malloc'd); NULL after a failure. */
float *vkt_download(fx_vk *vk, const fx_vk_buf *b, size_t off, size_t n);

/* fx_vk_linear of a host weight (uploaded here) against fx_linear on the
 * CPU scalar kernels: m rows of random x, random y (accumulating
 * epilogues), bias and gate drawn from r; x and y are strided views with
 * offsets. Fails the test beyond tol (vkt_check_close). */
void vkt_linear_vs_cpu(fx_vk *vk, fx_test_rng *r, int64_t m, const fx_weight *hw, fx_epilogue_mode mode,
                       int has_bias, double tol, const char *label);

/* Random floats in [-scale, scale) (malloc'd). */
float *vkt_random(fx_test_rng *r, size_t n, float scale);

/* Fails the test when max|got − want| > tol·max(1, max|want|) over n
 * values; a NaN or infinite want needs a NaN or the same infinity (and
 * leaves the scale alone). Prints the error either way. Returns 1 if within. */
int vkt_check_close(const char *what, const float *got, const float *want, size_t n, double tol);

#endif
