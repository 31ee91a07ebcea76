/*
 * test_show.c — the terminal preview of `flux --show` (src/cli/cli_show.c,
 * compiled into this test: CLI files are not part of libflux): protocol
 * detection from the environment, and the Kitty / iTerm2 escape sequences,
 * decoded back to the PNG and its pixels.
 */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>

#include "src/cli/cli_show.c"

static const char *const g_vars[] = {"FLUX_SHOW", "TERM", "TERM_PROGRAM", "KITTY_WINDOW_ID", "GHOSTTY_RESOURCES_DIR",
                                     "KONSOLE_VERSION", "LC_TERMINAL"};

static void clear_env(void) {
    for (size_t i = 0; i < sizeof g_vars / sizeof *g_vars; i++) unsetenv(g_vars[i]);
}

TEST(show_detects_the_terminal) {
    char why[512];
    clear_env();
    setenv("TERM", "xterm-256color", 1);
    CHECK(cli_show_detect(1, why, sizeof why) == CLI_SHOW_NONE);
    CHECK_MSG(strstr(why, "TERM=xterm-256color") && strstr(why, "FLUX_SHOW=kitty|iterm2"), "why: %s", why);
    static const struct {
        const char *var, *value;
        cli_show_proto want;
    } cases[] = {
        {"TERM", "xterm-kitty", CLI_SHOW_KITTY},       {"KITTY_WINDOW_ID", "3", CLI_SHOW_KITTY},
        {"TERM_PROGRAM", "ghostty", CLI_SHOW_KITTY},   {"TERM", "xterm-ghostty", CLI_SHOW_KITTY},
        {"GHOSTTY_RESOURCES_DIR", "/x", CLI_SHOW_KITTY}, {"KONSOLE_VERSION", "230402", CLI_SHOW_KITTY},
        {"TERM_PROGRAM", "iTerm.app", CLI_SHOW_ITERM2}, {"LC_TERMINAL", "iTerm2", CLI_SHOW_ITERM2},
        {"TERM_PROGRAM", "WezTerm", CLI_SHOW_ITERM2},  {"TERM_PROGRAM", "Apple_Terminal", CLI_SHOW_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        clear_env();
        setenv(cases[i].var, cases[i].value, 1);
        cli_show_proto p = cli_show_detect(1, why, sizeof why);
        CHECK_MSG(p == cases[i].want, "%s=%s: %s, want %s", cases[i].var, cases[i].value, cli_show_proto_name(p),
                  cli_show_proto_name(cases[i].want));
        /* not a terminal: nothing, unless forced */
        CHECK(cli_show_detect(0, why, sizeof why) == CLI_SHOW_NONE && strstr(why, "not a terminal"));
    }
    clear_env();
    setenv("FLUX_SHOW", "kitty", 1);
    CHECK(cli_show_detect(0, why, sizeof why) == CLI_SHOW_KITTY);
    setenv("FLUX_SHOW", "iterm2", 1);
    setenv("TERM", "xterm-kitty", 1); /* forcing wins */
    CHECK(cli_show_detect(1, why, sizeof why) == CLI_SHOW_ITERM2);
    setenv("FLUX_SHOW", "none", 1);
    CHECK(cli_show_detect(1, why, sizeof why) == CLI_SHOW_NONE && strstr(why, "FLUX_SHOW=none"));
    setenv("FLUX_SHOW", "sixel", 1);
    CHECK(cli_show_detect(1, why, sizeof why) == CLI_SHOW_NONE && strstr(why, "'sixel'"));
    clear_env();
}

TEST(show_base64_rfc4648_vectors) {
    static const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        size_t n = 0;
        char *s = base64((const uint8_t *)in[i], strlen(in[i]), &n);
        CHECK_MSG(s && n == strlen(out[i]) && !strcmp(s, out[i]), "base64(%s) = %s", in[i], s ? s : "NULL");
        free(s);
    }
}

static uint8_t *unbase64(const char *s, size_t n, size_t *len) {
    uint8_t *out = malloc(n / 4 * 3 + 3);
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n && s[i] != '='; i++) {
        const char *digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const char *p = strchr(digits, s[i]);
        if (!p || !s[i]) {
            free(out);
            return NULL;
        }
        acc = acc << 6 | (uint32_t)(p - digits);
        bits += 6;
        if (bits >= 8) bits -= 8, out[o++] = (uint8_t)(acc >> bits);
    }
    *len = o;
    return out;
}

/* A noisy RGB image whose PNG needs several Kitty chunks. */
static flux_image *noise_image(int w, int h) {
    flux_image *img = flux_image_new(w, h, 3);
    fx_test_rng r;
    fx_test_rng_seed(&r, 11);
    for (int i = 0; i < w * h * 3; i++) img->data[i] = (uint8_t)fx_test_rng_u64(&r);
    return img;
}

/* The output of cli_show_image into a string. */
static char *show(const flux_image *img, cli_show_proto p, int tmux, size_t *len) {
    char *buf = NULL, err[256];
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    int rc = cli_show_image(f, img, p, tmux, err, sizeof err);
    fclose(f);
    if (rc) {
        fx_test_fail(__FILE__, __LINE__, "cli_show_image: %s", err);
        free(buf);
        return NULL;
    }
    return buf;
}

/* The PNG decodes to img's pixels. */
static void expect_pixels(int line, const uint8_t *png, size_t n, const flux_image *img) {
    flux_image *back = NULL;
    fx_err err = {0};
    if (fx_png_decode(png, n, "preview", &back, &err) != FLUX_OK) {
        fx_test_fail(__FILE__, line, "PNG does not decode: %s", err.msg);
        return;
    }
    if (back->width != img->width || back->height != img->height ||
        memcmp(back->data, img->data, (size_t)img->width * img->height * 3))
        fx_test_fail(__FILE__, line, "decoded pixels differ");
    flux_image_free(back);
}

/* Parse Kitty output into the concatenated payload; checks the framing. */
static char *parse_kitty(int line, const char *s, size_t len, size_t *b64_len, int *chunks) {
    char *payload = malloc(len + 1);
    size_t n = 0;
    const char *p = s, *end = s + len;
    *chunks = 0;
    int last_seen = 0;
    while (p < end && *p == '\033') {
        if (strncmp(p, "\033_G", 3)) break;
        const char *semi = memchr(p, ';', (size_t)(end - p));
        const char *st = semi ? strstr(semi, "\033\\") : NULL;
        if (!semi || !st) {
            fx_test_fail(__FILE__, line, "unterminated Kitty sequence");
            break;
        }
        char ctrl[64];
        snprintf(ctrl, sizeof ctrl, "%.*s", (int)(semi - p - 3), p + 3);
        size_t chunk = (size_t)(st - semi - 1);
        if (*chunks == 0 && strncmp(ctrl, "f=100,a=T,q=2,", 14))
            fx_test_fail(__FILE__, line, "first control data '%s'", ctrl);
        if (*chunks > 0 && strncmp(ctrl, "m=", 2)) fx_test_fail(__FILE__, line, "continuation control '%s'", ctrl);
        int more = strstr(ctrl, "m=1") != NULL;
        if (chunk > CLI_SHOW_KITTY_CHUNK) fx_test_fail(__FILE__, line, "chunk of %zu bytes > 4096", chunk);
        if (more && chunk % 4) fx_test_fail(__FILE__, line, "non-final chunk of %zu bytes (not a multiple of 4)", chunk);
        if (last_seen) fx_test_fail(__FILE__, line, "a chunk after m=0");
        last_seen = !more;
        memcpy(payload + n, semi + 1, chunk);
        n += chunk;
        (*chunks)++;
        p = st + 2;
    }
    if (!last_seen) fx_test_fail(__FILE__, line, "no final chunk (m=0)");
    if (p != end - 1 || *p != '\n') fx_test_fail(__FILE__, line, "trailing bytes after the image");
    payload[n] = 0;
    *b64_len = n;
    return payload;
}

TEST(show_kitty_sequences) {
    flux_image *img = noise_image(64, 48);
    size_t len = 0, b64_len = 0, png_len = 0;
    char *out = show(img, CLI_SHOW_KITTY, 0, &len);
    REQUIRE(out);
    int chunks = 0;
    char *b64 = parse_kitty(__LINE__, out, len, &b64_len, &chunks);
    CHECK_MSG(chunks >= 3, "%d chunks", chunks);
    uint8_t *png = unbase64(b64, b64_len, &png_len);
    REQUIRE(png);
    expect_pixels(__LINE__, png, png_len, img);
    free(png), free(b64), free(out);
    flux_image_free(img);

    /* a tiny image: one chunk, m=0 right away */
    img = noise_image(1, 1);
    out = show(img, CLI_SHOW_KITTY, 0, &len);
    REQUIRE(out);
    b64 = parse_kitty(__LINE__, out, len, &b64_len, &chunks);
    CHECK_EQ_INT(chunks, 1);
    CHECK(!strncmp(out, "\033_Gf=100,a=T,q=2,m=0;", 21));
    free(b64), free(out);
    flux_image_free(img);
}

TEST(show_iterm2_sequence) {
    flux_image *img = noise_image(40, 24);
    size_t len = 0, png_len = 0;
    char *out = show(img, CLI_SHOW_ITERM2, 0, &len);
    REQUIRE(out);
    const char *head = "\033]1337;File=inline=1;size=";
    REQUIRE(!strncmp(out, head, strlen(head)));
    char *colon = strchr(out, ':');
    REQUIRE(colon && len >= 2 && out[len - 2] == '\a' && out[len - 1] == '\n');
    size_t size = strtoul(out + strlen(head), NULL, 10);
    CHECK(strstr(out, ";preserveAspectRatio=1:") != NULL);
    uint8_t *png = unbase64(colon + 1, (size_t)(out + len - 2 - colon - 1), &png_len);
    REQUIRE(png);
    CHECK_EQ_INT(png_len, size);
    expect_pixels(__LINE__, png, png_len, img);
    free(png), free(out);
    flux_image_free(img);
}

/* Undo tmux passthrough: every "ESC P tmux; ... ESC \" with ESC ESC → ESC. */
static char *untmux(int line, const char *s, size_t len, size_t *out_len) {
    char *o = malloc(len + 1);
    size_t n = 0, i = 0;
    while (i < len) {
        if (!strncmp(s + i, "\033Ptmux;", 7)) {
            i += 7;
            for (;;) {
                if (i + 1 >= len) {
                    fx_test_fail(__FILE__, line, "unterminated passthrough");
                    break;
                }
                if (s[i] == '\033' && s[i + 1] == '\033') o[n++] = '\033', i += 2;
                else if (s[i] == '\033' && s[i + 1] == '\\') {
                    i += 2;
                    break;
                } else if (s[i] == '\033') {
                    fx_test_fail(__FILE__, line, "lone ESC inside passthrough");
                    i++;
                } else o[n++] = s[i++];
            }
        } else {
            o[n++] = s[i++];
        }
    }
    *out_len = n;
    return o;
}

TEST(show_tmux_passthrough) {
    flux_image *img = noise_image(64, 48);
    for (int p = CLI_SHOW_KITTY; p <= CLI_SHOW_ITERM2; p++) {
        size_t plain_len = 0, wrapped_len = 0, un_len = 0;
        char *plain = show(img, (cli_show_proto)p, 0, &plain_len);
        char *wrapped = show(img, (cli_show_proto)p, 1, &wrapped_len);
        REQUIRE(plain && wrapped);
        CHECK(!strncmp(wrapped, "\033Ptmux;\033\033", 9));
        char *un = untmux(__LINE__, wrapped, wrapped_len, &un_len);
        CHECK_MSG(un_len == plain_len && !memcmp(un, plain, plain_len), "%s: unwrapped output differs",
                  cli_show_proto_name((cli_show_proto)p));
        free(plain), free(wrapped), free(un);
    }
    flux_image_free(img);
}

TEST(show_through_the_cli) {
    /* flux --show with FLUX_SHOW=kitty: stdout carries exactly the Kitty
     * sequences of the image that was written */
    char cmd[8192], out_png[1024], *out = NULL;
    snprintf(out_png, sizeof out_png, "%s/cat.png", fx_test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "FLUX_SHOW=kitty '%s' -q -d '%s' -p 'a cat' -W 64 -H 64 -s 2 -S 9 -o '%s' --show 2>/dev/null",
             fx_test_flux_bin(), fx_test_path("golden/model"), out_png);
    int rc = fx_test_run(cmd, &out);
    REQUIRE_MSG(rc == 0, "flux: %s", out);
    size_t b64_len = 0, png_len = 0;
    int chunks = 0;
    char *b64 = parse_kitty(__LINE__, out, strlen(out), &b64_len, &chunks);
    uint8_t *png = unbase64(b64, b64_len, &png_len);
    flux_ctx *ctx = flux_new(NULL);
    flux_image *written = NULL;
    REQUIRE(png && flux_image_load(ctx, out_png, &written) == FLUX_OK);
    expect_pixels(__LINE__, png, png_len, written);
    flux_image_free(written);
    flux_free(ctx);
    free(png), free(b64), free(out);

    /* not a terminal and nothing forced: the image is written, a message
     * says why there is no preview, stdout stays empty */
    snprintf(cmd, sizeof cmd,
             "env -u FLUX_SHOW '%s' -d '%s' -p 'a cat' -W 64 -H 64 -s 2 -S 9 -o '%s' --show 2>&1 >/dev/null",
             fx_test_flux_bin(), fx_test_path("golden/model"), out_png);
    rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0 && strstr(out, "flux: --show: stdout is not a terminal"), "rc %d: %s", rc, out);
    free(out);
}
