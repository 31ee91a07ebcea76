/*
 * srv_base64.h — base64 for flux-server: PNGs out (b64_json, A1111
 * "images") and reference images in (init_images, "image" fields).
 */
#ifndef FX_SRV_BASE64_H
#define FX_SRV_BASE64_H

#include <stddef.h>
#include <stdint.h>

#include "src/base/strbuf.h"

/* Append the standard base64 (RFC 4648 §4, padded) of data[0, n) to b. */
void srv_base64_encode(fx_strbuf *b, const uint8_t *data, size_t n);

/* Decode text[0, len): the standard or URL-safe alphabet, padding optional,
 * ASCII whitespace skipped (line-wrapped input), an optional
 * "data:<type>;base64," prefix. Returns a malloc'd buffer and its size in
 * *out_len, or NULL with the reason in why (a character that is not base64,
 * bad padding, a dangling bit group, no memory). Empty input decodes to a
 * zero-length buffer (not NULL). */
uint8_t *srv_base64_decode(const char *text, size_t len, size_t *out_len, const char **why);

#endif
