/*
 * bench_tokenizer.c — the `tokenizer` command: tokenizer.json load time and
 * encoding throughput of the Qwen3 byte-level BPE (single thread).
 *
 *   flux-bench tokenizer [--tokenizer PATH] [--text FILE] [--mb N]
 *
 * Without --text the input is a deterministic mixed text of N MB (default
 * 8): prompt-like English (most of it), accented and decomposed Latin,
 * Cyrillic, Greek, Arabic, CJK, emoji, digits, punctuation runs, code and
 * whitespace runs. Three numbers: load (file read + JSON parse + tables;
 * the JSON parse alone shown beside it), raw encoding MB/s and tokens/s,
 * and klein prompts encoded to 512 ids + mask per second.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "src/base/json.h"
#include "src/text/tokenizer.h"

typedef struct tok_bench {
    const char *path;
    char *json;
    size_t json_len;
    fx_tokenizer *tok;
    const char *text;
    size_t text_len;
    size_t n_ids;
    const char *const *prompts;
    int n_prompts;
    int failed;
} tok_bench;

static void run_parse(void *arg) {
    tok_bench *b = arg;
    fx_err err = {0};
    fx_json_doc *d = fx_json_parse(b->json, b->json_len, &err);
    if (!d) b->failed = 1;
    fx_json_free(d);
}

static void run_load(void *arg) {
    tok_bench *b = arg;
    fx_err err = {0};
    fx_tokenizer *t = NULL;
    if (fx_tokenizer_load(b->path, &t, &err)) b->failed = 1;
    fx_tokenizer_free(t);
}

static void run_encode(void *arg) {
    tok_bench *b = arg;
    fx_err err = {0};
    fx_ids ids = {0};
    if (fx_tokenizer_encode(b->tok, b->text, b->text_len, &ids, &err)) b->failed = 1;
    b->n_ids = ids.n;
    fx_ids_free(&ids);
}

static void run_prompts(void *arg) {
    tok_bench *b = arg;
    fx_err err = {0};
    int32_t ids[512];
    uint8_t mask[512];
    int n;
    for (int i = 0; i < b->n_prompts; i++)
        if (fx_tokenizer_encode_prompt(b->tok, b->prompts[i], 512, ids, mask, &n, &err)) b->failed = 1;
}

/* ------------------------------------------------------------------ text */

static const char *const WORDS[] = {
    "a", "the", "cat", "dog", "on", "of", "in", "with", "and", "portrait", "woman", "man", "city", "street", "night",
    "light", "photo", "painting", "cinematic", "dramatic", "lighting", "sunset", "mountain", "lake", "forest", "river",
    "castle", "dragon", "robot", "astronaut", "galaxy", "ancient", "futuristic", "cyberpunk", "neon", "glowing",
    "detailed", "intricate", "masterpiece", "quality", "realistic", "bokeh", "lens", "macro", "studio", "shadow",
    "reflection", "water", "glass", "metal", "wooden", "table", "red", "apple", "skateboard", "wearing", "holding",
    "standing", "beautiful", "mysterious", "colorful", "vintage", "illustration", "watercolor", "It's", "don't",
    "they're", "we'll", "I've", "Oklahoma", "Tokyo", "McDonald's", "iPhone", "JavaScript", "DSLR", "HDR"};
static const char *const EXTRAS[] = {
    "Le café près de l'église, très animé à midi.", "Übermäßig große Straßenbahnhaltestelle.",
    "Cafe\xCC\x81 na\xC3\xAFve \xE2\x80\x94 re\xCC\x81sume\xCC\x81", /* decomposed accents: the NFC path */
    "\xD0\x9A\xD0\xBE\xD1\x82 \xD1\x81\xD0\xB8\xD0\xB4\xD0\xB8\xD1\x82 \xD0\xBD\xD0\xB0 \xD0\xBA\xD0\xBE\xD0\xB2\xD1\x80\xD0\xB5.",
    "\xCE\x93\xCE\xAC\xCF\x84\xCE\xB1 \xCF\x83\xCF\x84\xCE\xBF \xCE\xB2\xCE\xBF\xCF\x85\xCE\xBD\xCF\x8C.",
    "\xD8\xA7\xD9\x84\xD9\x82\xD8\xB7\xD8\xA9 \xD8\xB9\xD9\x84\xD9\x89 \xD8\xA7\xD9\x84\xD8\xB3\xD8\xAC\xD8\xA7\xD8\xAF\xD8\xA9",
    "\xE4\xB8\x80\xE5\x8F\xAA\xE7\x8C\xAB\xE5\x9D\x90\xE5\x9C\xA8\xE6\xBB\x91\xE6\x9D\xBF\xE4\xB8\x8A\xEF\xBC\x8C\xE9\x98\xB3\xE5\x85\x89\xE6\x98\x8E\xE5\xAA\x9A\xE3\x80\x82",
    "\xE6\x9D\xB1\xE4\xBA\xAC\xE3\x82\xBF\xE3\x83\xAF\xE3\x83\xBC\xE3\x81\xAE\xE5\xA4\x9C\xE6\x99\xAF",
    "\xF0\x9F\x90\x88 \xF0\x9F\x9B\xB9 \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 \xE2\x9C\xA8",
    "(masterpiece:1.2), (best quality:1.1), [detailed]", "--ar 16:9 --seed 1234567 --steps 50",
    "for (int i = 0; i < n; i++) { sum += x[i] * w[i]; }", "https://example.com/gallery?id=42&page=3",
    "2024-05-17 12:34:56.789", "!!!???...", "\n\n", "    ", "\t", "\r\n"};

static char *make_text(size_t bytes) {
    char *t = malloc(bytes + 256);
    if (!t) return NULL;
    uint64_t s = 0x243F6A8885A308D3ull;
    size_t n = 0;
    while (n < bytes) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        const char *piece;
        char num[32];
        unsigned r = (unsigned)(s % 100);
        if (r < 80) piece = WORDS[(s >> 8) % (sizeof WORDS / sizeof *WORDS)];
        else if (r < 92) piece = EXTRAS[(s >> 8) % (sizeof EXTRAS / sizeof *EXTRAS)];
        else if (r < 96) snprintf(num, sizeof num, "%u", (unsigned)(s >> 20) % 100000), piece = num;
        else piece = (r < 98) ? "," : ".";
        size_t l = strlen(piece);
        if (n + l + 1 > bytes + 255) break;
        memcpy(t + n, piece, l);
        n += l;
        t[n++] = (s >> 40) % 23 ? ' ' : '\n';
    }
    t[n] = 0;
    return t;
}

/* ------------------------------------------------------------------ command */

static int tokenizer_main(int argc, char **argv, const fx_bench_env *env) {
    int bad = 0;
    tok_bench b = {0};
    b.path = fx_bench_arg_str(argc, argv, "--tokenizer", "tests/fixtures/qwen3-tokenizer.json");
    const char *text_file = fx_bench_arg_str(argc, argv, "--text", NULL);
    int64_t mb = fx_bench_arg_int(argc, argv, "--mb", 8, &bad);
    if (bad || mb < 1 || mb > 4096) {
        fprintf(stderr, "tokenizer: --mb must be 1..4096\n");
        return 1;
    }

    FILE *f = fopen(b.path, "rb");
    if (!f) {
        fprintf(stderr, "tokenizer: cannot open %s (run `make fixtures` or pass --tokenizer)\n", b.path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long jl = ftell(f);
    fseek(f, 0, SEEK_SET);
    b.json = malloc(jl > 0 ? (size_t)jl : 1);
    b.json_len = b.json ? fread(b.json, 1, (size_t)(jl > 0 ? jl : 0), f) : 0;
    fclose(f);
    fx_err err = {0};
    if (!b.json || fx_tokenizer_load(b.path, &b.tok, &err)) {
        fprintf(stderr, "tokenizer: %s\n", err.msg);
        free(b.json);
        return 1;
    }

    char *owned = NULL;
    if (text_file) {
        FILE *tf = fopen(text_file, "rb");
        if (!tf) {
            fprintf(stderr, "tokenizer: cannot open %s\n", text_file);
            fx_tokenizer_free(b.tok);
            free(b.json);
            return 1;
        }
        fseek(tf, 0, SEEK_END);
        long tl = ftell(tf);
        fseek(tf, 0, SEEK_SET);
        owned = malloc(tl > 0 ? (size_t)tl : 1);
        b.text_len = owned ? fread(owned, 1, (size_t)(tl > 0 ? tl : 0), tf) : 0;
        fclose(tf);
    } else {
        owned = make_text((size_t)mb << 20);
        b.text_len = owned ? strlen(owned) : 0;
    }
    b.text = owned;
    static const char *const prompts[] = {
        "a cat on a skateboard",
        "My dog Rocket, who is an Akita, eating burgers at a really cool biker bar in rural Oklahoma",
        "It's 3 cats & 2 dogs (100% good) \xE2\x80\x94 don't stop!",
        ("A cinematic portrait of an astronaut standing in a neon-lit Tokyo street at night, rain reflections, "
         "bokeh, 85mm lens, dramatic lighting, ultra detailed, masterpiece"),
        "\xE4\xB8\x80\xE5\x8F\xAA\xE7\x8C\xAB\xE5\x9D\x90\xE5\x9C\xA8\xE6\xBB\x91\xE6\x9D\xBF\xE4\xB8\x8A",
    };
    b.prompts = prompts;
    b.n_prompts = 5;

    double t_parse = fx_bench_time(env, run_parse, &b);
    double t_load = fx_bench_time(env, run_load, &b);
    double t_enc = fx_bench_time(env, run_encode, &b);
    double t_prompts = fx_bench_time(env, run_prompts, &b);
    double foreign = fx_bench_last_foreign_cpu();
    if (b.failed) fprintf(stderr, "tokenizer: a run failed\n");

    double mbs = (double)b.text_len / 1e6 / t_enc;
    if (env->json) {
        printf("{\"op\":\"tokenizer\",\"json_bytes\":%zu,\"load_s\":%.6g,\"json_parse_s\":%.6g,\"vocab\":%zu,"
               "\"merges\":%zu,\"text_bytes\":%zu,\"encode_s\":%.6g,\"mb_per_s\":%.6g,\"tokens\":%zu,"
               "\"tokens_per_s\":%.6g,\"prompts_per_s\":%.6g,\"foreign_cpu_s\":%.3g}\n",
               b.json_len, t_load, t_parse, fx_tokenizer_vocab_size(b.tok), fx_tokenizer_merge_count(b.tok), b.text_len,
               t_enc, mbs, b.n_ids, (double)b.n_ids / t_enc, b.n_prompts / t_prompts, foreign);
    } else {
        printf("tokenizer load    %.1f MB tokenizer.json: %.3f s (JSON parse %.3f s), vocab %zu, merges %zu\n",
               b.json_len / 1e6, t_load, t_parse, fx_tokenizer_vocab_size(b.tok), fx_tokenizer_merge_count(b.tok));
        printf("tokenizer encode  %.1f MB %s: %.3f s = %.1f MB/s, %zu tokens = %.2f M tokens/s (1 thread)\n",
               b.text_len / 1e6, text_file ? text_file : "mixed text", t_enc, mbs, b.n_ids, b.n_ids / t_enc / 1e6);
        printf("tokenizer prompt  klein template + 512 pad/mask: %.0f prompts/s\n", b.n_prompts / t_prompts);
        if (foreign > 0.05) printf("  [LOADED: other processes used %.2f CPU-s during the runs]\n", foreign);
    }
    fx_tokenizer_free(b.tok);
    free(owned);
    free(b.json);
    return b.failed;
}

FX_BENCH_COMMAND(tokenizer, "tokenizer [--tokenizer PATH] [--text FILE] [--mb N]  load time, encode MB/s", tokenizer_main,
                 NULL)
