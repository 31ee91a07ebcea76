/*
 * image_ppm.c — binary Netpbm: P6 (RGB) and P5 (gray) in, P6/P5 out.
 *
 * Header: magic, width, height, maxval separated by whitespace, with
 * '#' comments running to the end of the line anywhere whitespace may be;
 * exactly one whitespace byte ends the header. maxval 1..65535; samples are
 * 1 byte (maxval < 256) or 2 bytes big-endian, and are scaled to 8 bits as
 * round(v·255/maxval), which is what the format defines them to mean.
 * Bytes after the first image are ignored (Netpbm allows several images in
 * one stream).
 */
#include "codecs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct ppm_cursor {
    const uint8_t *p, *end;
} ppm_cursor;

static int is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* Skip whitespace and comments. */
static void skip_blanks(ppm_cursor *c) {
    while (c->p < c->end) {
        if (is_space(*c->p)) {
            c->p++;
        } else if (*c->p == '#') {
            while (c->p < c->end && *c->p != '\n' && *c->p != '\r') c->p++;
        } else {
            break;
        }
    }
}

/* A decimal header field in 0..limit; -1 when missing or too large. */
static long read_field(ppm_cursor *c, long limit) {
    skip_blanks(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return -1;
    long v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        v = v * 10 + (*c->p++ - '0');
        if (v > limit) return -1;
    }
    return v;
}

flux_status fx_ppm_decode(const uint8_t *data, size_t n, const char *name, flux_image **out, fx_err *err) {
    *out = NULL;
    if (n < 2 || data[0] != 'P' || (data[1] != '6' && data[1] != '5'))
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: not a binary PPM/PGM (P6/P5) file", name);
    int gray = data[1] == '5';
    ppm_cursor c = {data + 2, data + n};
    if (c.p < c.end && !is_space(*c.p) && *c.p != '#')
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: bad PPM header: no whitespace after the magic", name);
    long w = read_field(&c, 1000000000L), h = read_field(&c, 1000000000L), maxval = read_field(&c, 65535);
    if (w < 0 || h < 0 || maxval < 0)
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: bad PPM header: %s is missing or out of range", name,
                       w < 0 ? "width" : h < 0 ? "height" : "maxval (1..65535)");
    if (maxval == 0) return fx_fail(err, FLUX_ERR_FORMAT, "%s: bad PPM header: maxval is 0", name);
    if (c.p >= c.end || !is_space(*c.p))
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: bad PPM header: no whitespace after maxval", name);
    c.p++; /* the single whitespace byte before the samples */
    if (!fx_image_size_ok(w, h))
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: image size %ldx%ld is invalid or too large (limit %d per side, "
                       "%lld pixels)", name, w, h, FX_IMAGE_MAX_SIDE, (long long)FX_IMAGE_MAX_PIXELS);
    size_t in_ch = gray ? 1 : 3, bytes = maxval > 255 ? 2 : 1;
    size_t need = (size_t)w * (size_t)h * in_ch * bytes, have = (size_t)(c.end - c.p);
    if (have < need)
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: truncated PPM: %zu bytes of pixel data, %ldx%ld needs %zu", name,
                       have, w, h, need);
    flux_image *img = flux_image_new((int)w, (int)h, 3);
    if (!img) return fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory for a %ldx%ld image", name, w, h);
    const uint8_t *s = c.p;
    size_t npix = (size_t)w * (size_t)h;
    uint32_t mv = (uint32_t)maxval;
    for (size_t i = 0; i < npix; i++) {
        for (size_t ch = 0; ch < 3; ch++) {
            const uint8_t *q = s + (i * in_ch + (gray ? 0 : ch)) * bytes;
            uint32_t v = bytes == 2 ? (uint32_t)q[0] << 8 | q[1] : q[0];
            if (v > mv) v = mv; /* out-of-range samples saturate */
            img->data[i * 3 + ch] = (uint8_t)(mv == 255 ? v : (v * 255 + mv / 2) / mv);
        }
    }
    *out = img;
    return FLUX_OK;
}

flux_status fx_ppm_write(FILE *f, const flux_image *img, const char *name, fx_err *err) {
    int ch = img->channels, gray = ch <= 2, out_ch = gray ? 1 : 3;
    size_t w = (size_t)img->width;
    uint8_t *row = malloc(w * (size_t)out_ch);
    if (!row) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory writing %s", name);
    int ok = fprintf(f, "P%c\n%d %d\n255\n", gray ? '5' : '6', img->width, img->height) > 0;
    for (int y = 0; ok && y < img->height; y++) {
        const uint8_t *src = img->data + (size_t)y * w * (size_t)ch;
        for (size_t x = 0; x < w; x++)
            for (int k = 0; k < out_ch; k++) row[x * (size_t)out_ch + (size_t)k] = src[x * (size_t)ch + (size_t)k];
        ok = fwrite(row, (size_t)out_ch, w, f) == w;
    }
    free(row);
    if (!ok) return fx_fail(err, FLUX_ERR_IO, "cannot write %s: %s", name, strerror(errno ? errno : EIO));
    return FLUX_OK;
}
