/* atomic_file.c — temp file + fsync + rename (see atomic_file.h). */
#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Longest part of the destination's base name kept in the temporary name,
 * so ".<base>.<suffix>.tmp" stays under NAME_MAX (255) for any base. */
#define TMP_BASE_MAX 120

/* Split `path` into its directory ("." when none) and base name. */
static int split_path(const char *path, char **dir, const char **base) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        *dir = strdup(".");
        *base = path;
    } else {
        size_t n = (size_t)(slash - path);
        if (n == 0) n = 1; /* "/name" → "/" */
        *dir = strndup(path, n);
        *base = slash + 1;
    }
    return *dir != NULL;
}

/* A suffix that differs between processes, threads and attempts without any
 * global state: pid, clock, the address of the caller's struct, attempt. */
static uint64_t tmp_suffix(const void *self, int attempt) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull;
    x ^= (uint64_t)ts.tv_nsec + ((uint64_t)ts.tv_sec << 30);
    x ^= (uint64_t)(uintptr_t)self * 0xBF58476D1CE4E5B9ull;
    x += (uint64_t)attempt * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

flux_status fx_atomic_open(fx_atomic_file *af, const char *path, fx_err *err) {
    memset(af, 0, sizeof *af);
    if (!path || !*path) return fx_fail(err, FLUX_ERR_INVALID_ARG, "cannot write a file with an empty name");
    size_t plen = strlen(path);
    if (path[plen - 1] == '/')
        return fx_fail(err, FLUX_ERR_IO, "cannot write %s: it names a directory, not a file", path);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return fx_fail(err, FLUX_ERR_IO, "cannot write %s: it is a directory", path);

    char *dir = NULL;
    const char *base = NULL;
    if (!split_path(path, &dir, &base)) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory writing %s", path);
    if (stat(dir, &st) != 0) {
        flux_status s = fx_fail(err, FLUX_ERR_IO, "cannot write %s: directory %s: %s", path, dir, strerror(errno));
        free(dir);
        return s;
    }
    if (!S_ISDIR(st.st_mode)) {
        flux_status s = fx_fail(err, FLUX_ERR_IO, "cannot write %s: %s is not a directory", path, dir);
        free(dir);
        return s;
    }

    size_t blen = strlen(base);
    if (blen > TMP_BASE_MAX) blen = TMP_BASE_MAX;
    size_t cap = strlen(dir) + blen + 48;
    af->tmp_path = malloc(cap);
    af->path = strdup(path);
    if (!af->tmp_path || !af->path) {
        free(dir);
        fx_atomic_abort(af);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory writing %s", path);
    }
    int fd = -1, e = 0;
    for (int attempt = 0; attempt < 64 && fd < 0; attempt++) {
        snprintf(af->tmp_path, cap, "%s/.%.*s.%016llx.tmp", dir, (int)blen, base,
                 (unsigned long long)tmp_suffix(af, attempt));
        fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        e = errno;
        if (fd < 0 && e != EEXIST) break;
    }
    free(dir);
    if (fd < 0) {
        free(af->tmp_path);
        af->tmp_path = NULL;
        fx_atomic_abort(af);
        return fx_fail(err, FLUX_ERR_IO, "cannot write %s: %s", path, strerror(e));
    }
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        e = errno;
        close(fd);
        fx_atomic_abort(af);
        return fx_fail(err, FLUX_ERR_IO, "cannot write %s: %s", path, strerror(e));
    }
    return FLUX_OK;
}

void fx_atomic_abort(fx_atomic_file *af) {
    if (!af) return;
    if (af->f) fclose(af->f);
    if (af->tmp_path) unlink(af->tmp_path);
    free(af->tmp_path);
    free(af->path);
    memset(af, 0, sizeof *af);
}

/* Make the rename itself durable; failure here loses nothing already
 * visible, so it is not reported. */
static void sync_parent_dir(const char *path) {
    char *dir = NULL;
    const char *base = NULL;
    if (!split_path(path, &dir, &base)) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

flux_status fx_atomic_commit(fx_atomic_file *af, fx_err *err) {
    if (!af->f || !af->tmp_path) {
        fx_atomic_abort(af);
        return fx_fail(err, FLUX_ERR_INTERNAL, "atomic write committed without an open file");
    }
    int e = 0;
    if (ferror(af->f)) e = EIO;
    if (!e && fflush(af->f) != 0) e = errno;
    if (!e && fsync(fileno(af->f)) != 0 && errno != EINVAL) e = errno; /* EINVAL: fs without fsync */
    int rc = fclose(af->f);
    af->f = NULL;
    if (!e && rc != 0) e = errno;
    if (!e && rename(af->tmp_path, af->path) != 0) e = errno;
    if (e) {
        flux_status s = fx_fail(err, FLUX_ERR_IO, "cannot write %s: %s", af->path, strerror(e));
        fx_atomic_abort(af);
        return s;
    }
    free(af->tmp_path);
    af->tmp_path = NULL; /* renamed: nothing to remove */
    sync_parent_dir(af->path);
    fx_atomic_abort(af);
    return FLUX_OK;
}

flux_status fx_atomic_write(const char *path, const void *data, size_t n, fx_err *err) {
    fx_atomic_file af;
    flux_status s = fx_atomic_open(&af, path, err);
    if (s != FLUX_OK) return s;
    if (n && fwrite(data, 1, n, af.f) != n) {
        int e = errno;
        s = fx_fail(err, FLUX_ERR_IO, "cannot write %s: %s", path, strerror(e ? e : EIO));
        fx_atomic_abort(&af);
        return s;
    }
    return fx_atomic_commit(&af, err);
}
