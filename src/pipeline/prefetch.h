/*
 * prefetch.h — read a weight set's mmap'd files into the page cache in the
 * background, without adding them to this process's resident set.
 *
 * Why: the pipeline runs the text encoder first (seconds of compute, its
 * own weights streaming in), then the transformer, whose 7.75 GB (klein-4B)
 * would otherwise be read from disk by page faults during the first step.
 * madvise(MADV_WILLNEED) does not help: Linux clamps forced readahead to one
 * readahead window per call. So a thread walks the mapped data in file
 * order, chunk by chunk: MADV_POPULATE_READ (reads the chunk and maps it;
 * touching every page where that is not supported), then MADV_DONTNEED
 * (unmaps it again; the pages stay in the page cache). The resident set
 * grows by at most one chunk, so the peak RSS of the text-encoder phase is
 * unchanged. Only read-only file mappings are touched (MADV_DONTNEED on them
 * just drops page-table entries); weight sets read into RAM (use_mmap = 0)
 * are left alone.
 */
#ifndef FX_PREFETCH_H
#define FX_PREFETCH_H

#include <stdint.h>

#include "src/formats/weight_set.h"

typedef struct fx_prefetch fx_prefetch;

/* Start prefetching every tensor of s (must be mmap'd). NULL when there is
 * nothing to do or the thread cannot be created (prefetch is an
 * optimisation: callers go on without it). */
fx_prefetch *fx_prefetch_start(const fx_wset *s);

/* Stop after the current chunk, join the thread, free. Returns the bytes
 * now in the page cache (read, or found there: a chunk whose pages are all
 * cached already is skipped after one mincore()). NULL is allowed
 * (returns 0). */
int64_t fx_prefetch_stop(fx_prefetch *p);
/* Wait until everything is read, then free; returns the bytes covered. */
int64_t fx_prefetch_finish(fx_prefetch *p);

#endif
