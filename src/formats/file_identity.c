/*
 * file_identity.c — device, inode, size and modification time of an opened
 * file, compared with the file at its path now (file_identity.h).
 */
#include "file_identity.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

fx_file_identity fx_file_identity_of(const struct stat *st) {
    fx_file_identity id = {st->st_dev, st->st_ino, st->st_size, st->st_mtim};
    return id;
}

/* "" when same, else what changed ("its size changed from ...", ...). */
static const char *identity_change(const fx_file_identity *was, const fx_file_identity *now, char *buf, size_t size) {
    if (was->size != now->size)
        snprintf(buf, size, "its size changed from %lld to %lld bytes", (long long)was->size, (long long)now->size);
    else if (was->dev != now->dev || was->ino != now->ino)
        snprintf(buf, size, "it was replaced by another file");
    else if (was->mtime.tv_sec != now->mtime.tv_sec || was->mtime.tv_nsec != now->mtime.tv_nsec)
        snprintf(buf, size, "it was rewritten (modification time changed)");
    else
        buf[0] = '\0';
    return buf;
}

flux_status fx_file_identity_check(const char *path, const fx_file_identity *was, const struct stat *st,
                                   fx_err *err) {
    fx_file_identity now = fx_file_identity_of(st);
    char why[160];
    if (*identity_change(was, &now, why, sizeof why))
        return fx_fail(err, FLUX_ERR_IO, "%s changed since the model was loaded: %s", path, why);
    return FLUX_OK;
}

flux_status fx_file_identity_check_path(const char *path, const fx_file_identity *was, fx_err *err) {
    struct stat st;
    if (stat(path, &st) != 0)
        return fx_fail(err, FLUX_ERR_IO, "%s: %s since the model was loaded", path, strerror(errno));
    return fx_file_identity_check(path, was, &st, err);
}
