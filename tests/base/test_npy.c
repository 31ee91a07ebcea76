/*
 * test_npy.c — NumPy .npy reading and writing: golden files, byte-exact
 * headers against numpy.save, versions 1–3, f8/i8 conversion, and every
 * malformed header we could think of.
 */
#include "tests/test.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/npy.h"

/* A .npy file from a header dict (padded to 64 like numpy) and raw data. */
static size_t make_npy(uint8_t *out, int major, const char *dict, const void *data, size_t data_len) {
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t hlen = dl + 1;
    hlen += (64 - (pre + hlen) % 64) % 64;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (uint8_t)major, out[7] = 0;
    if (major == 1) {
        out[8] = (uint8_t)hlen, out[9] = (uint8_t)(hlen >> 8);
    } else {
        for (int i = 0; i < 4; i++) out[8 + i] = (uint8_t)(hlen >> (8 * i));
    }
    memcpy(out + pre, dict, dl);
    memset(out + pre + dl, ' ', hlen - dl - 1);
    out[pre + hlen - 1] = '\n';
    if (data_len) memcpy(out + pre + hlen, data, data_len);
    return pre + hlen + data_len;
}

static void expect_parse_fails(const uint8_t *buf, size_t n, const char *fragment, const char *what) {
    fx_npy a;
    fx_err err = {0};
    flux_status s = fx_npy_parse(buf, n, "t.npy", &a, &err);
    CHECK_MSG(s != FLUX_OK, "%s: parsed but should fail", what);
    if (s == FLUX_OK) {
        fx_npy_free(&a);
        return;
    }
    CHECK(a.data == NULL);
    CHECK_MSG(strstr(err.msg, "t.npy") != NULL, "%s: message does not name the file: %s", what, err.msg);
    if (fragment) CHECK_MSG(strstr(err.msg, fragment) != NULL, "%s: '%s' not in: %s", what, fragment, err.msg);
}

TEST(npy_reads_golden_noise_and_tokens) {
    fx_npy a;
    fx_err err = {0};
    REQUIRE_MSG(fx_npy_read(fx_test_path("golden/t2i-48x64-2step/noise.npy"), &a, &err) == FLUX_OK, "%s", err.msg);
    CHECK_EQ_INT(a.dtype, FX_NPY_F32);
    CHECK_EQ_INT(a.ndim, 3);
    CHECK(a.shape[0] == 128 && a.shape[1] == 3 && a.shape[2] == 4);
    CHECK_EQ_INT(a.count, 128 * 12);
    int64_t want[3] = {128, 3, 4}, any[3] = {128, -1, -1}, wrong[3] = {128, 4, 3};
    CHECK(fx_npy_expect(&a, "noise", FX_NPY_F32, 3, want, &err) == FLUX_OK);
    CHECK(fx_npy_expect(&a, "noise", FX_NPY_F32, 3, any, &err) == FLUX_OK);
    CHECK(fx_npy_expect(&a, "noise", FX_NPY_F32, 3, wrong, &err) == FLUX_ERR_INVALID_ARG);
    CHECK_MSG(strstr(err.msg, "expected float32 (128, 4, 3), found float32 (128, 3, 4)"), "%s", err.msg);
    CHECK(fx_npy_expect(&a, "noise", FX_NPY_I32, 3, want, &err) != FLUX_OK);
    /* the noise is a standard normal sample: mean ~0, variance ~1 */
    double sum = 0, sq = 0;
    const float *x = a.data;
    for (size_t i = 0; i < a.count; i++) sum += x[i], sq += (double)x[i] * x[i];
    CHECK(fabs(sum / a.count) < 0.15 && fabs(sq / a.count - 1) < 0.2);
    fx_npy_free(&a);

    REQUIRE_MSG(fx_npy_read(fx_test_path("golden/t2i-48x64-2step/tokens.npy"), &a, &err) == FLUX_OK, "%s", err.msg);
    CHECK_EQ_INT(a.dtype, FX_NPY_I32);
    CHECK_EQ_INT(a.ndim, 1);
    CHECK_EQ_INT(a.shape[0], 512);
    const int32_t *t = a.data;
    CHECK_EQ_INT(t[0], 151644); /* <|im_start|> */
    CHECK_EQ_INT(t[511], 151643); /* padding <|endoftext|> */
    fx_npy_free(&a);
}

TEST(npy_write_matches_numpy_bytes) {
    /* Writing the golden arrays back reproduces numpy.save's bytes. */
    const char *files[] = {"golden/t2i-48x64-2step/noise.npy", "golden/t2i-48x64-2step/tokens.npy",
                           "golden/t2i-48x64-2step/out/sigmas.npy", "golden/t2i-48x64-2step/out/emb.npy"};
    for (int f = 0; f < 4; f++) {
        char src[1024];
        snprintf(src, sizeof src, "%s", fx_test_path(files[f]));
        fx_npy a;
        fx_err err = {0};
        REQUIRE_MSG(fx_npy_read(src, &a, &err) == FLUX_OK, "%s", err.msg);
        const char *dst = fx_test_tmp_path("copy.npy");
        flux_status s = a.dtype == FX_NPY_F32 ? fx_npy_write_f32(dst, a.data, a.ndim, a.shape, &err)
                                              : fx_npy_write_i32(dst, a.data, a.ndim, a.shape, &err);
        REQUIRE_MSG(s == FLUX_OK, "%s", err.msg);
        size_t n1, n2;
        char *b1 = fx_test_read_file(src, &n1), *b2 = fx_test_read_file(dst, &n2);
        CHECK_MSG(n1 == n2 && !memcmp(b1, b2, n1), "%s: written file differs from numpy's", files[f]);
        free(b1), free(b2);
        fx_npy_free(&a);
    }
}

TEST(npy_roundtrip_shapes) {
    fx_err err = {0};
    float f[24];
    int32_t i32[5] = {0, -1, 2147483647, -2147483647 - 1, 42};
    for (int i = 0; i < 24; i++) f[i] = (float)i * 0.25f - 3;
    int64_t s3[3] = {2, 3, 4}, s1[1] = {5}, s0[1] = {0};
    fx_npy a;
    REQUIRE(fx_npy_write_f32(fx_test_tmp_path("a.npy"), f, 3, s3, &err) == FLUX_OK);
    REQUIRE(fx_npy_read(fx_test_tmp_path("a.npy"), &a, &err) == FLUX_OK);
    CHECK(a.ndim == 3 && a.shape[0] == 2 && a.shape[1] == 3 && a.shape[2] == 4 && a.count == 24);
    CHECK(!memcmp(a.data, f, sizeof f));
    fx_npy_free(&a);
    REQUIRE(fx_npy_write_i32(fx_test_tmp_path("b.npy"), i32, 1, s1, &err) == FLUX_OK);
    REQUIRE(fx_npy_read(fx_test_tmp_path("b.npy"), &a, &err) == FLUX_OK);
    CHECK(a.dtype == FX_NPY_I32 && a.ndim == 1 && a.count == 5 && !memcmp(a.data, i32, sizeof i32));
    fx_npy_free(&a);
    /* 0-d scalar and an empty array */
    REQUIRE(fx_npy_write_f32(fx_test_tmp_path("c.npy"), f + 5, 0, NULL, &err) == FLUX_OK);
    REQUIRE(fx_npy_read(fx_test_tmp_path("c.npy"), &a, &err) == FLUX_OK);
    CHECK(a.ndim == 0 && a.count == 1 && ((float *)a.data)[0] == f[5]);
    fx_npy_free(&a);
    REQUIRE(fx_npy_write_f32(fx_test_tmp_path("d.npy"), NULL, 1, s0, &err) == FLUX_OK);
    REQUIRE(fx_npy_read(fx_test_tmp_path("d.npy"), &a, &err) == FLUX_OK);
    CHECK(a.ndim == 1 && a.shape[0] == 0 && a.count == 0 && a.data != NULL);
    fx_npy_free(&a);
    /* header is 64-byte aligned */
    size_t n;
    char *raw = fx_test_read_file(fx_test_tmp_path("a.npy"), &n);
    CHECK_EQ_INT((10 + ((uint8_t)raw[8] | (uint8_t)raw[9] << 8)) % 64, 0);
    CHECK_EQ_INT(n % 4, 0);
    free(raw);
    /* writing into a missing directory fails and names the path */
    CHECK(fx_npy_write_f32(fx_test_tmp_path("nodir/x.npy"), f, 3, s3, &err) == FLUX_ERR_IO);
    CHECK_MSG(strstr(err.msg, "nodir/x.npy"), "%s", err.msg);
}

TEST(npy_versions_and_conversions) {
    uint8_t buf[1024];
    float f[3] = {1.5f, -2, 3};
    fx_npy a;
    fx_err err = {0};
    for (int major = 1; major <= 3; major++) {
        size_t n = make_npy(buf, major, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f, sizeof f);
        REQUIRE_MSG(fx_npy_parse(buf, n, "t.npy", &a, &err) == FLUX_OK, "v%d: %s", major, err.msg);
        CHECK(a.count == 3 && !memcmp(a.data, f, sizeof f));
        fx_npy_free(&a);
    }
    /* double quotes, no spaces, key order, Python 2 long ints, 2-d */
    size_t n = make_npy(buf, 1, "{\"shape\":(1L,3L),\"fortran_order\":False,\"descr\":\"<f4\"}", f, sizeof f);
    REQUIRE_MSG(fx_npy_parse(buf, n, "t.npy", &a, &err) == FLUX_OK, "%s", err.msg);
    CHECK(a.ndim == 2 && a.shape[0] == 1 && a.shape[1] == 3);
    fx_npy_free(&a);

    double d[4] = {0.1, -1e30, 1e-50, 3.0};
    n = make_npy(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", d, sizeof d);
    REQUIRE_MSG(fx_npy_parse(buf, n, "t.npy", &a, &err) == FLUX_OK, "%s", err.msg);
    CHECK(a.dtype == FX_NPY_F32);
    const float *x = a.data;
    CHECK(x[0] == 0.1f && x[1] == -1e30f && x[2] == 0.0f && x[3] == 3.0f);
    fx_npy_free(&a);
    d[1] = 1e300;
    n = make_npy(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", d, sizeof d);
    expect_parse_fails(buf, n, "element 1", "f8 overflow");

    int64_t l[3] = {7, -7, 2147483647};
    n = make_npy(buf, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", l, sizeof l);
    REQUIRE_MSG(fx_npy_parse(buf, n, "t.npy", &a, &err) == FLUX_OK, "%s", err.msg);
    CHECK(a.dtype == FX_NPY_I32 && ((int32_t *)a.data)[1] == -7 && ((int32_t *)a.data)[2] == 2147483647);
    fx_npy_free(&a);
    l[2] = 2147483648LL;
    n = make_npy(buf, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", l, sizeof l);
    expect_parse_fails(buf, n, "does not fit in int32", "i8 overflow");
}

TEST(npy_rejects_malformed_files) {
    uint8_t buf[2048];
    float f[6] = {0};
    struct {
        const char *dict;
        size_t data;
        const char *fragment;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24, "fortran_order is True"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }", 24, "big-endian"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (6,), }", 6, "not supported"},
        {"{'descr': '<f2', 'fortran_order': False, 'shape': (6,), }", 12, "not supported"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", 24, "structured"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", 24, "not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-6,), }", 24, "shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,6), }", 24, "8 dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 24, "absurd"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }", 24, "too large"},
        {"{'descr': '<f4', 'fortran_order': False}", 24, "lacks"},
        {"{'descr': '<f4', 'shape': (6,), }", 24, "lacks"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1}", 24, "unknown or repeated"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", 24, "unknown or repeated"},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (6,), }", 24, "neither True nor False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), } junk", 24, "junk"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (6,), }", 24, "malformed"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (6,), }", 24, NULL},
        {"['descr', '<f4']", 24, "dict"},
        {"", 24, "dict"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", 20, "truncated data"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", 28, "unexpected length"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", 0, "truncated data"},
    };
    uint8_t data[64] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n = make_npy(buf, 1, cases[i].dict, data, cases[i].data);
        expect_parse_fails(buf, n, cases[i].fragment, cases[i].dict);
    }
    /* preamble problems */
    size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", f, sizeof f);
    expect_parse_fails(buf, 0, "bad magic", "empty");
    expect_parse_fails(buf, 9, "bad magic", "9 bytes");
    expect_parse_fails((const uint8_t *)"\x93NUMPX\x01\x00\x10\x00", 10, "bad magic", "magic");
    buf[6] = 4;
    expect_parse_fails(buf, n, "version 4.0", "version 4");
    buf[6] = 1, buf[7] = 1;
    expect_parse_fails(buf, n, "version 1.1", "minor 1");
    buf[7] = 0;
    expect_parse_fails(buf, 40, "truncated .npy header", "cut header");
    buf[8] = 0xFF, buf[9] = 0xFF;
    expect_parse_fails(buf, n, "truncated .npy header", "header past EOF");
    uint8_t big[16] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0, 0, 0, 0x7F};
    expect_parse_fails(big, 16, "absurd", "4 GB header");

    /* files on disk: missing, a directory */
    fx_npy a;
    fx_err err = {0};
    CHECK(fx_npy_read(fx_test_tmp_path("missing.npy"), &a, &err) == FLUX_ERR_IO);
    CHECK(strstr(err.msg, "missing.npy") != NULL);
    CHECK(fx_npy_read(fx_test_tmpdir(), &a, &err) == FLUX_ERR_IO);
}

TEST(npy_random_mutations_never_crash) {
    uint8_t buf[512], m[512];
    float f[16];
    for (int i = 0; i < 16; i++) f[i] = (float)i;
    size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }", f, sizeof f);
    fx_test_rng r;
    fx_test_rng_seed(&r, 3);
    int ok = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(m, buf, n);
        int flips = 1 + (int)(fx_test_rng_u64(&r) % 3);
        for (int k = 0; k < flips; k++) {
            size_t at = fx_test_rng_u64(&r) % 128; /* mostly the header */
            m[at] = it & 1 ? (uint8_t)fx_test_rng_u64(&r) : (uint8_t)"(),: '0123456789TF"[fx_test_rng_u64(&r) % 18];
        }
        size_t len = it % 5 ? n : (size_t)(fx_test_rng_u64(&r) % n);
        fx_npy a;
        fx_err err;
        if (fx_npy_parse(m, len, "m.npy", &a, &err) == FLUX_OK) {
            ok++;
            CHECK(a.count * 4 <= len);
            fx_npy_free(&a);
        }
    }
    CHECK(ok < 20000);
}
