/*
 * app_lora.h — LoRA adapters from the command line (--lora FILE[:SCALE])
 * and the interactive mode (!lora, !loras): load through flux_lora_load and
 * report what was applied, with the library's warning about ignored keys.
 */
#ifndef FX_CLI_LORA_H
#define FX_CLI_LORA_H

#include <stdio.h>

#include "flux.h"

/* Load one adapter, or set its scale when the same file is loaded already
 * (no reload). Prints "flux: lora NAME: ..." (unless quiet) and a warning
 * line for ignored keys; on failure prints the error. Returns 0 or -1. */
int cli_lora_apply(flux_ctx *ctx, const char *file, float scale, int quiet);

/* One line per adapter on f: "NAME  scale S  N modules (KINDS, NAMING)  FILE". */
void cli_lora_list(const flux_ctx *ctx, FILE *f);

#endif
