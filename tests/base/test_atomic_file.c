/*
 * test_atomic_file.c — atomic writes under signals and limits
 * (src/base/atomic_file.c): SIGINT/SIGTERM/SIGHUP during a write remove the
 * temporary file and still end the process with the signal; SIGXFSZ is
 * ignored during the write so a file-size limit is an error ("File too
 * large") that removes the file; a killed writer's leftovers are removed
 * the next time the destination is written; signal handlers of the
 * application are left alone, and SIGINT/SIGTERM/SIGHUP entirely unless
 * the application allows FLUX_SIGNALS_TEMP_FILES (the CLI does).
 */
#include "tests/test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "src/base/atomic_file.h"

/* Entries of dir whose name starts with '.' (temporary files). */
static int hidden_files(const char *dir) {
    char cmd[1200], *out = NULL;
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c '^\\.' || true", dir);
    fx_test_run(cmd, &out);
    int n = out ? atoi(out) : -1;
    free(out);
    return n;
}

/* Child: open an atomic file, write some bytes, then receive `sig` (raised
 * while the temporary file exists). Exit 0 means the signal did not end it. */
static int signal_during_write(const char *dir, int sig, int app_handler) {
    pid_t pid = fork();
    if (pid == 0) {
        /* the application's choice, kept; else the default (a shell starts
         * background jobs with SIGINT ignored, which the child inherits) */
        signal(sig, app_handler ? SIG_IGN : SIG_DFL);
        flux_set_signals(FLUX_SIGNALS_ALL); /* as the CLI does */
        char path[1200];
        snprintf(path, sizeof path, "%s/out.bin", dir);
        fx_atomic_file af;
        fx_err err = {0};
        if (fx_atomic_open(&af, path, &err) != FLUX_OK) _exit(10);
        fputs("partial", af.f);
        fflush(af.f);
        raise(sig);
        fx_atomic_abort(&af);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? WTERMSIG(st) : -WEXITSTATUS(st);
}

TEST(atomic_file_signals_remove_the_temporary_file) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        char dir[1100];
        snprintf(dir, sizeof dir, "%s/sig%d", fx_test_tmpdir(), sigs[i]);
        mkdir(dir, 0755);
        int how = signal_during_write(dir, sigs[i], 0);
        CHECK_MSG(how == sigs[i], "signal %d: the writer ended with %d (signal > 0, -exit code)", sigs[i], how);
        CHECK_MSG(fx_test_dir_entries(dir) == 0, "signal %d left %d files", sigs[i], fx_test_dir_entries(dir));
        /* an application that ignores the signal keeps its choice (the
         * write goes on and is aborted normally) */
        how = signal_during_write(dir, sigs[i], 1);
        CHECK_MSG(how == 0, "signal %d ignored by the application: the writer ended with %d", sigs[i], how);
        CHECK_EQ_INT(fx_test_dir_entries(dir), 0);
    }
    /* outside writes the dispositions are the defaults again */
    fx_atomic_file af;
    fx_err err = {0};
    REQUIRE(fx_atomic_write(fx_test_tmp_path("done.bin"), "x", 1, &err) == FLUX_OK);
    struct sigaction sa;
    sigaction(SIGTERM, NULL, &sa);
    CHECK(sa.sa_handler == SIG_DFL);
    sigaction(SIGXFSZ, NULL, &sa);
    CHECK(sa.sa_handler == SIG_DFL);
    (void)af;
}

/* The library default (an embedding application): SIGINT, SIGTERM and
 * SIGHUP are never touched, SIGXFSZ is ignored during a write; with
 * FLUX_SIGNALS_TEMP_FILES the handler is there during the write and gone
 * after; with no bits at all nothing is touched. */
TEST(atomic_file_leaves_sigint_to_the_application_by_default) { /* (each test runs in its own process) */
    static const struct {
        unsigned bits;
        int handled, xfsz_ignored;
    } cases[] = {{FLUX_SIGNALS_DEFAULT, 0, 1}, {FLUX_SIGNALS_ALL, 1, 1}, {0, 0, 0}};
    CHECK_EQ_INT(flux_set_signals(FLUX_SIGNALS_ALL | 0x100u), FLUX_SIGNALS_DEFAULT);
    CHECK_EQ_INT(flux_set_signals(FLUX_SIGNALS_DEFAULT), FLUX_SIGNALS_ALL); /* unknown bits dropped */
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        for (size_t i = 0; i < 3; i++) signal(sigs[i], SIG_DFL);
        signal(SIGXFSZ, SIG_DFL);
        flux_set_signals(cases[c].bits);
        fx_atomic_file af;
        fx_err err = {0};
        REQUIRE(fx_atomic_open(&af, fx_test_tmp_path("during.bin"), &err) == FLUX_OK);
        struct sigaction sa;
        for (size_t i = 0; i < 3; i++) {
            sigaction(sigs[i], NULL, &sa);
            CHECK_MSG((sa.sa_handler != SIG_DFL) == cases[c].handled, "bits %#x, signal %d: handler %s", cases[c].bits,
                      sigs[i], sa.sa_handler == SIG_DFL ? "default" : "flux's");
        }
        sigaction(SIGXFSZ, NULL, &sa);
        CHECK_EQ_INT(sa.sa_handler == SIG_IGN, cases[c].xfsz_ignored);
        fx_atomic_abort(&af);
        for (size_t i = 0; i < 3; i++) {
            sigaction(sigs[i], NULL, &sa);
            CHECK(sa.sa_handler == SIG_DFL);
        }
        sigaction(SIGXFSZ, NULL, &sa);
        CHECK(sa.sa_handler == SIG_DFL);
    }
}

/* A file-size limit (RLIMIT_FSIZE, ulimit -f) during a write: an error
 * naming the errno text, nothing left behind (SIGXFSZ used to kill the
 * process and leave the temporary file). */
static void write_beyond_limit(void *arg) {
    const char *dir = arg;
    struct rlimit lim = {4096, 4096};
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    flux_image *img = flux_image_new(128, 128, 3); /* 48 KiB of noise: no PNG compresses it below 4 KiB */
    REQUIRE(img);
    fx_test_rng rng;
    fx_test_rng_seed(&rng, 7);
    for (size_t i = 0; i < (size_t)128 * 128 * 3; i++) img->data[i] = (uint8_t)(fx_test_rng_u64(&rng) >> 56);
    static const char *const names[] = {"big.ppm", "big.png"};
    for (int k = 0; k < 2; k++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        fx_err err = {0};
        flux_ctx *ctx = flux_new(NULL);
        CHECK_EQ_INT(flux_image_save(ctx, img, path), FLUX_ERR_IO);
        CHECK_MSG(strstr(flux_error(ctx), path) && strstr(flux_error(ctx), strerror(EFBIG)), "%s: %s", names[k],
                  flux_error(ctx));
        flux_free(ctx);
        (void)err;
    }
    flux_image_free(img);
    CHECK_MSG(fx_test_dir_entries(dir) == 0, "%d files left", fx_test_dir_entries(dir));
}

TEST(atomic_file_size_limit_is_an_error) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/limit", fx_test_tmpdir());
    mkdir(dir, 0755);
    CHECK_EQ_INT(fx_test_fork(write_beyond_limit, dir, 60), 0);
}

/* The CLI under `ulimit -f`: exit 1 with the reason, no image, no leftovers. */
TEST(atomic_file_cli_under_a_file_size_limit) {
    char cmd[8192], *out = NULL, dir[1100];
    snprintf(dir, sizeof dir, "%s/cli", fx_test_tmpdir());
    mkdir(dir, 0755);
    snprintf(cmd, sizeof cmd, "ulimit -f 4; '%s' -q -t 1 -d '%s' -p 'a cat' -W 256 -H 256 -s 1 -S 3 --no-cache -o '%s/cat.ppm'",
             fx_test_flux_bin(), fx_test_path("golden/model"), dir);
    int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 1 && out && strstr(out, "flux: cannot write") && strstr(out, strerror(EFBIG)), "exit %d: %s", rc,
              out);
    CHECK_MSG(fx_test_dir_entries(dir) == 0 && hidden_files(dir) == 0, "left: %d files", fx_test_dir_entries(dir));
    free(out);
}

static void set_age(const char *path, int seconds) {
    struct timespec ts[2] = {{time(NULL) - seconds, 0}, {time(NULL) - seconds, 0}};
    utimensat(AT_FDCWD, path, ts, 0);
}

/* What a killed writer left (SIGKILL: no handler runs) is removed when the
 * destination is written again: a temporary of a process that is gone,
 * once a minute old, or any temporary older than an hour; a live writer's
 * file, other destinations' files and other files are kept. */
TEST(atomic_file_removes_leftovers_of_killed_writers) {
    const char *dir = fx_test_tmpdir();
    pid_t gone = fork();
    if (gone == 0) _exit(0);
    waitpid(gone, NULL, 0); /* a pid nobody has (for a moment) */
    char dead[1200], dead_new[1200], live[1200], old[1200], other[1200], notes[1200];
    snprintf(dead, sizeof dead, "%s/.out.png.%d.0123456789abcdef.tmp", dir, (int)gone);
    snprintf(dead_new, sizeof dead_new, "%s/.out.png.%d.1123456789abcdef.tmp", dir, (int)gone);
    snprintf(live, sizeof live, "%s/.out.png.%d.2123456789abcdef.tmp", dir, (int)getppid());
    snprintf(old, sizeof old, "%s/.out.png.3123456789abcdef.tmp", dir); /* older naming, no pid */
    snprintf(other, sizeof other, "%s/.other.png.%d.4123456789abcdef.tmp", dir, (int)gone);
    snprintf(notes, sizeof notes, "%s/.out.png.notes", dir);
    const char *all[] = {dead, dead_new, live, old, other, notes};
    for (int i = 0; i < 6; i++) REQUIRE(fx_test_write_file(all[i], "x", 1) == 0);
    set_age(dead, 120), set_age(live, 120), set_age(old, 7200), set_age(other, 120), set_age(notes, 7200);
    fx_err err = {0};
    char out[1200];
    snprintf(out, sizeof out, "%s/out.png", dir);
    REQUIRE(fx_atomic_write(out, "png", 3, &err) == FLUX_OK);
    CHECK_MSG(!fx_test_file_exists(dead), "the dead writer's leftover is still there");
    CHECK_MSG(fx_test_file_exists(dead_new), "a fresh leftover was removed (its writer may be elsewhere)");
    CHECK_MSG(fx_test_file_exists(live), "a live writer's file was removed");
    CHECK_MSG(!fx_test_file_exists(old), "an hour-old leftover is still there");
    CHECK_MSG(fx_test_file_exists(other), "another destination's file was removed");
    CHECK(fx_test_file_exists(notes));
    CHECK(fx_atomic_is_stale(dir, ".other.png.1.0123456789abcdef.tmp", NULL) == 0); /* missing file */
    CHECK(fx_atomic_is_stale(dir, strrchr(other, '/') + 1, NULL) == 1);
    CHECK(fx_atomic_is_stale(dir, strrchr(other, '/') + 1, "out.png") == 0);
}
