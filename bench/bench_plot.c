/*
 * bench_plot.c — `--plot FILE.svg`: what a run measured, drawn as a roofline.
 *
 * Every result fx_bench_report prints is kept; at exit one SVG is written:
 *   x  arithmetic intensity, flop per byte of least memory traffic
 *      (fx_bench_result.bytes: operands read once, output written once), log
 *   y  GF/s (G-ops for int8), log
 *   roofs  for each peak a point refers to (and fma_f32, the baseline):
 *          min(peak, bandwidth · intensity), bandwidth = fx_bench_mem_gbps
 *   points numbered, coloured by their peak; the table under the chart
 *          names each (op, shape, dtype, kernels) with GF/s and % of its peak.
 * A result that states no bytes sits on the right edge as a hollow marker:
 * its height still reads against the roofs. So a run on a new CPU shows at
 * a glance which shapes are bound by memory, which by the instruction, and
 * how far each is from its roof.
 */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "simd/common/cpu.h"
#include "src/base/atomic_file.h"

enum { MAX_POINTS = 512 };

typedef struct point {
    char label[200];
    double gflops, intensity; /* intensity 0: not stated */
    fx_bench_peak_kind peak;
    int threads, loaded;
} point;

/* flux-bench is a program: its collected rows live for the run. */
static point g_points[MAX_POINTS];
static int g_npoints;

void fx_bench_plot_add(const fx_bench_result *r, double gflops, int loaded) {
    if (g_npoints >= MAX_POINTS || !(gflops > 0)) return;
    point *p = &g_points[g_npoints++];
    snprintf(p->label, sizeof p->label, "%s %s %s %s", r->op, r->shape, r->dtype ? r->dtype : "",
             r->isa ? r->isa : "");
    p->gflops = gflops;
    p->intensity = r->bytes > 0 ? r->flops / r->bytes : 0;
    p->peak = r->peak;
    p->threads = r->threads;
    p->loaded = loaded;
}

/* ---- SVG helpers ---- */

static void put_escaped(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '&') fputs("&amp;", f);
        else if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else fputc(*s, f);
    }
}

static const char *peak_colour(fx_bench_peak_kind k) {
    static const char *c[FX_PEAK_KINDS] = {"#1f77b4", "#2ca02c", "#d62728", "#9467bd",
                                           "#8c564b", "#e377c2", "#ff7f0e"};
    return (unsigned)k < FX_PEAK_KINDS ? c[k] : "#7f7f7f";
}

typedef struct axes {
    double x0, x1, y0, y1;    /* log10 ranges */
    double left, top, w, h;   /* plot area in pixels */
} axes;

static double px(const axes *a, double x) { return a->left + (log10(x) - a->x0) / (a->x1 - a->x0) * a->w; }
static double py(const axes *a, double y) { return a->top + a->h - (log10(y) - a->y0) / (a->y1 - a->y0) * a->h; }

/* Grid lines and labels at each power of ten. */
static void draw_axes(FILE *f, const axes *a) {
    fprintf(f, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' stroke='#444'/>\n", a->left, a->top,
            a->w, a->h);
    for (int e = (int)ceil(a->x0); e <= (int)floor(a->x1); e++) {
        const double x = px(a, pow(10, e));
        fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>\n", x, a->top, x, a->top + a->h);
        fprintf(f, "<text x='%.1f' y='%.1f' text-anchor='middle'>%g</text>\n", x, a->top + a->h + 16, pow(10, e));
    }
    for (int e = (int)ceil(a->y0); e <= (int)floor(a->y1); e++) {
        const double y = py(a, pow(10, e));
        fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>\n", a->left, y, a->left + a->w, y);
        fprintf(f, "<text x='%.1f' y='%.1f' text-anchor='end'>%g</text>\n", a->left - 6, y + 4, pow(10, e));
    }
    fprintf(f, "<text x='%.1f' y='%.1f' text-anchor='middle'>arithmetic intensity (flop per byte of least "
               "memory traffic)</text>\n", a->left + a->w / 2, a->top + a->h + 36);
    fprintf(f, "<text transform='translate(%.1f,%.1f) rotate(-90)' text-anchor='middle'>GF/s (int8: G-ops/s)</text>\n",
            a->left - 52, a->top + a->h / 2);
}

/* The roof of one peak: the memory slope up to the ridge, then flat,
 * clipped to the plot area. */
static void draw_roof(FILE *f, const axes *a, fx_bench_peak_kind k, double peak, double bw) {
    const double xl = pow(10, a->x0), xr = pow(10, a->x1);
    const double xa = fmax(xl, pow(10, a->y0) / bw), xb = fmin(fmax(peak / bw, xa), xr);
    fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2' points='%.1f,%.1f %.1f,%.1f %.1f,%.1f'/>\n",
            peak_colour(k), px(a, xa), py(a, fmin(peak, bw * xa)), px(a, xb), py(a, fmin(peak, bw * xb)), px(a, xr),
            py(a, fmin(peak, bw * xr)));
    fprintf(f, "<text x='%.1f' y='%.1f' text-anchor='end' fill='%s'>%s %.0f</text>\n", a->left + a->w - 4,
            py(a, fmin(peak, bw * xr)) - 4, peak_colour(k), fx_bench_peak_name(k), peak);
}

int fx_bench_plot_write(const char *path, int threads) {
    if (!path) return 0;
    const double bw = fx_bench_mem_gbps(threads);
    double peaks[FX_PEAK_KINDS] = {0};
    int used[FX_PEAK_KINDS] = {0};
    used[FX_PEAK_FMA_F32] = 1;
    for (int i = 0; i < g_npoints; i++)
        if ((unsigned)g_points[i].peak < FX_PEAK_KINDS) used[g_points[i].peak] = 1;
    double top = 0, bottom = INFINITY, lo_i = INFINITY, hi_i = 0;
    for (int k = 0; k < FX_PEAK_KINDS; k++)
        if (used[k] && (peaks[k] = fx_bench_peak((fx_bench_peak_kind)k, threads)) > 0) {
            top = fmax(top, peaks[k]);
            if (bw > 0) hi_i = fmax(hi_i, peaks[k] / bw); /* each ridge in view */
        }
    for (int i = 0; i < g_npoints; i++) {
        top = fmax(top, g_points[i].gflops);
        bottom = fmin(bottom, g_points[i].gflops);
        if (g_points[i].intensity > 0) lo_i = fmin(lo_i, g_points[i].intensity), hi_i = fmax(hi_i, g_points[i].intensity);
    }
    if (!(top > 0)) top = 1000;
    if (!isfinite(bottom)) bottom = top / 100;
    if (!isfinite(lo_i)) lo_i = 1;
    if (!(hi_i > 0)) hi_i = 1000;
    axes a = {.x0 = floor(log10(lo_i) - 0.3), .x1 = ceil(log10(hi_i) + 0.3), .y0 = floor(log10(bottom) - 0.3),
              .y1 = ceil(log10(top) + 0.1), .left = 90, .top = 60, .w = 820, .h = 440};
    if (a.x1 - a.x0 < 2) a.x1 = a.x0 + 2;
    if (a.y1 - a.y0 < 2) a.y0 = a.y1 - 2;
    const int rows = g_npoints, height = (int)(a.top + a.h + 70 + 18 * rows + 20);

    fx_atomic_file af = {0}; /* never a half-written plot */
    fx_err err = {0};
    if (fx_atomic_open(&af, path, &err)) {
        fprintf(stderr, "flux-bench: --plot: %s\n", err.msg);
        return -1;
    }
    FILE *f = af.f;
    const fx_cpu_facts *c = fx_cpu_facts_get();
    char date[32] = "";
    const time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='960' height='%d' font-family='sans-serif' "
               "font-size='12'>\n<rect width='100%%' height='100%%' fill='white'/>\n", height);
    fputs("<text x='90' y='24' font-size='16'>flux-bench roofline: ", f);
    put_escaped(f, c->brand[0] ? c->brand : c->vendor_id);
    fprintf(f, " (%s family 0x%x model 0x%x), %d threads, %s</text>\n", c->vendor_id, c->family, c->model, threads,
            date);
    fprintf(f, "<text x='90' y='44' fill='#555'>memory read %.1f GB/s (256 MiB, %d threads); roofs: measured "
               "instruction peaks (flux-bench peak)</text>\n", bw, threads);
    draw_axes(f, &a);
    for (int k = 0; k < FX_PEAK_KINDS; k++)
        if (used[k] && peaks[k] > 0 && bw > 0) draw_roof(f, &a, (fx_bench_peak_kind)k, peaks[k], bw);
    for (int i = 0; i < g_npoints; i++) {
        const point *p = &g_points[i];
        const double x = p->intensity > 0 ? px(&a, p->intensity) : a.left + a.w, y = py(&a, p->gflops);
        fprintf(f, "<circle cx='%.1f' cy='%.1f' r='5' fill='%s' stroke='%s'/>\n", x, y,
                p->intensity > 0 ? peak_colour(p->peak) : "white", peak_colour(p->peak));
        fprintf(f, "<text x='%.1f' y='%.1f' font-size='10'>%d</text>\n", x + 6, y - 4, i + 1);
    }
    double y = a.top + a.h + 64;
    for (int i = 0; i < g_npoints; i++, y += 18) {
        const point *p = &g_points[i];
        const double pk = (unsigned)p->peak < FX_PEAK_KINDS ? peaks[p->peak] : 0;
        fprintf(f, "<text x='90' y='%.1f' fill='%s'>%d  ", y, peak_colour(p->peak), i + 1);
        put_escaped(f, p->label);
        fprintf(f, ": %.1f GF/s", p->gflops);
        if (pk > 0) fprintf(f, ", %.0f%% of %s", 100 * p->gflops / pk, fx_bench_peak_name(p->peak));
        if (p->intensity > 0) fprintf(f, ", %.3g flop/B", p->intensity);
        else fputs(", traffic not stated (right edge)", f);
        if (p->loaded) fputs(" [loaded]", f);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
    if (fx_atomic_commit(&af, &err)) {
        fprintf(stderr, "flux-bench: --plot: %s\n", err.msg);
        return -1;
    }
    fprintf(stderr, "flux-bench: wrote %s (%d results)\n", path, g_npoints);
    return 0;
}
