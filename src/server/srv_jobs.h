/*
 * srv_jobs.h — flux-server's jobs: one worker thread owns the flux_ctx and
 * computes one job at a time (the CPU is the bottleneck) from a bounded
 * FIFO; HTTP threads submit, wait, watch progress and cancel.
 *
 * A job is reference counted: the queue holds one reference while it is
 * queued or running, the job table one for asynchronous jobs (/v1/jobs)
 * until it is evicted, and each waiting HTTP thread one. Every change of a
 * job (state, progress) is made under the queue's mutex and wakes the
 * waiters (srv_queue.changed). The mutex stays in this layer: the others
 * read jobs through views (srv_job_view) and change them through these
 * functions.
 */
#ifndef FX_SRV_JOBS_H
#define FX_SRV_JOBS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "flux.h"
#include "srv_request.h"

typedef enum srv_job_state {
    SRV_JOB_QUEUED,
    SRV_JOB_RUNNING,
    SRV_JOB_DONE,
    SRV_JOB_FAILED,
    SRV_JOB_CANCELLED
} srv_job_state;

const char *srv_job_state_name(srv_job_state s);

typedef struct srv_job {
    char id[24];                 /* "job-" + 16 hex digits */
    srv_gen_request req;         /* what was asked (owned) */
    flux_image *refs[FLUX_MAX_REFS]; /* decoded req.image[] */
    int n_refs;
    flux_image *init, *mask;     /* img2img / inpainting: decoded req.init_image (at the output size), req.mask */
    uint64_t seed;               /* the first seed (chosen at submit when not given) */
    int guidance_dropped;        /* an A1111 cfg_scale ignored on a distilled model */
    int async;                   /* kept in the job table (/v1/jobs) */
    /* below: under srv_queue.mu */
    int refs_count;
    srv_job_state state;
    volatile int cancel;         /* read by the progress callback */
    flux_stage stage;
    int step, steps;             /* denoising steps done / total */
    int image, images;           /* decoded images done / total */
    double t_submit, t_start, t_denoise, t_denoise_end, t_end; /* fx_now_s() */
    unsigned version;            /* bumped on every change (SSE) */
    int n_png;                   /* results: PNG files as `flux` writes them, or JPEG / WebP
                                    (req.output_format) */
    uint8_t **png;
    size_t *png_len;
    char **infotext;             /* [n_png] the A1111 "parameters" text of each */
    int out_width, out_height;
    double progress;             /* 0..1, never decreasing while it runs */
    int fetched;                 /* its result or an image was read (a drain waits for unread ones) */
    srv_error_kind error_kind;   /* of a failure: bad input, engine error, cancelled (SRV_E_CONFLICT) */
    char error[512];
    struct srv_job *next;        /* FIFO link */
} srv_job;

/* Counters for /metrics (under srv_queue.mu). */
typedef struct srv_metrics {
    unsigned long long jobs_done, jobs_failed, jobs_cancelled, rejected_full, images;
    unsigned long long steps;
    double step_seconds, job_seconds;
    double step_pixels;          /* Σ steps × pixels × images of the timed jobs (for the cost of waiting jobs) */
    unsigned long long disconnects;
} srv_metrics;

#define SRV_TABLE_SIZE 256 /* asynchronous jobs remembered (oldest finished evicted first) */

/* How long finished asynchronous jobs (their images) are kept. */
typedef struct srv_retention {
    double ttl_s;                /* --result-ttl: seconds after the end (default 3600) */
    size_t max_bytes;            /* --max-results-mb: their images in all (default 256 MiB) */
} srv_retention;

typedef struct srv_queue {
    pthread_mutex_t mu;
    pthread_cond_t work;         /* the worker waits for jobs */
    pthread_cond_t changed;      /* any job changed */
    srv_job *head, *tail;
    int length, max_length;
    srv_job *running;
    srv_job *table[SRV_TABLE_SIZE];
    int draining;                /* SIGTERM: no new jobs, finish the queued ones */
    double drain_start;          /* fx_now_s() of the signal */
    srv_retention keep;
    int stop;                    /* the worker exits when the queue is empty */
    srv_metrics m;
    /* the engine, owned by the worker while it runs */
    flux_ctx *ctx;
    flux_model_info info;
    const char *lora_dir;        /* NULL: requests cannot name adapters */
    int base_loras;              /* adapters of --lora, always applied first */
    int verbose;
    pthread_t worker;
} srv_queue;

/* Start the worker on a loaded context. 0 or -1 (errno). */
int srv_queue_start(srv_queue *q, flux_ctx *ctx, int max_length, const char *lora_dir, int verbose);
/* Let the queued jobs finish, then stop the worker. */
void srv_queue_drain_and_stop(srv_queue *q);
void srv_queue_destroy(srv_queue *q);

/* A new job from a parsed request (takes its contents; the request is left
 * empty). Reference images are decoded here, named LoRAs are checked
 * against --lora-dir, and an output size taken from the first reference
 * is held to lim->max_size: refusals as srv_err. */
srv_job *srv_job_new(srv_queue *q, srv_gen_request *req, const srv_limits *lim, int async, srv_err *err);

/* Queue a job. SRV_OK; SRV_E_BUSY when the queue is full (*retry_after
 * seconds is a guess from the seconds per job so far); SRV_E_UNAVAILABLE. */
srv_error_kind srv_queue_submit(srv_queue *q, srv_job *job, int *retry_after);

/* Cancel a queued or running job (no-op when finished). */
void srv_job_cancel(srv_queue *q, srv_job *job);
/* Cancel whatever runs now (A1111 /interrupt). 1 when something ran. */
int srv_queue_interrupt(srv_queue *q);

/* An asynchronous job by id, with a reference (NULL when unknown or
 * forgotten: finished longer than the retention ago). */
srv_job *srv_queue_find(srv_queue *q, const char *id);
/* Mark a job's result as read. */
void srv_job_fetched(srv_queue *q, srv_job *job);
/* Asynchronous jobs finished since the drain began whose results nobody
 * read yet (and that ended less than `grace` seconds ago). */
int srv_queue_unread_results(srv_queue *q, double grace);
void srv_job_unref(srv_queue *q, srv_job *job);

/* A job as the layers above see it: one consistent snapshot, taken under
 * the queue's mutex, which no other layer takes (issue 32 "Layers"). */
typedef struct srv_job_view {
    srv_job_state state;
    flux_stage stage;
    int step, steps;             /* denoising steps done / total */
    int position;                /* in the queue (0 = next), -1 when not queued */
    double progress;             /* 0..1, never decreasing */
    double eta;                  /* seconds left, a guess; < 0 unknown */
    unsigned version;            /* bumped on every change */
    int cancel;                  /* a cancel was asked */
    char error[512];             /* of a failure */
} srv_job_view;

void srv_job_view_of(srv_queue *q, const srv_job *job, srv_job_view *v);
/* Wait up to ms milliseconds for the job to change past `version` or to
 * finish; *v is its view after. 1 when it changed or is finished, 0 when
 * the time ran out first. */
int srv_job_wait_change(srv_queue *q, const srv_job *job, unsigned version, int ms, srv_job_view *v);
/* The running job's view (0 when nothing runs); *jobs = running + queued. */
int srv_queue_running_view(srv_queue *q, srv_job_view *v, int *jobs);

/* The queue as a whole (for /ready, /metrics and the drain). */
typedef struct srv_queue_view {
    int length, max_length, running, draining;
    srv_metrics m;
} srv_queue_view;
void srv_queue_view_of(srv_queue *q, srv_queue_view *v);

/* A client left before its answer (a waiting request or an event stream). */
void srv_queue_count_disconnect(srv_queue *q);
/* SIGTERM: no new jobs from now; the number of jobs left to finish. */
int srv_queue_begin_drain(srv_queue *q);
/* A second signal: cancel the queued jobs, then the running one. */
void srv_queue_cancel_all(srv_queue *q);

#endif
