/*
 * amx_os.c — what the OS must do before tile instructions can run, and a
 * signal guard for the one-off self-test that first runs them.
 *
 * Linux (>= 5.16) keeps the 8 KiB tile state off until a process asks:
 * arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) once per process
 * (it covers every thread, before or after), checked with
 * ARCH_GET_XCOMP_PERM; without it the first tile instruction gets SIGILL.
 * The request fails (e.g. -ENOSUPP) when an installed sigaltstack is too
 * small for the larger signal frame. Elsewhere there is no such call and
 * AMX stays off.
 */
#include "cpu.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#if defined(__linux__) && defined(__x86_64__) && !defined(FX_X86_EMULATED)
#include <setjmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "src/base/signal_policy.h"

enum { ARCH_GET_XCOMP_PERM = 0x1022, ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };

int fx_amx_os_request(char *why, size_t size) {
    unsigned long granted = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &granted) == 0 && (granted >> XFEATURE_XTILEDATA & 1))
        return 1; /* already granted (inherited over fork, or asked before) */
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        if (why && size)
            snprintf(why, size, "Linux refused the tile state (arch_prctl ARCH_REQ_XCOMP_PERM: %s)", strerror(errno));
        return 0;
    }
    granted = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &granted) != 0 || !(granted >> XFEATURE_XTILEDATA & 1)) {
        if (why && size) snprintf(why, size, "Linux accepted the tile-state request but ARCH_GET_XCOMP_PERM lacks it");
        return 0;
    }
    return 1;
}

/* The guard: this thread's jump target while the guarded call runs. */
static _Thread_local sigjmp_buf *guard_jmp;
static struct sigaction saved_ill, saved_segv;

static void on_signal(int sig, siginfo_t *info, void *ctx) {
    (void)info, (void)ctx;
    if (guard_jmp) siglongjmp(*guard_jmp, sig);
    /* Not the guarded thread: put the previous handler back; the faulting
     * instruction runs again and gets it. */
    sigaction(sig, sig == SIGILL ? &saved_ill : &saved_segv, NULL);
}

int fx_amx_os_guarded(int (*fn)(void *), void *arg, int *signo) {
    if (!fx_signals_allowed(FLUX_SIGNALS_CPU_PROBE)) { /* the application keeps SIGILL/SIGSEGV (flux.h) */
        if (signo) *signo = 0;
        return fn(arg);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGILL, &sa, &saved_ill);
    sigaction(SIGSEGV, &sa, &saved_segv);
    sigjmp_buf jb;
    volatile int rc = -1;
    const int sig = sigsetjmp(jb, 1);
    if (sig == 0) {
        guard_jmp = &jb;
        rc = fn(arg);
    }
    guard_jmp = NULL;
    sigaction(SIGILL, &saved_ill, NULL);
    sigaction(SIGSEGV, &saved_segv, NULL);
    if (signo) *signo = sig;
    return sig ? -1 : rc;
}

#else

int fx_amx_os_request(char *why, size_t size) {
    if (why && size) snprintf(why, size, "no way to request the tile state on this OS");
    return 0;
}

int fx_amx_os_guarded(int (*fn)(void *), void *arg, int *signo) {
    if (signo) *signo = 0;
    return fn(arg);
}

#endif
