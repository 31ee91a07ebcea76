/*
 * image_png.c — PNG decoding and encoding with libpng.
 *
 * libpng reports errors by longjmp. Each entry point keeps all state that
 * outlives a longjmp in a job struct owned by the caller of the function
 * that calls setjmp, so no automatic variable of the setjmp frame is
 * modified between setjmp and longjmp (C11 7.13.2.1p3). Conversion rules
 * (gray/alpha/palette/16-bit → RGB8) are documented in codecs.h.
 */
#include "codecs.h"

#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

/* A deflate stream expands at most ~1032:1, so IDAT chunks holding n bytes
 * cannot carry more than about n·1032 bytes of raw pixel rows. Files that
 * claim more are truncated or forged and are rejected before any pixel
 * memory is allocated. */
#define DEFLATE_MAX_RATIO 1032

/* ------------------------------------------------------------------ text */

/* Decode one UTF-8 sequence; returns its length (1–4) or 0 when invalid
 * (overlong forms, surrogates and values above U+10FFFF are invalid). */
static int utf8_next(const unsigned char *s, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len;
    uint32_t v, min;
    if ((c & 0xE0) == 0xC0) len = 2, v = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, v = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, v = c & 0x07, min = 0x10000;
    else return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0; /* also stops at the NUL */
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

int fx_utf8_to_latin1(const char *s, char **out) {
    *out = NULL;
    const unsigned char *p = (const unsigned char *)s;
    char *buf = malloc(strlen(s) + 1), *o = buf;
    if (!buf) return -1;
    while (*p) {
        uint32_t cp;
        int len = utf8_next(p, &cp);
        if (!len || cp > 0xFF) {
            free(buf);
            return 0;
        }
        *o++ = (char)cp;
        p += len;
    }
    *o = '\0';
    *out = buf;
    return 1;
}

char *fx_latin1_to_utf8(const char *s) {
    size_t n = strlen(s);
    char *buf = malloc(2 * n + 1), *o = buf;
    if (!buf) return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x80) {
            *o++ = (char)*p;
        } else {
            *o++ = (char)(0xC0 | (*p >> 6));
            *o++ = (char)(0x80 | (*p & 0x3F));
        }
    }
    *o = '\0';
    return buf;
}

char *fx_utf8_sanitize(const char *s) {
    size_t n = strlen(s);
    char *buf = malloc(3 * n + 1), *o = buf;
    if (!buf) return NULL;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t cp;
        int len = utf8_next(p, &cp);
        if (len) {
            memcpy(o, p, (size_t)len);
            o += len;
            p += len;
        } else {
            memcpy(o, "\xEF\xBF\xBD", 3); /* U+FFFD for each invalid byte */
            o += 3;
            p++;
        }
    }
    *o = '\0';
    return buf;
}

int fx_png_keyword_ok(const char *key) {
    char *l1;
    if (fx_utf8_to_latin1(key, &l1) != 1) return 0;
    size_t n = strlen(l1);
    int ok = n >= 1 && n <= 79 && l1[0] != ' ' && l1[n - 1] != ' ';
    for (size_t i = 0; ok && i < n; i++) {
        unsigned char c = (unsigned char)l1[i];
        if (c < 32 || (c > 126 && c < 161)) ok = 0;
        if (c == ' ' && l1[i + 1] == ' ') ok = 0;
    }
    free(l1);
    return ok;
}

/* ---------------------------------------------------------------- errors */

typedef struct png_msg {
    char text[256];
} png_msg;

static void on_png_error(png_structp png, png_const_charp msg) {
    png_msg *m = png_get_error_ptr(png);
    if (m) snprintf(m->text, sizeof m->text, "%s", msg ? msg : "libpng error");
    png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg) {
    (void)png, (void)msg; /* ancillary problems (bad CRC in tEXt, ...) are not fatal */
}

/* --------------------------------------------------------------- decoding */

typedef struct png_reader {
    png_structp png;
    png_infop info;
    png_msg msg;
    const uint8_t *data;
    size_t n, pos;
    uint64_t idat;      /* IDAT payload bytes (scan_chunks) */
    const char *name;
    fx_err *err;
    flux_status status; /* set by checks of our own inside the guarded body */
    flux_image *img;
    png_bytep *rows;
    int keep_alpha;     /* fx_png_decode_alpha: RGBA when the file has transparency */
} png_reader;

static void read_from_memory(png_structp png, png_bytep dst, png_size_t len) {
    png_reader *r = png_get_io_ptr(png);
    if (len > r->n - r->pos) png_error(png, "file is truncated");
    memcpy(dst, r->data + r->pos, len);
    r->pos += len;
}

/* Copy the file's text chunks into the image metadata as UTF-8. */
static flux_status read_text(png_reader *r) {
    png_textp text = NULL;
    int count = png_get_text(r->png, r->info, &text, NULL);
    for (int i = 0; i < count; i++) {
        if (!text[i].key || !text[i].key[0]) continue;
        char *key = fx_latin1_to_utf8(text[i].key);
        const char *raw = text[i].text ? text[i].text : "";
        int is_utf8 = text[i].compression >= PNG_ITXT_COMPRESSION_NONE; /* iTXt */
        char *value = is_utf8 ? fx_utf8_sanitize(raw) : fx_latin1_to_utf8(raw);
        flux_status s = key && value ? flux_image_set_text(r->img, key, value) : FLUX_ERR_NOMEM;
        free(key);
        free(value);
        if (s != FLUX_OK) return fx_fail(r->err, s, "%s: out of memory reading text chunks", r->name);
    }
    return FLUX_OK;
}

/* Walk the chunk list in memory before libpng sees it. libpng allocates
 * and zeroes a buffer of a chunk's declared length before reading it, so a
 * lying length (a 900-byte file with a 2 GB iTXt) would cost gigabytes
 * before the read fails; here every chunk must fit inside the file. Also
 * sums the IDAT payload for the deflate-ratio check. */
static flux_status scan_chunks(const uint8_t *d, size_t n, const char *name, uint64_t *idat, fx_err *err) {
    size_t pos = 8;
    *idat = 0;
    while (pos < n) {
        if (n - pos < 12)
            return fx_fail(err, FLUX_ERR_FORMAT, "%s: invalid or truncated PNG: file ends inside a chunk header", name);
        uint32_t len = (uint32_t)d[pos] << 24 | (uint32_t)d[pos + 1] << 16 | (uint32_t)d[pos + 2] << 8 | d[pos + 3];
        char type[5] = {(char)d[pos + 4], (char)d[pos + 5], (char)d[pos + 6], (char)d[pos + 7], 0};
        for (int i = 0; i < 4; i++)
            if (!((type[i] >= 'A' && type[i] <= 'Z') || (type[i] >= 'a' && type[i] <= 'z')))
                return fx_fail(err, FLUX_ERR_FORMAT, "%s: invalid or truncated PNG: bad chunk type at byte %zu", name,
                               pos + 4);
        if (len > n - pos - 12)
            return fx_fail(err, FLUX_ERR_FORMAT,
                           "%s: invalid or truncated PNG: chunk %s declares %u bytes, the file has %zu left", name,
                           type, (unsigned)len, n - pos - 12);
        if (!memcmp(type, "IDAT", 4)) *idat += len;
        pos += 12 + (size_t)len;
        if (!memcmp(type, "IEND", 4)) break; /* bytes after IEND are ignored */
    }
    return FLUX_OK;
}

/* Everything that may longjmp. Returns our own status; libpng errors
 * longjmp out to decode_guarded instead. */
static flux_status decode_body(png_reader *r) {
    png_structp png = r->png;
    png_infop info = r->info;
    png_set_read_fn(png, r, read_from_memory);
    /* libpng allocates (and zeroes) a buffer of the declared length for each
     * ancillary chunk before reading it; a lying length in a small file must
     * not cost megabytes. Decompressed text may still be 16× the file. */
    png_set_chunk_malloc_max(png, r->n < (8u << 20) / 16 ? (64u << 10) + 16 * r->n : (8u << 20));
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    /* Let the fuzzer past checksums so it reaches the decoding paths. */
    png_set_crc_action(png, PNG_CRC_QUIET_USE, PNG_CRC_QUIET_USE);
#ifdef PNG_IGNORE_ADLER32
    png_set_option(png, PNG_IGNORE_ADLER32, PNG_OPTION_ON);
#endif
#endif
    png_read_info(png, info);

    png_uint_32 w = 0, h = 0;
    int depth = 0, color = 0, interlace = 0;
    png_get_IHDR(png, info, &w, &h, &depth, &color, &interlace, NULL, NULL);
    if (!fx_image_size_ok(w, h))
        return fx_fail(r->err, FLUX_ERR_FORMAT, "%s: image size %ux%u is too large (limit %d per side, %lld pixels)",
                       r->name, (unsigned)w, (unsigned)h, FX_IMAGE_MAX_SIDE, (long long)FX_IMAGE_MAX_PIXELS);
    int in_channels = png_get_channels(png, info);
    uint64_t raw_row = ((uint64_t)w * (uint64_t)in_channels * (uint64_t)depth + 7) / 8;
    if (raw_row * h > r->idat * DEFLATE_MAX_RATIO + 1024)
        return fx_fail(r->err, FLUX_ERR_FORMAT,
                       "%s: truncated or corrupt: %llu bytes of image data cannot hold the %ux%u pixels the "
                       "header declares", r->name, (unsigned long long)r->idat, (unsigned)w, (unsigned)h);

    /* → 8-bit RGB: high byte of 16-bit samples (Pillow's "RGB;16B"),
     * palette and low-depth gray expanded, gray replicated, alpha dropped. */
    if (depth == 16) png_set_strip_16(png);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    if (r->keep_alpha && png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
    else if (color & PNG_COLOR_MASK_ALPHA && !r->keep_alpha) png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    const int ch = png_get_channels(png, info);
    if ((ch != 3 && ch != 4) || (ch == 4 && !r->keep_alpha) || png_get_rowbytes(png, info) != (size_t)w * (size_t)ch ||
        png_get_bit_depth(png, info) != 8)
        return fx_fail(r->err, FLUX_ERR_FORMAT, "%s: unsupported PNG layout (color type %d, depth %d)", r->name,
                       color, depth);

    r->img = flux_image_new((int)w, (int)h, ch);
    r->rows = malloc((size_t)h * sizeof *r->rows);
    if (!r->img || !r->rows)
        return fx_fail(r->err, FLUX_ERR_NOMEM, "%s: out of memory for a %ux%u image", r->name, (unsigned)w,
                       (unsigned)h);
    for (png_uint_32 y = 0; y < h; y++) r->rows[y] = r->img->data + (size_t)y * w * (size_t)ch;
    png_read_image(png, r->rows);
    png_read_end(png, info); /* text chunks after IDAT land in info too */
    return read_text(r);
}

static int decode_guarded(png_reader *r) {
    if (setjmp(png_jmpbuf(r->png))) return 0;
    r->status = decode_body(r);
    return 1;
}

static flux_status decode(const uint8_t *data, size_t n, const char *name, int keep_alpha, flux_image **out,
                          fx_err *err) {
    *out = NULL;
    png_reader r;
    memset(&r, 0, sizeof r);
    r.keep_alpha = keep_alpha;
    r.data = data;
    r.n = n;
    r.name = name;
    r.err = err;
    if (n < 8 || memcmp(data, "\x89PNG\r\n\x1a\n", 8))
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: not a PNG file (bad signature)", name);
    flux_status s = scan_chunks(data, n, name, &r.idat, err);
    if (s != FLUX_OK) return s;
    r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r.msg, on_png_error, on_png_warning);
    if (r.png) r.info = png_create_info_struct(r.png);
    if (!r.png || !r.info) {
        png_destroy_read_struct(r.png ? &r.png : NULL, NULL, NULL);
        return fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory starting the PNG decoder", name);
    }
    if (!decode_guarded(&r))
        s = fx_fail(err, FLUX_ERR_FORMAT, "%s: invalid or truncated PNG: %s", name, r.msg.text);
    else
        s = r.status;
    png_destroy_read_struct(&r.png, &r.info, NULL);
    free(r.rows);
    if (s != FLUX_OK) {
        flux_image_free(r.img);
        return s;
    }
    *out = r.img;
    return FLUX_OK;
}

flux_status fx_png_decode(const uint8_t *data, size_t n, const char *name, flux_image **out, fx_err *err) {
    return decode(data, n, name, 0, out, err);
}

flux_status fx_png_decode_alpha(const uint8_t *data, size_t n, const char *name, flux_image **out, fx_err *err) {
    return decode(data, n, name, 1, out, err);
}

/* --------------------------------------------------------------- encoding */

typedef struct png_writer {
    png_structp png;
    png_infop info;
    png_msg msg;
    FILE *f;
    const flux_image *img;
    const char *name;
    fx_err *err;
    flux_status status;
    png_textp text;   /* [img->n_text] */
    char **strings;   /* [2·n_text] converted keys and values we own */
    png_bytep *rows;
} png_writer;

static void write_to_file(png_structp png, png_bytep src, png_size_t len) {
    png_writer *w = png_get_io_ptr(png);
    if (fwrite(src, 1, len, w->f) != len) {
        char why[128];
        snprintf(why, sizeof why, "write failed: %s", strerror(errno ? errno : EIO));
        png_error(png, why);
    }
}

static void flush_file(png_structp png) {
    png_writer *w = png_get_io_ptr(png);
    fflush(w->f);
}

/* Build the text chunk list: Latin-1 values as tEXt, others as iTXt. */
static flux_status prepare_text(png_writer *w) {
    const flux_image *img = w->img;
    if (img->n_text == 0) return FLUX_OK;
    w->text = calloc((size_t)img->n_text, sizeof *w->text);
    w->strings = calloc(2 * (size_t)img->n_text, sizeof *w->strings);
    if (!w->text || !w->strings) return fx_fail(w->err, FLUX_ERR_NOMEM, "out of memory writing %s", w->name);
    for (int i = 0; i < img->n_text; i++) {
        const char *key = img->text_keys[i], *value = img->text_values[i] ? img->text_values[i] : "";
        if (!fx_png_keyword_ok(key))
            return fx_fail(w->err, FLUX_ERR_INVALID_ARG,
                           "cannot write %s: metadata key '%s' is not a PNG keyword (1-79 printable Latin-1 "
                           "characters, no leading, trailing or double spaces)",
                           w->name, key);
        if (fx_utf8_to_latin1(key, &w->strings[2 * i]) != 1)
            return fx_fail(w->err, FLUX_ERR_NOMEM, "out of memory writing %s", w->name);
        int latin1 = fx_utf8_to_latin1(value, &w->strings[2 * i + 1]);
        if (latin1 < 0) return fx_fail(w->err, FLUX_ERR_NOMEM, "out of memory writing %s", w->name);
        if (latin1 == 0) {
            w->strings[2 * i + 1] = fx_utf8_sanitize(value);
            if (!w->strings[2 * i + 1]) return fx_fail(w->err, FLUX_ERR_NOMEM, "out of memory writing %s", w->name);
        }
        png_textp t = &w->text[i];
        t->compression = latin1 ? PNG_TEXT_COMPRESSION_NONE : PNG_ITXT_COMPRESSION_NONE;
        t->key = w->strings[2 * i];
        t->text = w->strings[2 * i + 1];
        t->text_length = strlen(t->text);
        t->lang = NULL;
        t->lang_key = NULL;
    }
    return FLUX_OK;
}

static flux_status encode_body(png_writer *w) {
    static const int color_types[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                       PNG_COLOR_TYPE_RGB_ALPHA};
    const flux_image *img = w->img;
    flux_status s = prepare_text(w);
    if (s != FLUX_OK) return s;
    w->rows = malloc((size_t)img->height * sizeof *w->rows);
    if (!w->rows) return fx_fail(w->err, FLUX_ERR_NOMEM, "out of memory writing %s", w->name);
    size_t stride = (size_t)img->width * (size_t)img->channels;
    for (int y = 0; y < img->height; y++) w->rows[y] = img->data + (size_t)y * stride;

    png_set_write_fn(w->png, w, write_to_file, flush_file);
    png_set_IHDR(w->png, w->info, (png_uint_32)img->width, (png_uint_32)img->height, 8,
                 color_types[img->channels], PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (img->n_text) png_set_text(w->png, w->info, w->text, img->n_text);
    png_write_info(w->png, w->info);
    png_write_image(w->png, w->rows);
    png_write_end(w->png, NULL);
    return FLUX_OK;
}

static int encode_guarded(png_writer *w) {
    if (setjmp(png_jmpbuf(w->png))) return 0;
    w->status = encode_body(w);
    return 1;
}

flux_status fx_png_write(FILE *f, const flux_image *img, const char *name, fx_err *err) {
    png_writer w;
    memset(&w, 0, sizeof w);
    w.f = f;
    w.img = img;
    w.name = name;
    w.err = err;
    w.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &w.msg, on_png_error, on_png_warning);
    if (w.png) w.info = png_create_info_struct(w.png);
    if (!w.png || !w.info) {
        png_destroy_write_struct(w.png ? &w.png : NULL, NULL);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory starting the PNG encoder for %s", name);
    }
    flux_status s;
    if (!encode_guarded(&w))
        s = fx_fail(err, FLUX_ERR_IO, "cannot write %s: %s", name, w.msg.text);
    else
        s = w.status;
    png_destroy_write_struct(&w.png, &w.info);
    if (w.strings)
        for (int i = 0; i < 2 * img->n_text; i++) free(w.strings[i]);
    free(w.strings);
    free(w.text);
    free(w.rows);
    return s;
}

flux_status fx_png_encode(const flux_image *img, const char *name, uint8_t **out, size_t *len, fx_err *err) {
    char *buf = NULL;
    size_t n = 0;
    *out = NULL;
    *len = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory encoding %s", name);
    flux_status s = fx_png_write(f, img, name, err);
    if (fclose(f) != 0 && s == FLUX_OK) s = fx_fail(err, FLUX_ERR_NOMEM, "out of memory encoding %s", name);
    if (s != FLUX_OK) {
        free(buf);
        return s;
    }
    *out = (uint8_t *)buf;
    *len = n;
    return FLUX_OK;
}
