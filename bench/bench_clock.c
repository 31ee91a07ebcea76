/*
 * bench_clock.c — the clocks every bench reads: wall time, the machine's
 * busy CPU seconds (/proc/stat) and our own CPU seconds (see bench.h).
 */
#include "bench.h"

#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

double fx_bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Busy CPU seconds of the whole machine (all CPUs) from /proc/stat. */
double fx_bench_machine_busy(void) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    unsigned long long v[8] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                   &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 4) return -1;
    /* user nice system [idle] [iowait] irq softirq steal */
    unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6];
    return (double)busy / (double)sysconf(_SC_CLK_TCK);
}

double fx_bench_self_cpu(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}
