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
/* s[0, n) as a JSON string literal: quotes, '"' and '\\' escaped, bytes
 * below 0x20 (NUL included) as \u00XX; other bytes copied (UTF-8 stays). */
void fx_sb_json_str(fx_strbuf *b, const char *s, size_t n);

#endif
