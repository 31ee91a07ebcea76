/* signal_policy.c — the process-wide FLUX_SIGNALS_* set (signal_policy.h). */
#include "signal_policy.h"

static unsigned g_signals = FLUX_SIGNALS_DEFAULT; /* accessed atomically */

int fx_signals_allowed(unsigned which) { return (__atomic_load_n(&g_signals, __ATOMIC_ACQUIRE) & which) == which; }

unsigned flux_set_signals(unsigned which) {
    return __atomic_exchange_n(&g_signals, which & FLUX_SIGNALS_ALL, __ATOMIC_ACQ_REL);
}
