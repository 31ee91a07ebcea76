/*
 * srv_codecs.h — JPEG and WebP for flux-server's clients (photos come as
 * JPEG, browsers and apps ask for WebP): reference images decoded with
 * Debian's libjpeg-turbo and libwebp, results encoded in the format a
 * request's output_format names. Server-only: the library and the CLI read
 * and write PNG and PPM. PNG stays the default and alone carries the
 * image's parameters (its text chunk).
 */
#ifndef FX_SRV_CODECS_H
#define FX_SRV_CODECS_H

#include <stddef.h>
#include <stdint.h>

#include "flux.h"

typedef enum srv_image_format { SRV_FMT_OTHER, SRV_FMT_PNG, SRV_FMT_JPEG, SRV_FMT_WEBP } srv_image_format;

/* The format of encoded bytes by their signature. */
srv_image_format srv_image_format_of(const uint8_t *data, size_t n);

/* Decode JPEG or WebP bytes of at most max_pixels pixels (read from the
 * header first) into an 8-bit RGB image (*out, flux_image_free it). 0, or
 * -1 with the reason in why. */
int srv_decode_image(const uint8_t *data, size_t n, long long max_pixels, flux_image **out, char *why,
                     size_t why_size);

/* Encode an 8-bit RGB (or gray / RGBA) image as JPEG (quality 1..100;
 * from 90 on without chroma subsampling) or WebP (quality 100: lossless,
 * the exact pixels; below: lossy). A malloc'd
 * buffer in *out, or -1 with the reason in why. */
int srv_encode_image(const flux_image *img, srv_image_format fmt, int quality, uint8_t **out, size_t *len, char *why,
                     size_t why_size);

/* "image/png", "image/jpeg", "image/webp" */
const char *srv_image_mime(srv_image_format fmt);

#endif
