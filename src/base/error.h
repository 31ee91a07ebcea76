/*
 * error.h — error reporting inside the library.
 *
 * Every fallible internal function takes an fx_err* and returns a
 * flux_status. fx_fail() formats the message once, at the place that knows
 * what went wrong (file, tensor, argument), and returns the code so callers
 * can write `return fx_fail(err, FLUX_ERR_IO, "cannot open %s: %s", ...)`.
 * Callers that add context use fx_prefix(). The context keeps one fx_err
 * whose message flux_error() returns.
 */
#ifndef FX_ERROR_H
#define FX_ERROR_H

#include "flux.h"

#define FX_ERR_MSG_MAX 1024

typedef struct fx_err {
    flux_status code;
    char msg[FX_ERR_MSG_MAX];
} fx_err;

#if defined(__GNUC__)
#define FX_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define FX_PRINTF(a, b)
#endif

/* Record an error (err may be NULL) and return code. */
flux_status fx_fail(fx_err *err, flux_status code, const char *fmt, ...) FX_PRINTF(3, 4);

/* Prepend "<context>: " to the current message, return the current code. */
flux_status fx_prefix(fx_err *err, const char *fmt, ...) FX_PRINTF(2, 3);

/* Reset to FLUX_OK / "". */
void fx_err_clear(fx_err *err);

/* Evaluate a flux_status expression; return it from the caller unless OK. */
#define TRY(x)                                                                 \
    do {                                                                       \
        flux_status st_ = (x);                                                 \
        if (st_) return st_;                                                   \
    } while (0)

#endif
