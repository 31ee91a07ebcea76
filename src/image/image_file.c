/*
 * image_file.c — image files by format (image_file.h): the format sniffed
 * from the first bytes on reading, chosen by extension on writing.
 */
#include "image_file.h"

#include "codecs.h"
#include "src/base/atomic_file.h"
#include "src/base/file_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Largest image file we read into memory. A maximal 16384² RGBA 16-bit PNG
 * stored uncompressed is 2 GiB; real files are far smaller. */
#define MAX_IMAGE_FILE_BYTES ((int64_t)1 << 31)

flux_status fx_image_decode(const uint8_t *data, size_t n, const char *name, flux_image **out, fx_err *err) {
    *out = NULL;
    if (n == 0) return fx_fail(err, FLUX_ERR_FORMAT, "%s: empty file (0 bytes), not an image", name);
    if (n >= 8 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8)) return fx_png_decode(data, n, name, out, err);
    if (n >= 2 && data[0] == 'P' && (data[1] == '6' || data[1] == '5')) return fx_ppm_decode(data, n, name, out, err);
    return fx_fail(err, FLUX_ERR_FORMAT, "%s: not a PNG or binary PPM (P6/P5) image", name);
}

flux_status fx_image_decode_alpha(const uint8_t *data, size_t n, const char *name, flux_image **out, fx_err *err) {
    if (n >= 8 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8)) {
        *out = NULL;
        return fx_png_decode_alpha(data, n, name, out, err);
    }
    return fx_image_decode(data, n, name, out, err);
}

flux_status fx_image_read(const char *path, flux_image **out, fx_err *err) {
    *out = NULL;
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

flux_status fx_image_check(const flux_image *img, const char *what, fx_err *err) {
    if (!img->data || !fx_image_size_ok(img->width, img->height) || img->channels < 1 || img->channels > 4)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: invalid image (%dx%d, %d channels)", what, img->width,
                       img->height, img->channels);
    if (img->n_text < 0 || (img->n_text > 0 && (!img->text_keys || !img->text_values)))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: invalid metadata (%d entries, %s)", what, img->n_text,
                       img->n_text < 0 ? "a negative count" : "no key/value arrays");
    for (int i = 0; i < img->n_text; i++)
        if (!img->text_keys[i] || !*img->text_keys[i])
            return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: metadata entry %d has no key", what, i);
    return FLUX_OK;
}

flux_status fx_image_write(const flux_image *img, const char *path, fx_err *err) {
    char what[4200];
    snprintf(what, sizeof what, "cannot save %s", path);
    flux_status st = fx_image_check(img, what, err);
    if (st) return st;
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
