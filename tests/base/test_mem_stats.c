/*
 * test_mem_stats.c — memory by kind (src/base/mem_stats.h): counters keep
 * their peaks through releases, a set replaces the current value, NULL
 * stats are ignored, and the process sample reads /proc/self/status
 * (resident memory grows when a buffer is touched).
 */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>

#include "src/base/mem_stats.h"

TEST(mem_stats_counters_keep_peaks) {
    fx_mem_stats m;
    fx_mem_stats_init(&m);
    fx_mem_add(&m, FX_MEM_ACTIVATIONS, 100);
    fx_mem_add(&m, FX_MEM_ACTIVATIONS, 50);
    fx_mem_add(&m, FX_MEM_ACTIVATIONS, -120);
    CHECK_EQ_INT(m.cur[FX_MEM_ACTIVATIONS], 30);
    CHECK_EQ_INT(m.peak[FX_MEM_ACTIVATIONS], 150);
    fx_mem_set(&m, FX_MEM_SCRATCH, 70);
    fx_mem_set(&m, FX_MEM_SCRATCH, 20);
    CHECK_EQ_INT(m.cur[FX_MEM_SCRATCH], 20);
    CHECK_EQ_INT(m.peak[FX_MEM_SCRATCH], 70);
    CHECK_EQ_INT(m.peak[FX_MEM_CACHES], 0);
    fx_mem_add(NULL, FX_MEM_ACTIVATIONS, 5);      /* not counted: no crash */
    fx_mem_add(&m, FX_MEM_KINDS, 5);              /* no such kind: ignored */
    CHECK_EQ_INT(m.cur[FX_MEM_ACTIVATIONS], 30);
    char buf[512];
    fx_mem_describe(&m, buf, sizeof buf);
    CHECK_MSG(strstr(buf, "activations 150 B") || strstr(buf, "activations 0 KB"), "%s", buf);
}

TEST(mem_stats_process_sample) {
    fx_mem_stats m;
    fx_mem_stats_init(&m);
    fx_mem_sample(&m);
    const int64_t before = m.rss_anon_peak;
    REQUIRE_MSG(before > 0 && m.rss_peak > 0 && m.rss_file_peak > 0 && m.hwm >= m.rss_peak / 2,
                "rss %lld anon %lld file %lld hwm %lld", (long long)m.rss_peak, (long long)before,
                (long long)m.rss_file_peak, (long long)m.hwm);
    const size_t bytes = (size_t)64 << 20;
    char *volatile p = malloc(bytes); /* volatile: the stores below must happen */
    REQUIRE(p);
    for (size_t i = 0; i < bytes; i += 4096) p[i] = 1; /* every page resident now */
    fx_mem_sample(&m);
    CHECK_MSG(m.rss_anon_peak >= before + (int64_t)bytes / 2, "anon %lld -> %lld after touching 64 MiB",
              (long long)before, (long long)m.rss_anon_peak);
    CHECK_EQ_INT(m.samples, 2);
    free(p);
    char s[32];
    fx_mem_format_bytes(7460000000, s, sizeof s);
    CHECK_MSG(!strcmp(s, "7.46 GB"), "%s", s);
    fx_mem_format_bytes(-1, s, sizeof s);
    CHECK_MSG(!strcmp(s, "unknown"), "%s", s);
}
