/*
 * test.h — the tiny test framework of flux.c.
 *
 * A test is `TEST(name) { ... }` in any tests/<layer>/test_*.c file; it registers
 * itself at start-up. The runner (tests/test_main.c) runs each test in a
 * forked child (a crash or a hang fails that test only), prints one line per
 * test and the closing line `N passed, N failed, N skipped`.
 *
 * CHECK* record a failure and continue; REQUIRE* record and return.
 * SKIP(reason) marks the test skipped; under CI=true a skip counts as a
 * failure, so nothing is silently skipped in CI.
 */
#ifndef FX_TEST_H
#define FX_TEST_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "flux.h"

typedef void (*fx_test_fn)(void);
void fx_test_register(const char *name, fx_test_fn fn, const char *file);

#define TEST(name)                                                             \
    static void test_##name(void);                                             \
    __attribute__((constructor)) static void register_##name(void) {           \
        fx_test_register(#name, test_##name, __FILE__);                        \
    }                                                                          \
    static void test_##name(void)

/* Failure bookkeeping (per test, in the child process). */
void fx_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void fx_test_skip(const char *reason);
int fx_test_failed(void);

#define CHECK(cond)                                                            \
    do { if (!(cond)) fx_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond); } while (0)
#define CHECK_MSG(cond, ...)                                                   \
    do { if (!(cond)) fx_test_fail(__FILE__, __LINE__, __VA_ARGS__); } while (0)
#define REQUIRE(cond)                                                          \
    do { if (!(cond)) { fx_test_fail(__FILE__, __LINE__, "REQUIRE(%s)", #cond); return; } } while (0)
#define REQUIRE_MSG(cond, ...)                                                 \
    do { if (!(cond)) { fx_test_fail(__FILE__, __LINE__, __VA_ARGS__); return; } } while (0)
#define CHECK_EQ_INT(a, b)                                                     \
    do { long long a_ = (long long)(a), b_ = (long long)(b);                   \
         if (a_ != b_) fx_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); } while (0)
#define CHECK_NEAR(a, b, tol)                                                  \
    do { double a_ = (double)(a), b_ = (double)(b);                            \
         if (!(fabs(a_ - b_) <= (tol))) fx_test_fail(__FILE__, __LINE__, "%s ≈ %s: %.9g vs %.9g (tol %g)", #a, #b, a_, b_, (double)(tol)); } while (0)
#define SKIP(reason) do { fx_test_skip(reason); return; } while (0)

/* Path of a file under tests/ (golden data, fixtures): returns a static
 * buffer valid until the next call. */
const char *fx_test_path(const char *rel);
/* Path of the CLI binary under test (env FLUX_BIN, else ./flux). */
const char *fx_test_flux_bin(void);
/* A fresh empty temporary directory for this test (removed by the runner). */
const char *fx_test_tmpdir(void);
/* 1 when running under CI=true. */
int fx_test_in_ci(void);

/* 1 when a context of this precision on this CPU multiplies with bf16 dot
 * products (AVX512_BF16 in the default precision), so its results carry
 * bf16 rounding; elsewhere the default precision runs the f32 math of
 * FLUX_PRECISION_F32 and is held to the f32 tolerances. */
int fx_test_bf16_dot(flux_precision prec);

/* Deterministic random numbers for tests (xorshift64*). */
typedef struct { uint64_t s; } fx_test_rng;
void fx_test_rng_seed(fx_test_rng *r, uint64_t seed);
uint64_t fx_test_rng_u64(fx_test_rng *r);
float fx_test_rng_uniform(fx_test_rng *r);  /* [-1, 1) */
float fx_test_rng_normal(fx_test_rng *r);
void fx_test_fill_uniform(fx_test_rng *r, float *x, size_t n, float scale);

/* max|a − b| / max|b| (0/0 = 0). */
double fx_test_rel_err(const float *a, const float *b, size_t n);
/* max|a − b| */
double fx_test_max_abs_err(const float *a, const float *b, size_t n);

/* Run a shell command, capture its stdout+stderr (malloc'd, NUL-ended) and
 * exit status. Returns the status (−1 on failure to run). */
int fx_test_run(const char *cmd, char **output);

/* Run fn(arg) in a forked child with a time limit (for calls that could
 * hang or crash: a FIFO, a signal): failures it records with CHECK are
 * printed by the child; returns 0 when it passed, 1 when it recorded
 * failures, 2 when it timed out and 3 when a signal killed it (both also
 * recorded as failures here). Call it before the test starts OpenMP
 * threads (a forked child of a process with a thread pool cannot use it). */
int fx_test_fork(void (*fn)(void *), void *arg, int seconds);

/* Read a whole file (malloc'd, NUL-terminated); NULL if missing. */
char *fx_test_read_file(const char *path, size_t *len);
int fx_test_write_file(const char *path, const void *data, size_t len);

/* "<fx_test_tmpdir()>/<name>" in one of four rotating static buffers (up to
 * four such paths are valid at once). */
const char *fx_test_tmp_path(const char *name);
/* Entries of a directory other than . and .. (−1 if it cannot be opened). */
int fx_test_dir_entries(const char *dir);
/* 1 if path exists (stat succeeds), else 0. */
int fx_test_file_exists(const char *path);
/* A program of tools/: $FLUX_TOOLS/<name>, else tools/<name> next to the test
 * binary (static buffer); NULL when neither is executable. */
const char *fx_test_tool(const char *name);

/* Run program `name` of tools/ (fx_test_tool) with `args` (a shell
 * fragment, quoted by the caller). Returns 0, or -1 after recording a test
 * failure at file:line (tool not built, or a non-zero exit with its output). */
int fx_test_run_tool(const char *file, int line, const char *name, const char *args);
#define FX_TEST_RUN_TOOL(name, args) fx_test_run_tool(__FILE__, __LINE__, name, args)

/* 1 if both images exist and have the same size, channels and pixels. */
int fx_test_same_pixels(const flux_image *a, const flux_image *b);
/* Largest |difference| of two images' pixel values; 999 if their sizes or
 * channel counts differ (or one is NULL). */
int fx_test_max_pixel_diff(const flux_image *a, const flux_image *b);

/* For forging PNG files: a big-endian 32-bit store and the CRC-32 of PNG
 * chunks (zlib polynomial). */
void fx_test_put_be32(uint8_t *p, uint32_t v);
uint32_t fx_test_crc32(const uint8_t *p, size_t n);

#endif
