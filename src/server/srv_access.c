/*
 * srv_access.c — request header checks of flux-server (srv_access.h).
 */
#include "srv_access.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "srv_base64.h"

/* name[0, n) equals one of the comma-separated entries of list (spaces
 * around entries ignored, case-insensitive). */
static int in_list(const char *name, size_t n, const char *list) {
    for (const char *p = list; p && *p;) {
        while (*p == ' ' || *p == ',') p++;
        size_t m = strcspn(p, ",");
        size_t k = m;
        while (k && p[k - 1] == ' ') k--;
        if (k && ((k == 1 && *p == '*') || (k == n && !strncasecmp(p, name, n)))) return 1;
        p += m;
    }
    return 0;
}

/* 127.x.y.z with x, y, z in 0..255 */
static int loopback_v4(const char *h, size_t n) {
    if (n < 9 || strncmp(h, "127.", 4)) return 0;
    int dots = 0, digits = 0, value = 0;
    for (size_t i = 4; i < n; i++) {
        if (h[i] == '.') {
            if (!digits) return 0;
            dots++, digits = 0, value = 0;
        } else if (h[i] >= '0' && h[i] <= '9') {
            value = value * 10 + (h[i] - '0');
            if (++digits > 3 || value > 255) return 0;
        } else {
            return 0;
        }
    }
    return dots == 2 && digits;
}

/* The host part of "name:port", "[v6]:port", "name": its length. */
static size_t host_len(const char *h) {
    if (h[0] == '[') {
        const char *e = strchr(h, ']');
        return e ? (size_t)(e - h) + 1 : strlen(h);
    }
    return strcspn(h, ":");
}

static int port_ok(const char *p) { /* "" or ":digits" */
    if (!*p) return 1;
    if (*p++ != ':' || !*p) return 0;
    for (; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

int srv_host_ok(const char *host, const char *allow) {
    if (!host) return 1;
    const size_t n = host_len(host);
    if (!port_ok(host + n)) return 0;
    const int local = (n == 9 && !strncasecmp(host, "localhost", 9)) || (n == 5 && !strncmp(host, "[::1]", 5));
    if (local || loopback_v4(host, n)) return 1;
    return n && in_list(host, n, allow) && !(n == 1 && host[0] == '*');
}

int srv_origin_check(const char *origin, const char *host, const char *cors, const char **allowed) {
    *allowed = NULL;
    if (!origin) return 0;
    const char *sep = strstr(origin, "://");
    if (sep && host && !strcasecmp(sep + 3, host)) return 0; /* the page this server (or its proxy) served */
    if (cors && in_list(origin, strlen(origin), cors) && strcmp(origin, "null")) {
        *allowed = origin;
        return 1;
    }
    return -1;
}

int srv_media_type_is(const char *ct, const char *type) {
    if (!ct) return 0;
    while (*ct == ' ') ct++;
    const size_t n = strlen(type);
    if (strncasecmp(ct, type, n)) return 0;
    ct += n;
    while (*ct == ' ' || *ct == '\t') ct++;
    return !*ct || *ct == ';';
}

/* a == b in time independent of where they differ (the length leaks) */
static int same_secret(const char *a, size_t na, const char *key) {
    const size_t n = strlen(key);
    unsigned diff = (unsigned)(n ^ na);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)key[i] ^ (unsigned char)(i < na ? a[i] : 0);
    return diff == 0;
}

int srv_key_ok(const char *h, const char *key) {
    if (!key) return 1;
    if (!h) return 0;
    if (!strncasecmp(h, "Bearer ", 7)) return same_secret(h + 7, strlen(h + 7), key);
    if (strncasecmp(h, "Basic ", 6)) return 0;
    size_t len = 0;
    const char *why;
    uint8_t *up = srv_base64_decode(h + 6, strlen(h + 6), &len, &why); /* "user:password" */
    if (!up) return 0;
    const uint8_t *colon = memchr(up, ':', len);
    const int ok = colon && same_secret((const char *)colon + 1, len - (size_t)(colon + 1 - up), key);
    free(up);
    return ok;
}
