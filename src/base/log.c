/*
 * log.c — library messages to stderr (see log.h).
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

void fx_log(const fx_logger *log, int level, const char *fmt, ...) {
    if (!log || log->verbose < level) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
