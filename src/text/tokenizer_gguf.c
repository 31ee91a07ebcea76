/*
 * tokenizer_gguf.c — the tokenizer of a GGUF file's tokenizer.ggml.* arrays
 * (tokenizer.h: fx_tokenizer_load_gguf), rebuilt as the tokenizer.json the
 * converter read and loaded with all of that file's checks.
 *
 * The arrays live in the key/value section at the start of the file; it is
 * mapped (only the pages read are loaded) and walked here with every length
 * bounded by the bytes left, as gguf.c does for the header (whose parsed
 * form keeps array types and counts, not their elements).
 */
#include "tokenizer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/file_read.h"
#include "src/base/strbuf.h"

/* GGUF value types (gguf.h: fx_gguf_vtype; ggml gguf.h) */
enum { T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STRING, T_ARRAY, T_U64, T_I64, T_F64, T_COUNT };
/* llama.cpp gguf-py constants.py TokenType */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER_DEFINED = 4, TOK_UNUSED = 5, TOK_BYTE = 6 };

typedef struct cursor {
    const unsigned char *p, *end;
} cursor;

static int take(cursor *c, size_t n, const unsigned char **out) {
    if ((size_t)(c->end - c->p) < n) return -1;
    if (out) *out = c->p;
    c->p += n;
    return 0;
}

static int u32_at(cursor *c, uint32_t *v) {
    const unsigned char *b;
    if (take(c, 4, &b)) return -1;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}

static int u64_at(cursor *c, uint64_t *v) {
    uint32_t lo, hi;
    if (u32_at(c, &lo) || u32_at(c, &hi)) return -1;
    *v = (uint64_t)hi << 32 | lo;
    return 0;
}

static int string_at(cursor *c, const char **s, size_t *n) {
    uint64_t len;
    const unsigned char *b;
    if (u64_at(c, &len) || len > (uint64_t)(c->end - c->p) || take(c, (size_t)len, &b)) return -1;
    *s = (const char *)b, *n = (size_t)len;
    return 0;
}

static size_t scalar_size(uint32_t type) {
    static const size_t sizes[T_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return type < T_COUNT ? sizes[type] : 0;
}

/* Skip one value of `type` (no nested arrays). */
static int skip_value(cursor *c, uint32_t type) {
    const char *s;
    size_t n;
    if (type == T_STRING) return string_at(c, &s, &n);
    if (type == T_ARRAY) {
        uint32_t elem;
        uint64_t count;
        if (u32_at(c, &elem) || u64_at(c, &count) || elem == T_ARRAY) return -1;
        if (elem == T_STRING) {
            for (uint64_t i = 0; i < count; i++)
                if (string_at(c, &s, &n)) return -1;
            return 0;
        }
        size_t size = scalar_size(elem);
        if (!size || count > (uint64_t)(c->end - c->p) / size) return -1;
        return take(c, (size_t)count * size, NULL);
    }
    size_t size = scalar_size(type);
    return size ? take(c, size, NULL) : -1;
}

/* An array key found: its element type, count and first element. */
typedef struct array_ref {
    uint32_t elem;
    uint64_t count;
    cursor at;
    int found;
} array_ref;

typedef struct vocab_keys {
    const char *model, *pre;
    size_t model_n, pre_n;
    array_ref tokens, types, merges;
} vocab_keys;

static int walk(cursor *c, vocab_keys *k) {
    const unsigned char *magic;
    uint32_t version;
    uint64_t n_tensors, n_kv;
    if (take(c, 4, &magic) || memcmp(magic, "GGUF", 4) || u32_at(c, &version) || (version != 2 && version != 3) ||
        u64_at(c, &n_tensors) || u64_at(c, &n_kv))
        return -1;
    for (uint64_t i = 0; i < n_kv; i++) {
        const char *key;
        size_t key_n;
        uint32_t type;
        if (string_at(c, &key, &key_n) || u32_at(c, &type)) return -1;
#define IS(name) (key_n == sizeof name - 1 && !memcmp(key, name, key_n))
        array_ref *a = IS("tokenizer.ggml.tokens") ? &k->tokens : IS("tokenizer.ggml.token_type") ? &k->types
                     : IS("tokenizer.ggml.merges") ? &k->merges : NULL;
        if (type == T_STRING && (IS("tokenizer.ggml.model") || IS("tokenizer.ggml.pre"))) {
            const int is_model = IS("tokenizer.ggml.model");
            if (string_at(c, is_model ? &k->model : &k->pre, is_model ? &k->model_n : &k->pre_n)) return -1;
            continue;
        }
#undef IS
        if (a && type == T_ARRAY) {
            cursor peek = *c;
            if (u32_at(&peek, &a->elem) || u64_at(&peek, &a->count)) return -1;
            a->at = peek;
            a->found = 1;
        }
        if (skip_value(c, type)) return -1;
    }
    return 0;
}

static flux_status build_json(const char *path, vocab_keys *k, fx_strbuf *b, fx_err *err) {
    if (!k->model || k->model_n != 4 || memcmp(k->model, "gpt2", 4))
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model is '%.*s', expected 'gpt2' (byte-level BPE)",
                       path, k->model ? (int)(k->model_n > 40 ? 40 : k->model_n) : 6, k->model ? k->model : "absent");
    if (!k->pre || k->pre_n != 5 || memcmp(k->pre, "qwen2", 5))
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "%s: tokenizer.ggml.pre is '%.*s', expected 'qwen2' (the Qwen3 pre-tokenizer; flux.c "
                       "implements only that one)", path, k->pre ? (int)(k->pre_n > 40 ? 40 : k->pre_n) : 6,
                       k->pre ? k->pre : "absent");
    if (!k->tokens.found || k->tokens.elem != T_STRING || !k->types.found || k->types.elem != T_I32 ||
        k->types.count != k->tokens.count || !k->merges.found || k->merges.elem != T_STRING)
        return fx_fail(err, FLUX_ERR_FORMAT,
                       "%s: tokenizer.ggml.tokens (strings), token_type (int32, one per token) and merges (strings) "
                       "are required", path);
    fx_strbuf added = {0};
    fx_sb_str(b, "{\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
                 "{\"type\":\"Split\",\"pattern\":{\"Regex\":");
    fx_sb_json_str(b, fx_qwen2_split_regex, strlen(fx_qwen2_split_regex));
    fx_sb_str(b, "},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                 "\"trim_offsets\":false,\"use_regex\":false}]},\"post_processor\":null,"
                 "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"byte_fallback\":false,\"vocab\":{");
    cursor tok = k->tokens.at, type = k->types.at;
    int first_vocab = 1;
    for (uint64_t id = 0; id < k->tokens.count; id++) {
        const char *s;
        size_t n;
        uint32_t t;
        if (string_at(&tok, &s, &n) || u32_at(&type, &t)) {
            free(added.s);
            return fx_fail(err, FLUX_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%llu] is cut short", path,
                           (unsigned long long)id);
        }
        if (t == TOK_UNUSED) continue;
        if (t == TOK_NORMAL) {
            if (!first_vocab) fx_sb_str(b, ",");
            first_vocab = 0;
            fx_sb_json_str(b, s, n);
            fx_sb_printf(b, ":%llu", (unsigned long long)id);
        } else if (t == TOK_CONTROL || t == TOK_USER_DEFINED) {
            fx_sb_printf(&added, "%s{\"id\":%llu,\"content\":", added.len ? "," : "", (unsigned long long)id);
            fx_sb_json_str(&added, s, n);
            fx_sb_printf(&added, ",\"special\":%s}", t == TOK_CONTROL ? "true" : "false");
        } else {
            free(added.s);
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "%s: tokenizer.ggml.token_type[%llu] = %u (%s) does not occur in a byte-level BPE "
                           "vocabulary", path, (unsigned long long)id, t,
                           t == TOK_BYTE ? "BYTE" : t == TOK_UNKNOWN ? "UNKNOWN" : "not a llama.cpp token type");
        }
    }
    fx_sb_str(b, "},\"merges\":[");
    cursor merge = k->merges.at;
    for (uint64_t i = 0; i < k->merges.count; i++) {
        const char *s;
        size_t n;
        if (string_at(&merge, &s, &n)) {
            free(added.s);
            return fx_fail(err, FLUX_ERR_FORMAT, "%s: tokenizer.ggml.merges[%llu] is cut short", path,
                           (unsigned long long)i);
        }
        if (i) fx_sb_str(b, ",");
        fx_sb_json_str(b, s, n);
    }
    fx_sb_str(b, "]},\"added_tokens\":[");
    if (added.len) fx_sb_add(b, added.s, added.len);
    fx_sb_str(b, "]}");
    const int failed = added.failed;
    free(added.s);
    return b->failed || failed ? fx_fail(err, FLUX_ERR_NOMEM, "%s: out of memory building its tokenizer", path) : FLUX_OK;
}

flux_status fx_tokenizer_load_gguf(const char *path, fx_tokenizer **out, fx_err *err) {
    *out = NULL;
    struct stat st;
    int fd = fx_open_regular(path, &st, err);
    if (fd < 0) return err->code;
    if (st.st_size < 24) {
        close(fd);
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: too short for a GGUF file", path);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return fx_fail(err, FLUX_ERR_IO, "cannot map %s: %s", path, strerror(errno));
    cursor c = {map, (const unsigned char *)map + st.st_size};
    vocab_keys k = {0};
    flux_status s;
    fx_strbuf json = {0};
    if (walk(&c, &k)) s = fx_fail(err, FLUX_ERR_FORMAT, "%s: malformed GGUF key/value section", path);
    else s = build_json(path, &k, &json, err);
    munmap(map, (size_t)st.st_size);
    if (!s) {
        char display[600];
        snprintf(display, sizeof display, "%.500s (tokenizer.ggml.*)", path);
        s = fx_tokenizer_load_json(json.s, json.len, display, out, err);
    }
    free(json.s);
    return s;
}
