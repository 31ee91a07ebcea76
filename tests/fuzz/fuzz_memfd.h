/*
 * fuzz_memfd.h — hand a fuzz input to a reader that takes a path: the bytes
 * in an anonymous memory file, opened as /proc/self/fd/N.
 */
#ifndef FX_FUZZ_MEMFD_H
#define FX_FUZZ_MEMFD_H

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* The file's descriptor (close it when done) with its path in path, or -1. */
static inline int fuzz_memfd(const uint8_t *data, size_t size, char *path, size_t path_size) {
    int fd = memfd_create("fuzz", 0);
    if (fd < 0) return -1;
    for (size_t done = 0; done < size;) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    snprintf(path, path_size, "/proc/self/fd/%d", fd);
    return fd;
}

#endif
