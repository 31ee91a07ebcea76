/* srv_base64.c — base64 encode / decode (srv_base64.h). */
#include "srv_base64.h"

#include <stdlib.h>
#include <string.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void srv_base64_encode(fx_strbuf *b, const uint8_t *data, size_t n) {
    char quad[4 * 64];
    size_t q = 0;
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)data[i] << 16 | (i + 1 < n ? (uint32_t)data[i + 1] << 8 : 0) |
                           (i + 2 < n ? data[i + 2] : 0);
        quad[q++] = alphabet[v >> 18 & 63];
        quad[q++] = alphabet[v >> 12 & 63];
        quad[q++] = i + 1 < n ? alphabet[v >> 6 & 63] : '=';
        quad[q++] = i + 2 < n ? alphabet[v & 63] : '=';
        if (q == sizeof quad) {
            fx_sb_add(b, quad, q);
            q = 0;
        }
    }
    fx_sb_add(b, quad, q);
}

/* 0..63, or -1 for a character of neither alphabet. */
static int sextet(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

uint8_t *srv_base64_decode(const char *text, size_t len, size_t *out_len, const char **why) {
    *out_len = 0;
    *why = NULL;
    if (len > 5 && !strncmp(text, "data:", 5)) { /* data URL: the payload follows ";base64," */
        const char *comma = memchr(text, ',', len);
        if (!comma || comma - text < 12 || strncmp(comma - 7, ";base64", 7)) {
            *why = "a data: URL without ;base64,";
            return NULL;
        }
        len -= (size_t)(comma + 1 - text);
        text = comma + 1;
    }
    uint8_t *out = malloc(len / 4 * 3 + 3);
    if (!out) {
        *why = "out of memory";
        return NULL;
    }
    size_t n = 0, pad = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        const unsigned char c = (unsigned char)text[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (c == '=') {
            pad++;
            continue;
        }
        const int v = sextet(c);
        if (v < 0 || pad) {
            *why = pad ? "data after the '=' padding" : "a character that is not base64";
            free(out);
            return NULL;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    /* a group of 1 char (6 bits) cannot be; 2 or 3 chars leave 4 / 2 bits */
    if (bits == 6 || pad > 2 || (pad && (bits == 0 || pad != (size_t)(bits == 4 ? 2 : 1)))) {
        *why = "bad padding or length";
        free(out);
        return NULL;
    }
    *out_len = n;
    return out;
}
