/*
 * srv_codecs.c — JPEG (libjpeg-turbo) and WebP (libwebp) in and out (srv_codecs.h).
 */
#include "srv_codecs.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <webp/decode.h>
#include <webp/encode.h>

srv_image_format srv_image_format_of(const uint8_t *d, size_t n) {
    if (n >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8)) return SRV_FMT_PNG;
    if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return SRV_FMT_JPEG;
    if (n >= 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4)) return SRV_FMT_WEBP;
    return SRV_FMT_OTHER;
}

const char *srv_image_mime(srv_image_format fmt) {
    return fmt == SRV_FMT_JPEG ? "image/jpeg" : fmt == SRV_FMT_WEBP ? "image/webp" : "image/png";
}

/* libjpeg reports errors through a callback that must not return: back to
 * the caller by longjmp, with the library's message. */
typedef struct jpeg_guard {
    struct jpeg_error_mgr mgr;
    jmp_buf back;
    char msg[JMSG_LENGTH_MAX];
} jpeg_guard;

static void jpeg_fail(j_common_ptr c) {
    jpeg_guard *g = (jpeg_guard *)c->err;
    g->mgr.format_message(c, g->msg);
    longjmp(g->back, 1);
}

/* A warning is corrupt data libjpeg would paper over (a cut file comes out
 * grey at the bottom): kept, not printed, and the image refused. */
static void jpeg_warning(j_common_ptr c, int level) {
    jpeg_guard *g = (jpeg_guard *)c->err;
    if (level >= 0) return; /* trace messages */
    if (!g->mgr.num_warnings++) g->mgr.format_message(c, g->msg);
}

static int decode_jpeg(const uint8_t *data, size_t n, long long max_pixels, flux_image **out, char *why,
                       size_t why_size) {
    struct jpeg_decompress_struct c;
    jpeg_guard g;
    flux_image *volatile img = NULL;
    c.err = jpeg_std_error(&g.mgr);
    g.mgr.error_exit = jpeg_fail;
    g.mgr.emit_message = jpeg_warning;
    if (setjmp(g.back)) {
        snprintf(why, why_size, "JPEG: %s", g.msg);
        jpeg_destroy_decompress(&c);
        flux_image_free(img);
        return -1;
    }
    jpeg_create_decompress(&c);
    jpeg_mem_src(&c, data, (unsigned long)n);
    jpeg_read_header(&c, TRUE);
    if ((long long)c.image_width * c.image_height > max_pixels) {
        snprintf(why, why_size, "JPEG: %ux%u pixels; at most %lld", c.image_width, c.image_height, max_pixels);
        jpeg_destroy_decompress(&c);
        return -1;
    }
    c.out_color_space = JCS_RGB; /* gray, YCbCr and CMYK all come out as RGB */
    jpeg_start_decompress(&c);
    if (c.output_components != 3) {
        snprintf(why, why_size, "JPEG: %d components after conversion to RGB", c.output_components);
        jpeg_destroy_decompress(&c);
        return -1;
    }
    img = flux_image_new((int)c.output_width, (int)c.output_height, 3);
    if (!img) {
        snprintf(why, why_size, "JPEG: %ux%u: out of memory", c.output_width, c.output_height);
        jpeg_destroy_decompress(&c);
        return -1;
    }
    while (c.output_scanline < c.output_height) {
        JSAMPROW row = img->data + (size_t)c.output_scanline * c.output_width * 3;
        jpeg_read_scanlines(&c, &row, 1);
    }
    jpeg_finish_decompress(&c);
    jpeg_destroy_decompress(&c);
    if (g.mgr.num_warnings) {
        snprintf(why, why_size, "JPEG: corrupt data: %s", g.msg);
        flux_image_free(img);
        return -1;
    }
    *out = img;
    return 0;
}

static int decode_webp(const uint8_t *data, size_t n, long long max_pixels, flux_image **out, char *why,
                       size_t why_size) {
    int w = 0, h = 0;
    if (!WebPGetInfo(data, n, &w, &h)) {
        snprintf(why, why_size, "WebP: not a WebP image libwebp can read");
        return -1;
    }
    if ((long long)w * h > max_pixels) {
        snprintf(why, why_size, "WebP: %dx%d pixels; at most %lld", w, h, max_pixels);
        return -1;
    }
    flux_image *img = flux_image_new(w, h, 3);
    if (!img) {
        snprintf(why, why_size, "WebP: %dx%d: out of memory", w, h);
        return -1;
    }
    if (!WebPDecodeRGBInto(data, n, img->data, (size_t)w * h * 3, w * 3)) {
        flux_image_free(img);
        snprintf(why, why_size, "WebP: broken image data");
        return -1;
    }
    *out = img;
    return 0;
}

int srv_decode_image(const uint8_t *data, size_t n, long long max_pixels, flux_image **out, char *why,
                     size_t why_size) {
    *out = NULL;
    switch (srv_image_format_of(data, n)) {
    case SRV_FMT_JPEG: return decode_jpeg(data, n, max_pixels, out, why, why_size);
    case SRV_FMT_WEBP: return decode_webp(data, n, max_pixels, out, why, why_size);
    default: snprintf(why, why_size, "not a JPEG or WebP image"); return -1;
    }
}

/* img as packed RGB (gray replicated, alpha dropped): img->data itself when it is RGB. */
static const uint8_t *as_rgb(const flux_image *img, uint8_t **owned) {
    *owned = NULL;
    if (img->channels == 3) return img->data;
    const size_t px = (size_t)img->width * img->height;
    uint8_t *rgb = malloc(px * 3);
    if (!rgb) return NULL;
    for (size_t i = 0; i < px; i++)
        for (int c = 0; c < 3; c++)
            rgb[i * 3 + c] = img->data[i * (size_t)img->channels + (img->channels >= 3 ? (size_t)c : 0)];
    *owned = rgb;
    return rgb;
}

static int encode_jpeg(const uint8_t *rgb, int w, int h, int quality, uint8_t **out, size_t *len, char *why,
                       size_t why_size) {
    struct jpeg_compress_struct c;
    jpeg_guard g;
    unsigned char *volatile buf = NULL;
    unsigned long size = 0;
    c.err = jpeg_std_error(&g.mgr);
    g.mgr.error_exit = jpeg_fail;
    if (setjmp(g.back)) {
        snprintf(why, why_size, "JPEG: %s", g.msg);
        jpeg_destroy_compress(&c);
        free(buf);
        return -1;
    }
    jpeg_create_compress(&c);
    unsigned char *dest = NULL;
    jpeg_mem_dest(&c, &dest, &size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    if (quality >= 90) c.comp_info[0].h_samp_factor = c.comp_info[0].v_samp_factor = 1; /* full-resolution colour */
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * (size_t)w * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    buf = dest;
    jpeg_destroy_compress(&c);
    *out = malloc(size ? size : 1);
    if (!*out) {
        free(buf);
        snprintf(why, why_size, "JPEG: out of memory");
        return -1;
    }
    memcpy(*out, buf, size);
    free(buf);
    *len = size;
    return 0;
}

static int encode_webp(const uint8_t *rgb, int w, int h, int quality, uint8_t **out, size_t *len, char *why,
                       size_t why_size) {
    uint8_t *buf = NULL;
    const size_t size = quality >= 100 ? WebPEncodeLosslessRGB(rgb, w, h, w * 3, &buf)
                                       : WebPEncodeRGB(rgb, w, h, w * 3, (float)quality, &buf);
    if (!size) {
        snprintf(why, why_size, "WebP: encoding %dx%d failed", w, h);
        return -1;
    }
    *out = malloc(size);
    if (*out) memcpy(*out, buf, size);
    WebPFree(buf);
    if (!*out) {
        snprintf(why, why_size, "WebP: out of memory");
        return -1;
    }
    *len = size;
    return 0;
}

int srv_encode_image(const flux_image *img, srv_image_format fmt, int quality, uint8_t **out, size_t *len, char *why,
                     size_t why_size) {
    *out = NULL;
    *len = 0;
    uint8_t *owned;
    const uint8_t *rgb = as_rgb(img, &owned);
    if (!rgb) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    int rc;
    if (fmt == SRV_FMT_JPEG) rc = encode_jpeg(rgb, img->width, img->height, quality, out, len, why, why_size);
    else if (fmt == SRV_FMT_WEBP) rc = encode_webp(rgb, img->width, img->height, quality, out, len, why, why_size);
    else rc = (snprintf(why, why_size, "no encoder for this format"), -1);
    free(owned);
    return rc;
}
