/* version.c — version and build information. */
#include "flux.h"

#ifndef FLUX_BUILD_INFO
#define FLUX_BUILD_INFO "unknown build"
#endif

const char *flux_version(void) { return FLUX_VERSION_STRING; }

const char *flux_build_info(void) { return "flux.c " FLUX_VERSION_STRING " (" FLUX_BUILD_INFO ")"; }
