/*
 * test_bench.c — flux-bench's ISA handling: the default is the table the
 * library picks for this CPU, --isa forces a level (a level the CPU lacks
 * is refused with what it has), and `peak` lists every kind of peak the
 * "% of peak" columns use (AMX tiles included). No timing is asserted.
 */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>

#include "simd/kernels.h"

static const char *bench_bin(void) { return getenv("FLUX_BENCH"); }

TEST(bench_peak_kinds) {
    const char *bench = bench_bin();
    if (!bench) SKIP("FLUX_BENCH is not set (make test sets it)");
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' peak --threads 1 --json", bench);
    int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
    static const char *kinds[] = {"\"kind\":\"fma_f32\"", "\"kind\":\"bf16_dot\"", "\"kind\":\"amx_bf16\""};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        CHECK_MSG(out && strstr(out, kinds[i]), "no %s in: %s", kinds[i], out ? out : "");
    free(out);
}

TEST(bench_isa_choice) {
    const char *bench = bench_bin();
    if (!bench) SKIP("FLUX_BENCH is not set (make test sets it)");
    char cmd[1024], want[128], *out = NULL;
    /* default: the library's choice for this CPU */
    snprintf(cmd, sizeof cmd, "'%s' gemm --m 33 --n 40 --k 64 --no-yardsticks --reps 1 --threads 1 --json", bench);
    int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
    const fx_kernels *best = fx_kernels_best(0);
    snprintf(want, sizeof want, "\"isa\":\"%s", fx_isa_name(fx_kernels_isa(best)));
    CHECK_MSG(out && strstr(out, want), "no %s in: %s", want, out ? out : "");
    free(out);
    /* a forced level */
    snprintf(cmd, sizeof cmd, "'%s' --isa scalar gemm --m 33 --n 40 --k 64 --no-yardsticks --reps 1 --json", bench);
    rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0 && out && strstr(out, "\"isa\":\"scalar\""), "exit %d: %s", rc, out ? out : "");
    free(out);
    /* a level this CPU lacks: exit 2, naming what it runs */
    for (int i = 0; i < FX_ISA_COUNT; i++) {
        if (fx_kernels_get((fx_isa)i, 0)) continue;
        snprintf(cmd, sizeof cmd, "'%s' --isa %s gemm --m 8 --n 8 --k 8", bench, fx_isa_name((fx_isa)i));
        rc = fx_test_run(cmd, &out);
        CHECK_MSG(rc == 2 && out && strstr(out, "this CPU runs scalar"), "--isa %s: exit %d: %s",
                  fx_isa_name((fx_isa)i), rc, out ? out : "");
        free(out);
    }
}

/* The performance record: --write stores this machine's figures (CPU, date,
 * commit, "key = value" lines); a later run compares against them and
 * flags a figure more than the tolerance worse (exit 1), not one that is
 * better. Peaks only (--only peak), with the record edited to be out of
 * reach and then easy to beat. */
static int rewrite_peaks(const char *path, double factor) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char lines[64][512];
    int n = 0;
    while (n < 64 && fgets(lines[n], sizeof lines[n], f)) n++;
    fclose(f);
    if (!(f = fopen(path, "w"))) return -1;
    for (int i = 0; i < n; i++) {
        char *eq = strstr(lines[i], " = ");
        if (!strncmp(lines[i], "peak |", 6) && eq) {
            *eq = '\0';
            fprintf(f, "%s = %g\n", lines[i], atof(eq + 3) * factor);
        } else {
            fputs(lines[i], f);
        }
    }
    return fclose(f);
}

TEST(bench_record_flags_regressions) {
    const char *bench = bench_bin();
    if (!bench) SKIP("FLUX_BENCH is not set (make test sets it)");
    char path[] = "/tmp/flux-test-record-XXXXXX", cmd[1024], *out = NULL;
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof cmd, "'%s' record --only peak --threads 1 --write --file %s", bench, path);
    int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0 && out && strstr(out, "wrote"), "exit %d: %s", rc, out ? out : "");
    free(out);
    char *rec = NULL;
    snprintf(cmd, sizeof cmd, "cat %s", path);
    fx_test_run(cmd, &rec);
    CHECK_MSG(rec && strstr(rec, "cpu: ") && strstr(rec, "commit: ") && strstr(rec, "date: ") &&
                  strstr(rec, "peak | fma_f32 | - | - | 1 | gflops = "),
              "record: %s", rec ? rec : "");
    free(rec);
    /* a record 10x out of reach: every peak is a regression */
    CHECK(rewrite_peaks(path, 10.0) == 0);
    snprintf(cmd, sizeof cmd, "'%s' record --only peak --threads 1 --file %s", bench, path);
    rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 1 && out && strstr(out, "REGRESSION"), "exit %d: %s", rc, out ? out : "");
    free(out);
    /* a record 10x below: better everywhere, nothing flagged */
    CHECK(rewrite_peaks(path, 0.01) == 0);
    rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0 && out && !strstr(out, "REGRESSION") && strstr(out, "0 figure(s)"), "exit %d: %s", rc,
              out ? out : "");
    free(out);
    unlink(path);
}

/* --plot: one SVG with a marker and a table row per reported result (in
 * order, named by its shape), the roofs of the peaks they refer to and of
 * fma_f32, every marker with stated traffic inside the plot area; a path
 * that cannot be written fails the run and leaves nothing. No timing is
 * asserted. */
static int count_of(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

TEST(bench_plot_draws_every_result) {
    const char *bench = bench_bin();
    if (!bench) SKIP("FLUX_BENCH is not set (make test sets it)");
    char path[] = "/tmp/flux-test-plot-XXXXXX", cmd[1024], *out = NULL, *svg = NULL;
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof cmd,
             "'%s' --plot %s gemm --m 33 --n 40 --k 64 --wtype q8_0 --no-yardsticks --reps 1 --threads 1 --json", bench,
             path);
    int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
    const int results = out ? count_of(out, "{\"op\":\"gemm\"") : 0;
    free(out);
    snprintf(cmd, sizeof cmd, "cat %s", path);
    fx_test_run(cmd, &svg);
    REQUIRE(svg);
    CHECK_EQ_INT(results, 2); /* bf16, then q8_0 */
    CHECK_MSG(!strncmp(svg, "<svg ", 5) && strstr(svg, "</svg>\n") && count_of(svg, "<circle") == results,
              "svg with %d markers expected: %.400s", results, svg);
    const char *first = strstr(svg, ">1  gemm m=33 n=40 k=64 bf16"), *second = strstr(svg, ">2  gemm m=33 n=40 k=64 q8_0");
    CHECK_MSG(first && second && first < second, "table rows: %.2000s", svg);
    CHECK(strstr(svg, ">fma_f32 ") && count_of(svg, "<polyline") >= 2 && strstr(svg, "memory read "));
    for (const char *c = svg; (c = strstr(c, "<circle cx='")); c++) { /* plot area: x 90..910, y 60..500 */
        const double x = atof(c + 12), y = atof(strstr(c, "cy='") + 4);
        CHECK_MSG(x >= 90 && x <= 910 && y >= 60 && y <= 500, "marker at %g, %g", x, y);
    }
    free(svg);
    unlink(path);
    snprintf(cmd, sizeof cmd, "'%s' --plot /nonexistent-dir/p.svg gemm --m 8 --n 8 --k 32 --reps 1 --threads 1", bench);
    rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc != 0 && out && strstr(out, "/nonexistent-dir/p.svg"), "exit %d: %s", rc, out ? out : "");
    free(out);
}
