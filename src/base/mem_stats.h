/*
 * mem_stats.h — where a context's memory goes, by kind, with peaks (-v).
 *
 * Two sources:
 *  - counters for the memory the library allocates itself, kept by the
 *    allocating module through fx_mem_add (current bytes, and the peak of
 *    the current value): backend activation buffers, the VAE's arena,
 *    resident weight forms (weights converted at load, held instead of the
 *    mapped ones), caches;
 *  - samples of what the kernel reports for the process (/proc/self/status:
 *    VmRSS, RssAnon, RssFile, VmHWM), taken at every stage checkpoint and
 *    kept as peaks. RssFile is the mapped weight files' resident pages
 *    (plus the program's own few MiB of code).
 * Not thread-safe: updated from the thread that runs the stages, outside
 * parallel regions (as the context itself).
 */
#ifndef FX_MEM_STATS_H
#define FX_MEM_STATS_H

#include <stddef.h>
#include <stdint.h>

typedef enum fx_mem_kind {
    FX_MEM_ACTIVATIONS = 0, /* backend buffers of the stages (host memory) */
    FX_MEM_VAE_ARENA,       /* the VAE's strip-streaming arena */
    FX_MEM_SCRATCH,         /* kernel scratch (packing panels, tiles): set, not added */
    FX_MEM_WEIGHT_FORMS,    /* weights held in a converted form instead of their mapping */
    FX_MEM_CACHES,          /* prompt-embedding cache (memory part) */
    FX_MEM_KINDS
} fx_mem_kind;

typedef struct fx_mem_stats {
    int64_t cur[FX_MEM_KINDS], peak[FX_MEM_KINDS];
    /* process samples (bytes; -1 = unknown): peaks over the samples taken,
     * and the kernel's own peak RSS at the last sample */
    int64_t rss_peak, rss_anon_peak, rss_file_peak, hwm;
    int samples;
} fx_mem_stats;

void fx_mem_stats_init(fx_mem_stats *m);
/* cur[kind] += delta (negative to release); peak follows. m may be NULL. */
void fx_mem_add(fx_mem_stats *m, fx_mem_kind kind, int64_t delta);
/* cur[kind] = bytes (a size that only its owner knows, e.g. kernel scratch). */
void fx_mem_set(fx_mem_stats *m, fx_mem_kind kind, int64_t bytes);

/* The process's resident memory now, from /proc/self/status; -1 fields
 * where the system does not say. */
typedef struct fx_proc_mem {
    int64_t rss, rss_anon, rss_file, hwm;
} fx_proc_mem;
fx_proc_mem fx_proc_mem_read(void);
/* Take a process sample into m's peaks. */
void fx_mem_sample(fx_mem_stats *m);

/* "7.46 GB", "168 MB", "12 KB" (decimal units, as peak RSS is quoted). */
void fx_mem_format_bytes(int64_t bytes, char *buf, size_t size);
/* One line: the process peak and each kind's peak. Returns bytes needed. */
size_t fx_mem_describe(const fx_mem_stats *m, char *buf, size_t size);

#endif
