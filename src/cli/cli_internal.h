/*
 * cli_internal.h — the CLI's one door into the library's internals.
 *
 * The CLI is a client of flux.h: loading, generating, LoRA, quantizing,
 * images and errors all go through it, as they would for any application.
 * It links the static archive libflux.a (libflux.so exports flux.h only)
 * and, besides flux.h and the layer it shares with flux-server (src/app:
 * the option table and parser, context and model loading, --lora, seeds;
 * its own list in src/app/app_internal.h), uses exactly these internal
 * functions, all of them about the CLI's own options and output rather
 * than the engine:
 *
 *   fx_json_parse, fx_json_root, fx_json_free, fx_json_is_string,
 *   fx_json_str, fx_json_str_len, fx_json_typeof, fx_json_type_name
 *                                      --tokenize reads JSON string lines
 *   fx_npy_read, fx_npy_expect, fx_npy_free
 *                                      --noise / --embeddings .npy files
 *   fx_ref_geometry                    the size a reference image is
 *                                      processed to (default -W/-H, and
 *                                      the error before a model loads)
 *   fx_init_geometry                   the same for --init-img (its size
 *                                      is the output size; --noise shape)
 *   fx_schedule_first_step             --strength leaving no step: exit 2
 *   fx_png_encode                      PNG bytes for the terminal preview
 *   fx_now_s (inline)                  timings in progress lines
 *
 * tests/cli/test_surface.c compiles src/cli and fails when the CLI uses an
 * fx_ function this list does not name. A new need is added here (with
 * its reason) or, when an embedding application needs it too, to flux.h.
 */
#ifndef CLI_INTERNAL_H
#define CLI_INTERNAL_H

#include "src/base/clock.h"
#include "src/base/json.h"
#include "src/base/npy.h"
#include "src/dit/schedule.h"
#include "src/image/codecs.h"
#include "src/pipeline/ref_image.h"

#endif
