/*
 * codecs.h — the PNG and PPM codecs behind the image files (image_file.c).
 *
 * Decoders work on a complete in-memory file (what the loader read, or a
 * fuzzer input) and always produce an 8-bit RGB flux_image:
 *   - gray is replicated into R, G and B;
 *   - alpha is dropped without compositing (PIL `convert("RGB")`);
 *   - palette entries are expanded (tRNS ignored, as PIL does for "RGB");
 *   - 16-bit samples keep their high byte (v >> 8). This is what Pillow does
 *     for 16-bit RGB/RGBA PNGs (raw mode "RGB;16B" unpacks the first, most
 *     significant byte). For 16-bit gray Pillow opens mode "I" and
 *     convert("RGB") clips every value above 255 to 255, which turns almost
 *     any real image white; we take the high byte there too on purpose.
 *   - PNG gamma/iCCP/sRGB chunks are ignored, as Pillow does.
 * Sizes are checked before any pixel memory is allocated.
 */
#ifndef FX_IMAGE_CODECS_H
#define FX_IMAGE_CODECS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "image.h"

/* Decode a PNG / binary PPM (P6, P5) file image held in memory. `name` is
 * used in error messages. On success *out is a new RGB image. */
flux_status fx_png_decode(const uint8_t *data, size_t n, const char *name, flux_image **out, fx_err *err);
flux_status fx_ppm_decode(const uint8_t *data, size_t n, const char *name, flux_image **out, fx_err *err);
/* fx_png_decode keeping transparency: a PNG with an alpha channel (gray +
 * alpha, RGBA) or a tRNS chunk gives RGBA (4 channels, gray replicated,
 * tRNS turned into alpha as PIL's convert("RGBA") does), others RGB. For
 * masks given as transparency (inpainting). */
flux_status fx_png_decode_alpha(const uint8_t *data, size_t n, const char *name, flux_image **out, fx_err *err);

/* Encode to an open stream (the caller makes the write atomic). PNG keeps
 * the channel count (gray, gray+alpha, RGB, RGBA) and writes every metadata
 * entry: as tEXt when key and value are Latin-1, as iTXt (UTF-8) when the
 * value is not (a CJK prompt). PPM writes P6 (P5 for 1 or 2 channels),
 * dropping alpha and metadata. `name` is used in error messages. */
flux_status fx_png_write(FILE *f, const flux_image *img, const char *name, fx_err *err);
flux_status fx_ppm_write(FILE *f, const flux_image *img, const char *name, fx_err *err);
/* The same PNG into a new malloc'd buffer (*out, *len; free() it), for
 * consumers that need the bytes, e.g. the terminal preview (--show). */
flux_status fx_png_encode(const flux_image *img, const char *name, uint8_t **out, size_t *len, fx_err *err);

/* Text helpers shared by the PNG codec (exposed for tests).
 * fx_utf8_to_latin1: 1 and a malloc'd Latin-1 string when `s` is valid
 * UTF-8 with every code point ≤ U+00FF; 0 otherwise (*out = NULL), or -1 on
 * out of memory. fx_latin1_to_utf8: malloc'd UTF-8 (NULL on no memory).
 * fx_utf8_sanitize: malloc'd copy with invalid sequences replaced by U+FFFD. */
int fx_utf8_to_latin1(const char *s, char **out);
char *fx_latin1_to_utf8(const char *s);
char *fx_utf8_sanitize(const char *s);
/* 1 when `key` (UTF-8) is a valid PNG keyword: 1–79 Latin-1 characters,
 * printable (32–126, 161–255), no leading, trailing or double spaces. */
int fx_png_keyword_ok(const char *key);

#endif
