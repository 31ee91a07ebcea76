/*
 * test_gguf_hf_reader.c — every file `flux quantize` writes, read by an
 * independent parser: Hugging Face's @huggingface/gguf (npm, pinned in
 * tools/fetch_fixtures.sh), through tests/formats/gguf_listing.mjs. That
 * script checks the tensors' byte ranges on its own (inside the file,
 * aligned, no overlaps, sizes from ggml's block sizes) and prints every
 * key/value and tensor in a canonical form; this test prints the same from
 * flux.c's parser (src/formats/gguf.c) and the two must be equal line for
 * line — so a writer bug that our own reader shares cannot pass.
 */
#include "tests/test.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/formats/gguf.h"
#include "tests/golden_cases.h"

typedef struct {
    char *p;
    size_t len, cap;
} text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (t->p && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        t->cap = (t->cap + (size_t)n + 1) * 2;
        t->p = realloc(t->p, t->cap);
        if (!t->p) abort();
    }
}

/* A string as JavaScript's JSON.stringify writes it. */
static void add_json_string(text *t, const char *s, uint64_t len) {
    add(t, "\"");
    for (uint64_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': add(t, "\\\""); break;
        case '\\': add(t, "\\\\"); break;
        case '\b': add(t, "\\b"); break;
        case '\f': add(t, "\\f"); break;
        case '\n': add(t, "\\n"); break;
        case '\r': add(t, "\\r"); break;
        case '\t': add(t, "\\t"); break;
        default:
            if (c < 0x20) add(t, "\\u%04x", c);
            else add(t, "%c", c);
        }
    }
    add(t, "\"");
}

/* The canonical listing of gguf_listing.mjs, from our parser. */
static char *our_listing(const char *path) {
    size_t size = 0;
    char *buf = fx_test_read_file(path, &size);
    if (!buf) return NULL;
    fx_err err = {0};
    fx_gguf *g = fx_gguf_parse(buf, size, path, &err);
    if (!g) {
        fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
        free(buf);
        return NULL;
    }
    text t = {0};
    for (size_t i = 0; i < g->n_kv; i++) {
        const fx_gguf_kv *kv = &g->kv[i];
        add(&t, "kv %s ", kv->key);
        switch (kv->type) {
        case FX_GGUF_ARRAY: add(&t, "array %d %llu", (int)kv->elem, (unsigned long long)kv->len); break;
        case FX_GGUF_STRING: add(&t, "8 "), add_json_string(&t, kv->str, kv->len); break;
        case FX_GGUF_F32: {
            float f = (float)kv->f;
            uint32_t bits;
            memcpy(&bits, &f, 4);
            add(&t, "6 %x", bits);
            break;
        }
        case FX_GGUF_F64: {
            uint64_t bits;
            memcpy(&bits, &kv->f, 8);
            add(&t, "12 %llx", (unsigned long long)bits);
            break;
        }
        case FX_GGUF_I8: case FX_GGUF_I16: case FX_GGUF_I32: case FX_GGUF_I64:
            add(&t, "%d %lld", (int)kv->type, (long long)kv->i);
            break;
        default: add(&t, "%d %llu", (int)kv->type, (unsigned long long)kv->u);
        }
        add(&t, "\n");
    }
    for (size_t i = 0; i < g->n_tensors; i++) {
        const fx_gguf_tensor *x = &g->tensors[i];
        add(&t, "tensor %s %u ", x->name, x->ggml_type);
        for (int d = 0; d < x->n_dims; d++) add(&t, "%s%lld", d ? "," : "", (long long)x->ne[d]);
        add(&t, " %llu\n", (unsigned long long)x->offset);
    }
    fx_gguf_free(g);
    free(buf);
    return t.p;
}

/* `flux quantize` of one component to type into the tmpdir; path or NULL. */
static const char *quantize(const char *dir, const char *component, const char *type) {
    const char *path = fx_test_tmp_path(component[0] == 't' && component[1] == 'r' ? "t.gguf" : "te.gguf");
    char cmd[4 * PATH_MAX], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' quantize -q -d '%s' --type %s --component %s -o '%s'", fx_test_flux_bin(), dir,
             type, component, path);
    int rc = fx_test_run(cmd, &out);
    if (rc) fx_test_fail(__FILE__, __LINE__, "%s: %s", cmd, out);
    free(out);
    return rc ? NULL : path;
}

/* Both listings of path equal; the reader's own checks pass. */
static void same_listing(const char *path, const char *what) {
    char cmd[2 * PATH_MAX], *theirs = NULL;
    snprintf(cmd, sizeof cmd, "node '%s' '%s' 2>&1", fx_test_path("formats/gguf_listing.mjs"), path);
    int rc = fx_test_run(cmd, &theirs);
    char *ours = our_listing(path);
    CHECK_MSG(rc == 0, "%s: @huggingface/gguf: %s", what, theirs ? theirs : "(no output)");
    if (rc == 0 && ours) {
        /* first differing line, for the message */
        const char *a = ours, *b = theirs;
        while (*a && *a == *b) a++, b++;
        while (a > ours && a[-1] != '\n') a--, b--;
        CHECK_MSG(!strcmp(ours, theirs), "%s: our parser vs @huggingface/gguf first differ at\n  ours:   %.160s\n  theirs: %.160s",
                  what, a, b);
        CHECK_MSG(strstr(theirs, "\ntensor "), "%s: no tensors listed", what);
    }
    free(ours);
    free(theirs);
}

TEST(gguf_quantize_files_read_alike_by_huggingface_gguf) {
    if (!fx_test_file_exists(fx_test_path("fixtures/npm/node_modules/@huggingface/gguf/package.json")))
        SKIP("@huggingface/gguf is missing: run tools/fetch_fixtures.sh (make fixtures; needs npm)");
    const char *dir = fx_gen_model_in_tmpdir("model", FX_GEN_ARGS_D256);
    REQUIRE(dir);
    static const char *const types[] = {"q8_0", "q6_k", "q5_k", "q5_1", "q5_0", "q4_k", "q4_1", "q4_0", "q3_k", "q2_k"};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        char what[64];
        const char *t = quantize(dir, "transformer", types[i]);
        snprintf(what, sizeof what, "transformer %s", types[i]);
        if (t) same_listing(t, what);
        const char *te = quantize(dir, "text-encoder", types[i]);
        snprintf(what, sizeof what, "text encoder %s", types[i]);
        if (te) same_listing(te, what);
    }
}
