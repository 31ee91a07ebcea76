/* cli_progress.c — the progress line of the flux CLI (see cli_progress.h). */
#include "cli_progress.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli_internal.h"

/* Redraw the TTY line at most this often (seconds), except on stage changes. */
#define REDRAW_INTERVAL 0.1

void cli_progress_init(cli_progress *p, int quiet, int verbose, const volatile sig_atomic_t *cancel) {
    memset(p, 0, sizeof *p);
    p->cancel = cancel;
    p->stage = (flux_stage)-1;
    p->last_step = -1;
    if (quiet) p->mode = 0;
    else if (isatty(STDERR_FILENO)) p->mode = 1;
    else p->mode = verbose ? 2 : 0;
}

void cli_progress_clear(cli_progress *p) {
    if (p->mode == 1 && p->line_len) {
        fprintf(stderr, "\r%*s\r", p->line_len, "");
        fflush(stderr);
        p->line_len = 0;
    }
}

static const char *stage_name(flux_stage s) {
    switch (s) {
    case FLUX_STAGE_LOAD: return "loading";
    case FLUX_STAGE_TEXT_ENCODE: return "encoding prompt";
    case FLUX_STAGE_VAE_ENCODE: return "encoding images";
    case FLUX_STAGE_DENOISE: return "denoising";
    case FLUX_STAGE_VAE_DECODE: return "decoding";
    case FLUX_STAGE_DONE: return "done";
    }
    return "working";
}

/* "1:05" or "12s". */
static void fmt_duration(double s, char *buf, size_t size) {
    if (s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t < 60) snprintf(buf, size, "%lds", t);
    else if (t < 3600) snprintf(buf, size, "%ld:%02ld", t / 60, t % 60);
    else snprintf(buf, size, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

int cli_progress_cb(void *user, flux_stage stage, int step, int total, int substep, int subtotal) {
    cli_progress *p = user;
    int cancel = p->cancel && *p->cancel;
    if (p->mode == 0) return cancel;
    double t = fx_now_s();
    int new_stage = stage != p->stage;
    if (new_stage) {
        p->stage = stage;
        p->stage_t0 = t;
        p->last_step = -1;
    }
    if (stage == FLUX_STAGE_DONE) {
        cli_progress_clear(p);
        return cancel;
    }
    if (p->mode == 1 && !new_stage && t - p->last_draw < REDRAW_INTERVAL && !(total && step >= total))
        return cancel;
    /* mode 2: one line per shown step (the closing step == total event
     * shows the same number as the last step's line) */
    const int shown = total > 0 && step >= total ? total - 1 : step;
    if (p->mode == 2 && !new_stage && shown == p->last_step) return cancel;
    p->last_draw = t;
    p->last_step = shown;

    char line[160];
    int n = snprintf(line, sizeof line, "%s", stage_name(stage));
    if (total > 0) {
        const char *unit = stage == FLUX_STAGE_DENOISE ? "step" : stage == FLUX_STAGE_VAE_ENCODE ? "image" : "";
        n += snprintf(line + n, sizeof line - (size_t)n, "  %s%s%d/%d", unit, *unit ? " " : "", shown + 1, total);
    }
    if (subtotal > 0 && step < total && n < (int)sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, " [%s %d/%d]",
                      stage == FLUX_STAGE_TEXT_ENCODE ? "layer" : stage == FLUX_STAGE_DENOISE ? "block" : "stage",
                      substep, subtotal);
    double done = 0;
    if (total > 0) done = ((double)step + (subtotal > 0 ? (double)substep / subtotal : 0)) / total;
    if (done > 1) done = 1;
    double elapsed = t - p->stage_t0;
    if (stage == FLUX_STAGE_DENOISE && done > 0 && elapsed > 0 && n < (int)sizeof line) {
        char eta[32];
        fmt_duration(elapsed * (1 - done) / done, eta, sizeof eta);
        double rate = done * total / elapsed;
        if (rate >= 1) n += snprintf(line + n, sizeof line - (size_t)n, "  %.2f it/s", rate);
        else n += snprintf(line + n, sizeof line - (size_t)n, "  %.1f s/it", 1 / rate);
        if (n < (int)sizeof line) n += snprintf(line + n, sizeof line - (size_t)n, "  ETA %s", eta);
    }
    if (n >= (int)sizeof line) n = (int)sizeof line - 1;

    if (p->mode == 1) {
        int pad = p->line_len > n ? p->line_len - n : 0;
        fprintf(stderr, "\r%s%*s", line, pad, "");
        p->line_len = n + pad;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
    return cancel;
}
