/*
 * srv_guard.c — the connection guard (srv_guard.h).
 */
#include "srv_guard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/base/clock.h"
#include "srv_clock.h"

#define BODY_BYTES_PER_SECOND 16384.0 /* the slowest body a deadline allows after the head time */

typedef enum peer_phase { PEER_WAITING, PEER_BODY, PEER_BUSY } peer_phase;

struct srv_peer {
    srv_peer *next, *prev;
    int fd;
    char ip[48];
    peer_phase phase;
    double since; /* fx_now_s() when the phase began */
    size_t body;  /* body bytes of the request being received */
    int shut;     /* shut down by the guard */
};

const char *srv_peer_ip(const srv_peer *p) { return p ? p->ip : "-"; }

static void shut_locked(srv_guard *g, srv_peer *p) {
    if (p->shut) return;
    p->shut = 1;
    g->dropped++;
    shutdown(p->fd, SHUT_RDWR); /* the fd stays open: libmicrohttpd closes it (after telling srv_guard_close) */
}

static double deadline(const srv_guard *g, const srv_peer *p) {
    if (p->phase == PEER_BUSY) return -1;
    return p->since + g->head_timeout + (p->phase == PEER_BODY ? (double)p->body / BODY_BYTES_PER_SECOND : 0);
}

/* The oldest connection that may be evicted (waiting first, then slow
 * bodies), of address ip (NULL: any), other than `not`. */
static srv_peer *evictable_locked(srv_guard *g, const char *ip, const srv_peer *not) {
    srv_peer *best = NULL;
    for (int phase = PEER_WAITING; phase <= PEER_BODY && !best; phase++)
        for (srv_peer *p = g->head; p; p = p->next)
            if (p != not && !p->shut && p->phase == (peer_phase)phase && (!ip || !strcmp(p->ip, ip)) &&
                (!best || p->since <= best->since))
                best = p;
    return best;
}

static void *watchdog_main(void *arg) {
    srv_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        const struct timespec ts = srv_deadline_in_ms(200);
        pthread_cond_timedwait(&g->wake, &g->mu, &ts);
        const double now = fx_now_s();
        for (srv_peer *p = g->head; p; p = p->next) {
            const double d = deadline(g, p);
            if (d >= 0 && now > d) shut_locked(g, p);
        }
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int srv_guard_start(srv_guard *g, int max_conns, int max_per_ip, double head_timeout) {
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->wake, NULL);
    g->max_conns = max_conns;
    g->max_per_ip = max_per_ip;
    g->head_timeout = head_timeout;
    const int rc = pthread_create(&g->watchdog, NULL, watchdog_main, g);
    if (rc) {
        errno = rc;
        return -1;
    }
    g->running = 1;
    return 0;
}

void srv_guard_stop(srv_guard *g) {
    if (!g->running) return;
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    pthread_cond_broadcast(&g->wake);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->watchdog, NULL);
    g->running = 0;
    for (srv_peer *p = g->head, *next; p; p = next) { /* none left once the daemon stopped */
        next = p->next;
        free(p);
    }
    g->head = NULL;
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->mu);
}

srv_peer *srv_guard_open(srv_guard *g, int fd, const struct sockaddr *addr) {
    srv_peer *p = calloc(1, sizeof *p);
    if (!p) {
        shutdown(fd, SHUT_RDWR);
        return NULL;
    }
    p->fd = fd;
    p->since = fx_now_s();
    p->phase = PEER_WAITING;
    snprintf(p->ip, sizeof p->ip, "?");
    if (addr && addr->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)addr)->sin_addr, p->ip, sizeof p->ip);
    else if (addr && addr->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)addr)->sin6_addr, p->ip, sizeof p->ip);
    pthread_mutex_lock(&g->mu);
    p->next = g->head;
    if (g->head) g->head->prev = p;
    g->head = p;
    g->count++;
    int same = 0;
    for (const srv_peer *q = g->head; q; q = q->next) same += !q->shut && !strcmp(q->ip, p->ip);
    if (same > g->max_per_ip) { /* this address holds its share: its oldest idle connection gives way (when
                                   all of them are busy, the new one's request gets 429: srv_guard_busy) */
        srv_peer *old = evictable_locked(g, p->ip, p);
        if (old) shut_locked(g, old);
    }
    const int reserve = g->max_conns / 8 > 1 ? g->max_conns / 8 : 1;
    int live = 0;
    for (const srv_peer *q = g->head; q; q = q->next) live += !q->shut;
    if (!p->shut && live > g->max_conns - reserve) { /* keep the reserve free for new clients */
        srv_peer *old = evictable_locked(g, NULL, p);
        if (old) shut_locked(g, old);
        else if (live >= g->max_conns) shut_locked(g, p);
    }
    pthread_mutex_unlock(&g->mu);
    return p;
}

void srv_guard_close(srv_guard *g, srv_peer *p) {
    if (!p) return;
    pthread_mutex_lock(&g->mu);
    if (p->prev) p->prev->next = p->next;
    else g->head = p->next;
    if (p->next) p->next->prev = p->prev;
    g->count--;
    pthread_mutex_unlock(&g->mu);
    free(p);
}

static void set_phase(srv_guard *g, srv_peer *p, peer_phase phase) {
    if (!p) return;
    pthread_mutex_lock(&g->mu);
    p->phase = phase;
    p->since = fx_now_s();
    p->body = 0;
    pthread_mutex_unlock(&g->mu);
}

void srv_guard_head(srv_guard *g, srv_peer *p) { set_phase(g, p, PEER_BODY); }
void srv_guard_idle(srv_guard *g, srv_peer *p) { set_phase(g, p, PEER_WAITING); }

void srv_guard_body(srv_guard *g, srv_peer *p, size_t n) {
    if (!p) return;
    pthread_mutex_lock(&g->mu);
    p->body += n;
    pthread_mutex_unlock(&g->mu);
}

int srv_guard_busy(srv_guard *g, srv_peer *p) {
    if (!p) return 1;
    pthread_mutex_lock(&g->mu);
    p->phase = PEER_BUSY;
    p->since = fx_now_s();
    int n = 0;
    for (const srv_peer *q = g->head; q; q = q->next) n += q->phase == PEER_BUSY && !q->shut && !strcmp(q->ip, p->ip);
    pthread_mutex_unlock(&g->mu);
    return n;
}

void srv_guard_counts(srv_guard *g, int *open, unsigned long long *dropped) {
    pthread_mutex_lock(&g->mu);
    *open = g->count;
    *dropped = g->dropped;
    pthread_mutex_unlock(&g->mu);
}
