/* test_smoke.c — the library links and a context can be created. */
#include "tests/test.h"

#include <string.h>

#include "flux.h"

TEST(api_context_lifecycle) {
    flux_ctx *ctx = flux_new(NULL);
    REQUIRE(ctx != NULL);
    CHECK(flux_threads(ctx) >= 1);
    CHECK(strcmp(flux_error(ctx), "") == 0);
    CHECK(strcmp(flux_version(), FLUX_VERSION_STRING) == 0);
    flux_free(ctx);
}
