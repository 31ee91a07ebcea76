/*
 * cli_repl.h — interactive mode: `flux -d DIR` without -p reads prompts
 * from stdin, one per line, with the model loaded once (and the embedding
 * cache making a repeated prompt skip the text encoder).
 *
 * Lines:
 *   a prompt                   generate; the image gets the next handle $N
 *   512x768 a prompt           this size for this image (W x H, multiples of 16)
 *   $N a prompt                img2img from image N
 *   $0 $3 a prompt             multi-reference (up to 16); "$" alone = the last image
 *   \$5 bill, \!x, \512x512    a backslash starts a prompt that would look like
 *                              a command, a handle or a size
 *   !seed N | !seed random     fixed seed for the next images / a new one each time
 *   !size WxH | !size auto     default size (auto: 256, or the first reference's)
 *   !steps N | !steps auto     sampling steps (auto: 4 distilled, 50 base)
 *   !guidance G | !guidance auto
 *   !schedule shifted|linear|power [ALPHA]
 *   !batch N                   N images per prompt (seeds S, S+1, ...)
 *   !lora FILE [SCALE]         add a LoRA adapter (scale default 1), or set the
 *                              scale of one already loaded (no reload)
 *   !lora off                  remove every adapter
 *   !loras                     list the adapters
 *   !save $N FILE              copy image N to FILE (.png or .ppm)
 *   !show [on|off]             terminal preview of each image (--show)
 *   !images                    list the handles and their files
 *   !help                      commands and current settings
 *   !quit (or Ctrl-D)          leave
 *
 * Images given with -i are the first handles ($0, $1, ...); --negative,
 * -W/-H, -s, -S, -g, the schedule options, -n, --show and --lora set the
 * starting settings. Each image is written at once, as image-N.png in a new session
 * folder $TMPDIR/flux-XXXXXX (default /tmp; named on the first image);
 * !save keeps a copy elsewhere. (-o is not used in interactive mode.)
 * stdout gets one line per image, "$N <file> (<W>x<H>, seed <S>, <T> s)";
 * messages, errors ("flux: ...") and progress go to stderr. A failing line
 * does not end the session; when stdin is not a terminal the exit status is
 * 1 if any line failed (so scripts see it), else 0.
 */
#ifndef FX_CLI_REPL_H
#define FX_CLI_REPL_H

#include <stdint.h>
#include <stdio.h>

#include "flux.h"
#include "src/app/app_args.h"

/* One parsed line. */
typedef enum cli_repl_kind {
    REPL_EMPTY = 0,
    REPL_GENERATE,
    REPL_SEED, REPL_SIZE, REPL_STEPS, REPL_GUIDANCE, REPL_SCHEDULE, REPL_BATCH,
    REPL_SAVE, REPL_SHOW, REPL_IMAGES, REPL_HELP, REPL_QUIT,
    REPL_LORA, REPL_LORA_OFF, REPL_LORAS
} cli_repl_kind;

#define CLI_REPL_LAST (-1) /* "$": the last image */

typedef struct cli_repl_cmd {
    cli_repl_kind kind;
    const char *prompt;        /* REPL_GENERATE: points into the line */
    int width, height;         /* REPL_GENERATE (0 = default), REPL_SIZE (0 = auto) */
    int refs[FLUX_MAX_REFS];   /* REPL_GENERATE: handles, CLI_REPL_LAST for "$" */
    int n_refs;
    int handle;                /* REPL_SAVE */
    const char *file;          /* REPL_SAVE, REPL_LORA: points into the line */
    float scale;               /* REPL_LORA: 1 unless given */
    uint64_t seed;             /* REPL_SEED */
    int random;                /* REPL_SEED: 1 = random; REPL_STEPS/GUIDANCE: 1 = auto */
    int steps, batch;
    float guidance;
    flux_schedule schedule;    /* REPL_SCHEDULE */
    float alpha;               /* REPL_SCHEDULE power: > 0, or 0 = keep */
    int on;                    /* REPL_SHOW: 1 on, 0 off, -1 toggle */
} cli_repl_cmd;

/* Parse one line (modified in place: trimmed, strings NUL-terminated).
 * Returns 0, or -1 with a one-line message (no "flux: ") in err. */
int cli_repl_parse(char *line, cli_repl_cmd *cmd, char *err, size_t err_size);

/* Run the loop on a loaded model until EOF or !quit. Returns the exit code. */
int cli_repl_run(flux_ctx *ctx, const cli_args *a, FILE *in, FILE *out);

/* The !help text. */
void cli_repl_help(FILE *f);

#endif
