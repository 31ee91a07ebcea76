/*
 * cpu_load.h — how many of the CPUs this process may run on are idle, so a
 * default thread count can leave the CPUs of other processes alone.
 *
 * Why: OpenMP worker threads that share a core with another busy process
 * make every parallel region wait for the one descheduled thread, and
 * libgomp's waiting threads spin (about 300k iterations by default, fixed
 * when libgomp loads, before main) while the thread they wait for cannot
 * run: with one of two cores busy, two threads ran 15x slower than one on a
 * small job. Results are bit-identical for any thread count (kernels.h), so
 * the count may follow the load freely.
 *
 * How: the CPUs available are those of the affinity mask, capped by a
 * cgroup v2 CPU quota (cpu.max). Their load by others is measured over a
 * window between two samples: the busy time the kernel accounts to those
 * CPUs (/proc/stat per-CPU lines: user, nice, system, irq, softirq, steal)
 * minus this process's own CPU time (CLOCK_PROCESS_CPUTIME_ID, which also
 * counts our threads' spinning). /proc/stat has 10 ms resolution, so a
 * window is at least FX_CPU_WATCH_WINDOW seconds; before the first window
 * (a fresh context) the estimate comes from the run queue: the kernel's
 * instantaneous count of runnable tasks (/proc/stat procs_running) minus
 * ours that are running, the lowest of a few readings. A CPU counts as
 * busy when others use more than 0.4 of it.
 *
 * Why not bound libgomp's spinning instead: GOMP_SPINCOUNT / OMP_WAIT_POLICY
 * are read by libgomp's constructor, before main and before the program's
 * own .preinit_array functions can change the environment for it (glibc
 * sets environ again after them: a setenv there is not seen); re-executing
 * the CLI with a bound would cost an exec per run and still leave library
 * users alone. With no more threads than idle CPUs, no thread spins for a
 * descheduled partner, so the default count is the one lever that holds
 * everywhere; an explicit -t or OMP_NUM_THREADS is the user's choice (and
 * OMP_WAIT_POLICY=passive theirs too).
 *
 * Without /proc (or when a read fails) every available CPU counts as idle.
 * The watch is plain data owned by its user (a context); no global state.
 */
#ifndef FX_CPU_LOAD_H
#define FX_CPU_LOAD_H

/* Shortest window between two load samples (seconds). */
#define FX_CPU_WATCH_WINDOW 0.1

typedef struct fx_cpu_watch {
    int cpus;     /* CPUs this process may use (>= 1) */
    int started;  /* a first sample was taken */
    int idle;     /* the current estimate: idle CPUs, 1..cpus */
    double t;     /* monotonic seconds of the last sample */
    double busy;  /* busy CPU-seconds of our CPUs at the last sample (< 0: unknown) */
    double own;   /* this process's CPU-seconds at the last sample */
    double others; /* CPUs' worth of work by others in the last window (for reports) */
} fx_cpu_watch;

/* CPUs this process may run on: the affinity mask, capped by a cgroup v2
 * CPU quota; at least 1. */
int fx_cpu_available(void);

/* Start a watch (no sample yet: taken on the first fx_cpu_watch_idle). */
void fx_cpu_watch_init(fx_cpu_watch *w);

/* Idle CPUs (1..w->cpus): re-measured when FX_CPU_WATCH_WINDOW seconds have
 * passed since the last sample, else the last estimate. A few microseconds
 * between samples; one /proc/stat read (and on the first call a few run
 * queue readings over ~2 ms) when it samples. */
int fx_cpu_watch_idle(fx_cpu_watch *w);

#endif
