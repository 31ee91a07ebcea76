/*
 * srv_http.c — the libmicrohttpd daemon of flux-server (srv_http.h).
 */
#include "srv_http.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "srv_json_out.h"

/* ---------------------------------------------------------------- replies */

static void count_status(srv_server *s, unsigned status) {
    pthread_mutex_lock(&s->q.mu);
    if (status < 600) s->status_count[status]++;
    pthread_mutex_unlock(&s->q.mu);
}

static enum MHD_Result queue(srv_conn *rc, unsigned status, struct MHD_Response *r) {
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    const enum MHD_Result ok = MHD_queue_response(rc->c, status, r);
    MHD_destroy_response(r);
    count_status(rc->s, status);
    if (rc->s->verbose >= 2) fprintf(stderr, "flux-server: %s %s -> %u\n", rc->method, rc->url, status);
    return ok;
}

enum MHD_Result srv_reply_bytes(srv_conn *rc, unsigned status, const char *type, const void *data, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (r) MHD_add_response_header(r, "Content-Type", type);
    return queue(rc, status, r);
}

enum MHD_Result srv_reply(srv_conn *rc, unsigned status, const char *type, fx_strbuf *body) {
    if (body->failed) {
        free(body->s);
        memset(body, 0, sizeof *body);
        return srv_reply_error(rc, 500, "out of memory building the response");
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(body->len, body->s ? body->s : (char *)"", body->s ? MHD_RESPMEM_MUST_FREE
                                                                                          : MHD_RESPMEM_PERSISTENT);
    if (!r) free(body->s);
    memset(body, 0, sizeof *body);
    if (r) MHD_add_response_header(r, "Content-Type", type);
    return queue(rc, status, r);
}

static const char *error_type(unsigned status) {
    switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

static void error_body(fx_strbuf *b, unsigned status, const char *msg) {
    fx_sb_str(b, "{\"error\":{\"message\":");
    srv_json_str(b, msg);
    fx_sb_printf(b, ",\"type\":\"%s\",\"code\":%u},\"detail\":", error_type(status), status);
    srv_json_str(b, msg);
    fx_sb_str(b, "}\n");
}

enum MHD_Result srv_reply_error(srv_conn *rc, unsigned status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fx_strbuf b = {0};
    error_body(&b, status, msg);
    if (status == 401) {
        struct MHD_Response *r =
            MHD_create_response_from_buffer(b.len, b.s ? b.s : (char *)"", b.s ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!r) free(b.s);
        if (r) {
            MHD_add_response_header(r, "Content-Type", "application/json");
            MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
        }
        return queue(rc, status, r);
    }
    return srv_reply(rc, status, "application/json", &b);
}

enum MHD_Result srv_reply_busy(srv_conn *rc, unsigned status, int retry_after, const char *msg) {
    fx_strbuf b = {0};
    error_body(&b, status, msg);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(b.len, b.s ? b.s : (char *)"", b.s ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) free(b.s);
    if (r) {
        char ra[24];
        snprintf(ra, sizeof ra, "%d", retry_after);
        MHD_add_response_header(r, "Content-Type", "application/json");
        MHD_add_response_header(r, "Retry-After", ra);
    }
    return queue(rc, status, r);
}

enum MHD_Result srv_reply_stream(srv_conn *rc, MHD_ContentReaderCallback read, void *cls,
                                 MHD_ContentReaderFreeCallback free_cb) {
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read, cls, free_cb);
    if (!r) {
        free_cb(cls);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "X-Accel-Buffering", "no"); /* nginx: pass events on at once */
    srv_conn_no_timeout(rc);
    return queue(rc, 200, r);
}

/* ---------------------------------------------------------------- connections */

int srv_client_gone(srv_conn *rc) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(rc->c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return 1;
    char c;
    /* readable: 0 bytes means the peer closed; data means a pipelined request */
    return recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

void srv_conn_no_timeout(srv_conn *rc) { MHD_set_connection_option(rc->c, MHD_CONNECTION_OPTION_TIMEOUT, 0u); }

/* Bearer token in constant time (no early exit on the first difference). */
static int key_ok(const srv_server *s, struct MHD_Connection *c) {
    if (!s->api_key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    h += 7;
    const size_t n = strlen(s->api_key), m = strlen(h);
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)s->api_key[i] ^ (unsigned char)(i < m ? h[i] : 0);
    return diff == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    srv_server *s = cls;
    srv_conn *rc = *con_cls;
    if (!rc) { /* first call: headers only */
        rc = calloc(1, sizeof *rc);
        if (!rc) return MHD_NO;
        rc->s = s;
        rc->c = c;
        rc->url = url;
        rc->method = method;
        *con_cls = rc;
        pthread_mutex_lock(&s->q.mu);
        s->in_flight++;
        s->q.m.http_requests++;
        pthread_mutex_unlock(&s->q.mu);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->lim.max_body) rc->too_large = 1;
        if (rc->too_large) /* answered before the body is read; MHD closes the connection */
            return srv_reply_error(rc, 413, "request body of %s bytes; at most %zu", cl, s->lim.max_body);
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        const size_t n = *upload_size;
        *upload_size = 0;
        if (rc->too_large || rc->len + n > s->lim.max_body) {
            rc->too_large = 1;
            return MHD_YES;
        }
        if (rc->len + n + 1 > rc->cap) {
            size_t cap = rc->cap ? rc->cap : 4096;
            while (cap < rc->len + n + 1) cap *= 2;
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
    if (rc->too_large) return srv_reply_error(rc, 413, "request body larger than %zu bytes", s->lim.max_body);
    const int open = !strcmp(url, "/health") || !strcmp(url, "/ready") || !strcmp(url, "/") ||
                     !strcmp(url, "/favicon.ico");
    if (!open && !key_ok(s, c)) return srv_reply_error(rc, 401, "missing or wrong API key (Authorization: Bearer KEY)");
    return s->route(rc);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    srv_server *s = cls;
    srv_conn *rc = *con_cls;
    if (!rc) return;
    pthread_mutex_lock(&s->q.mu);
    s->in_flight--;
    if (toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT) s->q.m.disconnects++; /* an event stream's reader left */
    pthread_cond_broadcast(&s->q.changed);
    pthread_mutex_unlock(&s->q.mu);
    free(rc->body);
    free(rc);
    *con_cls = NULL;
}

static void on_log(void *cls, const char *fmt, va_list ap) {
    fputs("flux-server: libmicrohttpd: ", stderr);
    vfprintf(stderr, fmt, ap);
}

int srv_http_start(srv_server *s, const char *host, int port, int *bound_port, char *why, size_t why_size) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    int gai = getaddrinfo(host, port_s, &hints, &ai);
    if (gai) {
        snprintf(why, why_size, "--host %s: %s", host, gai_strerror(gai));
        return -1;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, s,                      //
                                 MHD_OPTION_EXTERNAL_LOGGER, on_log, NULL,                               //
                                 MHD_OPTION_SOCK_ADDR, ai->ai_addr,                                      //
                                 MHD_OPTION_CONNECTION_TIMEOUT, s->timeout_s,                            //
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)(s->q.max_length + 64),          //
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,                           //
                                 MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,                                 //
                                 MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon) {
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
}
