/*
 * test_ops.c — the backend seam (src/ops): a backend is chosen by its name
 * in the list (an unknown name is an error listing the names; auto always
 * ends on some backend); the CPU backend keeps a weight's int8 form as its
 * own per-weight state: linear computes from it bit for bit as fx_linear
 * does from the blocks, it is counted in the memory stats while held and
 * released by fx_ops_weight_free (also of a weight never registered).
 */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>

#include "simd/kernels.h"
#include "src/ops/ops.h"

static void scalar_kctx(fx_kctx *kc) { fx_kctx_init(kc, fx_kernels_get(FX_ISA_SCALAR, 0), 1, fx_scratch_new(1)); }

TEST(ops_backend_chosen_by_name) {
    fx_kctx kc;
    scalar_kctx(&kc);
    fx_err err = {0};
    fx_ops *ops = NULL;
    fx_ops_opts o = {.backend = "cpu", .device = -1};
    CHECK_EQ_INT(fx_ops_open(&o, &kc, &ops, &err), FLUX_OK);
    if (ops) {
        CHECK(!strcmp(fx_ops_backend(ops), "cpu") && !strcmp(fx_ops_name(ops), "cpu"));
        CHECK(fx_ops_on_host(ops) && fx_ops_kctx(ops) == &kc && fx_ops_device_errors(ops, NULL) == 0);
        fx_ops_close(ops), ops = NULL;
    }
    o.backend = "tpu";
    CHECK_EQ_INT(fx_ops_open(&o, &kc, &ops, &err), FLUX_ERR_INVALID_ARG);
    CHECK_MSG(!ops && strstr(err.msg, "tpu") && strstr(err.msg, "cpu") && strstr(err.msg, "vulkan"), "%s", err.msg);
    o.backend = NULL; /* auto: the CPU at the latest */
    fx_err_clear(&err);
    CHECK_MSG(fx_ops_open(&o, &kc, &ops, &err) == FLUX_OK && ops, "%s", err.msg);
    fx_ops_close(ops);
    fx_scratch_free(kc.scratch);
}

TEST(ops_cpu_int8_form_is_backend_state) {
    enum { M = 3, N = 8, K = 64 };
    fx_kctx kc;
    scalar_kctx(&kc);
    kc.int8 = 1;
    fx_mem_stats mem;
    fx_mem_stats_init(&mem);
    fx_err err = {0};
    fx_ops *ops = NULL;
    fx_ops_opts o = {.backend = "cpu", .device = -1, .mem = &mem};
    REQUIRE(fx_ops_open(&o, &kc, &ops, &err) == FLUX_OK);
    fx_test_rng r;
    fx_test_rng_seed(&r, 23);
    float wf[N * K], x[M * K], want[M * N], got[M * N];
    for (int i = 0; i < N * K; i++) wf[i] = 0.05f * fx_test_rng_uniform(&r);
    for (int i = 0; i < M * K; i++) x[i] = fx_test_rng_uniform(&r);
    char *q = malloc((size_t)fx_dtype_row_bytes(FX_DTYPE_Q8_0, N * K));
    for (int j = 0; j < N; j++) fx_quantize_row(FX_DTYPE_Q8_0, wf + j * K, K, q + fx_dtype_row_bytes(FX_DTYPE_Q8_0, j * K));
    const fx_weight w = {.data = q, .dtype = FX_DTYPE_Q8_0, .n = N, .k = K, .ld = K};
    fx_linear(&kc, M, x, K, &w, want, N, NULL); /* the blocks converted per call */

    fx_opw ow, of32;
    CHECK_EQ_INT(fx_ops_weight(ops, &w, "q8 weight", &ow, &err), FLUX_OK);
    CHECK(fx_ops_weight_int8_form(ops, &ow) == 1 && ow.state != NULL);
    CHECK(fx_ops_weight_int8_form(ops, &ow) == 1); /* made once */
    CHECK(mem.cur[FX_MEM_WEIGHT_FORMS] > 0);
    const fx_weight wf32 = {.data = wf, .dtype = FX_DTYPE_F32, .n = N, .k = K, .ld = K};
    CHECK_EQ_INT(fx_ops_weight(ops, &wf32, "f32 weight", &of32, &err), FLUX_OK);
    CHECK(fx_ops_weight_int8_form(ops, &of32) == 0 && of32.state == NULL); /* the type wants none */

    fx_buf *bx = NULL, *by = NULL;
    CHECK_EQ_INT(fx_ops_vector(ops, x, M * K, "x", &bx, &err), FLUX_OK);
    CHECK_EQ_INT(fx_buf_new(ops, M * N, "y", &by, &err), FLUX_OK);
    fx_view vx = {bx, 0, K}, vy = {by, 0, N};
    CHECK_EQ_INT(fx_op_linear(ops, M, vx, &ow, vy, NULL, &err), FLUX_OK);
    CHECK_EQ_INT(fx_buf_read(ops, by, 0, got, M * N, &err), FLUX_OK);
    CHECK(!memcmp(got, want, sizeof got));

    fx_ops_weight_free(ops, &ow);
    CHECK(ow.state == NULL && mem.cur[FX_MEM_WEIGHT_FORMS] == 0);
    fx_ops_weight_free(ops, &ow); /* twice, and a weight never registered: nothing kept */
    fx_opw never = {0};
    fx_ops_weight_free(ops, &never);
    fx_ops_weight_free(ops, &of32);
    fx_buf_free(ops, bx), fx_buf_free(ops, by);
    CHECK(mem.cur[FX_MEM_ACTIVATIONS] == 0);
    fx_ops_close(ops);
    free(q);
    fx_scratch_free(kc.scratch);
}
