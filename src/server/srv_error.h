/*
 * srv_error.h — what went wrong with a request, as the layers below HTTP
 * say it (parsers, jobs, the queue), and the one place that turns it into
 * an HTTP status (srv_error.c). Pure (no HTTP library).
 */
#ifndef FX_SRV_ERROR_H
#define FX_SRV_ERROR_H

typedef enum srv_error_kind {
    SRV_OK = 0,
    SRV_E_BAD_REQUEST,   /* a field, body, image or mask the request got wrong */
    SRV_E_TOO_LARGE,     /* a body or an image beyond a limit */
    SRV_E_NOT_FOUND,     /* no such job, image or endpoint */
    SRV_E_CONFLICT,      /* the job is not in the state asked for (cancelled, not finished) */
    SRV_E_BUSY,          /* the queue is full: try later or another server */
    SRV_E_UNAVAILABLE,   /* not taking jobs now: draining (SIGTERM), or /ready with a full queue */
    SRV_E_NO_MEMORY,     /* the server ran out of memory */
    SRV_E_ENGINE,        /* the library failed on a valid request */
    SRV_E_UNAUTHORIZED,  /* the API key is missing or wrong */
    SRV_E_FORBIDDEN,     /* another site (Origin) or another host name (Host) */
    SRV_E_METHOD,        /* a known path, another method */
    SRV_E_MEDIA_TYPE,    /* a body of a Content-Type the endpoint does not take */
    SRV_E_CLIENT_GONE    /* the client closed the connection (an answer nobody reads) */
} srv_error_kind;

/* The HTTP status of a kind: 400, 413, 404, 409, 429, 503, 500, 500, 401,
 * 403, 405, 415, 499 (200 for SRV_OK). */
unsigned srv_error_status(srv_error_kind kind);

/* The error's "type" in OpenAI's error body ("invalid_request_error", "rate_limit_error", ...). */
const char *srv_error_type(srv_error_kind kind);

#endif
