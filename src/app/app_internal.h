/*
 * app_internal.h — the shared layer's one door into the library's
 * internals (src/app: what flux and flux-server both take, the command
 * line's option table and parser, the context and model it asks for,
 * --lora, seeds). Besides flux.h it uses exactly:
 *
 *   fx_isa_parse, fx_isa_check         --isa: its names, and a usage error
 *                                      when this CPU cannot run the level
 *
 * tests/cli/test_surface.c compiles src/app and fails when it uses an fx_
 * function this list does not name.
 */
#ifndef APP_INTERNAL_H
#define APP_INTERNAL_H

#include "simd/kernels.h"

#endif
