/* test_json.c — the JSON parser: values, escapes, UTF-8, numbers, errors with
 * line:column, deep nesting, the real 11 MB tokenizer.json. */
#include "tests/test.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/json.h"

/* Parse a C string (length from strlen). */
static fx_json_doc *parse(const char *s, fx_err *err) {
    fx_err_clear(err);
    return fx_json_parse(s, strlen(s), err);
}

/* Expect failure with `fragment` in the message. */
static void expect_error_n(const char *text, size_t len, const char *fragment, int line) {
    fx_err err;
    fx_err_clear(&err);
    fx_json_doc *d = fx_json_parse(text, len, &err);
    if (d) {
        fx_test_fail(__FILE__, line, "parse of %.40s... unexpectedly succeeded", text);
        fx_json_free(d);
        return;
    }
    if (err.code != FLUX_ERR_FORMAT) fx_test_fail(__FILE__, line, "code %d for %.40s", err.code, text);
    if (!strstr(err.msg, fragment))
        fx_test_fail(__FILE__, line, "message '%s' lacks '%s'", err.msg, fragment);
}
#define EXPECT_ERROR(text, fragment) expect_error_n(text, strlen(text), fragment, __LINE__)
#define EXPECT_ERROR_N(text, len, fragment) expect_error_n(text, len, fragment, __LINE__)

/* Parse one JSON value and return a copy of its root string (for escapes). */
static int parse_str(const char *text, char *out, size_t cap, size_t *len) {
    fx_err err;
    fx_json_doc *d = parse(text, &err);
    if (!d) return -1;
    const fx_json *r = fx_json_root(d);
    int ok = fx_json_is_string(r) && fx_json_str_len(r) < cap;
    if (ok) {
        memcpy(out, fx_json_str(r), fx_json_str_len(r) + 1);
        *len = fx_json_str_len(r);
    }
    fx_json_free(d);
    return ok ? 0 : -1;
}

TEST(json_values_and_order) {
    fx_err err;
    fx_json_doc *d = parse(" {\"z\": 1, \"a\": [true, false, null, -2.5, \"s\"], \"m\": {\"k\": {}}, \"e\": []} ", &err);
    REQUIRE_MSG(d, "%s", err.msg);
    const fx_json *r = fx_json_root(d);
    CHECK(fx_json_is_object(r));
    CHECK_EQ_INT(fx_json_len(r), 4);
    /* members keep file order */
    CHECK(!strcmp(fx_json_key_at(r, 0), "z"));
    CHECK(!strcmp(fx_json_key_at(r, 1), "a"));
    CHECK(!strcmp(fx_json_key_at(r, 2), "m"));
    CHECK(!strcmp(fx_json_key_at(r, 3), "e"));
    CHECK_EQ_INT(fx_json_key_len_at(r, 0), 1);
    CHECK_EQ_INT(fx_json_int(fx_json_get(r, "z")), 1);
    const fx_json *a = fx_json_get(r, "a");
    CHECK_EQ_INT(fx_json_len(a), 5);
    CHECK(fx_json_is_bool(fx_json_at(a, 0)) && fx_json_bool(fx_json_at(a, 0)) == 1);
    CHECK(fx_json_is_bool(fx_json_at(a, 1)) && fx_json_bool(fx_json_at(a, 1)) == 0);
    CHECK(fx_json_typeof(fx_json_at(a, 2)) == FX_JSON_NULL && fx_json_at(a, 2) != NULL);
    CHECK(fx_json_num(fx_json_at(a, 3)) == -2.5 && !fx_json_is_int(fx_json_at(a, 3)));
    CHECK(!strcmp(fx_json_str(fx_json_at(a, 4)), "s"));
    CHECK(fx_json_at(a, 5) == NULL);
    CHECK(fx_json_key_at(a, 0) == NULL); /* arrays have no keys */
    CHECK(fx_json_is_object(fx_json_get(fx_json_get(r, "m"), "k")));
    CHECK_EQ_INT(fx_json_len(fx_json_get(fx_json_get(r, "m"), "k")), 0);
    CHECK(fx_json_is_array(fx_json_get(r, "e")) && fx_json_len(fx_json_get(r, "e")) == 0);
    CHECK(fx_json_get(r, "missing") == NULL);
    CHECK(fx_json_get(a, "z") == NULL); /* not an object */
    CHECK_EQ_INT(fx_json_node_count(d), 1 + 4 + 5 + 1);
    /* NULL-tolerant accessors */
    CHECK(fx_json_len(NULL) == 0 && fx_json_str(NULL) == NULL && fx_json_is_null(NULL));
    fx_json_free(d);
}

TEST(json_typed_getters_defaults) {
    fx_err err;
    fx_json_doc *d = parse("{\"i\": 7, \"f\": 2.5, \"s\": \"x\", \"b\": true, \"n\": null, \"t\": 3.0}", &err);
    REQUIRE(d);
    const fx_json *r = fx_json_root(d);
    CHECK_EQ_INT(fx_json_get_int(r, "i", -1), 7);
    CHECK_EQ_INT(fx_json_get_int(r, "t", -1), 3);  /* integral double */
    CHECK_EQ_INT(fx_json_get_int(r, "f", -1), -1); /* not integral → default */
    CHECK_EQ_INT(fx_json_get_int(r, "s", -1), -1);
    CHECK_EQ_INT(fx_json_get_int(r, "absent", 42), 42);
    CHECK(fx_json_get_num(r, "i", 0) == 7.0);
    CHECK(fx_json_get_num(r, "f", 0) == 2.5);
    CHECK(fx_json_get_num(r, "n", 9.0) == 9.0);
    CHECK(!strcmp(fx_json_get_str(r, "s", "d"), "x"));
    CHECK(!strcmp(fx_json_get_str(r, "i", "d"), "d"));
    CHECK(fx_json_get_bool(r, "b", 0) == 1);
    CHECK(fx_json_get_bool(r, "i", 5) == 5);
    fx_json_free(d);
}

TEST(json_duplicate_keys_last_wins) {
    fx_err err;
    fx_json_doc *d = parse("{\"a\": 1, \"b\": 2, \"a\": 3}", &err);
    REQUIRE(d);
    CHECK_EQ_INT(fx_json_len(fx_json_root(d)), 3);
    CHECK_EQ_INT(fx_json_get_int(fx_json_root(d), "a", 0), 3);
    fx_json_free(d);
}

TEST(json_string_escapes) {
    char s[64];
    size_t n;
    REQUIRE(parse_str("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", s, sizeof s, &n) == 0);
    CHECK(n == 8 && !memcmp(s, "\"\\/\b\f\n\r\t", 8));
    REQUIRE(parse_str("\"\\u0041\\u00e9\\u20AC\"", s, sizeof s, &n) == 0);
    CHECK(n == 6 && !memcmp(s, "A\xC3\xA9\xE2\x82\xAC", 6));
    /* surrogate pair → one 4-byte sequence (U+1F600) */
    REQUIRE(parse_str("\"\\uD83D\\uDE00\"", s, sizeof s, &n) == 0);
    CHECK(n == 4 && !memcmp(s, "\xF0\x9F\x98\x80", 4));
    /* highest code point U+10FFFF */
    REQUIRE(parse_str("\"\\uDBFF\\uDFFF\"", s, sizeof s, &n) == 0);
    CHECK(n == 4 && !memcmp(s, "\xF4\x8F\xBF\xBF", 4));
    /* \u0000 is kept: explicit length, NUL-terminated copy */
    REQUIRE(parse_str("\"a\\u0000b\"", s, sizeof s, &n) == 0);
    CHECK(n == 3 && s[0] == 'a' && s[1] == 0 && s[2] == 'b' && s[3] == 0);
    /* raw multi-byte UTF-8 passes through */
    REQUIRE(parse_str("\"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80\"", s, sizeof s, &n) == 0);
    CHECK(n == 15);
    /* empty string */
    REQUIRE(parse_str("\"\"", s, sizeof s, &n) == 0);
    CHECK(n == 0 && s[0] == 0);
    /* escaped keys are decoded too */
    fx_err err;
    fx_json_doc *d = parse("{\"k\\u00e9y\": 1}", &err);
    REQUIRE(d);
    CHECK(fx_json_get(fx_json_root(d), "k\xC3\xA9y") != NULL);
    fx_json_free(d);
}

TEST(json_surrogates_rejected) {
    EXPECT_ERROR("\"\\uD800\"", "lone high surrogate");
    EXPECT_ERROR("\"\\uD800x\"", "lone high surrogate");
    EXPECT_ERROR("\"\\uD800\\u0041\"", "lone high surrogate");
    EXPECT_ERROR("\"\\uDC00\"", "lone low surrogate");
    EXPECT_ERROR("\"\\uDFFF\\uD800\"", "lone low surrogate");
    EXPECT_ERROR("\"\\u12\"", "invalid \\u escape");
    EXPECT_ERROR("\"\\u12G4\"", "invalid \\u escape");
    EXPECT_ERROR("\"\\x41\"", "invalid escape");
    EXPECT_ERROR("\"\\", "unterminated string");
}

TEST(json_invalid_utf8_rejected) {
    EXPECT_ERROR("\"\xC0\x80\"", "invalid UTF-8");           /* overlong NUL */
    EXPECT_ERROR("\"\xC1\xBF\"", "invalid UTF-8");           /* overlong */
    EXPECT_ERROR("\"\xE0\x80\xAF\"", "invalid UTF-8");       /* overlong '/' */
    EXPECT_ERROR("\"\xF0\x80\x80\xAF\"", "invalid UTF-8");   /* overlong */
    EXPECT_ERROR("\"\xED\xA0\x80\"", "invalid UTF-8");       /* UTF-8-encoded surrogate */
    EXPECT_ERROR("\"\xF4\x90\x80\x80\"", "invalid UTF-8");   /* > U+10FFFF */
    EXPECT_ERROR("\"\xF5\x80\x80\x80\"", "invalid UTF-8");
    EXPECT_ERROR("\"\xFF\"", "invalid UTF-8");
    EXPECT_ERROR("\"\x80\"", "invalid UTF-8");               /* lone continuation */
    EXPECT_ERROR("\"\xE2\x82\"", "invalid UTF-8");           /* truncated sequence */
    EXPECT_ERROR("\"\xC3\"", "invalid UTF-8");
    EXPECT_ERROR("\"\xC3", "invalid UTF-8");                 /* truncated at end of input */
    EXPECT_ERROR("\"a\nb\"", "control character 0x0a");      /* raw newline */
    EXPECT_ERROR("\"a\tb\"", "control character 0x09");
    EXPECT_ERROR_N("\"a\0b\"", 5, "control character 0x00");
    EXPECT_ERROR_N("[1,\0]", 5, "byte 0x00");
}

TEST(json_numbers) {
    fx_err err;
    const char *text =
        "[-0, 0, 1e308, 1e-400, 9007199254740993, 9223372036854775807, -9223372036854775808,"
        " 9223372036854775808, 12345678901, 3.0, 1.5, 1e3, 0.1, 1e-06, 0.30000000000000004,"
        " 2.2250738585072011e-308, 4.9e-324, 1.7976931348623157e308, -12.5E+2, 151936,"
        " 123456789012345678901234567890, 0.000000000000000000000000000001, 100e-2]";
    fx_json_doc *d = parse(text, &err);
    REQUIRE_MSG(d, "%s", err.msg);
    const fx_json *a = fx_json_root(d);
    REQUIRE(fx_json_len(a) == 23);
    /* -0: an exact int 0, double keeps the sign */
    CHECK(fx_json_is_int(fx_json_at(a, 0)) && fx_json_int(fx_json_at(a, 0)) == 0);
    CHECK(signbit(fx_json_num(fx_json_at(a, 0))) && fx_json_num(fx_json_at(a, 0)) == 0.0);
    CHECK(!signbit(fx_json_num(fx_json_at(a, 1))));
    CHECK(fx_json_num(fx_json_at(a, 2)) == 1e308);
    CHECK(fx_json_num(fx_json_at(a, 3)) == 0.0); /* underflow rounds to 0 */
    /* 2^53 + 1: exact as int64 (a double would give 2^53) */
    CHECK(fx_json_is_int(fx_json_at(a, 4)));
    CHECK(fx_json_int(fx_json_at(a, 4)) == 9007199254740993LL);
    CHECK(fx_json_int(fx_json_at(a, 5)) == INT64_MAX);
    CHECK(fx_json_is_int(fx_json_at(a, 6)) && fx_json_int(fx_json_at(a, 6)) == INT64_MIN);
    CHECK(!fx_json_is_int(fx_json_at(a, 7))); /* 2^63 does not fit int64 */
    CHECK(fx_json_num(fx_json_at(a, 7)) == 9223372036854775808.0);
    CHECK(fx_json_int(fx_json_at(a, 8)) == 12345678901LL); /* safetensors offsets > 2^32 */
    CHECK(fx_json_is_int(fx_json_at(a, 9)) && fx_json_int(fx_json_at(a, 9)) == 3);
    CHECK(!fx_json_is_int(fx_json_at(a, 10)) && fx_json_num(fx_json_at(a, 10)) == 1.5);
    CHECK(fx_json_is_int(fx_json_at(a, 11)) && fx_json_int(fx_json_at(a, 11)) == 1000);
    CHECK(fx_json_num(fx_json_at(a, 12)) == 0.1);
    CHECK(fx_json_num(fx_json_at(a, 13)) == 1e-6);
    CHECK(fx_json_num(fx_json_at(a, 14)) == 0.30000000000000004);
    CHECK(fx_json_num(fx_json_at(a, 15)) == 2.2250738585072011e-308);
    CHECK(fx_json_num(fx_json_at(a, 16)) == 4.9e-324);
    CHECK(fx_json_num(fx_json_at(a, 17)) == 1.7976931348623157e308);
    CHECK(fx_json_num(fx_json_at(a, 18)) == -1250.0 && fx_json_int(fx_json_at(a, 18)) == -1250);
    CHECK(fx_json_int(fx_json_at(a, 19)) == 151936);
    CHECK(!fx_json_is_int(fx_json_at(a, 20)) && fx_json_num(fx_json_at(a, 20)) == 1.2345678901234568e29);
    CHECK(fx_json_num(fx_json_at(a, 21)) == 1e-30);
    CHECK(fx_json_is_int(fx_json_at(a, 22)) && fx_json_int(fx_json_at(a, 22)) == 1);
    fx_json_free(d);

    /* overflow is an error (documented), not inf */
    EXPECT_ERROR("1e400", "out of range");
    EXPECT_ERROR("[-1e400]", "out of range");
    EXPECT_ERROR("1.8e308", "out of range");
    /* strict grammar */
    EXPECT_ERROR("01", "leading zero");
    EXPECT_ERROR("-01", "leading zero");
    EXPECT_ERROR("1.", "digit expected after '.'");
    EXPECT_ERROR(".5", "unexpected '.'");
    EXPECT_ERROR("+1", "unexpected '+'");
    EXPECT_ERROR("-", "invalid number");
    EXPECT_ERROR("--1", "invalid number");
    EXPECT_ERROR("1e", "digit expected in exponent");
    EXPECT_ERROR("1e+", "digit expected in exponent");
    EXPECT_ERROR("0x10", "trailing characters");
    EXPECT_ERROR("NaN", "unexpected 'N'");
    EXPECT_ERROR("Infinity", "unexpected 'I'");
    EXPECT_ERROR("-Infinity", "invalid number");
}

/* The decimal → double conversion is correctly rounded: compare with the C
 * library (the test process runs in the "C" locale) on random literals that
 * hit both the exact fast path and the fallback. */
TEST(json_numbers_match_strtod) {
    fx_test_rng rng;
    fx_test_rng_seed(&rng, 7);
    char text[96];
    int mismatches = 0;
    for (int i = 0; i < 20000; i++) {
        int nd = 1 + (int)(fx_test_rng_u64(&rng) % 20), frac = (int)(fx_test_rng_u64(&rng) % 3);
        int n = 0;
        if (fx_test_rng_u64(&rng) & 1) text[n++] = '-';
        text[n++] = (char)('1' + fx_test_rng_u64(&rng) % 9);
        for (int k = 1; k < nd; k++) {
            if (frac && k == nd / 2) text[n++] = '.';
            text[n++] = (char)('0' + fx_test_rng_u64(&rng) % 10);
        }
        if (fx_test_rng_u64(&rng) % 3 == 0) n += snprintf(text + n, 16, "e%d", (int)(fx_test_rng_u64(&rng) % 80) - 40);
        text[n] = 0;
        fx_err err;
        fx_json_doc *d = parse(text, &err);
        if (!d) { mismatches++; continue; }
        double want = strtod(text, NULL);
        if (fx_json_num(fx_json_root(d)) != want && mismatches++ < 5)
            fx_test_fail(__FILE__, __LINE__, "%s: %.17g vs strtod %.17g", text, fx_json_num(fx_json_root(d)), want);
        fx_json_free(d);
    }
    CHECK_EQ_INT(mismatches, 0);
}

/* A decimal comma locale must not change number parsing. */
TEST(json_numbers_locale_independent) {
    const char *loc = setlocale(LC_NUMERIC, "de_DE.UTF-8");
    if (!loc) loc = setlocale(LC_NUMERIC, "fr_FR.UTF-8");
    if (!loc) {
        /* no comma locale installed: still exercise the fallback path */
        loc = "C";
    }
    fx_err err;
    fx_json_doc *d = parse("[1.5, 0.30000000000000004, 1.234567890123456789e-5]", &err);
    REQUIRE(d);
    CHECK(fx_json_num(fx_json_at(fx_json_root(d), 0)) == 1.5);
    CHECK(fx_json_num(fx_json_at(fx_json_root(d), 1)) == 0.30000000000000004);
    CHECK(fx_json_num(fx_json_at(fx_json_root(d), 2)) == 1.234567890123456789e-5);
    fx_json_free(d);
    setlocale(LC_NUMERIC, "C");
}

TEST(json_literals_and_structure_errors) {
    EXPECT_ERROR("", "empty input");
    EXPECT_ERROR("   \n\t ", "empty input");
    EXPECT_ERROR("tru", "unexpected 't'");
    EXPECT_ERROR("nul", "unexpected 'n'");
    EXPECT_ERROR("truex", "trailing characters after the JSON value: 'x'");
    EXPECT_ERROR("{} {}", "trailing characters");
    EXPECT_ERROR("[1,]", "unexpected ']' (value expected)");
    EXPECT_ERROR("{\"a\":1,}", "expected a member name");
    EXPECT_ERROR("{\"a\" 1}", "expected ':' after member name");
    EXPECT_ERROR("{1:2}", "expected a member name");
    EXPECT_ERROR("[1 2]", "expected ',' or ']' in array");
    EXPECT_ERROR("{\"a\":1 \"b\":2}", "expected ',' or '}' in object");
    EXPECT_ERROR("{\"a\":1}}", "trailing characters");
    EXPECT_ERROR("[", "unexpected end of input");
    EXPECT_ERROR("{", "expected a member name (string) in object, found end of input");
    EXPECT_ERROR("{\"a\":", "unexpected end of input");
    EXPECT_ERROR("\"abc", "unterminated string");
    EXPECT_ERROR("[1]\xEF\xBB\xBF", "trailing characters"); /* BOM only allowed first */
    EXPECT_ERROR("'a'", "unexpected '''");
    /* literals parse */
    fx_err err;
    fx_json_doc *d = parse("[true,false,null]", &err);
    REQUIRE(d);
    CHECK_EQ_INT(fx_json_len(fx_json_root(d)), 3);
    fx_json_free(d);
    /* a leading UTF-8 BOM is skipped */
    d = parse("\xEF\xBB\xBF{\"a\": 1}", &err);
    REQUIRE_MSG(d, "%s", err.msg);
    CHECK_EQ_INT(fx_json_get_int(fx_json_root(d), "a", 0), 1);
    fx_json_free(d);
    /* a scalar document is fine */
    d = parse(" 42 ", &err);
    REQUIRE(d);
    CHECK_EQ_INT(fx_json_int(fx_json_root(d)), 42);
    fx_json_free(d);
}

TEST(json_error_line_column) {
    fx_err err;
    fx_json_doc *d = parse("{\n  \"a\": 1,\n  \"b\": x\n}", &err);
    CHECK(d == NULL);
    CHECK_MSG(strstr(err.msg, "line 3, column 8: unexpected 'x'") != NULL, "%s", err.msg);
    d = parse("[1,\n2,\n\"\\q\"]", &err);
    CHECK(d == NULL);
    CHECK_MSG(strstr(err.msg, "line 3, column 2: invalid escape '\\q'") != NULL, "%s", err.msg);
}

static char *nested(size_t depth, const char *open, const char *close, const char *inner) {
    size_t lo = strlen(open), lc = strlen(close), li = strlen(inner);
    char *s = malloc(depth * (lo + lc) + li + 1);
    if (!s) return NULL;
    char *p = s;
    for (size_t i = 0; i < depth; i++) memcpy(p, open, lo), p += lo;
    memcpy(p, inner, li), p += li;
    for (size_t i = 0; i < depth; i++) memcpy(p, close, lc), p += lc;
    *p = 0;
    return s;
}

TEST(json_deep_nesting) {
    /* 100000 levels: a clean error, no stack overflow */
    char *s = nested(100000, "[", "]", "");
    REQUIRE(s);
    EXPECT_ERROR(s, "nesting deeper than 512 levels");
    free(s);
    s = nested(100000, "{\"a\":", "}", "1");
    REQUIRE(s);
    EXPECT_ERROR(s, "nesting deeper than 512 levels");
    free(s);
    /* unterminated deep input fails the same way */
    s = nested(100000, "[", "", "");
    REQUIRE(s);
    EXPECT_ERROR(s, "nesting deeper than 512 levels");
    free(s);
    /* exactly the limit parses, one more does not */
    s = nested(FX_JSON_MAX_DEPTH, "[", "]", "7");
    REQUIRE(s);
    fx_err err;
    fx_json_doc *d = parse(s, &err);
    REQUIRE_MSG(d, "%s", err.msg);
    const fx_json *v = fx_json_root(d);
    for (int i = 0; i < FX_JSON_MAX_DEPTH; i++) v = fx_json_at(v, 0);
    CHECK_EQ_INT(fx_json_int(v), 7);
    fx_json_free(d);
    free(s);
    s = nested(FX_JSON_MAX_DEPTH + 1, "[", "]", "7");
    REQUIRE(s);
    EXPECT_ERROR(s, "nesting deeper than 512 levels");
    free(s);
}

/* Random corruptions of a valid document never crash and either parse or
 * fail with FLUX_ERR_FORMAT. */
TEST(json_mutations_do_not_crash) {
    const char *base = "{\"a\": [1, -2.5e3, true, null, \"x\\u00e9\\n\"], \"b\": {\"c\": \"\xE2\x82\xAC\"}}";
    size_t n = strlen(base);
    char buf[128];
    fx_test_rng rng;
    fx_test_rng_seed(&rng, 99);
    int parsed = 0, failed = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(buf, base, n);
        size_t len = n;
        int edits = 1 + (int)(fx_test_rng_u64(&rng) % 3);
        for (int e = 0; e < edits; e++) {
            size_t pos = fx_test_rng_u64(&rng) % len;
            switch (fx_test_rng_u64(&rng) % 3) {
            case 0: buf[pos] = (char)fx_test_rng_u64(&rng); break;
            case 1: len = pos + 1; break; /* truncate */
            default: buf[pos] = "{}[]\",:\\0-e."[fx_test_rng_u64(&rng) % 12]; break;
            }
        }
        fx_err err;
        fx_err_clear(&err);
        fx_json_doc *d = fx_json_parse(buf, len, &err);
        if (d) parsed++, fx_json_free(d);
        else if (err.code == FLUX_ERR_FORMAT) failed++;
    }
    CHECK_EQ_INT(parsed + failed, 20000);
    CHECK(failed > 0 && parsed > 0);
}

TEST(json_parse_file_errors) {
    fx_err err;
    fx_err_clear(&err);
    CHECK(fx_json_parse_file("/nonexistent/x.json", "x.json", &err) == NULL);
    CHECK(err.code == FLUX_ERR_IO && strstr(err.msg, "/nonexistent/x.json"));
    char path[512];
    snprintf(path, sizeof path, "%s/bad.json", fx_test_tmpdir());
    REQUIRE(fx_test_write_file(path, "{\"a\": [1, 2}", 12) == 0);
    CHECK(fx_json_parse_file(path, "cfg/bad.json", &err) == NULL);
    CHECK_MSG(err.code == FLUX_ERR_FORMAT && strstr(err.msg, "cfg/bad.json: line 1, column 12: expected ',' or ']'"),
              "%s", err.msg);
    CHECK(fx_json_parse_file(fx_test_tmpdir(), NULL, &err) == NULL); /* a directory */
    CHECK(err.code == FLUX_ERR_IO);
}

/* The real Qwen3 tokenizer.json (11 MB): structure and values as Python's
 * json module reads them. */
TEST(json_tokenizer_fixture) {
    const char *path = fx_test_path("fixtures/qwen3-tokenizer.json");
    size_t len;
    char *text = fx_test_read_file(path, &len);
    if (!text) SKIP("tests/fixtures/qwen3-tokenizer.json missing (run make fixtures)");
    fx_err err;
    fx_err_clear(&err);
    fx_json_doc *d = fx_json_parse(text, len, &err);
    free(text);
    REQUIRE_MSG(d, "%s", err.msg);
    const fx_json *r = fx_json_root(d);
    CHECK(!strcmp(fx_json_key_at(r, 0), "version"));
    CHECK(!strcmp(fx_json_key_at(r, 8), "model"));
    const fx_json *model = fx_json_get(r, "model");
    CHECK(!strcmp(fx_json_get_str(model, "type", ""), "BPE"));
    const fx_json *vocab = fx_json_get(model, "vocab");
    CHECK_EQ_INT(fx_json_len(vocab), 151643);
    CHECK(!strcmp(fx_json_key_at(vocab, 0), "!") && fx_json_int(fx_json_at(vocab, 0)) == 0);
    CHECK(!strcmp(fx_json_key_at(vocab, 1000), "atus") && fx_json_int(fx_json_at(vocab, 1000)) == 1000);
    /* last entry: U+00E2 U+00BD U+0139 (byte-level alphabet), id 151642 */
    CHECK(!strcmp(fx_json_key_at(vocab, 151642), "\xC3\xA2\xC2\xBD\xC4\xB9"));
    CHECK_EQ_INT(fx_json_int(fx_json_at(vocab, 151642)), 151642);
    const fx_json *merges = fx_json_get(model, "merges");
    CHECK_EQ_INT(fx_json_len(merges), 151387);
    CHECK(!strcmp(fx_json_str(fx_json_at(fx_json_at(merges, 0), 0)), "\xC4\xA0"));
    const fx_json *added = fx_json_get(r, "added_tokens");
    CHECK_EQ_INT(fx_json_len(added), 26);
    CHECK_EQ_INT(fx_json_get_int(fx_json_at(added, 0), "id", 0), 151643);
    CHECK(!strcmp(fx_json_get_str(fx_json_at(added, 0), "content", ""), "<|endoftext|>"));
    CHECK(!strcmp(fx_json_get_str(fx_json_get(r, "normalizer"), "type", ""), "NFC"));
    fx_json_free(d);
}
