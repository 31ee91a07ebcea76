/*
 * app_model.c — context and model from the command-line options (app_model.h).
 */
#include "app_model.h"

#include "app_lora.h"

flux_ctx *cli_make_context(const cli_args *a) {
    flux_options opt;
    flux_options_init(&opt);
    opt.threads = a->threads;
    opt.use_mmap = !a->no_mmap;
    if (a->precision >= 0) opt.precision = (flux_precision)a->precision;
    opt.isa = a->isa;
    opt.backend = a->list_devices || a->cpu_info ? FLUX_BACKEND_CPU : a->backend;
    opt.device = a->list_devices || a->cpu_info ? -1 : a->device;
    opt.device_memory_mb = (unsigned long long)a->device_memory_mb;
    opt.cache_dir = a->cache_dir;
    opt.no_disk_cache = a->no_cache;
    opt.verbose = a->quiet ? 0 : a->verbose;
    return flux_new(&opt);
}

flux_status cli_load_model(flux_ctx *ctx, const cli_args *a) {
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.transformer_file = a->transformer_file;
    lo.text_encoder_file = a->text_encoder_file;
    lo.vae_file = a->vae_file;
    lo.tokenizer_file = a->tokenizer_file;
    lo.quant = a->quant;
    lo.distilled = a->distilled;
    return flux_load(ctx, a->model_dir, &lo);
}

int cli_load_model_and_loras(flux_ctx *ctx, const cli_args *a) {
    if (cli_load_model(ctx, a) != FLUX_OK) {
        cli_message("%s", flux_error(ctx));
        return CLI_EXIT_FAIL;
    }
    for (int i = 0; i < a->n_loras; i++)
        if (cli_lora_apply(ctx, a->lora_file[i], a->lora_scale[i], a->quiet)) return CLI_EXIT_FAIL;
    return CLI_EXIT_OK;
}
