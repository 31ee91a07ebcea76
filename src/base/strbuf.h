/*
 * strbuf.h — a growing NUL-terminated string for building texts (image
 * metadata, safetensors headers). An allocation failure sticks (`failed`)
 * and later appends do nothing, so callers check once at the end.
 */
#ifndef FX_STRBUF_H
#define FX_STRBUF_H

#include <stddef.h>

#include "error.h"

typedef struct fx_strbuf {
    char *s;      /* NULL until the first append; free() it */
    size_t len, cap;
    int failed;
} fx_strbuf;

void fx_sb_add(fx_strbuf *b, const char *s, size_t n);
void fx_sb_str(fx_strbuf *b, const char *s);
void fx_sb_printf(fx_strbuf *b, const char *fmt, ...) FX_PRINTF(2, 3);

#endif
