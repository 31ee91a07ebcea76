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

/* Convenience: atomically write `n` bytes to `path`. */
flux_status fx_atomic_write(const char *path, const void *data, size_t n, fx_err *err);

#endif
