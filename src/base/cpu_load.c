/* cpu_load.c — idle CPUs of this process's share of the machine (cpu_load.h). */
#include "cpu_load.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

/* A CPU is busy when others use more than this fraction of it. */
#define BUSY_FRACTION 0.4
/* Run-queue readings of the first estimate, and the pause between them. */
#define RUNQ_READINGS 3
#define RUNQ_PAUSE_NS 700000L

/* The whole of a /proc file (its size is not known up front); malloc'd,
 * NUL-terminated, or NULL. */
static char *read_proc(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (buf) buf[n] = '\0';
    return buf;
}

/* CPUs of the cgroup v2 quota "cpu.max" ("max P" = no limit), 0 if none. */
static int quota_cpus(void) {
    char path[512] = "/sys/fs/cgroup/cpu.max";
    char *cg = read_proc("/proc/self/cgroup"), *line = cg ? strstr(cg, "0::") : NULL;
    if (line && (line == cg || line[-1] == '\n')) {
        size_t len = strcspn(line + 3, "\n");
        if (len > 1 && len < 400) snprintf(path, sizeof path, "/sys/fs/cgroup%.*s/cpu.max", (int)len, line + 3);
    }
    free(cg);
    char *max = read_proc(path);
    if (!max && strcmp(path, "/sys/fs/cgroup/cpu.max")) max = read_proc("/sys/fs/cgroup/cpu.max");
    long long quota = 0, period = 0;
    int cpus = 0;
    if (max && sscanf(max, "%lld %lld", &quota, &period) == 2 && quota > 0 && period > 0)
        cpus = (int)((quota + period - 1) / period);
    free(max);
    return cpus;
}

int fx_cpu_available(void) {
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    if (n < 1) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n = online > 0 ? (int)online : 1;
    }
    int q = quota_cpus();
    if (q > 0 && q < n) n = q;
    return n;
}

/* Busy CPU-seconds so far of the CPUs in our affinity mask, and the run
 * queue length (procs_running); busy < 0 when /proc/stat is unreadable. */
static void read_stat(double *busy, int *running) {
    *busy = -1.0;
    *running = -1;
    char *text = read_proc("/proc/stat");
    if (!text) return;
    cpu_set_t set;
    int masked = sched_getaffinity(0, sizeof set, &set) == 0;
    const double tick = 1.0 / (double)(sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100);
    unsigned long long sum = 0;
    int cpus = 0;
    for (char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (!strncmp(line, "procs_running ", 14)) {
            *running = atoi(line + 14);
            continue;
        }
        if (strncmp(line, "cpu", 3) || line[3] < '0' || line[3] > '9') continue;
        char *p = line + 3;
        long cpu = strtol(p, &p, 10);
        if (masked && (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET((int)cpu, &set))) continue;
        unsigned long long v[8] = {0}; /* user nice system idle iowait irq softirq steal */
        for (int k = 0; k < 8; k++) v[k] = strtoull(p, &p, 10);
        sum += v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        cpus++;
    }
    free(text);
    if (cpus) *busy = (double)sum * tick;
}

static double own_cpu_seconds(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0.0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Our threads that are running now (state R), the calling one included. */
static int own_running(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return 1;
    int n = 0;
    struct dirent *e;
    char path[300], stat[512];
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t r = read(fd, stat, sizeof stat - 1);
        close(fd);
        if (r <= 0) continue;
        stat[r] = '\0';
        const char *paren = strrchr(stat, ')'); /* the state follows "(comm) " */
        if (paren && paren[1] == ' ' && paren[2] == 'R') n++;
    }
    closedir(d);
    return n > 0 ? n : 1;
}

static int clamp_idle(const fx_cpu_watch *w, double others) {
    int busy = (int)floor(others + (1.0 - BUSY_FRACTION));
    int idle = w->cpus - (busy > 0 ? busy : 0);
    return idle < 1 ? 1 : idle;
}

void fx_cpu_watch_init(fx_cpu_watch *w) {
    memset(w, 0, sizeof *w);
    w->cpus = fx_cpu_available();
    w->idle = w->cpus;
}

int fx_cpu_watch_idle(fx_cpu_watch *w) {
    const double now = fx_now_s();
    if (w->started && now - w->t < FX_CPU_WATCH_WINDOW) return w->idle;
    double busy;
    int running;
    read_stat(&busy, &running);
    const double own = own_cpu_seconds();
    if (!w->started) {
        /* no window yet: others' runnable tasks now, the lowest of a few
         * readings (a busy process is runnable in every one of them) */
        int others = running >= 0 ? running - own_running() : 0;
        for (int k = 1; k < RUNQ_READINGS && others > 0; k++) {
            struct timespec pause = {0, RUNQ_PAUSE_NS};
            nanosleep(&pause, NULL);
            double b;
            int r;
            read_stat(&b, &r);
            if (r >= 0 && r - own_running() < others) others = r - own_running();
        }
        w->others = others > 0 ? others : 0;
        w->idle = clamp_idle(w, w->others);
        w->started = 1;
    } else if (busy >= 0 && w->busy >= 0) {
        double others = (busy - w->busy - (own - w->own)) / (now - w->t);
        w->others = others > 0 ? others : 0;
        w->idle = clamp_idle(w, w->others);
    }
    w->t = now;
    w->busy = busy;
    w->own = own;
    return w->idle;
}
