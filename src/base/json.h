/*
 * json.h — a small, strict, non-recursive JSON parser (RFC 8259).
 *
 * Used for model_index.json, the component configs, safetensors headers,
 * shard indexes and the 11 MB tokenizer.json.
 *
 * The whole document (value nodes, member names, decoded strings) lives in
 * ONE allocation owned by the fx_json_doc; every pointer handed out stays
 * valid until fx_json_free(). Objects keep their members in file order.
 *
 * Behaviour (documented choices):
 *  - Input must be UTF-8; it is fully validated (overlong forms, UTF-16
 *    surrogates encoded as UTF-8, code points > U+10FFFF and bad
 *    continuation bytes are errors). A leading UTF-8 BOM is skipped.
 *  - \uXXXX escapes are decoded to UTF-8; surrogate pairs are combined.
 *    A lone (unpaired) surrogate is an ERROR (as in serde_json, which the
 *    Hugging Face tooling uses), never silently replaced.
 *  - Strings are NUL-terminated copies with an explicit byte length (they
 *    may contain "\u0000").
 *  - Numbers follow the strict JSON grammar (no leading '+', no leading
 *    zeros, no "1.", no ".5", no NaN/Infinity). Every number keeps its
 *    double value (correctly rounded, locale independent). A number whose
 *    value is integral and inside int64 range is also available as an
 *    exact int64: integer literals are converted digit by digit, so
 *    9007199254740993 (2^53+1) or 12345678901 stay exact. A number that
 *    overflows double (1e400) is an ERROR; underflow rounds to 0.
 *  - Nesting deeper than FX_JSON_MAX_DEPTH is an error (the parser uses an
 *    explicit stack, so deep input can never exhaust the C stack).
 *  - Duplicate member names are kept (fx_json_get returns the LAST one, as
 *    Python's json module does); callers that must reject them iterate.
 *  - Errors: FLUX_ERR_FORMAT with "line L, column C: <what>" (1-based,
 *    column counted in bytes); empty input and trailing garbage are errors.
 *    Input larger than 4 GiB is refused.
 */
#ifndef FX_JSON_H
#define FX_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define FX_JSON_MAX_DEPTH 512

typedef enum fx_json_type {
    FX_JSON_NULL = 0,
    FX_JSON_BOOL,
    FX_JSON_NUMBER,
    FX_JSON_STRING,
    FX_JSON_ARRAY,
    FX_JSON_OBJECT
} fx_json_type;

typedef struct fx_json fx_json;         /* one value (opaque) */
typedef struct fx_json_doc fx_json_doc; /* a parsed document (opaque) */

/* Parse text[0, len). Returns NULL on error (message in err: FLUX_ERR_FORMAT
 * with line:column, or FLUX_ERR_NOMEM). */
fx_json_doc *fx_json_parse(const char *text, size_t len, fx_err *err);

/* Read and parse a file. A missing or unreadable file is FLUX_ERR_IO naming
 * the path; parse errors are prefixed with `display` (NULL = the path). */
fx_json_doc *fx_json_parse_file(const char *path, const char *display, fx_err *err);

void fx_json_free(fx_json_doc *doc);

const fx_json *fx_json_root(const fx_json_doc *doc);
/* Number of value nodes in the document (for diagnostics). */
size_t fx_json_node_count(const fx_json_doc *doc);

/* --- inspecting a value (v may be NULL: treated as absent) ----------------- */

fx_json_type fx_json_typeof(const fx_json *v);      /* NULL → FX_JSON_NULL */
const char *fx_json_type_name(fx_json_type t);     /* "null", "object", ... */
int fx_json_is_null(const fx_json *v);              /* absent or null */
int fx_json_is_object(const fx_json *v);
int fx_json_is_array(const fx_json *v);
int fx_json_is_string(const fx_json *v);
int fx_json_is_number(const fx_json *v);
int fx_json_is_bool(const fx_json *v);
/* 1 if v is a number with an integral value that fits int64. */
int fx_json_is_int(const fx_json *v);

/* Scalars. Wrong type → the neutral value (0, 0.0, NULL). */
int64_t fx_json_int(const fx_json *v);        /* exact when fx_json_is_int */
double fx_json_num(const fx_json *v);
int fx_json_bool(const fx_json *v);           /* 1 for true */
const char *fx_json_str(const fx_json *v);    /* NUL-terminated UTF-8 */
size_t fx_json_str_len(const fx_json *v);     /* bytes, without the NUL */

/* Arrays and objects: element count (0 for scalars), i-th element / member
 * value (NULL when out of range), i-th member name (objects only). */
size_t fx_json_len(const fx_json *v);
const fx_json *fx_json_at(const fx_json *v, size_t i);
const char *fx_json_key_at(const fx_json *v, size_t i);
size_t fx_json_key_len_at(const fx_json *v, size_t i);

/* Member lookup by name (linear scan; the last duplicate wins). NULL when v
 * is not an object or has no such member. */
const fx_json *fx_json_get(const fx_json *obj, const char *key);

/* Typed member getters: the member's value, or def when the member is
 * absent or has another type (use fx_json_get + fx_json_typeof when a type
 * mismatch must be reported instead). get_int also accepts integral
 * numbers written as 3.0 or 1e3. */
int64_t fx_json_get_int(const fx_json *obj, const char *key, int64_t def);
double fx_json_get_num(const fx_json *obj, const char *key, double def);
int fx_json_get_bool(const fx_json *obj, const char *key, int def);
const char *fx_json_get_str(const fx_json *obj, const char *key, const char *def);

#endif
