/*
 * stubs.c — API entry points whose implementation has not landed yet. Each
 * fails with FLUX_ERR_NOT_IMPLEMENTED and a clear message; the modules that
 * implement them remove their stub from here.
 */
#include "ctx.h"
#include "model.h"

static flux_status not_yet(flux_ctx *ctx, const char *what) {
    return fx_fail(ctx ? &ctx->err : NULL, FLUX_ERR_NOT_IMPLEMENTED, "%s is not yet available in flux.c %s",
                   what, FLUX_VERSION_STRING);
}

flux_status flux_generate(flux_ctx *ctx, const flux_params *p, flux_image **out) {
    (void)p, (void)out;
    return not_yet(ctx, "image generation");
}

flux_status flux_generate_batch(flux_ctx *ctx, const flux_params *p, flux_image **out) {
    (void)p, (void)out;
    return not_yet(ctx, "batch generation");
}
