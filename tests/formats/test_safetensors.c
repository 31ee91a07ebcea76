/* test_safetensors.c — the strict safetensors validator (malformed files built
 * here), exact F32/F16/BF16 reads, weight views, sharded weight sets. */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>

#include "src/formats/weight_set.h"

/* A safetensors image: 8-byte little-endian header length, header, data. */
static unsigned char *build(const char *header, const void *data, size_t dlen, size_t *len) {
    size_t hl = strlen(header);
    unsigned char *b = calloc(1, 8 + hl + dlen + 1);
    if (!b) return NULL;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    if (data) memcpy(b + 8 + hl, data, dlen);
    *len = 8 + hl + dlen;
    return b;
}

/* Write a file under this test's temporary folder; returns its path. */
static const char *put(const char *name, const void *bytes, size_t len) {
    static char path[4][512];
    static int k;
    char *p = path[k++ % 4];
    snprintf(p, 512, "%s/%s", fx_test_tmpdir(), name);
    if (fx_test_write_file(p, bytes, len) != 0) fx_test_fail(__FILE__, __LINE__, "cannot write %s", p);
    return p;
}

static const char *put_st(const char *name, const char *header, const void *data, size_t dlen) {
    size_t len;
    unsigned char *b = build(header, data, dlen, &len);
    const char *p = put(name, b, len);
    free(b);
    return p;
}

/* Open bytes both from a file and from memory: both must fail with code
 * and a message "bad.safetensors: ...fragment...". */
static void expect_bad_bytes(const unsigned char *bytes, size_t len, flux_status code, const char *fragment,
                             int line) {
    const char *path = put("bad.safetensors", bytes, len);
    fx_err err;
    fx_err_clear(&err);
    fx_tensor_file *f = fx_tensor_file_open(path, "bad.safetensors", 1, &err);
    if (f) {
        fx_test_fail(__FILE__, line, "file unexpectedly accepted (want '%s')", fragment);
        fx_tensor_file_close(f);
        return;
    }
    if (err.code != code) fx_test_fail(__FILE__, line, "code %s, want %s (%s)", flux_status_name(err.code),
                                       flux_status_name(code), err.msg);
    if (!strstr(err.msg, fragment)) fx_test_fail(__FILE__, line, "message '%s' lacks '%s'", err.msg, fragment);
    if (code == FLUX_ERR_FORMAT && strncmp(err.msg, "bad.safetensors: ", 17))
        fx_test_fail(__FILE__, line, "message '%s' does not start with the file name", err.msg);
    /* the in-memory validator agrees */
    fx_err_clear(&err);
    f = fx_tensor_file_open_memory(bytes, len, "bad.safetensors", &err);
    if (f) {
        fx_test_fail(__FILE__, line, "memory image unexpectedly accepted (want '%s')", fragment);
        fx_tensor_file_close(f);
    } else if (code == FLUX_ERR_FORMAT && !strstr(err.msg, fragment)) {
        fx_test_fail(__FILE__, line, "memory: message '%s' lacks '%s'", err.msg, fragment);
    }
}

static void expect_bad_header(const char *header, size_t dlen, const char *fragment, int line) {
    size_t len;
    unsigned char *b = build(header, NULL, dlen, &len);
    expect_bad_bytes(b, len, FLUX_ERR_FORMAT, fragment, line);
    free(b);
}
#define BAD_HEADER(h, dlen, frag) expect_bad_header(h, dlen, frag, __LINE__)

#define W(dtype, shape, offs) "{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":" offs "}"

TEST(safetensors_rejects_malformed_headers) {
    BAD_HEADER("[]", 0, "header is a JSON array, expected an object");
    BAD_HEADER("{\"a\":", 0, "header is not valid JSON: line 1, column 6");
    BAD_HEADER("{\"w\": 5}", 0, "tensor 'w': entry is a number, expected an object");
    BAD_HEADER("{\"w\": {\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'w': missing \"dtype\"");
    BAD_HEADER("{\"w\": {\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'w': \"dtype\" is not a string");
    BAD_HEADER("{\"w\":" W("F128", "[1]", "[0,16]") "}", 16, "tensor 'w': unknown dtype 'F128'");
    BAD_HEADER("{\"w\":" W("bf16", "[1]", "[0,2]") "}", 2, "tensor 'w': unknown dtype 'bf16'");
    BAD_HEADER("{\"w\": {\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'w': missing \"shape\"");
    BAD_HEADER("{\"w\":" W("F32", "\"2\"", "[0,8]") "}", 8, "tensor 'w': \"shape\" is not an array");
    BAD_HEADER("{\"w\":" W("F32", "[-1]", "[0,4]") "}", 4, "shape dimension 0 is not a non-negative integer");
    BAD_HEADER("{\"w\":" W("F32", "[2, 2.5]", "[0,4]") "}", 4, "shape dimension 1 is not a non-negative integer");
    BAD_HEADER("{\"w\":" W("F32", "[1, null]", "[0,4]") "}", 4, "shape dimension 1 is not a non-negative integer");
    BAD_HEADER("{\"w\":" W("F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4, "shape has 9 dimensions (at most 8");
    BAD_HEADER("{\"w\":" W("F32", "[4611686018427387904, 4]", "[0,4]") "}", 4,
               "shape [4611686018427387904, 4] × F32 overflows the byte size");
    BAD_HEADER("{\"w\":" W("BF16", "[9223372036854775807]", "[0,4]") "}", 4, "overflows the byte size");
    BAD_HEADER("{\"w\":" W("F32", "[2, 2]", "[0,8]") "}", 16,
               "tensor 'w': shape [2, 2] × F32 = 16 bytes, but data_offsets [0, 8] span 8 bytes");
    BAD_HEADER("{\"w\": {\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'w': missing \"data_offsets\"");
    BAD_HEADER("{\"w\":" W("F32", "[1]", "[0]") "}", 4, "\"data_offsets\" must be an array of two non-negative integers");
    BAD_HEADER("{\"w\":" W("F32", "[1]", "[0,4,8]") "}", 8, "\"data_offsets\" must be an array of two");
    BAD_HEADER("{\"w\":" W("F32", "[1]", "[-4,0]") "}", 4, "\"data_offsets\" must be an array of two non-negative");
    BAD_HEADER("{\"w\":" W("F32", "[1]", "[\"0\",\"4\"]") "}", 4, "\"data_offsets\" must be an array");
    BAD_HEADER("{\"w\":" W("F32", "[1]", "4") "}", 4, "\"data_offsets\" must be an array");
    BAD_HEADER("{\"w\":" W("F32", "[1]", "[0,1e30]") "}", 4, "\"data_offsets\" must be an array of two");
    BAD_HEADER("{\"w\":" W("F32", "[0]", "[8,4]") "}", 8, "tensor 'w': data_offsets [8, 4]: begin is after end");
    BAD_HEADER("{\"w\":" W("F32", "[5]", "[0,20]") "}", 16,
               "tensor 'w': data_offsets [0, 20] run past the end of the data section (16 bytes)");
    BAD_HEADER("{\"w\":" W("F32", "[0]", "[20,20]") "}", 16, "run past the end of the data section");
    BAD_HEADER("{\"a\":" W("F32", "[2]", "[0,8]") ",\"b\":" W("F32", "[2]", "[4,12]") "}", 16,
               "tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]");
    BAD_HEADER("{\"a\":" W("F32", "[2]", "[0,8]") ",\"b\":" W("F32", "[2]", "[0,8]") "}", 16, "overlap tensor");
    BAD_HEADER("{\"a\":" W("F32", "[4]", "[0,16]") ",\"b\":" W("U8", "[1]", "[15,16]") "}", 16,
               "tensor 'b': data_offsets [15, 16] overlap tensor 'a' [0, 16]");
    BAD_HEADER("{\"a\":" W("F32", "[1]", "[0,4]") ",\"a\":" W("F32", "[1]", "[4,8]") "}", 8,
               "tensor 'a': duplicate tensor name");
    BAD_HEADER("{\"__metadata__\": \"pt\"}", 0, "\"__metadata__\" is a string, expected an object of strings");
    BAD_HEADER("{\"__metadata__\": {\"format\": 1}}", 0, "\"__metadata__\" entry 'format' is a number, expected a string");
    BAD_HEADER("{\"__metadata__\": {}, \"__metadata__\": {}}", 0, "duplicate \"__metadata__\"");
    BAD_HEADER("{\"w\xFF\":" W("F32", "[1]", "[0,4]") "}", 4, "header is not valid JSON: line 1, column 4: invalid UTF-8");
    BAD_HEADER("{} x", 0, "header is not valid JSON: line 1, column 4: trailing characters");
    BAD_HEADER("{\"a\\u0000b\":" W("F32", "[1]", "[0,4]") "}", 4, "name contains a NUL character");
    BAD_HEADER("{\"w\":" W("F32", "[1]", "[0,1e400]") "}", 4, "number out of range");
    BAD_HEADER("{\"w\": {\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]", 4, "header is not valid JSON");
    char *deep = malloc(200003);
    REQUIRE(deep);
    for (int i = 0; i < 100000; i++) deep[i] = '[', deep[100000 + i] = ']';
    deep[200000] = 0;
    BAD_HEADER(deep, 0, "nesting deeper than 512 levels");
    free(deep);
}

TEST(safetensors_rejects_bad_lengths) {
    unsigned char b[64] = {0};
    expect_bad_bytes(b, 0, FLUX_ERR_FORMAT, "file is 0 bytes, shorter than the 8-byte header length", __LINE__);
    expect_bad_bytes(b, 5, FLUX_ERR_FORMAT, "file is 5 bytes, shorter than the 8-byte header length", __LINE__);
    expect_bad_bytes(b, 16, FLUX_ERR_FORMAT, "header length is 0", __LINE__);
    /* 2^63: absurd length */
    memset(b, 0, sizeof b);
    b[7] = 0x80;
    expect_bad_bytes(b, 16, FLUX_ERR_FORMAT, "header length 9223372036854775808 exceeds the 100000000-byte limit",
                     __LINE__);
    /* 100 MB + 1 */
    uint64_t n = 100000001;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(n >> (8 * i));
    expect_bad_bytes(b, 16, FLUX_ERR_FORMAT, "exceeds the 100000000-byte limit", __LINE__);
    /* length past the end of the file */
    n = 1000;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(n >> (8 * i));
    memcpy(b + 8, "{}", 2);
    expect_bad_bytes(b, 64, FLUX_ERR_FORMAT, "header length 1000 runs past the end of the file (64 bytes)", __LINE__);
    /* truncated file: header cut in the middle */
    size_t len;
    unsigned char *full = build("{\"w\":" W("F32", "[1]", "[0,4]") "}", "abcd", 4, &len);
    REQUIRE(full);
    expect_bad_bytes(full, 30, FLUX_ERR_FORMAT, "runs past the end of the file (30 bytes)", __LINE__);
    /* truncated data: offsets now run past the (shorter) data section */
    expect_bad_bytes(full, len - 2, FLUX_ERR_FORMAT, "run past the end of the data section (2 bytes)", __LINE__);
    free(full);
}

TEST(safetensors_io_errors) {
    fx_err err;
    fx_err_clear(&err);
    CHECK(fx_tensor_file_open("/nonexistent/m.safetensors", "m.safetensors", 1, &err) == NULL);
    CHECK(err.code == FLUX_ERR_IO && strstr(err.msg, "cannot open /nonexistent/m.safetensors"));
    fx_err_clear(&err);
    CHECK(fx_tensor_file_open(fx_test_tmpdir(), NULL, 1, &err) == NULL);
    CHECK_MSG(err.code == FLUX_ERR_IO && strstr(err.msg, "not a regular file"), "%s", err.msg);
    fx_err_clear(&err);
    CHECK(fx_wset_open("/nonexistent/m.safetensors", NULL, 1, &err) == NULL && err.code == FLUX_ERR_IO);
}

/* A valid file with every dtype, a scalar, an empty tensor, gaps between
 * tensors and a space-padded header. */
TEST(safetensors_accepts_all_dtypes_and_edge_shapes) {
    static const char *names[] = {"BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32",
                                  "F32", "F64", "I64", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "C64"};
    static const int sizes[] = {1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8, 1, 1, 1, 8};
    char header[4096];
    int n = snprintf(header, sizeof header, "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"\\u00e9\"}");
    int64_t off = 0;
    for (int i = 0; i < 17; i++) {
        n += snprintf(header + n, sizeof header - (size_t)n,
                      ",\"t_%s\":{\"dtype\":\"%s\",\"shape\":[3],\"data_offsets\":[%lld,%lld]}", names[i], names[i],
                      (long long)off, (long long)(off + 3 * sizes[i]));
        off += 3 * sizes[i] + 5; /* gap of 5 bytes */
    }
    n += snprintf(header + n, sizeof header - (size_t)n,
                  ",\"scalar\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[%lld,%lld]}"
                  ",\"empty\":{\"dtype\":\"BF16\",\"shape\":[0,4],\"data_offsets\":[%lld,%lld]}"
                  ",\"empty2\":{\"dtype\":\"F32\",\"shape\":[3,0],\"data_offsets\":[0,0]}}        ",
                  (long long)off, (long long)(off + 8), (long long)(off + 8), (long long)(off + 8));
    off += 8;
    unsigned char *data = calloc(1, (size_t)off);
    REQUIRE(data);
    const char *path = put_st("ok.safetensors", header, data, (size_t)off);
    free(data);
    fx_err err;
    fx_err_clear(&err);
    fx_tensor_file *f = fx_tensor_file_open(path, "ok.safetensors", 1, &err);
    REQUIRE_MSG(f, "%s", err.msg);
    CHECK_EQ_INT(fx_tensor_file_count(f), 20);
    CHECK(!strcmp(fx_tensor_file_metadata(f, "format"), "pt"));
    CHECK(!strcmp(fx_tensor_file_metadata(f, "note"), "\xC3\xA9"));
    CHECK(fx_tensor_file_metadata(f, "absent") == NULL);
    for (int i = 0; i < 17; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "t_%s", names[i]);
        const fx_tensor *t = fx_tensor_file_find(f, nm);
        REQUIRE_MSG(t, "%s missing", nm);
        CHECK(!strcmp(fx_dtype_name(t->dtype), names[i]));
        CHECK_EQ_INT(t->nbytes, 3 * sizes[i]);
        CHECK_EQ_INT(fx_dtype_size(t->dtype), sizes[i]);
        CHECK(t->file == f && fx_tensor_data(t) != NULL);
    }
    const fx_tensor *s = fx_tensor_file_find(f, "scalar");
    REQUIRE(s);
    CHECK(s->shape.ndim == 0 && s->nbytes == 8);
    CHECK(fx_tensor_file_find(f, "empty")->nbytes == 0);
    CHECK(fx_tensor_file_find(f, "nothing") == NULL);
    /* header order is kept */
    CHECK(!strcmp(fx_tensor_file_tensor_at(f, 0)->name, "t_BOOL"));
    CHECK(!strcmp(fx_tensor_file_tensor_at(f, 19)->name, "empty2"));
    fx_tensor_file_close(f);
}

/* Reference decode of an IEEE half, written independently of the library. */
static float ref_f16(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m + 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* All 65536 F16 and BF16 values and special F32 values read back exactly,
 * through mmap and through RAM, including a tensor at a misaligned offset. */
TEST(safetensors_exact_f32_f16_bf16_reads) {
    const size_t n16 = 65536;
    static const uint32_t f32_bits[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x00800000u,
                                        0x7F7FFFFFu, 0x7F800000u, 0xFF800000u, 0x7FC00001u, 0xFFA00000u,
                                        0x3F800000u, 0xC0490FDBu};
    const size_t n32 = sizeof f32_bits / sizeof f32_bits[0];
    /* layout: f16 [0, 131072), bf16 [131072, 262144), pad 1, f32 at 262145 (misaligned), bf16 at 262145+48 */
    size_t dlen = 2 * n16 * 2 + 1 + n32 * 4 + 2 * 3;
    unsigned char *data = calloc(1, dlen);
    REQUIRE(data);
    for (size_t i = 0; i < n16; i++) {
        data[2 * i] = (unsigned char)i, data[2 * i + 1] = (unsigned char)(i >> 8);
        data[2 * n16 + 2 * i] = (unsigned char)i, data[2 * n16 + 2 * i + 1] = (unsigned char)(i >> 8);
    }
    size_t o32 = 4 * n16 + 1;
    for (size_t i = 0; i < n32; i++)
        for (int b = 0; b < 4; b++) data[o32 + 4 * i + (size_t)b] = (unsigned char)(f32_bits[i] >> (8 * b));
    size_t ob = o32 + 4 * n32;
    const uint16_t bf_small[3] = {0x3F80, 0xC000, 0x0001};
    for (int i = 0; i < 3; i++) data[ob + 2 * (size_t)i] = (unsigned char)bf_small[i], data[ob + 2 * (size_t)i + 1] = (unsigned char)(bf_small[i] >> 8);
    char header[1024];
    snprintf(header, sizeof header,
             "{\"h\":{\"dtype\":\"F16\",\"shape\":[256,256],\"data_offsets\":[0,%zu]},"
             "\"b\":{\"dtype\":\"BF16\",\"shape\":[65536],\"data_offsets\":[%zu,%zu]},"
             "\"f\":{\"dtype\":\"F32\",\"shape\":[%zu],\"data_offsets\":[%zu,%zu]},"
             "\"odd\":{\"dtype\":\"BF16\",\"shape\":[1,3],\"data_offsets\":[%zu,%zu]}}",
             2 * n16, 2 * n16, 4 * n16, n32, o32, o32 + 4 * n32, ob, ob + 6);
    /* pad the header to 8 bytes (as writers do): the data section is then
     * 8-aligned in the mapping too, so only "odd" is misaligned */
    while (strlen(header) % 8) strcat(header, " ");
    const char *path = put_st("exact.safetensors", header, data, dlen);
    float *out = malloc(n16 * sizeof *out);
    REQUIRE(out);
    for (int use_mmap = 1; use_mmap >= 0; use_mmap--) {
        fx_err err;
        fx_err_clear(&err);
        fx_wset *s = fx_wset_open(path, "exact.safetensors", use_mmap, &err);
        REQUIRE_MSG(s, "%s", err.msg);
        /* F16: every bit pattern */
        REQUIRE_MSG(fx_wset_read_f32(s, "h", &FX_SHAPE(256, 256), out, &err) == FLUX_OK, "%s", err.msg);
        int bad16 = 0;
        for (size_t i = 0; i < n16; i++) {
            float want = ref_f16((uint16_t)i);
            int ok = isnan(want) ? bits_of(out[i]) == (((uint32_t)(i & 0x8000) << 16) | 0x7FC00000u | (uint32_t)(i & 0x3FF) << 13)
                                 : bits_of(out[i]) == bits_of(want);
            if (!ok && bad16++ < 3) fx_test_fail(__FILE__, __LINE__, "f16 0x%04zx → 0x%08x, want %g", i, bits_of(out[i]), want);
        }
        CHECK_EQ_INT(bad16, 0);
        /* spot checks: smallest subnormal, largest subnormal, max, inf */
        CHECK(out[0x0001] == ldexpf(1, -24) && out[0x03FF] == ldexpf(1023, -24));
        CHECK(out[0x7BFF] == 65504.0f && isinf(out[0x7C00]) && out[0xFC00] < 0 && isinf(out[0xFC00]));
        CHECK(signbit(out[0x8000]) && out[0x8000] == 0.0f);
        /* BF16: bits << 16, every pattern, NaNs included */
        REQUIRE(fx_wset_read_f32(s, "b", NULL, out, &err) == FLUX_OK);
        int bad_bf = 0;
        for (size_t i = 0; i < n16; i++) bad_bf += bits_of(out[i]) != (uint32_t)i << 16;
        CHECK_EQ_INT(bad_bf, 0);
        /* F32 at a misaligned offset: exact bits (denormals, inf, NaN payloads) */
        float *f = NULL;
        int64_t numel = 0;
        REQUIRE(fx_wset_f32(s, "f", &FX_SHAPE((int64_t)n32), &f, &numel, &err) == FLUX_OK);
        CHECK_EQ_INT(numel, (int64_t)n32);
        for (size_t i = 0; i < n32; i++) CHECK_MSG(bits_of(f[i]) == f32_bits[i], "f32[%zu] 0x%08x", i, bits_of(f[i]));
        free(f);
        /* misaligned BF16 weight: the view is an aligned copy with the same values */
        fx_weight w;
        REQUIRE_MSG(fx_wset_linear(s, "odd", 1, 3, &w, &err) == FLUX_OK, "%s", err.msg);
        CHECK(((uintptr_t)w.data & 1) == 0);
        CHECK(w.dtype == FX_DTYPE_BF16 && w.n == 1 && w.k == 3 && w.ld == 3);
        const uint16_t *wb = w.data;
        CHECK(wb[0] == 0x3F80 && wb[1] == 0xC000 && wb[2] == 0x0001);
        /* aligned weight: the view points into the file data, not a copy */
        REQUIRE(fx_wset_linear(s, "h", 256, 256, &w, &err) == FLUX_OK);
        CHECK(w.data == fx_tensor_data(fx_wset_find(s, "h")) && w.dtype == FX_DTYPE_F16);
        fx_tensor_willneed(fx_wset_find(s, "h")); /* must be harmless */
        fx_wset_weight_willneed(s, &w);
        /* printf-named getters: the same view, and the same vector */
        fx_weight wf;
        REQUIRE(fx_wset_linearf(s, &wf, 256, 256, &err, "%c", 'h') == FLUX_OK);
        CHECK(wf.data == w.data && wf.dtype == w.dtype && wf.n == 256 && wf.k == 256);
        float *fv = NULL;
        REQUIRE(fx_wset_vecf(s, &fv, (int64_t)n32, &err, "%s", "f") == FLUX_OK);
        CHECK(bits_of(fv[0]) == f32_bits[0] && bits_of(fv[n32 - 1]) == f32_bits[n32 - 1]);
        free(fv);
        fx_wset_willneed(s);
        fx_wset_close(s);
    }
    free(out);
    free(data);
}

TEST(safetensors_lookup_errors_and_views) {
    uint16_t data[4 * 3 * 3 * 3 + 6 + 4] = {0};
    for (int i = 0; i < 6; i++) data[108 + i] = (uint16_t)(0x3F80 + i);
    const char *header = "{\"conv.weight\":{\"dtype\":\"BF16\",\"shape\":[4,3,3,3],\"data_offsets\":[0,216]},"
                         "\"lin.weight\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[216,228]},"
                         "\"steps\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[228,236]}}";
    const char *path = put_st("m.safetensors", header, data, sizeof data);
    fx_err err;
    fx_err_clear(&err);
    fx_wset *s = fx_wset_open(path, "vae/m.safetensors", 1, &err);
    REQUIRE_MSG(s, "%s", err.msg);
    CHECK_EQ_INT(fx_wset_count(s), 3);
    CHECK(!strcmp(fx_wset_display(s), "vae/m.safetensors"));
    fx_weight w;
    REQUIRE(fx_wset_conv(s, "conv.weight", 4, 3, 3, 3, &w, &err) == FLUX_OK);
    CHECK(w.n == 4 && w.k == 27 && w.ld == 27 && w.dtype == FX_DTYPE_BF16);
    REQUIRE(fx_wset_linear(s, "lin.weight", 2, 3, &w, &err) == FLUX_OK);
    CHECK(w.n == 2 && w.k == 3);
    /* wrong shape: the exact message */
    CHECK(fx_wset_linear(s, "lin.weight", 3, 2, &w, &err) == FLUX_ERR_MODEL);
    CHECK_MSG(!strcmp(err.msg, "vae/m.safetensors: tensor 'lin.weight' has shape [2, 3], expected [3, 2]"), "%s", err.msg);
    CHECK(fx_wset_conv(s, "conv.weight", 4, 3, 1, 1, &w, &err) == FLUX_ERR_MODEL);
    CHECK_MSG(strstr(err.msg, "has shape [4, 3, 3, 3], expected [4, 3, 1, 1]"), "%s", err.msg);
    CHECK(fx_wset_get(s, "lin.weight", &FX_SHAPE(2, 3, 1), NULL, &err) == FLUX_ERR_MODEL);
    CHECK(strstr(err.msg, "expected [2, 3, 1]"));
    /* missing tensor */
    CHECK(fx_wset_linear(s, "nope.weight", 2, 3, &w, &err) == FLUX_ERR_MODEL);
    CHECK_MSG(!strcmp(err.msg, "vae/m.safetensors: tensor 'nope.weight' not found"), "%s", err.msg);
    /* a non-float tensor is not a weight */
    CHECK(fx_wset_check_weight(s, "steps", &FX_SHAPE0, &err) == FLUX_ERR_MODEL);
    CHECK_MSG(strstr(err.msg, "tensor 'steps' has dtype I64; weights must be F32, F16, BF16, Q8_0, Q4_0"), "%s", err.msg);
    const fx_tensor *t;
    CHECK(fx_wset_get(s, "steps", &FX_SHAPE0, &t, &err) == FLUX_OK && t->dtype == FX_DTYPE_I64);
    /* small tensor → new f32 array */
    float *v = NULL;
    int64_t numel = 0;
    REQUIRE(fx_wset_f32(s, "lin.weight", &FX_SHAPE(2, 3), &v, &numel, &err) == FLUX_OK);
    CHECK_EQ_INT(numel, 6);
    CHECK(v[0] == 1.0f && v[5] == fx_bf16_bits_to_f32(0x3F85));
    free(v);
    CHECK(fx_wset_f32(s, "lin.weight", &FX_SHAPE(6), &v, NULL, &err) == FLUX_ERR_MODEL && v == NULL);
    char sb[64];
    CHECK(!strcmp(fx_shape_str(&FX_SHAPE(3072, 128), sb, sizeof sb), "[3072, 128]"));
    CHECK(!strcmp(fx_shape_str(&FX_SHAPE0, sb, sizeof sb), "[]"));
    fx_wset_close(s);
}

/* use_mmap = -1 validates the header only; data comes and goes on demand. */
TEST(safetensors_header_only_then_load) {
    float vals[4] = {1, 2, 3, 4};
    const char *path = put_st("lazy.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
                              vals, sizeof vals);
    fx_err err;
    fx_err_clear(&err);
    fx_wset *s = fx_wset_open(path, "te/lazy.safetensors", -1, &err);
    REQUIRE_MSG(s, "%s", err.msg);
    CHECK(!fx_wset_data_loaded(s));
    CHECK(fx_wset_check_weight(s, "w", &FX_SHAPE(4), &err) == FLUX_OK);
    float out[4] = {0};
    CHECK(fx_wset_read_f32(s, "w", NULL, out, &err) == FLUX_ERR_STATE);
    CHECK_MSG(strstr(err.msg, "te/lazy.safetensors: data of tensor 'w' is not loaded"), "%s", err.msg);
    for (int mode = 1; mode >= 0; mode--) {
        REQUIRE(fx_wset_load_data(s, mode, &err) == FLUX_OK);
        CHECK(fx_wset_data_loaded(s));
        CHECK(fx_wset_read_f32(s, "w", NULL, out, &err) == FLUX_OK && out[3] == 4.0f);
        fx_wset_drop_data(s);
        CHECK(!fx_wset_data_loaded(s) && fx_tensor_data(fx_wset_find(s, "w")) == NULL);
    }
    fx_wset_close(s);
}

/* ------------------------------------------------------------------------ */
/* Sharded weight sets                                                      */
/* ------------------------------------------------------------------------ */

static void make_shards(void) {
    float a[2] = {1, 2}, b[3] = {3, 4, 5};
    put_st("model-00001-of-00002.safetensors",
           "{\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"extra\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", a, sizeof a);
    put_st("model-00002-of-00002.safetensors",
           "{\"b.weight\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", b, sizeof b);
}

static const char *put_index(const char *name, const char *json) { return put(name, json, strlen(json)); }

TEST(safetensors_sharded_index) {
    make_shards();
    const char *idx = put_index("model.safetensors.index.json",
                                "{\"metadata\":{\"total_size\":20},\"weight_map\":{"
                                "\"b.weight\":\"model-00002-of-00002.safetensors\","
                                "\"a.weight\":\"model-00001-of-00002.safetensors\"}}");
    fx_err err;
    fx_err_clear(&err);
    fx_wset *s = fx_wset_open(idx, "text_encoder/model.safetensors.index.json", 1, &err);
    REQUIRE_MSG(s, "%s", err.msg);
    CHECK_EQ_INT(fx_wset_count(s), 2);
    CHECK_EQ_INT(fx_wset_file_count(s), 2);
    /* index order; each tensor resolves into its shard */
    CHECK(!strcmp(fx_wset_tensor_at(s, 0)->name, "b.weight"));
    const fx_tensor *t = fx_wset_find(s, "a.weight");
    REQUIRE(t);
    CHECK(!strcmp(fx_tensor_file_display(t->file), "text_encoder/model-00001-of-00002.safetensors"));
    CHECK(!strcmp(fx_tensor_file_display(fx_wset_find(s, "b.weight")->file), "text_encoder/model-00002-of-00002.safetensors"));
    float out[3];
    CHECK(fx_wset_read_f32(s, "b.weight", &FX_SHAPE(3), out, &err) == FLUX_OK && out[0] == 3 && out[2] == 5);
    CHECK(fx_wset_read_f32(s, "a.weight", &FX_SHAPE(2), out, &err) == FLUX_OK && out[1] == 2);
    /* shard tensors the index does not list are not visible */
    CHECK(fx_wset_find(s, "extra") == NULL);
    /* shape error names the shard; missing tensor names the index */
    CHECK(fx_wset_get(s, "b.weight", &FX_SHAPE(4), NULL, &err) == FLUX_ERR_MODEL);
    CHECK_MSG(!strcmp(err.msg, "text_encoder/model-00002-of-00002.safetensors: tensor 'b.weight' has shape [3], expected [4]"),
              "%s", err.msg);
    CHECK(fx_wset_get(s, "c.weight", NULL, NULL, &err) == FLUX_ERR_MODEL);
    CHECK_MSG(!strcmp(err.msg, "text_encoder/model.safetensors.index.json: tensor 'c.weight' not found"), "%s", err.msg);
    fx_wset_close(s);
}

static void expect_bad_index(const char *json, flux_status code, const char *fragment, int line) {
    make_shards();
    const char *idx = put_index("bad.safetensors.index.json", json);
    fx_err err;
    fx_err_clear(&err);
    fx_wset *s = fx_wset_open(idx, "te/bad.safetensors.index.json", 1, &err);
    if (s) {
        fx_test_fail(__FILE__, line, "index unexpectedly accepted");
        fx_wset_close(s);
        return;
    }
    if (err.code != code) fx_test_fail(__FILE__, line, "code %s (%s)", flux_status_name(err.code), err.msg);
    if (!strstr(err.msg, fragment)) fx_test_fail(__FILE__, line, "message '%s' lacks '%s'", err.msg, fragment);
}
#define BAD_INDEX(json, code, frag) expect_bad_index(json, code, frag, __LINE__)

TEST(safetensors_sharded_index_errors) {
    BAD_INDEX("{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\","
              "\"z.weight\":\"model-00003-of-00003.safetensors\"}}",
              FLUX_ERR_IO,
              "te/bad.safetensors.index.json: shard 'model-00003-of-00003.safetensors' (listed for tensor 'z.weight'): "
              "cannot open ");
    BAD_INDEX("{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\","
              "\"q.weight\":\"model-00002-of-00002.safetensors\"}}",
              FLUX_ERR_MODEL,
              "te/bad.safetensors.index.json: tensor 'q.weight' is listed in shard 'model-00002-of-00002.safetensors', "
              "but that shard does not contain it");
    BAD_INDEX("{\"metadata\":{}}", FLUX_ERR_FORMAT, "te/bad.safetensors.index.json: no \"weight_map\" object");
    BAD_INDEX("{\"weight_map\":[]}", FLUX_ERR_FORMAT, "no \"weight_map\" object");
    BAD_INDEX("{\"weight_map\":{\"a.weight\":1}}", FLUX_ERR_FORMAT, "tensor 'a.weight' maps to a non-string");
    BAD_INDEX("{\"weight_map\":{\"a.weight\":\"../model-00001-of-00002.safetensors\"}}", FLUX_ERR_FORMAT,
              "tensor 'a.weight' maps to an invalid file name");
    BAD_INDEX("{\"weight_map\":{\"a.weight\":\"\"}}", FLUX_ERR_FORMAT, "maps to an invalid file name");
    BAD_INDEX("{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\","
              "\"a.weight\":\"model-00001-of-00002.safetensors\"}}",
              FLUX_ERR_FORMAT, "weight_map lists tensor 'a.weight' twice");
    BAD_INDEX("{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\"}", FLUX_ERR_FORMAT,
              "te/bad.safetensors.index.json: line 1, column ");
    /* a corrupt shard is reported with the shard's own message */
    put("broken.safetensors", "xx", 2);
    BAD_INDEX("{\"weight_map\":{\"a.weight\":\"broken.safetensors\"}}", FLUX_ERR_FORMAT,
              "shard 'broken.safetensors' (listed for tensor 'a.weight'): te/broken.safetensors: file is 2 bytes");
}

TEST(safetensors_open_component_single_or_sharded) {
    char dir[512];
    make_shards();
    put_index("model.safetensors.index.json",
              "{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\"}}");
    snprintf(dir, sizeof dir, "%s", fx_test_tmpdir());
    fx_err err;
    fx_err_clear(&err);
    /* no model.safetensors: falls back to the index */
    fx_wset *s = fx_wset_open_component(dir, "text_encoder", "model.safetensors", 1, &err);
    REQUIRE_MSG(s, "%s", err.msg);
    CHECK(!strcmp(fx_wset_display(s), "text_encoder/model.safetensors.index.json"));
    fx_wset_close(s);
    /* a single file wins when present */
    float x = 7;
    put_st("model.safetensors", "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", &x, 4);
    s = fx_wset_open_component(dir, "text_encoder", "model.safetensors", 1, &err);
    REQUIRE_MSG(s, "%s", err.msg);
    CHECK(!strcmp(fx_wset_display(s), "text_encoder/model.safetensors") && fx_wset_find(s, "x"));
    fx_wset_close(s);
    /* neither */
    CHECK(fx_wset_open_component(dir, "vae", "none.safetensors", 1, &err) == NULL);
    CHECK_MSG(err.code == FLUX_ERR_IO && strstr(err.msg, "none.safetensors") && strstr(err.msg, ".index.json"),
              "%s", err.msg);
}

/* The golden model's files: every tensor validates and resolves; the text
 * encoder's two shards through its index. */
TEST(safetensors_golden_model_files) {
    fx_err err;
    fx_err_clear(&err);
    fx_wset *te = fx_wset_open(fx_test_path("golden/model/text_encoder/model.safetensors.index.json"),
                               "text_encoder/model.safetensors.index.json", 1, &err);
    REQUIRE_MSG(te, "%s", err.msg);
    CHECK_EQ_INT(fx_wset_file_count(te), 2);
    CHECK_EQ_INT(fx_wset_count(te), 310);
    const fx_tensor *emb = fx_wset_find(te, "model.embed_tokens.weight");
    REQUIRE(emb);
    CHECK(emb->dtype == FX_DTYPE_BF16 && fx_shape_eq(&emb->shape, &FX_SHAPE(151936, 16)));
    CHECK(fx_wset_find(te, "model.layers.27.mlp.up_proj.weight") != NULL);
    fx_wset_close(te);
    fx_wset *vae = fx_wset_open(fx_test_path("golden/model/vae/diffusion_pytorch_model.safetensors"),
                                "vae/diffusion_pytorch_model.safetensors", 0, &err);
    REQUIRE_MSG(vae, "%s", err.msg);
    CHECK_EQ_INT(fx_wset_count(vae), 183);
    CHECK(!strcmp(fx_tensor_file_metadata(fx_wset_file_at(vae, 0), "format"), "pt"));
    float rv[128];
    CHECK(fx_wset_read_f32(vae, "bn.running_var", &FX_SHAPE(128), rv, &err) == FLUX_OK);
    int positive = 0;
    for (int i = 0; i < 128; i++) positive += rv[i] > 0;
    CHECK_EQ_INT(positive, 128);
    fx_wset_close(vae);
}

/* The loader's F16 / BF16 decode (little-endian bytes, any alignment)
 * agrees bit for bit with fx_f16_bits_to_f32 / fx_bf16_bits_to_f32 for
 * every pattern. */
TEST(safetensors_conversions_match_kernels) {
    uint16_t *src = malloc(65536 * sizeof *src);
    float *dst = malloc(65536 * sizeof *dst);
    REQUIRE(src && dst);
    for (uint32_t i = 0; i < 65536; i++) src[i] = (uint16_t)i;
    fx_tensor_convert_f32(src, FX_DTYPE_F16, 65536, dst);
    int bad = 0;
    for (uint32_t i = 0; i < 65536; i++) bad += bits_of(dst[i]) != bits_of(fx_f16_bits_to_f32((uint16_t)i));
    CHECK_EQ_INT(bad, 0);
    fx_tensor_convert_f32(src, FX_DTYPE_BF16, 65536, dst);
    bad = 0;
    for (uint32_t i = 0; i < 65536; i++) bad += bits_of(dst[i]) != bits_of(fx_bf16_bits_to_f32((uint16_t)i));
    CHECK_EQ_INT(bad, 0);
    free(src);
    free(dst);
}

/* The element count of a claimed shape: 0 when any dimension is 0 (the
 * others may be anything a file claims, their product past int64: found
 * by fuzz_gguf), INT64_MAX when the product overflows, never UB. */
TEST(shape_numel_zero_dims_and_overflow) {
    CHECK_EQ_INT((long long)fx_shape_numel(&FX_SHAPE(3, 4)), 12);
    CHECK_EQ_INT((long long)fx_shape_numel(&FX_SHAPE0), 1);
    CHECK_EQ_INT((long long)fx_shape_numel(&FX_SHAPE(562949953421312LL, 268435457LL, 0)), 0);
    CHECK(fx_shape_numel(&FX_SHAPE(3042405LL, 7237123380996997120LL)) == INT64_MAX);
}
