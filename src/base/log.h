/*
 * log.h — library messages (the -v / -vv lines).
 *
 * A logger is a verbosity level owned by whoever owns the messages (the
 * flux_ctx, from flux_options.verbose). Every layer logs through it, so the
 * lowest layers (weight files, caches) need no context to report. Messages
 * go to stderr, one line each, when their level is at or below the
 * logger's verbosity; a NULL logger is silent.
 */
#ifndef FX_LOG_H
#define FX_LOG_H

#include "error.h"

typedef struct fx_logger {
    int verbose; /* 0 quiet, 1 info, 2 debug */
} fx_logger;

void fx_log(const fx_logger *log, int level, const char *fmt, ...) FX_PRINTF(3, 4);

#endif
