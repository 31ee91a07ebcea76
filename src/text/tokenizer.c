/*
 * tokenizer.c — Qwen2/Qwen3 byte-level BPE (see tokenizer.h for the exact
 * pipeline and what tokenizer.json must contain).
 *
 * Data layout: every token text lives in one arena; `vocab` is an
 * open-addressing hash from text to id, `merges` one from the id pair
 * (left << 32 | right) to (rank << 32 | merged id). BPE runs on ids.
 */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/file_read.h"
#include "src/base/json.h"
#include "unicode.h"

/* The split regex the hand-written pre-tokenizer implements, as stored in
 * tokenizer.json (pre_tokenizer.pretokenizers[0].pattern.Regex). */
const char fx_qwen2_split_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

#define MAX_TOKEN_ID (1 << 24)
#define CACHE_SLOTS 8192      /* BPE word cache: direct-mapped */
#define CACHE_KEY_MAX 24      /* bytes of a cached pre-token */
#define CACHE_IDS_MAX 12      /* ids of a cached pre-token */
#define WINDOW 65536          /* code points decoded at a time (encode_segment) */

typedef struct added_token {
    const char *text; /* in the arena (set once the arena is complete) */
    uint32_t off, len;
    int32_t id;
} added_token;

typedef struct bpe_symbol {
    int32_t id;
    int32_t prev, next; /* -1 at the ends */
    int32_t alive;      /* 0 once merged into its left neighbour */
} bpe_symbol;

typedef struct bpe_merge {
    uint32_t rank, pos;
    int32_t new_id;
} bpe_merge;

typedef struct cache_slot {
    uint64_t hash;
    uint8_t key_len, n_ids; /* key_len 0 = empty */
    uint8_t key[CACHE_KEY_MAX];
    int32_t ids[CACHE_IDS_MAX];
} cache_slot;

struct fx_tokenizer {
    char *arena; /* all token texts, NUL-separated */
    size_t arena_len, arena_cap;

    /* id → text (vocab and added tokens) */
    uint32_t *tok_off, *tok_len;
    int32_t n_slots; /* max id + 1 */

    /* vocab text → id: slots of {id or -1, high 32 bits of the text's hash} */
    int32_t (*vocab_table)[2];
    uint32_t vocab_mask;
    size_t vocab_size;

    /* (left, right) → (rank, merged): slots {key, value}, key UINT64_MAX = empty */
    uint64_t (*merges)[2];
    uint32_t merge_mask;
    size_t n_merges;

    int32_t byte_id[256]; /* id of the byte-level symbol of each byte */
    int ignore_merges;

    added_token *added; /* longest first */
    size_t n_added;
    uint8_t added_first[256]; /* 1 if some added token starts with this byte */

    /* scratch */
    uint8_t *clean;
    size_t clean_cap;
    uint32_t *cps, *nfc, *nfc_tmp;
    uint8_t *cls;
    size_t cps_cap, nfc_cap, nfc_tmp_cap, cls_cap;
    uint8_t *word;
    size_t word_cap;
    char *joined; /* ignore_merges: a pre-token in byte-level form */
    size_t joined_cap;
    bpe_symbol *syms;
    bpe_merge *heap;
    size_t syms_cap, heap_cap;
    char *chat;
    size_t chat_cap;
    fx_ids prompt_ids;
    cache_slot *cache;
    size_t window; /* code points decoded at a time (encode_segment) */
};

/* ------------------------------------------------------------ small tools */

static uint64_t hash_bytes(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        s += 8, n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h;
}

static uint64_t hash_pair(uint64_t key) {
    key *= 0x9E3779B97F4A7C15ull;
    return key ^ (key >> 31);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return 0;
    *p = q, *cap = n;
    return 1;
}

void fx_ids_free(fx_ids *ids) {
    free(ids->ids);
    ids->ids = NULL, ids->n = ids->cap = 0;
}

static int ids_push(fx_ids *o, int32_t id) {
    if (o->n == o->cap && !grow((void **)&o->ids, &o->cap, o->n + 1, sizeof(int32_t))) return 0;
    o->ids[o->n++] = id;
    return 1;
}

static uint32_t table_size_for(size_t n) {
    uint32_t size = 1024;
    while (size < 2 * n) size *= 2;
    return size;
}

/* ------------------------------------------------------------ lookups */

static const char *tok_text(const fx_tokenizer *t, int32_t id) { return t->arena + t->tok_off[id]; }

/* The slot holding text s[0, n) (whose hash_bytes is h), or the empty slot
 * where it would go. */
static uint32_t vocab_slot_h(const fx_tokenizer *t, const char *s, size_t n, uint64_t h) {
    int32_t tag = (int32_t)(uint32_t)(h >> 32);
    uint32_t i = (uint32_t)h & t->vocab_mask;
    for (;; i = (i + 1) & t->vocab_mask) {
        int32_t id = t->vocab_table[i][0];
        if (id < 0) return i;
        if (t->vocab_table[i][1] == tag && t->tok_len[id] == n && !memcmp(tok_text(t, id), s, n)) return i;
    }
}

static int32_t vocab_find(const fx_tokenizer *t, const char *s, size_t n) {
    return t->vocab_table[vocab_slot_h(t, s, n, hash_bytes(s, n))][0];
}

/* Loading does ~600k random table lookups: they run in batches whose slots
 * are prefetched first, so the cache misses overlap. */
#define LOAD_BATCH 16
#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

static inline const uint64_t *merge_find(const fx_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t i = (uint32_t)hash_pair(key) & t->merge_mask;
    for (;; i = (i + 1) & t->merge_mask) {
        uint64_t k = t->merges[i][0];
        if (k == key) return &t->merges[i][1];
        if (k == UINT64_MAX) return NULL;
    }
}

int32_t fx_tokenizer_token_id(const fx_tokenizer *tok, const char *text) {
    size_t n = strlen(text);
    for (size_t i = 0; i < tok->n_added; i++)
        if (tok->added[i].len == n && !memcmp(tok->added[i].text, text, n)) return tok->added[i].id;
    return vocab_find(tok, text, n);
}

size_t fx_tokenizer_vocab_size(const fx_tokenizer *tok) { return tok->vocab_size; }
size_t fx_tokenizer_merge_count(const fx_tokenizer *tok) { return tok->n_merges; }
size_t fx_tokenizer_added_count(const fx_tokenizer *tok) { return tok->n_added; }

/* ------------------------------------------------------------ loading */

static flux_status arena_add(fx_tokenizer *t, const char *s, size_t n, uint32_t *off, fx_err *err) {
    if (t->arena_len + n + 1 > UINT32_MAX) return fx_fail(err, FLUX_ERR_FORMAT, "tokenizer: token texts exceed 4 GiB");
    if (!grow((void **)&t->arena, &t->arena_cap, t->arena_len + n + 1, 1))
        return fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory for token texts");
    memcpy(t->arena + t->arena_len, s, n);
    t->arena[t->arena_len + n] = 0;
    *off = (uint32_t)t->arena_len;
    t->arena_len += n + 1;
    return FLUX_OK;
}

/* The GPT-2 byte → character table: printable bytes map to themselves, the
 * other 68 to U+0100.. in increasing byte order. */
static uint32_t byte_level_char(int b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return (uint32_t)b;
    int k = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) k++;
    return 256u + (uint32_t)k;
}

static int str_is(const fx_json *v, const char *s) { return fx_json_is_string(v) && !strcmp(fx_json_str(v), s); }

static flux_status check_pipeline(const fx_json *root, const char *src, fx_err *err) {
    const fx_json *norm = fx_json_get(root, "normalizer");
    if (!str_is(fx_json_get(norm, "type"), "NFC"))
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "%s: normalizer must be {\"type\": \"NFC\"} (the Qwen2 tokenizer); found type %s", src,
                       fx_json_is_string(fx_json_get(norm, "type")) ? fx_json_get_str(norm, "type", "")
                                                                  : fx_json_type_name(fx_json_typeof(norm)));

    const fx_json *pre = fx_json_get(root, "pre_tokenizer");
    const fx_json *seq = fx_json_get(pre, "pretokenizers");
    if (!str_is(fx_json_get(pre, "type"), "Sequence") || fx_json_len(seq) != 2)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "%s: pre_tokenizer must be a Sequence of Split + ByteLevel (the Qwen2 tokenizer)", src);
    const fx_json *split = fx_json_at(seq, 0), *bl = fx_json_at(seq, 1);
    const fx_json *re = fx_json_get(fx_json_get(split, "pattern"), "Regex");
    if (!str_is(fx_json_get(split, "type"), "Split") || !fx_json_is_string(re))
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s: pre_tokenizer.pretokenizers[0] must be a Split with a Regex pattern",
                       src);
    if (strcmp(fx_json_str(re), fx_qwen2_split_regex))
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "%s: pre_tokenizer.pretokenizers[0].pattern.Regex is not the Qwen2 split regex "
                       "(flux.c implements only that one); found \"%.200s\"",
                       src, fx_json_str(re));
    if (!str_is(fx_json_get(split, "behavior"), "Isolated") || fx_json_get_bool(split, "invert", 0))
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "%s: pre_tokenizer.pretokenizers[0] must have behavior \"Isolated\" and invert false", src);
    if (!str_is(fx_json_get(bl, "type"), "ByteLevel") || fx_json_get_bool(bl, "add_prefix_space", 0) ||
        fx_json_get_bool(bl, "use_regex", 0))
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "%s: pre_tokenizer.pretokenizers[1] must be ByteLevel with add_prefix_space false and "
                       "use_regex false",
                       src);

    const fx_json *post = fx_json_get(root, "post_processor");
    if (!fx_json_is_null(post) && !str_is(fx_json_get(post, "type"), "ByteLevel"))
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "%s: post_processor must be null or ByteLevel (one that adds tokens is not supported)", src);

    const fx_json *model = fx_json_get(root, "model");
    if (!fx_json_is_object(model)) return fx_fail(err, FLUX_ERR_FORMAT, "%s: no \"model\" object", src);
    if (!str_is(fx_json_get(model, "type"), "BPE"))
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s: model.type must be \"BPE\"", src);
    const fx_json *dropout = fx_json_get(model, "dropout");
    if (!fx_json_is_null(dropout) && fx_json_num(dropout) != 0.0)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s: model.dropout must be null (no BPE dropout)", src);
    if (fx_json_get_bool(model, "byte_fallback", 0))
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s: model.byte_fallback must be false", src);
    if (*fx_json_get_str(model, "continuing_subword_prefix", "") || *fx_json_get_str(model, "end_of_word_suffix", ""))
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "%s: model.continuing_subword_prefix and model.end_of_word_suffix must be empty", src);
    return FLUX_OK;
}

static flux_status load_vocab(fx_tokenizer *t, const fx_json *vocab, const fx_json *added, const char *src,
                              fx_err *err) {
    if (!fx_json_is_object(vocab)) return fx_fail(err, FLUX_ERR_FORMAT, "%s: model.vocab must be an object", src);
    if (!fx_json_is_null(added) && !fx_json_is_array(added))
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: added_tokens must be an array", src);
    size_t nv = fx_json_len(vocab), na = fx_json_len(added);

    /* ids bound the id → text table */
    int64_t max_id = -1;
    for (size_t i = 0; i < nv; i++) {
        const fx_json *v = fx_json_at(vocab, i);
        if (!fx_json_is_int(v) || fx_json_int(v) < 0 || fx_json_int(v) >= MAX_TOKEN_ID)
            return fx_fail(err, FLUX_ERR_FORMAT, "%s: model.vocab[\"%.80s\"] must be an id in [0, %d)", src,
                           fx_json_key_at(vocab, i), MAX_TOKEN_ID);
        if (fx_json_int(v) > max_id) max_id = fx_json_int(v);
    }
    for (size_t i = 0; i < na; i++) {
        const fx_json *a = fx_json_at(added, i);
        const fx_json *id = fx_json_get(a, "id");
        if (!fx_json_is_int(id) || fx_json_int(id) < 0 || fx_json_int(id) >= MAX_TOKEN_ID ||
            !fx_json_is_string(fx_json_get(a, "content")) || fx_json_str_len(fx_json_get(a, "content")) == 0)
            return fx_fail(err, FLUX_ERR_FORMAT,
                           "%s: added_tokens[%zu] needs an \"id\" in [0, %d) and a non-empty \"content\"", src, i,
                           MAX_TOKEN_ID);
        if (fx_json_get_bool(a, "lstrip", 0) || fx_json_get_bool(a, "rstrip", 0) || fx_json_get_bool(a, "single_word", 0))
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "%s: added_tokens[%zu] (\"%.80s\") uses lstrip/rstrip/single_word, which flux.c does "
                           "not support",
                           src, i, fx_json_get_str(a, "content", ""));
        if (fx_json_int(id) > max_id) max_id = fx_json_int(id);
    }
    t->n_slots = (int32_t)(max_id + 1);
    t->tok_off = calloc((size_t)t->n_slots + 1, sizeof(uint32_t));
    t->tok_len = calloc((size_t)t->n_slots + 1, sizeof(uint32_t));
    t->vocab_mask = table_size_for(nv) - 1;
    t->vocab_table = malloc(((size_t)t->vocab_mask + 1) * sizeof *t->vocab_table);
    t->added = calloc(na + 1, sizeof(added_token));
    if (!t->tok_off || !t->tok_len || !t->vocab_table || !t->added)
        return fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory for %zu tokens", nv);
    memset(t->vocab_table, 0xFF, ((size_t)t->vocab_mask + 1) * sizeof *t->vocab_table);
    t->arena_cap = 0;
    if (!grow((void **)&t->arena, &t->arena_cap, nv * 8 + 1024, 1))
        return fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory for token texts");

    for (size_t i0 = 0; i0 < nv; i0 += LOAD_BATCH) {
        size_t nb = nv - i0 < LOAD_BATCH ? nv - i0 : LOAD_BATCH;
        uint64_t hs[LOAD_BATCH];
        for (size_t k = 0; k < nb; k++) {
            hs[k] = hash_bytes(fx_json_key_at(vocab, i0 + k), fx_json_key_len_at(vocab, i0 + k));
            PREFETCH(&t->vocab_table[(uint32_t)hs[k] & t->vocab_mask]);
        }
        for (size_t k = 0; k < nb; k++) {
            size_t i = i0 + k;
            const char *s = fx_json_key_at(vocab, i);
            size_t n = fx_json_key_len_at(vocab, i);
            int32_t id = (int32_t)fx_json_int(fx_json_at(vocab, i));
            uint32_t off;
            flux_status st = arena_add(t, s, n, &off, err);
            if (st) return st;
            t->tok_off[id] = off, t->tok_len[id] = (uint32_t)n;
            /* a repeated text keeps its last id (as a map built in file order) */
            uint32_t slot = vocab_slot_h(t, s, n, hs[k]);
            if (t->vocab_table[slot][0] < 0) t->vocab_size++;
            t->vocab_table[slot][0] = id;
            t->vocab_table[slot][1] = (int32_t)(uint32_t)(hs[k] >> 32);
        }
    }

    for (size_t i = 0; i < na; i++) {
        const fx_json *a = fx_json_at(added, i);
        const fx_json *c = fx_json_get(a, "content");
        int32_t id = (int32_t)fx_json_int(fx_json_get(a, "id"));
        uint32_t off;
        flux_status st = arena_add(t, fx_json_str(c), fx_json_str_len(c), &off, err);
        if (st) return st;
        t->tok_off[id] = off, t->tok_len[id] = (uint32_t)fx_json_str_len(c);
        t->added[t->n_added++] = (added_token){NULL, off, (uint32_t)fx_json_str_len(c), id};
    }
    for (size_t i = 0; i < t->n_added; i++) {
        t->added[i].text = t->arena + t->added[i].off;
        t->added_first[(uint8_t)t->added[i].text[0]] = 1;
    }
    /* longest first: at one position the longest literal wins */
    for (size_t i = 1; i < t->n_added; i++) {
        added_token x = t->added[i];
        size_t j = i;
        while (j > 0 && t->added[j - 1].len < x.len) {
            t->added[j] = t->added[j - 1];
            j--;
        }
        t->added[j] = x;
    }

    for (int b = 0; b < 256; b++) {
        uint8_t u[4];
        size_t n = fx_utf8_encode(byte_level_char(b), u);
        t->byte_id[b] = vocab_find(t, (const char *)u, n);
        if (t->byte_id[b] < 0)
            return fx_fail(err, FLUX_ERR_FORMAT,
                           "%s: model.vocab lacks the byte-level symbol of byte 0x%02X (U+%04X); not a byte-level "
                           "BPE vocabulary",
                           src, b, (unsigned)byte_level_char(b));
    }
    return FLUX_OK;
}

static flux_status load_merges(fx_tokenizer *t, const fx_json *merges, const char *src, fx_err *err) {
    if (!fx_json_is_array(merges)) return fx_fail(err, FLUX_ERR_FORMAT, "%s: model.merges must be an array", src);
    size_t nm = fx_json_len(merges);
    t->merge_mask = table_size_for(nm) - 1;
    t->merges = malloc(((size_t)t->merge_mask + 1) * sizeof *t->merges);
    if (!t->merges) return fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory for merges");
    memset(t->merges, 0xFF, ((size_t)t->merge_mask + 1) * sizeof *t->merges);

    enum { MAXLEN = 256 };
    struct {
        const char *a, *b;
        size_t na, nb;
        uint64_t ha, hb, hm, key;
        int32_t im;
        char joined[2 * MAXLEN];
    } q[LOAD_BATCH];
    for (size_t r0 = 0; r0 < nm; r0 += LOAD_BATCH) {
        size_t nq = nm - r0 < LOAD_BATCH ? nm - r0 : LOAD_BATCH;
        /* 1. parse, hash, prefetch the vocab slots */
        for (size_t k = 0; k < nq; k++) {
            size_t r = r0 + k;
            const fx_json *m = fx_json_at(merges, r);
            const char *a, *b;
            size_t na, nb;
            if (fx_json_is_string(m)) { /* "a b" */
                a = fx_json_str(m);
                const char *sp = memchr(a, ' ', fx_json_str_len(m));
                if (!sp || memchr(sp + 1, ' ', fx_json_str_len(m) - (size_t)(sp + 1 - a)))
                    return fx_fail(err, FLUX_ERR_FORMAT,
                                   "%s: model.merges[%zu] \"%.80s\" is not two tokens separated by one space", src, r, a);
                na = (size_t)(sp - a), b = sp + 1, nb = fx_json_str_len(m) - na - 1;
            } else if (fx_json_len(m) == 2 && fx_json_is_string(fx_json_at(m, 0)) && fx_json_is_string(fx_json_at(m, 1))) {
                a = fx_json_str(fx_json_at(m, 0)), na = fx_json_str_len(fx_json_at(m, 0));
                b = fx_json_str(fx_json_at(m, 1)), nb = fx_json_str_len(fx_json_at(m, 1));
            } else {
                return fx_fail(err, FLUX_ERR_FORMAT, "%s: model.merges[%zu] must be \"a b\" or [\"a\", \"b\"]", src, r);
            }
            if (na > MAXLEN || nb > MAXLEN)
                return fx_fail(err, FLUX_ERR_FORMAT, "%s: model.merges[%zu]: a token longer than %d bytes", src, r, MAXLEN);
            q[k].a = a, q[k].na = na, q[k].b = b, q[k].nb = nb;
            memcpy(q[k].joined, a, na);
            memcpy(q[k].joined + na, b, nb);
            q[k].ha = hash_bytes(a, na), q[k].hb = hash_bytes(b, nb), q[k].hm = hash_bytes(q[k].joined, na + nb);
            PREFETCH(&t->vocab_table[(uint32_t)q[k].ha & t->vocab_mask]);
            PREFETCH(&t->vocab_table[(uint32_t)q[k].hb & t->vocab_mask]);
            PREFETCH(&t->vocab_table[(uint32_t)q[k].hm & t->vocab_mask]);
        }
        /* 2. resolve the ids, prefetch the merge slots */
        for (size_t k = 0; k < nq; k++) {
            int32_t ia = t->vocab_table[vocab_slot_h(t, q[k].a, q[k].na, q[k].ha)][0];
            int32_t ib = t->vocab_table[vocab_slot_h(t, q[k].b, q[k].nb, q[k].hb)][0];
            int32_t im = t->vocab_table[vocab_slot_h(t, q[k].joined, q[k].na + q[k].nb, q[k].hm)][0];
            if (ia < 0 || ib < 0 || im < 0)
                return fx_fail(err, FLUX_ERR_FORMAT, "%s: model.merges[%zu] (\"%.*s\", \"%.*s\"): %s is not in model.vocab",
                               src, r0 + k, (int)(q[k].na < 60 ? q[k].na : 60), q[k].a, (int)(q[k].nb < 60 ? q[k].nb : 60),
                               q[k].b, ia < 0 ? "the first token" : ib < 0 ? "the second token" : "the merged token");
            q[k].key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
            q[k].im = im;
            PREFETCH(&t->merges[(uint32_t)hash_pair(q[k].key) & t->merge_mask]);
        }
        /* 3. insert */
        for (size_t k = 0; k < nq; k++) {
            uint64_t key = q[k].key;
            uint32_t h = (uint32_t)hash_pair(key) & t->merge_mask;
            while (t->merges[h][0] != UINT64_MAX && t->merges[h][0] != key) h = (h + 1) & t->merge_mask;
            if (t->merges[h][0] == key) continue; /* a repeated pair keeps its first (lowest) rank */
            t->merges[h][0] = key;
            t->merges[h][1] = ((uint64_t)(r0 + k) << 32) | (uint32_t)q[k].im;
            t->n_merges++;
        }
    }
    return FLUX_OK;
}

flux_status fx_tokenizer_load_json(const char *text, size_t len, const char *display, fx_tokenizer **out,
                                   fx_err *err) {
    *out = NULL;
    const char *src = display ? display : "tokenizer.json";
    fx_json_doc *doc = fx_json_parse(text, len, err);
    if (!doc) return fx_prefix(err, "%s", src);
    const fx_json *root = fx_json_root(doc);
    fx_tokenizer *t = calloc(1, sizeof *t);
    flux_status st;
    if (!t) {
        st = fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory");
        goto done;
    }
    if (!fx_json_is_object(root)) {
        st = fx_fail(err, FLUX_ERR_FORMAT, "%s: the top level must be an object", src);
        goto done;
    }
    if ((st = check_pipeline(root, src, err))) goto done;
    const fx_json *model = fx_json_get(root, "model");
    if ((st = load_vocab(t, fx_json_get(model, "vocab"), fx_json_get(root, "added_tokens"), src, err))) goto done;
    if ((st = load_merges(t, fx_json_get(model, "merges"), src, err))) goto done;
    t->ignore_merges = fx_json_get_bool(model, "ignore_merges", 0);
    t->cache = calloc(CACHE_SLOTS, sizeof(cache_slot));
    t->window = WINDOW;
    if (!t->cache) st = fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory");
done:
    fx_json_free(doc);
    if (st) {
        fx_tokenizer_free(t);
        return st;
    }
    *out = t;
    return FLUX_OK;
}

flux_status fx_tokenizer_load(const char *path, fx_tokenizer **out, fx_err *err) {
    *out = NULL;
    uint8_t *buf;
    size_t len;
    flux_status st = fx_read_file(path, NULL, (uint64_t)1 << 30, "a tokenizer", &buf, &len, err);
    if (!st) st = fx_tokenizer_load_json((const char *)buf, len, path, out, err);
    free(buf);
    return st;
}

void fx_tokenizer_free(fx_tokenizer *t) {
    if (!t) return;
    free(t->arena);
    free(t->tok_off);
    free(t->tok_len);
    free(t->vocab_table);
    free(t->merges);
    free(t->added);
    free(t->clean);
    free(t->cps);
    free(t->nfc);
    free(t->nfc_tmp);
    free(t->cls);
    free(t->word);
    free(t->joined);
    free(t->syms);
    free(t->heap);
    free(t->chat);
    fx_ids_free(&t->prompt_ids);
    free(t->cache);
    free(t);
}

/* ------------------------------------------------------------ BPE */

static inline int merge_less(const bpe_merge *a, const bpe_merge *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(bpe_merge *h, size_t *n, bpe_merge m) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!merge_less(&m, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = m;
}

static bpe_merge heap_pop(bpe_merge *h, size_t *n) {
    bpe_merge top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && merge_less(&h[c + 1], &h[c])) c++;
        if (!merge_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static void push_pair(const fx_tokenizer *t, bpe_merge *heap, size_t *nh, int32_t pos, int32_t a, int32_t b) {
    const uint64_t *v = merge_find(t, a, b);
    if (v) heap_push(heap, nh, (bpe_merge){(uint32_t)(*v >> 32), (uint32_t)pos, (int32_t)(uint32_t)*v});
}

/* BPE over the bytes of one pre-token, with the reference's order: always
 * the pair of lowest rank, the leftmost among equals; stale queue entries
 * (a side already merged away) are skipped. */
static flux_status bpe_word(fx_tokenizer *t, const uint8_t *w, size_t n, fx_ids *out, fx_err *err) {
    if (n == 1) return ids_push(out, t->byte_id[w[0]]) ? FLUX_OK : fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory");
    if (t->ignore_merges) {
        /* a pre-token that is a whole vocab entry is emitted directly */
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            int32_t b = t->byte_id[w[i]];
            if (!grow((void **)&t->joined, &t->joined_cap, k + t->tok_len[b], 1))
                return fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory");
            memcpy(t->joined + k, tok_text(t, b), t->tok_len[b]);
            k += t->tok_len[b];
        }
        int32_t id = vocab_find(t, t->joined, k);
        if (id >= 0) return ids_push(out, id) ? FLUX_OK : fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory");
    }

    uint64_t h = 0;
    cache_slot *slot = NULL;
    if (n <= CACHE_KEY_MAX) {
        h = hash_bytes(w, n);
        slot = &t->cache[h & (CACHE_SLOTS - 1)];
        if (slot->key_len == n && slot->hash == h && !memcmp(slot->key, w, n)) {
            for (int i = 0; i < slot->n_ids; i++)
                if (!ids_push(out, slot->ids[i])) return fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory");
            return FLUX_OK;
        }
    }

    if (!grow((void **)&t->syms, &t->syms_cap, n, sizeof(bpe_symbol)) ||
        !grow((void **)&t->heap, &t->heap_cap, 3 * n, sizeof(bpe_merge)))
        return fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory for a %zu-byte word", n);
    bpe_symbol *s = t->syms;
    bpe_merge *heap = t->heap;
    size_t nh = 0;
    for (size_t i = 0; i < n; i++)
        s[i] = (bpe_symbol){t->byte_id[w[i]], (int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1, 1};
    for (size_t i = 0; i + 1 < n; i++) push_pair(t, heap, &nh, (int32_t)i, s[i].id, s[i + 1].id);

    while (nh) {
        bpe_merge m = heap_pop(heap, &nh);
        bpe_symbol *cur = &s[m.pos];
        if (!cur->alive || cur->next < 0) continue;
        bpe_symbol *right = &s[cur->next];
        const uint64_t *v = merge_find(t, cur->id, right->id);
        if (!v || (int32_t)(uint32_t)*v != m.new_id) continue; /* stale */
        cur->id = m.new_id;
        right->alive = 0;
        cur->next = right->next;
        if (cur->next >= 0) s[cur->next].prev = (int32_t)m.pos;
        if (cur->prev >= 0) push_pair(t, heap, &nh, cur->prev, s[cur->prev].id, cur->id);
        if (cur->next >= 0) push_pair(t, heap, &nh, (int32_t)m.pos, cur->id, s[cur->next].id);
    }

    size_t first = out->n;
    for (int32_t i = 0; i >= 0; i = s[i].next)
        if (!ids_push(out, s[i].id)) return fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory");
    if (slot && out->n - first <= CACHE_IDS_MAX) {
        slot->hash = h;
        slot->key_len = (uint8_t)n;
        memcpy(slot->key, w, n);
        slot->n_ids = (uint8_t)(out->n - first);
        memcpy(slot->ids, out->ids + first, (out->n - first) * sizeof(int32_t));
    }
    return FLUX_OK;
}

/* ------------------------------------------------------------ pre-tokenizer */

static inline int is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }

/* ASCII letters and U+017F (long s) for the (?i:...) contractions. */
static inline uint32_t fold(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c == 0x17F) return 's';
    return c;
}

/* End of the regex match starting at i (always > i: the alternatives
 * together match any character). cls[k] is the class of cp[k]. Sets *ws_edge
 * when a whitespace run reached n (its match could change with more text). */
static size_t match_at(const uint32_t *cp, const uint8_t *cls, size_t n, size_t i, int *ws_edge) {
    uint32_t c = cp[i];
    /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
    if (c == '\'' && i + 1 < n) {
        uint32_t d = fold(cp[i + 1]);
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return i + 2;
        if (i + 2 < n) {
            uint32_t e = fold(cp[i + 2]);
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return i + 3;
        }
    }
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    size_t j = i;
    if (cls[i] != FX_UC_LETTER && cls[i] != FX_UC_NUMBER && !is_crlf(c)) j = i + 1;
    if (j < n && cls[j] == FX_UC_LETTER) {
        j++;
        while (j < n && cls[j] == FX_UC_LETTER) j++;
        return j;
    }
    /* \p{N} */
    if (cls[i] == FX_UC_NUMBER) return i + 1;
    /* " ?[^\s\p{L}\p{N}]+[\r\n]*" */
    j = (c == ' ' && i + 1 < n && cls[i + 1] == FX_UC_OTHER) ? i + 1 : i;
    if (cls[j] == FX_UC_OTHER) {
        j++;
        while (j < n && cls[j] == FX_UC_OTHER) j++;
        while (j < n && is_crlf(cp[j])) j++;
        return j;
    }
    /* Here cp[i] is whitespace; [i, r) is the whole whitespace run. */
    size_t r = i + 1;
    while (r < n && cls[r] == FX_UC_SPACE) r++;
    *ws_edge = r == n;
    /* \s*[\r\n]+ : up to the last CR/LF of the run */
    for (size_t p = r; p > i; p--)
        if (is_crlf(cp[p - 1])) return p;
    /* \s+(?!\S) : the run, or all but its last character before a non-space */
    if (r == n) return r;
    if (r - 1 > i) return r - 1;
    /* \s+ */
    return r;
}

/* A segment (text between added tokens, valid UTF-8) in windows of about
 * WINDOW code points (t->window), so scratch memory stays bounded for any text length:
 * a window ends at an NFC boundary (the next one is normalised on its own),
 * and a regex match that looked at the window's end is carried over to be
 * matched again with the next window. */
void fx_tokenizer_set_window(fx_tokenizer *tok, size_t cps) { tok->window = cps ? cps : WINDOW; }

static flux_status encode_segment(fx_tokenizer *t, const uint8_t *s, size_t len, fx_ids *out, fx_err *err) {
    size_t pos = 0, have = 0; /* bytes consumed; code points carried over */
    while (pos < len) {
        /* decode a window after the carried-over code points */
        size_t n = have;
        for (;;) {
            if (n + 1 > t->cps_cap && !grow((void **)&t->cps, &t->cps_cap, n + t->window, sizeof(uint32_t)))
                return fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory for a %zu-byte text", len);
            if (pos == len) break;
            uint32_t c;
            size_t used = 1;
            if (s[pos] < 0x80) c = s[pos];
            else c = fx_utf8_decode(s + pos, len - pos, &used);
            /* at least as much as is carried over: a huge run costs O(n) */
            if (n - have >= t->window && n - have >= have && fx_nfc_boundary_before(c)) break;
            t->cps[n++] = c;
            pos += used;
        }
        int final = pos == len;
        size_t fresh = n - have;
        if (!fx_nfc_quick_check(t->cps + have, fresh)) {
            size_t need = FX_NFC_EXPANSION * fresh;
            if (!grow((void **)&t->nfc, &t->nfc_cap, need, sizeof(uint32_t)) ||
                !grow((void **)&t->nfc_tmp, &t->nfc_tmp_cap, need, sizeof(uint32_t)) ||
                !grow((void **)&t->cps, &t->cps_cap, have + need, sizeof(uint32_t)))
                return fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory normalising a %zu-byte text", len);
            fresh = fx_nfc_spans(t->cps + have, fresh, t->nfc, t->nfc_tmp);
            memcpy(t->cps + have, t->nfc, fresh * sizeof(uint32_t));
            n = have + fresh;
        }
        if (!grow((void **)&t->cls, &t->cls_cap, n, 1))
            return fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory for a %zu-byte text", len);
        const uint32_t *cp = t->cps;
        uint8_t *cls = t->cls;
        for (size_t i = have; i < n; i++) cls[i] = (uint8_t)fx_uc_class(cp[i]);

        size_t i = 0;
        while (i < n) {
            int ws_edge = 0;
            size_t j = match_at(cp, cls, n, i, &ws_edge);
            /* lookahead of up to 2 code points, runs that reach the end */
            if (!final && (j == n || i + 3 > n || ws_edge)) break;
            if (!grow((void **)&t->word, &t->word_cap, 4 * (j - i), 1))
                return fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory");
            size_t wl = 0;
            for (size_t k = i; k < j; k++) {
                if (cp[k] < 0x80) t->word[wl++] = (uint8_t)cp[k];
                else wl += fx_utf8_encode(cp[k], t->word + wl);
            }
            flux_status st = bpe_word(t, t->word, wl, out, err);
            if (st) return st;
            i = j;
        }
        have = n - i;
        memmove(t->cps, t->cps + i, have * sizeof(uint32_t));
        memmove(t->cls, t->cls + i, have);
    }
    return FLUX_OK;
}

/* ------------------------------------------------------------ encoding */

flux_status fx_tokenizer_encode(fx_tokenizer *t, const char *text, size_t len, fx_ids *out, fx_err *err) {
    const uint8_t *s = (const uint8_t *)text;
    if (!fx_utf8_valid(s, len)) {
        /* lenient: each ill-formed maximal subpart becomes U+FFFD */
        if (!grow((void **)&t->clean, &t->clean_cap, 3 * len, 1))
            return fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory for a %zu-byte text", len);
        size_t k = 0;
        for (size_t i = 0; i < len;) {
            size_t used;
            uint32_t c = fx_utf8_decode(s + i, len - i, &used);
            k += fx_utf8_encode(c, t->clean + k);
            i += used;
        }
        s = t->clean, len = k;
    }
    /* split on added tokens: leftmost match, longest first */
    size_t seg = 0;
    for (size_t i = 0; i < len; i++) {
        if (!t->added_first[s[i]]) continue;
        const added_token *hit = NULL;
        for (size_t a = 0; a < t->n_added; a++) {
            const added_token *at = &t->added[a];
            if (at->len <= len - i && (uint8_t)at->text[0] == s[i] && !memcmp(at->text, s + i, at->len)) {
                hit = at;
                break;
            }
        }
        if (!hit) continue;
        flux_status st = encode_segment(t, s + seg, i - seg, out, err);
        if (st) return st;
        if (!ids_push(out, hit->id)) return fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory");
        i += hit->len - 1;
        seg = i + 1;
    }
    return encode_segment(t, s + seg, len - seg, out, err);
}

flux_status fx_tokenizer_encode_chat(fx_tokenizer *t, const char *prompt, size_t len, fx_ids *out, fx_err *err) {
    static const char *const needed[] = {"<|im_start|>", "<|im_end|>", "<think>", "</think>"};
    for (size_t i = 0; i < sizeof needed / sizeof *needed; i++) {
        size_t k = 0;
        while (k < t->n_added && strcmp(t->added[k].text, needed[i])) k++;
        if (k == t->n_added)
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "tokenizer has no added token \"%s\", which the klein chat template needs", needed[i]);
    }
    size_t np = sizeof FX_CHAT_PREFIX - 1, ns = sizeof FX_CHAT_SUFFIX - 1;
    if (!grow((void **)&t->chat, &t->chat_cap, np + len + ns, 1))
        return fx_fail(err, FLUX_ERR_NOMEM, "tokenizer: out of memory for a %zu-byte prompt", len);
    memcpy(t->chat, FX_CHAT_PREFIX, np);
    memcpy(t->chat + np, prompt, len);
    memcpy(t->chat + np + len, FX_CHAT_SUFFIX, ns);
    return fx_tokenizer_encode(t, t->chat, np + len + ns, out, err);
}

flux_status fx_tokenizer_encode_prompt(fx_tokenizer *t, const char *prompt, int max_len, int32_t *ids, uint8_t *mask,
                                       int *n_real, fx_err *err) {
    if (max_len <= 0) return fx_fail(err, FLUX_ERR_INVALID_ARG, "max_len must be positive (got %d)", max_len);
    int32_t pad = -1;
    for (size_t k = 0; k < t->n_added; k++)
        if (!strcmp(t->added[k].text, "<|endoftext|>")) pad = t->added[k].id;
    if (pad < 0)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "tokenizer has no <|endoftext|> token to pad the prompt with");
    t->prompt_ids.n = 0;
    flux_status st = fx_tokenizer_encode_chat(t, prompt, strlen(prompt), &t->prompt_ids, err);
    if (st) return st;
    int n = t->prompt_ids.n < (size_t)max_len ? (int)t->prompt_ids.n : max_len; /* truncation: keep the left */
    for (int i = 0; i < max_len; i++) {
        ids[i] = i < n ? t->prompt_ids.ids[i] : pad;
        mask[i] = i < n;
    }
    *n_real = n;
    return FLUX_OK;
}
