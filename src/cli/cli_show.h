/*
 * cli_show.h — `flux --show`: print an image inside the terminal, with the
 * Kitty graphics protocol or iTerm2's inline images, both carrying a PNG.
 *
 *   Kitty:  ESC _G f=100,a=T,q=2,m=1 ; <base64 chunk> ESC \
 *           ESC _G m=1 ; <chunk> ESC \   ...   ESC _G m=0 ; <last chunk> ESC \
 *           (f=100 PNG, a=T transmit and display, q=2 no replies — a reply
 *           would arrive on stdin, which interactive mode reads; chunks of
 *           at most 4096 base64 bytes, as the protocol requires)
 *   iTerm2: ESC ] 1337 ; File=inline=1;size=<PNG bytes>;preserveAspectRatio=1 : <base64> BEL
 *
 * Inside tmux (TMUX set) every sequence is wrapped for passthrough
 * (ESC P tmux; <sequence with each ESC doubled> ESC \; tmux 3.3+ needs
 * `set -g allow-passthrough on`).
 *
 * Detection, first match wins:
 *   FLUX_SHOW=kitty|iterm2|none           forced (also when stdout is not a terminal)
 *   stdout not a terminal                 none
 *   TERM=xterm-kitty or KITTY_WINDOW_ID   kitty
 *   TERM_PROGRAM=ghostty, TERM=xterm-ghostty or GHOSTTY_RESOURCES_DIR   kitty
 *   KONSOLE_VERSION                       kitty (Konsole 22.04+)
 *   TERM_PROGRAM=iTerm.app or LC_TERMINAL=iTerm2   iterm2
 *   TERM_PROGRAM=WezTerm                  iterm2
 *   otherwise                             none, with a message saying why
 */
#ifndef FX_CLI_SHOW_H
#define FX_CLI_SHOW_H

#include <stddef.h>
#include <stdio.h>

#include "flux.h"

typedef enum cli_show_proto {
    CLI_SHOW_NONE = 0,
    CLI_SHOW_KITTY,
    CLI_SHOW_ITERM2
} cli_show_proto;

#define CLI_SHOW_KITTY_CHUNK 4096

/* The protocol for this terminal (see above). stdout_is_tty: isatty(1).
 * For CLI_SHOW_NONE, why receives a one-line reason (no "flux: "). */
cli_show_proto cli_show_detect(int stdout_is_tty, char *why, size_t why_size);

/* "kitty", "iterm2", "none" */
const char *cli_show_proto_name(cli_show_proto p);

/* Encode img as PNG and write it to f with the protocol's escape
 * sequences (tmux: wrapped for passthrough), then a newline. Returns 0, or
 * -1 with a message in err. */
int cli_show_image(FILE *f, const flux_image *img, cli_show_proto proto, int tmux, char *err, size_t err_size);

#endif
