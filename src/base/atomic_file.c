/* atomic_file.c — temp file + fsync + rename (see atomic_file.h). */
#include "atomic_file.h"
#include "signal_policy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Longest part of the destination's base name kept in the temporary name,
 * so ".<base>.<pid>.<suffix>.tmp" stays under NAME_MAX (255) for any base. */
#define TMP_BASE_MAX 120
/* A leftover whose writer is gone is removed once it is this old (seconds;
 * a writer in another PID namespace sharing the folder looks gone, but
 * never takes this long), any leftover once it is STALE_ANY old. */
#define STALE_DEAD_WRITER 60
#define STALE_ANY 3600

/* ------------------------------------------------------------------------ */
/* The signal guard (atomic_file.h, "Signals")                              */
/* ------------------------------------------------------------------------ */

/* Signal dispositions are process-wide, so this is the library's one piece
 * of process-wide state: the paths of the open temporary files, in a fixed
 * table the handler reads without locks (a slot's path is complete before
 * `ready` is set), and the dispositions to restore, behind a mutex. More
 * than GUARD_SLOTS files open at once are written unguarded. */
#define GUARD_SLOTS 32

static struct {
    int ready;            /* 1: path is complete and the file exists (atomic) */
    char path[PATH_MAX];
} g_slot[GUARD_SLOTS];

static const int g_fatal[] = {SIGINT, SIGTERM, SIGHUP};
#define N_FATAL ((int)(sizeof g_fatal / sizeof g_fatal[0]))

static pthread_mutex_t g_guard_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_guarded;                     /* registered files */
static int g_installed[N_FATAL];          /* we set on_fatal for this signal */
static int g_ignored_xfsz;                /* we set SIGXFSZ to SIG_IGN */

/* Remove every open temporary file, then die of the signal as if no
 * handler had been installed (the re-raised signal is delivered when this
 * returns). Only async-signal-safe calls. */
static void on_fatal(int sig) {
    int saved = errno;
    for (int i = 0; i < GUARD_SLOTS; i++)
        if (__atomic_load_n(&g_slot[i].ready, __ATOMIC_ACQUIRE)) unlink(g_slot[i].path);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    raise(sig);
    errno = saved;
}

/* Our handler for signals still at their default; SIGXFSZ ignored. Each
 * as the application allows (FLUX_SIGNALS_TEMP_FILES, _FILE_SIZE). */
static void install_locked(void) {
    struct sigaction cur, ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_handler = on_fatal;
    sigfillset(&ours.sa_mask);
    const int fatal = fx_signals_allowed(FLUX_SIGNALS_TEMP_FILES);
    for (int k = 0; k < N_FATAL; k++) {
        g_installed[k] = fatal && sigaction(g_fatal[k], NULL, &cur) == 0 && cur.sa_handler == SIG_DFL &&
                         !(cur.sa_flags & SA_SIGINFO) && sigaction(g_fatal[k], &ours, NULL) == 0;
    }
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    g_ignored_xfsz = fx_signals_allowed(FLUX_SIGNALS_FILE_SIZE) && sigaction(SIGXFSZ, NULL, &cur) == 0 &&
                     cur.sa_handler == SIG_DFL && !(cur.sa_flags & SA_SIGINFO) && sigaction(SIGXFSZ, &ign, NULL) == 0;
}

/* Back to the defaults, where nobody changed our settings meanwhile. */
static void restore_locked(void) {
    struct sigaction cur, dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int k = 0; k < N_FATAL; k++) {
        if (g_installed[k] && sigaction(g_fatal[k], NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
            cur.sa_handler == on_fatal)
            sigaction(g_fatal[k], &dfl, NULL);
        g_installed[k] = 0;
    }
    if (g_ignored_xfsz && sigaction(SIGXFSZ, NULL, &cur) == 0 && cur.sa_handler == SIG_IGN)
        sigaction(SIGXFSZ, &dfl, NULL);
    g_ignored_xfsz = 0;
}

/* Register an open temporary file; its slot, or -1 (table full: written
 * unguarded). */
static int guard_add(const char *tmp_path) {
    if (strlen(tmp_path) >= PATH_MAX) return -1;
    pthread_mutex_lock(&g_guard_lock);
    int slot = -1;
    for (int i = 0; i < GUARD_SLOTS && slot < 0; i++)
        if (!__atomic_load_n(&g_slot[i].ready, __ATOMIC_ACQUIRE)) slot = i;
    if (slot >= 0) {
        strcpy(g_slot[slot].path, tmp_path);
        __atomic_store_n(&g_slot[slot].ready, 1, __ATOMIC_RELEASE);
        if (g_guarded++ == 0) install_locked();
    }
    pthread_mutex_unlock(&g_guard_lock);
    return slot;
}

/* The file is renamed or removed (or about to be: a handler then finds
 * nothing to remove, which is harmless). */
static void guard_remove(int slot) {
    if (slot < 0) return;
    pthread_mutex_lock(&g_guard_lock);
    __atomic_store_n(&g_slot[slot].ready, 0, __ATOMIC_RELEASE);
    if (--g_guarded == 0) restore_locked();
    pthread_mutex_unlock(&g_guard_lock);
}

/* ------------------------------------------------------------------------ */
/* Temporary files                                                          */
/* ------------------------------------------------------------------------ */

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

/* A temporary's name ".<base>.<pid>.<16 hex>.tmp" (or the older form
 * without the pid): 1 if `name` is one, for `base` (its first TMP_BASE_MAX
 * bytes) when given, with its writer's pid in *pid (0 when unknown). */
static int temp_name(const char *name, const char *base, long *pid) {
    size_t len = strlen(name);
    *pid = 0;
    if (name[0] != '.' || len < 2 + 21 || strcmp(name + len - 4, ".tmp")) return 0;
    const char *hex = name + len - 20; /* "<16 hex>.tmp" */
    if (hex[-1] != '.') return 0;
    for (int i = 0; i < 16; i++)
        if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f'))) return 0;
    const char *end = hex - 1, *digits = end; /* ".<pid>" before the hex, if any */
    while (digits > name + 2 && digits[-1] >= '0' && digits[-1] <= '9') digits--;
    const int has_pid = digits < end && end - digits <= 10 && digits[-1] == '.';
    if (has_pid) *pid = strtol(digits, NULL, 10);
    if (!base) return 1;
    size_t blen = strlen(base);
    if (blen > TMP_BASE_MAX) blen = TMP_BASE_MAX;
    const char *base_end = has_pid ? digits - 1 : end;
    if ((size_t)(base_end - (name + 1)) == blen && !strncmp(name + 1, base, blen)) return 1;
    *pid = 0; /* the digits may belong to the base: the older form */
    return (size_t)(end - (name + 1)) == blen && !strncmp(name + 1, base, blen);
}

int fx_atomic_is_stale(const char *dir, const char *name, const char *base) {
    long pid;
    if (!temp_name(name, base, &pid)) return 0;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return 0;
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    const time_t age = time(NULL) - st.st_mtime;
    if (age > STALE_ANY) return 1;
    return pid > 0 && pid != (long)getpid() && age > STALE_DEAD_WRITER && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Remove the leftovers of earlier writes of `base` in dir. */
static void remove_leftovers(const char *dir, const char *base) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[PATH_MAX];
    while ((e = readdir(d)))
        if (fx_atomic_is_stale(dir, e->d_name, base) && snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
            unlink(path);
    closedir(d);
}

flux_status fx_atomic_open(fx_atomic_file *af, const char *path, fx_err *err) {
    memset(af, 0, sizeof *af);
    af->guard = -1;
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
    remove_leftovers(dir, base);
    size_t cap = strlen(dir) + blen + 64;
    af->tmp_path = malloc(cap);
    af->path = strdup(path);
    if (!af->tmp_path || !af->path) {
        free(dir);
        fx_atomic_abort(af);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory writing %s", path);
    }
    int fd = -1, e = 0;
    for (int attempt = 0; attempt < 64 && fd < 0; attempt++) {
        snprintf(af->tmp_path, cap, "%s/.%.*s.%ld.%016llx.tmp", dir, (int)blen, base, (long)getpid(),
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
    af->guard = guard_add(af->tmp_path);
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
    if (af->path) guard_remove(af->guard); /* a zeroed struct has guard 0: not ours */
    free(af->tmp_path);
    free(af->path);
    memset(af, 0, sizeof *af);
    af->guard = -1;
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
