/*
 * file_identity.h — is the file at a path still the one that was opened?
 *
 * A file as opened: device, inode, size and modification time. Another
 * file at the path (replaced), or this one rewritten, differs in one of
 * them; a header parsed from the old file would then describe bytes that
 * are not there.
 */
#ifndef FX_FILE_IDENTITY_H
#define FX_FILE_IDENTITY_H

#include <sys/stat.h>
#include <time.h>

#include "src/base/error.h"

typedef struct fx_file_identity {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} fx_file_identity;

fx_file_identity fx_file_identity_of(const struct stat *st);

/* FLUX_ERR_IO "<path> changed since the model was loaded: <what changed>"
 * when the file now described by st is not `was`; FLUX_OK if it is. */
flux_status fx_file_identity_check(const char *path, const fx_file_identity *was, const struct stat *st,
                                   fx_err *err);

/* The same for the file at path now (stat failing is FLUX_ERR_IO too). */
flux_status fx_file_identity_check_path(const char *path, const fx_file_identity *was, fx_err *err);

#endif
