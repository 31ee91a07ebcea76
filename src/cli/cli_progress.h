/*
 * cli_progress.h — the progress line of the flux CLI.
 *
 * On a terminal (stderr is a TTY) one line is redrawn in place, at most ten
 * times a second: the stage, the step, the block inside it, steps per second
 * and the time left. With -v on a non-terminal each step is printed on its
 * own line instead; with -q, or on a non-terminal without -v, nothing.
 *
 * Interpretation of the flux_progress_fn arguments: during a stage, `step`
 * counts the main units already completed (0 .. total) and `substep` the
 * sub-units of the current one completed (0 .. subtotal), so the fraction
 * done is (step + substep/subtotal) / total.
 *
 * The callback also returns non-zero once `*cancel` is set (by the CLI's
 * SIGINT handler), which makes the library stop with FLUX_ERR_CANCELLED.
 */
#ifndef FX_CLI_PROGRESS_H
#define FX_CLI_PROGRESS_H

#include <signal.h>

#include "flux.h"

typedef struct cli_progress {
    int mode;                        /* 0 silent, 1 TTY line, 2 one line per step */
    const volatile sig_atomic_t *cancel;
    flux_stage stage;
    int last_step;                   /* last step printed in mode 2 */
    double stage_t0, last_draw;
    int line_len;                    /* visible width of the drawn TTY line */
} cli_progress;

/* quiet/verbose as given on the command line. */
void cli_progress_init(cli_progress *p, int quiet, int verbose, const volatile sig_atomic_t *cancel);

/* A flux_progress_fn; user = cli_progress*. */
int cli_progress_cb(void *user, flux_stage stage, int step, int total, int substep, int subtotal);

/* Erase the TTY line (before printing anything else). */
void cli_progress_clear(cli_progress *p);

#endif
