/*
 * test_image.c — flux_image, PNG/PPM codecs, metadata, atomic saves.
 *
 * PNG variants the decoder must handle are written here with libpng
 * directly (gray 1/4/8/16-bit, gray+alpha, palette, RGB 16-bit, RGBA,
 * interlaced), then decoded and compared with the conversion rules of
 * codecs.h computed independently in the test.
 */
#include "tests/test.h"

#include <png.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flux.h"
#include "src/base/error.h"
#include "src/image/codecs.h"
#include "src/image/image_meta.h"

/* ------------------------------------------------------------ helpers */

static flux_image *noise_image(int w, int h, int c, uint64_t seed) {
    flux_image *img = flux_image_new(w, h, c);
    fx_test_rng r;
    fx_test_rng_seed(&r, seed);
    for (size_t i = 0; i < (size_t)w * h * c; i++) img->data[i] = (uint8_t)(fx_test_rng_u64(&r) >> 56);
    return img;
}

/* The bytes of a noise_image PNG with one text chunk key=value, saved as
 * <tmp>/<name> (malloc'd); NULL after a failure. */
static uint8_t *noise_png_bytes(const char *name, int w, int h, uint64_t seed, const char *key, const char *value,
                                size_t *n) {
    const char *path = fx_test_tmp_path(name);
    flux_image *img = noise_image(w, h, 3, seed);
    flux_image_set_text(img, key, value);
    flux_status st = flux_image_save(NULL, img, path);
    flux_image_free(img);
    if (st != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "saving %s: %s", path, flux_status_name(st));
        return NULL;
    }
    return (uint8_t *)fx_test_read_file(path, n);
}

/* Write a PNG with libpng: rows are raw PNG samples (16-bit big-endian). */
typedef struct raw_png {
    int w, h, color, depth, interlace;
    const uint8_t *samples;     /* h rows of rowbytes */
    const png_color *palette;
    int n_palette;
    const char *end_text_key;   /* a tEXt chunk after IDAT */
    const char *end_text_value;
} raw_png;

static int write_raw_png(const char *path, const raw_png *rp) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    png_infop end = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        fclose(f);
        return -1;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, rp->w, rp->h, rp->depth, rp->color, rp->interlace, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (rp->palette) png_set_PLTE(png, info, rp->palette, rp->n_palette);
    png_write_info(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    png_bytep *rows = malloc(sizeof(png_bytep) * rp->h);
    for (int y = 0; y < rp->h; y++) rows[y] = (png_bytep)rp->samples + (size_t)y * rowbytes;
    png_write_image(png, rows);
    if (rp->end_text_key) {
        png_text t = {0};
        t.compression = PNG_TEXT_COMPRESSION_NONE;
        t.key = (char *)rp->end_text_key;
        t.text = (char *)rp->end_text_value;
        png_set_text(png, end, &t, 1);
    }
    png_write_end(png, end);
    free(rows);
    png_destroy_write_struct(&png, &info);
    png_destroy_info_struct(png, &end);
    fclose(f);
    return 0;
}

static flux_image *load_ok(const char *path) {
    flux_ctx *ctx = flux_new(NULL);
    flux_image *img = NULL;
    flux_status s = flux_image_load(ctx, path, &img);
    if (s != FLUX_OK) fx_test_fail(__FILE__, __LINE__, "load %s: %s", path, flux_error(ctx));
    flux_free(ctx);
    return img;
}

/* Load must fail cleanly: status non-OK, *out NULL, message names the file. */
static void expect_load_fails(const char *path, const char *fragment) {
    flux_ctx *ctx = flux_new(NULL);
    flux_image *img = (flux_image *)1;
    flux_status s = flux_image_load(ctx, path, &img);
    CHECK_MSG(s != FLUX_OK, "%s loaded but should fail", path);
    CHECK(img == NULL);
    CHECK_MSG(strstr(flux_error(ctx), path) != NULL, "message does not name the file: %s", flux_error(ctx));
    if (fragment) CHECK_MSG(strstr(flux_error(ctx), fragment) != NULL, "'%s' not in: %s", fragment, flux_error(ctx));
    if (s == FLUX_OK) flux_image_free(img);
    flux_free(ctx);
}

/* Chunk types in file order, concatenated ("IHDRtEXtIDATIEND"). */
static void png_chunk_list(const uint8_t *d, size_t n, char *out, size_t size) {
    size_t pos = 8, o = 0;
    out[0] = 0;
    while (pos + 12 <= n && o + 5 < size) {
        uint32_t len = (uint32_t)d[pos] << 24 | d[pos + 1] << 16 | d[pos + 2] << 8 | d[pos + 3];
        memcpy(out + o, d + pos + 4, 4);
        o += 4;
        out[o] = 0;
        pos += 12 + (size_t)len;
    }
}

/* A PNG that is only signature + IHDR (w × h, 8-bit RGB) + a tiny IDAT. */
static size_t forged_png(uint8_t *buf, uint32_t w, uint32_t h) {
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    size_t n = 0;
    memcpy(buf, sig, 8);
    n = 8;
    fx_test_put_be32(buf + n, 13);
    memcpy(buf + n + 4, "IHDR", 4);
    fx_test_put_be32(buf + n + 8, w);
    fx_test_put_be32(buf + n + 12, h);
    buf[n + 16] = 8, buf[n + 17] = 2, buf[n + 18] = 0, buf[n + 19] = 0, buf[n + 20] = 0;
    fx_test_put_be32(buf + n + 21, fx_test_crc32(buf + n + 4, 17));
    n += 25;
    static const uint8_t idat[] = {0x78, 0x9c, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01};
    fx_test_put_be32(buf + n, sizeof idat);
    memcpy(buf + n + 4, "IDAT", 4);
    memcpy(buf + n + 8, idat, sizeof idat);
    fx_test_put_be32(buf + n + 8 + sizeof idat, fx_test_crc32(buf + n + 4, 4 + sizeof idat));
    n += 12 + sizeof idat;
    fx_test_put_be32(buf + n, 0);
    memcpy(buf + n + 4, "IEND", 4);
    fx_test_put_be32(buf + n + 8, fx_test_crc32(buf + n + 4, 4));
    return n + 12;
}

/* ------------------------------------------------------------ the type */

TEST(image_new_limits) {
    flux_image *img = flux_image_new(3, 2, 3);
    REQUIRE(img);
    CHECK_EQ_INT(img->width, 3);
    CHECK_EQ_INT(img->height, 2);
    CHECK_EQ_INT(img->channels, 3);
    int zero = 1;
    for (int i = 0; i < 18; i++) zero &= img->data[i] == 0;
    CHECK(zero);
    flux_image_free(img);
    CHECK(flux_image_new(0, 10, 3) == NULL);
    CHECK(flux_image_new(10, -1, 3) == NULL);
    CHECK(flux_image_new(10, 10, 0) == NULL);
    CHECK(flux_image_new(10, 10, 5) == NULL);
    CHECK(flux_image_new(FX_IMAGE_MAX_SIDE + 1, 1, 3) == NULL);
    CHECK(flux_image_new(16384, 16385, 1) == NULL);
    CHECK(fx_image_size_ok(16384, 16384));  /* exactly 2^28 pixels */
    CHECK(!fx_image_size_ok(16384, 16385));
    CHECK(!fx_image_size_ok(0, 5));
    flux_image_free(NULL);
}

TEST(image_text_set_replace_remove) {
    flux_image *img = flux_image_new(1, 1, 3);
    CHECK(flux_image_get_text(img, "a") == NULL);
    CHECK_EQ_INT(flux_image_set_text(img, "a", "1"), FLUX_OK);
    CHECK_EQ_INT(flux_image_set_text(img, "b", "2"), FLUX_OK);
    CHECK_EQ_INT(flux_image_set_text(img, "a", "3"), FLUX_OK);
    CHECK_EQ_INT(img->n_text, 2);
    CHECK(strcmp(flux_image_get_text(img, "a"), "3") == 0);
    CHECK(strcmp(flux_image_get_text(img, "b"), "2") == 0);
    CHECK_EQ_INT(flux_image_set_text(img, "a", NULL), FLUX_OK);
    CHECK_EQ_INT(img->n_text, 1);
    CHECK(flux_image_get_text(img, "a") == NULL);
    CHECK(strcmp(flux_image_get_text(img, "b"), "2") == 0);
    CHECK(flux_image_set_text(img, "", "x") != FLUX_OK);
    CHECK(flux_image_set_text(img, NULL, "x") != FLUX_OK);
    flux_image_free(img);
}

TEST(image_text_encoding_helpers) {
    char *s = NULL;
    CHECK_EQ_INT(fx_utf8_to_latin1("caf\xC3\xA9", &s), 1);
    REQUIRE(s);
    CHECK(strcmp(s, "caf\xE9") == 0);
    char *u = fx_latin1_to_utf8(s);
    CHECK(strcmp(u, "caf\xC3\xA9") == 0);
    free(s), free(u);
    CHECK_EQ_INT(fx_utf8_to_latin1("\xE7\x8C\xAB", &s), 0); /* 猫 U+732B */
    CHECK(s == NULL);
    CHECK_EQ_INT(fx_utf8_to_latin1("bad \xC3", &s), 0);     /* truncated sequence */
    CHECK_EQ_INT(fx_utf8_to_latin1("\xC0\xAF", &s), 0);     /* overlong '/' */
    char *z = fx_utf8_sanitize("a\xFF" "b\xE7\x8C\xAB\xED\xA0\x80");
    CHECK(strcmp(z, "a\xEF\xBF\xBD" "b\xE7\x8C\xAB\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD") == 0);
    free(z);
    CHECK(fx_png_keyword_ok("parameters"));
    CHECK(fx_png_keyword_ok("Software"));
    CHECK(fx_png_keyword_ok("caf\xC3\xA9 key"));
    CHECK(!fx_png_keyword_ok(""));
    CHECK(!fx_png_keyword_ok(" lead"));
    CHECK(!fx_png_keyword_ok("trail "));
    CHECK(!fx_png_keyword_ok("dou  ble"));
    CHECK(!fx_png_keyword_ok("new\nline"));
    CHECK(!fx_png_keyword_ok("\xE7\x8C\xAB"));
    char k79[80], k80[81];
    memset(k79, 'k', 79), k79[79] = 0;
    memset(k80, 'k', 80), k80[80] = 0;
    CHECK(fx_png_keyword_ok(k79));
    CHECK(!fx_png_keyword_ok(k80));
}

/* ------------------------------------------------------------ PNG */

TEST(image_png_roundtrip_rgb_with_metadata) {
    const char *path = fx_test_tmp_path("rt.png");
    flux_image *img = noise_image(37, 23, 3, 1);
    const char *prompt = "\xE4\xB8\x80\xE5\x8F\xAA\xE7\x8C\xAB on a skateboard, caf\xC3\xA9"; /* 一只猫 ... café */
    REQUIRE(fx_image_set_generation_text(img, prompt, "", 4, 42, 37, 23, 1.0f, "shifted", "FLUX.2-klein-4B", NULL) ==
            FLUX_OK);
    REQUIRE(flux_image_set_text(img, "comment", "caf\xC3\xA9 \xC2\xB1 1") == FLUX_OK); /* Latin-1 range */
    flux_ctx *ctx = flux_new(NULL);
    REQUIRE_MSG(flux_image_save(ctx, img, path) == FLUX_OK, "%s", flux_error(ctx));
    flux_free(ctx);

    flux_image *back = load_ok(path);
    REQUIRE(back);
    CHECK_EQ_INT(back->width, 37);
    CHECK_EQ_INT(back->height, 23);
    CHECK_EQ_INT(back->channels, 3);
    CHECK(memcmp(back->data, img->data, 37 * 23 * 3) == 0);
    CHECK_EQ_INT(back->n_text, img->n_text);
    for (int i = 0; i < img->n_text; i++) {
        const char *v = flux_image_get_text(back, img->text_keys[i]);
        CHECK_MSG(v && !strcmp(v, img->text_values[i]), "key %s: '%s' != '%s'", img->text_keys[i],
                  v ? v : "(missing)", img->text_values[i]);
    }
    CHECK(strcmp(flux_image_get_text(back, "prompt"), prompt) == 0);
    CHECK(strcmp(flux_image_get_text(back, "seed"), "42") == 0);
    CHECK(strcmp(flux_image_get_text(back, "size"), "37x23") == 0);

    /* Non-Latin-1 values went to iTXt, Latin-1 ones to tEXt with Latin-1
     * bytes (é = 0xE9 in the file). */
    size_t n;
    uint8_t *raw = (uint8_t *)fx_test_read_file(path, &n);
    char chunks[512];
    png_chunk_list(raw, n, chunks, sizeof chunks);
    CHECK_MSG(strstr(chunks, "iTXt") && strstr(chunks, "tEXt"), "chunks: %s", chunks);
    CHECK(memmem(raw, n, "comment\0caf\xE9 \xB1 1", 16) != NULL);
    CHECK(memmem(raw, n, "seed\0" "42", 7) != NULL);
    free(raw);
    flux_image_free(back);
    flux_image_free(img);
}

TEST(image_png_roundtrip_channels) {
    for (int c = 1; c <= 4; c++) {
        char name[32];
        snprintf(name, sizeof name, "c%d.png", c);
        const char *path = fx_test_tmp_path(name);
        flux_image *img = noise_image(9, 5, c, 10 + c);
        REQUIRE(flux_image_save(NULL, img, path) == FLUX_OK);
        flux_image *back = load_ok(path);
        REQUIRE(back);
        CHECK_EQ_INT(back->channels, 3);
        int ok = 1;
        for (int i = 0; i < 9 * 5; i++)
            for (int k = 0; k < 3; k++) {
                int src = c <= 2 ? 0 : k; /* gray replicated; alpha dropped */
                ok &= back->data[i * 3 + k] == img->data[i * c + src];
            }
        CHECK_MSG(ok, "channels %d: pixels differ", c);
        flux_image_free(back);
        flux_image_free(img);
    }
}

TEST(image_png_reads_every_color_type) {
    enum { W = 11, H = 7 };
    uint8_t samples[H * W * 8];
    fx_test_rng r;
    fx_test_rng_seed(&r, 7);
    for (size_t i = 0; i < sizeof samples; i++) samples[i] = (uint8_t)(fx_test_rng_u64(&r) >> 56);
    png_color pal[16];
    for (int i = 0; i < 16; i++) pal[i] = (png_color){(uint8_t)(i * 16), (uint8_t)(255 - i), (uint8_t)(i * 7)};
    /* Palette indices must stay < 16; 1/4-bit gray: any bits are valid. */
    uint8_t pal_samples[H * W];
    for (int i = 0; i < H * W; i++) pal_samples[i] = samples[i] & 15;

    struct {
        const char *name;
        int color, depth, interlace;
        const uint8_t *s;
    } cases[] = {
        {"gray8", PNG_COLOR_TYPE_GRAY, 8, 0, samples},
        {"gray16", PNG_COLOR_TYPE_GRAY, 16, 0, samples},
        {"gray4", PNG_COLOR_TYPE_GRAY, 4, 0, samples},
        {"gray1", PNG_COLOR_TYPE_GRAY, 1, 0, samples},
        {"gray_alpha8", PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0, samples},
        {"gray_alpha16", PNG_COLOR_TYPE_GRAY_ALPHA, 16, 0, samples},
        {"rgb16", PNG_COLOR_TYPE_RGB, 16, 0, samples},
        {"rgba8", PNG_COLOR_TYPE_RGB_ALPHA, 8, 0, samples},
        {"rgba16", PNG_COLOR_TYPE_RGB_ALPHA, 16, 0, samples},
        {"palette8", PNG_COLOR_TYPE_PALETTE, 8, 0, pal_samples},
        {"rgb8_interlaced", PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_ADAM7, samples},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const char *path = fx_test_tmp_path("ct.png");
        raw_png rp = {W, H, cases[ci].color, cases[ci].depth, cases[ci].interlace, cases[ci].s, NULL, 0, NULL, NULL};
        if (cases[ci].color == PNG_COLOR_TYPE_PALETTE) rp.palette = pal, rp.n_palette = 16;
        REQUIRE(write_raw_png(path, &rp) == 0);
        flux_image *img = load_ok(path);
        if (!img) continue;
        CHECK_EQ_INT(img->width, W);
        CHECK_EQ_INT(img->height, H);
        int channels = cases[ci].color == PNG_COLOR_TYPE_GRAY ? 1 : cases[ci].color == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                     : cases[ci].color == PNG_COLOR_TYPE_RGB ? 3 : cases[ci].color == PNG_COLOR_TYPE_RGB_ALPHA ? 4 : 1;
        int depth = cases[ci].depth;
        size_t rowbytes = ((size_t)W * channels * depth + 7) / 8;
        int bad = 0;
        for (int y = 0; y < H && !bad; y++)
            for (int x = 0; x < W && !bad; x++) {
                const uint8_t *row = cases[ci].s + (size_t)y * rowbytes;
                uint8_t want[3];
                if (cases[ci].color == PNG_COLOR_TYPE_PALETTE) {
                    png_color p = pal[row[x]];
                    want[0] = p.red, want[1] = p.green, want[2] = p.blue;
                } else if (depth < 8) { /* gray 1/4-bit, MSB first, scaled to 0..255 */
                    int per = 8 / depth, shift = 8 - depth * (x % per + 1);
                    int v = (row[x / per] >> shift) & ((1 << depth) - 1);
                    want[0] = want[1] = want[2] = (uint8_t)(v * 255 / ((1 << depth) - 1));
                } else {
                    int bps = depth / 8; /* bytes per sample; 16-bit keeps the high byte */
                    for (int k = 0; k < 3; k++) {
                        int ch = channels <= 2 ? 0 : k;
                        want[k] = row[((size_t)x * channels + ch) * bps];
                    }
                }
                const uint8_t *got = img->data + ((size_t)y * W + x) * 3;
                if (memcmp(got, want, 3)) {
                    fx_test_fail(__FILE__, __LINE__, "%s: pixel (%d,%d) = %d,%d,%d, want %d,%d,%d", cases[ci].name, x,
                                 y, got[0], got[1], got[2], want[0], want[1], want[2]);
                    bad = 1;
                }
            }
        flux_image_free(img);
    }
}

TEST(image_png_alpha_dropped_not_composited) {
    /* A fully transparent red pixel stays red (PIL convert("RGB")). */
    uint8_t px[8] = {255, 0, 0, 0, 0, 0, 255, 128};
    const char *path = fx_test_tmp_path("alpha.png");
    raw_png rp = {2, 1, PNG_COLOR_TYPE_RGB_ALPHA, 8, 0, px, NULL, 0, NULL, NULL};
    REQUIRE(write_raw_png(path, &rp) == 0);
    flux_image *img = load_ok(path);
    REQUIRE(img);
    uint8_t want[6] = {255, 0, 0, 0, 0, 255};
    CHECK(memcmp(img->data, want, 6) == 0);
    flux_image_free(img);
}

TEST(image_png_text_after_idat_and_latin1) {
    uint8_t px[3] = {1, 2, 3};
    const char *path = fx_test_tmp_path("late.png");
    raw_png rp = {1, 1, PNG_COLOR_TYPE_RGB, 8, 0, px, NULL, 0, "Comment", "na\xEFve"}; /* Latin-1 ï */
    REQUIRE(write_raw_png(path, &rp) == 0);
    flux_image *img = load_ok(path);
    REQUIRE(img);
    const char *v = flux_image_get_text(img, "Comment");
    CHECK_MSG(v && !strcmp(v, "na\xC3\xAFve"), "got '%s'", v ? v : "(null)");
    flux_image_free(img);
}

TEST(image_png_reads_golden_reference) {
    flux_image *img = load_ok(fx_test_path("golden/multiref-48x48-2step/ref1.png"));
    REQUIRE(img);
    CHECK_EQ_INT(img->width, 32);
    CHECK_EQ_INT(img->height, 48);
    CHECK_EQ_INT(img->channels, 3);
    flux_image_free(img);
}

TEST(image_png_rejects_bad_files) {
    /* zero bytes, not an image, signature only */
    const char *p0 = fx_test_tmp_path("zero.png");
    REQUIRE(fx_test_write_file(p0, "", 0) == 0);
    expect_load_fails(p0, "empty");
    const char *p1 = fx_test_tmp_path("text.png");
    REQUIRE(fx_test_write_file(p1, "hello world", 11) == 0);
    expect_load_fails(p1, "not a PNG");
    const char *p2 = fx_test_tmp_path("sig.png");
    REQUIRE(fx_test_write_file(p2, "\x89PNG\r\n\x1a\n", 8) == 0);
    expect_load_fails(p2, NULL);
    expect_load_fails(fx_test_tmp_path("missing.png"), "cannot open");
    expect_load_fails(fx_test_tmpdir(), NULL); /* a directory */

    /* a valid PNG truncated at every length, and with flipped bytes */
    size_t n;
    uint8_t *data = noise_png_bytes("good.png", 20, 10, 3, "k", "v", &n);
    REQUIRE(data);
    fx_err err;
    int truncated_ok = 0;
    for (size_t cut = 0; cut < n; cut++) {
        flux_image *out = NULL;
        if (fx_png_decode(data, cut, "cut.png", &out, &err) == FLUX_OK) truncated_ok++, flux_image_free(out);
    }
    CHECK_MSG(truncated_ok == 0, "%d truncated PNGs decoded", truncated_ok);
    uint8_t *bad = malloc(n);
    for (size_t i = 8; i < n; i += 3) {
        memcpy(bad, data, n);
        bad[i] ^= 0x5A;
        flux_image *out = NULL;
        flux_status s = fx_png_decode(bad, n, "flip.png", &out, &err);
        if (s == FLUX_OK) {
            CHECK(out && out->width >= 1);
            flux_image_free(out);
        } else {
            CHECK(out == NULL);
        }
    }
    free(bad);
    free(data);
}

TEST(image_png_rejects_huge_dimensions_before_allocating) {
    uint8_t buf[128];
    fx_err err;
    flux_image *out = NULL;
    size_t n = forged_png(buf, 20000, 20000);
    CHECK(fx_png_decode(buf, n, "huge.png", &out, &err) == FLUX_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "too large"), "%s", err.msg);
    n = forged_png(buf, 16384, 16385);
    CHECK(fx_png_decode(buf, n, "huge2.png", &out, &err) == FLUX_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "too large"), "%s", err.msg);
    /* Allowed dimensions, but a 60-byte file cannot hold 16384² pixels:
     * rejected without allocating 768 MiB (RLIMIT_AS makes sure). */
    struct rlimit lim = {256u << 20, 256u << 20};
    setrlimit(RLIMIT_AS, &lim);
    n = forged_png(buf, 16384, 16384);
    CHECK(fx_png_decode(buf, n, "big.png", &out, &err) == FLUX_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "truncated or corrupt"), "%s", err.msg);
    CHECK(out == NULL);
    n = forged_png(buf, 0, 5);
    CHECK(fx_png_decode(buf, n, "zero.png", &out, &err) == FLUX_ERR_FORMAT);
}

TEST(image_png_random_mutations_never_crash) {
    /* In-suite mini fuzzing (the real fuzzer is tests/fuzz/fuzz_png.c). */
    size_t n;
    uint8_t *data = noise_png_bytes("m.png", 16, 16, 5, "prompt", "\xE7\x8C\xAB", &n);
    REQUIRE(data);
    uint8_t *m = malloc(n);
    fx_test_rng r;
    fx_test_rng_seed(&r, 99);
    int decoded = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(m, data, n);
        int flips = 1 + (int)(fx_test_rng_u64(&r) % 4);
        for (int k = 0; k < flips; k++) m[fx_test_rng_u64(&r) % n] = (uint8_t)fx_test_rng_u64(&r);
        size_t len = it % 3 ? n : (size_t)(fx_test_rng_u64(&r) % n);
        fx_err err;
        flux_image *out = NULL;
        if (fx_png_decode(m, len, "mut.png", &out, &err) == FLUX_OK) {
            decoded++;
            CHECK(out->width == 16 && out->height == 16);
            flux_image_free(out);
        }
    }
    CHECK(decoded < 20000);
    free(m);
    free(data);
}

TEST(image_png_rejects_bad_metadata_key) {
    const char *path = fx_test_tmp_path("key.png");
    flux_image *img = noise_image(2, 2, 3, 1);
    flux_image_set_text(img, "\xE7\x8C\xAB", "cat"); /* not Latin-1 */
    flux_ctx *ctx = flux_new(NULL);
    CHECK(flux_image_save(ctx, img, path) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(strstr(flux_error(ctx), "keyword"), "%s", flux_error(ctx));
    CHECK(!fx_test_file_exists(path));
    CHECK_EQ_INT(fx_test_dir_entries(fx_test_tmpdir()), 0);
    flux_free(ctx);
    flux_image_free(img);
}

TEST(image_png_invalid_utf8_value_is_sanitized) {
    const char *path = fx_test_tmp_path("bad_utf8.png");
    flux_image *img = noise_image(2, 2, 3, 1);
    flux_image_set_text(img, "prompt", "cat \xFF\xE7\x8C\xAB");
    REQUIRE(flux_image_save(NULL, img, path) == FLUX_OK);
    flux_image *back = load_ok(path);
    REQUIRE(back);
    const char *v = flux_image_get_text(back, "prompt");
    CHECK(v && !strcmp(v, "cat \xEF\xBF\xBD\xE7\x8C\xAB"));
    flux_image_free(back);
    flux_image_free(img);
}

/* ------------------------------------------------------------ PPM */

TEST(image_ppm_roundtrip_and_gray) {
    const char *path = fx_test_tmp_path("rt.ppm");
    flux_image *img = noise_image(13, 6, 3, 2);
    REQUIRE(flux_image_save(NULL, img, path) == FLUX_OK);
    size_t n;
    char *raw = fx_test_read_file(path, &n);
    CHECK(n == 12 + 13 * 6 * 3 && !memcmp(raw, "P6\n13 6\n255\n", 12));
    free(raw);
    flux_image *back = load_ok(path);
    REQUIRE(back);
    CHECK(back->width == 13 && back->height == 6 && !memcmp(back->data, img->data, 13 * 6 * 3));
    flux_image_free(back);
    flux_image_free(img);

    /* P5 with comments everywhere whitespace may be; gray → RGB */
    const char *p5 = fx_test_tmp_path("g.pgm");
    const char hdr[] = "P5 # comment\n# another\n3 # w\n2\n#max\n255\n";
    uint8_t file[sizeof hdr - 1 + 6];
    memcpy(file, hdr, sizeof hdr - 1);
    for (int i = 0; i < 6; i++) file[sizeof hdr - 1 + i] = (uint8_t)(i * 40);
    REQUIRE(fx_test_write_file(p5, file, sizeof file) == 0);
    back = load_ok(p5);
    REQUIRE(back);
    CHECK(back->width == 3 && back->height == 2 && back->channels == 3);
    int ok = 1;
    for (int i = 0; i < 6; i++)
        for (int k = 0; k < 3; k++) ok &= back->data[i * 3 + k] == i * 40;
    CHECK(ok);
    flux_image_free(back);

    /* 16-bit samples with maxval 1000: round(v·255/maxval) */
    uint8_t f16[64];
    int hl = snprintf((char *)f16, sizeof f16, "P6\n1 1\n1000\n");
    uint16_t vals[3] = {0, 500, 1000};
    for (int k = 0; k < 3; k++) f16[hl + 2 * k] = (uint8_t)(vals[k] >> 8), f16[hl + 2 * k + 1] = (uint8_t)vals[k];
    const char *p16 = fx_test_tmp_path("16.ppm");
    REQUIRE(fx_test_write_file(p16, f16, (size_t)hl + 6) == 0);
    back = load_ok(p16);
    REQUIRE(back);
    CHECK(back->data[0] == 0 && back->data[1] == 128 && back->data[2] == 255);
    flux_image_free(back);
}

TEST(image_ppm_rejects_bad_headers) {
    const char *cases[][2] = {
        {"P6\n", "width"},
        {"P6\n4 4\n", "maxval"},
        {"P6\n4 4\n0\n", "maxval is 0"},
        {"P6\n4 4\n70000\n", "maxval"},
        {"P6\n0 4\n255\n", "invalid or too large"},
        {"P6\n99999 99999\n255\n", "too large"},
        {"P6\n99999999999999999999 1\n255\n", "width"},
        {"P6\n4 4\n255\nabc", "truncated"},
        {"P6\n-4 4\n255\n", "width"},
        {"P64 4 255\n", "whitespace"},
        {"P6\n4 4\n255", "whitespace"},
        {"P3\n1 1\n255\n0 0 0\n", "not a PNG"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *path = fx_test_tmp_path("bad.ppm");
        REQUIRE(fx_test_write_file(path, cases[i][0], strlen(cases[i][0])) == 0);
        expect_load_fails(path, cases[i][1]);
    }
}

/* ------------------------------------------------------------ saving */

TEST(image_save_unknown_extension) {
    flux_image *img = noise_image(2, 2, 3, 1);
    flux_ctx *ctx = flux_new(NULL);
    CHECK(flux_image_save(ctx, img, fx_test_tmp_path("x.jpg")) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(strstr(flux_error(ctx), ".png or .ppm"), "%s", flux_error(ctx));
    CHECK(flux_image_save(ctx, img, fx_test_tmp_path("noext")) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(strstr(flux_error(ctx), "no file extension"), "%s", flux_error(ctx));
    CHECK(flux_image_save(ctx, img, fx_test_tmp_path("UPPER.PNG")) == FLUX_OK);
    CHECK_EQ_INT(fx_test_dir_entries(fx_test_tmpdir()), 1);
    flux_free(ctx);
    flux_image_free(img);
}

TEST(image_save_failures_leave_no_file) {
    flux_image *img = noise_image(64, 64, 3, 4);
    flux_ctx *ctx = flux_new(NULL);
    /* the destination is a directory */
    const char *dir = fx_test_tmp_path("adir.png");
    REQUIRE(mkdir(dir, 0755) == 0);
    CHECK(flux_image_save(ctx, img, dir) == FLUX_ERR_IO);
    CHECK_MSG(strstr(flux_error(ctx), dir), "%s", flux_error(ctx));
    CHECK_EQ_INT(fx_test_dir_entries(fx_test_tmpdir()), 1);
    CHECK_EQ_INT(fx_test_dir_entries(dir), 0);
    /* the directory does not exist */
    CHECK(flux_image_save(ctx, img, fx_test_tmp_path("nodir/out.png")) == FLUX_ERR_IO);
    CHECK_MSG(strstr(flux_error(ctx), "nodir/out.png"), "%s", flux_error(ctx));
    /* a write that fails half-way (file size limit): the old file stays
     * intact and no temporary file is left behind */
    const char *dst = fx_test_tmp_path("keep.png");
    REQUIRE(fx_test_write_file(dst, "old content", 11) == 0);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {2000, 2000};
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    CHECK(flux_image_save(ctx, img, dst) == FLUX_ERR_IO);
    CHECK_MSG(strstr(flux_error(ctx), dst), "%s", flux_error(ctx));
    CHECK(flux_image_save(ctx, img, fx_test_tmp_path("new.ppm")) == FLUX_ERR_IO);
    CHECK(!fx_test_file_exists(fx_test_tmp_path("new.ppm")));
    size_t n;
    char *content = fx_test_read_file(dst, &n);
    CHECK(content && n == 11 && !memcmp(content, "old content", 11));
    free(content);
    CHECK_EQ_INT(fx_test_dir_entries(fx_test_tmpdir()), 2); /* adir.png and keep.png */
    flux_free(ctx);
    flux_image_free(img);
}

TEST(image_save_read_only_directory) {
    /* root ignores permissions: this case only means something otherwise */
    const char *dir = fx_test_tmp_path("ro");
    REQUIRE(mkdir(dir, 0555) == 0);
    char path[1100];
    snprintf(path, sizeof path, "%s/out.png", dir);
    flux_image *img = noise_image(4, 4, 3, 4);
    flux_status s = flux_image_save(NULL, img, path);
    if (geteuid() != 0) {
        CHECK(s == FLUX_ERR_IO);
        CHECK_EQ_INT(fx_test_dir_entries(dir), 0);
    } else {
        CHECK(s == FLUX_OK); /* root may write; the save is still whole */
        flux_image *back = load_ok(path);
        CHECK(back && !memcmp(back->data, img->data, 48));
        flux_image_free(back);
    }
    chmod(dir, 0755);
    flux_image_free(img);
}

/* ------------------------------------------------------------ A1111 */

TEST(image_generation_metadata_a1111) {
    char *t = fx_a1111_parameters("a cat", NULL, 4, 42, 256, 256, 1.0f, "shifted", "FLUX.2-klein-4B", NULL);
    CHECK_MSG(!strcmp(t, "a cat\nSteps: 4, Sampler: Euler, Schedule type: shifted, CFG scale: 1, Seed: 42, "
                         "Size: 256x256, Model: FLUX.2-klein-4B, Version: flux.c " FLUX_VERSION_STRING),
              "got: %s", t);
    free(t);
    /* negative line; values with ',' ':' quoted as JSON; size is WxH;
     * surrounding whitespace stripped */
    t = fx_a1111_parameters("  a \"red\" apple\n", "blurry, low", 50, 18446744073709551614ull, 512, 384, 4.5f,
                            "power (alpha 2)", "my, model: v2", "flux.c 9");
    CHECK_MSG(!strcmp(t, "a \"red\" apple\n\nNegative prompt: blurry, low\nSteps: 50, Sampler: Euler, Schedule type: "
                         "power (alpha 2), CFG scale: 4.5, Seed: 18446744073709551614, Size: 512x384, Model: "
                         "\"my, model: v2\", Version: flux.c 9"),
              "got: %s", t);
    free(t);

    flux_image *img = flux_image_new(1, 1, 3);
    REQUIRE(fx_image_set_generation_text(img, "a cat", "ugly", 4, 7, 64, 80, 1.0f, "linear", "M", NULL) == FLUX_OK);
    const char *keys[] = {"prompt", "negative_prompt", "seed", "steps", "size", "guidance", "schedule", "model",
                          "Software", "parameters"};
    const char *vals[] = {"a cat", "ugly", "7", "4", "64x80", "1", "linear", "M", "flux.c " FLUX_VERSION_STRING, NULL};
    for (int i = 0; i < 10; i++) {
        const char *v = flux_image_get_text(img, keys[i]);
        CHECK_MSG(v != NULL, "missing %s", keys[i]);
        if (v && vals[i]) CHECK_MSG(!strcmp(v, vals[i]), "%s = '%s'", keys[i], v);
    }
    CHECK(strstr(flux_image_get_text(img, "parameters"), "Negative prompt: ugly\nSteps: 4,") != NULL);
    /* setting again without a negative removes the stale key */
    REQUIRE(fx_image_set_generation_text(img, "a dog", NULL, 4, 7, 64, 80, 1.0f, "linear", "M", NULL) == FLUX_OK);
    CHECK(flux_image_get_text(img, "negative_prompt") == NULL);
    flux_image_free(img);
}
