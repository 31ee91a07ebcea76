/*
 * options.c — the defaults of the public option structs (flux.h):
 * flux_options, flux_load_options, flux_params.
 */
#include "flux.h"

#include <string.h>

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
