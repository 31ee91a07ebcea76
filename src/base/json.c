/*
 * json.c — the JSON parser of json.h.
 *
 * Two passes over the text with the same iterative state machine:
 *   pass 1 validates everything and counts value nodes, decoded string
 *          bytes and the element count of every container (in pre-order);
 *   pass 2 fills one exactly-sized allocation: [doc | nodes | strings].
 * A container's elements are contiguous (items[0..len)), allocated when the
 * container opens thanks to the counts of pass 1, so lookups by index are
 * O(1) and nothing is ever reallocated. Nesting is tracked on an explicit
 * stack of at most FX_JSON_MAX_DEPTH frames: no recursion anywhere.
 */
#include "json.h"

#include "file_read.h"

#include <errno.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fx_json {
    const char *key;     /* member name when inside an object, else NULL */
    union {
        const char *str; /* FX_JSON_STRING: NUL-terminated */
        fx_json *items;  /* FX_JSON_ARRAY / FX_JSON_OBJECT: [len] */
        double num;      /* FX_JSON_NUMBER */
    } u;
    int64_t i;           /* number: exact value when is_int; bool: 0/1 */
    uint32_t len;        /* string bytes / element count */
    uint32_t key_len;
    uint8_t type;        /* fx_json_type */
    uint8_t is_int;
};

struct fx_json_doc {
    fx_json *root;
    size_t n_nodes;
};

/* ------------------------------------------------------------------------ */
/* Parser state                                                             */
/* ------------------------------------------------------------------------ */

typedef struct frame {
    fx_json *node;     /* pass 2: the container being filled */
    uint32_t n;        /* elements seen so far */
    uint32_t slot;     /* pass 1: index of this container's count */
    uint8_t is_object;
} frame;

typedef struct parser {
    const unsigned char *text, *p, *end;
    fx_err *err;
    int build;          /* 0 = pass 1 (count), 1 = pass 2 (fill) */
    locale_t c_locale;  /* for the rare strtod fallback; created lazily */

    /* pass 1 results */
    size_t n_nodes, str_bytes;
    uint32_t *counts;
    size_t n_counts, cap_counts;

    /* pass 2 cursors */
    fx_json *nodes;
    size_t next_node, next_count;
    char *strs;
    size_t next_str;

    int depth, cap_stack;
    frame *stack; /* grown on demand up to FX_JSON_MAX_DEPTH frames */
} parser;

static int fail_at(parser *ps, const unsigned char *at, const char *fmt, ...) FX_PRINTF(3, 4);

static int fail_at(parser *ps, const unsigned char *at, const char *fmt, ...) {
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    size_t line = 1, col = 1;
    for (const unsigned char *q = ps->text; q < at && q < ps->end; q++) {
        if (*q == '\n') line++, col = 1;
        else col++;
    }
    fx_fail(ps->err, FLUX_ERR_FORMAT, "line %zu, column %zu: %s", line, col, what);
    return -1;
}

/* A printable description of the byte at q for messages. */
static const char *describe(const parser *ps, const unsigned char *q, char buf[16]) {
    if (q >= ps->end) return "end of input";
    if (*q >= 0x20 && *q < 0x7f) snprintf(buf, 16, "'%c'", *q);
    else snprintf(buf, 16, "byte 0x%02x", *q);
    return buf;
}

static inline void skip_ws(parser *ps) {
    const unsigned char *p = ps->p, *end = ps->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    ps->p = p;
}

/* ------------------------------------------------------------------------ */
/* Strings                                                                  */
/* ------------------------------------------------------------------------ */

static int hex4(const unsigned char *p, unsigned *out) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned c = p[k], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return -1;
        v = v << 4 | d;
    }
    *out = v;
    return 0;
}

static size_t utf8_encode(unsigned cp, unsigned char *o) {
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence starting with lead byte p[0] (>= 0x80),
 * or 0 if it is invalid (Unicode Table 3-7: no overlongs, no surrogates,
 * nothing above U+10FFFF). */
static size_t utf8_valid_len(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) n = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) n = 3;
    else if (c == 0xED) n = 3, hi = 0x9F;
    else if (c >= 0xEE && c <= 0xEF) n = 3;
    else if (c == 0xF0) n = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) n = 4, hi = 0x8F;
    else return 0;
    if ((size_t)(end - p) < n) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t k = 2; k < n; k++)
        if ((p[k] & 0xC0) != 0x80) return 0;
    return n;
}

/* Parse the string whose opening quote is at ps->p. Pass 1: counts the
 * decoded bytes (+ NUL). Pass 2: writes them and returns the copy. */
static int parse_string(parser *ps, const char **out, uint32_t *out_len) {
    const unsigned char *p = ps->p + 1, *end = ps->end;
    const unsigned char *open = ps->p;
    char *dst = ps->build ? ps->strs + ps->next_str : NULL;
    size_t n = 0; /* decoded bytes */
    const unsigned char *run = p;
#define FLUSH_RUN()                                                            \
    do {                                                                       \
        size_t rl_ = (size_t)(p - run);                                        \
        if (dst) memcpy(dst + n, run, rl_);                                    \
        n += rl_;                                                              \
    } while (0)
    for (;;) {
        /* ASCII fast path: everything but '"', '\\' and control bytes */
        while (p < end && *p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80) p++;
        if (p >= end) return fail_at(ps, open, "unterminated string");
        unsigned c = *p;
        if (c == '"') break;
        if (c < 0x20)
            return fail_at(ps, p, "control character 0x%02x in string (must be escaped)", c);
        if (c >= 0x80) {
            size_t k = utf8_valid_len(p, end);
            if (!k) return fail_at(ps, p, "invalid UTF-8 in string");
            p += k;
            continue;
        }
        /* escape */
        FLUSH_RUN();
        const unsigned char *esc = p;
        if (end - p < 2) return fail_at(ps, open, "unterminated string");
        unsigned char tmp[4];
        size_t tl = 1;
        switch (p[1]) {
        case '"': tmp[0] = '"'; break;
        case '\\': tmp[0] = '\\'; break;
        case '/': tmp[0] = '/'; break;
        case 'b': tmp[0] = '\b'; break;
        case 'f': tmp[0] = '\f'; break;
        case 'n': tmp[0] = '\n'; break;
        case 'r': tmp[0] = '\r'; break;
        case 't': tmp[0] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (end - p < 6 || hex4(p + 2, &cp)) return fail_at(ps, esc, "invalid \\u escape");
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return fail_at(ps, esc, "lone low surrogate \\u%04X", cp);
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (end - p < 12 || p[6] != '\\' || p[7] != 'u' || hex4(p + 8, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return fail_at(ps, esc, "lone high surrogate \\u%04X (no low surrogate follows)", cp);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
            tl = utf8_encode(cp, tmp);
            p += 4;
            break;
        }
        default:
            return fail_at(ps, esc, "invalid escape '\\%c'", p[1] >= 0x20 && p[1] < 0x7f ? p[1] : '?');
        }
        if (dst) memcpy(dst + n, tmp, tl);
        n += tl;
        p += 2;
        run = p;
    }
    FLUSH_RUN();
#undef FLUSH_RUN
    if (n > UINT32_MAX - 1) return fail_at(ps, open, "string longer than 4 GiB");
    if (dst) {
        dst[n] = '\0';
        *out = dst;
    } else {
        *out = NULL;
    }
    *out_len = (uint32_t)n;
    ps->str_bytes += n + 1;
    if (ps->build) ps->next_str += n + 1;
    ps->p = p + 1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Numbers                                                                  */
/* ------------------------------------------------------------------------ */

static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Correctly rounded decimal → double for the text [s, e): Clinger's exact
 * fast path when the digits fit 2^53 and |exp10| <= 22, else strtod_l in
 * the "C" locale (the process locale must not change '.' handling). */
static int number_to_double(parser *ps, const unsigned char *s, const unsigned char *e,
                            double *out) {
    const unsigned char *q = s;
    int neg = 0;
    if (*q == '-') neg = 1, q++;
    uint64_t m = 0;
    int ndig = 0;          /* significant digits accumulated in m */
    int dropped = 0;       /* nonzero digits beyond 19 were seen */
    long exp10 = 0;
    int in_frac = 0;
    for (; q < e; q++) {
        if (*q == '.') { in_frac = 1; continue; }
        if (*q == 'e' || *q == 'E') break;
        unsigned d = *q - '0';
        if (ndig == 0 && d == 0) { if (in_frac) exp10--; continue; }
        if (ndig < 19) { m = m * 10 + d; ndig++; if (in_frac) exp10--; }
        else { dropped = 1; if (!in_frac) exp10++; }
    }
    if (q < e) { /* exponent */
        q++;
        int eneg = 0;
        if (*q == '+' || *q == '-') eneg = *q == '-', q++;
        long ev = 0;
        for (; q < e; q++) {
            if (ev < 100000) ev = ev * 10 + (*q - '0');
        }
        exp10 += eneg ? -ev : ev;
    }
    if (!dropped && m <= (1ull << 53) && exp10 >= -22 && exp10 <= 22) {
        double d = (double)m;
        d = exp10 < 0 ? d / pow10_exact[-exp10] : d * pow10_exact[exp10];
        *out = neg ? -d : d;
        return 0;
    }
    if (m == 0 && !dropped) { *out = neg ? -0.0 : 0.0; return 0; }
    if (!ps->c_locale) {
        ps->c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
        if (!ps->c_locale) {
            fx_fail(ps->err, FLUX_ERR_NOMEM, "cannot create the C locale for number parsing");
            return -1;
        }
    }
    size_t len = (size_t)(e - s);
    char small[128];
    char *buf = len < sizeof small ? small : malloc(len + 1);
    if (!buf) { fx_fail(ps->err, FLUX_ERR_NOMEM, "out of memory parsing a number"); return -1; }
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    double d = strtod_l(buf, NULL, ps->c_locale);
    int range = errno == ERANGE;
    if (buf != small) free(buf);
    if (range && isinf(d)) return fail_at(ps, s, "number out of range (overflows double)");
    *out = d;
    return 0;
}

static int parse_number(parser *ps, fx_json *node) {
    const unsigned char *s = ps->p, *p = s, *end = ps->end;
    int neg = 0;
    if (*p == '-') neg = 1, p++;
    if (p >= end || *p < '0' || *p > '9') return fail_at(ps, s, "invalid number");
    const unsigned char *int_start = p;
    if (*p == '0') {
        p++;
        if (p < end && *p >= '0' && *p <= '9') return fail_at(ps, s, "invalid number (leading zero)");
    } else {
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    const unsigned char *int_end = p;
    int literal_int = 1;
    if (p < end && *p == '.') {
        literal_int = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return fail_at(ps, s, "invalid number (digit expected after '.')");
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        literal_int = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return fail_at(ps, s, "invalid number (digit expected in exponent)");
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    ps->p = p;

    double d = 0;
    int64_t iv = 0;
    int is_int = 0;
    if (literal_int) {
        /* exact int64 from the digits */
        uint64_t mag = 0;
        int overflow = 0;
        for (const unsigned char *q = int_start; q < int_end; q++) {
            unsigned dg = *q - '0';
            if (mag > (UINT64_MAX - dg) / 10) { overflow = 1; break; }
            mag = mag * 10 + dg;
        }
        if (!overflow && (neg ? mag <= (uint64_t)INT64_MAX + 1 : mag <= (uint64_t)INT64_MAX)) {
            is_int = 1;
            if (!neg) iv = (int64_t)mag;
            else iv = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
            d = neg ? -(double)mag : (double)mag; /* correctly rounded; "-0" stays -0.0 */
        }
    }
    if (!is_int) {
        if (number_to_double(ps, s, p, &d)) return -1;
        /* integral values in range are exact ints too (3.0, 1e3) */
        if (d == floor(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0) {
            is_int = 1;
            iv = (int64_t)d;
        }
    }
    if (node) {
        node->type = FX_JSON_NUMBER;
        node->u.num = d;
        node->i = iv;
        node->is_int = (uint8_t)is_int;
        node->len = 0;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Structure                                                                */
/* ------------------------------------------------------------------------ */

static int literal(parser *ps, const char *word, size_t n) {
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) {
        char b[16];
        return fail_at(ps, ps->p, "unexpected %s", describe(ps, ps->p, b));
    }
    ps->p += n;
    return 0;
}

static int push_count_slot(parser *ps, uint32_t *slot) {
    if (ps->n_counts == ps->cap_counts) {
        size_t cap = ps->cap_counts ? ps->cap_counts * 2 : 256;
        uint32_t *c = realloc(ps->counts, cap * sizeof *c);
        if (!c) { fx_fail(ps->err, FLUX_ERR_NOMEM, "out of memory parsing JSON"); return -1; }
        ps->counts = c;
        ps->cap_counts = cap;
    }
    if (ps->n_counts >= UINT32_MAX) return fail_at(ps, ps->p, "too many containers");
    *slot = (uint32_t)ps->n_counts;
    ps->counts[ps->n_counts++] = 0;
    return 0;
}

/* The node the next value is written into (pass 2), or NULL (pass 1). */
static fx_json *target(parser *ps) {
    if (!ps->build) return NULL;
    if (ps->depth == 0) return &ps->nodes[0];
    frame *f = &ps->stack[ps->depth - 1];
    return &f->node->u.items[f->n];
}

/* Parse a member name and the ':' after it; ps->p is at the '"'. */
static int member_name(parser *ps) {
    char b[16];
    if (ps->p >= ps->end || *ps->p != '"')
        return fail_at(ps, ps->p, "expected a member name (string) in object, found %s",
                       describe(ps, ps->p, b));
    const char *key;
    uint32_t klen;
    if (parse_string(ps, &key, &klen)) return -1;
    if (ps->build) {
        fx_json *t = target(ps);
        t->key = key;
        t->key_len = klen;
    }
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != ':')
        return fail_at(ps, ps->p, "expected ':' after member name, found %s", describe(ps, ps->p, b));
    ps->p++;
    skip_ws(ps);
    return 0;
}

static int open_container(parser *ps, int is_object) {
    if (ps->depth >= FX_JSON_MAX_DEPTH)
        return fail_at(ps, ps->p, "nesting deeper than %d levels", FX_JSON_MAX_DEPTH);
    if (ps->depth == ps->cap_stack) {
        int cap = ps->cap_stack ? 2 * ps->cap_stack : 16;
        if (cap > FX_JSON_MAX_DEPTH) cap = FX_JSON_MAX_DEPTH;
        frame *grown = realloc(ps->stack, (size_t)cap * sizeof *grown);
        if (!grown) { fx_fail(ps->err, FLUX_ERR_NOMEM, "out of memory parsing JSON"); return -1; }
        ps->stack = grown;
        ps->cap_stack = cap;
    }
    fx_json *node = target(ps);
    frame *f = &ps->stack[ps->depth];
    f->node = node;
    f->n = 0;
    f->is_object = (uint8_t)is_object;
    if (ps->build) {
        uint32_t count = ps->counts[ps->next_count++];
        node->type = is_object ? FX_JSON_OBJECT : FX_JSON_ARRAY;
        node->len = count;
        node->is_int = 0;
        node->i = 0;
        node->u.items = ps->nodes + ps->next_node;
        ps->next_node += count;
        for (uint32_t k = 0; k < count; k++) node->u.items[k].key = NULL, node->u.items[k].key_len = 0;
    } else {
        if (push_count_slot(ps, &f->slot)) return -1;
    }
    ps->depth++;
    ps->p++; /* past '{' or '[' */
    return 0;
}

static void close_container(parser *ps) {
    frame *f = &ps->stack[ps->depth - 1];
    if (!ps->build) {
        ps->counts[f->slot] = f->n;
        ps->n_nodes += f->n;
    }
    ps->depth--;
    ps->p++; /* past '}' or ']' */
}

/* One full pass over the text. */
static int run_pass(parser *ps) {
    char b[16];
    ps->p = ps->text;
    ps->depth = 0;
    if (ps->end - ps->p >= 3 && ps->p[0] == 0xEF && ps->p[1] == 0xBB && ps->p[2] == 0xBF) ps->p += 3;
    skip_ws(ps);
    if (ps->p >= ps->end) return fail_at(ps, ps->p, "empty input (no JSON value)");
    if (!ps->build) ps->n_nodes = 1; /* the root */

    for (;;) {
        /* --- a value starts at ps->p --- */
        if (ps->p >= ps->end) return fail_at(ps, ps->p, "unexpected end of input (value expected)");
        unsigned c = *ps->p;
        if (c == '{' || c == '[') {
            if (open_container(ps, c == '{')) return -1;
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == (c == '{' ? '}' : ']')) {
                close_container(ps);
            } else {
                if (c == '{' && member_name(ps)) return -1;
                continue; /* first element */
            }
        } else {
            fx_json *t = target(ps);
            if (c == '"') {
                const char *s;
                uint32_t sl;
                if (parse_string(ps, &s, &sl)) return -1;
                if (t) t->type = FX_JSON_STRING, t->u.str = s, t->len = sl, t->i = 0, t->is_int = 0;
            } else if (c == '-' || (c >= '0' && c <= '9')) {
                if (parse_number(ps, t)) return -1;
            } else if (c == 't') {
                if (literal(ps, "true", 4)) return -1;
                if (t) t->type = FX_JSON_BOOL, t->i = 1, t->len = 0, t->is_int = 0, t->u.str = NULL;
            } else if (c == 'f') {
                if (literal(ps, "false", 5)) return -1;
                if (t) t->type = FX_JSON_BOOL, t->i = 0, t->len = 0, t->is_int = 0, t->u.str = NULL;
            } else if (c == 'n') {
                if (literal(ps, "null", 4)) return -1;
                if (t) t->type = FX_JSON_NULL, t->i = 0, t->len = 0, t->is_int = 0, t->u.str = NULL;
            } else {
                return fail_at(ps, ps->p, "unexpected %s (value expected)", describe(ps, ps->p, b));
            }
        }

        /* --- a value just ended: continue or close the enclosing containers --- */
        for (;;) {
            skip_ws(ps);
            if (ps->depth == 0) {
                if (ps->p < ps->end)
                    return fail_at(ps, ps->p, "trailing characters after the JSON value: %s",
                                   describe(ps, ps->p, b));
                return 0;
            }
            frame *f = &ps->stack[ps->depth - 1];
            if (f->n == UINT32_MAX) return fail_at(ps, ps->p, "too many elements in a container");
            f->n++;
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                skip_ws(ps);
                if (f->is_object && member_name(ps)) return -1;
                break; /* next element */
            }
            unsigned closer = f->is_object ? '}' : ']';
            if (ps->p < ps->end && *ps->p == closer) {
                close_container(ps);
                continue;
            }
            return fail_at(ps, ps->p, "expected ',' or '%c' in %s, found %s", closer,
                           f->is_object ? "object" : "array", describe(ps, ps->p, b));
        }
    }
}

fx_json_doc *fx_json_parse(const char *text, size_t len, fx_err *err) {
    if (!text && len) { fx_fail(err, FLUX_ERR_INVALID_ARG, "JSON text is NULL"); return NULL; }
    if (len > UINT32_MAX) {
        fx_fail(err, FLUX_ERR_FORMAT, "JSON text of %zu bytes is larger than the 4 GiB limit", len);
        return NULL;
    }
    parser *ps = calloc(1, sizeof *ps);
    if (!ps) { fx_fail(err, FLUX_ERR_NOMEM, "out of memory parsing JSON"); return NULL; }
    ps->text = (const unsigned char *)(text ? text : "");
    ps->end = ps->text + len;
    ps->err = err;
    fx_json_doc *doc = NULL;

    if (run_pass(ps)) goto done;

    /* one allocation: doc header, nodes, strings */
    size_t nodes_bytes = ps->n_nodes * sizeof(fx_json);
    size_t total = sizeof(fx_json_doc) + nodes_bytes + ps->str_bytes;
    if (ps->n_nodes > SIZE_MAX / sizeof(fx_json) || total < nodes_bytes) {
        fx_fail(err, FLUX_ERR_NOMEM, "JSON document too large");
        goto done;
    }
    doc = malloc(total);
    if (!doc) {
        fx_fail(err, FLUX_ERR_NOMEM, "out of memory for a JSON document of %zu nodes", ps->n_nodes);
        goto done;
    }
    doc->n_nodes = ps->n_nodes;
    doc->root = (fx_json *)(doc + 1);
    ps->nodes = doc->root;
    ps->strs = (char *)(doc->root + ps->n_nodes);
    ps->next_node = 1;
    ps->next_count = 0;
    ps->next_str = 0;
    ps->str_bytes = 0;
    ps->build = 1;
    doc->root->key = NULL;
    doc->root->key_len = 0;
    if (run_pass(ps)) { /* cannot happen after a successful pass 1 */
        free(doc);
        doc = NULL;
    }
done:
    if (ps->c_locale) freelocale(ps->c_locale);
    free(ps->counts);
    free(ps->stack);
    free(ps);
    return doc;
}

fx_json_doc *fx_json_parse_file(const char *path, const char *display, fx_err *err) {
    const char *name = display ? display : path;
    uint8_t *buf;
    size_t len;
    if (fx_read_file(path, display, UINT32_MAX, "a JSON document", &buf, &len, err) != FLUX_OK) return NULL;
    fx_json_doc *doc = fx_json_parse((const char *)buf, len, err);
    free(buf);
    if (!doc) fx_prefix(err, "%s", name);
    return doc;
}

void fx_json_free(fx_json_doc *doc) { free(doc); }

const fx_json *fx_json_root(const fx_json_doc *doc) { return doc ? doc->root : NULL; }
size_t fx_json_node_count(const fx_json_doc *doc) { return doc ? doc->n_nodes : 0; }

/* ------------------------------------------------------------------------ */
/* Accessors                                                                */
/* ------------------------------------------------------------------------ */

fx_json_type fx_json_typeof(const fx_json *v) { return v ? (fx_json_type)v->type : FX_JSON_NULL; }

const char *fx_json_type_name(fx_json_type t) {
    switch (t) {
    case FX_JSON_NULL: return "null";
    case FX_JSON_BOOL: return "boolean";
    case FX_JSON_NUMBER: return "number";
    case FX_JSON_STRING: return "string";
    case FX_JSON_ARRAY: return "array";
    case FX_JSON_OBJECT: return "object";
    }
    return "?";
}

int fx_json_is_null(const fx_json *v) { return !v || v->type == FX_JSON_NULL; }
int fx_json_is_object(const fx_json *v) { return v && v->type == FX_JSON_OBJECT; }
int fx_json_is_array(const fx_json *v) { return v && v->type == FX_JSON_ARRAY; }
int fx_json_is_string(const fx_json *v) { return v && v->type == FX_JSON_STRING; }
int fx_json_is_number(const fx_json *v) { return v && v->type == FX_JSON_NUMBER; }
int fx_json_is_bool(const fx_json *v) { return v && v->type == FX_JSON_BOOL; }
int fx_json_is_int(const fx_json *v) { return v && v->type == FX_JSON_NUMBER && v->is_int; }

int64_t fx_json_int(const fx_json *v) { return fx_json_is_int(v) ? v->i : 0; }
double fx_json_num(const fx_json *v) { return fx_json_is_number(v) ? v->u.num : 0.0; }
int fx_json_bool(const fx_json *v) { return fx_json_is_bool(v) ? (int)v->i : 0; }
const char *fx_json_str(const fx_json *v) { return fx_json_is_string(v) ? v->u.str : NULL; }
size_t fx_json_str_len(const fx_json *v) { return fx_json_is_string(v) ? v->len : 0; }

size_t fx_json_len(const fx_json *v) {
    return v && (v->type == FX_JSON_ARRAY || v->type == FX_JSON_OBJECT) ? v->len : 0;
}

const fx_json *fx_json_at(const fx_json *v, size_t i) {
    return i < fx_json_len(v) ? &v->u.items[i] : NULL;
}

const char *fx_json_key_at(const fx_json *v, size_t i) {
    return fx_json_is_object(v) && i < v->len ? v->u.items[i].key : NULL;
}

size_t fx_json_key_len_at(const fx_json *v, size_t i) {
    return fx_json_is_object(v) && i < v->len ? v->u.items[i].key_len : 0;
}

const fx_json *fx_json_get(const fx_json *obj, const char *key) {
    if (!fx_json_is_object(obj) || !key) return NULL;
    size_t kl = strlen(key);
    for (size_t i = obj->len; i-- > 0;) {
        const fx_json *m = &obj->u.items[i];
        if (m->key_len == kl && memcmp(m->key, key, kl) == 0) return m;
    }
    return NULL;
}

int64_t fx_json_get_int(const fx_json *obj, const char *key, int64_t def) {
    const fx_json *v = fx_json_get(obj, key);
    return fx_json_is_int(v) ? v->i : def;
}

double fx_json_get_num(const fx_json *obj, const char *key, double def) {
    const fx_json *v = fx_json_get(obj, key);
    return fx_json_is_number(v) ? v->u.num : def;
}

int fx_json_get_bool(const fx_json *obj, const char *key, int def) {
    const fx_json *v = fx_json_get(obj, key);
    return fx_json_is_bool(v) ? (int)v->i : def;
}

const char *fx_json_get_str(const fx_json *obj, const char *key, const char *def) {
    const fx_json *v = fx_json_get(obj, key);
    return fx_json_is_string(v) ? v->u.str : def;
}
