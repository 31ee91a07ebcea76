/*
 * srv_api.h — flux-server's endpoints (srv_api.c): the route callback the
 * HTTP side (srv_http.h) calls for each complete, authorised request.
 */
#ifndef FX_SRV_API_H
#define FX_SRV_API_H

#include "srv_http.h"

/* Answer rc by its method and URL: an endpoint, or 404. */
srv_result srv_api_route(srv_conn *rc);

#endif
