/*
 * test_gguf.c — the GGUF reader (gguf.h) and GGUF files behind the weight
 * sets (weight_set.h): a file built field by field here is read back
 * exactly (key/values, shapes reversed to PyTorch order, dtypes, data,
 * version 2 and 3); the writer's files read back; and every malformed
 * header of the format reference's check list fails with FLUX_ERR_FORMAT
 * and a message naming the file and the key or tensor, never a crash —
 * also for every truncation of a valid header.
 */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>

#include "src/formats/gguf.h"
#include "src/formats/gguf_write.h"
#include "src/formats/weight_set.h"

/* ggml.h's type ids, written out here so the dtype table is checked against them. */
enum { GGML_F32 = 0, GGML_F16 = 1, GGML_Q8_0 = 8, GGML_Q4_K = 12, GGML_IQ2_XXS = 16, GGML_I64 = 27, GGML_BF16 = 30 };

/* ------------------------------------------------------------------------ */
/* A byte builder for hand-made GGUF files                                  */
/* ------------------------------------------------------------------------ */

typedef struct gbuf {
    unsigned char *p;
    size_t n, cap;
} gbuf;

static void put(gbuf *b, const void *src, size_t len) {
    if (b->n + len > b->cap) {
        b->cap = (b->n + len) * 2 + 256;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, src, len);
    b->n += len;
}
static void u32(gbuf *b, uint32_t v) { put(b, &v, 4); }
static void u64(gbuf *b, uint64_t v) { put(b, &v, 8); }
static void str(gbuf *b, const char *s) {
    u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void pad_to(gbuf *b, size_t a) {
    while (b->n % a) put(b, "", 1);
}
static void patch_u32(gbuf *b, size_t at, uint32_t v) { memcpy(b->p + at, &v, 4); }
static void patch_u64(gbuf *b, size_t at, uint64_t v) { memcpy(b->p + at, &v, 8); }

/* Field offsets of the reference file, for targeted corruption. */
typedef struct ref_file {
    gbuf b;
    size_t version, n_tensors, n_kv;
    size_t kv_arch_type, kv_bool_value, kv_align_value, kv_array_type, kv_array_count;
    size_t t0_name_len, t0_ndims, t0_ne0, t0_ne1, t0_type, t0_offset, t1_offset, t1_name;
    size_t header_end; /* data start */
} ref_file;

/* The reference file: 5 key/values (string, bool, u32 alignment 32, an
 * array of strings, f32) and 3 tensors:
 *   "a.weight"  F32 [2, 3] (ne {3, 2})    values 0..5
 *   "b.weight"  Q8_0 [2, 64]              known blocks
 *   "c.scale"   BF16 [4]                  1, 2, 3, 4 */
static ref_file make_ref(void) {
    ref_file r = {0};
    gbuf *b = &r.b;
    put(b, "GGUF", 4);
    r.version = b->n, u32(b, 3);
    r.n_tensors = b->n, u64(b, 3);
    r.n_kv = b->n, u64(b, 5);
    str(b, "general.architecture"), r.kv_arch_type = b->n, u32(b, FX_GGUF_STRING), str(b, "flux");
    str(b, "test.flag"), u32(b, FX_GGUF_BOOL), r.kv_bool_value = b->n, put(b, "\1", 1);
    str(b, "general.alignment"), u32(b, FX_GGUF_U32), r.kv_align_value = b->n, u32(b, 32);
    str(b, "tokenizer.tokens"), u32(b, FX_GGUF_ARRAY), r.kv_array_type = b->n, u32(b, FX_GGUF_STRING);
    r.kv_array_count = b->n, u64(b, 3), str(b, "x"), str(b, "yy"), str(b, "");
    str(b, "test.eps"), u32(b, FX_GGUF_F32);
    float eps = 1e-6f;
    put(b, &eps, 4);
    /* tensors */
    r.t0_name_len = b->n, str(b, "a.weight");
    r.t0_ndims = b->n, u32(b, 2);
    r.t0_ne0 = b->n, u64(b, 3);
    r.t0_ne1 = b->n, u64(b, 2);
    r.t0_type = b->n, u32(b, GGML_F32);
    r.t0_offset = b->n, u64(b, 0);
    r.t1_name = b->n, str(b, "b.weight"), u32(b, 2), u64(b, 64), u64(b, 2), u32(b, GGML_Q8_0);
    r.t1_offset = b->n, u64(b, 32);
    str(b, "c.scale"), u32(b, 1), u64(b, 4), u32(b, GGML_BF16), u64(b, 32 + 160);
    pad_to(b, 32);
    r.header_end = b->n;
    /* data: a (24 bytes, padded to 32), b (4 blocks × 34 = 136, padded to 160), c (8) */
    for (int i = 0; i < 6; i++) {
        float v = (float)i;
        put(b, &v, 4);
    }
    pad_to(b, 32);
    for (int blk = 0; blk < 4; blk++) {
        uint16_t d = 0x3800; /* 0.5 */
        put(b, &d, 2);
        for (int j = 0; j < 32; j++) {
            int8_t q = (int8_t)(blk * 10 + j - 64);
            put(b, &q, 1);
        }
    }
    pad_to(b, 32);
    uint16_t c[4] = {0x3f80, 0x4000, 0x4040, 0x4080};
    put(b, c, 8);
    return r;
}

/* Parse a copy of (p, n); expect failure with the fragments in the message. */
static void expect_bad(int line, const void *p, size_t n, const char *frag1, const char *frag2) {
    unsigned char *copy = malloc(n ? n : 1);
    memcpy(copy, p, n);
    fx_err err = {0};
    fx_tensor_file *f = fx_tensor_file_open_memory(copy, n, "bad.gguf", &err);
    if (f) {
        fx_test_fail(__FILE__, line, "opened a malformed file (expected '%s')", frag1);
        fx_tensor_file_close(f);
    } else {
        if (err.code != FLUX_ERR_FORMAT) fx_test_fail(__FILE__, line, "code %d, message %s", err.code, err.msg);
        if (!strstr(err.msg, "bad.gguf")) fx_test_fail(__FILE__, line, "message does not name the file: %s", err.msg);
        if (frag1 && !strstr(err.msg, frag1)) fx_test_fail(__FILE__, line, "message lacks '%s': %s", frag1, err.msg);
        if (frag2 && !strstr(err.msg, frag2)) fx_test_fail(__FILE__, line, "message lacks '%s': %s", frag2, err.msg);
    }
    free(copy);
}
#define EXPECT_BAD(p, n, a, b) expect_bad(__LINE__, p, n, a, b)

/* ------------------------------------------------------------------------ */
/* Reading                                                                  */
/* ------------------------------------------------------------------------ */

TEST(gguf_reads_a_hand_built_file) {
    ref_file r = make_ref();
    for (int version = 2; version <= 3; version++) {
        patch_u32(&r.b, r.version, (uint32_t)version);
        fx_err err = {0};
        fx_tensor_file *f = fx_tensor_file_open_memory(r.b.p, r.b.n, "ref.gguf", &err);
        REQUIRE_MSG(f, "%s", err.msg);
        const fx_gguf *g = fx_tensor_file_gguf(f);
        REQUIRE(g);
        CHECK_EQ_INT(g->version, version);
        CHECK_EQ_INT(g->data_start, r.header_end);
        CHECK_EQ_INT(g->n_kv, 5);
        const char *s = NULL;
        CHECK(!fx_gguf_get_str(g, "general.architecture", &s) && !strcmp(s, "flux"));
        CHECK(!strcmp(fx_tensor_file_metadata(f, "general.architecture"), "flux"));
        uint64_t u = 0;
        CHECK(!fx_gguf_get_uint(g, "general.alignment", &u) && u == 32);
        CHECK(fx_gguf_get_uint(g, "test.flag", &u) == -1); /* a bool is not an integer */
        const fx_gguf_kv *arr = fx_gguf_find(g, "tokenizer.tokens");
        CHECK(arr && arr->type == FX_GGUF_ARRAY && arr->elem == FX_GGUF_STRING && arr->len == 3);
        double e = 0;
        CHECK(!fx_gguf_get_float(g, "test.eps", &e) && (float)e == 1e-6f);
        REQUIRE(fx_tensor_file_count(f) == 3);
        const fx_tensor *a = fx_tensor_file_find(f, "a.weight"), *b = fx_tensor_file_find(f, "b.weight"), *c = fx_tensor_file_find(f, "c.scale");
        REQUIRE(a && b && c);
        CHECK(a->dtype == FX_DTYPE_F32 && a->shape.ndim == 2 && a->shape.d[0] == 2 && a->shape.d[1] == 3);
        CHECK(b->dtype == FX_DTYPE_Q8_0 && b->shape.d[0] == 2 && b->shape.d[1] == 64 && b->nbytes == 136);
        CHECK(c->dtype == FX_DTYPE_BF16 && c->shape.ndim == 1 && c->shape.d[0] == 4);
        float v[128];
        fx_tensor_convert_f32(fx_tensor_data(a), a->dtype, 6, v);
        for (int i = 0; i < 6; i++) CHECK(v[i] == (float)i);
        fx_tensor_convert_f32(fx_tensor_data(b), b->dtype, 128, v);
        for (int i = 0; i < 128; i++) CHECK(v[i] == 0.5f * (float)((i / 32) * 10 + i % 32 - 64));
        fx_tensor_convert_f32(fx_tensor_data(c), c->dtype, 4, v);
        CHECK(v[0] == 1 && v[1] == 2 && v[2] == 3 && v[3] == 4);
        fx_tensor_file_close(f);
    }
    free(r.b.p);
}

/* The same file through a weight set on disk: mapped and read into RAM,
 * lazily loaded, dropped; fx_weight views of block types. */
TEST(gguf_weight_set_from_disk) {
    ref_file r = make_ref();
    const char *path = fx_test_tmp_path("ref.gguf");
    REQUIRE(fx_test_write_file(path, r.b.p, r.b.n) == 0);
    for (int mode = -1; mode <= 1; mode++) {
        fx_err err = {0};
        fx_wset *s = fx_wset_open(path, "ref.gguf", mode, &err);
        REQUIRE_MSG(s, "%s", err.msg);
        CHECK(fx_wset_data_loaded(s) == (mode >= 0));
        if (mode < 0) REQUIRE(fx_wset_load_data(s, 1, &err) == FLUX_OK);
        fx_weight w;
        REQUIRE_MSG(fx_wset_linear(s, "b.weight", 2, 64, &w, &err) == FLUX_OK, "%s", err.msg);
        CHECK(w.dtype == FX_DTYPE_Q8_0 && w.n == 2 && w.k == 64 && w.ld == 64);
        fx_weight row1;
        REQUIRE(fx_wset_linear_rows(s, "b.weight", 2, 64, 1, 1, &row1, &err) == FLUX_OK);
        CHECK((const char *)row1.data - (const char *)w.data == 68);
        float *v = NULL;
        int64_t n = 0;
        REQUIRE(fx_wset_f32(s, "c.scale", &FX_SHAPE(4), &v, &n, &err) == FLUX_OK);
        CHECK(n == 4 && v[3] == 4.0f);
        free(v);
        CHECK(fx_wset_check_weight(s, "a.weight", &FX_SHAPE(2, 3), &err) == FLUX_OK);
        CHECK(fx_wset_check_weight(s, "a.weight", &FX_SHAPE(3, 2), &err) == FLUX_ERR_MODEL);
        CHECK_MSG(strstr(err.msg, "ref.gguf: tensor 'a.weight' has shape [2, 3], expected [3, 2]"), "%s", err.msg);
        fx_wset_drop_data(s);
        CHECK(!fx_wset_data_loaded(s));
        fx_wset_close(s);
    }
    free(r.b.p);
}

/* Files from gguf_write.h read back with the same tensors and values. */
TEST(gguf_writer_round_trip) {
    fx_gguf_writer *w = fx_gguf_writer_new();
    REQUIRE(w);
    CHECK(fx_gguf_writer_str(w, "general.architecture", "qwen3") == 0);
    CHECK(fx_gguf_writer_u32(w, "qwen3.block_count", 36) == 0);
    CHECK(fx_gguf_writer_f32(w, "qwen3.rope.freq_base", 1e6f) == 0);
    static const fx_dtype types[] = {FX_DTYPE_F32, FX_DTYPE_BF16, FX_DTYPE_F16, FX_DTYPE_Q8_0, FX_DTYPE_Q4_K,
                                     FX_DTYPE_Q6_K, FX_DTYPE_Q5_1, FX_DTYPE_IQ4_NL};
    const int nt = (int)(sizeof types / sizeof *types);
    for (int i = 0; i < nt; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d.weight", i);
        CHECK(fx_gguf_writer_tensor(w, name, 2, (int64_t[]){3, 256}, types[i]) == i);
    }
    CHECK(fx_gguf_writer_tensor(w, "bad", 2, (int64_t[]){3, 100}, FX_DTYPE_Q4_K) < 0); /* not whole blocks */
    CHECK(fx_gguf_writer_tensor(w, "bad", 0, (int64_t[]){1}, FX_DTYPE_F32) < 0);
    uint64_t size = fx_gguf_writer_file_size(w);
    unsigned char *img = calloc(1, (size_t)size);
    fx_gguf_writer_header(w, img);
    fx_test_rng r;
    fx_test_rng_seed(&r, 1);
    for (int i = 0; i < nt; i++) /* any bytes are valid block data */
        for (uint64_t k = 0; k < fx_gguf_writer_nbytes(w, i); k++)
            img[fx_gguf_writer_offset(w, i) + k] = (unsigned char)fx_test_rng_u64(&r);
    fx_err err = {0};
    fx_tensor_file *f = fx_tensor_file_open_memory(img, (size_t)size, "w.gguf", &err);
    REQUIRE_MSG(f, "%s", err.msg);
    const fx_gguf *g = fx_tensor_file_gguf(f);
    uint64_t u;
    double d;
    CHECK(!fx_gguf_get_uint(g, "qwen3.block_count", &u) && u == 36);
    CHECK(!fx_gguf_get_float(g, "qwen3.rope.freq_base", &d) && d == 1e6);
    for (int i = 0; i < nt; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d.weight", i);
        const fx_tensor *t = fx_tensor_file_find(f, name);
        REQUIRE(t);
        CHECK(t->dtype == types[i] && fx_dtype_is_weight(t->dtype));
        CHECK(t->shape.d[0] == 3 && t->shape.d[1] == 256);
        CHECK((const unsigned char *)fx_tensor_data(t) == img + fx_gguf_writer_offset(w, i));
        CHECK((uint64_t)t->nbytes == fx_gguf_writer_nbytes(w, i));
        CHECK(fx_gguf_writer_offset(w, i) % 32 == 0);
    }
    fx_tensor_file_close(f);
    free(img);
    fx_gguf_writer_free(w);
}

/* ------------------------------------------------------------------------ */
/* Hostile headers                                                          */
/* ------------------------------------------------------------------------ */

TEST(gguf_rejects_bad_container) {
    ref_file r = make_ref();
    gbuf *b = &r.b;
    unsigned char *p = b->p;
    EXPECT_BAD(p, 20, "shorter than the 24-byte GGUF header", NULL);
    memcpy(p, "GGUG", 4);
    EXPECT_BAD(p, b->n, NULL, NULL); /* not a GGUF: the safetensors reader's error */
    memcpy(p, "GGUF", 4);
    patch_u32(b, r.version, 1);
    EXPECT_BAD(p, b->n, "version 1", NULL);
    patch_u32(b, r.version, 4);
    EXPECT_BAD(p, b->n, "unsupported version 4", NULL);
    patch_u32(b, r.version, 0x03000000u);
    EXPECT_BAD(p, b->n, "big-endian", NULL);
    patch_u32(b, r.version, 3);
    /* counts that cannot fit: no allocation of 2^60 entries */
    patch_u64(b, r.n_tensors, 1ull << 60);
    EXPECT_BAD(p, b->n, "tensors cannot fit", NULL);
    patch_u64(b, r.n_tensors, 3);
    patch_u64(b, r.n_kv, UINT64_MAX);
    EXPECT_BAD(p, b->n, "key/value pairs cannot fit", NULL);
    patch_u64(b, r.n_kv, 5);
    /* every truncation of the header and of the data section */
    for (size_t n = 0; n < b->n; n++) expect_bad(__LINE__, p, n, NULL, NULL);
    free(r.b.p);
}

TEST(gguf_rejects_bad_key_values) {
    ref_file r = make_ref();
    gbuf *b = &r.b;
    unsigned char *p = b->p;
    patch_u32(b, r.kv_arch_type, 13);
    EXPECT_BAD(p, b->n, "key 'general.architecture'", "unknown value type 13");
    patch_u32(b, r.kv_arch_type, FX_GGUF_STRING);
    p[r.kv_bool_value] = 2;
    EXPECT_BAD(p, b->n, "key 'test.flag'", "bool value 2");
    p[r.kv_bool_value] = 1;
    patch_u32(b, r.kv_align_value, 48);
    EXPECT_BAD(p, b->n, "general.alignment 48 is not a power of two", NULL);
    patch_u32(b, r.kv_align_value, 0);
    EXPECT_BAD(p, b->n, "general.alignment 0", NULL);
    patch_u32(b, r.kv_align_value, 32);
    patch_u32(b, r.kv_array_type, FX_GGUF_ARRAY);
    EXPECT_BAD(p, b->n, "key 'tokenizer.tokens'", "arrays of arrays");
    patch_u32(b, r.kv_array_type, 77);
    EXPECT_BAD(p, b->n, "unknown array element type 77", NULL);
    patch_u32(b, r.kv_array_type, FX_GGUF_STRING);
    patch_u64(b, r.kv_array_count, 1ull << 40);
    EXPECT_BAD(p, b->n, "key 'tokenizer.tokens'", "at most 2^30");
    patch_u64(b, r.kv_array_count, 1ull << 29); /* within the cap, but far more than the file holds */
    EXPECT_BAD(p, b->n, "cannot fit", NULL);
    patch_u64(b, r.kv_array_count, 3);
    /* a key string longer than the file */
    size_t key0 = 24;
    patch_u64(b, key0, 1ull << 20);
    EXPECT_BAD(p, b->n, "file ends inside key", NULL);
    patch_u64(b, key0, 0);
    EXPECT_BAD(p, b->n, "empty key", NULL);
    patch_u64(b, key0, strlen("general.architecture"));
    p[key0 + 8 + 3] = 0;
    EXPECT_BAD(p, b->n, "contains a NUL byte", NULL);
    p[key0 + 8 + 3] = 'e';
    /* duplicate key: rename test.flag to general.architecture (same length? no: build one) */
    gbuf d = {0};
    put(&d, "GGUF", 4), u32(&d, 3), u64(&d, 0), u64(&d, 2);
    str(&d, "k"), u32(&d, FX_GGUF_U8), put(&d, "\1", 1);
    str(&d, "k"), u32(&d, FX_GGUF_U8), put(&d, "\2", 1);
    EXPECT_BAD(d.p, d.n, "duplicate key 'k'", NULL);
    free(d.p);
    /* general.alignment of the wrong type */
    gbuf a = {0};
    put(&a, "GGUF", 4), u32(&a, 3), u64(&a, 0), u64(&a, 1);
    str(&a, "general.alignment"), u32(&a, FX_GGUF_U64), u64(&a, 32);
    EXPECT_BAD(a.p, a.n, "general.alignment has type u64", NULL);
    free(a.p);
    free(r.b.p);
}

TEST(gguf_rejects_bad_tensors) {
    ref_file r = make_ref();
    gbuf *b = &r.b;
    unsigned char *p = b->p;
    patch_u32(b, r.t0_ndims, 5);
    EXPECT_BAD(p, b->n, "tensor 'a.weight'", "5 dimensions");
    patch_u32(b, r.t0_ndims, 0);
    EXPECT_BAD(p, b->n, "tensor 'a.weight'", "0 dimensions");
    patch_u32(b, r.t0_ndims, 2);
    patch_u64(b, r.t0_ne0, 1ull << 63);
    EXPECT_BAD(p, b->n, "tensor 'a.weight'", "negative as a signed size");
    patch_u64(b, r.t0_ne0, 1ull << 40), patch_u64(b, r.t0_ne1, 1ull << 40);
    EXPECT_BAD(p, b->n, "tensor 'a.weight'", "element count overflows");
    patch_u64(b, r.t0_ne0, 1ull << 61), patch_u64(b, r.t0_ne1, 1);
    EXPECT_BAD(p, b->n, "tensor 'a.weight'", "byte size overflows");
    patch_u64(b, r.t0_ne0, 1ull << 30);
    EXPECT_BAD(p, b->n, "tensor 'a.weight'", "run past the end of the data section");
    patch_u64(b, r.t0_ne0, 3), patch_u64(b, r.t0_ne1, 2);
    patch_u32(b, r.t0_type, 99);
    EXPECT_BAD(p, b->n, "tensor 'a.weight'", "unknown ggml type id 99");
    patch_u32(b, r.t0_type, 4); /* retired Q4_2 */
    EXPECT_BAD(p, b->n, "tensor 'a.weight'", "unknown ggml type id 4");
    patch_u32(b, r.t0_type, GGML_IQ2_XXS); /* a type without kernels is sized like any other */
    EXPECT_BAD(p, b->n, "tensor 'a.weight'", "not a multiple of the IQ2_XXS block (256)");
    patch_u32(b, r.t0_type, GGML_Q4_K); /* ne[0] = 3 is not a multiple of 256 */
    EXPECT_BAD(p, b->n, "tensor 'a.weight'", "not a multiple of the Q4_K block (256)");
    patch_u32(b, r.t0_type, GGML_F32);
    patch_u64(b, r.t0_offset, 8);
    EXPECT_BAD(p, b->n, "tensor 'a.weight'", "offset 8 is not a multiple of the alignment 32");
    patch_u64(b, r.t0_offset, UINT64_MAX - 31);
    EXPECT_BAD(p, b->n, "tensor 'a.weight'", "run past the end");
    patch_u64(b, r.t0_offset, 32); /* onto b.weight */
    EXPECT_BAD(p, b->n, "overlaps tensor", NULL);
    patch_u64(b, r.t0_offset, 0);
    patch_u64(b, r.t1_offset, 0); /* b.weight onto a.weight */
    EXPECT_BAD(p, b->n, "overlaps tensor", NULL);
    patch_u64(b, r.t1_offset, 32);
    /* duplicate tensor name: b.weight renamed a.weight (same length) */
    memcpy(p + r.t1_name + 8, "a", 1);
    EXPECT_BAD(p, b->n, "duplicate tensor name 'a.weight'", NULL);
    memcpy(p + r.t1_name + 8, "b", 1);
    patch_u64(b, r.t0_name_len, 0);
    EXPECT_BAD(p, b->n, "empty tensor name", NULL);
    patch_u64(b, r.t0_name_len, 8);
    /* still valid after all the restores */
    fx_err err = {0};
    fx_tensor_file *f = fx_tensor_file_open_memory(p, b->n, "ok.gguf", &err);
    CHECK_MSG(f != NULL, "%s", err.msg);
    fx_tensor_file_close(f);
    free(r.b.p);
}

/* Non-weight GGUF types are listed but refused as weights, also block
 * types without kernels (issue 24.3: such a tensor fails only when read,
 * naming file, tensor and type); names longer than the spec's 64 bytes
 * (ComfyUI-GGUF allows 127) are read. */
TEST(gguf_listed_types_and_long_names) {
    gbuf b = {0};
    char longname[200];
    memset(longname, 'n', 150);
    strcpy(longname + 150, ".weight");
    put(&b, "GGUF", 4), u32(&b, 3), u64(&b, 3), u64(&b, 0);
    str(&b, "steps"), u32(&b, 1), u64(&b, 1), u32(&b, GGML_I64), u64(&b, 0);
    str(&b, longname), u32(&b, 1), u64(&b, 2), u32(&b, GGML_F16), u64(&b, 32);
    str(&b, "iq2.weight"), u32(&b, 2), u64(&b, 256), u64(&b, 2), u32(&b, GGML_IQ2_XXS), u64(&b, 64);
    pad_to(&b, 32);
    for (int i = 0; i < 64 + 2 * 66; i++) put(&b, "\0", 1);
    fx_err err = {0};
    fx_wset *s = fx_wset_open_memory(b.p, b.n, "t.gguf", 0, &err);
    REQUIRE_MSG(s, "%s", err.msg);
    const fx_tensor *t = fx_wset_find(s, "steps");
    CHECK(t && t->dtype == FX_DTYPE_I64);
    CHECK(fx_wset_check_weight(s, "steps", NULL, &err) == FLUX_ERR_MODEL);
    CHECK(fx_wset_find(s, longname) != NULL);
    t = fx_wset_find(s, "iq2.weight");
    CHECK(t && t->dtype == FX_DTYPE_IQ2_XXS && t->nbytes == 2 * 66 && t->shape.ndim == 2 && t->shape.d[0] == 2 &&
          t->shape.d[1] == 256);
    fx_weight w;
    CHECK(fx_wset_linear(s, "iq2.weight", 2, 256, &w, &err) == FLUX_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "t.gguf: tensor 'iq2.weight' has dtype IQ2_XXS, which flux.c cannot decode"), "%s",
              err.msg);
    fx_wset_close(s);
    free(b.p);
}
