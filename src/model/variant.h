/*
 * variant.h — distilled or base, never silently: the variant of a model
 * from every hint its files carry, with the reason kept for -v and the
 * PNG metadata.
 *
 * FLUX.2-klein distilled and base transformers have the same shapes; only
 * the folder's model_index.json ("is_distilled") tells them apart. Order:
 *   1. flux_load_options.distilled (--base / --distilled);
 *   2. a transformer file's own metadata (safetensors __metadata__, GGUF
 *      string keys): "is_distilled" = true/false, or a name key
 *      (modelspec.title, modelspec.architecture, general.name,
 *      general.basename, general.finetune, name) containing "base" (→ base)
 *      or "distill" (→ distilled);
 *   3. with a folder: its model_index.json, unless a transformer file's
 *      name contradicts it (a "...-base-..." file given to a distilled
 *      folder) — then the file name wins, with a warning;
 *   4. without a folder: the transformer file's name, with a warning:
 *      "base" in it → base, else distilled (BFL and Comfy-Org name the base
 *      files flux-2-klein-base-*).
 */
#ifndef FX_VARIANT_H
#define FX_VARIANT_H

#include "src/base/log.h"
#include "src/formats/weight_set.h"

/* forced: -1 auto, 0 base, 1 distilled. folder_distilled: -1 no folder,
 * else model_index.json's value. file_set / file_path: the transformer file
 * (NULL: the folder's). Sets *distilled and why (a sentence fragment like
 * "model_index.json is_distilled"); warnings go to log at level 0. */
void fx_variant_decide(int forced, int folder_distilled, const fx_wset *file_set, const char *file_path,
                       const fx_logger *log, int *distilled, char *why, size_t why_size);

#endif
