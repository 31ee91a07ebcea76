/*
 * file_read.c — whole-file reads (see file_read.h).
 */
#include "file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *fx_file_kind(unsigned mode) {
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    }
    return "not a file";
}

int fx_open_regular(const char *path, struct stat *st, fx_err *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        fx_fail(err, FLUX_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, st) != 0) {
        fx_fail(err, FLUX_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        fx_fail(err, FLUX_ERR_IO, "cannot read %s: not a regular file (%s)", path, fx_file_kind(st->st_mode));
        close(fd);
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

flux_status fx_read_file(const char *path, const char *display, uint64_t max_bytes, const char *kind,
                         uint8_t **data, size_t *n, fx_err *err) {
    const char *name = display ? display : path;
    *data = NULL;
    *n = 0;
    struct stat st;
    int fd = fx_open_regular(path, &st, err);
    if (fd < 0) return err ? err->code : FLUX_ERR_IO;
    if ((uint64_t)st.st_size > max_bytes || (uint64_t)st.st_size >= SIZE_MAX) {
        close(fd);
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: file too large for %s (%lld bytes, limit %llu)", name, kind,
                       (long long)st.st_size, (unsigned long long)max_bytes);
    }
    size_t size = (size_t)st.st_size;
    uint8_t *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory reading %s (%zu bytes)", name, size);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            free(buf);
            close(fd);
            return fx_fail(err, FLUX_ERR_IO, "cannot read %s: %s", path, e ? strerror(e) : "file shrank while reading");
        }
        got += (size_t)r;
    }
    close(fd);
    buf[size] = 0;
    *data = buf;
    *n = size;
    return FLUX_OK;
}
