/*
 * append.h — formatted text appended to a bounded buffer, for the
 * descriptions --cpu-info prints: like snprintf at buf[*len..size), and
 * *len counts every byte asked for, so a caller learns the size it needs.
 */
#ifndef FX_APPEND_H
#define FX_APPEND_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline void fx_append(char *buf, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline void fx_append(char *buf, size_t size, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*len < size ? buf + *len : NULL, *len < size ? size - *len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) *len += (size_t)n;
}

#endif
