/* map_guard.c — SIGBUS on truncated mapped files becomes an error (map_guard.h). */
#include "map_guard.h"

#include "src/base/signal_policy.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A registered mapping. `base` is set last on add and cleared first on
 * remove (atomically): the handler only trusts slots with a base. */
static struct {
    uintptr_t base;
    size_t len;
    int faulted;
    size_t first_fault; /* offset of the first faulting page */
} g_map[FX_MAP_GUARD_SLOTS];

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_enters;             /* callers inside enter .. leave */
static int g_installed;          /* our handler is the SIGBUS disposition */
static struct sigaction g_prev;  /* what it was before */

/* Chain to the disposition we replaced. */
static void chain(int sig, siginfo_t *info, void *uctx) {
    if (g_prev.sa_flags & SA_SIGINFO) {
        if (g_prev.sa_sigaction) g_prev.sa_sigaction(sig, info, uctx);
        return;
    }
    if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN) {
        g_prev.sa_handler(sig);
        return;
    }
    /* default (or ignored, which cannot skip a fault): die of it as if we
     * had never been here — the faulting access repeats on return */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
}

/* Async-signal-safe: atomic loads, mmap (a system call), sigaction. */
static void on_sigbus(int sig, siginfo_t *info, void *uctx) {
    const uintptr_t addr = (uintptr_t)info->si_addr;
    for (int i = 0; i < FX_MAP_GUARD_SLOTS; i++) {
        uintptr_t base = __atomic_load_n(&g_map[i].base, __ATOMIC_ACQUIRE);
        if (!base || addr < base || addr - base >= g_map[i].len) continue;
        long page = sysconf(_SC_PAGESIZE);
        uintptr_t at = addr & ~(uintptr_t)(page > 0 ? page - 1 : 4095);
        if (mmap((void *)at, page > 0 ? (size_t)page : 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
                 0) == MAP_FAILED)
            break; /* cannot patch: let the fault take its course */
        if (!__atomic_exchange_n(&g_map[i].faulted, 1, __ATOMIC_ACQ_REL)) g_map[i].first_fault = at - base;
        return;
    }
    chain(sig, info, uctx);
}

int fx_map_guard_add(const void *base, size_t len) {
    if (!base || !len) return -1;
    pthread_mutex_lock(&g_lock);
    int slot = -1;
    for (int i = 0; i < FX_MAP_GUARD_SLOTS && slot < 0; i++)
        if (!__atomic_load_n(&g_map[i].base, __ATOMIC_ACQUIRE)) slot = i;
    if (slot >= 0) {
        g_map[slot].len = len;
        g_map[slot].faulted = 0;
        g_map[slot].first_fault = 0;
        __atomic_store_n(&g_map[slot].base, (uintptr_t)base, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_lock);
    return slot;
}

void fx_map_guard_remove(int slot) {
    if (slot < 0 || slot >= FX_MAP_GUARD_SLOTS) return;
    pthread_mutex_lock(&g_lock);
    __atomic_store_n(&g_map[slot].base, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_lock);
}

int fx_map_guard_faulted(int slot, size_t *offset) {
    if (slot < 0 || slot >= FX_MAP_GUARD_SLOTS || !__atomic_load_n(&g_map[slot].faulted, __ATOMIC_ACQUIRE)) return 0;
    if (offset) *offset = g_map[slot].first_fault;
    return 1;
}

void fx_map_guard_enter(void) {
    pthread_mutex_lock(&g_lock);
    if (g_enters++ == 0 && fx_signals_allowed(FLUX_SIGNALS_MAPPED_FAULTS)) {
        struct sigaction ours;
        memset(&ours, 0, sizeof ours);
        ours.sa_sigaction = on_sigbus;
        ours.sa_flags = SA_SIGINFO;
        sigemptyset(&ours.sa_mask);
        g_installed = sigaction(SIGBUS, &ours, &g_prev) == 0;
    }
    pthread_mutex_unlock(&g_lock);
}

void fx_map_guard_leave(void) {
    pthread_mutex_lock(&g_lock);
    if (g_enters > 0 && --g_enters == 0 && g_installed) {
        struct sigaction cur;
        if (sigaction(SIGBUS, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigbus)
            sigaction(SIGBUS, &g_prev, NULL); /* unless another handler replaced ours meanwhile */
        g_installed = 0;
    }
    pthread_mutex_unlock(&g_lock);
}
