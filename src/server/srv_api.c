/*
 * srv_api.c — flux-server's endpoints (README "flux-server"):
 *
 *   OpenAI       POST /v1/images/generations, POST /v1/images/edits, GET /v1/models
 *   A1111        POST /sdapi/v1/txt2img, /sdapi/v1/img2img, /sdapi/v1/interrupt;
 *                GET /sdapi/v1/progress, /sdapi/v1/sd-models, /sdapi/v1/loras,
 *                /sdapi/v1/samplers, schedulers, upscalers, sd-vae, sd-modules,
 *                latent-upscale-modes; GET/POST /sdapi/v1/options
 *   native       GET /v1/server (model, defaults, limits);
 *                POST /v1/jobs; GET /v1/jobs/ID, /v1/jobs/ID/result,
 *                /v1/jobs/ID/images/N (PNG), /v1/jobs/ID/events (SSE);
 *                DELETE /v1/jobs/ID
 *   operations   GET /health, /ready, /metrics
 *   web page     GET / (srv_page.c)
 *
 * Synchronous endpoints wait for their job and cancel it when the client
 * goes away; /v1/jobs returns at once.
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/base/clock.h"
#include "src/base/json.h"
#include "srv_access.h"
#include "srv_base64.h"
#include "srv_clock.h"
#include "srv_api.h"
#include "srv_json_out.h"
#include "srv_page.h"
#include "srv_routes.h"

/* ---------------------------------------------------------------- job status */

/* {"id", "status", "stage", "step", "steps", "progress", "eta_seconds", "position", "seed", "error"}
 * of a job seen as v (the job's id, seed and request never change) */
static void status_json(fx_strbuf *b, const srv_job *job, const srv_job_view *v) {
    static const char *const stages[] = {"load", "text_encode", "vae_encode", "denoise", "vae_decode", "done"};
    fx_sb_printf(b, "{\"id\":\"%s\",\"status\":\"%s\"", job->id, srv_job_state_name(v->state));
    if (v->state == SRV_JOB_RUNNING)
        fx_sb_printf(b, ",\"stage\":\"%s\"", (unsigned)v->stage < 6 ? stages[v->stage] : "unknown");
    fx_sb_printf(b, ",\"step\":%d,\"steps\":%d,\"progress\":%.4f", v->step, v->steps, v->progress);
    if (v->eta >= 0) fx_sb_printf(b, ",\"eta_seconds\":%.2f", v->eta);
    else fx_sb_str(b, ",\"eta_seconds\":null");
    if (v->state == SRV_JOB_QUEUED) fx_sb_printf(b, ",\"position\":%d", v->position);
    fx_sb_printf(b, ",\"seed\":%" PRIu64 ",\"images\":%d", job->seed, job->req.batch > 1 ? job->req.batch : 1);
    if (v->error[0]) {
        fx_sb_str(b, ",\"error\":");
        srv_json_str(b, v->error);
    }
    fx_sb_str(b, "}");
}

/* The job's status now, as JSON and a line end. */
static void status_now(fx_strbuf *b, srv_queue *q, const srv_job *job) {
    srv_job_view v;
    srv_job_view_of(q, job, &v);
    status_json(b, job, &v);
    fx_sb_str(b, "\n");
}

/* ---------------------------------------------------------------- submitting */

/* Parse, make the job, queue it. On refusal the reply is queued and NULL
 * returned (*ret holds the reply's result). */
static srv_job *submit(srv_conn *rc, srv_api api, int multipart, int async, int need_image, srv_result *ret) {
    srv_server *s = rc->s;
    srv_gen_request req;
    srv_err err;
    int st;
    if (multipart) st = srv_parse_multipart(srv_header(rc, "Content-Type"), rc->body, rc->len, &s->lim, &req, &err);
    else st = srv_parse_json(api, rc->body ? rc->body : "", rc->len, &s->lim, &req, &err);
    if (!st && need_image && req.n_images == 0 && !req.init_image) {
        st = err.kind = SRV_E_BAD_REQUEST;
        snprintf(err.msg, sizeof err.msg, "image: missing (edits need at least one image)");
    }
    if (st) {
        srv_request_free(&req);
        *ret = srv_reply_error(rc, (srv_error_kind)st, "%s", err.msg);
        return NULL;
    }
    srv_job *job = srv_job_new(&s->q, &req, &s->lim, async, &err);
    srv_request_free(&req);
    if (!job) {
        *ret = srv_reply_error(rc, err.kind, "%s", err.msg);
        return NULL;
    }
    int retry = 1;
    const srv_error_kind full = srv_queue_submit(&s->q, job, &retry);
    if (full) {
        srv_job_unref(&s->q, job);
        *ret = full == SRV_E_BUSY ? srv_reply_busy(rc, full, retry, "the queue is full; try again later or another server")
                                  : srv_reply_busy(rc, full, 5, "the server is shutting down");
        return NULL;
    }
    return job;
}

/* Wait for a job; cancel it when the client disconnects (then 0). */
static int wait_job(srv_conn *rc, srv_job *job) {
    srv_queue *q = &rc->s->q;
    srv_conn_no_timeout(rc);
    srv_job_view v;
    srv_job_view_of(q, job, &v);
    while (v.state < SRV_JOB_DONE) {
        if (srv_job_wait_change(q, job, v.version, 200, &v) && v.state >= SRV_JOB_DONE) break;
        if (srv_client_gone(rc)) {
            srv_queue_count_disconnect(q);
            if (rc->s->verbose) fprintf(stderr, "flux-server: %s: the client went away; cancelled\n", job->id);
            srv_job_cancel(q, job);
            /* an answer nobody reads (closing instead would be logged as an internal error) */
            srv_reply_error(rc, SRV_E_CLIENT_GONE, "the client closed the connection; the job was cancelled");
            return 0;
        }
    }
    return 1;
}

/* The reply of a failed or cancelled job. */
static srv_result reply_failure(srv_conn *rc, const srv_job *job) {
    return srv_reply_error(rc, job->error_kind ? job->error_kind : SRV_E_ENGINE, "%s", job->error);
}

/* Submit the request and wait for its job: the finished job (release it
 * with srv_job_unref), or NULL with *ret the answer already given (refused,
 * failed or cancelled, or SRV_SENT for a client that went away). */
static srv_job *run_sync(srv_conn *rc, srv_api api, int multipart, int need_image, srv_result *ret) {
    srv_job *job = submit(rc, api, multipart, 0, need_image, ret);
    if (!job) return NULL;
    if (!wait_job(rc, job)) {
        *ret = SRV_SENT;
    } else if (job->state != SRV_JOB_DONE) {
        *ret = reply_failure(rc, job);
    } else {
        return job;
    }
    srv_job_unref(&rc->s->q, job);
    return NULL;
}

/* ---------------------------------------------------------------- OpenAI */

static srv_result openai_images(srv_conn *rc, int edits) {
    const int multipart = srv_media_type_is(srv_header(rc, "Content-Type"), "multipart/form-data");
    srv_result ret = SRV_CLOSE;
    srv_job *job = run_sync(rc, SRV_API_OPENAI, multipart, edits, &ret);
    if (!job) return ret;
    fx_strbuf b = {0};
    fx_sb_printf(&b, "{\"created\":%lld,\"data\":[", (long long)time(NULL));
    for (int i = 0; i < job->n_png; i++) {
        fx_sb_str(&b, i ? ",{\"b64_json\":\"" : "{\"b64_json\":\"");
        srv_base64_encode(&b, job->png[i], job->png_len[i]);
        fx_sb_str(&b, "\",\"revised_prompt\":");
        srv_json_str(&b, job->req.prompt);
        fx_sb_printf(&b, ",\"seed\":%" PRIu64 "}", job->seed + (uint64_t)i);
    }
    fx_sb_printf(&b, "],\"output_format\":\"%s\"}\n", srv_image_mime(job->req.output_format) + 6);
    ret = srv_reply(rc, 200, "application/json", &b);
    srv_job_unref(&rc->s->q, job);
    return ret;
}

static srv_result openai_models(srv_conn *rc) {
    fx_strbuf b = {0};
    fx_sb_str(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
    srv_json_str(&b, rc->s->model_name);
    fx_sb_str(&b, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"flux.c\"}]}\n");
    return srv_reply(rc, 200, "application/json", &b);
}

/* ---------------------------------------------------------------- A1111 */

static srv_result a1111_generate(srv_conn *rc, int img2img) {
    srv_result ret = SRV_CLOSE;
    srv_job *job = run_sync(rc, img2img ? SRV_API_A1111_IMG : SRV_API_A1111, 0, 0, &ret);
    if (!job) return ret;
    const srv_gen_request *r = &job->req;
    const double cfg = job->guidance_dropped || r->guidance < 0 ? rc->s->q.info.default_guidance : r->guidance;
    const int steps = r->steps ? r->steps : rc->s->q.info.default_steps;
    fx_strbuf b = {0}, info = {0};
    fx_sb_str(&b, "{\"images\":[");
    for (int i = 0; i < job->n_png; i++) {
        fx_sb_str(&b, i ? ",\"" : "\"");
        srv_base64_encode(&b, job->png[i], job->png_len[i]);
        fx_sb_str(&b, "\"");
    }
    /* parameters: the request as understood; info: a JSON text as A1111 gives it */
    fx_sb_str(&b, "],\"parameters\":{\"prompt\":");
    srv_json_str(&b, r->prompt);
    fx_sb_str(&b, ",\"negative_prompt\":");
    srv_json_str(&b, r->negative ? r->negative : "");
    fx_sb_printf(&b, ",\"seed\":%" PRIu64 ",\"steps\":%d,\"cfg_scale\":%g,\"width\":%d,\"height\":%d,\"batch_size\":%d}",
                 job->seed, steps, cfg, job->out_width, job->out_height, job->n_png);
    fx_sb_str(&info, "{\"prompt\":");
    srv_json_str(&info, r->prompt);
    fx_sb_str(&info, ",\"negative_prompt\":");
    srv_json_str(&info, r->negative ? r->negative : "");
    fx_sb_printf(&info, ",\"seed\":%" PRIu64 ",\"all_seeds\":[", job->seed);
    for (int i = 0; i < job->n_png; i++) fx_sb_printf(&info, "%s%" PRIu64, i ? "," : "", job->seed + (uint64_t)i);
    fx_sb_printf(&info, "],\"steps\":%d,\"cfg_scale\":%g,\"width\":%d,\"height\":%d,\"sampler_name\":\"Euler\","
                        "\"sd_model_name\":",
                 steps, cfg, job->out_width, job->out_height);
    srv_json_str(&info, rc->s->model_name);
    fx_sb_str(&info, ",\"infotexts\":[");
    for (int i = 0; i < job->n_png; i++) {
        if (i) fx_sb_str(&info, ",");
        srv_json_str(&info, job->infotext[i]);
    }
    fx_sb_str(&info, "]}");
    fx_sb_str(&b, ",\"info\":");
    srv_json_str(&b, info.failed ? "" : info.s);
    fx_sb_str(&b, "}\n");
    free(info.s);
    srv_job_unref(&rc->s->q, job);
    return srv_reply(rc, 200, "application/json", &b);
}

static srv_result a1111_progress(srv_conn *rc) {
    fx_strbuf b = {0};
    srv_job_view v;
    int jobs;
    const int job = srv_queue_running_view(&rc->s->q, &v, &jobs);
    const double progress = job ? v.progress : 0, eta = job ? v.eta : 0;
    fx_sb_printf(&b,
                 "{\"progress\":%.4f,\"eta_relative\":%.2f,\"state\":{\"skipped\":false,\"interrupted\":%s,"
                 "\"job\":\"%s\",\"job_count\":%d,\"job_timestamp\":\"0\",\"job_no\":0,\"sampling_step\":%d,"
                 "\"sampling_steps\":%d},\"current_image\":null,\"textinfo\":null}\n",
                 /* "job" names no job id: an id lets anyone cancel the job (DELETE /v1/jobs/ID) */
                 progress, eta > 0 ? eta : 0, job && v.cancel ? "true" : "false", job ? "flux" : "", jobs,
                 job ? v.step : 0, job ? v.steps : 0);
    return srv_reply(rc, 200, "application/json", &b);
}

static srv_result a1111_models(srv_conn *rc) {
    fx_strbuf b = {0};
    fx_sb_str(&b, "[{\"title\":");
    srv_json_str(&b, rc->s->model_name);
    fx_sb_str(&b, ",\"model_name\":");
    srv_json_str(&b, rc->s->model_name);
    fx_sb_str(&b, ",\"hash\":null,\"sha256\":null,\"filename\":");
    srv_json_str(&b, rc->s->model_name);
    fx_sb_str(&b, ",\"config\":null}]\n");
    return srv_reply(rc, 200, "application/json", &b);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The adapters of --lora-dir: NAME.safetensors files whose NAME a request may give. */
static srv_result a1111_loras(srv_conn *rc) {
    fx_strbuf b = {0};
    fx_sb_str(&b, "[");
    DIR *d = rc->s->lora_dir ? opendir(rc->s->lora_dir) : NULL;
    char *names[512];
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) && n < 512;) {
        const size_t len = strlen(e->d_name);
        if (len <= 12 || strcmp(e->d_name + len - 12, ".safetensors")) continue;
        char *name = strndup(e->d_name, len - 12);
        if (name && srv_lora_name_ok(name)) names[n++] = name;
        else free(name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        fx_sb_str(&b, i ? ",{\"name\":" : "{\"name\":");
        srv_json_str(&b, names[i]);
        fx_sb_str(&b, ",\"alias\":");
        srv_json_str(&b, names[i]);
        fx_sb_str(&b, ",\"path\":");
        fx_strbuf file = {0};
        fx_sb_printf(&file, "%s.safetensors", names[i]);
        srv_json_str(&b, file.s);
        free(file.s);
        fx_sb_str(&b, ",\"metadata\":{}}");
        free(names[i]);
    }
    fx_sb_str(&b, "]\n");
    return srv_reply(rc, 200, "application/json", &b);
}

static srv_result a1111_options(srv_conn *rc) {
    if (!strcmp(rc->method, "POST")) { /* one model per server: only the loaded one can be chosen */
        fx_err jerr = {0};
        fx_json_doc *doc = fx_json_parse(rc->body ? rc->body : "", rc->len, &jerr);
        if (!doc) return srv_reply_error(rc, SRV_E_BAD_REQUEST, "malformed JSON: %s", jerr.msg);
        const char *want = fx_json_get_str(fx_json_root(doc), "sd_model_checkpoint", NULL);
        const int other = want && strcmp(want, rc->s->model_name);
        fx_json_free(doc);
        if (other) return srv_reply_error(rc, SRV_E_BAD_REQUEST, "sd_model_checkpoint: this server serves only %s", rc->s->model_name);
        fx_strbuf b = {0};
        fx_sb_str(&b, "null\n");
        return srv_reply(rc, 200, "application/json", &b);
    }
    fx_strbuf b = {0};
    fx_sb_str(&b, "{\"sd_model_checkpoint\":");
    srv_json_str(&b, rc->s->model_name);
    fx_sb_str(&b, ",\"samples_format\":\"png\",\"sd_checkpoint_hash\":null}\n");
    return srv_reply(rc, 200, "application/json", &b);
}

/* ---------------------------------------------------------------- native jobs */

/* {"id", "status": "done", "images": [{"seed", "width", "height", "infotext", "b64_json"}]} of a done job */
static void result_json(fx_strbuf *b, const srv_job *job) {
    fx_sb_printf(b, "{\"id\":\"%s\",\"status\":\"done\",\"images\":[", job->id);
    for (int i = 0; i < job->n_png; i++) {
        fx_sb_printf(b, "%s{\"seed\":%" PRIu64 ",\"width\":%d,\"height\":%d,\"output_format\":\"%s\",\"infotext\":",
                     i ? "," : "", job->seed + (uint64_t)i, job->out_width, job->out_height,
                     srv_image_mime(job->req.output_format) + 6);
        srv_json_str(b, job->infotext[i]);
        fx_sb_str(b, ",\"b64_json\":\"");
        srv_base64_encode(b, job->png[i], job->png_len[i]);
        fx_sb_str(b, "\"}");
    }
    fx_sb_str(b, "]}");
}

typedef struct sse {
    srv_server *s;
    srv_job *job;
    unsigned seen;
    int sent_first, done;
    int cancel_on_close;         /* "stream": true on POST /v1/jobs: the stream is the job's only client */
    int with_result;             /* ... and it carries the result (event: result) before done */
    fx_strbuf pending;
    size_t off;
} sse;

static ssize_t sse_read(void *cls, char *buf, size_t max) {
    sse *e = cls;
    srv_queue *q = &e->s->q;
    if (e->off >= e->pending.len) {
        if (e->done) return SRV_STREAM_END;
        e->pending.len = 0;
        e->off = 0;
        srv_job_view v;
        int changed = 1;
        /* after the first event: the next change, or after 15 s a comment line that keeps proxies from
         * closing an idle stream */
        if (e->sent_first) changed = srv_job_wait_change(q, e->job, e->seen, 15000, &v);
        else srv_job_view_of(q, e->job, &v);
        e->sent_first = 1;
        if (!changed) {
            fx_sb_str(&e->pending, ": keep-alive\n\n");
        } else {
            e->seen = v.version;
            const int fin = v.state >= SRV_JOB_DONE;
            if (fin && e->with_result && v.state == SRV_JOB_DONE) { /* the images are fixed once it is done */
                fx_sb_str(&e->pending, "event: result\ndata: ");
                result_json(&e->pending, e->job);
                fx_sb_str(&e->pending, "\n\n");
                srv_job_fetched(q, e->job);
            }
            fx_sb_printf(&e->pending, "event: %s\ndata: ", fin ? "done" : "progress");
            status_json(&e->pending, e->job, &v);
            fx_sb_str(&e->pending, "\n\n");
            e->done = fin;
        }
        if (e->pending.failed) return SRV_STREAM_ERROR;
    }
    size_t n = e->pending.len - e->off;
    if (n > max) n = max;
    memcpy(buf, e->pending.s + e->off, n);
    e->off += n;
    return (ssize_t)n;
}

static void sse_free(void *cls) {
    sse *e = cls;
    if (!e->done) srv_queue_count_disconnect(&e->s->q); /* the reader left before the end */
    if (e->cancel_on_close && !e->done) srv_job_cancel(&e->s->q, e->job); /* the client went away */
    srv_job_unref(&e->s->q, e->job);
    free(e->pending.s);
    free(e);
}

static srv_result reply_events(srv_conn *rc, srv_job *job, int cancel_on_close) {
    sse *e = calloc(1, sizeof *e);
    if (!e) {
        srv_job_unref(&rc->s->q, job);
        return srv_reply_error(rc, SRV_E_NO_MEMORY, "out of memory");
    }
    e->s = rc->s;
    e->job = job;
    e->cancel_on_close = cancel_on_close;
    e->with_result = cancel_on_close;
    return srv_reply_stream(rc, sse_read, e, sse_free);
}

static srv_result jobs_submit(srv_conn *rc) {
    srv_result ret = SRV_CLOSE;
    srv_job *job = submit(rc, SRV_API_NATIVE, 0, 1, 0, &ret);
    if (!job) return ret;
    if (job->req.stream) return reply_events(rc, job, 1); /* takes the reference */
    fx_strbuf b = {0};
    status_now(&b, &rc->s->q, job);
    snprintf(rc->location, sizeof rc->location, "/v1/jobs/%s", job->id);
    srv_job_unref(&rc->s->q, job);
    return srv_reply(rc, 202, "application/json", &b);
}

static srv_result job_result(srv_conn *rc, srv_job *job) {
    srv_queue *q = &rc->s->q;
    srv_job_view v;
    srv_job_view_of(q, job, &v);
    if (v.state < SRV_JOB_DONE)
        return srv_reply_error(rc, SRV_E_CONFLICT, "job %s is not finished (GET /v1/jobs/%s for its status)", job->id,
                               job->id);
    if (v.state != SRV_JOB_DONE) return reply_failure(rc, job);
    fx_strbuf b = {0};
    result_json(&b, job);
    fx_sb_str(&b, "\n");
    srv_job_fetched(q, job);
    return srv_reply(rc, 200, "application/json", &b);
}

/* /v1/jobs/ID[/result|/events|/images/N] (the route says which) */
static srv_result jobs_one(srv_conn *rc, srv_endpoint ep) {
    const char *rest = rc->url + strlen("/v1/jobs/");
    char id[32];
    const size_t idlen = strcspn(rest, "/");
    if (idlen == 0 || idlen >= sizeof id) return srv_reply_error(rc, SRV_E_NOT_FOUND, "no such job");
    memcpy(id, rest, idlen);
    id[idlen] = '\0';
    srv_job *job = srv_queue_find(&rc->s->q, id);
    if (!job)
        return srv_reply_error(rc, SRV_E_NOT_FOUND, "no job %s (finished jobs are kept --result-ttl seconds, their images within "
                                        "--max-results-mb, at most %d jobs)", id, SRV_TABLE_SIZE);
    srv_result ret;
    if (ep == SRV_EP_JOB) {
        if (!strcmp(rc->method, "DELETE")) srv_job_cancel(&rc->s->q, job);
        fx_strbuf b = {0};
        status_now(&b, &rc->s->q, job);
        ret = srv_reply(rc, 200, "application/json", &b);
    } else if (ep == SRV_EP_JOB_RESULT) {
        ret = job_result(rc, job);
    } else if (ep == SRV_EP_JOB_EVENTS) {
        return reply_events(rc, job, 0); /* takes the reference */
    } else { /* SRV_EP_JOB_IMAGE */
        const char *n = rest + idlen + strlen("/images/");
        char *end;
        const long k = strtol(n, &end, 10);
        srv_job_view v;
        srv_job_view_of(&rc->s->q, job, &v); /* the images are set before DONE */
        const srv_job_state state = v.state;
        if (*end || end == n || k < 0) ret = srv_reply_error(rc, SRV_E_NOT_FOUND, "no such image");
        else if (state != SRV_JOB_DONE) ret = srv_reply_error(rc, SRV_E_CONFLICT, "job %s is %s", id, srv_job_state_name(state));
        else if (k >= job->n_png) ret = srv_reply_error(rc, SRV_E_NOT_FOUND, "job %s has %d image(s)", id, job->n_png);
        else {
            srv_job_fetched(&rc->s->q, job);
            ret = srv_reply_bytes(rc, 200, srv_image_mime(job->req.output_format), job->png[k], job->png_len[k]);
        }
    }
    srv_job_unref(&rc->s->q, job);
    return ret;
}

/* ---------------------------------------------------------------- operations */

static srv_result ready(srv_conn *rc) {
    srv_queue_view qv;
    srv_queue_view_of(&rc->s->q, &qv);
    const int draining = qv.draining, full = qv.length >= qv.max_length;
    fx_strbuf b = {0};
    if (draining || full) {
        return srv_reply_busy(rc, SRV_E_UNAVAILABLE, 5, draining ? "draining: finishing the queued jobs before exiting"
                                                   : "the queue is full");
    }
    fx_sb_str(&b, "{\"status\":\"ready\"}\n");
    return srv_reply(rc, 200, "application/json", &b);
}

static srv_result metrics(srv_conn *rc) {
    srv_server *s = rc->s;
    fx_strbuf b = {0};
    srv_queue_view qv;
    srv_queue_view_of(&s->q, &qv);
    const srv_metrics m = qv.m;
    srv_http_stats hs;
    srv_http_stats_of(s, &hs);
    fx_sb_printf(&b,
                 "# HELP flux_queue_length Jobs waiting in the queue.\n# TYPE flux_queue_length gauge\n"
                 "flux_queue_length %d\n"
                 "# HELP flux_queue_capacity Most jobs the queue holds (--max-queue).\n# TYPE flux_queue_capacity gauge\n"
                 "flux_queue_capacity %d\n"
                 "# HELP flux_job_running 1 while a job computes.\n# TYPE flux_job_running gauge\n"
                 "flux_job_running %d\n"
                 "# HELP flux_draining 1 after SIGTERM, while the queue drains.\n# TYPE flux_draining gauge\n"
                 "flux_draining %d\n",
                 qv.length, qv.max_length, qv.running, qv.draining);
    fx_sb_printf(&b,
                 "# HELP flux_jobs_total Finished jobs by outcome.\n# TYPE flux_jobs_total counter\n"
                 "flux_jobs_total{outcome=\"done\"} %llu\nflux_jobs_total{outcome=\"failed\"} %llu\n"
                 "flux_jobs_total{outcome=\"cancelled\"} %llu\n"
                 "# HELP flux_rejected_total Jobs refused because the queue was full (429).\n"
                 "# TYPE flux_rejected_total counter\nflux_rejected_total %llu\n"
                 "# HELP flux_images_total Images generated.\n# TYPE flux_images_total counter\nflux_images_total %llu\n"
                 "# HELP flux_denoise_steps_total Denoising steps run.\n# TYPE flux_denoise_steps_total counter\n"
                 "flux_denoise_steps_total %llu\n"
                 "# HELP flux_denoise_seconds_total Seconds spent denoising.\n# TYPE flux_denoise_seconds_total counter\n"
                 "flux_denoise_seconds_total %.3f\n"
                 "# HELP flux_seconds_per_step Mean seconds per denoising step so far.\n"
                 "# TYPE flux_seconds_per_step gauge\nflux_seconds_per_step %.4f\n"
                 "# HELP flux_job_seconds_total Seconds from start to end of finished jobs.\n"
                 "# TYPE flux_job_seconds_total counter\nflux_job_seconds_total %.3f\n"
                 "# HELP flux_http_requests_total HTTP requests received.\n# TYPE flux_http_requests_total counter\n"
                 "flux_http_requests_total %llu\n"
                 "# HELP flux_client_disconnects_total Requests whose client went away before the answer.\n"
                 "# TYPE flux_client_disconnects_total counter\nflux_client_disconnects_total %llu\n",
                 m.jobs_done, m.jobs_failed, m.jobs_cancelled, m.rejected_full, m.images, m.steps, m.step_seconds,
                 m.steps ? m.step_seconds / (double)m.steps : 0.0, m.job_seconds, hs.requests, m.disconnects);
    int open = 0;
    unsigned long long dropped = 0;
    srv_guard_counts(&s->guard, &open, &dropped);
    fx_sb_printf(&b,
                 "# HELP flux_http_connections Open client connections.\n# TYPE flux_http_connections gauge\n"
                 "flux_http_connections %d\n"
                 "# HELP flux_http_connections_dropped_total Connections closed for a missed request-head deadline "
                 "or evicted for new clients.\n# TYPE flux_http_connections_dropped_total counter\n"
                 "flux_http_connections_dropped_total %llu\n"
                 "# HELP flux_http_errors_total Error responses by status.\n# TYPE flux_http_errors_total counter\n",
                 open, dropped);
    for (int st = 400; st < 600; st++)
        if (hs.status_count[st]) fx_sb_printf(&b, "flux_http_errors_total{status=\"%d\"} %llu\n", st, hs.status_count[st]);
    return srv_reply(rc, 200, "text/plain; version=0.0.4", &b);
}

/* What a client (the page) needs to build its form: the model, its
 * defaults, and the limits of this server. */
static srv_result server_info(srv_conn *rc) {
    const srv_server *s = rc->s;
    const srv_limits *l = &s->lim;
    fx_strbuf b = {0};
    fx_sb_str(&b, "{\"model\":");
    srv_json_str(&b, s->model_name);
    fx_sb_printf(&b,
                 ",\"distilled\":%s,\"default_steps\":%d,\"default_guidance\":%g,\"lora_dir\":%s,"
                 "\"limits\":{\"max_steps\":%d,\"max_batch\":%d,\"max_images\":%d,\"min_size\":%d,\"max_size\":%d,"
                 "\"max_body_bytes\":%zu,\"max_text_body_bytes\":%zu}}\n",
                 s->q.info.distilled ? "true" : "false", s->q.info.default_steps, (double)s->q.info.default_guidance,
                 s->lora_dir ? "true" : "false", l->max_steps, l->max_batch, l->max_images, l->min_size, l->max_size,
                 l->max_body, l->max_text_body < l->max_body ? l->max_text_body : l->max_body);
    return srv_reply(rc, 200, "application/json", &b);
}

/* ---------------------------------------------------------------- routing */

srv_result srv_api_route(srv_conn *rc) {
    const srv_route *rt = srv_route_find(rc->method, rc->url, &rc->allow);
    if (!rt && rc->allow)
        return srv_reply_error(rc, SRV_E_METHOD, "%s %s: the method is not allowed (Allow: %s)", rc->verb, rc->url, rc->allow);
    if (!rt) return srv_reply_error(rc, SRV_E_NOT_FOUND, "%s %s: not an endpoint of flux-server", rc->verb, rc->url);
    rc->allow = NULL; /* a 405's header only */
    fx_strbuf b = {0};
    switch (rt->endpoint) {
    case SRV_EP_OPENAI_GENERATIONS: return openai_images(rc, 0);
    case SRV_EP_OPENAI_EDITS: return openai_images(rc, 1);
    case SRV_EP_OPENAI_MODELS: return openai_models(rc);
    case SRV_EP_SERVER_INFO: return server_info(rc);
    case SRV_EP_A1111_TXT2IMG: return a1111_generate(rc, 0);
    case SRV_EP_A1111_IMG2IMG: return a1111_generate(rc, 1);
    case SRV_EP_A1111_PROGRESS: return a1111_progress(rc);
    case SRV_EP_A1111_INTERRUPT:
        srv_queue_interrupt(&rc->s->q);
        fx_sb_str(&b, "null\n");
        return srv_reply(rc, 200, "application/json", &b);
    case SRV_EP_A1111_MODELS: return a1111_models(rc);
    case SRV_EP_A1111_LORAS: return a1111_loras(rc);
    case SRV_EP_A1111_SAMPLERS:
        fx_sb_str(&b, "[{\"name\":\"Euler\",\"aliases\":[\"euler\"],\"options\":{}}]\n");
        return srv_reply(rc, 200, "application/json", &b);
    case SRV_EP_A1111_OPTIONS: return a1111_options(rc);
    case SRV_EP_A1111_LIST:
        fx_sb_str(&b, rt->text);
        return srv_reply(rc, 200, "application/json", &b);
    case SRV_EP_JOBS_SUBMIT: return jobs_submit(rc);
    case SRV_EP_JOB:
    case SRV_EP_JOB_RESULT:
    case SRV_EP_JOB_EVENTS:
    case SRV_EP_JOB_IMAGE: return jobs_one(rc, rt->endpoint);
    case SRV_EP_PAGE: return srv_reply_bytes(rc, 200, "text/html; charset=utf-8", srv_page_html, strlen(srv_page_html));
    case SRV_EP_FAVICON: return srv_reply_bytes(rc, 204, "image/x-icon", "", 0); /* none: no 404 noise */
    case SRV_EP_HEALTH:
        fx_sb_str(&b, "{\"status\":\"ok\"}\n");
        return srv_reply(rc, 200, "application/json", &b);
    case SRV_EP_READY: return ready(rc);
    case SRV_EP_METRICS: return metrics(rc);
    }
    return srv_reply_error(rc, SRV_E_ENGINE, "%s %s: a route without an endpoint", rc->verb, rc->url);
}
