/*
 * srv_clock.h — the absolute CLOCK_REALTIME time `ms` milliseconds from now,
 * as pthread_cond_timedwait wants its deadline.
 */
#ifndef FX_SRV_CLOCK_H
#define FX_SRV_CLOCK_H

#include <time.h>

static inline struct timespec srv_deadline_in_ms(long ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

#endif
