/*
 * test_main.c — runner for every TEST() linked into flux-tests.
 *
 * Usage: flux-tests [--list] [--no-fork] [--timeout S] [PATTERN...]
 *   PATTERN selects tests whose name contains it (any of them).
 * Each test runs in a forked child with its own temporary directory, so a
 * crash, an abort from a sanitizer or a hang (default 600 s) fails that test
 * only. The parent never starts OpenMP threads, so forking is safe.
 */

#include "test.h"

#include "src/model/ctx.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TESTS 4096

typedef struct {
    const char *name;
    fx_test_fn fn;
    const char *file;
} test_entry;

static test_entry g_tests[MAX_TESTS];
static int g_ntests;

/* Child-side state (each test runs in its own process). */
static int g_fail_count;
static int g_skipped;
static char g_tmpdir[512];

void fx_test_register(const char *name, fx_test_fn fn, const char *file) {
    if (g_ntests < MAX_TESTS) g_tests[g_ntests++] = (test_entry){name, fn, file};
}

void fx_test_fail(const char *file, int line, const char *fmt, ...) {
    const char *base = strrchr(file, '/');
    fprintf(stdout, "    %s:%d: ", base ? base + 1 : file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
    g_fail_count++;
}

void fx_test_skip(const char *reason) {
    fprintf(stdout, "    skipped: %s\n", reason);
    fflush(stdout);
    g_skipped = 1;
}

int fx_test_failed(void) { return g_fail_count > 0; }

int fx_test_in_ci(void) {
    const char *ci = getenv("CI");
    return ci && (!strcmp(ci, "true") || !strcmp(ci, "1"));
}

const char *fx_test_path(const char *rel) {
    static char buf[4096];
    const char *root = getenv("FLUX_TEST_DIR");
#ifdef FLUX_TEST_DIR
    if (!root) root = FLUX_TEST_DIR;
#endif
    if (!root) root = "tests";
    snprintf(buf, sizeof buf, "%s/%s", root, rel);
    return buf;
}

const char *fx_test_flux_bin(void) {
    const char *b = getenv("FLUX_BIN");
    return b ? b : "./flux";
}

const char *fx_test_tmpdir(void) { return g_tmpdir; }

int fx_test_bf16_dot(flux_precision prec) {
    flux_options o;
    flux_options_init(&o);
    o.threads = 1;
    o.precision = prec;
    flux_ctx *ctx = flux_new(&o);
    int dot = ctx && fx_kernels_uses_bf16_dot(ctx->kernels);
    flux_free(ctx);
    return dot;
}

void fx_test_rng_seed(fx_test_rng *r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ull + 1; }

uint64_t fx_test_rng_u64(fx_test_rng *r) {
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

float fx_test_rng_uniform(fx_test_rng *r) {
    return (float)((double)(fx_test_rng_u64(r) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

float fx_test_rng_normal(fx_test_rng *r) {
    double u1, u2;
    do u1 = (double)(fx_test_rng_u64(r) >> 11) / 9007199254740992.0; while (u1 <= 0);
    u2 = (double)(fx_test_rng_u64(r) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

void fx_test_fill_uniform(fx_test_rng *r, float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = scale * fx_test_rng_uniform(r);
}

double fx_test_rel_err(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > num || d != d) num = d;
        if (fabs((double)b[i]) > den) den = fabs((double)b[i]);
    }
    if (num != num) return INFINITY;
    return den > 0 ? num / den : num;
}

double fx_test_max_abs_err(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m || d != d) m = d;
    }
    return m;
}

/* All of a stream (malloc'd, NUL-terminated), growing from cap bytes. */
static char *read_stream(FILE *f, size_t cap, size_t *len) {
    size_t n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (n == cap) buf = realloc(buf, (cap *= 2) + 1);
        size_t r = fread(buf + n, 1, cap - n, f);
        if (r == 0) break;
        n += r;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

char *fx_test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = read_stream(f, 1 << 16, len);
    fclose(f);
    return buf;
}

int fx_test_write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, len, f);
    return (fclose(f) == 0 && w == len) ? 0 : -1;
}

int fx_test_run(const char *cmd, char **output) {
    char full[8192];
    snprintf(full, sizeof full, "(%s) 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    char *buf = read_stream(p, 4096, NULL);
    int st = pclose(p);
    if (output) *output = buf; else free(buf);
    if (st == -1) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

int fx_test_fork(void (*fn)(void *), void *arg, int seconds) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fx_test_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
        return 3;
    }
    if (pid == 0) {
        alarm((unsigned)seconds);
        g_fail_count = 0;
        fn(arg);
        fflush(stdout);
        _exit(g_fail_count ? 1 : 0);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(st)) {
        if (WEXITSTATUS(st)) g_fail_count++; /* the child printed its failures */
        return WEXITSTATUS(st) ? 1 : 0;
    }
    int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    fx_test_fail(__FILE__, __LINE__, "the child %s (signal %d)", sig == SIGALRM ? "timed out" : "was killed", sig);
    return sig == SIGALRM ? 2 : 3;
}

const char *fx_test_tmp_path(const char *name) {
    static char buf[4][1024];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", g_tmpdir, name);
    return b;
}

int fx_test_dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

int fx_test_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

const char *fx_test_tool(const char *name) {
    static char buf[PATH_MAX + 64];
    const char *tools = getenv("FLUX_TOOLS");
    if (tools) {
        snprintf(buf, sizeof buf, "%s/%s", tools, name);
        if (access(buf, X_OK) == 0) return buf;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(buf, sizeof buf, "%s/tools/%s", exe, name);
        if (access(buf, X_OK) == 0) return buf;
    }
    return NULL;
}

int fx_test_run_tool(const char *file, int line, const char *name, const char *args) {
    const char *tool = fx_test_tool(name);
    if (!tool) {
        fx_test_fail(file, line, "%s not found: build it with `make tools` in the tests' BUILD directory or set FLUX_TOOLS",
                     name);
        return -1;
    }
    size_t size = strlen(tool) + strlen(args) + 8;
    char *cmd = malloc(size), *out = NULL;
    if (!cmd) return -1;
    snprintf(cmd, size, "'%s' %s", tool, args);
    int rc = fx_test_run(cmd, &out);
    if (rc != 0) fx_test_fail(file, line, "%s: exit %d: %s", cmd, rc, out ? out : "");
    free(cmd);
    free(out);
    return rc ? -1 : 0;
}

int fx_test_same_pixels(const flux_image *a, const flux_image *b) {
    return a && b && a->width == b->width && a->height == b->height && a->channels == b->channels &&
           !memcmp(a->data, b->data, (size_t)a->width * a->height * a->channels);
}

int fx_test_max_pixel_diff(const flux_image *a, const flux_image *b) {
    if (!a || !b || a->width != b->width || a->height != b->height || a->channels != b->channels) return 999;
    int worst = 0;
    for (size_t i = 0; i < (size_t)a->width * a->height * a->channels; i++) {
        int d = abs((int)a->data[i] - (int)b->data[i]);
        if (d > worst) worst = d;
    }
    return worst;
}

void fx_test_put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

uint32_t fx_test_crc32(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    }
    return c ^ 0xFFFFFFFFu;
}

static void remove_tree(const char *path) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", path);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int matches(const char *name, int npat, char **pat) {
    if (npat == 0) return 1;
    for (int i = 0; i < npat; i++)
        if (strstr(name, pat[i])) return 1;
    return 0;
}

/* Exit codes of a child: 0 pass, 1 fail, 2 skip. */
static int run_child(const test_entry *t) {
    /* a fresh embedding cache per test (src/pipeline/embcache.h), also for the flux
     * processes it starts: no hits from other tests or runs, nothing left
     * in $HOME/.cache */
    char cache[sizeof g_tmpdir + 16];
    snprintf(cache, sizeof cache, "%s/xdg-cache", g_tmpdir);
    setenv("XDG_CACHE_HOME", cache, 1);
    g_fail_count = 0;
    g_skipped = 0;
    t->fn();
    fflush(stdout);
    if (g_fail_count) return 1;
    return g_skipped ? 2 : 0;
}

int main(int argc, char **argv) {
    int no_fork = 0, list = 0, timeout_s = 600;
    char *pats[256];
    int npat = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-fork")) no_fork = 1;
        else if (!strcmp(argv[i], "--list")) list = 1;
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) timeout_s = atoi(argv[++i]);
        else if (npat < 256) pats[npat++] = argv[i];
    }
    if (list) {
        for (int i = 0; i < g_ntests; i++)
            if (matches(g_tests[i].name, npat, pats)) printf("%s\n", g_tests[i].name);
        return 0;
    }
    const char *tmproot = getenv("TMPDIR");
    if (!tmproot) tmproot = "/tmp";
    int passed = 0, failed = 0, skipped = 0;
    int ci = fx_test_in_ci();
    for (int i = 0; i < g_ntests; i++) {
        const test_entry *t = &g_tests[i];
        if (!matches(t->name, npat, pats)) continue;
        snprintf(g_tmpdir, sizeof g_tmpdir, "%s/flux-test-%d-XXXXXX", tmproot, (int)getpid());
        if (!mkdtemp(g_tmpdir)) {
            fprintf(stdout, "FAIL %s: cannot create temp dir: %s\n", t->name, strerror(errno));
            failed++;
            continue;
        }
        double t0 = now_s();
        int rc;
        if (no_fork) {
            rc = run_child(t);
        } else {
            fflush(stdout);
            fflush(stderr);
            pid_t pid = fork();
            if (pid == 0) {
                alarm((unsigned)timeout_s);
                _exit(run_child(t));
            }
            int st = 0;
            if (pid < 0 || waitpid(pid, &st, 0) < 0) rc = 1;
            else if (WIFEXITED(st)) rc = WEXITSTATUS(st);
            else {
                fprintf(stdout, "    killed by signal %d%s\n", WTERMSIG(st),
                        WTERMSIG(st) == SIGALRM ? " (timeout)" : "");
                rc = 1;
            }
        }
        double dt = now_s() - t0;
        remove_tree(g_tmpdir);
        if (rc == 2 && ci) {
            fprintf(stdout, "FAIL %s (skipped under CI=true, which is not allowed)\n", t->name);
            failed++;
        } else if (rc == 0) {
            fprintf(stdout, "ok   %s (%.2fs)\n", t->name, dt);
            passed++;
        } else if (rc == 2) {
            fprintf(stdout, "skip %s\n", t->name);
            skipped++;
        } else {
            fprintf(stdout, "FAIL %s (%.2fs)\n", t->name, dt);
            failed++;
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
