/*
 * image.h — the flux_image type (flux.h: pixels + text metadata): its size
 * limits; new, free and the text entries are flux.h functions (image.c).
 */
#ifndef FX_IMAGE_H
#define FX_IMAGE_H

#include <stdint.h>

#include "src/base/error.h"

/* Largest accepted image: 16384 per side and 2^28 pixels in total (768 MiB
 * of RGB8). Anything larger is rejected before allocating. */
#define FX_IMAGE_MAX_SIDE 16384
#define FX_IMAGE_MAX_PIXELS ((int64_t)1 << 28)

/* 1 when width × height is a size we accept. */
int fx_image_size_ok(int64_t width, int64_t height);

#endif
