/*
 * srv_routes.c — the route table of flux-server (srv_routes.h).
 */
#include "srv_routes.h"

#include <string.h>

#define LIST(path, json) {"GET", path, SRV_EP_A1111_LIST, 0, 0, 0, json}

const srv_route srv_routes[] = {
    /* OpenAI */
    {"POST", "/v1/images/generations", SRV_EP_OPENAI_GENERATIONS, 0, 0, 0, NULL},
    {"POST", "/v1/images/edits", SRV_EP_OPENAI_EDITS, 0, 1, 1, NULL},
    {"GET", "/v1/models", SRV_EP_OPENAI_MODELS, 0, 0, 0, NULL},
    /* AUTOMATIC1111 */
    {"POST", "/sdapi/v1/txt2img", SRV_EP_A1111_TXT2IMG, 0, 0, 0, NULL},
    {"POST", "/sdapi/v1/img2img", SRV_EP_A1111_IMG2IMG, 0, 1, 0, NULL},
    {"GET", "/sdapi/v1/progress", SRV_EP_A1111_PROGRESS, 0, 0, 0, NULL},
    {"POST", "/sdapi/v1/interrupt", SRV_EP_A1111_INTERRUPT, 0, 0, 0, NULL},
    {"GET", "/sdapi/v1/sd-models", SRV_EP_A1111_MODELS, 0, 0, 0, NULL},
    {"GET", "/sdapi/v1/loras", SRV_EP_A1111_LORAS, 0, 0, 0, NULL},
    {"GET", "/sdapi/v1/samplers", SRV_EP_A1111_SAMPLERS, 0, 0, 0, NULL},
    {"GET", "/sdapi/v1/options", SRV_EP_A1111_OPTIONS, 0, 0, 0, NULL},
    {"POST", "/sdapi/v1/options", SRV_EP_A1111_OPTIONS, 0, 0, 0, NULL},
    /* the lists A1111 clients fill their menus from: what this server has (one scheduler, no upscalers) */
    LIST("/sdapi/v1/schedulers", "[{\"name\":\"simple\",\"label\":\"Simple (FLUX.2 shifted)\",\"aliases\":null,"
                                 "\"default_rho\":-1,\"need_inner_model\":false}]\n"),
    LIST("/sdapi/v1/upscalers", "[{\"name\":\"None\",\"model_name\":null,\"model_path\":null,\"model_url\":null,"
                                "\"scale\":1}]\n"),
    LIST("/sdapi/v1/sd-vae", "[]\n"),
    LIST("/sdapi/v1/sd-modules", "[]\n"),
    LIST("/sdapi/v1/latent-upscale-modes", "[]\n"),
    /* native */
    {"GET", "/v1/server", SRV_EP_SERVER_INFO, 0, 0, 0, NULL},
    {"POST", "/v1/jobs", SRV_EP_JOBS_SUBMIT, 0, 1, 0, NULL},
    {"GET", "/v1/jobs/*", SRV_EP_JOB, 0, 0, 0, NULL},
    {"DELETE", "/v1/jobs/*", SRV_EP_JOB, 0, 0, 0, NULL},
    {"GET", "/v1/jobs/*/result", SRV_EP_JOB_RESULT, 0, 0, 0, NULL},
    {"GET", "/v1/jobs/*/events", SRV_EP_JOB_EVENTS, 0, 0, 0, NULL},
    {"GET", "/v1/jobs/*/images/*", SRV_EP_JOB_IMAGE, 0, 0, 0, NULL},
    /* the page and the probes: no key */
    {"GET", "/", SRV_EP_PAGE, 1, 0, 0, NULL},
    {"GET", "/index.html", SRV_EP_PAGE, 1, 0, 0, NULL},
    {"GET", "/favicon.ico", SRV_EP_FAVICON, 1, 0, 0, NULL},
    {"GET", "/health", SRV_EP_HEALTH, 1, 0, 0, NULL},
    {"GET", "/ready", SRV_EP_READY, 1, 0, 0, NULL},
    {"GET", "/metrics", SRV_EP_METRICS, 0, 0, 0, NULL},
};
const int srv_n_routes = (int)(sizeof srv_routes / sizeof *srv_routes);

/* path against a pattern: '*' matches one non-empty segment (no '/'). */
static int path_matches(const char *pattern, const char *path) {
    while (*pattern) {
        if (*pattern == '*') {
            const size_t n = strcspn(path, "/");
            if (n == 0) return 0;
            path += n;
            pattern++;
        } else if (*pattern++ != *path++) {
            return 0;
        }
    }
    return *path == '\0';
}

const srv_route *srv_route_find(const char *method, const char *path, const char **allow) {
    if (!strcmp(method, "HEAD")) method = "GET";
    const srv_route *found = NULL;
    int get = 0, post = 0, del = 0;
    for (int i = 0; i < srv_n_routes; i++) {
        const srv_route *r = &srv_routes[i];
        if (!path_matches(r->path, path)) continue;
        if (!found && !strcmp(r->method, method)) found = r;
        get |= !strcmp(r->method, "GET");
        post |= !strcmp(r->method, "POST");
        del |= !strcmp(r->method, "DELETE");
    }
    if (allow) {
        static const char *const lists[8] = {NULL, "DELETE", "POST", "POST, DELETE", "GET, HEAD", "GET, HEAD, DELETE",
                                             "GET, HEAD, POST", "GET, HEAD, POST, DELETE"};
        *allow = lists[get << 2 | post << 1 | del];
    }
    return found;
}

int srv_path_open(const char *path) {
    int any = 0;
    for (int i = 0; i < srv_n_routes; i++)
        if (path_matches(srv_routes[i].path, path)) {
            if (!srv_routes[i].open) return 0;
            any = 1;
        }
    return any;
}
