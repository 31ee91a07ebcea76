/*
 * scratch.c — per-context scratch memory for kernels (packing panels,
 * attention tiles, im2col strips): one 64-byte-aligned buffer per thread
 * plus one shared buffer, grown on demand outside parallel regions and
 * reused by every later call, so hot loops never allocate.
 */
#include "table.h"

#include <stdlib.h>
#include <string.h>

struct fx_scratch {
    int threads;
    size_t per_thread_size, shared_size;
    void **per_thread;
    void *shared;
    void *slot[FX_SLOT_COUNT];
    size_t slot_size[FX_SLOT_COUNT];
};

static void *aligned_block(size_t bytes) {
    size_t rounded = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, rounded ? rounded : 64);
}

fx_scratch *fx_scratch_new(int threads) {
    if (threads < 1) threads = 1;
    fx_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->threads = threads;
    s->per_thread = calloc((size_t)threads, sizeof *s->per_thread);
    if (!s->per_thread) {
        free(s);
        return NULL;
    }
    return s;
}

void fx_scratch_free(fx_scratch *s) {
    if (!s) return;
    for (int i = 0; i < s->threads; i++) free(s->per_thread[i]);
    free(s->per_thread);
    free(s->shared);
    for (int i = 0; i < FX_SLOT_COUNT; i++) free(s->slot[i]);
    free(s);
}

int fx_scratch_reserve(fx_scratch *s, size_t per_thread, size_t shared) {
    if (per_thread > s->per_thread_size) {
        for (int i = 0; i < s->threads; i++) {
            void *p = aligned_block(per_thread);
            if (!p) return -1;
            free(s->per_thread[i]);
            s->per_thread[i] = p;
        }
        s->per_thread_size = per_thread;
    }
    if (shared > s->shared_size) {
        void *p = aligned_block(shared);
        if (!p) return -1;
        free(s->shared);
        s->shared = p;
        s->shared_size = shared;
    }
    return 0;
}

void *fx_scratch_thread(fx_scratch *s, int tid) { return s->per_thread[tid]; }

size_t fx_scratch_bytes(const fx_scratch *s) {
    if (!s) return 0;
    size_t b = (size_t)s->threads * s->per_thread_size + s->shared_size;
    for (int i = 0; i < FX_SLOT_COUNT; i++) b += s->slot_size[i];
    return b;
}

void *fx_scratch_shared(fx_scratch *s) { return s->shared; }

void *fx_scratch_slot_get(fx_scratch *s, fx_scratch_slot slot, size_t bytes) {
    if (!s || (unsigned)slot >= FX_SLOT_COUNT) return NULL;
    if (bytes > s->slot_size[slot]) {
        void *p = aligned_block(bytes);
        if (!p) return NULL;
        free(s->slot[slot]);
        s->slot[slot] = p;
        s->slot_size[slot] = bytes;
    }
    return s->slot[slot];
}
