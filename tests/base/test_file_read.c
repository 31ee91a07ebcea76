/*
 * test_file_read.c — the one open of every file reader (src/base/file_read.c):
 * a FIFO, a device or a directory where a file is expected is refused at
 * once ("not a regular file (a FIFO)"), never waited on; and the library
 * runs on threads with small stacks (no large arrays on the stack).
 */
#include "tests/test.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/file_read.h"
#include "src/base/json.h"
#include "src/base/npy.h"

static void readers_refuse(void *arg) {
    const char *path = arg;
    uint8_t *data = (uint8_t *)1;
    size_t n = 1;
    fx_err err = {0};
    CHECK_EQ_INT(fx_read_file(path, NULL, 1 << 20, "a test", &data, &n, &err), FLUX_ERR_IO);
    CHECK(data == NULL && n == 0);
    CHECK_MSG(strstr(err.msg, "not a regular file"), "%s", err.msg);
    fx_err_clear(&err);
    CHECK(fx_json_parse_file(path, NULL, &err) == NULL);
    CHECK_MSG(strstr(err.msg, "not a regular file"), "json: %s", err.msg);
    fx_npy a;
    memset(&a, 0, sizeof a);
    fx_err_clear(&err);
    CHECK(fx_npy_read(path, &a, &err) != FLUX_OK);
    CHECK_MSG(strstr(err.msg, "not a regular file"), "npy: %s", err.msg);
    flux_image *img = NULL;
    CHECK_EQ_INT(flux_image_load(NULL, path, &img), FLUX_ERR_IO);
    CHECK(img == NULL);
}

TEST(file_read_refuses_fifos_devices_and_directories) {
    const char *fifo = fx_test_tmp_path("pipe");
    REQUIRE(mkfifo(fifo, 0644) == 0);
    /* nobody writes to the FIFO: a blocking open would wait forever */
    CHECK_EQ_INT(fx_test_fork(readers_refuse, (void *)fifo, 20), 0);
    fx_err err = {0};
    struct stat st;
    CHECK(fx_open_regular(fifo, &st, &err) < 0);
    CHECK_MSG(strstr(err.msg, "not a regular file (a FIFO)") && strstr(err.msg, fifo), "%s", err.msg);
    CHECK(fx_open_regular("/dev/null", &st, &err) < 0);
    CHECK_MSG(strstr(err.msg, "not a regular file (a character device)"), "%s", err.msg);
    CHECK(fx_open_regular(fx_test_tmpdir(), &st, &err) < 0);
    CHECK_MSG(strstr(err.msg, "not a regular file (a directory)"), "%s", err.msg);
    CHECK(fx_open_regular(fx_test_tmp_path("missing"), &st, &err) < 0);
    CHECK_MSG(strstr(err.msg, "cannot open") && strstr(err.msg, strerror(ENOENT)), "%s", err.msg);
    /* a regular file opens in blocking mode */
    const char *file = fx_test_tmp_path("file.txt");
    REQUIRE(fx_test_write_file(file, "abc", 3) == 0);
    int fd = fx_open_regular(file, &st, &err);
    REQUIRE(fd >= 0);
    CHECK(st.st_size == 3 && S_ISREG(st.st_mode));
    char buf[8];
    CHECK(read(fd, buf, sizeof buf) == 3);
    close(fd);
}

/* ------------------------------------------------------------ small stacks */

typedef struct small_stack_job {
    const char *model, *cache;
    int ok;
    char msg[1200];
} small_stack_job;

/* Load, encode a prompt through the disk cache (hashing the model's files),
 * generate an image from it and save it: the library's deepest paths. */
static void *small_stack_main(void *arg) {
    small_stack_job *j = arg;
    flux_options o;
    flux_options_init(&o);
    o.threads = 1;
    o.cache_dir = j->cache;
    flux_ctx *ctx = flux_new(&o);
    flux_params p;
    flux_params_init(&p);
    p.prompt = "a cat on a small stack";
    p.width = p.height = 64, p.steps = 1, p.seed = 5;
    flux_image *img = NULL;
    j->ok = ctx && flux_load(ctx, j->model, NULL) == FLUX_OK && flux_generate(ctx, &p, &img) == FLUX_OK &&
            flux_image_save(ctx, img, fx_test_tmp_path("small.png")) == FLUX_OK;
    snprintf(j->msg, sizeof j->msg, "%s", flux_error(ctx));
    flux_image_free(img);
    flux_free(ctx);
    return NULL;
}

static void run_on_small_stack(void *arg) {
    small_stack_job *j = arg;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    /* 64 KiB: smaller than musl's default thread stack (128 KiB); the
     * sanitizers' red zones need more */
#if defined(__SANITIZE_ADDRESS__)
    size_t stack = 256 << 10;
#else
    size_t stack = 64 << 10;
#endif
    REQUIRE(pthread_attr_setstacksize(&attr, stack) == 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, &attr, small_stack_main, j) == 0);
    pthread_join(t, NULL);
    pthread_attr_destroy(&attr);
    CHECK_MSG(j->ok, "generation on a %zu KiB stack failed: %s", stack >> 10, j->msg);
}

TEST(library_runs_on_a_small_thread_stack) {
    char model[1024], cache[1100];
    snprintf(model, sizeof model, "%s", fx_test_path("golden/model"));
    snprintf(cache, sizeof cache, "%s/cache", fx_test_tmpdir());
    small_stack_job j = {model, cache, 0, ""};
    CHECK_EQ_INT(fx_test_fork(run_on_small_stack, &j, 120), 0);
    CHECK(fx_test_file_exists(fx_test_tmp_path("small.png")));
}
