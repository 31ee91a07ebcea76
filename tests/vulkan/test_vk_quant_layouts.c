/*
 * test_vk_quant_layouts.c — the scaled layouts the device does not read
 * (README "Scaled layouts": int8, NVFP4, fp8 with side scales) are refused
 * by flux_load on the Vulkan backend, naming the tensor and the layout,
 * while the CPU loads the same file.
 */
#include "vk_test.h"

#include "flux.h"
#include "src/formats/safetensors_write.h"
#include "src/formats/weight_set.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The golden transformer with 'transformer_blocks.0.attn.to_q.weight' as
 * int8 codes and one per-tensor scale, into path; 0 or -1. */
static int write_int8_transformer(const char *path) {
    fx_err err = {0};
    fx_wset *src = fx_wset_open(fx_test_path("golden/model/transformer/diffusion_pytorch_model.safetensors"), NULL,
                                1, &err);
    if (!src) return -1;
    const size_t n = fx_wset_count(src);
    fx_safetensors_out *t = calloc(n + 1, sizeof *t);
    static int8_t codes[64 * 64];
    static const float scale = 0.001f;
    for (int i = 0; i < 64 * 64; i++) codes[i] = (int8_t)(i % 255 - 127);
    size_t k = 0;
    for (size_t i = 0; t && i < n; i++) {
        const fx_tensor *s = fx_wset_tensor_at(src, i);
        if (!strcmp(s->name, "transformer_blocks.0.attn.to_q.weight"))
            t[k++] = (fx_safetensors_out){s->name, FX_DTYPE_I8, s->shape, codes};
        else t[k++] = (fx_safetensors_out){s->name, s->dtype, s->shape, fx_tensor_data(s)};
    }
    if (t) t[k++] = (fx_safetensors_out){"transformer_blocks.0.attn.to_q.weight_scale", FX_DTYPE_F32, FX_SHAPE0, &scale};
    int rc = t && !fx_safetensors_write(path, t, k, NULL, 0, &err) ? 0 : -1;
    if (rc) fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
    free(t);
    fx_wset_close(src);
    return rc;
}

static flux_status load_on(flux_backend backend, const char *file, char *msg, size_t size) {
    flux_options o;
    flux_options_init(&o);
    o.backend = backend;
    flux_ctx *ctx = flux_new(&o);
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.transformer_file = file;
    flux_status st = ctx ? flux_load(ctx, fx_test_path("golden/model"), &lo) : FLUX_ERR_NOMEM;
    snprintf(msg, size, "%s", ctx ? flux_error(ctx) : "");
    flux_free(ctx);
    return st;
}

TEST(vk_int8_transformer_refused_at_load) {
    char file[PATH_MAX], msg[1024];
    snprintf(file, sizeof file, "%s/int8.safetensors", fx_test_tmpdir());
    REQUIRE(write_int8_transformer(file) == 0);
    CHECK_MSG(load_on(FLUX_BACKEND_CPU, file, msg, sizeof msg) == FLUX_OK, "CPU: %s", msg);
    if (!vkt_device_ready()) return;
    flux_status st = load_on(FLUX_BACKEND_VULKAN, file, msg, sizeof msg);
    CHECK_EQ_INT(st, FLUX_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(msg, "Vulkan") && strstr(msg, "transformer_blocks.0.attn.to_q.weight") && strstr(msg, "int8"),
              "error: %s", msg);
}
