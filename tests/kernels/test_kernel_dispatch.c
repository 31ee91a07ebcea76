/*
 * test_kernel_dispatch.c — ISA detection, the table lookup rules and the
 * --cpu-info description (fx_kernels_describe).
 */
#include "kernel_isas.h"

TEST(kernel_dispatch_tables) {
    fx_isa best = fx_isa_detect();
    CHECK(fx_kernels_get(FX_ISA_SCALAR, 0) != NULL);
    CHECK(fx_kernels_get(best, 0) != NULL);
    CHECK(fx_kernels_get(FX_ISA_COUNT, 0) == NULL);
    for (int i = 0; i < FX_ISA_COUNT; i++) {
        const fx_kernels *k = fx_kernels_get((fx_isa)i, 0);
        if (!k) continue;
        CHECK_EQ_INT(fx_kernels_isa(k), i);
        CHECK(fx_isa_parse(fx_isa_name((fx_isa)i)) == i);
        /* f32-forced tables never use bf16 dot products */
        CHECK(!fx_kernels_uses_bf16_dot(fx_kernels_get((fx_isa)i, 1)));
    }
#if defined(__aarch64__)
    CHECK(best == FX_ISA_NEON);
    CHECK(fx_kernels_get(FX_ISA_AVX2, 0) == NULL);
#elif defined(__x86_64__)
    CHECK(fx_kernels_get(FX_ISA_NEON, 0) == NULL);
    if (best >= FX_ISA_AVX2) CHECK(fx_kernels_get(FX_ISA_AVX2, 0) != NULL);
#endif
    CHECK(fx_isa_parse("sse9") == -1);
}

TEST(kernel_dispatch_describe) {
    fx_isa best = fx_isa_detect();
    char buf[4096];
    const fx_kernels *k = fx_kernels_get(best, 0);
    size_t n = fx_kernels_describe(k, buf, sizeof buf);
    CHECK(n == strlen(buf) && n > 0);
    char want[64];
    snprintf(want, sizeof want, "best ISA: %s\n", fx_isa_name(best));
    CHECK_MSG(strstr(buf, want) != NULL, "no '%s' in:\n%s", want, buf);
    CHECK(strstr(buf, "gemm:") && strstr(buf, "attention:") && strstr(buf, "row ops:"));
    CHECK(strstr(buf, "lowered from") == NULL);
#if defined(__x86_64__)
    CHECK(strstr(buf, "cpu:      x86-64 with") != NULL);
    if (best >= FX_ISA_AVX2) CHECK(strstr(buf, " avx2") && strstr(buf, " fma") && strstr(buf, " f16c"));
#elif defined(__aarch64__)
    CHECK(strstr(buf, "neon") != NULL);
#endif
    if (best != FX_ISA_SCALAR) { /* a lower level says so */
        fx_kernels_describe(fx_kernels_get(FX_ISA_SCALAR, 0), buf, sizeof buf);
        snprintf(want, sizeof want, "lowered from %s", fx_isa_name(best));
        CHECK_MSG(strstr(buf, want) != NULL, "no '%s' in:\n%s", want, buf);
    }
    if (best == FX_ISA_AVX512BF16) {
        fx_kernels_describe(fx_kernels_get(best, 1), buf, sizeof buf);
        CHECK(strstr(buf, "bf16 dot products off") != NULL);
    }
    /* truncation: returns the full length, writes a terminated prefix */
    char small[16];
    size_t m = fx_kernels_describe(k, small, sizeof small);
    CHECK(m == n && strlen(small) == sizeof small - 1);
    CHECK(fx_kernels_describe(k, NULL, 0) == n);
}
