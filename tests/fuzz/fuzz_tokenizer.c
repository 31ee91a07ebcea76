/*
 * fuzz_tokenizer.c — libFuzzer target for the tokenizer and the Unicode
 * layer (make fuzz; clang -fsanitize=fuzzer,address,undefined).
 *
 * The first input byte picks what the rest is:
 *   0-3  text (any bytes) for the Qwen3 tokenizer: raw encoding, chat
 *        template, 512-token prompt with mask, and raw encoding again with
 *        a tiny decoding window, which must give the same ids;
 *   4    a tokenizer.json document (must load or fail cleanly, and a loaded
 *        one must encode a fixed text);
 *   5    text for NFC: fx_nfc_spans == fx_nfc, and NFC is idempotent.
 * The Qwen3 tokenizer.json is read once from $FLUX_TOKENIZER_JSON or
 * tests/fixtures/qwen3-tokenizer.json (make fixtures); without it a small
 * built-in byte-level vocabulary is used.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/text/tokenizer.h"
#include "src/text/unicode.h"
#include "tests/byte_level.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TEXT 4096

static void check(int cond) {
    if (!cond) abort();
}

/* A byte-level vocabulary (256 symbols + a few merges), NFC, Qwen2 regex. */
static char *tiny_json(void) {
    size_t cap = 1 << 15, n = 0;
    char *j = malloc(cap);
    check(j != NULL);
    n += (size_t)snprintf(j + n, cap - n,
                          "{\"added_tokens\":[{\"id\":300,\"content\":\"<|im_start|>\"},{\"id\":301,\"content\":\"<|im_end|>\"},"
                          "{\"id\":302,\"content\":\"<think>\"},{\"id\":303,\"content\":\"</think>\"},"
                          "{\"id\":304,\"content\":\"<|endoftext|>\"}],\"normalizer\":{\"type\":\"NFC\"},"
                          "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                          "{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "
                          "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
                          "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                          "\"use_regex\":false}]},\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (int b = 0; b < 256; b++) {
        uint32_t c = fx_byte_level_char(b);
        n += (size_t)snprintf(j + n, cap - n, "\"\\u%04x\":%d,", (unsigned)c, b);
    }
    n += (size_t)snprintf(j + n, cap - n,
                          "\"he\":256,\"ll\":257,\"hell\":258,\"hello\":259},\"merges\":[\"h e\",\"l l\",\"he ll\","
                          "[\"hell\",\"o\"]]}}");
    return j;
}

static fx_tokenizer *qwen3(void) {
    static fx_tokenizer *tok; /* loaded once per fuzzing process */
    if (tok) return tok;
    const char *path = getenv("FLUX_TOKENIZER_JSON");
    fx_err err = {0};
    if (fx_tokenizer_load(path ? path : "tests/fixtures/qwen3-tokenizer.json", &tok, &err) != FLUX_OK) {
        char *j = tiny_json();
        check(fx_tokenizer_load_json(j, strlen(j), "tiny", &tok, &err) == FLUX_OK);
        free(j);
    }
    return tok;
}

static void fuzz_text(const uint8_t *s, size_t n) {
    fx_tokenizer *t = qwen3();
    fx_err err = {0};
    fx_ids a = {0}, b = {0};
    check(fx_tokenizer_encode(t, (const char *)s, n, &a, &err) == FLUX_OK);
    for (size_t i = 0; i < a.n; i++) check(a.ids[i] >= 0 && a.ids[i] < (1 << 24));
    /* the decoding window never changes the ids */
    fx_tokenizer_set_window(t, 1 + (n % 7));
    check(fx_tokenizer_encode(t, (const char *)s, n, &b, &err) == FLUX_OK);
    fx_tokenizer_set_window(t, 0);
    check(a.n == b.n && (a.n == 0 || !memcmp(a.ids, b.ids, a.n * sizeof(int32_t))));
    b.n = 0;
    check(fx_tokenizer_encode_chat(t, (const char *)s, n, &b, &err) == FLUX_OK);
    check(b.n >= a.n);
    fx_ids_free(&a);
    fx_ids_free(&b);
    /* the prompt path takes a C string */
    char *z = malloc(n + 1);
    check(z != NULL);
    memcpy(z, s, n);
    z[n] = 0;
    int32_t ids[512];
    uint8_t mask[512];
    int real = -1;
    check(fx_tokenizer_encode_prompt(t, z, 512, ids, mask, &real, &err) == FLUX_OK);
    check(real >= 1 && real <= 512);
    for (int i = 0; i < 512; i++) check(mask[i] == (i < real));
    free(z);
}

static void fuzz_json(const uint8_t *s, size_t n) {
    fx_tokenizer *t = NULL;
    fx_err err = {0};
    flux_status st = fx_tokenizer_load_json((const char *)s, n, "fuzz.json", &t, &err);
    check(st == FLUX_OK || st == FLUX_ERR_FORMAT || st == FLUX_ERR_UNSUPPORTED);
    check((st == FLUX_OK) == (t != NULL));
    check(st == FLUX_OK || err.msg[0] != 0);
    if (t) {
        fx_ids ids = {0};
        static const char text[] = "hello world <|im_end|> It's 3\xC3\xA9\xCC\x81 \xF0\x9F\x98\x80\n\n";
        check(fx_tokenizer_encode(t, text, sizeof text - 1, &ids, &err) == FLUX_OK);
        fx_ids_free(&ids);
        fx_tokenizer_free(t);
    }
}

static void fuzz_nfc(const uint8_t *s, size_t n) {
    uint32_t *in = malloc((n + 1) * sizeof *in);
    uint32_t *a = malloc(FX_NFC_EXPANSION * (n + 1) * sizeof *a), *b = malloc(FX_NFC_EXPANSION * (n + 1) * sizeof *b);
    uint32_t *c = malloc(FX_NFC_EXPANSION * FX_NFC_EXPANSION * (n + 1) * sizeof *c);
    uint32_t *tmp = malloc(FX_NFC_EXPANSION * FX_NFC_EXPANSION * (n + 1) * sizeof *tmp);
    check(in && a && b && c && tmp);
    size_t m = fx_utf8_to_cps(s, n, in);
    size_t na = fx_nfc(in, m, a, tmp), nb = fx_nfc_spans(in, m, b, tmp);
    check(na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a)));
    check(na <= FX_NFC_EXPANSION * m);
    size_t nc = fx_nfc(a, na, c, tmp);
    check(nc == na && (na == 0 || !memcmp(a, c, na * sizeof *a)));
    if (fx_nfc_quick_check(in, m)) check(na == m && (m == 0 || !memcmp(in, a, m * sizeof *a)));
    free(in), free(a), free(b), free(c), free(tmp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t mode = data[0] % 6;
    const uint8_t *s = data + 1;
    size_t n = size - 1;
    if (mode == 4) {
        fuzz_json(s, n);
        return 0;
    }
    if (n > MAX_TEXT) n = MAX_TEXT;
    if (mode == 5) fuzz_nfc(s, n);
    else fuzz_text(s, n);
    return 0;
}
