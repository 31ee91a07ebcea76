/*
 * test_vk_device.c — the Vulkan runtime: device list and choice, transfers
 * (mapped and staged), binding windows, errors (no loader, no driver, out
 * of memory, bad index, lost device), validation-clean recording.
 */
#include "vk_test.h"

#include <stdio.h>
#include <string.h>

TEST(vk_list_devices) {
    fx_vk_device_info info[8];
    int n = 0;
    fx_err err = {0};
    if (fx_vk_list_devices(NULL, info, 8, &n, &err) != FLUX_OK || n == 0) {
        char reason[FX_ERR_MSG_MAX + 32];
        snprintf(reason, sizeof reason, "no Vulkan device: %s", n == 0 && !err.msg[0] ? "none listed" : err.msg);
        SKIP(reason);
    }
    for (int i = 0; i < n && i < 8; i++) {
        printf("    device %d: %s (%s), %s, usable=%d %s\n", i, info[i].name, fx_vk_device_type_name(info[i].type),
               info[i].driver, info[i].usable, info[i].why_not);
        CHECK_EQ_INT(info[i].index, i);
        CHECK(info[i].name[0] != 0);
        CHECK(info[i].max_binding >= 1u << 20);
        if (info[i].usable) CHECK(info[i].subgroup_size >= 4);
    }
}

/* auto never takes a CPU device; an explicit index may. */
TEST(vk_auto_skips_cpu_devices) {
    fx_vk_device_info info[8];
    int n = 0;
    fx_err err = {0};
    if (fx_vk_list_devices(NULL, info, 8, &n, &err) != FLUX_OK || n == 0) SKIP("no Vulkan device");
    int gpus = 0, cpu = -1;
    for (int i = 0; i < n && i < 8; i++) {
        if (!info[i].usable) continue;
        if (info[i].type == FX_VK_DEV_CPU) {
            if (cpu < 0) cpu = i;
        } else {
            gpus++;
        }
    }
    fx_vk_opts o;
    fx_vk_opts_init(&o);
    fx_vk *vk = NULL;
    flux_status st = fx_vk_open(&o, &vk, &err);
    if (gpus == 0) {
        CHECK_EQ_INT(st, FLUX_ERR_UNSUPPORTED);
        CHECK(vk == NULL);
        printf("    auto: %s\n", err.msg);
        if (cpu >= 0) CHECK_MSG(strstr(err.msg, "--device") != NULL, "the message names --device: %s", err.msg);
    } else {
        REQUIRE_MSG(st == FLUX_OK, "auto with a GPU present: %s", err.msg);
        CHECK(fx_vk_device(vk)->type != FX_VK_DEV_CPU);
        fx_vk_close(vk);
    }
    if (cpu >= 0) {
        o.device = cpu;
        st = fx_vk_open(&o, &vk, &err);
        REQUIRE_MSG(st == FLUX_OK, "explicit CPU device: %s", err.msg);
        CHECK_EQ_INT(fx_vk_device(vk)->type, FX_VK_DEV_CPU);
        char line[512];
        CHECK(fx_vk_describe(vk, line, sizeof line) > 0);
        printf("    %s\n", line);
        fx_vk_close(vk);
    }
}

TEST(vk_bad_device_index) {
    fx_vk_opts o;
    fx_vk_opts_init(&o);
    o.device = 99;
    fx_vk *vk = NULL;
    fx_err err = {0};
    flux_status st = fx_vk_open(&o, &vk, &err);
    CHECK(st != FLUX_OK);
    CHECK(vk == NULL);
    printf("    %s\n", err.msg);
    if (!strstr(err.msg, "no Vulkan driver") && !strstr(err.msg, "no Vulkan device"))
        CHECK_MSG(strstr(err.msg, "device 99") != NULL, "message names the index: %s", err.msg);
}

TEST(vk_no_loader_is_an_error) {
    fx_vk_opts o;
    fx_vk_opts_init(&o);
    o.loader = "/nonexistent/libvulkan.so.1";
    fx_vk *vk = NULL;
    fx_err err = {0};
    CHECK_EQ_INT(fx_vk_open(&o, &vk, &err), FLUX_ERR_UNSUPPORTED);
    CHECK(vk == NULL);
    CHECK_MSG(strstr(err.msg, "/nonexistent/libvulkan.so.1") != NULL, "names the loader: %s", err.msg);
    fx_vk_device_info info[1];
    int n = -1;
    CHECK_EQ_INT(fx_vk_list_devices(&o, info, 1, &n, &err), FLUX_ERR_UNSUPPORTED);
    CHECK_EQ_INT(n, 0);
}

/* A driver list that names no driver: the loader finds none. */
TEST(vk_no_driver_is_an_error) {
    setenv("VK_DRIVER_FILES", "/nonexistent/icd.json", 1);
    setenv("VK_ICD_FILENAMES", "/nonexistent/icd.json", 1);
    fx_vk_opts o;
    fx_vk_opts_init(&o);
    o.device = FX_VK_DEVICE_ANY;
    fx_vk *vk = NULL;
    fx_err err = {0};
    flux_status st = fx_vk_open(&o, &vk, &err);
    if (st == FLUX_OK && vk) { /* a loader that ignores the variables: nothing to check */
        fx_vk_close(vk);
        printf("    note: this loader ignored VK_DRIVER_FILES\n");
        return;
    }
    if (strstr(err.msg, "cannot load the Vulkan loader")) SKIP("no Vulkan loader installed");
    CHECK_EQ_INT(st, FLUX_ERR_UNSUPPORTED);
    printf("    %s\n", err.msg);
    CHECK(strstr(err.msg, "no Vulkan") != NULL);
}

static void roundtrip(int force_staging) {
    fx_vk_opts o;
    fx_vk_opts_init(&o);
    o.force_staging = force_staging;
    fx_vk *vk = vkt_open(&o);
    if (!vk) return;
    const size_t n = 5000;
    fx_test_rng r;
    fx_test_rng_seed(&r, 1);
    float *host = vkt_random(&r, n, 1.0f);
    fx_vk_buf *b = vkt_upload(vk, host, n, "roundtrip");
    if (b) {
        float *back = vkt_download(vk, b, 0, n);
        if (back) CHECK(!memcmp(back, host, n * 4));
        free(back);
        /* partial update, partial read */
        fx_err err = {0};
        float v[3] = {7, 8, 9};
        CHECK(fx_vk_upload(vk, b, 4 * 100, v, sizeof v, &err) == FLUX_OK);
        back = vkt_download(vk, b, 99, 5);
        if (back) CHECK(back[0] == host[99] && back[1] == 7 && back[3] == 9 && back[4] == host[103]);
        free(back);
        /* out of range */
        CHECK_EQ_INT(fx_vk_download(vk, b, 4 * n - 4, v, 8, &err), FLUX_ERR_INVALID_ARG);
        printf("    %s\n", err.msg);
        fx_vk_buf_free(vk, b);
    }
    free(host);
    vkt_close(vk);
}

TEST(vk_upload_download_mapped) { roundtrip(0); }
TEST(vk_upload_download_staged) { roundtrip(1); }

TEST(vk_out_of_memory_names_the_size) {
    fx_vk *vk = vkt_open(NULL);
    if (!vk) return;
    fx_vk_buf *b = NULL;
    fx_err err = {0};
    const uint64_t huge = (uint64_t)1 << 46; /* 64 TiB */
    CHECK_EQ_INT(fx_vk_buf_new(vk, huge, "a huge tensor", &b, &err), FLUX_ERR_NOMEM);
    CHECK(b == NULL);
    printf("    %s\n", err.msg);
    CHECK(strstr(err.msg, "70368744177664") != NULL);
    CHECK(strstr(err.msg, "a huge tensor") != NULL);
    /* the context stays usable */
    b = vkt_upload(vk, NULL, 16, "small");
    CHECK(b != NULL);
    fx_vk_buf_free(vk, b);
    vkt_close(vk);
}

TEST(vk_device_lost_is_an_error) {
    fx_vk *vk = vkt_open(NULL);
    if (!vk) return;
    fx_vk_buf *b = vkt_upload(vk, NULL, 64, "x");
    REQUIRE(b);
    fx_err err = {0};
    CHECK(fx_vk_silu(vk, 64, (fx_vk_vec){b, 0}, &err) == FLUX_OK);
    fx_vk_inject_device_lost(vk);
    CHECK_EQ_INT(fx_vk_sync(vk, &err), FLUX_ERR_INTERNAL);
    printf("    %s\n", err.msg);
    CHECK(strstr(err.msg, "device lost") != NULL);
    /* everything after reports the same error, nothing crashes */
    float v[4];
    CHECK_EQ_INT(fx_vk_download(vk, b, 0, v, sizeof v, &err), FLUX_ERR_INTERNAL);
    CHECK_EQ_INT(fx_vk_silu(vk, 64, (fx_vk_vec){b, 0}, &err), FLUX_ERR_INTERNAL);
    fx_vk_buf *c = NULL;
    CHECK_EQ_INT(fx_vk_buf_new(vk, 64, "after", &c, &err), FLUX_ERR_INTERNAL);
    fx_vk_buf_free(vk, b);
    fx_vk_close(vk);
}

/* Bad views are argument errors, recorded nothing. */
TEST(vk_argument_errors) {
    fx_vk *vk = vkt_open(NULL);
    if (!vk) return;
    fx_vk_buf *b = vkt_upload(vk, NULL, 100, "small");
    REQUIRE(b);
    fx_err err = {0};
    fx_vk_mat m = {b, 0, 10};
    CHECK_EQ_INT(fx_vk_rmsnorm(vk, 11, 10, m, (fx_vk_vec){0}, 1e-6f, m, &err), FLUX_ERR_INVALID_ARG);
    printf("    %s\n", err.msg);
    CHECK_EQ_INT(fx_vk_softmax_rows(vk, 2, 20, m, &err), FLUX_ERR_INVALID_ARG);
    fx_vk_attn_args a = {.sq = 2, .sk = 2, .hq = 3, .hkv = 2, .d = 4, .q = m, .k = m, .v = m, .o = m, .scale = 1};
    CHECK_EQ_INT(fx_vk_attention(vk, &a, &err), FLUX_ERR_INVALID_ARG);
    printf("    %s\n", err.msg);
    CHECK_EQ_INT(fx_vk_convert(vk, 10, b, 0, FX_DTYPE_BF16, b, 0, FX_DTYPE_F16, &err), FLUX_ERR_INVALID_ARG);
    fx_vk_buf_free(vk, b);
    vkt_close(vk);
}

/* The messenger really sees validation errors: an invalid (but harmless)
 * call through the context's own function table must be counted. */
#include "src/vulkan/vk_internal.h"

TEST(vk_validation_errors_are_counted) {
    fx_vk *vk = vkt_open(NULL);
    if (!vk) return;
    if (!vk->opts.validation) {
        fx_vk_close(vk);
        SKIP("the validation layer is not installed");
    }
    CHECK_EQ_INT(fx_vk_validation_errors(vk, NULL), 0);
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, .flags = 0x10}; /* no such flag */
    VkFence f = VK_NULL_HANDLE;
    if (vk->f.vkCreateFence(vk->dev, &fci, NULL, &f) == VK_SUCCESS && f) vk->f.vkDestroyFence(vk->dev, f, NULL);
    const char *first;
    int n = fx_vk_validation_errors(vk, &first);
    printf("    %d error(s): %.120s\n", n, first);
    CHECK(n >= 1);
    fx_vk_close(vk);
}
