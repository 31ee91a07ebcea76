/*
 * test_gguf_fixtures.c — GGUF files written by other tools (llama.cpp's
 * gguf-py, stable-diffusion.cpp; tests/formats/gguf_fixtures/README.md,
 * made by tools/gen_gguf_fixtures.py) read by our parser and weight sets:
 * every tensor of every fixture dequantizes to exactly the float32 values
 * gguf-py's own dequantizer (gguf.quants.dequantize) gives — the SHA-256 of
 * each tensor's values in F.expected/sha256.txt, and value by value for the
 * .npy tensors there (one per ggml type of the file) — and the file holds
 * what its tool writes: names, ggml types, key/values.
 */
#include "tests/test.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/npy.h"
#include "src/base/sha256.h"
#include "src/formats/gguf.h"
#include "src/formats/weight_set.h"

#define FIXTURES "formats/gguf_fixtures/"

/* ggml type names as gguf-py spells them (GGMLQuantizationType.name) */
static const char *ggml_name(uint32_t t) {
    switch (t) {
    case 0: return "F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 6: return "Q5_0";
    case 7: return "Q5_1";
    case 8: return "Q8_0";
    case 30: return "BF16";
    default: return "?";
    }
}

/* Every tensor of the fixture `file` against its .expected/ folder; the
 * number of tensors of each ggml type into counts[type] (room for 64). */
static void check_fixture(const char *file, int counts[64]) {
    char path[PATH_MAX], exp_dir[PATH_MAX], line[512];
    snprintf(path, sizeof path, "%s", fx_test_path(FIXTURES));
    size_t n0 = strlen(path);
    snprintf(path + n0, sizeof path - n0, "%s", file);
    snprintf(exp_dir, sizeof exp_dir, "%s.expected", path);
    memset(counts, 0, 64 * sizeof *counts);
    fx_err err = {0};
    fx_wset *s = fx_wset_open(path, file, 1, &err);
    REQUIRE_MSG(s, "%s", err.msg);
    char list[PATH_MAX + 16];
    snprintf(list, sizeof list, "%s/sha256.txt", exp_dir);
    FILE *f = fopen(list, "r");
    if (!f) fx_wset_close(s);
    REQUIRE_MSG(f, "%s: cannot open", list);
    size_t listed = 0, npys = 0;
    while (fgets(line, sizeof line, f)) {
        char name[256], type[32], hex[80];
        if (line[0] == '#' || sscanf(line, "%255s %31s %79s", name, type, hex) != 3) continue;
        listed++;
        const fx_tensor *t = fx_wset_find(s, name);
        const fx_gguf *g = fx_tensor_file_gguf(fx_wset_file_at(s, 0));
        const fx_gguf_tensor *gt = NULL;
        for (size_t i = 0; g && i < g->n_tensors; i++)
            if (!strcmp(g->tensors[i].name, name)) gt = &g->tensors[i];
        if (!t || !gt) {
            CHECK_MSG(0, "%s: tensor '%s' listed by the tool is not found", file, name);
            continue;
        }
        CHECK_MSG(!strcmp(ggml_name(gt->ggml_type), type), "%s: '%s' has ggml type %u, the tool wrote %s", file, name,
                  gt->ggml_type, type);
        if (gt->ggml_type < 64) counts[gt->ggml_type]++;
        float *v = NULL;
        int64_t n = 0;
        if (fx_wset_f32(s, name, NULL, &v, &n, &err)) {
            CHECK_MSG(0, "%s", err.msg);
            continue;
        }
        uint8_t digest[FX_SHA256_BYTES];
        char ours[2 * FX_SHA256_BYTES + 1];
        fx_sha256_buf(v, (size_t)n * sizeof *v, digest);
        fx_sha256_hex(digest, ours);
        CHECK_MSG(!strcmp(ours, hex), "%s: '%s' (%s): our dequantized values differ from gguf-py's", file, name, type);
        /* value by value where the tool's values are stored */
        char npy[2 * PATH_MAX];
        snprintf(npy, sizeof npy, "%s/%s.npy", exp_dir, name);
        FILE *probe = fopen(npy, "rb");
        if (probe) {
            fclose(probe);
            fx_npy a = {0};
            if (fx_npy_read(npy, &a, &err)) {
                CHECK_MSG(0, "%s", err.msg);
            } else {
                CHECK_MSG(a.dtype == FX_NPY_F32 && (int64_t)a.count == n, "%s: %s has %zu values, the tensor %lld", file,
                          npy, a.count, (long long)n);
                size_t bad = 0, first = 0;
                for (size_t i = 0; a.count == (size_t)n && i < a.count; i++)
                    if (memcmp(&v[i], &((float *)a.data)[i], 4) && !bad++) first = i;
                CHECK_MSG(!bad, "%s: '%s': %zu values differ from gguf-py's, first [%zu]: ours %.9g, theirs %.9g", file,
                          name, bad, first, v[first], ((float *)a.data)[first]);
                npys++;
            }
            fx_npy_free(&a);
        }
        free(v);
    }
    fclose(f);
    CHECK_MSG(listed == fx_wset_count(s), "%s: the tool listed %zu tensors, we see %zu", file, listed, fx_wset_count(s));
    CHECK_MSG(npys > 0, "%s: no value files in %s", file, exp_dir);
    fx_wset_close(s);
}

static const fx_gguf *open_header(const char *file, fx_wset **s) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s%s", fx_test_path(FIXTURES), file);
    fx_err err = {0};
    *s = fx_wset_open(path, file, 1, &err);
    if (!*s) {
        fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return NULL;
    }
    return fx_tensor_file_gguf(fx_wset_file_at(*s, 0));
}

TEST(gguf_fixture_comfyui_layout_dequantizes_like_gguf_py) {
    static const struct { const char *file; uint32_t qtype, ftype; } files[] = {
        {"flux2-comfy-Q8_0.gguf", 8, 7},  /* llama.cpp ftype MOSTLY_Q8_0 = 7 */
        {"flux2-comfy-Q5_0.gguf", 6, 8},  /* MOSTLY_Q5_0 = 8 */
    };
    for (size_t k = 0; k < sizeof files / sizeof *files; k++) {
        int counts[64];
        check_fixture(files[k].file, counts);
        /* convert.py + lcpp.patch: F32 norms, BF16 embedders and final layer, the rest quantized */
        CHECK_MSG(counts[0] == 12 && counts[30] == 6 && counts[files[k].qtype] == 23, "%s: F32 %d BF16 %d %s %d",
                  files[k].file, counts[0], counts[30], ggml_name(files[k].qtype), counts[files[k].qtype]);
        fx_wset *s = NULL;
        const fx_gguf *g = open_header(files[k].file, &s);
        if (!g) continue;
        const char *arch = NULL;
        uint64_t ft = 0, qv = 0;
        CHECK(!fx_gguf_get_str(g, "general.architecture", &arch) && !strcmp(arch, "flux"));
        CHECK(!fx_gguf_get_uint(g, "general.file_type", &ft) && ft == files[k].ftype);
        CHECK(!fx_gguf_get_uint(g, "general.quantization_version", &qv) && qv == 2);
        CHECK(fx_wset_find(s, "double_blocks.0.img_attn.qkv.weight") && fx_wset_find(s, "img_in.weight"));
        fx_wset_close(s);
    }
}

TEST(gguf_fixture_llama_cpp_qwen3_dequantizes_like_gguf_py) {
    int counts[64];
    check_fixture("qwen3-te-Q8_0.gguf", counts);
    /* hidden 16: only attn_output (ne[0] = 32) takes Q8_0; rows of 16 or 48
     * fall back to F16 (QuantError), norms F32 */
    CHECK_MSG(counts[8] == 28 && counts[1] == 1 + 28 * 6 && counts[0] == 1 + 28 * 4, "Q8_0 %d F16 %d F32 %d",
              counts[8], counts[1], counts[0]);
    fx_wset *s = NULL;
    const fx_gguf *g = open_header("qwen3-te-Q8_0.gguf", &s);
    REQUIRE(g);
    const char *arch = NULL;
    uint64_t u = 0;
    CHECK(!fx_gguf_get_str(g, "general.architecture", &arch) && !strcmp(arch, "qwen3"));
    CHECK(!fx_gguf_get_uint(g, "qwen3.block_count", &u) && u == 28);
    CHECK(!fx_gguf_get_uint(g, "qwen3.attention.key_length", &u) && u == 16);
    CHECK(fx_wset_find(s, "token_embd.weight") && fx_wset_find(s, "blk.27.attn_k_norm.weight"));
    fx_wset_close(s);
}

TEST(gguf_fixture_stable_diffusion_cpp_dequantizes_like_gguf_py) {
    static const struct { const char *file; uint32_t qtype; } files[] = {
        {"flux2-sdcpp-q8_0.gguf", 8},
        {"flux2-sdcpp-q4_0.gguf", 2},
    };
    for (size_t k = 0; k < sizeof files / sizeof *files; k++) {
        int counts[64];
        check_fixture(files[k].file, counts);
        /* sd.cpp keeps the source type for '.scale' norms, the embedders and the final layer */
        CHECK_MSG(counts[30] == 18 && counts[files[k].qtype] == 23, "%s: BF16 %d %s %d", files[k].file, counts[30],
                  ggml_name(files[k].qtype), counts[files[k].qtype]);
        fx_wset *s = NULL;
        const fx_gguf *g = open_header(files[k].file, &s);
        if (!g) continue;
        /* sd.cpp's names: model.diffusion_model. + BFL; no key/values at all */
        CHECK(fx_wset_find(s, "model.diffusion_model.double_blocks.0.img_attn.qkv.weight"));
        CHECK_EQ_INT(g->n_kv, 0);
        fx_wset_close(s);
    }
}
