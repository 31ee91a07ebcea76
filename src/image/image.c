/*
 * image.c — the flux_image type (pixels + text metadata) and loading/saving
 * by format. Codecs live in image_png.c and image_ppm.c.
 */
#include "src/base/atomic_file.h"
#include "src/model/ctx.h"
#include "src/base/file_read.h"
#include "image_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Largest image file we read into memory. A maximal 16384² RGBA 16-bit PNG
 * stored uncompressed is 2 GiB; real files are far smaller. */
#define MAX_IMAGE_FILE_BYTES ((int64_t)1 << 31)

int fx_image_size_ok(int64_t width, int64_t height) {
    return width >= 1 && height >= 1 && width <= FX_IMAGE_MAX_SIDE && height <= FX_IMAGE_MAX_SIDE &&
           width * height <= FX_IMAGE_MAX_PIXELS;
}

flux_image *flux_image_new(int width, int height, int channels) {
    if (!fx_image_size_ok(width, height) || channels < 1 || channels > 4) return NULL;
    flux_image *img = calloc(1, sizeof *img);
    if (!img) return NULL;
    img->data = calloc((size_t)width * (size_t)height, (size_t)channels);
    if (!img->data) {
        free(img);
        return NULL;
    }
    img->width = width;
    img->height = height;
    img->channels = channels;
    return img;
}

void flux_image_free(flux_image *img) {
    if (!img) return;
    for (int i = 0; i < img->n_text; i++) {
        free(img->text_keys[i]);
        free(img->text_values[i]);
    }
    free(img->text_keys);
    free(img->text_values);
    free(img->data);
    free(img);
}

static int find_text(const flux_image *img, const char *key) {
    for (int i = 0; i < img->n_text; i++)
        if (!strcmp(img->text_keys[i], key)) return i;
    return -1;
}

const char *flux_image_get_text(const flux_image *img, const char *key) {
    if (!img || !key) return NULL;
    int i = find_text(img, key);
    return i < 0 ? NULL : img->text_values[i];
}

flux_status flux_image_set_text(flux_image *img, const char *key, const char *value) {
    if (!img || !key || !*key) return FLUX_ERR_INVALID_ARG;
    int i = find_text(img, key);
    if (!value) { /* NULL removes the entry */
        if (i < 0) return FLUX_OK;
        free(img->text_keys[i]);
        free(img->text_values[i]);
        memmove(img->text_keys + i, img->text_keys + i + 1, (size_t)(img->n_text - i - 1) * sizeof(char *));
        memmove(img->text_values + i, img->text_values + i + 1, (size_t)(img->n_text - i - 1) * sizeof(char *));
        img->n_text--;
        return FLUX_OK;
    }
    char *v = strdup(value);
    if (!v) return FLUX_ERR_NOMEM;
    if (i >= 0) {
        free(img->text_values[i]);
        img->text_values[i] = v;
        return FLUX_OK;
    }
    char *k = strdup(key);
    char **keys = realloc(img->text_keys, (size_t)(img->n_text + 1) * sizeof(char *));
    if (keys) img->text_keys = keys;
    char **vals = realloc(img->text_values, (size_t)(img->n_text + 1) * sizeof(char *));
    if (vals) img->text_values = vals;
    if (!k || !keys || !vals) {
        free(k);
        free(v);
        return FLUX_ERR_NOMEM;
    }
    img->text_keys[img->n_text] = k;
    img->text_values[img->n_text] = v;
    img->n_text++;
    return FLUX_OK;
}

flux_status fx_image_decode(const uint8_t *data, size_t n, const char *name, flux_image **out, fx_err *err) {
    *out = NULL;
    if (n == 0) return fx_fail(err, FLUX_ERR_FORMAT, "%s: empty file (0 bytes), not an image", name);
    if (n >= 8 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8)) return fx_png_decode(data, n, name, out, err);
    if (n >= 2 && data[0] == 'P' && (data[1] == '6' || data[1] == '5')) return fx_ppm_decode(data, n, name, out, err);
    return fx_fail(err, FLUX_ERR_FORMAT, "%s: not a PNG or binary PPM (P6/P5) image", name);
}

flux_status flux_image_load(flux_ctx *ctx, const char *path, flux_image **out) {
    fx_err *err = ctx ? &ctx->err : NULL;
    if (!out) return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_image_load: out is NULL");
    *out = NULL;
    if (!path) return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_image_load: path is NULL");
    uint8_t *data;
    size_t n;
    flux_status s = fx_read_file(path, NULL, MAX_IMAGE_FILE_BYTES, "an image", &data, &n, err);
    if (s != FLUX_OK) return s;
    s = fx_image_decode(data, n, path, out, err);
    free(data);
    return s;
}

/* The extension of `path` (after the last '.' of the last component). */
static const char *extension(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash + 1 : path, '.');
    return dot ? dot + 1 : "";
}

flux_status flux_image_save(flux_ctx *ctx, const flux_image *img, const char *path) {
    fx_err *err = ctx ? &ctx->err : NULL;
    if (!img || !path) return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_image_save: image or path is NULL");
    if (!img->data || !fx_image_size_ok(img->width, img->height) || img->channels < 1 || img->channels > 4)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "cannot save %s: invalid image (%dx%d, %d channels)", path,
                       img->width, img->height, img->channels);
    const char *ext = extension(path);
    flux_status (*write)(FILE *, const flux_image *, const char *, fx_err *);
    if (!strcasecmp(ext, "png")) write = fx_png_write;
    else if (!strcasecmp(ext, "ppm")) write = fx_ppm_write;
    else if (!*ext)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "cannot save %s: no file extension (use .png or .ppm)", path);
    else
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "cannot save %s: unknown image format '.%s' (use .png or .ppm)",
                       path, ext);
    fx_atomic_file af;
    flux_status s = fx_atomic_open(&af, path, err);
    if (s != FLUX_OK) return s;
    s = write(af.f, img, path, err);
    if (s != FLUX_OK) {
        fx_atomic_abort(&af);
        return s;
    }
    return fx_atomic_commit(&af, err);
}
