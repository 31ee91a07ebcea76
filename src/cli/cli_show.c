/*
 * cli_show.c — terminal image preview (cli_show.h): protocol detection and
 * the Kitty / iTerm2 escape sequences around a base64 PNG.
 */
#include "cli_show.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"

const char *cli_show_proto_name(cli_show_proto p) {
    return p == CLI_SHOW_KITTY ? "kitty" : p == CLI_SHOW_ITERM2 ? "iterm2" : "none";
}

static int env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v && !strcmp(v, value);
}

static int env_set(const char *name) {
    const char *v = getenv(name);
    return v && *v;
}

cli_show_proto cli_show_detect(int stdout_is_tty, char *why, size_t why_size) {
    const char *forced = getenv("FLUX_SHOW");
    if (why_size) why[0] = '\0';
    if (forced && *forced) {
        if (!strcmp(forced, "kitty")) return CLI_SHOW_KITTY;
        if (!strcmp(forced, "iterm2")) return CLI_SHOW_ITERM2;
        if (!strcmp(forced, "none")) {
            snprintf(why, why_size, "--show: disabled by FLUX_SHOW=none");
            return CLI_SHOW_NONE;
        }
        snprintf(why, why_size, "--show: FLUX_SHOW='%s' is not kitty, iterm2 or none", forced);
        return CLI_SHOW_NONE;
    }
    if (!stdout_is_tty) {
        snprintf(why, why_size, "--show: stdout is not a terminal; not showing the image "
                                "(FLUX_SHOW=kitty or FLUX_SHOW=iterm2 forces a protocol)");
        return CLI_SHOW_NONE;
    }
    if (env_is("TERM", "xterm-kitty") || env_set("KITTY_WINDOW_ID")) return CLI_SHOW_KITTY;
    if (env_is("TERM_PROGRAM", "ghostty") || env_is("TERM", "xterm-ghostty") || env_set("GHOSTTY_RESOURCES_DIR"))
        return CLI_SHOW_KITTY;
    if (env_set("KONSOLE_VERSION")) return CLI_SHOW_KITTY;
    if (env_is("TERM_PROGRAM", "iTerm.app") || env_is("LC_TERMINAL", "iTerm2")) return CLI_SHOW_ITERM2;
    if (env_is("TERM_PROGRAM", "WezTerm")) return CLI_SHOW_ITERM2;
    const char *term = getenv("TERM"), *prog = getenv("TERM_PROGRAM");
    snprintf(why, why_size,
             "--show: this terminal (TERM=%s%s%s) does not announce the Kitty or iTerm2 graphics protocol; "
             "use kitty, Ghostty, WezTerm, iTerm2 or Konsole, or set FLUX_SHOW=kitty|iterm2",
             term ? term : "unset", prog ? ", TERM_PROGRAM=" : "", prog ? prog : "");
    return CLI_SHOW_NONE;
}

/* Standard base64 (RFC 4648) of n bytes into a new NUL-terminated string. */
static char *base64(const uint8_t *p, size_t n, size_t *out_len) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t len = (n + 2) / 3 * 4;
    char *s = malloc(len + 1), *o = s;
    if (!s) return NULL;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = digits[v >> 18], *o++ = digits[v >> 12 & 63], *o++ = digits[v >> 6 & 63], *o++ = digits[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *o++ = digits[v >> 18], *o++ = digits[v >> 12 & 63];
        *o++ = i + 1 < n ? digits[v >> 6 & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    *out_len = len;
    return s;
}

/* Write one escape sequence, wrapped for tmux passthrough if asked. */
static void put_seq(FILE *f, const char *head, const char *body, size_t body_len, const char *tail, int tmux) {
    if (!tmux) {
        fputs(head, f);
        fwrite(body, 1, body_len, f);
        fputs(tail, f);
        return;
    }
    fputs("\033Ptmux;", f);
    const char *parts[3] = {head, body, tail};
    size_t lens[3] = {strlen(head), body_len, strlen(tail)};
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < lens[k]; i++) {
            if (parts[k][i] == '\033') fputc('\033', f); /* ESC doubled inside passthrough */
            fputc(parts[k][i], f);
        }
    fputs("\033\\", f);
}

int cli_show_image(FILE *f, const flux_image *img, cli_show_proto proto, int tmux, char *err, size_t err_size) {
    if (proto == CLI_SHOW_NONE) return 0;
    uint8_t *png = NULL;
    size_t png_len = 0, b64_len = 0;
    fx_err e = {0};
    if (fx_png_encode(img, "the preview", &png, &png_len, &e) != FLUX_OK) {
        snprintf(err, err_size, "--show: %s", e.msg);
        return -1;
    }
    char *b64 = base64(png, png_len, &b64_len);
    free(png);
    if (!b64) {
        snprintf(err, err_size, "--show: out of memory");
        return -1;
    }
    if (proto == CLI_SHOW_KITTY) {
        for (size_t off = 0; off < b64_len || off == 0; off += CLI_SHOW_KITTY_CHUNK) {
            size_t n = b64_len - off < CLI_SHOW_KITTY_CHUNK ? b64_len - off : CLI_SHOW_KITTY_CHUNK;
            int more = off + n < b64_len;
            char head[64];
            if (off == 0) snprintf(head, sizeof head, "\033_Gf=100,a=T,q=2,m=%d;", more);
            else snprintf(head, sizeof head, "\033_Gm=%d;", more);
            put_seq(f, head, b64 + off, n, "\033\\", tmux);
            if (!more) break;
        }
    } else {
        char head[128];
        snprintf(head, sizeof head, "\033]1337;File=inline=1;size=%zu;preserveAspectRatio=1:", png_len);
        put_seq(f, head, b64, b64_len, "\a", tmux);
    }
    fputc('\n', f);
    free(b64);
    if (fflush(f) != 0 || ferror(f)) {
        snprintf(err, err_size, "--show: cannot write the image to the terminal");
        return -1;
    }
    return 0;
}
