/*
 * file_read.h — read a whole regular file into memory.
 *
 * The one reader behind every small input the library parses whole
 * (config and index JSON, tokenizer.json, images, .npy). Large weight
 * files are mmap'd by tensor_file.c instead.
 */
#ifndef FX_FILE_READ_H
#define FX_FILE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Open `path` for reading only if it is a regular file, without ever
 * blocking: O_NONBLOCK keeps open() from waiting for a writer when the
 * path is a FIFO (a model file, shard, tokenizer.json or cache entry
 * replaced by a pipe hung forever), then fstat decides, and a regular
 * file gets its blocking mode back. Returns the descriptor (O_CLOEXEC) and
 * fills *st, or -1 with FLUX_ERR_IO "cannot open <path>: <errno text>" or
 * "cannot read <path>: not a regular file (a FIFO)" (a directory, a
 * device, ...). The one open of every reader of files (this file,
 * tensor_file.c, the embedding cache). */
struct stat;
int fx_open_regular(const char *path, struct stat *st, fx_err *err);

/* The kind of a non-regular file for messages: "a directory", "a FIFO",
 * "a character device", ... */
const char *fx_file_kind(unsigned mode);

/* Reads `path` into a malloc'd buffer of *n bytes plus one NUL byte past the
 * end (so text parsers may rely on a terminator); the caller frees *data.
 * Errors, each naming `path` (or `display` where given):
 *   FLUX_ERR_IO      cannot open, not a regular file, read error, file shrank
 *   FLUX_ERR_FORMAT  larger than max_bytes ("... too large for <kind> ...")
 *   FLUX_ERR_NOMEM   no memory for the buffer
 * On error *data is NULL and *n is 0. */
flux_status fx_read_file(const char *path, const char *display, uint64_t max_bytes, const char *kind,
                         uint8_t **data, size_t *n, fx_err *err);

#endif
