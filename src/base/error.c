/* error.c — formatting of error messages (see error.h). */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

flux_status fx_fail(fx_err *err, flux_status code, const char *fmt, ...) {
    if (!err) return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->code = code;
    return code;
}

flux_status fx_prefix(fx_err *err, const char *fmt, ...) {
    if (!err) return FLUX_ERR_INTERNAL;
    char head[FX_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(head, sizeof head - 2, fmt, ap);
    va_end(ap);
    if (n < 0) return err->code;
    size_t hl = strlen(head);
    memcpy(head + hl, ": ", 3);
    hl += 2;
    size_t ml = strnlen(err->msg, sizeof err->msg - 1);
    if (hl + ml >= sizeof err->msg) ml = sizeof err->msg - 1 - hl;
    memmove(err->msg + hl, err->msg, ml); /* keep the old message after the head */
    memcpy(err->msg, head, hl);
    err->msg[hl + ml] = '\0';
    return err->code;
}

void fx_err_clear(fx_err *err) {
    if (!err) return;
    err->code = FLUX_OK;
    err->msg[0] = '\0';
}

const char *flux_status_name(flux_status s) {
    switch (s) {
    case FLUX_OK: return "FLUX_OK";
    case FLUX_ERR_INVALID_ARG: return "FLUX_ERR_INVALID_ARG";
    case FLUX_ERR_IO: return "FLUX_ERR_IO";
    case FLUX_ERR_FORMAT: return "FLUX_ERR_FORMAT";
    case FLUX_ERR_MODEL: return "FLUX_ERR_MODEL";
    case FLUX_ERR_NOMEM: return "FLUX_ERR_NOMEM";
    case FLUX_ERR_UNSUPPORTED: return "FLUX_ERR_UNSUPPORTED";
    case FLUX_ERR_NOT_IMPLEMENTED: return "FLUX_ERR_NOT_IMPLEMENTED";
    case FLUX_ERR_CANCELLED: return "FLUX_ERR_CANCELLED";
    case FLUX_ERR_STATE: return "FLUX_ERR_STATE";
    case FLUX_ERR_INTERNAL: return "FLUX_ERR_INTERNAL";
    }
    return "FLUX_ERR_UNKNOWN";
}
