/*
 * map_guard.h — mapped weight files that shrink while they are read.
 *
 * A file truncated under a mapping (`cp` over a model folder truncates each
 * file, then writes it) makes every read of a page past its new end raise
 * SIGBUS, which kills the process. Inside the library's calls that read
 * mapped weights (flux_generate, flux_encode_text: fx_map_guard_enter ..
 * fx_map_guard_leave) a SIGBUS handler is installed that recognises an
 * address inside a registered mapping, maps a page of zeros over the
 * faulting page (the read is retried and sees zeros) and marks the mapping
 * as faulted; the next context checkpoint (a layer or block later) finds the
 * mark and fails the generation with FLUX_ERR_IO naming the file, and the
 * next generation loads the model again. No long jump: a fault can happen
 * on any OpenMP worker thread in the middle of a kernel, and the kernel
 * simply finishes on zeros, so no thread is left inside a parallel region
 * and nothing is skipped that would need cleaning up.
 *
 * Faults at other addresses go to the handler that was installed before
 * (called with the same arguments), or, if that was the default or
 * "ignore", get the default action back and fault again (a core dump, as
 * without us). The handler is installed on the first enter and the
 * previous one restored on the last leave, unless someone replaced ours
 * meanwhile; outside the library's calls SIGBUS is never touched. Without
 * FLUX_SIGNALS_MAPPED_FAULTS (flux_set_signals, flux.h) it is not touched
 * at all, and such a read kills the process.
 *
 * Signal dispositions are process-wide, so this is process-wide state: a
 * fixed table of mappings the handler reads without locks, and an enter
 * count behind a mutex. Mappings beyond FX_MAP_GUARD_SLOTS are unguarded.
 */
#ifndef FX_MAP_GUARD_H
#define FX_MAP_GUARD_H

#include <stddef.h>

#define FX_MAP_GUARD_SLOTS 128

/* Register the mapping [base, base + len); its slot, or -1 (table full). */
int fx_map_guard_add(const void *base, size_t len);
/* Forget a slot (before munmap); -1 is ignored. */
void fx_map_guard_remove(int slot);
/* 1 when a read of the slot's mapping faulted (byte offset of the first
 * faulting page in *offset), else 0. */
int fx_map_guard_faulted(int slot, size_t *offset);

/* Around the reads of mapped data: install the SIGBUS handler (counted;
 * nested and concurrent calls are fine). */
void fx_map_guard_enter(void);
void fx_map_guard_leave(void);

#endif
