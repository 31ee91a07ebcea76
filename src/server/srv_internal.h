/*
 * srv_internal.h — flux-server's one door into the library's internals.
 *
 * The server is a client of flux.h like the CLI (src/cli/cli_internal.h):
 * loading, generating, LoRA, images, masks and errors go through it. Besides
 * flux.h it uses exactly these internal functions, each for a reason of its
 * own (the request, its checks and its answer), not the engine's:
 *
 *   fx_json_parse, fx_json_root, fx_json_free, fx_json_get, fx_json_at,
 *   fx_json_len, fx_json_typeof, fx_json_type_name, fx_json_is_null,
 *   fx_json_is_bool, fx_json_is_int, fx_json_is_number, fx_json_is_string,
 *   fx_json_is_array, fx_json_is_object, fx_json_bool, fx_json_int,
 *   fx_json_num, fx_json_str, fx_json_str_len, fx_json_get_str
 *                                      request bodies (the library's own
 *                                      bounded JSON reader)
 *   fx_sb_str, fx_sb_add, fx_sb_printf answers built in growing buffers
 *   fx_ref_geometry                    the output size a reference image
 *                                      gives when none is asked for (held
 *                                      to --max-size before the job runs)
 *   fx_init_geometry                   the same for an init image
 *   fx_schedule_first_step             a strength leaving no step: a 400
 *                                      at submit, not a failed job
 *   fx_resize_lanczos                  an init image stretched to the size
 *                                      asked for (A1111's "just resize",
 *                                      Pillow's Lanczos bit for bit)
 *   fx_image_decode, fx_image_decode_alpha, fx_mask_from_image
 *                                      masks decoded with the reason of a
 *                                      refusal (flux_mask_decode keeps it
 *                                      in a context the HTTP threads lack)
 *   fx_now_s (inline)                  timings, deadlines, the access log
 *
 * tests/cli/test_surface.c compiles src/server and fails when the
 * server uses an fx_ function this list does not name. A new need is added
 * here (with its reason) or, when an embedding application needs it too,
 * to flux.h.
 */
#ifndef FX_SRV_INTERNAL_H
#define FX_SRV_INTERNAL_H

#include "src/base/clock.h"
#include "src/base/json.h"
#include "src/base/strbuf.h"
#include "src/dit/schedule.h"
#include "src/image/image_file.h"
#include "src/image/image_resize.h"
#include "src/pipeline/mask.h"
#include "src/pipeline/ref_image.h"

#endif
