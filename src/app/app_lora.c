/*
 * app_lora.c — --lora and !lora on the library's adapters (app_lora.h).
 */
#include "app_lora.h"

#include <string.h>

#include "app_args.h"

int cli_lora_apply(flux_ctx *ctx, const char *file, float scale, int quiet) {
    flux_lora_info info;
    for (int i = 0; i < flux_lora_count(ctx); i++)
        if (flux_lora_get_info(ctx, i, &info) == FLUX_OK && !strcmp(info.path, file)) {
            if (flux_lora_set_scale(ctx, i, scale) != FLUX_OK) {
                cli_message("%s", flux_error(ctx));
                return -1;
            }
            if (!quiet) cli_message("lora %s: scale %g", info.name, (double)scale);
            return 0;
        }
    if (flux_lora_load(ctx, file, scale) != FLUX_OK) {
        cli_message("%s", flux_error(ctx));
        return -1;
    }
    flux_lora_get_info(ctx, flux_lora_count(ctx) - 1, &info);
    if (!quiet) {
        cli_message("lora %s: scale %g, %d module%s (%s, %s names)", info.name, (double)scale, info.modules,
                    info.modules == 1 ? "" : "s", info.kinds, info.naming);
        if (info.warning[0]) cli_message("warning: %s: %s", file, info.warning);
    }
    return 0;
}

void cli_lora_list(const flux_ctx *ctx, FILE *f) {
    flux_lora_info info;
    for (int i = 0; i < flux_lora_count(ctx); i++)
        if (flux_lora_get_info(ctx, i, &info) == FLUX_OK)
            fprintf(f, "%s  scale %g  %d modules (%s, %s names)  %s\n", info.name, (double)info.scale, info.modules,
                    info.kinds, info.naming, info.path);
}
