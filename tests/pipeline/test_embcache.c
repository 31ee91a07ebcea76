/*
 * test_embcache.c — the content-addressed text-embedding cache: keys, the
 * in-memory LRU, lossless disk entries, corruption handling, the size
 * budget, atomic writes under concurrent processes, and the context glue
 * (model identity, kernel path, --no-cache).
 */
#include "tests/test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "src/model/ctx.h"
#include "src/pipeline/embcache.h"
#include "src/model/model.h"

#define ROWS 8
#define COLS 6

static const uint8_t g_model_id[FX_SHA256_BYTES] = {1, 2, 3};

/* Key of a synthetic input numbered k. */
static void key_of(int k, uint8_t key[FX_SHA256_BYTES]) {
    int32_t ids[ROWS];
    uint8_t mask[ROWS];
    for (int i = 0; i < ROWS; i++) ids[i] = 1000 * k + i, mask[i] = i < 5;
    fx_embcache_key(g_model_id, "test", ids, mask, ROWS, COLS, key);
}

/* Payload numbered k, with values a lossy cache would change: NaN with a
 * payload, -0, subnormals, infinities, odd bit patterns. */
static void payload_of(int k, float *x) {
    for (int i = 0; i < ROWS * COLS; i++) {
        uint32_t bits = (uint32_t)(k + 1) * 2654435761u ^ (uint32_t)i * 40503u;
        memcpy(&x[i], &bits, 4);
    }
    uint32_t specials[5] = {0x7fc01234u, 0x80000000u, 0x00000001u, 0xff800000u, 0x3f800001u};
    for (int i = 0; i < 5; i++) memcpy(&x[i], &specials[i], 4);
}

static fx_embcache *new_cache(const char *dir, int mem_entries, uint64_t disk_bytes) {
    fx_embcache_config cfg = {0};
    cfg.dir = dir;
    cfg.mem_entries = mem_entries;
    cfg.mem_bytes = (size_t)1 << 20;
    cfg.disk_bytes = disk_bytes;
    return fx_embcache_new(&cfg);
}

static int count_files(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t a = strlen(e->d_name), b = strlen(suffix);
        if (e->d_name[0] != '.' && a >= b && !strcmp(e->d_name + a - b, suffix)) n++;
    }
    closedir(d);
    return n;
}

static int count_hidden(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

TEST(embcache_key_covers_every_input) {
    int32_t ids[ROWS];
    uint8_t mask[ROWS], base[FX_SHA256_BYTES], k[FX_SHA256_BYTES];
    for (int i = 0; i < ROWS; i++) ids[i] = i, mask[i] = 1;
    fx_embcache_key(g_model_id, "p", ids, mask, ROWS, COLS, base);
    fx_embcache_key(g_model_id, "p", ids, mask, ROWS, COLS, k);
    CHECK(!memcmp(base, k, sizeof k)); /* deterministic */
    ids[7] = 8;
    fx_embcache_key(g_model_id, "p", ids, mask, ROWS, COLS, k);
    CHECK(memcmp(base, k, sizeof k)); /* a token id */
    ids[7] = 7;
    mask[7] = 0;
    fx_embcache_key(g_model_id, "p", ids, mask, ROWS, COLS, k);
    CHECK(memcmp(base, k, sizeof k)); /* the mask (same ids, one more padding) */
    mask[7] = 1;
    fx_embcache_key(g_model_id, "q", ids, mask, ROWS, COLS, k);
    CHECK(memcmp(base, k, sizeof k)); /* kernel path */
    uint8_t other[FX_SHA256_BYTES] = {1, 2, 4};
    fx_embcache_key(other, "p", ids, mask, ROWS, COLS, k);
    CHECK(memcmp(base, k, sizeof k)); /* model */
    fx_embcache_key(g_model_id, "p", ids, mask, ROWS, COLS + 1, k);
    CHECK(memcmp(base, k, sizeof k)); /* width */
}

TEST(embcache_memory_lru) {
    fx_embcache *c = new_cache(NULL, 2, 0);
    REQUIRE(c);
    float a[ROWS * COLS], out[ROWS * COLS];
    uint8_t k0[32], k1[32], k2[32];
    key_of(0, k0), key_of(1, k1), key_of(2, k2);
    CHECK(!fx_embcache_get(c, k0, ROWS, COLS, out));
    payload_of(0, a);
    fx_embcache_put(c, k0, ROWS, COLS, a);
    payload_of(1, a);
    fx_embcache_put(c, k1, ROWS, COLS, a);
    /* use k0 so k1 is the least recently used, then add k2: k1 goes */
    CHECK(fx_embcache_get(c, k0, ROWS, COLS, out));
    payload_of(0, a);
    CHECK(!memcmp(a, out, sizeof a));
    payload_of(2, a);
    fx_embcache_put(c, k2, ROWS, COLS, a);
    CHECK(fx_embcache_get(c, k0, ROWS, COLS, out));
    CHECK(!fx_embcache_get(c, k1, ROWS, COLS, out));
    CHECK(fx_embcache_get(c, k2, ROWS, COLS, out));
    CHECK(!memcmp(a, out, sizeof a));
    CHECK(!fx_embcache_get(c, k0, ROWS, COLS + 1, out)); /* shape is part of the entry */
    fx_embcache_stats s = fx_embcache_get_stats(c);
    CHECK_EQ_INT(s.mem_hits, 3);
    CHECK_EQ_INT(s.misses, 3);
    CHECK_EQ_INT(s.mem_evictions, 1);
    CHECK_EQ_INT(s.disk_writes, 0);
    fx_embcache_free(c);

    /* the byte bound: an entry larger than mem_bytes is not kept */
    fx_embcache_config cfg = {0};
    cfg.mem_entries = 4;
    cfg.mem_bytes = sizeof a - 1;
    c = fx_embcache_new(&cfg);
    REQUIRE(c);
    fx_embcache_put(c, k0, ROWS, COLS, a);
    CHECK(!fx_embcache_get(c, k0, ROWS, COLS, out));
    fx_embcache_free(c);
}

TEST(embcache_disk_roundtrip_is_lossless) {
    const char *dir = fx_test_tmpdir();
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/a/b/embeddings", dir); /* created with parents */
    fx_embcache *c = new_cache(sub, 0, (uint64_t)1 << 30);
    REQUIRE(c && fx_embcache_dir(c));
    float a[ROWS * COLS], out[ROWS * COLS];
    uint8_t k[32];
    key_of(5, k);
    payload_of(5, a);
    fx_embcache_put(c, k, ROWS, COLS, a);
    fx_embcache_free(c);
    CHECK_EQ_INT(count_files(sub, ".emb"), 1);
    CHECK_EQ_INT(count_hidden(sub), 0); /* no temporary file left */

    /* the file: header fields as documented, then the raw payload */
    char path[2048];
    fx_embcache_entry_path(sub, k, path, sizeof path);
    size_t len = 0;
    uint8_t *file = (uint8_t *)fx_test_read_file(path, &len);
    REQUIRE(file);
    CHECK_EQ_INT(len, FX_EMBCACHE_HEADER + sizeof a);
    CHECK(!memcmp(file, "FLUXEMB\0", 8));
    CHECK_EQ_INT(file[8], FX_EMBCACHE_VERSION);
    CHECK_EQ_INT(file[16], ROWS);
    CHECK_EQ_INT(file[20], COLS);
    CHECK(!memcmp(file + 32, k, 32));
    uint8_t sha[32];
    fx_sha256_buf(a, sizeof a, sha);
    CHECK(!memcmp(file + 64, sha, 32));
    CHECK(!memcmp(file + FX_EMBCACHE_HEADER, a, sizeof a));
    free(file);

    /* a fresh cache (another process) reads it back bit for bit */
    c = new_cache(sub, 2, (uint64_t)1 << 30);
    memset(out, 0, sizeof out);
    CHECK(fx_embcache_get(c, k, ROWS, COLS, out));
    CHECK(!memcmp(a, out, sizeof a));
    CHECK_EQ_INT(fx_embcache_get_stats(c).disk_hits, 1);
    /* the disk hit entered memory: the next lookup does not touch the disk */
    unlink(path);
    memset(out, 0, sizeof out);
    CHECK(fx_embcache_get(c, k, ROWS, COLS, out));
    CHECK(!memcmp(a, out, sizeof a));
    CHECK_EQ_INT(fx_embcache_get_stats(c).mem_hits, 1);
    fx_embcache_free(c);
}

/* Store entry k in dir, damage its file with `damage`, and check that the
 * lookup misses, counts a corrupt entry, deletes the file and that a new
 * store repairs it. */
typedef void (*damage_fn)(const char *path, const char *dir);

static void expect_detected(int line, const char *what, damage_fn damage) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", fx_test_tmpdir(), what);
    fx_embcache *c = new_cache(dir, 0, (uint64_t)1 << 30);
    float a[ROWS * COLS], out[ROWS * COLS];
    uint8_t k[32];
    key_of(9, k);
    payload_of(9, a);
    fx_embcache_put(c, k, ROWS, COLS, a);
    char path[2048];
    fx_embcache_entry_path(dir, k, path, sizeof path);
    damage(path, dir);
    int hit = fx_embcache_get(c, k, ROWS, COLS, out);
    fx_embcache_stats s = fx_embcache_get_stats(c);
    if (hit) fx_test_fail(__FILE__, line, "%s: damaged entry was served", what);
    if (s.corrupt != 1) fx_test_fail(__FILE__, line, "%s: corrupt count %ld, want 1", what, s.corrupt);
    if (fx_test_file_exists(path)) fx_test_fail(__FILE__, line, "%s: damaged entry not deleted", what);
    fx_embcache_put(c, k, ROWS, COLS, a); /* recomputed and stored again */
    memset(out, 0, sizeof out);
    if (!fx_embcache_get(c, k, ROWS, COLS, out) || memcmp(a, out, sizeof a))
        fx_test_fail(__FILE__, line, "%s: repaired entry not served", what);
    fx_embcache_free(c);
}

static void patch_byte(const char *path, long off, uint8_t x) {
    int fd = open(path, O_RDWR);
    uint8_t b = 0;
    if (fd < 0) return;
    if (pread(fd, &b, 1, off) == 1) {
        b ^= x;
        if (pwrite(fd, &b, 1, off) != 1) b = 0;
    }
    close(fd);
}
static void flip_payload(const char *p, const char *d) { (void)d, patch_byte(p, FX_EMBCACHE_HEADER + 100, 0x01); }
static void flip_magic(const char *p, const char *d) { (void)d, patch_byte(p, 0, 0x20); }
static void bump_version(const char *p, const char *d) { (void)d, patch_byte(p, 8, 0x03); }
static void flip_shape(const char *p, const char *d) { (void)d, patch_byte(p, 20, 0x01); }
static void flip_checksum(const char *p, const char *d) { (void)d, patch_byte(p, 64, 0x80); }
static void truncate_it(const char *p, const char *d) { (void)d, (void)truncate(p, FX_EMBCACHE_HEADER + 17); }
static void truncate_header(const char *p, const char *d) { (void)d, (void)truncate(p, 40); }
static void extend_it(const char *p, const char *d) {
    (void)d;
    FILE *f = fopen(p, "ab");
    if (f) fputs("junk", f), fclose(f);
}
static void empty_it(const char *p, const char *d) { (void)d, (void)truncate(p, 0); }
/* a valid entry of another key renamed to this key's name */
static void wrong_key(const char *p, const char *dir) {
    fx_embcache *c = new_cache(dir, 0, (uint64_t)1 << 30);
    float a[ROWS * COLS];
    uint8_t k[32];
    key_of(10, k);
    payload_of(10, a);
    fx_embcache_put(c, k, ROWS, COLS, a);
    char other[2048];
    fx_embcache_entry_path(dir, k, other, sizeof other);
    (void)rename(other, p);
    fx_embcache_free(c);
}

TEST(embcache_detects_corrupt_entries) {
    expect_detected(__LINE__, "payload-bit", flip_payload);
    expect_detected(__LINE__, "magic", flip_magic);
    expect_detected(__LINE__, "version", bump_version);
    expect_detected(__LINE__, "shape", flip_shape);
    expect_detected(__LINE__, "checksum", flip_checksum);
    expect_detected(__LINE__, "truncated", truncate_it);
    expect_detected(__LINE__, "truncated-header", truncate_header);
    expect_detected(__LINE__, "too-long", extend_it);
    expect_detected(__LINE__, "empty", empty_it);
    expect_detected(__LINE__, "wrong-key", wrong_key);
}

/* fx_embcache_get(c, key) with stderr captured: its hit, and what the cache
 * wrote (malloc'd) in *text. */
static int get_capturing_stderr(fx_embcache *c, const uint8_t *key, float *out, char **text) {
    char log[2048];
    snprintf(log, sizeof log, "%s/stderr-capture.txt", fx_test_tmpdir());
    fflush(stderr);
    int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (saved < 0 || fd < 0) {
        fx_test_fail(__FILE__, __LINE__, "cannot capture stderr");
        *text = strdup("");
        return -1;
    }
    dup2(fd, 2);
    int hit = fx_embcache_get(c, key, ROWS, COLS, out);
    fflush(stderr);
    dup2(saved, 2);
    close(fd), close(saved);
    *text = fx_test_read_file(log, NULL);
    if (!*text) *text = strdup("");
    return hit;
}

TEST(embcache_corrupt_entry_reported_in_verbose_mode) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/v", fx_test_tmpdir());
    fx_logger verbose = {1}; /* -v */
    fx_embcache_config cfg = {dir, 0, 0, (uint64_t)1 << 30, &verbose};
    fx_embcache *c = fx_embcache_new(&cfg);
    float a[ROWS * COLS], out[ROWS * COLS];
    uint8_t k[32];
    key_of(3, k);
    payload_of(3, a);
    fx_embcache_put(c, k, ROWS, COLS, a);
    char path[2048], *text = NULL;
    fx_embcache_entry_path(dir, k, path, sizeof path);
    flip_payload(path, dir);
    CHECK(!get_capturing_stderr(c, k, out, &text));
    CHECK_MSG(strstr(text, "checksum mismatch") && strstr(text, "deleted") && strstr(text, path),
              "verbose report: %s", text);
    free(text);
    fx_embcache_free(c);
}

static void set_mtime(const char *path, time_t t) {
    struct timespec ts[2] = {{t, 0}, {t, 0}};
    utimensat(AT_FDCWD, path, ts, 0);
}

TEST(embcache_disk_budget_evicts_least_recently_used) {
    const char *dir = fx_test_tmpdir();
    const uint64_t entry = FX_EMBCACHE_HEADER + ROWS * COLS * 4;
    fx_embcache *c = new_cache(dir, 0, 3 * entry); /* room for three */
    float a[ROWS * COLS], out[ROWS * COLS];
    uint8_t k[5][32];
    char path[5][2048];
    time_t t0 = time(NULL) - 1000;
    for (int i = 0; i < 3; i++) {
        key_of(i, k[i]);
        payload_of(i, a);
        fx_embcache_put(c, k[i], ROWS, COLS, a);
        fx_embcache_entry_path(dir, k[i], path[i], sizeof path[i]);
        set_mtime(path[i], t0 + 10 * i); /* 0 oldest, 2 newest */
    }
    CHECK_EQ_INT(count_files(dir, ".emb"), 3);
    /* a hit refreshes entry 0: entry 1 is now the least recently used */
    CHECK(fx_embcache_get(c, k[0], ROWS, COLS, out));
    key_of(3, k[3]);
    payload_of(3, a);
    fx_embcache_put(c, k[3], ROWS, COLS, a);
    fx_embcache_entry_path(dir, k[3], path[3], sizeof path[3]);
    CHECK_EQ_INT(count_files(dir, ".emb"), 3);
    CHECK(fx_test_file_exists(path[0]));
    CHECK(!fx_test_file_exists(path[1]));
    CHECK(fx_test_file_exists(path[2]) && fx_test_file_exists(path[3]));
    CHECK_EQ_INT(fx_embcache_get_stats(c).disk_evictions, 1);
    fx_embcache_free(c);

    /* a budget smaller than one entry: nothing is written */
    c = new_cache(dir, 0, entry - 1);
    key_of(4, k[4]);
    fx_embcache_put(c, k[4], ROWS, COLS, a);
    fx_embcache_entry_path(dir, k[4], path[4], sizeof path[4]);
    CHECK(!fx_test_file_exists(path[4]));
    CHECK_EQ_INT(fx_embcache_get_stats(c).disk_writes, 0);
    fx_embcache_free(c);
}

TEST(embcache_removes_stale_temporary_files) {
    const char *dir = fx_test_tmpdir();
    char stale[2048], fresh[2048], other[2048];
    /* what a killed writer leaves (atomic_file.c naming) */
    snprintf(stale, sizeof stale, "%s/.%064d.emb.0123456789abcdef.tmp", dir, 0);
    snprintf(fresh, sizeof fresh, "%s/.%064d.emb.fedcba9876543210.tmp", dir, 1);
    snprintf(other, sizeof other, "%s/notes.txt", dir); /* not ours: untouched */
    REQUIRE(fx_test_write_file(stale, "x", 1) == 0 && fx_test_write_file(fresh, "y", 1) == 0 &&
            fx_test_write_file(other, "z", 1) == 0);
    set_mtime(stale, time(NULL) - 7200);
    fx_embcache *c = new_cache(dir, 0, (uint64_t)1 << 30);
    float a[ROWS * COLS];
    uint8_t k[32];
    key_of(1, k);
    payload_of(1, a);
    fx_embcache_put(c, k, ROWS, COLS, a);
    CHECK(!fx_test_file_exists(stale));
    CHECK(fx_test_file_exists(fresh)); /* may belong to a writer still running */
    CHECK(fx_test_file_exists(other));
    fx_embcache_free(c);
}

TEST(embcache_unusable_directory_means_memory_only) {
    char file[1024], dir[1100];
    snprintf(file, sizeof file, "%s/plain-file", fx_test_tmpdir());
    REQUIRE(fx_test_write_file(file, "x", 1) == 0);
    snprintf(dir, sizeof dir, "%s/sub", file); /* below a regular file */
    fx_embcache *c = new_cache(dir, 2, (uint64_t)1 << 30);
    REQUIRE(c);
    CHECK(fx_embcache_dir(c) == NULL);
    float a[ROWS * COLS], out[ROWS * COLS];
    uint8_t k[32];
    key_of(1, k);
    payload_of(1, a);
    fx_embcache_put(c, k, ROWS, COLS, a);
    CHECK(fx_embcache_get(c, k, ROWS, COLS, out) && !memcmp(a, out, sizeof a));
    fx_embcache_free(c);
}

/* Several processes store and read the same keys in one directory with a
 * budget that forces constant eviction: no reader may ever see a partial or
 * corrupt entry, and every hit must be exact. */
TEST(embcache_concurrent_processes_never_see_partial_entries) {
    const char *dir = fx_test_tmpdir();
    enum { PROCS = 4, ROUNDS = 150, KEYS = 6 };
    const uint64_t entry = FX_EMBCACHE_HEADER + ROWS * COLS * 4;
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        REQUIRE(pids[p] >= 0);
        if (pids[p] == 0) {
            fx_embcache *c = new_cache(dir, 0, 4 * entry);
            float want[ROWS * COLS], got[ROWS * COLS];
            int bad = 0, hits = 0;
            for (int r = 0; r < ROUNDS; r++) {
                int k = (r * 7 + p * 3) % KEYS;
                uint8_t key[32];
                key_of(k, key);
                payload_of(k, want);
                if (fx_embcache_get(c, key, ROWS, COLS, got)) {
                    hits++;
                    bad += memcmp(want, got, sizeof got) != 0;
                } else {
                    fx_embcache_put(c, key, ROWS, COLS, want);
                }
            }
            bad += (int)fx_embcache_get_stats(c).corrupt;
            fx_embcache_free(c);
            _exit(bad ? 1 : hits ? 0 : 2);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int status = 0;
        waitpid(pids[p], &status, 0);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d: status %d (1 = bad entry seen)", p,
                  status);
    }
    CHECK(count_files(dir, ".emb") <= 4);
    CHECK_EQ_INT(count_hidden(dir), 0);
}

/* ------------------------------------------------------------------------ */
/* The context's cache                                                      */
/* ------------------------------------------------------------------------ */

static flux_ctx *load_ctx(const char *model, const char *cache_dir, int no_disk, int f32) {
    flux_options opt;
    flux_options_init(&opt);
    opt.cache_dir = cache_dir;
    opt.no_disk_cache = no_disk;
    opt.precision = f32 ? FLUX_PRECISION_F32 : FLUX_PRECISION_DEFAULT;
    flux_ctx *ctx = flux_new(&opt);
    if (ctx && flux_load(ctx, model, NULL) != FLUX_OK) {
        printf("load %s: %s\n", model, flux_error(ctx));
        flux_free(ctx);
        return NULL;
    }
    return ctx;
}

/* A copy of the golden model folder: every entry symlinked except the
 * text_encoder folder, whose files are copied (so tests can change them). */
static void copy_model(const char *dst) {
    char cmd[4096];
    const char *src = fx_test_path("golden/model");
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/text_encoder' && for f in '%s'/*; do b=$(basename \"$f\"); "
             "[ \"$b\" = text_encoder ] || ln -s \"$(readlink -f \"$f\")\" '%s/'\"$b\"; done && "
             "cp -L '%s'/text_encoder/* '%s/text_encoder/'",
             dst, src, dst, src, dst);
    char *out = NULL;
    int rc = fx_test_run(cmd, &out);
    if (rc != 0) printf("copy_model: %s\n", out);
    free(out);
}

TEST(embcache_context_keys_model_and_kernel_path) {
    char cache[1024], model2[1024];
    snprintf(cache, sizeof cache, "%s/cache", fx_test_tmpdir());
    snprintf(model2, sizeof model2, "%s/model2", fx_test_tmpdir());
    flux_ctx *ctx = load_ctx(fx_test_path("golden/model"), cache, 0, 0);
    REQUIRE(ctx);
    int32_t ids[16];
    uint8_t mask[16], key[32], key2[32];
    for (int i = 0; i < 16; i++) ids[i] = 100 + i, mask[i] = i < 12;
    float emb[16 * 4], out[16 * 4];
    for (int i = 0; i < 64; i++) emb[i] = (float)i * 0.37f - 3.0f;

    CHECK(!fx_text_cache_lookup(ctx, ids, mask, 16, 4, out, key));
    fx_text_cache_store(ctx, key, 16, 4, emb);
    CHECK(fx_text_cache_lookup(ctx, ids, mask, 16, 4, out, key2));
    CHECK(!memcmp(emb, out, sizeof emb) && !memcmp(key, key2, 32));
    CHECK_EQ_INT(count_files(cache, ".emb"), 1);
    flux_free(ctx);

    /* another context: from disk */
    ctx = load_ctx(fx_test_path("golden/model"), cache, 0, 0);
    REQUIRE(ctx);
    memset(out, 0, sizeof out);
    CHECK(fx_text_cache_lookup(ctx, ids, mask, 16, 4, out, key2));
    CHECK(!memcmp(emb, out, sizeof emb));
    flux_free(ctx);

    /* the f32 precision mode is another kernel path where the default one
     * uses bf16 dot products: its own entries. Without them (an AVX2-only
     * CPU) both modes run the same kernels and share the entry. */
    ctx = load_ctx(fx_test_path("golden/model"), cache, 0, 0);
    REQUIRE(ctx);
    int default_bf16 = fx_kernels_uses_bf16_dot(ctx->kernels);
    flux_free(ctx);
    ctx = load_ctx(fx_test_path("golden/model"), cache, 0, 1);
    REQUIRE(ctx);
    CHECK(!fx_kernels_uses_bf16_dot(ctx->kernels));
    if (default_bf16) {
        CHECK(!fx_text_cache_lookup(ctx, ids, mask, 16, 4, out, key2));
        CHECK(memcmp(key, key2, 32));
    } else {
        CHECK(fx_text_cache_lookup(ctx, ids, mask, 16, 4, out, key2));
        CHECK(!memcmp(key, key2, 32) && !memcmp(emb, out, sizeof emb));
    }
    flux_free(ctx);

    /* a different text-encoder config is another model */
    copy_model(model2);
    char cfg[1200];
    snprintf(cfg, sizeof cfg, "%s/text_encoder/config.json", model2);
    FILE *f = fopen(cfg, "ab");
    REQUIRE(f);
    fputs("\n", f); /* same JSON, other bytes */
    fclose(f);
    ctx = load_ctx(model2, cache, 0, 0);
    REQUIRE(ctx);
    CHECK(!fx_text_cache_lookup(ctx, ids, mask, 16, 4, out, key2));
    CHECK(memcmp(key, key2, 32));
    flux_free(ctx);

    /* --no-cache: memory only, nothing written */
    char cache2[1024];
    snprintf(cache2, sizeof cache2, "%s/cache2", fx_test_tmpdir());
    ctx = load_ctx(fx_test_path("golden/model"), cache2, 1, 0);
    REQUIRE(ctx);
    CHECK(!fx_text_cache_lookup(ctx, ids, mask, 16, 4, out, key2));
    fx_text_cache_store(ctx, key2, 16, 4, emb);
    CHECK(fx_text_cache_lookup(ctx, ids, mask, 16, 4, out, key2)); /* memory */
    CHECK(!fx_test_file_exists(cache2));
    flux_free(ctx);
}

TEST(embcache_default_directory) {
    char buf[1024];
    const char *home = getenv("HOME"), *xdg = getenv("XDG_CACHE_HOME");
    char *saved_home = home ? strdup(home) : NULL, *saved_xdg = xdg ? strdup(xdg) : NULL;
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    setenv("HOME", "/home/u", 1);
    CHECK(fx_embcache_default_dir(buf, sizeof buf) && !strcmp(buf, "/x/cache/flux/embeddings"));
    setenv("XDG_CACHE_HOME", "relative/cache", 1); /* invalid per the XDG spec: ignored */
    CHECK(fx_embcache_default_dir(buf, sizeof buf) && !strcmp(buf, "/home/u/.cache/flux/embeddings"));
    unsetenv("XDG_CACHE_HOME");
    CHECK(fx_embcache_default_dir(buf, sizeof buf) && !strcmp(buf, "/home/u/.cache/flux/embeddings"));
    unsetenv("HOME");
    CHECK(!fx_embcache_default_dir(buf, sizeof buf));
    if (saved_home) setenv("HOME", saved_home, 1);
    if (saved_xdg) setenv("XDG_CACHE_HOME", saved_xdg, 1);
    free(saved_home);
    free(saved_xdg);
}

/* ------------------------------------------------------------------------ */
/* flux_encode_text through the cache                                       */
/* ------------------------------------------------------------------------ */

static float *encode(flux_ctx *ctx, const char *prompt) {
    size_t n = (size_t)FLUX_TEXT_TOKENS * FX_KLEIN_N_TEXT_STATES * (size_t)ctx->model->qwen3.hidden;
    float *out = malloc(n * sizeof *out);
    if (flux_encode_text(ctx, prompt, out) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "flux_encode_text: %s", flux_error(ctx));
        free(out);
        return NULL;
    }
    return out;
}

static size_t emb_bytes(const flux_ctx *ctx) {
    return (size_t)FLUX_TEXT_TOKENS * FX_KLEIN_N_TEXT_STATES * (size_t)ctx->model->qwen3.hidden * sizeof(float);
}

/* <tmp>/model, a copy of the golden model (copy_model), and the cache
 * folder <tmp>/cache (both buffers of 1024 bytes). */
static void model_copy_and_cache(char *model, char *cache) {
    snprintf(cache, 1024, "%s/cache", fx_test_tmpdir());
    snprintf(model, 1024, "%s/model", fx_test_tmpdir());
    copy_model(model);
}

/* The embeddings of `prompt` from a fresh context on model with the disk
 * cache in cache_dir, and their size; NULL after a failure. */
static float *encode_cached(const char *model, const char *cache_dir, const char *prompt, size_t *bytes) {
    flux_ctx *ctx = load_ctx(model, cache_dir, 0, 0);
    if (!ctx) {
        fx_test_fail(__FILE__, __LINE__, "no context on %s", model);
        return NULL;
    }
    float *emb = encode(ctx, prompt);
    *bytes = emb_bytes(ctx);
    flux_free(ctx);
    return emb;
}

TEST(embcache_hit_never_loads_the_text_encoder) {
    char cache[1024];
    snprintf(cache, sizeof cache, "%s/cache", fx_test_tmpdir());
    const char *model = fx_test_path("golden/model");
    int paths = 1; /* kernel paths seen: f32 differs from default only with bf16 dot products */
    for (int p = 0; p < 2; p++) { /* default precision, then f32 */
        /* uncached reference: no disk cache, fresh context */
        flux_ctx *ctx = load_ctx(model, NULL, 1, p);
        REQUIRE(ctx);
        float *ref = encode(ctx, "a cat on a skateboard");
        size_t bytes = emb_bytes(ctx);
        REQUIRE(ref);
        CHECK(ctx->text_encoder != NULL);
        /* the same prompt again: from memory, same bits */
        flux_release_text_encoder(ctx);
        float *again = encode(ctx, "a cat on a skateboard");
        CHECK(again && !memcmp(ref, again, bytes));
        CHECK(ctx->text_encoder == NULL && !fx_wset_data_loaded(ctx->model->text_encoder_w));
        free(again);
        flux_free(ctx);

        /* first run with the disk cache: encodes and stores (the f32 pass
         * finds the default pass's entry when both run the same kernels) */
        ctx = load_ctx(model, cache, 0, p);
        REQUIRE(ctx);
        int new_path = p == 0 || paths == 2;
        if (p == 0 && fx_kernels_uses_bf16_dot(ctx->kernels)) paths = 2;
        float *first = encode(ctx, "a cat on a skateboard");
        CHECK(first && !memcmp(ref, first, bytes));
        CHECK((ctx->text_encoder != NULL) == new_path);
        flux_free(ctx);

        /* second run: from disk, bit-identical, the encoder never built and
         * its weights never mapped */
        ctx = load_ctx(model, cache, 0, p);
        REQUIRE(ctx);
        float *second = encode(ctx, "a cat on a skateboard");
        CHECK(second && !memcmp(ref, second, bytes));
        CHECK(ctx->text_encoder == NULL);
        CHECK(!fx_wset_data_loaded(ctx->model->text_encoder_w));
        CHECK_EQ_INT(fx_embcache_get_stats(ctx->embcache).disk_hits, 1);
        free(first), free(second), free(ref);
        flux_free(ctx);
    }
    CHECK_EQ_INT(count_files(cache, ".emb"), paths); /* one entry per kernel path */
}

/* Overwrite the data section of every text-encoder shard of a model copy
 * with 0x7f bytes (bf16 ~3.4e38: the encoder's output becomes garbage).
 * keep_mtime: restore each file's modification time afterwards, so the
 * model identity (which stats the shards) stays the same. */
static void spoil_text_encoder(const char *model, int keep_mtime) {
    char index[1200];
    snprintf(index, sizeof index, "%s/text_encoder", model);
    DIR *d = opendir(index);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 12 || strcmp(e->d_name + n - 12, ".safetensors")) continue;
        char path[2400];
        snprintf(path, sizeof path, "%s/%s", index, e->d_name);
        int fd = open(path, O_RDWR);
        uint8_t len8[8];
        struct stat st;
        if (fd < 0 || pread(fd, len8, 8, 0) != 8 || fstat(fd, &st) != 0) {
            if (fd >= 0) close(fd);
            continue;
        }
        uint64_t hl = 0;
        for (int i = 7; i >= 0; i--) hl = hl << 8 | len8[i];
        size_t data = (size_t)st.st_size - 8 - hl;
        uint8_t *junk = malloc(data);
        memset(junk, 0x7f, data);
        if (pwrite(fd, junk, data, (off_t)(8 + hl)) != (ssize_t)data) printf("spoil: short write\n");
        struct timespec times[2] = {st.st_atim, st.st_mtim};
        if (keep_mtime) futimens(fd, times);
        free(junk);
        close(fd);
    }
    closedir(d);
}

TEST(embcache_hit_works_with_unusable_encoder_weights) {
    char cache[1024], model[1024];
    model_copy_and_cache(model, cache);
    size_t bytes = 0;
    float *good = encode_cached(model, cache, "a red apple on a wooden table", &bytes);
    REQUIRE(good);

    spoil_text_encoder(model, 1);
    /* the cache serves the prompt without reading a weight: same bits as
     * before the damage */
    float *cached = encode_cached(model, cache, "a red apple on a wooden table", &bytes);
    CHECK(cached && !memcmp(good, cached, bytes));
    /* proof that the damage matters: without the cache the encoder runs on it */
    flux_ctx *ctx = load_ctx(model, NULL, 1, 0);
    REQUIRE(ctx);
    float *spoiled = encode(ctx, "a red apple on a wooden table");
    CHECK(spoiled && memcmp(good, spoiled, bytes));
    flux_free(ctx);
    /* a corrupt entry is recomputed (here: from the damaged weights) */
    DIR *d = opendir(cache);
    REQUIRE(d);
    struct dirent *e;
    char entry[2400] = "";
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".emb")) snprintf(entry, sizeof entry, "%s/%s", cache, e->d_name);
    closedir(d);
    REQUIRE(entry[0]);
    patch_byte(entry, FX_EMBCACHE_HEADER + 4, 0x40);
    ctx = load_ctx(model, cache, 0, 0);
    REQUIRE(ctx);
    float *recomputed = encode(ctx, "a red apple on a wooden table");
    CHECK(recomputed && spoiled && !memcmp(recomputed, spoiled, bytes));
    CHECK_EQ_INT(fx_embcache_get_stats(ctx->embcache).corrupt, 1);
    flux_free(ctx);
    free(good), free(cached), free(spoiled), free(recomputed);
}

TEST(embcache_new_weights_are_another_model) {
    /* Same config, tokenizer and tensor table, other weight files (a
     * fine-tune written over the original): entries are not shared. */
    char cache[1024], model[1024];
    model_copy_and_cache(model, cache);
    size_t bytes = 0;
    float *good = encode_cached(model, cache, "a red apple on a wooden table", &bytes);
    REQUIRE(good);
    spoil_text_encoder(model, 0);
    flux_ctx *ctx = load_ctx(model, cache, 0, 0);
    REQUIRE(ctx);
    float *now = encode(ctx, "a red apple on a wooden table");
    CHECK(now && memcmp(good, now, bytes)); /* encoded from the new weights */
    CHECK_EQ_INT(fx_embcache_get_stats(ctx->embcache).disk_hits, 0);
    CHECK(ctx->text_encoder != NULL);
    flux_free(ctx);
    CHECK_EQ_INT(count_files(cache, ".emb"), 2);
    free(good), free(now);
}

/* ------------------------------------------------------------------------ */
/* Whole generations                                                        */
/* ------------------------------------------------------------------------ */

static flux_image *generate(flux_ctx *ctx, const char *prompt) {
    flux_params p;
    flux_params_init(&p);
    p.prompt = prompt;
    p.width = 64, p.height = 64, p.steps = 2, p.seed = 3;
    flux_image *img = NULL;
    if (flux_generate(ctx, &p, &img) != FLUX_OK) fx_test_fail(__FILE__, __LINE__, "flux_generate: %s", flux_error(ctx));
    return img;
}

TEST(embcache_generation_from_the_cache_is_bit_identical) {
    char cache[1024], model[1024];
    model_copy_and_cache(model, cache);
    const char *prompt = "a cat on a skateboard";
    /* uncached, on the untouched golden model */
    flux_ctx *ctx = load_ctx(fx_test_path("golden/model"), NULL, 1, 0);
    REQUIRE(ctx);
    flux_image *ref = generate(ctx, prompt);
    flux_free(ctx);
    /* first cached run: miss, stored */
    ctx = load_ctx(model, cache, 0, 0);
    REQUIRE(ctx);
    flux_image *first = generate(ctx, prompt);
    flux_free(ctx);
    CHECK(fx_test_same_pixels(ref, first));
    /* spoil the text encoder (identity unchanged): the prompt must come from
     * the cache, and the image is the same bit for bit */
    spoil_text_encoder(model, 1);
    ctx = load_ctx(model, cache, 0, 0);
    REQUIRE(ctx);
    flux_image *second = generate(ctx, prompt);
    CHECK_EQ_INT(fx_embcache_get_stats(ctx->embcache).disk_hits, 1);
    flux_free(ctx);
    CHECK_MSG(fx_test_same_pixels(ref, second), "image from cached embeddings differs");
    flux_image_free(ref), flux_image_free(first), flux_image_free(second);
}

/* An entry name taken by a FIFO or a directory: a miss, reported precisely
 * (a FIFO is deleted, a directory left in place and said so), never a hang
 * on the FIFO. */
static void odd_entry(void *arg) {
    const int dir_case = *(const int *)arg;
    char dir[1024], path[2048], *text = NULL;
    snprintf(dir, sizeof dir, "%s/odd%d", fx_test_tmpdir(), dir_case);
    fx_logger verbose = {1};
    fx_embcache_config cfg = {dir, 0, 0, (uint64_t)1 << 30, &verbose};
    fx_embcache *c = fx_embcache_new(&cfg);
    REQUIRE(c);
    float out[ROWS * COLS];
    uint8_t k[32];
    key_of(4, k);
    fx_embcache_entry_path(dir, k, path, sizeof path);
    REQUIRE(dir_case ? mkdir(path, 0755) == 0 : mkfifo(path, 0644) == 0);
    CHECK(!get_capturing_stderr(c, k, out, &text));
    CHECK_EQ_INT(fx_embcache_get_stats(c).corrupt, 1);
    if (dir_case) {
        CHECK_MSG(strstr(text, "is a directory, not a cache entry; left in place") && !strstr(text, "deleted"),
                  "report: %s", text);
        CHECK(fx_test_file_exists(path));
    } else {
        CHECK_MSG(strstr(text, "is a FIFO, not a cache entry; deleted"), "report: %s", text);
        CHECK(!fx_test_file_exists(path));
        /* and the entry can be stored and found again */
        float a[ROWS * COLS];
        payload_of(4, a);
        fx_embcache_put(c, k, ROWS, COLS, a);
        CHECK(fx_embcache_get(c, k, ROWS, COLS, out) && !memcmp(a, out, sizeof a));
    }
    free(text);
    fx_embcache_free(c);
}

TEST(embcache_fifo_or_directory_entry_is_a_bad_entry) {
    int fifo = 0, dir = 1;
    CHECK_EQ_INT(fx_test_fork(odd_entry, &fifo, 20), 0);
    CHECK_EQ_INT(fx_test_fork(odd_entry, &dir, 20), 0);
}
