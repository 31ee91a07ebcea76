/*
 * mem_stats.c — memory by kind (mem_stats.h).
 */
#include "mem_stats.h"

#include <stdio.h>
#include <string.h>

void fx_mem_stats_init(fx_mem_stats *m) {
    memset(m, 0, sizeof *m);
    m->rss_peak = m->rss_anon_peak = m->rss_file_peak = m->hwm = -1;
}

void fx_mem_add(fx_mem_stats *m, fx_mem_kind kind, int64_t delta) {
    if (!m || (unsigned)kind >= FX_MEM_KINDS) return;
    m->cur[kind] += delta;
    if (m->cur[kind] > m->peak[kind]) m->peak[kind] = m->cur[kind];
}

void fx_mem_set(fx_mem_stats *m, fx_mem_kind kind, int64_t bytes) {
    if (!m || (unsigned)kind >= FX_MEM_KINDS) return;
    fx_mem_add(m, kind, bytes - m->cur[kind]);
}

/* "Name:   123456 kB" → bytes, if line starts with name. */
static int field_kb(const char *line, const char *name, int64_t *out) {
    const size_t n = strlen(name);
    long long kb;
    if (strncmp(line, name, n) || sscanf(line + n, " %lld kB", &kb) != 1) return 0;
    *out = (int64_t)kb * 1024;
    return 1;
}

fx_proc_mem fx_proc_mem_read(void) {
    fx_proc_mem p = {-1, -1, -1, -1};
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return p;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (!field_kb(line, "VmRSS:", &p.rss) && !field_kb(line, "RssAnon:", &p.rss_anon) &&
            !field_kb(line, "RssFile:", &p.rss_file))
            field_kb(line, "VmHWM:", &p.hwm);
    fclose(f);
    return p;
}

static void keep_max(int64_t *peak, int64_t v) {
    if (v > *peak) *peak = v;
}

void fx_mem_sample(fx_mem_stats *m) {
    if (!m) return;
    const fx_proc_mem p = fx_proc_mem_read();
    keep_max(&m->rss_peak, p.rss);
    keep_max(&m->rss_anon_peak, p.rss_anon);
    keep_max(&m->rss_file_peak, p.rss_file);
    if (p.hwm >= 0) m->hwm = p.hwm;
    m->samples++;
}

void fx_mem_format_bytes(int64_t bytes, char *buf, size_t size) {
    if (bytes < 0) snprintf(buf, size, "unknown");
    else if (bytes >= 1000000000) snprintf(buf, size, "%.2f GB", (double)bytes / 1e9);
    else if (bytes >= 1000000) snprintf(buf, size, "%.1f MB", (double)bytes / 1e6);
    else snprintf(buf, size, "%.0f KB", (double)bytes / 1e3);
}

size_t fx_mem_describe(const fx_mem_stats *m, char *buf, size_t size) {
    char hwm[24], file[24], anon[24], act[24], arena[24], scr[24], forms[24], caches[24];
    fx_mem_format_bytes(m->hwm, hwm, sizeof hwm);
    fx_mem_format_bytes(m->rss_file_peak, file, sizeof file);
    fx_mem_format_bytes(m->rss_anon_peak, anon, sizeof anon);
    fx_mem_format_bytes(m->peak[FX_MEM_ACTIVATIONS], act, sizeof act);
    fx_mem_format_bytes(m->peak[FX_MEM_VAE_ARENA], arena, sizeof arena);
    fx_mem_format_bytes(m->peak[FX_MEM_SCRATCH], scr, sizeof scr);
    fx_mem_format_bytes(m->peak[FX_MEM_WEIGHT_FORMS], forms, sizeof forms);
    fx_mem_format_bytes(m->peak[FX_MEM_CACHES], caches, sizeof caches);
    int n = snprintf(buf, size,
                     "peak RSS %s; mapped weights resident %s, anonymous %s (peaks of %d samples); by kind (peaks): "
                     "activations %s, VAE arena %s, kernel scratch %s, converted weights %s, caches %s",
                     hwm, file, anon, m->samples, act, arena, scr, forms, caches);
    return n < 0 ? 0 : (size_t)n;
}
