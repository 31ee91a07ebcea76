/*
 * fuzz_adapters.c — libFuzzer target for the life of a context's LoRA
 * adapters (src/pipeline/adapters.c: flux_lora_load / set_scale / remove /
 * clear / get_info, the slots, the rollbacks after a failed attach, and the
 * remember / restore of a model loaded again), not for the file parser
 * (fuzz_lora does that).
 *
 * The input is a program: each byte picks an operation, the next bytes its
 * arguments (below, "op codes"). The operations run on one context holding
 * the tiny golden model's transformer weights (tests/golden/model, or
 * $FUZZ_LORA_MODEL), over five valid adapters written once at start-up
 * (LoRA f32 and bf16, DoRA, LoKr, a full diff; in a temporary folder) and
 * damaged ones: a valid adapter with bytes the input overwrites, or bytes
 * of the input as a whole file. After every operation the context must
 * agree with a shadow list kept here (count, order, paths, strengths: a
 * failed call changes nothing), every string it hands out must be
 * readable, and the adapters attached to the transformer must be exactly
 * the listed ones, alive (ASan sees a freed one when they are read).
 *
 * The transformer is a stand-in (fx_dit_get, fx_dit_set_adapters): it keeps
 * the adapters it was given as the real one keeps their terms, reads all
 * of them on every call, obeys the real contract (on error nothing
 * changes) and fails an attach when the program asks, so the rollback
 * paths run. The GEMM behind LoKr products is the reference loop of
 * fuzz_gemm_ref.h. Found before it was fixed: issue 34 NEW-1 (load,
 * remove, failing load freed the removed adapter's strings again).
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_gemm_ref.h"

#include "src/dit/transformer.h"
#include "src/adapters/lora.h"
#include "src/formats/safetensors_write.h"
#include "src/model/model.h"
#include "src/pipeline/adapters.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken rule names its line (the stack of an inlined check would not). */
#define check(cond) check_at((cond), __LINE__)
static void check_at(int cond, int line) {
    if (cond) return;
    fprintf(stderr, "fuzz_adapters.c:%d: check failed\n", line);
    abort();
}

/* ------------------------------------------------------------------ the transformer stand-in */

struct fx_dit {
    const fx_lora *lora[FLUX_MAX_LORAS]; /* attached, as the real one keeps their terms */
    float strength[FLUX_MAX_LORAS];
    int n;
    int fail_in; /* > 0: the fail_in-th attach from now fails */
};
static fx_dit g_dit;

/* Every module of every attached adapter is read: a freed one is ASan's. */
static void read_attached(void) {
    for (int i = 0; i < g_dit.n; i++) {
        size_t n = fx_lora_count(g_dit.lora[i]);
        check(n > 0);
        for (size_t k = 0; k < n; k++) {
            const fx_lora_module *m = fx_lora_module_at(g_dit.lora[i], k);
            check(m->key && strlen(m->key) > 0 && m->n_pieces >= 1 && m->n_pieces <= 3);
        }
    }
}

flux_status fx_dit_get(flux_ctx *ctx, fx_dit **out) {
    ctx->transformer = &g_dit;
    *out = &g_dit;
    return FLUX_OK;
}

flux_status fx_dit_set_adapters(fx_dit *d, const struct fx_lora *const *loras, const float *strengths, int n,
                                fx_err *err) {
    check(d == &g_dit && n >= 0 && n <= FLUX_MAX_LORAS);
    read_attached(); /* the old terms are still in use until replaced */
    for (int i = 0; i < n; i++) {
        check(loras[i] && fx_lora_count(loras[i]) > 0);
        if (!isfinite(strengths[i])) return fx_fail(err, FLUX_ERR_INVALID_ARG, "stand-in: strength %g", strengths[i]);
    }
    if (n > 0 && d->fail_in > 0 && --d->fail_in == 0) /* a detach (n = 0) cannot fail in the real one */
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "stand-in transformer: this attach fails");
    for (int i = 0; i < n; i++) d->lora[i] = loras[i], d->strength[i] = strengths[i];
    d->n = n;
    read_attached();
    return FLUX_OK;
}

/* ------------------------------------------------------------------ the context and its files */

enum { N_VALID = 5, N_DAMAGED = 4 };
static char g_dir[64];
static char g_valid[N_VALID][128], g_damaged[N_DAMAGED][128], g_missing[128];
static uint8_t *g_valid_bytes[N_VALID];
static size_t g_valid_len[N_VALID];
static flux_ctx *g_ctx;

static void cleanup(void) {
    for (int i = 0; i < N_VALID; i++) unlink(g_valid[i]);
    for (int i = 0; i < N_DAMAGED; i++) unlink(g_damaged[i]);
    rmdir(g_dir);
}

static void write_file(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    check(f != NULL);
    check(fwrite(b, 1, n, f) == n || n == 0);
    check(fclose(f) == 0);
}

/* A deterministic small tensor: f32 or bf16 values of about `amp`. */
static void *values(fx_dtype dt, int64_t n, float amp, uint32_t seed) {
    void *p = calloc((size_t)n, 4);
    check(p != NULL);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        float v = amp * ((float)(seed >> 8) / (float)(1u << 24) - 0.5f);
        if (dt == FX_DTYPE_F32) ((float *)p)[i] = v;
        else {
            uint32_t bits;
            memcpy(&bits, &v, 4);
            ((uint16_t *)p)[i] = (uint16_t)(bits >> 16);
        }
    }
    return p;
}

/* The five valid adapters, in diffusers names of the golden transformer
 * (64 wide: to_q/to_k/to_v [64, 64], ff.linear_in [384, 64], proj_out
 * [128, 64]). Each must load, or the target is wrong, not the library. */
static void write_valid(int k) {
    fx_safetensors_out t[6];
    size_t n = 0;
    const int64_t d = 64;
    switch (k) {
    case 0: /* LoRA rank 2, f32, two modules */
        t[n++] = (fx_safetensors_out){"transformer.transformer_blocks.0.attn.to_q.lora_A.weight", FX_DTYPE_F32,
                                      FX_SHAPE(2, d), values(FX_DTYPE_F32, 2 * d, 0.2f, 1)};
        t[n++] = (fx_safetensors_out){"transformer.transformer_blocks.0.attn.to_q.lora_B.weight", FX_DTYPE_F32,
                                      FX_SHAPE(d, 2), values(FX_DTYPE_F32, 2 * d, 0.2f, 2)};
        t[n++] = (fx_safetensors_out){"transformer.transformer_blocks.0.attn.to_k.lora_A.weight", FX_DTYPE_F32,
                                      FX_SHAPE(2, d), values(FX_DTYPE_F32, 2 * d, 0.2f, 3)};
        t[n++] = (fx_safetensors_out){"transformer.transformer_blocks.0.attn.to_k.lora_B.weight", FX_DTYPE_F32,
                                      FX_SHAPE(d, 2), values(FX_DTYPE_F32, 2 * d, 0.2f, 4)};
        break;
    case 1: /* LoRA rank 4, bf16, on the feed-forward */
        t[n++] = (fx_safetensors_out){"transformer.transformer_blocks.1.ff.linear_in.lora_A.weight", FX_DTYPE_BF16,
                                      FX_SHAPE(4, d), values(FX_DTYPE_BF16, 4 * d, 0.2f, 5)};
        t[n++] = (fx_safetensors_out){"transformer.transformer_blocks.1.ff.linear_in.lora_B.weight", FX_DTYPE_BF16,
                                      FX_SHAPE(6 * d, 4), values(FX_DTYPE_BF16, 24 * d, 0.2f, 6)};
        break;
    case 2: /* DoRA: LoRA plus a magnitude per output row */
        t[n++] = (fx_safetensors_out){"transformer.transformer_blocks.1.attn.to_v.lora_A.weight", FX_DTYPE_F32,
                                      FX_SHAPE(2, d), values(FX_DTYPE_F32, 2 * d, 0.2f, 7)};
        t[n++] = (fx_safetensors_out){"transformer.transformer_blocks.1.attn.to_v.lora_B.weight", FX_DTYPE_F32,
                                      FX_SHAPE(d, 2), values(FX_DTYPE_F32, 2 * d, 0.2f, 8)};
        t[n++] = (fx_safetensors_out){"transformer.transformer_blocks.1.attn.to_v.lora_magnitude_vector", FX_DTYPE_F32,
                                      FX_SHAPE(d), values(FX_DTYPE_F32, d, 0.5f, 9)};
        break;
    case 3: /* LoKr: w1 [2, 2] ⊗ w2 [32, 32] */
        t[n++] = (fx_safetensors_out){"lycoris_transformer_blocks_0_attn_to_v.lokr_w1", FX_DTYPE_F32, FX_SHAPE(2, 2),
                                      values(FX_DTYPE_F32, 4, 1.0f, 10)};
        t[n++] = (fx_safetensors_out){"lycoris_transformer_blocks_0_attn_to_v.lokr_w2", FX_DTYPE_F32,
                                      FX_SHAPE(d / 2, d / 2), values(FX_DTYPE_F32, d * d / 4, 0.2f, 11)};
        break;
    default: /* a full delta */
        t[n++] = (fx_safetensors_out){"transformer.proj_out.diff", FX_DTYPE_F32, FX_SHAPE(2 * d, d),
                                      values(FX_DTYPE_F32, 2 * d * d, 0.05f, 12)};
        break;
    }
    fx_err err = {0};
    if (fx_safetensors_write(g_valid[k], t, n, NULL, 0, &err) != FLUX_OK) {
        fprintf(stderr, "fuzz_adapters: %s\n", err.msg);
        abort();
    }
    for (size_t i = 0; i < n; i++) free((void *)t[i].data);
    FILE *f = fopen(g_valid[k], "rb");
    check(f != NULL);
    fseek(f, 0, SEEK_END);
    g_valid_len[k] = (size_t)ftell(f);
    rewind(f);
    g_valid_bytes[k] = malloc(g_valid_len[k]);
    check(g_valid_bytes[k] && fread(g_valid_bytes[k], 1, g_valid_len[k], f) == g_valid_len[k]);
    fclose(f);
}

static void start(void) {
    const char *path = getenv("FUZZ_LORA_MODEL");
    fx_err err = {0};
    fx_wset *w = fx_wset_open(path ? path : "tests/golden/model/transformer/diffusion_pytorch_model.safetensors", NULL,
                              1, &err);
    if (!w) {
        fprintf(stderr, "fuzz_adapters: %s (run from the repository root or set FUZZ_LORA_MODEL)\n", err.msg);
        abort();
    }
    snprintf(g_dir, sizeof g_dir, "/tmp/fuzz_adapters.XXXXXX");
    check(mkdtemp(g_dir) != NULL);
    for (int k = 0; k < N_VALID; k++) snprintf(g_valid[k], sizeof g_valid[k], "%s/valid-%d.safetensors", g_dir, k);
    for (int k = 0; k < N_DAMAGED; k++) snprintf(g_damaged[k], sizeof g_damaged[k], "%s/damaged-%d.safetensors", g_dir, k);
    snprintf(g_missing, sizeof g_missing, "%s/missing.safetensors", g_dir);
    atexit(cleanup);
    g_ctx = calloc(1, sizeof *g_ctx);
    struct fx_model *m = calloc(1, sizeof *m);
    check(g_ctx && m);
    m->transformer_w = w;
    g_ctx->model = m;
    g_ctx->opt.use_mmap = 0; /* files are read: damaged ones are rewritten while loaded */
    g_ctx->threads = g_ctx->kc.threads = 1;
    for (int k = 0; k < N_VALID; k++) {
        write_valid(k);
        if (flux_lora_load(g_ctx, g_valid[k], 1.0f) != FLUX_OK) {
            fprintf(stderr, "fuzz_adapters: valid adapter %d does not load: %s\n", k, g_ctx->err.msg);
            abort();
        }
    }
    flux_lora_clear(g_ctx);
    check(flux_lora_count(g_ctx) == 0 && g_dit.n == 0);
}

/* ------------------------------------------------------------------ the program */

/* What the context must hold: paths and strengths, in order. */
typedef struct shadow {
    char path[FLUX_MAX_LORAS][128];
    float scale[FLUX_MAX_LORAS];
    int n;
} shadow;

typedef struct input {
    const uint8_t *p;
    size_t left;
} input;

static unsigned next(input *in) {
    if (!in->left) return 0;
    in->left--;
    return *in->p++;
}

/* 255, 254, 253: non-finite; 0: off; else (b − 128) / 16. */
static float scale_of(unsigned b) {
    return b == 255 ? NAN : b == 254 ? INFINITY : b == 253 ? -INFINITY : b == 0 ? 0.0f : ((float)b - 128) / 16;
}

/* -1 .. count + 1, and the extremes. */
static int index_of(unsigned b, int count) {
    return b == 255 ? INT_MAX : b == 254 ? INT_MIN : (int)(b % (unsigned)(count + 3)) - 1;
}

static void check_state(const shadow *s) {
    check(flux_lora_count(g_ctx) == s->n);
    check(g_dit.n == s->n);
    for (int i = 0; i < s->n; i++) {
        flux_lora_info info;
        check(flux_lora_get_info(g_ctx, i, &info) == FLUX_OK);
        check(!strcmp(info.path, s->path[i]) && info.scale == s->scale[i] && isfinite(info.scale));
        check(strlen(info.name) > 0 && info.modules > 0 && strlen(info.kinds) > 0 && strlen(info.naming) < 64);
        check(strlen(info.warning) < 4096);
        check(g_dit.strength[i] == s->scale[i]);
    }
    read_attached();
    char *tagged = NULL, *list = NULL;
    check(fx_adapters_tags(g_ctx, "p", &tagged, &list) == FLUX_OK && tagged && !strncmp(tagged, "p", 1));
    free(tagged);
    free(list);
}

static void load(shadow *s, const char *path, float scale, int may_succeed) {
    flux_status st = flux_lora_load(g_ctx, path, scale);
    if (st == FLUX_OK) {
        check(may_succeed && s->n < FLUX_MAX_LORAS && isfinite(scale));
        snprintf(s->path[s->n], sizeof s->path[s->n], "%s", path);
        s->scale[s->n++] = scale;
    } else {
        check(g_ctx->err.msg[0] != '\0');
    }
}

/* The model's files changed: its adapters are remembered, the model and
 * the adapters released, the adapters loaded again in order (load.c,
 * fx_ctx_fresh_model). Those loaded again must be a prefix of the list;
 * the rest stay remembered until flux_load forgets them. */
static void reload(shadow *s) {
    check(fx_adapters_remember(g_ctx) == FLUX_OK && g_ctx->reload.n_lora == s->n);
    if (g_ctx->transformer) fx_dit_set_adapters(g_ctx->transformer, NULL, NULL, 0, &g_ctx->err);
    g_ctx->transformer = NULL; /* fx_ctx_release_model: the transformer goes first */
    g_dit.n = 0;
    fx_adapters_free(g_ctx);
    flux_status st = fx_adapters_restore(g_ctx);
    const int back = flux_lora_count(g_ctx);
    check(back <= s->n && g_ctx->reload.n_lora == s->n - back && (st == FLUX_OK) == (back == s->n));
    for (int i = 0; i < g_ctx->reload.n_lora; i++)
        check(!strcmp(g_ctx->reload.lora_path[i], s->path[back + i]) && g_ctx->reload.lora_scale[i] == s->scale[back + i]);
    s->n = back;
    fx_adapters_forget(g_ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_ctx) start();
    shadow s = {.n = 0};
    input in = {data, size};
    g_dit.fail_in = 0;
    for (int ops = 0; in.left && ops < 200; ops++) {
        const unsigned op = next(&in) % 9;
        switch (op) {
        case 0: { /* load a valid adapter */
            const unsigned k = next(&in) % N_VALID;
            load(&s, g_valid[k], scale_of(next(&in)), 1);
            break;
        }
        case 1: { /* rescale */
            const int i = index_of(next(&in), s.n);
            const float sc = scale_of(next(&in));
            if (flux_lora_set_scale(g_ctx, i, sc) == FLUX_OK) {
                check(i >= 0 && i < s.n && isfinite(sc));
                s.scale[i] = sc;
            }
            break;
        }
        case 2: { /* remove */
            const int i = index_of(next(&in), s.n);
            if (flux_lora_remove(g_ctx, i) == FLUX_OK) {
                check(i >= 0 && i < s.n);
                memmove(&s.path[i], &s.path[i + 1], (size_t)(s.n - i - 1) * sizeof s.path[0]);
                memmove(&s.scale[i], &s.scale[i + 1], (size_t)(s.n - i - 1) * sizeof s.scale[0]);
                s.n--;
            }
            break;
        }
        case 3: /* clear */
            flux_lora_clear(g_ctx);
            s.n = 0;
            break;
        case 4: /* a load that fails: no such file, a folder, no path */
            switch (next(&in) % 3) {
            case 0: /* a full list refuses before it opens the file */
                check(flux_lora_load(g_ctx, g_missing, 1.0f) == (s.n < FLUX_MAX_LORAS ? FLUX_ERR_IO : FLUX_ERR_INVALID_ARG));
                break;
            case 1: check(flux_lora_load(g_ctx, g_dir, 1.0f) != FLUX_OK); break;
            default: check(flux_lora_load(g_ctx, "", 1.0f) == FLUX_ERR_INVALID_ARG); break;
            }
            break;
        case 5: { /* a valid adapter with some bytes overwritten */
            const unsigned k = next(&in) % N_VALID, j = next(&in) % N_DAMAGED, flips = next(&in) % 9;
            uint8_t *b = malloc(g_valid_len[k]);
            check(b != NULL);
            memcpy(b, g_valid_bytes[k], g_valid_len[k]);
            for (unsigned f = 0; f < flips; f++) {
                const unsigned hi = next(&in), lo = next(&in);
                b[((hi << 8) | lo) % g_valid_len[k]] = (uint8_t)next(&in);
            }
            write_file(g_damaged[j], b, g_valid_len[k]);
            free(b);
            load(&s, g_damaged[j], scale_of(next(&in)), 1);
            break;
        }
        case 6: { /* bytes of the input as a whole file */
            const unsigned j = next(&in) % N_DAMAGED;
            size_t n = (size_t)next(&in) * 16;
            if (n > in.left) n = in.left;
            write_file(g_damaged[j], in.p, n);
            in.p += n, in.left -= n;
            load(&s, g_damaged[j], 1.0f, 1);
            break;
        }
        case 7: /* the transformer refuses the 1st or 2nd attach from now */
            g_dit.fail_in = 1 + (int)(next(&in) % 2);
            break;
        default: /* the model is loaded again */
            reload(&s);
            break;
        }
        check_state(&s);
    }
    flux_lora_clear(g_ctx);
    fx_adapters_forget(g_ctx);
    check(flux_lora_count(g_ctx) == 0);
    return 0;
}
