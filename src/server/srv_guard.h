/*
 * srv_guard.h — flux-server's connection guard: no client can lock the
 * others out by holding connections (issue 32 D2).
 *
 * Every TCP connection is tracked from accept to close with its client
 * address and phase:
 *   waiting  for a request head (a new or a kept-alive connection): it must
 *            complete the head within head_timeout seconds;
 *   body     receiving a request body: head_timeout plus one second per
 *            16 KiB received (a byte every few seconds is dropped);
 *   busy     handled (waiting for its job, streaming events): no deadline.
 * A connection past its deadline is shut down (shutdown(2): the HTTP
 * library sees the end of the stream and closes it). Bounds: at most
 * max_per_ip connections per client address and max_conns in all; a new
 * connection beyond either evicts the oldest waiting connection (of that
 * address, or of anyone) instead of being refused, so slow or idle sockets
 * give way to new clients (the reserve: max_conns / 8 connections are kept
 * free this way). Busy connections are never evicted; a request of a client
 * with max_per_ip busy ones already gets 429.
 *
 * The guard knows sockets and addresses only (no HTTP): srv_http.c calls
 * it from libmicrohttpd's connection and request callbacks.
 */
#ifndef FX_SRV_GUARD_H
#define FX_SRV_GUARD_H

#include <pthread.h>
#include <stddef.h>
#include <sys/socket.h>

typedef struct srv_peer srv_peer;

typedef struct srv_guard {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    srv_peer *head;            /* open connections, newest first */
    int count;
    int max_conns, max_per_ip; /* --max-connections, --max-conn-per-ip */
    double head_timeout;       /* --header-timeout seconds */
    unsigned long long dropped; /* connections shut down (deadline or eviction) */
    int stop, running;
    pthread_t watchdog;
} srv_guard;

/* Start the watchdog. 0 or -1 (errno). */
int srv_guard_start(srv_guard *g, int max_conns, int max_per_ip, double head_timeout);
void srv_guard_stop(srv_guard *g);

/* A new connection (fd, client address): tracked; evictions done. NULL
 * when out of memory (the connection is then shut down). */
srv_peer *srv_guard_open(srv_guard *g, int fd, const struct sockaddr *addr);
/* The connection closed (before its socket is). */
void srv_guard_close(srv_guard *g, srv_peer *p);

/* The request head is in: the body phase starts. */
void srv_guard_head(srv_guard *g, srv_peer *p);
/* n more body bytes arrived. */
void srv_guard_body(srv_guard *g, srv_peer *p, size_t n);
/* The request is complete and handled from now on: no deadline. Returns the
 * number of busy connections of its client address (itself included). */
int srv_guard_busy(srv_guard *g, srv_peer *p);
/* The answer went out; the connection waits for its next request head. */
void srv_guard_idle(srv_guard *g, srv_peer *p);

/* The client address of a connection ("127.0.0.1", "::1"). */
const char *srv_peer_ip(const srv_peer *p);

/* Open connections and connections dropped so far. */
void srv_guard_counts(srv_guard *g, int *open, unsigned long long *dropped);

#endif
