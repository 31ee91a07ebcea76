/*
 * test_unicode.c — UTF-8 decoding, regex classes and NFC against the
 * reference (Hugging Face tokenizers), using data recorded by
 * tools/gen_tokenizer_expected.mjs in tests/tokenizer/.
 */
#include <stdlib.h>
#include <string.h>

#include "tests/test.h"
#include "src/text/unicode.h"

/* ------------------------------------------------------------------ UTF-8 */

typedef struct utf8_case {
    const char *bytes;
    size_t len;
    uint32_t cps[8];
    size_t n;
} utf8_case;

#define U8(s) s, sizeof s - 1

TEST(unicode_utf8_maximal_subparts) {
    /* One U+FFFD per maximal subpart (Unicode §3.9, Table 3-8 practice). */
    static const utf8_case cases[] = {
        {U8("a"), {0x61}, 1},
        {U8("\xC3\xA9"), {0xE9}, 1},
        {U8("\xE2\x82\xAC"), {0x20AC}, 1},
        {U8("\xF0\x9F\x98\x80"), {0x1F600}, 1},
        {U8("\xF4\x8F\xBF\xBF"), {0x10FFFF}, 1},
        {U8("\xEF\xBF\xBD"), {0xFFFD}, 1},
        {U8("\x80"), {0xFFFD}, 1},
        {U8("\xBF\x80"), {0xFFFD, 0xFFFD}, 2},
        {U8("\xC0\x80"), {0xFFFD, 0xFFFD}, 2},            /* overlong lead */
        {U8("\xC1\xBF"), {0xFFFD, 0xFFFD}, 2},
        {U8("\xC3"), {0xFFFD}, 1},                         /* truncated */
        {U8("a\xC3("), {0x61, 0xFFFD, 0x28}, 3},
        {U8("\xE0\x80\x80"), {0xFFFD, 0xFFFD, 0xFFFD}, 3}, /* overlong 3-byte */
        {U8("\xE0\xA0"), {0xFFFD}, 1},                     /* truncated, one subpart */
        {U8("\xE0\xA0z"), {0xFFFD, 0x7A}, 2},
        {U8("\xED\xA0\x80"), {0xFFFD, 0xFFFD, 0xFFFD}, 3}, /* surrogate */
        {U8("\xED\x9F\xBF"), {0xD7FF}, 1},
        {U8("\xF0\x8F\xBF\xBF"), {0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}, 4},
        {U8("\xF0\x90\x80"), {0xFFFD}, 1},
        {U8("\xF0\x9F\x98"), {0xFFFD}, 1},
        {U8("\xF0\x9F\x98x"), {0xFFFD, 0x78}, 2},
        {U8("\xF4\x90\x80\x80"), {0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}, 4}, /* > U+10FFFF */
        {U8("\xF5\x80"), {0xFFFD, 0xFFFD}, 2},
        {U8("\xF8\x88\x80\x80\x80"), {0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}, 5},
        {U8("\xFE\xFF"), {0xFFFD, 0xFFFD}, 2},
        {U8("\xC2\xC2\xA9"), {0xFFFD, 0xA9}, 2},
        {U8("\xE2\x82\xE2\x82\xAC"), {0xFFFD, 0x20AC}, 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const utf8_case *c = &cases[k];
        uint32_t out[16];
        size_t n = fx_utf8_to_cps((const uint8_t *)c->bytes, c->len, out);
        CHECK_MSG(n == c->n, "case %zu: %zu code points, expected %zu", k, n, c->n);
        for (size_t i = 0; i < n && i < c->n; i++)
            CHECK_MSG(out[i] == c->cps[i], "case %zu cp %zu: U+%04X, expected U+%04X", k, i, out[i], c->cps[i]);
        int valid = 1;
        for (size_t i = 0; i < c->n; i++) valid &= c->cps[i] != 0xFFFD;
        if (k == 5) valid = 1; /* a literal U+FFFD is well-formed */
        CHECK_MSG(fx_utf8_valid((const uint8_t *)c->bytes, c->len) == valid, "case %zu validity", k);
    }
}

TEST(unicode_utf8_roundtrip_all_code_points) {
    for (uint32_t c = 0; c <= FX_UNICODE_MAX; c++) {
        if (c >= 0xD800 && c < 0xE000) continue;
        uint8_t b[4];
        size_t n = fx_utf8_encode(c, b), used;
        REQUIRE_MSG(fx_utf8_decode(b, n, &used) == c && used == n, "U+%04X does not round-trip", c);
        REQUIRE(fx_utf8_valid(b, n));
    }
}

TEST(unicode_utf8_random_bytes_never_overrun) {
    fx_test_rng r;
    fx_test_rng_seed(&r, 7);
    uint8_t buf[64];
    uint32_t out[64];
    for (int it = 0; it < 20000; it++) {
        size_t n = 1 + fx_test_rng_u64(&r) % 64;
        for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)fx_test_rng_u64(&r);
        size_t k = fx_utf8_to_cps(buf, n, out);
        REQUIRE(k >= 1 && k <= n);
        for (size_t i = 0; i < k; i++) REQUIRE(out[i] <= FX_UNICODE_MAX && !(out[i] >= 0xD800 && out[i] < 0xE000));
    }
}

/* ------------------------------------------------------------------ classes */

static int class_of_letter(char c) {
    switch (c) {
    case 'L': return FX_UC_LETTER;
    case 'N': return FX_UC_NUMBER;
    case 'S': return FX_UC_SPACE;
    default: return FX_UC_OTHER; /* O, and l/n (unassigned in Unicode 15.0) */
    }
}

TEST(unicode_classes_match_hf_pretokenizer) {
    char *text = fx_test_read_file(fx_test_path("tokenizer/classes_hf.txt"), NULL);
    REQUIRE_MSG(text, "tests/tokenizer/classes_hf.txt missing");
    uint32_t starts[4096];
    char cls[4096];
    int nr = 0, newer = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        char *end;
        unsigned long s = strtoul(line, &end, 16);
        REQUIRE(nr < 4096 && *end == ' ');
        starts[nr] = (uint32_t)s, cls[nr] = end[1];
        nr++;
    }
    free(text);
    REQUIRE(nr > 100 && starts[0] == 0);
    int bad = 0, spaces = 0;
    for (int k = 0; k < nr; k++) {
        uint32_t hi = k + 1 < nr ? starts[k + 1] : FX_UNICODE_MAX + 1;
        for (uint32_t c = starts[k]; c < hi; c++) {
            if (c >= 0xD800 && c < 0xE000) continue;
            int want = class_of_letter(cls[k]);
            if (cls[k] == 'l' || cls[k] == 'n') newer++;
            if (want == FX_UC_SPACE) spaces++;
            if (fx_uc_class(c) != want && bad++ < 10)
                fx_test_fail(__FILE__, __LINE__, "U+%04X: class %d, the reference says %c", c, fx_uc_class(c), cls[k]);
        }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(spaces, 25); /* White_Space: 0009-000D 0020 0085 00A0 1680 2000-200A 2028 2029 202F 205F 3000 */
    /* the documented Unicode 15.0 vs 16.0 gap stays what we measured */
    CHECK_MSG(newer > 4000 && newer < 6000, "%d code points are letters/digits only in Unicode 16", newer);
    CHECK_EQ_INT(fx_uc_class(0xFEFF), FX_UC_OTHER);
    CHECK_EQ_INT(fx_uc_class(0x0085), FX_UC_SPACE);
    CHECK_EQ_INT(fx_uc_class(0x200B), FX_UC_OTHER);
}

/* ------------------------------------------------------------------ NFC */

static size_t parse_hex_cps(const char *s, const char *end, uint32_t *out, size_t cap) {
    size_t n = 0;
    while (s < end) {
        char *e;
        unsigned long v = strtoul(s, &e, 16);
        if (e == s) break;
        if (n < cap) out[n++] = (uint32_t)v;
        s = e;
        while (s < end && *s == ' ') s++;
    }
    return n;
}

static size_t nfc(const uint32_t *in, size_t n, uint32_t *out) {
    uint32_t tmp[FX_NFC_EXPANSION * 64];
    return fx_nfc(in, n, out, tmp);
}

TEST(unicode_nfc_matches_hf_normalizer) {
    char *text = fx_test_read_file(fx_test_path("tokenizer/nfc_hf.txt"), NULL);
    REQUIRE_MSG(text, "tests/tokenizer/nfc_hf.txt missing");
    /* single code points: the listed ones change, every other maps to itself */
    uint8_t *listed = calloc(FX_UNICODE_MAX + 1, 1);
    REQUIRE(listed);
    int singles = 0, seqs = 0, bad = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        char *semi = strchr(line, ';');
        REQUIRE(semi);
        uint32_t in[64], want[64], got[FX_NFC_EXPANSION * 64];
        size_t ni = parse_hex_cps(line, semi, in, 64), nw = parse_hex_cps(semi + 1, semi + strlen(semi), want, 64);
        REQUIRE(ni >= 1 && ni <= 32 && nw >= 1);
        size_t ng = nfc(in, ni, got);
        int same = ng == nw && !memcmp(got, want, nw * sizeof(uint32_t));
        if (!same && bad++ < 10)
            fx_test_fail(__FILE__, __LINE__, "NFC(%s): got %zu code points, first U+%04X", line, ng, ng ? got[0] : 0);
        if (ni == 1) {
            listed[in[0]] = 1;
            singles += !(nw == 1 && want[0] == in[0]); /* the ones the normalizer changes */
        } else {
            seqs++;
        }
        /* quick check YES must never be claimed for a string NFC changes */
        if (!(ng == ni && !memcmp(got, in, ni * sizeof(uint32_t)))) CHECK(!fx_nfc_quick_check(in, ni));
    }
    free(text);
    CHECK_EQ_INT(singles, 1120);
    CHECK_MSG(seqs > 4000, "only %d sequences", seqs);
    for (uint32_t c = 0; c <= FX_UNICODE_MAX; c++) {
        if ((c >= 0xD800 && c < 0xE000) || listed[c]) continue;
        uint32_t out[4];
        size_t n = nfc(&c, 1, out);
        if (!(n == 1 && out[0] == c) && bad++ < 10) fx_test_fail(__FILE__, __LINE__, "NFC(U+%04X) changed it", c);
    }
    free(listed);
    CHECK_EQ_INT(bad, 0);
}

TEST(unicode_nfc_known_cases) {
    struct { uint32_t in[6]; size_t ni; uint32_t out[6]; size_t no; } cases[] = {
        {{0x65, 0x301}, 2, {0xE9}, 1},
        {{0x212B}, 1, {0xC5}, 1},                          /* singleton */
        {{0x1100, 0x1161, 0x11A8}, 3, {0xAC01}, 1},        /* Hangul LVT */
        {{0xAC00, 0x11A8}, 2, {0xAC01}, 1},                /* Hangul LV + T */
        {{0x61, 0x323, 0x302}, 3, {0x1EAD}, 1},            /* ậ: marks composed in order */
        {{0x61, 0x302, 0x323}, 3, {0x1EAD}, 1},            /* reordered first */
        {{0x915, 0x93C}, 2, {0x915, 0x93C}, 2},            /* exclusion: stays decomposed */
        {{0x958}, 1, {0x915, 0x93C}, 2},
        {{0x301, 0x65}, 2, {0x301, 0x65}, 2},              /* leading mark */
        {{0x61, 0x1DFA, 0x316}, 3, {0x61, 0x1DFA, 0x316}, 3}, /* U+1DFA: Unicode 10, class 0 here */
        {{0x105D2, 0x307}, 2, {0x105D2, 0x307}, 2},        /* Unicode 16 composite: none here */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        uint32_t got[32];
        size_t n = nfc(cases[k].in, cases[k].ni, got);
        CHECK_MSG(n == cases[k].no && !memcmp(got, cases[k].out, n * sizeof(uint32_t)), "case %zu", k);
    }
}

TEST(unicode_nfc_long_mark_runs_linear_and_ordered) {
    /* A run of 20000 marks takes the counting-sort path: the result must be
     * a stable sort by combining class and NFC must be idempotent. */
    enum { N = 20000 };
    static const uint32_t marks[] = {0x301, 0x316, 0x323, 0x345, 0x5B0, 0x5BC, 0x93C, 0x1DCE, 0x302, 0x334};
    uint32_t *in = malloc((N + 1) * sizeof *in), *out = malloc(FX_NFC_EXPANSION * (N + 1) * sizeof *out);
    uint32_t *tmp = malloc(FX_NFC_EXPANSION * (N + 1) * sizeof *tmp), *again = malloc(FX_NFC_EXPANSION * (N + 1) * sizeof *again);
    REQUIRE(in && out && tmp && again);
    fx_test_rng r;
    fx_test_rng_seed(&r, 3);
    in[0] = 'a';
    for (int i = 1; i <= N; i++) in[i] = marks[fx_test_rng_u64(&r) % 10];
    size_t n = fx_nfc(in, N + 1, out, tmp);
    CHECK(n >= 2 && n <= N + 1);
    for (size_t i = 2; i < n; i++) CHECK(fx_uc_ccc(out[i - 1]) <= fx_uc_ccc(out[i]) || fx_uc_ccc(out[i]) == 0);
    size_t m = fx_nfc(out, n, again, tmp);
    CHECK(m == n && !memcmp(out, again, n * sizeof(uint32_t)));
    free(in), free(out), free(tmp), free(again);
}

TEST(unicode_nfc_spans_equals_whole_string_nfc) {
    /* Random strings dense in marks, Hangul jamo, composites and exclusions:
     * normalising only the failing spans gives the whole-string result,
     * quick check YES means unchanged, and NFC is idempotent. */
    static const uint32_t pool[] = {
        'a', 'e', 'o', 'A', ' ', 0x300, 0x301, 0x302, 0x308, 0x316, 0x323, 0x327, 0x328, 0x345, 0x334, 0x5B0, 0x5BC,
        0x5C1, 0x93C, 0x915, 0x958, 0x9BE, 0x9C7, 0xB47, 0xB3E, 0xB57, 0x1100, 0x1161, 0x11A8, 0xAC00, 0xAC01, 0x212B,
        0xC5, 0xE9, 0x1E0A, 0x1EA0, 0x1F00, 0x3B1, 0x313, 0x342, 0x1DFA, 0x11938, 0x3099, 0x304B, 0xFB2C, 0xF73, 0x1D15E};
    enum { N = 48 };
    uint32_t in[N], a[FX_NFC_EXPANSION * N], b[FX_NFC_EXPANSION * N], c[FX_NFC_EXPANSION * FX_NFC_EXPANSION * N];
    uint32_t tmp[FX_NFC_EXPANSION * FX_NFC_EXPANSION * N];
    fx_test_rng r;
    fx_test_rng_seed(&r, 5);
    for (int it = 0; it < 200000; it++) {
        size_t n = 1 + fx_test_rng_u64(&r) % N;
        for (size_t i = 0; i < n; i++) in[i] = pool[fx_test_rng_u64(&r) % (sizeof pool / sizeof *pool)];
        size_t na = fx_nfc(in, n, a, tmp), nb = fx_nfc_spans(in, n, b, tmp);
        REQUIRE_MSG(na == nb && !memcmp(a, b, na * sizeof(uint32_t)), "iteration %d", it);
        size_t nc = fx_nfc(a, na, c, tmp);
        REQUIRE_MSG(nc == na && !memcmp(a, c, na * sizeof(uint32_t)), "NFC not idempotent, iteration %d", it);
        if (fx_nfc_quick_check(in, n)) REQUIRE(na == n && !memcmp(in, a, n * sizeof(uint32_t)));
    }
}
