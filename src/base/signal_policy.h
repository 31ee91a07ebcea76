/*
 * signal_policy.h — which process-wide signal handlers the library may
 * install (flux.h, "Process-wide state": FLUX_SIGNALS_*).
 *
 * One atomic bit set per process, like the dispositions it governs; read
 * where a handler would be installed (atomic_file.c, map_guard.c,
 * amx_os.c), set by flux_set_signals. Default FLUX_SIGNALS_DEFAULT: an
 * embedding application's SIGINT, SIGTERM and SIGHUP are never touched
 * unless it asks.
 */
#ifndef FX_SIGNAL_POLICY_H
#define FX_SIGNAL_POLICY_H

#include "flux.h"

/* 1 when every bit of `which` (FLUX_SIGNALS_*) is allowed now. */
int fx_signals_allowed(unsigned which);

#endif
