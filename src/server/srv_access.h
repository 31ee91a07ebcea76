/*
 * srv_access.h — who may call flux-server (issue 32 D4): the checks made on
 * a request's headers before its body is read. Pure functions of header
 * values (no HTTP library), unit-tested in tests/server/.
 *
 *   Host     a server listening on a loopback address answers only requests
 *            naming this machine (localhost, 127.x.y.z, [::1], any port) or
 *            a name of --allow-host: a page of another site whose name was
 *            pointed at 127.0.0.1 (DNS rebinding) is refused.
 *   Origin   a browser's request from another site (Origin not the Host
 *            itself) is refused unless --cors-origin lists that origin.
 *   Content-Type  JSON endpoints take application/json only: a form or
 *            text/plain POST (which browsers send cross-site without asking)
 *            is refused.
 *   API key  "Authorization: Bearer KEY", or HTTP Basic with KEY as the
 *            password (any user name); compared in constant time.
 */
#ifndef FX_SRV_ACCESS_H
#define FX_SRV_ACCESS_H

/* 1 when the Host header value names this machine or one of `allow` (a
 * comma-separated list of names, NULL for none). A missing Host (HTTP/1.0)
 * passes. */
int srv_host_ok(const char *host, const char *allow);

/* The Origin header against the Host and --cors-origin (comma separated,
 * "*" = any). 0: no Origin or the same origin; 1: a cross-site origin that
 * is allowed (*allowed = the value to echo in Access-Control-Allow-Origin);
 * -1: refused. */
int srv_origin_check(const char *origin, const char *host, const char *cors, const char **allowed);

/* 1 when a Content-Type value is the media type `type` (case-insensitive,
 * parameters such as "; charset=utf-8" allowed). */
int srv_media_type_is(const char *content_type, const char *type);

/* 1 when the Authorization header value carries `key` (Bearer, or Basic
 * with the key as the password); 1 also when key is NULL. */
int srv_key_ok(const char *authorization, const char *key);

#endif
