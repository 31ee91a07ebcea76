/*
 * srv_json_out.h — writing JSON responses into an fx_strbuf.
 */
#ifndef FX_SRV_JSON_OUT_H
#define FX_SRV_JSON_OUT_H

#include "src/base/strbuf.h"

/* s as a JSON string literal with quotes; invalid UTF-8 bytes become U+FFFD
 * and control characters \uXXXX escapes. NULL is written as null. */
void srv_json_str(fx_strbuf *b, const char *s);

#endif
