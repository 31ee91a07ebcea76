/*
 * options.c — the defaults of the public option structs (flux.h):
 * flux_options, flux_load_options, flux_params.
 */
#include "flux.h"

#include <stdio.h>
#include <string.h>

#include "src/pipeline/load.h"

void flux_options_init(flux_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->use_mmap = 1;
    opt->precision = FLUX_PRECISION_DEFAULT;
    opt->backend = FLUX_BACKEND_AUTO;
    opt->device = -1;
}

void flux_load_options_init(flux_load_options *lo) {
    if (!lo) return;
    memset(lo, 0, sizeof *lo);
    lo->distilled = -1;
    lo->lazy_text_encoder = 1;
}

void flux_params_init(flux_params *p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->seed = FLUX_SEED_RANDOM;
    p->guidance = -1.0f;
    p->schedule = FLUX_SCHEDULE_SHIFTED;
    p->power_alpha = 2.0f;
    p->strength = 0.8; /* diffusers Flux2KleinInpaintPipeline.__call__ default */
}

/* Writes "STRUCT.FIELD: VALUE is not ..." into msg and returns 1. */
static int out_of_range(char *msg, size_t size, const char *field, long long value, const char *range) {
    snprintf(msg, size, "%s is %lld, %s", field, value, range);
    return 1;
}

int fx_options_check(const flux_options *opt, char *msg, size_t size) {
    if (opt->backend < FLUX_BACKEND_AUTO || opt->backend > FLUX_BACKEND_VULKAN)
        return out_of_range(msg, size, "flux_options.backend", opt->backend,
                            "not a flux_backend (0 auto, 1 cpu, 2 vulkan)");
    if (opt->precision < FLUX_PRECISION_DEFAULT || opt->precision > FLUX_PRECISION_BF16)
        return out_of_range(msg, size, "flux_options.precision", opt->precision,
                            "not a flux_precision (0 default, 1 f32, 2 int8, 3 bf16)");
    if (opt->device < -1)
        return out_of_range(msg, size, "flux_options.device", opt->device, "not a device index (-1 = choose, or 0, 1, ...)");
    if (opt->threads < 0)
        return out_of_range(msg, size, "flux_options.threads", opt->threads, "not a thread count (0 = automatic)");
    if (opt->use_mmap != 0 && opt->use_mmap != 1)
        return out_of_range(msg, size, "flux_options.use_mmap", opt->use_mmap, "not 0 or 1");
    if (opt->no_disk_cache != 0 && opt->no_disk_cache != 1)
        return out_of_range(msg, size, "flux_options.no_disk_cache", opt->no_disk_cache, "not 0 or 1");
    if (opt->verbose < 0)
        return out_of_range(msg, size, "flux_options.verbose", opt->verbose, "not a level (0 quiet, 1 info, 2 debug)");
    return 0;
}

int fx_load_options_check(const flux_load_options *lo, char *msg, size_t size) {
    if (lo->distilled < -1 || lo->distilled > 1)
        return out_of_range(msg, size, "flux_load_options.distilled", lo->distilled,
                            "not -1 (auto), 0 (base) or 1 (distilled)");
    if (lo->lazy_text_encoder != 0 && lo->lazy_text_encoder != 1)
        return out_of_range(msg, size, "flux_load_options.lazy_text_encoder", lo->lazy_text_encoder, "not 0 or 1");
    return 0;
}
