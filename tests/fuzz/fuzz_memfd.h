/*
 * fuzz_memfd.h — a fuzz input as a real file: an anonymous memfd holding the
 * bytes, opened through /proc/self/fd (for the mmap / read paths).
 */
#ifndef FX_FUZZ_MEMFD_H
#define FX_FUZZ_MEMFD_H

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* The memfd (close it when done) with path[64] naming it, or -1. */
static inline int fuzz_memfd(const uint8_t *data, size_t size, char path[64]) {
    int fd = memfd_create("fuzz", 0);
    if (fd < 0) return -1;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
    if (done != size) {
        close(fd);
        return -1;
    }
    snprintf(path, 64, "/proc/self/fd/%d", fd);
    return fd;
}

#endif
