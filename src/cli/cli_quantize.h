/*
 * cli_quantize.h — `flux quantize`: one component of a model folder written
 * as a GGUF file (flux_quantize in flux.h).
 *
 *   flux quantize -d DIR --type TYPE --component transformer|text-encoder -o OUT.gguf
 *                 [--transformer FILE] [--text-encoder FILE] [-t N] [--no-mmap] [-q|-v]
 *
 * Exit codes as the main command (src/app/app_args.h): 0, 1 failure, 2 bad command
 * line, 130 interrupted (nothing written).
 */
#ifndef FX_CLI_QUANTIZE_H
#define FX_CLI_QUANTIZE_H

/* argv[0] is "quantize". */
int cli_quantize_main(int argc, char **argv);

#endif
