/*
 * srv_routes.h — flux-server's endpoints as one table (srv_routes.c): the
 * HTTP side reads it before a body (which paths need the API key, which
 * take images or a form) and the router reads it to call the endpoint, so
 * the two cannot disagree. Pure data and lookups (no HTTP library), unit
 * tested in tests/server/.
 */
#ifndef FX_SRV_ROUTES_H
#define FX_SRV_ROUTES_H

/* What answers a route (srv_api.c's handlers). */
typedef enum srv_endpoint {
    SRV_EP_OPENAI_GENERATIONS,
    SRV_EP_OPENAI_EDITS,
    SRV_EP_OPENAI_MODELS,
    SRV_EP_SERVER_INFO,
    SRV_EP_A1111_TXT2IMG,
    SRV_EP_A1111_IMG2IMG,
    SRV_EP_A1111_PROGRESS,
    SRV_EP_A1111_INTERRUPT,
    SRV_EP_A1111_MODELS,
    SRV_EP_A1111_LORAS,
    SRV_EP_A1111_SAMPLERS,
    SRV_EP_A1111_OPTIONS,
    SRV_EP_A1111_LIST,        /* a static list (srv_route.text) */
    SRV_EP_JOBS_SUBMIT,
    SRV_EP_JOB,               /* /v1/jobs/ID: status (GET), cancel (DELETE) */
    SRV_EP_JOB_RESULT,
    SRV_EP_JOB_EVENTS,
    SRV_EP_JOB_IMAGE,         /* /v1/jobs/ID/images/N */
    SRV_EP_PAGE,
    SRV_EP_FAVICON,
    SRV_EP_HEALTH,
    SRV_EP_READY,
    SRV_EP_METRICS
} srv_endpoint;

typedef struct srv_route {
    const char *method;       /* "GET" (HEAD answered as GET), "POST", "DELETE" */
    const char *path;         /* exact, or with '*' standing for one path segment (a job id, an image number) */
    srv_endpoint endpoint;
    int open;                 /* answered without the API key: the probes and the page */
    int images;               /* its body may carry images: the larger body limit (--max-body-mb) */
    int form;                 /* multipart/form-data is taken besides application/json */
    const char *text;         /* SRV_EP_A1111_LIST: the JSON answered */
} srv_route;

/* Every route of flux-server, in the order they are matched. */
extern const srv_route srv_routes[];
extern const int srv_n_routes;

/* The route of method (HEAD as GET) and path: NULL when none. Then *allow
 * (when not NULL) is the methods the path has ("GET, HEAD, DELETE"), NULL
 * when no route has the path at all (404, not 405). */
const srv_route *srv_route_find(const char *method, const char *path, const char **allow);

/* 1 when the path needs no API key whatever the method (the probes and the
 * page: open routes), so a 405 or 404 of them is not hidden behind a 401. */
int srv_path_open(const char *path);

#endif
