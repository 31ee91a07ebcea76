/*
 * image_api.c — flux_image_load / flux_image_save (flux.h): image files
 * with their errors kept in the context (src/image/image_file.c).
 */
#include "src/image/image_file.h"
#include "src/model/ctx.h"

flux_status flux_image_load(flux_ctx *ctx, const char *path, flux_image **out) {
    fx_err *err = ctx ? &ctx->err : NULL;
    if (!out) return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_image_load: out is NULL");
    *out = NULL;
    if (!path) return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_image_load: path is NULL");
    return fx_image_read(path, out, err);
}

flux_status flux_image_save(flux_ctx *ctx, const flux_image *img, const char *path) {
    fx_err *err = ctx ? &ctx->err : NULL;
    if (!img || !path) return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_image_save: image or path is NULL");
    return fx_image_write(img, path, err);
}
