/* srv_json_out.c — JSON string literals (srv_json_out.h). */
#include "srv_json_out.h"

#include <stdint.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when invalid. */
static int utf8_len(const unsigned char *s) {
    const unsigned c = s[0];
    if (c < 0x80) return 1;
    int n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (n == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F))) return 0; /* overlong, surrogate */
    if (n == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F))) return 0;
    return n;
}

void srv_json_str(fx_strbuf *b, const char *s) {
    if (!s) {
        fx_sb_str(b, "null");
        return;
    }
    fx_sb_add(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, plain = 0; /* p[plain, i) is copied as it is */
    while (p[i]) {
        const unsigned char c = p[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        const int n = c >= 0x80 ? utf8_len(p + i) : 0;
        if (n > 0) {
            i += (size_t)n;
            continue;
        }
        fx_sb_add(b, (const char *)p + plain, i - plain);
        if (c == '"' || c == '\\') fx_sb_printf(b, "\\%c", c);
        else if (c == '\n') fx_sb_str(b, "\\n");
        else if (c < 0x20) fx_sb_printf(b, "\\u%04x", c);
        else fx_sb_str(b, "\xEF\xBF\xBD"); /* an invalid UTF-8 byte */
        plain = ++i;
    }
    fx_sb_add(b, (const char *)p + plain, i - plain);
    fx_sb_add(b, "\"", 1);
}
