/* test_prefetch.c — the background page-cache fill (src/pipeline/prefetch.h): it
 * reads every byte of the weight set, leaves the weights intact (same bytes,
 * same transformer output), leaves the pages in the page cache, and stops
 * early on request. */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/model/model.h"
#include "src/pipeline/prefetch.h"
#include "tests/golden_case.h"

static uint64_t checksum(const fx_wset *s, int64_t *bytes) {
    uint64_t h = 1469598103934665603ull;
    *bytes = 0;
    for (size_t i = 0; i < fx_wset_count(s); i++) {
        const fx_tensor *t = fx_wset_tensor_at(s, i);
        const unsigned char *d = fx_tensor_data(t);
        for (int64_t k = 0; k < t->nbytes; k++) h = (h ^ d[k]) * 1099511628211ull;
        *bytes += t->nbytes;
    }
    return h;
}

TEST(prefetch_reads_everything_and_changes_nothing) {
    flux_ctx *ctx = fx_gcase_ctx(fx_test_path("golden/model"), 1, FLUX_PRECISION_DEFAULT);
    REQUIRE(ctx);
    const fx_wset *w = ctx->model->transformer_w;
    int64_t total;
    uint64_t before = checksum(w, &total);
    fx_prefetch *p = fx_prefetch_start(w);
    REQUIRE(p);
    int64_t done = fx_prefetch_finish(p);
    long page = sysconf(_SC_PAGESIZE);
    /* page-rounded extents: at least every tensor byte, at most one extra page per tensor */
    CHECK_MSG(done >= total && done <= total + (int64_t)(2 * page * fx_wset_count(w)), "read %lld of %lld bytes",
              (long long)done, (long long)total);
    int64_t again;
    CHECK(checksum(w, &again) == before);
    /* the pages are in the page cache (mincore on the file mapping) */
    const fx_tensor *t = fx_wset_tensor_at(w, 0);
    uintptr_t a = (uintptr_t)fx_tensor_data(t) & ~(uintptr_t)(page - 1);
    size_t len = (size_t)(((uintptr_t)fx_tensor_data(t) + (uintptr_t)t->nbytes) - a);
    size_t np = (len + (size_t)page - 1) / (size_t)page;
    unsigned char *vec = malloc(np);
    REQUIRE(mincore((void *)a, len, vec) == 0);
    size_t resident = 0;
    for (size_t i = 0; i < np; i++) resident += vec[i] & 1;
    CHECK_MSG(resident == np, "%zu of %zu pages resident", resident, np);
    free(vec);
    flux_free(ctx);
}

TEST(prefetch_stop_and_null) {
    flux_ctx *ctx = fx_gcase_ctx(fx_test_path("golden/model"), 1, FLUX_PRECISION_DEFAULT);
    REQUIRE(ctx);
    int64_t total;
    uint64_t before = checksum(ctx->model->transformer_w, &total);
    fx_prefetch *p = fx_prefetch_start(ctx->model->transformer_w);
    REQUIRE(p);
    int64_t done = fx_prefetch_stop(p); /* may have finished already; never more than everything */
    CHECK(done >= 0 && done <= total + 64 * 4096 * (int64_t)fx_wset_count(ctx->model->transformer_w));
    int64_t again;
    CHECK(checksum(ctx->model->transformer_w, &again) == before);
    CHECK(fx_prefetch_stop(NULL) == 0 && fx_prefetch_finish(NULL) == 0);
    flux_free(ctx);
}

/* Weights in RAM (read with use_mmap = 0, or an in-memory image such as
 * --quant's) are never prefetched: dropping their pages would lose them. */
TEST(prefetch_skips_weights_in_ram) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/transformer", fx_test_path("golden/model"));
    fx_err err = {0};
    fx_wset *w = fx_wset_open_component(dir, "transformer", "diffusion_pytorch_model.safetensors", 0, &err);
    REQUIRE_MSG(w, "%s", err.msg);
    int64_t total;
    uint64_t before = checksum(w, &total);
    CHECK(fx_prefetch_start(w) == NULL);
    CHECK(checksum(w, &total) == before);
    fx_wset_close(w);
    /* an in-memory image of page-sized tensors, malloc'd like --quant's */
    size_t len = 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/diffusion_pytorch_model.safetensors", dir);
    char *bytes = fx_test_read_file(path, &len);
    REQUIRE(bytes);
    w = fx_wset_open_memory(bytes, len, "memory", 1, &err);
    REQUIRE_MSG(w, "%s", err.msg);
    before = checksum(w, &total);
    CHECK(fx_prefetch_start(w) == NULL);
    CHECK(checksum(w, &total) == before);
    fx_wset_close(w); /* frees bytes */
}
