/*
 * clock.h — monotonic wall-clock seconds, for timings in logs, progress
 * lines and statistics (never for results).
 */
#ifndef FX_CLOCK_H
#define FX_CLOCK_H

#include <time.h>

static inline double fx_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
