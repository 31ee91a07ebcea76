/*
 * prefetch.c — background page-cache fill of a weight set (prefetch.h).
 */
#include "prefetch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

#define CHUNK_BYTES ((size_t)32 << 20)

typedef struct range {
    uintptr_t a, b; /* page-aligned [a, b) */
} range;

struct fx_prefetch {
    pthread_t thread;
    range *ranges;
    size_t n;
    atomic_int stop;
    unsigned char *vec; /* mincore() vector of one chunk */
    int64_t done; /* bytes now in the page cache; written by the thread, read after join */
};

static int cmp_range(const void *x, const void *y) {
    const range *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a;
}

/* Read [a, b) into the page cache: populate (or touch), then unmap. */
static void fill(uintptr_t a, uintptr_t b, uintptr_t page) {
    if (madvise((void *)a, b - a, MADV_POPULATE_READ) != 0) {
        for (uintptr_t p = a; p < b; p += page) (void)*(volatile const unsigned char *)p;
    }
    (void)madvise((void *)a, b - a, MADV_DONTNEED);
}

/* 1 if every page of [a, b) is in the page cache already (a warm file
 * costs one mincore() per chunk instead of mapping and unmapping it). */
static int cached(uintptr_t a, uintptr_t b, uintptr_t page, unsigned char *vec) {
    if (mincore((void *)a, b - a, vec) != 0) return 0;
    for (size_t i = 0, n = (size_t)((b - a + page - 1) / page); i < n; i++)
        if (!(vec[i] & 1)) return 0;
    return 1;
}

static void *run(void *arg) {
    fx_prefetch *p = arg;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < p->n; i++)
        for (uintptr_t a = p->ranges[i].a; a < p->ranges[i].b; a += CHUNK_BYTES) {
            if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return NULL;
            uintptr_t b = a + CHUNK_BYTES < p->ranges[i].b ? a + CHUNK_BYTES : p->ranges[i].b;
            if (!cached(a, b, page, p->vec)) fill(a, b, page);
            p->done += (int64_t)(b - a);
        }
    return NULL;
}

fx_prefetch *fx_prefetch_start(const fx_wset *s) {
    size_t nt = fx_wset_count(s);
    if (!nt || !fx_wset_data_loaded(s)) return NULL;
    fx_prefetch *p = calloc(1, sizeof *p);
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    if (!p || !(p->ranges = malloc(nt * sizeof *p->ranges)) || !(p->vec = malloc(CHUNK_BYTES / page + 1))) {
        if (p) free(p->ranges);
        free(p);
        return NULL;
    }
    /* Tensor extents rounded out to pages, sorted, merged. The rounded ends
     * stay inside the mapping (it covers whole pages of the file). */
    size_t n = 0;
    for (size_t i = 0; i < nt; i++) {
        const fx_tensor *t = fx_wset_tensor_at(s, i);
        const unsigned char *d = fx_tensor_data(t);
        /* mapped files only: dropping pages of RAM (--no-mmap, an in-memory
         * quantized set) would lose them */
        if (!d || t->nbytes <= 0 || !fx_tensor_file_mapped(t->file)) continue;
        uintptr_t a = (uintptr_t)d & ~(page - 1), b = ((uintptr_t)d + (uintptr_t)t->nbytes + page - 1) & ~(page - 1);
        p->ranges[n++] = (range){a, b};
    }
    qsort(p->ranges, n, sizeof *p->ranges, cmp_range);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && p->ranges[i].a <= p->ranges[m - 1].b) {
            if (p->ranges[i].b > p->ranges[m - 1].b) p->ranges[m - 1].b = p->ranges[i].b;
        } else {
            p->ranges[m++] = p->ranges[i];
        }
    }
    p->n = m;
    atomic_init(&p->stop, 0);
    if (!m || pthread_create(&p->thread, NULL, run, p) != 0) {
        free(p->ranges);
        free(p->vec);
        free(p);
        return NULL;
    }
    return p;
}

static int64_t join(fx_prefetch *p) {
    pthread_join(p->thread, NULL);
    int64_t done = p->done;
    free(p->ranges);
    free(p->vec);
    free(p);
    return done;
}

int64_t fx_prefetch_stop(fx_prefetch *p) {
    if (!p) return 0;
    atomic_store(&p->stop, 1);
    return join(p);
}

int64_t fx_prefetch_finish(fx_prefetch *p) { return p ? join(p) : 0; }
