/*
 * srv_error.c — error kinds to HTTP statuses (srv_error.h).
 */
#include "srv_error.h"

unsigned srv_error_status(srv_error_kind kind) {
    switch (kind) {
    case SRV_OK: return 200;
    case SRV_E_BAD_REQUEST: return 400;
    case SRV_E_TOO_LARGE: return 413;
    case SRV_E_NOT_FOUND: return 404;
    case SRV_E_CONFLICT: return 409;
    case SRV_E_BUSY: return 429;
    case SRV_E_UNAVAILABLE: return 503;
    case SRV_E_NO_MEMORY:
    case SRV_E_ENGINE: return 500;
    case SRV_E_UNAUTHORIZED: return 401;
    case SRV_E_FORBIDDEN: return 403;
    case SRV_E_METHOD: return 405;
    case SRV_E_MEDIA_TYPE: return 415;
    case SRV_E_CLIENT_GONE: return 499; /* nginx's "client closed request": logged, never read */
    }
    return 500;
}

const char *srv_error_type(srv_error_kind kind) {
    switch (kind) {
    case SRV_E_UNAUTHORIZED: return "authentication_error";
    case SRV_E_FORBIDDEN: return "permission_error";
    case SRV_E_NOT_FOUND: return "not_found_error";
    case SRV_E_BUSY: return "rate_limit_error";
    case SRV_E_UNAVAILABLE: return "unavailable_error";
    case SRV_E_NO_MEMORY:
    case SRV_E_ENGINE: return "server_error";
    default: return "invalid_request_error";
    }
}
