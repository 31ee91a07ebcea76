/*
 * vk_test.c — see vk_test.h.
 */
#include "vk_test.h"

#include "src/ops/ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

fx_vk *vkt_open(const fx_vk_opts *opts) {
    fx_vk_opts o;
    if (opts) o = *opts;
    else fx_vk_opts_init(&o);
    if (o.device == FX_VK_DEVICE_AUTO) o.device = FX_VK_DEVICE_ANY;
    const char *dev = getenv("FLUX_VK_DEVICE");
    if (dev && *dev) o.device = atoi(dev);
    o.validation = 1;
    fx_vk *vk = NULL;
    fx_err err = {0};
    flux_status st = fx_vk_open(&o, &vk, &err);
    if (st != FLUX_OK && strstr(err.msg, "validation requested")) {
        if (fx_test_in_ci()) {
            fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
            return NULL;
        }
        printf("    note: %s; running without validation\n", err.msg);
        o.validation = 0;
        fx_err_clear(&err);
        st = fx_vk_open(&o, &vk, &err);
    }
    if (st != FLUX_OK) {
        char reason[FX_ERR_MSG_MAX + 32];
        snprintf(reason, sizeof reason, "no Vulkan device: %s", err.msg);
        fx_test_skip(reason);
        return NULL;
    }
    return vk;
}

fx_vk *vkt_open_limits(fx_vk_gemm_variant gemm, uint64_t max_binding, int gpu_tuning) {
    fx_vk_opts o;
    fx_vk_opts_init(&o);
    o.gemm = gemm;
    o.max_binding_bytes = max_binding;
    o.gpu_tuning = gpu_tuning;
    return vkt_open(&o);
}

void vkt_check_passes(fx_vk *vk, const char *label, size_t ncases, uint64_t max_binding, uint64_t more_than) {
    uint64_t n = fx_vk_dispatch_count(vk);
    printf("    %s: %llu dispatches for %zu cases\n", label, (unsigned long long)n, ncases);
    if (max_binding && n <= more_than)
        fx_test_fail(__FILE__, __LINE__, "%s: %llu dispatches: the binding limit of %llu bytes split nothing", label,
                     (unsigned long long)n, (unsigned long long)max_binding);
}

void vkt_close(fx_vk *vk) {
    if (!vk) return;
    fx_err err = {0};
    if (fx_vk_sync(vk, &err) != FLUX_OK) fx_test_fail(__FILE__, __LINE__, "sync at close: %s", err.msg);
    const char *first;
    int n = fx_vk_validation_errors(vk, &first);
    if (n) fx_test_fail(__FILE__, __LINE__, "%d Vulkan validation error(s), first: %s", n, first);
    fx_vk_close(vk);
}

void vkt_kctx(fx_kctx *kc) {
    fx_kctx_init(kc, fx_kernels_get(FX_ISA_SCALAR, 0), 1, fx_scratch_new(1));
}

void vkt_kctx_free(fx_kctx *kc) { fx_scratch_free(kc->scratch); }

fx_vk_buf *vkt_upload(fx_vk *vk, const float *host, size_t n, const char *what) {
    fx_vk_buf *b = NULL;
    fx_err err = {0};
    if (fx_vk_buf_new(vk, n * 4, what, &b, &err) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "buffer %s: %s", what, err.msg);
        return NULL;
    }
    float *zeros = host ? NULL : calloc(n ? n : 1, 4);
    flux_status st = fx_vk_upload(vk, b, 0, host ? host : zeros, n * 4, &err);
    free(zeros);
    if (st != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "upload %s: %s", what, err.msg);
        fx_vk_buf_free(vk, b);
        return NULL;
    }
    return b;
}

float *vkt_download(fx_vk *vk, const fx_vk_buf *b, size_t off, size_t n) {
    float *out = malloc(n ? n * 4 : 4);
    fx_err err = {0};
    if (fx_vk_download(vk, b, off * 4, out, n * 4, &err) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "download: %s", err.msg);
        free(out);
        return NULL;
    }
    return out;
}

float *vkt_random(fx_test_rng *r, size_t n, float scale) {
    float *p = malloc(n ? n * 4 : 4);
    fx_test_fill_uniform(r, p, n, scale);
    return p;
}

int vkt_check_close(const char *what, const float *got, const float *want, size_t n, double tol) {
    double err = 0, ref = 1;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        /* a non-finite reference (fp8 NaN / inf codes) needs the same class */
        if (!isfinite(want[i]) && (isnan(want[i]) ? isnan(got[i]) : got[i] == want[i])) continue;
        double d = fabs((double)got[i] - (double)want[i]);
        if (d != d) { /* NaN counts as the worst, and stays so */
            if (err == err) at = i;
            err = NAN;
        } else if (d > err) {
            err = d, at = i;
        }
        if (fabs((double)want[i]) > ref) ref = fabs((double)want[i]);
    }
    int ok = err <= tol * ref;
    printf("    %s: max |err| %.3g (scale %.3g, tol %.1g)%s\n", what, err, ref, tol, ok ? "" : "  FAIL");
    if (!ok)
        fx_test_fail(__FILE__, __LINE__, "%s: element %zu is %.9g, want %.9g", what, at, (double)got[at],
                     (double)want[at]);
    return ok;
}

/* 1 when a Vulkan device opens (the validation layer switched on for the
 * contexts when installed; under CI=true it must be); else skipped. */
int vkt_device_ready(void) {
    fx_kctx kc;
    vkt_kctx(&kc);
    fx_ops *ops = NULL;
    fx_err err = {0};
    fx_ops_opts o = {.backend = "vulkan", .device = -1, .validation = 1};
    flux_status st = fx_ops_open(&o, &kc, &ops, &err);
    if (st != FLUX_OK && strstr(err.msg, "validation requested") && !fx_test_in_ci()) {
        printf("    note: %s; running without validation\n", err.msg);
        o.validation = 0;
        fx_err_clear(&err);
        st = fx_ops_open(&o, &kc, &ops, &err);
    }
    fx_ops_close(ops);
    vkt_kctx_free(&kc);
    if (st != FLUX_OK) {
        char reason[FX_ERR_MSG_MAX + 32];
        snprintf(reason, sizeof reason, "no Vulkan device: %s", err.msg);
        fx_test_skip(reason);
        return 0;
    }
    setenv("FLUX_VK_VALIDATION", o.validation ? "1" : "0", 1);
    return 1;
}

/* x and y are views with offsets and padded rows; y starts random so that
 * accumulating epilogues are tested. */
void vkt_linear_vs_cpu(fx_vk *vk, fx_test_rng *r, int64_t m, const fx_weight *hw, fx_epilogue_mode mode, int has_bias,
                       double tol, const char *label) {
    const int64_t n = hw->n, k = hw->k;
    const int64_t ldx = k + 3, ldy = n + 5, xoff = 7, yoff = 2;
    const size_t xn = (size_t)(xoff + m * ldx), yn = (size_t)(yoff + m * ldy);
    float *x = vkt_random(r, xn, 1.0f), *y = vkt_random(r, yn, 1.0f);
    float *bias = vkt_random(r, (size_t)n, 1.0f), *gate = vkt_random(r, (size_t)n, 1.0f);

    fx_kctx kc;
    vkt_kctx(&kc);
    float *want = malloc(yn * 4);
    memcpy(want, y, yn * 4);
    fx_epilogue he = {mode, has_bias ? bias : NULL, gate};
    fx_linear(&kc, m, x + xoff, ldx, hw, want + yoff, ldy, &he);
    vkt_kctx_free(&kc);

    fx_err err = {0};
    fx_vk_weight dw;
    fx_vk_buf *bx = vkt_upload(vk, x, xn, "x"), *by = vkt_upload(vk, y, yn, "y");
    fx_vk_buf *bb = vkt_upload(vk, bias, (size_t)n, "bias"), *bg = vkt_upload(vk, gate, (size_t)n, "gate");
    if (bx && by && bb && bg && fx_vk_weight_upload(vk, hw, "w", &dw, &err) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "weight upload: %s", err.msg);
    } else if (bx && by && bb && bg) {
        fx_vk_epilogue e = {.mode = mode, .bias = {has_bias ? bb : NULL, 0}, .gate = {bg, 0}};
        flux_status st = fx_vk_linear(vk, m, (fx_vk_mat){bx, xoff, ldx}, &dw, (fx_vk_mat){by, yoff, ldy}, &e, &err);
        if (st != FLUX_OK) fx_test_fail(__FILE__, __LINE__, "linear %s: %s", fx_dtype_name(hw->dtype), err.msg);
        float *got = st == FLUX_OK ? vkt_download(vk, by, 0, yn) : NULL;
        if (got) {
            char what[128];
            snprintf(what, sizeof what, "%s m=%lld n=%lld k=%lld %s mode %d", label, (long long)m, (long long)n,
                     (long long)k, fx_dtype_name(hw->dtype), (int)mode);
            vkt_check_close(what, got, want, yn, tol); /* padding between rows must be untouched too */
        }
        free(got);
        fx_vk_weight_free(vk, &dw);
    }
    fx_vk_buf_free(vk, bx), fx_vk_buf_free(vk, by), fx_vk_buf_free(vk, bb), fx_vk_buf_free(vk, bg);
    free(x), free(y), free(bias), free(gate), free(want);
}
