/*
 * test_signal_policy.c — flux_set_signals (flux.h, "Process-wide state"):
 * each handler flux may install is there only when its bit is set. The
 * atomic-file signals are covered by test_atomic_file.c; here the SIGBUS
 * guard of mapped weights (src/formats/map_guard.c) and the SIGILL/SIGSEGV
 * guard of the AMX self-test (simd/common/amx_os.c). Each test runs in its
 * own process, so the dispositions it changes do not leak.
 */
#include "tests/test.h"

#include <signal.h>
#include <string.h>

#include "simd/common/cpu.h"
#include "src/formats/map_guard.h"

static int is_default(int sig) {
    struct sigaction sa;
    sigaction(sig, NULL, &sa);
    return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL;
}

TEST(signal_policy_mapped_faults_bit_governs_sigbus) {
    signal(SIGBUS, SIG_DFL);
    CHECK_EQ_INT(flux_set_signals(FLUX_SIGNALS_DEFAULT), FLUX_SIGNALS_DEFAULT); /* the default */
    fx_map_guard_enter();
    CHECK_MSG(!is_default(SIGBUS), "by default a generation guards SIGBUS");
    fx_map_guard_leave();
    CHECK(is_default(SIGBUS));
    flux_set_signals(FLUX_SIGNALS_DEFAULT & ~FLUX_SIGNALS_MAPPED_FAULTS);
    fx_map_guard_enter();
    fx_map_guard_enter(); /* nested, as concurrent calls are */
    CHECK_MSG(is_default(SIGBUS), "FLUX_SIGNALS_MAPPED_FAULTS off: SIGBUS was changed");
    fx_map_guard_leave();
    fx_map_guard_leave();
    CHECK(is_default(SIGBUS));
}

static int segv_untouched_inside(void *arg) {
    (void)arg;
    return is_default(SIGILL) && is_default(SIGSEGV);
}

TEST(signal_policy_cpu_probe_bit_governs_sigill_sigsegv) {
    signal(SIGILL, SIG_DFL);
    signal(SIGSEGV, SIG_DFL);
    int sig = -1;
    flux_set_signals(FLUX_SIGNALS_ALL & ~FLUX_SIGNALS_CPU_PROBE);
    CHECK_EQ_INT(fx_amx_os_guarded(segv_untouched_inside, NULL, &sig), 1);
    CHECK_EQ_INT(sig, 0);
    flux_set_signals(FLUX_SIGNALS_DEFAULT);
    const int rc = fx_amx_os_guarded(segv_untouched_inside, NULL, &sig);
#if defined(__linux__) && defined(__x86_64__) && !defined(FX_X86_EMULATED)
    CHECK_MSG(rc == 0, "by default the self-test runs with SIGILL/SIGSEGV caught");
#else
    CHECK_EQ_INT(rc, 1); /* no guard on this platform */
#endif
    CHECK(is_default(SIGILL) && is_default(SIGSEGV));
}
