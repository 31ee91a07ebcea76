/*
 * srv_http.c — the libmicrohttpd daemon of flux-server (srv_http.h).
 */
#include "srv_http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "src/base/clock.h"
#include "srv_access.h"
#include "srv_json_out.h"
#include "srv_routes.h"

/* ---------------------------------------------------------------- replies */

static void count_status(srv_server *s, unsigned status) {
    pthread_mutex_lock(&s->mu);
    if (status < 600) s->status_count[status]++;
    pthread_mutex_unlock(&s->mu);
}

void srv_http_stats_of(srv_server *s, srv_http_stats *out) {
    pthread_mutex_lock(&s->mu);
    out->in_flight = s->in_flight;
    out->requests = s->requests;
    memcpy(out->status_count, s->status_count, sizeof out->status_count);
    pthread_mutex_unlock(&s->mu);
}

/* The library's connection behind a request (only this file knows its type). */
static struct MHD_Connection *conn_of(const srv_conn *rc) { return rc->wire; }

static srv_result result_of(enum MHD_Result r) { return r == MHD_YES ? SRV_SENT : SRV_CLOSE; }
static enum MHD_Result mhd_of(srv_result r) { return r == SRV_SENT ? MHD_YES : MHD_NO; }

const char *srv_header(srv_conn *rc, const char *name) {
    return MHD_lookup_connection_value(conn_of(rc), MHD_HEADER_KIND, name);
}

/* Every response goes out here: the common headers, the counters, the log. */
static srv_result queue(srv_conn *rc, unsigned status, struct MHD_Response *r, long long bytes) {
    if (!r) return SRV_CLOSE;
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (rc->cors_origin) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", rc->cors_origin);
        MHD_add_response_header(r, "Access-Control-Expose-Headers", "Location, Retry-After");
    }
    if (rc->s->cors_origins) MHD_add_response_header(r, "Vary", "Origin");
    if (rc->allow) MHD_add_response_header(r, "Allow", rc->allow);
    if (rc->location[0]) MHD_add_response_header(r, "Location", rc->location);
    const enum MHD_Result ok = MHD_queue_response(conn_of(rc), status, r);
    MHD_destroy_response(r);
    rc->replied = 1;
    count_status(rc->s, status);
    if (rc->s->access_log || rc->s->verbose >= 2) {
        /* time, client, method, path, status, bytes, seconds since the request head */
        char when[32], size[24];
        const time_t now = time(NULL);
        struct tm tm;
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
        if (bytes >= 0) snprintf(size, sizeof size, "%lld", bytes);
        else snprintf(size, sizeof size, "-");
        char path[256]; /* the decoded path as one line: control characters and spaces shown as '?' */
        size_t k = 0;
        for (const char *u = rc->url; *u && k + 1 < sizeof path; u++)
            path[k++] = (unsigned char)*u <= ' ' || *u == 0x7f ? '?' : *u;
        path[k] = '\0';
        fprintf(stderr, "flux-server: %s %s %s %s %u %s %.3f\n", when, srv_peer_ip(rc->peer), rc->verb, path, status, size,
                fx_now_s() - rc->t_start);
    }
    return result_of(ok);
}

srv_result srv_reply_bytes(srv_conn *rc, unsigned status, const char *type, const void *data, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (r) MHD_add_response_header(r, "Content-Type", type);
    return queue(rc, status, r, (long long)len);
}

srv_result srv_reply(srv_conn *rc, unsigned status, const char *type, fx_strbuf *body) {
    if (body->failed) {
        free(body->s);
        memset(body, 0, sizeof *body);
        return srv_reply_error(rc, SRV_E_NO_MEMORY, "out of memory building the response");
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(body->len, body->s ? body->s : (char *)"", body->s ? MHD_RESPMEM_MUST_FREE
                                                                                          : MHD_RESPMEM_PERSISTENT);
    if (!r) free(body->s);
    const long long len = (long long)body->len;
    memset(body, 0, sizeof *body);
    if (r) MHD_add_response_header(r, "Content-Type", type);
    return queue(rc, status, r, len);
}

static void error_body(fx_strbuf *b, srv_error_kind kind, const char *msg) {
    fx_sb_str(b, "{\"error\":{\"message\":");
    srv_json_str(b, msg);
    fx_sb_printf(b, ",\"type\":\"%s\",\"code\":%u},\"detail\":", srv_error_type(kind), srv_error_status(kind));
    srv_json_str(b, msg);
    fx_sb_str(b, "}\n");
}

srv_result srv_reply_error(srv_conn *rc, srv_error_kind kind, const char *fmt, ...) {
    const unsigned status = srv_error_status(kind);
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fx_strbuf b = {0};
    error_body(&b, kind, msg);
    if (kind == SRV_E_UNAUTHORIZED) {
        struct MHD_Response *r =
            MHD_create_response_from_buffer(b.len, b.s ? b.s : (char *)"", b.s ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!r) free(b.s);
        if (r) {
            MHD_add_response_header(r, "Content-Type", "application/json");
            MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
        }
        return queue(rc, status, r, (long long)b.len);
    }
    return srv_reply(rc, status, "application/json", &b);
}

srv_result srv_reply_busy(srv_conn *rc, srv_error_kind kind, int retry_after, const char *msg) {
    const unsigned status = srv_error_status(kind);
    fx_strbuf b = {0};
    error_body(&b, kind, msg);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(b.len, b.s ? b.s : (char *)"", b.s ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) free(b.s);
    if (r) {
        char ra[24];
        snprintf(ra, sizeof ra, "%d", retry_after);
        MHD_add_response_header(r, "Content-Type", "application/json");
        MHD_add_response_header(r, "Retry-After", ra);
    }
    return queue(rc, status, r, (long long)b.len);
}

/* A stream of the handler's (srv_stream_read) as the library calls it. */
typedef struct stream {
    srv_stream_read read;
    srv_stream_free free_cb;
    void *cls;
} stream;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    const stream *st = cls;
    (void)pos;
    const ssize_t n = st->read(st->cls, buf, max);
    return n == SRV_STREAM_END ? MHD_CONTENT_READER_END_OF_STREAM
           : n == SRV_STREAM_ERROR ? MHD_CONTENT_READER_END_WITH_ERROR : n;
}

static void stream_free(void *cls) {
    stream *st = cls;
    st->free_cb(st->cls);
    free(st);
}

srv_result srv_reply_stream(srv_conn *rc, srv_stream_read read, void *cls, srv_stream_free free_cb) {
    stream *st = malloc(sizeof *st);
    if (!st) {
        free_cb(cls);
        return SRV_CLOSE;
    }
    *st = (stream){read, free_cb, cls};
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
    if (!r) {
        stream_free(st);
        return SRV_CLOSE;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "X-Accel-Buffering", "no"); /* nginx: pass events on at once */
    srv_conn_no_timeout(rc);
    return queue(rc, 200, r, -1);
}

/* ---------------------------------------------------------------- connections */

int srv_client_gone(srv_conn *rc) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn_of(rc), MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return 1;
    char c;
    /* readable: 0 bytes means the peer closed; data means a pipelined request */
    return recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

void srv_conn_no_timeout(srv_conn *rc) { MHD_set_connection_option(conn_of(rc), MHD_CONNECTION_OPTION_TIMEOUT, 0u); }

/* The body bytes a route takes: images only where they are read. */
static size_t body_limit(const srv_server *s, const srv_route *rt) {
    return (rt && rt->images) || s->lim.max_text_body > s->lim.max_body ? s->lim.max_body : s->lim.max_text_body;
}

/* The request head is in: who may ask, and what body it may send. A reply
 * queued here ends the request (MHD closes the connection unread). */
static srv_result check_head(srv_conn *rc) {
    srv_server *s = rc->s;
    const char *host = srv_header(rc, "Host"), *origin = srv_header(rc, "Origin");
    if (s->check_host && !srv_host_ok(host, s->allow_hosts))
        return srv_reply_error(rc, SRV_E_FORBIDDEN, "Host: '%.100s' is not this machine (a loopback server answers localhost, "
                                        "127.0.0.1 and [::1]; --allow-host NAME adds names)", host);
    const int o = srv_origin_check(origin, host, s->cors_origins, &rc->cors_origin);
    if (o < 0)
        return srv_reply_error(rc, SRV_E_FORBIDDEN, "Origin: '%.100s' is another site (--cors-origin ORIGIN lets its pages call)",
                               origin);
    if (!strcmp(rc->verb, "OPTIONS")) { /* a CORS preflight (no credentials are sent with it) */
        struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (r && rc->cors_origin) {
            MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, DELETE");
            MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
            MHD_add_response_header(r, "Access-Control-Max-Age", "600");
        }
        rc->allow = "GET, HEAD, POST, DELETE, OPTIONS";
        return queue(rc, 204, r, 0);
    }
    /* the route table says which paths are open (srv_routes.c); unknown ones need the key like the rest */
    const srv_route *rt = srv_route_find(rc->method, rc->url, NULL);
    if (!(rt ? rt->open : srv_path_open(rc->url)) && !srv_key_ok(srv_header(rc, "Authorization"), s->api_key))
        return srv_reply_error(rc, SRV_E_UNAUTHORIZED, "missing or wrong API key (Authorization: Bearer KEY)");
    const char *cl = srv_header(rc, "Content-Length"), *te = srv_header(rc, "Transfer-Encoding");
    const unsigned long long announced = cl ? strtoull(cl, NULL, 10) : 0;
    if (announced || te) { /* a body: JSON, or a form where a form is read */
        const char *ct = srv_header(rc, "Content-Type");
        const int form = rt && rt->form && srv_media_type_is(ct, "multipart/form-data");
        if (!form && !srv_media_type_is(ct, "application/json"))
            return srv_reply_error(rc, SRV_E_MEDIA_TYPE, "Content-Type: '%.64s'; this endpoint takes application/json%s",
                                   ct ? ct : "(none)", rt && rt->form ? " or multipart/form-data" : "");
    }
    rc->limit = body_limit(s, rt);
    if (announced > rc->limit) {
        rc->too_large = 1;
        return srv_reply_error(rc, SRV_E_TOO_LARGE, "request body of %llu bytes; %s takes at most %zu", announced, rc->url,
                               rc->limit);
    }
    if (announced) { /* the whole body in one allocation of its size */
        rc->body = malloc((size_t)announced + 1);
        if (!rc->body) return srv_reply_error(rc, SRV_E_NO_MEMORY, "out of memory for a body of %llu bytes", announced);
        rc->cap = (size_t)announced + 1;
    }
    return SRV_SENT;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    srv_server *s = cls;
    srv_conn *rc = *con_cls;
    (void)version;
    if (!rc) { /* first call: headers only */
        rc = calloc(1, sizeof *rc);
        if (!rc) return MHD_NO;
        rc->s = s;
        rc->wire = c;
        rc->url = url;
        rc->verb = method;
        rc->method = strcmp(method, "HEAD") ? method : "GET"; /* libmicrohttpd leaves HEAD's body out */
        rc->t_start = fx_now_s();
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        rc->peer = ci ? ci->socket_context : NULL;
        srv_guard_head(&s->guard, rc->peer);
        *con_cls = rc;
        pthread_mutex_lock(&s->mu);
        s->in_flight++;
        s->requests++;
        pthread_mutex_unlock(&s->mu);
        return mhd_of(check_head(rc));
    }
    if (rc->replied) { /* refused at the head: the rest of the body is not read */
        *upload_size = 0;
        return MHD_NO;
    }
    if (*upload_size) { /* a piece of the body */
        const size_t n = *upload_size;
        *upload_size = 0;
        srv_guard_body(&s->guard, rc->peer, n);
        if (rc->too_large || rc->len + n > rc->limit) { /* a chunked body passing the limit: answer now */
            rc->too_large = 1;
            if (srv_reply_error(rc, SRV_E_TOO_LARGE, "request body larger than %zu bytes (%s)", rc->limit, rc->url) != SRV_SENT)
                return MHD_NO; /* not answerable mid-body: close the connection */
            return MHD_YES;
        }
        if (rc->len + n + 1 > rc->cap) {
            size_t cap = rc->cap ? rc->cap : 4096;
            while (cap < rc->len + n + 1) cap *= 2;
            if (cap > rc->limit + 1) cap = rc->limit + 1;
            char *p = realloc(rc->body, cap);
            if (!p) return MHD_NO;
            rc->body = p;
            rc->cap = cap;
        }
        memcpy(rc->body + rc->len, upload_data, n);
        rc->len += n;
        rc->body[rc->len] = '\0';
        return MHD_YES;
    }
    if (rc->too_large) return mhd_of(srv_reply_error(rc, SRV_E_TOO_LARGE, "request body larger than %zu bytes", rc->limit));
    if (srv_guard_busy(&s->guard, rc->peer) > s->guard.max_per_ip)
        return mhd_of(srv_reply_busy(rc, SRV_E_BUSY, 5, "too many open requests from your address (--max-conn-per-ip)"));
    return mhd_of(s->route(rc));
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    srv_server *s = cls;
    srv_conn *rc = *con_cls;
    (void)c;
    (void)toe;
    if (!rc) return;
    srv_guard_idle(&s->guard, rc->peer);
    pthread_mutex_lock(&s->mu);
    s->in_flight--;
    pthread_mutex_unlock(&s->mu);
    free(rc->body);
    free(rc);
    *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    srv_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *addr = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        *socket_context = fd ? srv_guard_open(&s->guard, fd->connect_fd, addr ? addr->client_addr : NULL) : NULL;
    } else {
        srv_guard_close(&s->guard, *socket_context);
        *socket_context = NULL;
    }
}

static void on_log(void *cls, const char *fmt, va_list ap) {
    fputs("flux-server: libmicrohttpd: ", stderr);
    vfprintf(stderr, fmt, ap);
}

int srv_http_start(srv_server *s, const char *host, int port, int *bound_port, char *why, size_t why_size) {
    pthread_mutex_init(&s->mu, NULL);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    int gai = getaddrinfo(host, port_s, &hints, &ai);
    if (gai) {
        snprintf(why, why_size, "--host %s: %s", host, gai_strerror(gai));
        return -1;
    }
    if (srv_guard_start(&s->guard, s->max_conns, s->max_conns_per_ip, s->header_timeout_s) != 0) {
        freeaddrinfo(ai);
        snprintf(why, why_size, "cannot start the connection guard: %s", strerror(errno));
        return -1;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, s,                      //
                                 MHD_OPTION_EXTERNAL_LOGGER, on_log, NULL,                               //
                                 MHD_OPTION_SOCK_ADDR, ai->ai_addr,                                      //
                                 MHD_OPTION_CONNECTION_TIMEOUT, s->timeout_s,                            //
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->guard.max_conns,              //
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,                           //
                                 MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,                         //
                                 MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,                                 //
                                 MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon) {
        srv_guard_stop(&s->guard);
        snprintf(why, why_size, "cannot listen on %s port %d: %s", host, port,
                 errno ? strerror(errno) : "libmicrohttpd refused to start");
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    *bound_port = di ? di->port : port;
    return 0;
}

void srv_http_stop(srv_server *s) {
    if (s->daemon) MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
    srv_guard_stop(&s->guard);
}
