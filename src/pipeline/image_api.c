/*
 * image_api.c — flux_image_load / flux_image_save (flux.h): image files
 * with their errors kept in the context (src/image/image_file.c).
 */
#include <stdlib.h>

#include "src/image/codecs.h"
#include "src/image/image_file.h"
#include "src/model/ctx.h"
#include "mask.h"

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

flux_status flux_image_decode(flux_ctx *ctx, const uint8_t *data, size_t n, const char *name, flux_image **out) {
    fx_err *err = ctx ? &ctx->err : NULL;
    if (!out) return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_image_decode: out is NULL");
    *out = NULL;
    if (!data && n) return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_image_decode: data is NULL");
    return fx_image_decode(data, n, name ? name : "image", out, err);
}

flux_status flux_image_encode_png(flux_ctx *ctx, const flux_image *img, uint8_t **out, size_t *len) {
    fx_err *err = ctx ? &ctx->err : NULL;
    if (!out || !len) return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_image_encode_png: out or len is NULL");
    *out = NULL;
    *len = 0;
    if (!img) return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_image_encode_png: image is NULL");
    flux_status st = fx_image_check(img, "flux_image_encode_png", err);
    if (st) return st;
    return fx_png_encode(img, "PNG", out, len, err);
}

flux_status flux_mask_decode(flux_ctx *ctx, const uint8_t *data, size_t n, const char *name, flux_mask_source how,
                             flux_image **out) {
    fx_err *err = ctx ? &ctx->err : NULL;
    if (!out) return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_mask_decode: out is NULL");
    *out = NULL;
    if (!data && n) return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_mask_decode: data is NULL");
    if (!name) name = "mask";
    flux_image *img = NULL;
    flux_status st = how == FLUX_MASK_GRAY ? fx_image_decode(data, n, name, out, err)
                                           : fx_image_decode_alpha(data, n, name, &img, err);
    if (st || how == FLUX_MASK_GRAY) return st;
    st = fx_mask_from_image(img, how, name, out, err);
    flux_image_free(img);
    return st;
}

void flux_buffer_free(void *buf) { free(buf); }
