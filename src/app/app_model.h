/*
 * app_model.h — the context and the model as the command-line options ask
 * for them (model and performance options of cli_args): shared by the flux
 * CLI and flux-server, which take the same options.
 */
#ifndef FX_CLI_MODEL_H
#define FX_CLI_MODEL_H

#include "flux.h"
#include "app_args.h"

/* A context with the runtime options (threads, precision, ISA, backend,
 * cache, verbosity). NULL only when memory is exhausted; an option the
 * library did not accept leaves its message in flux_error(ctx). */
flux_ctx *cli_make_context(const cli_args *a);

/* flux_load of -d with --transformer, --text-encoder, --quant, --base /
 * --distilled. */
flux_status cli_load_model(flux_ctx *ctx, const cli_args *a);

/* The model, then its --lora adapters; CLI_EXIT_OK or CLI_EXIT_FAIL with
 * the message printed. */
int cli_load_model_and_loras(flux_ctx *ctx, const cli_args *a);

#endif
