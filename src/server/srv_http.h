/*
 * srv_http.h — flux-server's HTTP side on libmicrohttpd (whose types only
 * srv_http.c sees): the daemon (one
 * thread per connection, so a handler may wait for its job) with its
 * connection guard (srv_guard.h), the checks made on a request's head
 * before its body is read (Host, Origin and CORS, the API key,
 * Content-Type, the endpoint's body limit: srv_access.h), request bodies,
 * and every response through one path (common headers, counters, access
 * log). The endpoints themselves are in srv_api.c, reached through the
 * server's route callback.
 */
#ifndef FX_SRV_HTTP_H
#define FX_SRV_HTTP_H

#include <stddef.h>
#include <sys/types.h>

#include "src/base/strbuf.h"
#include "srv_error.h"
#include "srv_guard.h"
#include "srv_jobs.h"
#include "srv_request.h"

typedef struct srv_conn srv_conn;

/* What a handler answers: the response is queued (or the request goes on),
 * or the connection is to be closed. The HTTP library's own types stay in
 * srv_http.c: handlers (srv_api.c) never see them. */
typedef enum srv_result { SRV_CLOSE = 0, SRV_SENT = 1 } srv_result;

typedef struct srv_server {
    srv_queue q;
    srv_limits lim;
    const char *api_key;         /* NULL: no authentication */
    const char *lora_dir;
    const char *model_name;
    unsigned timeout_s;          /* a client idle this long while sending is dropped */
    int verbose;                 /* 0 quiet, 1 one line per job, 2 per request */
    int access_log;              /* --access-log: one line per request on stderr */
    int check_host;              /* a loopback server: Host must name this machine (DNS rebinding) */
    const char *allow_hosts;     /* --allow-host: more Host names, comma separated (NULL: none) */
    const char *cors_origins;    /* --cors-origin: origins other sites' pages may call from ("*": any) */
    int max_conns;               /* --max-connections: open connections in all */
    int max_conns_per_ip;        /* --max-conn-per-ip */
    double header_timeout_s;     /* --header-timeout: a request head must arrive within it */
    srv_guard guard;             /* connections per client and in total, request-head deadline */
    pthread_mutex_t mu;          /* the HTTP side's counters below (the queue has its own) */
    int in_flight;               /* requests being handled or answered */
    unsigned long long requests; /* requests received */
    unsigned long long status_count[600]; /* responses by status */
    void *daemon;                /* the HTTP library's daemon (srv_http.c alone knows its type) */
    /* answers a complete, authorised request (the endpoints: srv_api.h) */
    srv_result (*route)(srv_conn *rc);
} srv_server;

/* One request: its body as it arrives. */
struct srv_conn {
    srv_server *s;
    void *wire;                  /* the HTTP library's connection (srv_http.c alone knows its type) */
    srv_peer *peer;              /* its connection in the guard */
    const char *method, *url;    /* method: HEAD is answered as GET (without the body) */
    const char *verb;            /* the method as sent (for the access log) */
    char *body;
    size_t len, cap, limit;      /* limit: the body bytes this endpoint takes */
    int too_large;
    int replied;                 /* a response is queued */
    double t_start;              /* fx_now_s() at the request head */
    const char *cors_origin;     /* an allowed cross-site Origin: echoed in the CORS headers */
    const char *allow;           /* a 405's Allow header */
    char location[64];           /* a 202's Location header */
};

/* Start listening on host:port (port 0: any free port, reported in
 * *bound_port). 0, or -1 with the reason in why. */
int srv_http_start(srv_server *s, const char *host, int port, int *bound_port, char *why, size_t why_size);
/* Stop accepting and close every connection. */
void srv_http_stop(srv_server *s);

/* The HTTP side's counters, copied under its mutex. */
typedef struct srv_http_stats {
    int in_flight;
    unsigned long long requests;
    unsigned long long status_count[600];
} srv_http_stats;
void srv_http_stats_of(srv_server *s, srv_http_stats *out);

/* Responses (each queues the response and says whether it could). The
 * strbuf's text is taken over. */
srv_result srv_reply(srv_conn *rc, unsigned status, const char *type, fx_strbuf *body);
srv_result srv_reply_bytes(srv_conn *rc, unsigned status, const char *type, const void *data, size_t len);
/* {"error": {"message", "type", "code"}, "detail": message}, with the
 * status of the kind (srv_error_status: the one place statuses are chosen) */
srv_result srv_reply_error(srv_conn *rc, srv_error_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* SRV_E_BUSY / SRV_E_UNAVAILABLE (429 / 503) with Retry-After */
srv_result srv_reply_busy(srv_conn *rc, srv_error_kind kind, int retry_after, const char *msg);
/* A streamed response (Server-Sent Events): read fills buf with up to max
 * bytes and returns their count, or SRV_STREAM_END / SRV_STREAM_ERROR;
 * free_cb(cls) runs once the response is done (or could not be made). */
#define SRV_STREAM_END (-1)
#define SRV_STREAM_ERROR (-2)
typedef ssize_t (*srv_stream_read)(void *cls, char *buf, size_t max);
typedef void (*srv_stream_free)(void *cls);
srv_result srv_reply_stream(srv_conn *rc, srv_stream_read read, void *cls, srv_stream_free free_cb);

/* The value of a request header (NULL when absent). */
const char *srv_header(srv_conn *rc, const char *name);

/* 1 when the client closed its side of the connection. */
int srv_client_gone(srv_conn *rc);
/* No idle timeout for this connection (while it waits for a job or streams). */
void srv_conn_no_timeout(srv_conn *rc);

#endif
