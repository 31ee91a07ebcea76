/*
 * image_file.h — image files by format: PNG or binary PPM in, .png or .ppm
 * out (by extension), written atomically (image_file.c).
 */
#ifndef FX_IMAGE_FILE_H
#define FX_IMAGE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "image.h"

/* Sniff the format from the first bytes and call the right decoder. */
flux_status fx_image_decode(const uint8_t *data, size_t n, const char *name, flux_image **out, fx_err *err);

/* fx_image_decode, with a PNG's transparency kept (codecs.h fx_png_decode_alpha). */
flux_status fx_image_decode_alpha(const uint8_t *data, size_t n, const char *name, flux_image **out, fx_err *err);

/* Read and decode the image file `path`. */
flux_status fx_image_read(const char *path, flux_image **out, fx_err *err);

/* A caller's image before it is encoded: pixels present, size and
 * channels in range, metadata arrays matching n_text, every key non-empty;
 * else FLUX_ERR_INVALID_ARG, the message starting with `what`. */
flux_status fx_image_check(const flux_image *img, const char *what, fx_err *err);

/* Encode img by the extension of `path` (.png with its text metadata, or
 * .ppm) and write it atomically: never a partial file at `path`. */
flux_status fx_image_write(const flux_image *img, const char *path, fx_err *err);

#endif
