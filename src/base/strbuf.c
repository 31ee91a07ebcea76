/* strbuf.c — a growing string (strbuf.h). */
#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fx_sb_add(fx_strbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void fx_sb_str(fx_strbuf *b, const char *s) { fx_sb_add(b, s, strlen(s)); }

void fx_sb_printf(fx_strbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        fx_sb_add(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->failed = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    fx_sb_add(b, big, (size_t)n);
    free(big);
}

void fx_sb_json_str(fx_strbuf *b, const char *s, size_t n) {
    fx_sb_str(b, "\"");
    size_t run = 0; /* bytes copied as they are, added in one go */
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c != '"' && c != '\\' && c >= 0x20) {
            run++;
            continue;
        }
        fx_sb_add(b, s + i - run, run);
        run = 0;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c;
            fx_sb_add(b, esc, 2);
        } else {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            fx_sb_str(b, esc);
        }
    }
    fx_sb_add(b, s + n - run, run);
    fx_sb_str(b, "\"");
}
