/*
 * test_vk_weights.c — weights within the device budget (vk.h fx_vk_weight):
 * registered weights that do not fit are uploaded at their use and others
 * evicted; results are bitwise those of a device holding everything.
 *   - a loop over 4 weights with room for 2.5: the first pass uploads the 2
 *     that did not fit at registration, every later pass 3 (the loop keeps
 *     one weight resident — evicting the least recently used would upload
 *     all 4 each pass); the resident bytes never exceed the budget;
 *   - a weight larger than the budget fails at its use naming the sizes;
 *     pinned uploads (fx_vk_weight_upload) are never evicted;
 *   - a device that runs out of memory (an allocation limit): weights give
 *     way to an activation buffer and are uploaded again at their use;
 *   - the CLI with --device-memory 1 (MiB) on the golden model (text
 *     encoder, transformer and VAE weights: ~8 MB) writes the same PNG byte
 *     for byte as without, and -v says the weights are streamed.
 */
#include "vk_test.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { NW = 4, WN = 48, WK = 64, XM = 5 };
#define W_BYTES ((uint64_t)WN * WK * 4)

typedef struct loop_run {
    float y[3][NW][XM * WN]; /* pass, weight, Y */
    fx_vk_weight_stats after[3];
    int ok;
} loop_run;

/* Three passes of Y = X·W_iᵀ over the NW weights on a device with budget. */
static void run_loop(uint64_t budget, float *const *hw, const float *x, loop_run *out) {
    fx_vk_opts o;
    fx_vk_opts_init(&o);
    o.device = FX_VK_DEVICE_ANY;
    o.weight_budget = budget;
    fx_vk *vk = vkt_open(&o);
    if (!vk) return;
    fx_err err = {0};
    fx_vk_weight w[NW];
    int nreg = 0;
    for (; nreg < NW; nreg++) {
        fx_weight h = {.data = hw[nreg], .dtype = FX_DTYPE_F32, .n = WN, .k = WK, .ld = WK};
        char name[32];
        snprintf(name, sizeof name, "loop weight %d", nreg);
        if (fx_vk_weight_register(vk, NULL, &h, name, &w[nreg], &err) != FLUX_OK) break;
    }
    CHECK_MSG(nreg == NW, "register: %s", err.msg);
    fx_vk_buf *bx = vkt_upload(vk, x, XM * WK, "x"), *by = vkt_upload(vk, NULL, XM * WN, "y");
    int ok = nreg == NW && bx && by;
    for (int p = 0; p < 3 && ok; p++) {
        for (int i = 0; i < NW && ok; i++) {
            ok = fx_vk_linear(vk, XM, (fx_vk_mat){bx, 0, WK}, &w[i], (fx_vk_mat){by, 0, WN}, NULL, &err) == FLUX_OK &&
                 fx_vk_download(vk, by, 0, out->y[p][i], sizeof out->y[p][i], &err) == FLUX_OK;
            const fx_vk_weight_stats s = fx_vk_weights(vk);
            CHECK_MSG(s.resident <= s.budget, "resident %llu bytes over the budget %llu",
                      (unsigned long long)s.resident, (unsigned long long)s.budget);
        }
        out->after[p] = fx_vk_weights(vk);
    }
    CHECK_MSG(ok, "loop: %s", err.msg);
    out->ok = ok;
    for (int i = 0; i < nreg; i++) fx_vk_weight_free(vk, &w[i]);
    CHECK(fx_vk_weights(vk).resident == 0 && fx_vk_weights(vk).registered == 0);
    fx_vk_buf_free(vk, bx), fx_vk_buf_free(vk, by);
    vkt_close(vk);
}

/* Random weights hw[NW] [WN, WK] and x [XM, WK] from seed (malloc'd). */
static float *loop_inputs(uint64_t seed, float **hw) {
    fx_test_rng r;
    fx_test_rng_seed(&r, seed);
    for (int i = 0; i < NW; i++) hw[i] = vkt_random(&r, (size_t)WN * WK, 1.0f);
    return vkt_random(&r, (size_t)XM * WK, 1.0f);
}

TEST(vk_weights_loop_streams_what_exceeds_the_budget) {
    float *hw[NW], *x = loop_inputs(41, hw);
    static loop_run all, tight;
    memset(&all, 0, sizeof all), memset(&tight, 0, sizeof tight);
    run_loop(0, hw, x, &all);
    run_loop(W_BYTES * 5 / 2, hw, x, &tight);
    if (all.ok && tight.ok) {
        CHECK_MSG(!memcmp(all.y, tight.y, sizeof all.y), "results depend on the budget");
        CHECK_EQ_INT((int)all.after[2].uploads, 0);
        const uint64_t want[3] = {2, 5, 8}; /* cumulative: 2, then 3 a pass */
        for (int p = 0; p < 3; p++) {
            printf("    pass %d: %llu uploads, %llu evictions, peak %llu of %llu bytes\n", p + 1,
                   (unsigned long long)tight.after[p].uploads, (unsigned long long)tight.after[p].evictions,
                   (unsigned long long)tight.after[p].peak_resident, (unsigned long long)tight.after[p].budget);
            CHECK_MSG(tight.after[p].uploads == want[p], "after pass %d: %llu uploads, want %llu", p + 1,
                      (unsigned long long)tight.after[p].uploads, (unsigned long long)want[p]);
        }
        CHECK(tight.after[2].upload_bytes == 8 * W_BYTES);
        CHECK(tight.after[2].peak_resident <= W_BYTES * 5 / 2 && tight.after[2].registered == NW * W_BYTES);
    }
    for (int i = 0; i < NW; i++) free(hw[i]);
    free(x);
}

TEST(vk_weights_over_the_budget_fail_by_name_and_pinned_stay) {
    fx_vk_opts o;
    fx_vk_opts_init(&o);
    o.device = FX_VK_DEVICE_ANY;
    o.weight_budget = W_BYTES / 2;
    fx_vk *vk = vkt_open(&o);
    if (!vk) return;
    fx_test_rng r;
    fx_test_rng_seed(&r, 42);
    float *hw = vkt_random(&r, (size_t)WN * WK, 1.0f);
    fx_weight h = {.data = hw, .dtype = FX_DTYPE_F32, .n = WN, .k = WK, .ld = WK};
    fx_err err = {0};
    fx_vk_weight big, pinned;
    fx_vk_buf *bx = vkt_upload(vk, NULL, XM * WK, "x"), *by = vkt_upload(vk, NULL, XM * WN, "y");
    REQUIRE(bx && by);
    /* registered: not uploaded (it cannot fit), refused at its use */
    REQUIRE_MSG(fx_vk_weight_register(vk, NULL, &h, "the big weight", &big, &err) == FLUX_OK, "%s", err.msg);
    CHECK(big.buf == NULL && fx_vk_weights(vk).resident == 0);
    CHECK_EQ_INT(fx_vk_linear(vk, XM, (fx_vk_mat){bx, 0, WK}, &big, (fx_vk_mat){by, 0, WN}, NULL, &err),
                 FLUX_ERR_NOMEM);
    CHECK_MSG(strstr(err.msg, "the big weight") && strstr(err.msg, "12288 bytes") && strstr(err.msg, "budget"),
              "message: %s", err.msg);
    /* pinned: uploaded over the budget, and never evicted for a registered one */
    REQUIRE_MSG(fx_vk_weight_upload(vk, &h, "pinned", &pinned, &err) == FLUX_OK, "%s", err.msg);
    CHECK(pinned.buf != NULL);
    CHECK_EQ_INT(fx_vk_linear(vk, XM, (fx_vk_mat){bx, 0, WK}, &big, (fx_vk_mat){by, 0, WN}, NULL, &err),
                 FLUX_ERR_NOMEM);
    CHECK(pinned.buf != NULL);
    CHECK_EQ_INT(fx_vk_linear(vk, XM, (fx_vk_mat){bx, 0, WK}, &pinned, (fx_vk_mat){by, 0, WN}, NULL, &err),
                 FLUX_OK);
    fx_vk_weight_free(vk, &big), fx_vk_weight_free(vk, &pinned);
    fx_vk_buf_free(vk, bx), fx_vk_buf_free(vk, by);
    free(hw);
    vkt_close(vk);
}

static int run_flux(const char *args, char **out) {
    char cmd[8448];
    snprintf(cmd, sizeof cmd, "FLUX_VK_VALIDATION=1 '%s' %s </dev/null 2>&1", fx_test_flux_bin(), args);
    return fx_test_run(cmd, out);
}

/* The file's bytes (malloc'd) and their count, or NULL. */
static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *b = malloc(1 << 20);
    *n = b ? fread(b, 1, 1 << 20, f) : 0;
    fclose(f);
    return b;
}

TEST(vk_cli_device_memory_streams_bitwise) {
    if (!vkt_device_ready()) return;
    unsetenv("FLUX_VK_VALIDATION");
    char model[1024], a[1024], b[1024], args[8192], *out = NULL;
    snprintf(model, sizeof model, "%s", fx_test_path("golden/model"));
    snprintf(a, sizeof a, "%s", fx_test_tmp_path("vk-all.png"));
    snprintf(b, sizeof b, "%s", fx_test_tmp_path("vk-1mib.png"));
    const char *common = "--backend vulkan --no-cache -p 'a red fox' -W 64 -H 64 -s 1 -S 5";
    snprintf(args, sizeof args, "%s -d '%s' -o '%s'", common, model, a);
    CHECK_EQ_INT(run_flux(args, &out), 0);
    CHECK_MSG(out && !strstr(out, "uploaded at each use"), "without a budget: %s", out ? out : "");
    free(out);
    snprintf(args, sizeof args, "%s --device-memory 1 -v -d '%s' -o '%s'", common, model, b);
    CHECK_EQ_INT(run_flux(args, &out), 0);
    CHECK_MSG(out && strstr(out, "exceed the device budget of 1.0 MiB") && strstr(out, "uploaded at each use"),
              "-v output: %s", out ? out : "");
    CHECK_MSG(out && !strstr(out, "Vulkan error message"), "validation errors: %s", out ? out : "");
    free(out);
    size_t na = 0, nb = 0;
    unsigned char *pa = slurp(a, &na), *pb = slurp(b, &nb);
    CHECK_MSG(pa && pb && na > 0 && na == nb && !memcmp(pa, pb, na), "the PNGs differ (%zu vs %zu bytes)", na, nb);
    free(pa), free(pb);
    /* bad values are command-line errors (exit 2) */
    CHECK_EQ_INT(run_flux("--device-memory 0 --cpu-info", &out), 2);
    free(out);
    CHECK_EQ_INT(run_flux("--backend cpu --device-memory 64 --cpu-info", &out), 2);
    free(out);
}

/* A device that runs out of memory (memory_limit): registered weights give
 * way to an activation buffer (fx_vk_buf_new_evicting, as the ops seam
 * allocates), and are uploaded again at their use — evicting others when
 * the upload itself runs out — with the results of a roomy device. */
TEST(vk_weights_give_way_when_the_device_is_full) {
    float *hw[NW], *x = loop_inputs(43, hw);
    static loop_run all;
    memset(&all, 0, sizeof all);
    run_loop(0, hw, x, &all);
    /* what a context with the weights, x and y allocates: the full device
     * has room for half a weight more */
    fx_vk *vk = all.ok ? vkt_open(NULL) : NULL;
    if (!vk) goto out;
    fx_err err = {0};
    fx_vk_weight w[NW];
    fx_vk_buf *bx = NULL, *by = NULL, *big = NULL;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < NW; i++) {
            fx_weight h = {.data = hw[i], .dtype = FX_DTYPE_F32, .n = WN, .k = WK, .ld = WK};
            REQUIRE_MSG(fx_vk_weight_register(vk, NULL, &h, "weight", &w[i], &err) == FLUX_OK, "%s", err.msg);
        }
        bx = vkt_upload(vk, x, XM * WK, "x"), by = vkt_upload(vk, NULL, XM * WN, "y");
        REQUIRE(bx && by);
        if (pass == 1) break;
        fx_vk_opts o;
        fx_vk_opts_init(&o);
        o.device = FX_VK_DEVICE_ANY;
        o.memory_limit = fx_vk_weights(vk).allocated + W_BYTES / 2;
        for (int i = 0; i < NW; i++) fx_vk_weight_free(vk, &w[i]);
        fx_vk_buf_free(vk, bx), fx_vk_buf_free(vk, by);
        vkt_close(vk);
        REQUIRE((vk = vkt_open(&o)) != NULL);
    }
    const uint64_t act = 3 * W_BYTES; /* the room of 2.5 weights is missing */
    CHECK_EQ_INT((int)fx_vk_weights(vk).resident, (int)(NW * W_BYTES));
    CHECK_EQ_INT(fx_vk_buf_new(vk, act, "activation", &big, &err), FLUX_ERR_NOMEM); /* the device is full */
    CHECK_MSG(strstr(err.msg, "out of device memory") && strstr(err.msg, "activation"), "%s", err.msg);
    REQUIRE_MSG(fx_vk_buf_new_evicting(vk, act, "activation", &big, &err) == FLUX_OK, "%s", err.msg);
    const fx_vk_weight_stats s = fx_vk_weights(vk);
    printf("    the activation took the room of %llu weights\n", (unsigned long long)s.evictions);
    CHECK(s.evictions >= 3 && s.resident <= (NW - 3) * W_BYTES);
    static float y[3][NW][XM * WN];
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < NW; i++) {
            CHECK_MSG(fx_vk_linear(vk, XM, (fx_vk_mat){bx, 0, WK}, &w[i], (fx_vk_mat){by, 0, WN}, NULL, &err) == FLUX_OK,
                      "pass %d weight %d: %s", p, i, err.msg);
            CHECK(fx_vk_download(vk, by, 0, y[p][i], sizeof y[p][i], &err) == FLUX_OK);
        }
    CHECK_MSG(!memcmp(y, all.y, sizeof y), "results on a full device differ");
    printf("    then %llu uploads for 12 uses\n", (unsigned long long)fx_vk_weights(vk).uploads);
    CHECK(fx_vk_weights(vk).uploads == 11); /* room for one weight: it is the only one kept */
    for (int i = 0; i < NW; i++) fx_vk_weight_free(vk, &w[i]);
    fx_vk_buf_free(vk, bx), fx_vk_buf_free(vk, by), fx_vk_buf_free(vk, big);
    vkt_close(vk);
out:
    for (int i = 0; i < NW; i++) free(hw[i]);
    free(x);
}
