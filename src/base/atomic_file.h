/*
 * atomic_file.h — write a file so that readers see either the old content or
 * the complete new content, never a partial write.
 *
 * Data goes to a temporary file in the destination's directory (same file
 * system, so rename() is atomic), is flushed and fsync'd, and is renamed
 * over the destination only when everything succeeded. On any failure the
 * temporary file is removed and the error names the destination path.
 *
 *     fx_atomic_file af;
 *     if (fx_atomic_open(&af, "out.png", err) != FLUX_OK) return err->code;
 *     ... fwrite(..., af.f) ...
 *     return fx_atomic_commit(&af, err);   // or fx_atomic_abort(&af)
 *
 * Used for images, .npy dumps and the embedding cache.
 *
 * Signals. A temporary file must not outlive its writer. While one is
 * open, SIGINT, SIGTERM and SIGHUP, when their disposition is still the
 * default (the process would die), go through a handler that removes every
 * open temporary file and re-raises the signal with the default action, so
 * the process ends as it would have; signals the application handles or
 * ignores are left to it. Only with FLUX_SIGNALS_TEMP_FILES (flux.h): the
 * CLI turns it on, the library default leaves an application's SIGINT
 * alone. SIGXFSZ (file size limit) is ignored meanwhile when at its
 * default (FLUX_SIGNALS_FILE_SIZE, on by default), so the write fails with
 * EFBIG and the error path removes the file. The bits are read when the
 * first temporary file opens; the dispositions are restored when the last
 * one closes (unless another handler was installed meanwhile).
 *
 * Leftovers. Temporary files are named ".<base>.<pid>.<16 hex>.tmp"; what
 * a killed writer (SIGKILL, power loss) left next to the destination is
 * removed when the same destination is written again: a temporary of the
 * same base whose process is gone (and that is a minute old), or any
 * older than an hour (fx_atomic_is_stale).
 */
#ifndef FX_ATOMIC_FILE_H
#define FX_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "error.h"

typedef struct fx_atomic_file {
    FILE *f;        /* write here (binary mode) */
    char *path;     /* destination (owned copy) */
    char *tmp_path; /* the temporary file, NULL once renamed or removed */
    int guard;      /* its slot in the signal guard, or -1 */
} fx_atomic_file;

/* Create the temporary file next to `path` (mode 0666 & ~umask, like a plain
 * fopen). Fails with FLUX_ERR_IO naming `path` when the directory does not
 * exist or is not writable, or when `path` names a directory. */
flux_status fx_atomic_open(fx_atomic_file *af, const char *path, fx_err *err);

/* Flush, fsync, close and rename over the destination, then fsync the
 * directory (best effort). On failure the temporary file is removed. The
 * fx_atomic_file is released either way. */
flux_status fx_atomic_commit(fx_atomic_file *af, fx_err *err);

/* Close and remove the temporary file; the destination is untouched. Safe to
 * call on a zeroed or already committed/aborted fx_atomic_file. */
void fx_atomic_abort(fx_atomic_file *af);

/* 1 when `name` (an entry of directory `dir`) is a temporary file of ours
 * that its writer left behind (see "Leftovers" above); with base non-NULL
 * only temporaries of that destination base name count. */
int fx_atomic_is_stale(const char *dir, const char *name, const char *base);

/* Convenience: atomically write `n` bytes to `path`. */
flux_status fx_atomic_write(const char *path, const void *data, size_t n, fx_err *err);

#endif
