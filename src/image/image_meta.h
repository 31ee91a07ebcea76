/*
 * image_meta.h — the generation settings stored in an output image.
 *
 * Sets these metadata keys (written as PNG tEXt/iTXt chunks):
 *   prompt, negative_prompt (only when non-empty), seed, steps,
 *   size ("WxH"), guidance, schedule, model, Software ("flux.c 0.1.0"),
 *   parameters — the AUTOMATIC1111 "infotext" that common tools (A1111,
 *   Forge, ComfyUI loaders, Civitai, image viewers) parse:
 *
 *     <prompt>
 *     Negative prompt: <negative>          (line omitted when empty)
 *     Steps: 4, Sampler: Euler, Schedule type: shifted, CFG scale: 1,
 *     Seed: 42, Size: 256x256, Model: FLUX.2-klein-4B, Version: flux.c 0.1.0
 *
 * (the settings are one line; wrapped here). As in A1111's create_infotext,
 * a setting value containing ',', ':' or a newline is written as a JSON
 * string, the prompt lines are written as they are, and the whole text is
 * stripped of leading/trailing whitespace. Size is width x height.
 * "Sampler: Euler" because the rectified-flow sampler is plain Euler.
 */
#ifndef FX_IMAGE_META_H
#define FX_IMAGE_META_H

#include <stdint.h>

#include "flux.h"

/* schedule: a short name ("shifted", "linear", "power 2"); model: the model
 * name (folder name); version: software version text, NULL = "flux.c
 * <FLUX_VERSION_STRING>". prompt/negative may be NULL (= ""). Returns
 * FLUX_OK or FLUX_ERR_NOMEM. */
flux_status fx_image_set_generation_text(flux_image *img, const char *prompt, const char *negative, int steps,
                                         uint64_t seed, int width, int height, float guidance,
                                         const char *schedule, const char *model, const char *version);

/* The A1111 "parameters" text alone (malloc'd; NULL on no memory). */
char *fx_a1111_parameters(const char *prompt, const char *negative, int steps, uint64_t seed, int width,
                          int height, float guidance, const char *schedule, const char *model,
                          const char *version);

#endif
