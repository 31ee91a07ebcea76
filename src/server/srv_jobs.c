/*
 * srv_jobs.c — the job queue and its worker thread (srv_jobs.h).
 */
#include "srv_jobs.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/app/app_args.h"
#include "srv_clock.h"
#include "srv_internal.h"

const char *srv_job_state_name(srv_job_state s) {
    static const char *const names[] = {"queued", "running", "done", "failed", "cancelled"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "unknown";
}

static int job_finished(const srv_job *job) { return job->state >= SRV_JOB_DONE; }

/* An encoded result: PNGs come from the library, JPEG and WebP from srv_codecs.c. */
static void free_encoded(const srv_job *job, uint8_t *bytes) {
    if (job->req.output_format == SRV_FMT_JPEG || job->req.output_format == SRV_FMT_WEBP) free(bytes);
    else flux_buffer_free(bytes);
}

static void job_free(srv_job *job) {
    for (int i = 0; i < job->n_refs; i++) flux_image_free(job->refs[i]);
    flux_image_free(job->init);
    flux_image_free(job->mask);
    for (int i = 0; i < job->n_png; i++) {
        free_encoded(job, job->png[i]);
        free(job->infotext ? job->infotext[i] : NULL);
    }
    free(job->infotext);
    free(job->png);
    free(job->png_len);
    srv_request_free(&job->req); /* last: it says how the results were encoded */
    free(job);
}

static void unref_locked(srv_job *job) {
    if (--job->refs_count == 0) job_free(job);
}

void srv_job_unref(srv_queue *q, srv_job *job) {
    if (!job) return;
    pthread_mutex_lock(&q->mu);
    unref_locked(job);
    pthread_mutex_unlock(&q->mu);
}

/* ---------------------------------------------------------------- new jobs */

/* An encoded image of a request (PNG, JPEG, WebP or binary PPM) → *img. 0,
 * or SRV_E_BAD_REQUEST with err naming `name`. */
static int decode_image(const uint8_t *data, size_t len, const char *name, const srv_limits *lim, flux_image **img,
                        srv_err *err) {
    const srv_image_format fmt = srv_image_format_of(data, len);
    *img = NULL;
    if (fmt == SRV_FMT_JPEG || fmt == SRV_FMT_WEBP) { /* the server's own codecs (photos, browsers) */
        char why[256];
        if (!srv_decode_image(data, len, lim->max_pixels, img, why, sizeof why)) return 0;
        err->kind = SRV_E_BAD_REQUEST;
        snprintf(err->msg, sizeof err->msg, "%s: %s", name, why);
        return (int)err->kind;
    }
    if (flux_image_decode(NULL, data, len, name, img) == FLUX_OK) return 0;
    err->kind = SRV_E_BAD_REQUEST; /* without a context the decoder keeps no message */
    snprintf(err->msg, sizeof err->msg, "%s: %s", name,
             fmt == SRV_FMT_PNG ? "a PNG this server cannot decode (broken, or beyond the decoder's limits)"
                                : "not a PNG, JPEG, WebP or binary PPM (P6/P5) image");
    return (int)err->kind;
}

static int refuse_job(srv_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse_job(srv_err *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return (int)(err->kind = SRV_E_BAD_REQUEST);
}

/* The init image and the mask of an img2img / inpainting request (README
 * "flux-server", img2img): decoded; the init image stretched to the size
 * asked for as A1111's "just resize" does (Pillow's Lanczos, which
 * fx_resize_lanczos reproduces bit for bit); the strength checked against
 * the steps. 0 or the error kind. */
static int prepare_init(srv_queue *q, srv_job *job, const srv_limits *lim, srv_err *err) {
    srv_gen_request *r = &job->req;
    if (decode_image(r->init_image, r->init_image_len, r->init_name, lim, &job->init, err)) return (int)err->kind;
    free(r->init_image);
    r->init_image = NULL;
    r->init_image_len = 0;
    const int src_w = job->init->width, src_h = job->init->height;
    if (r->width && r->height && (src_w != r->width || src_h != r->height)) {
        if ((long long)r->width * r->height > 1024LL * 1024)
            return refuse_job(err, "%s: %dx%d: above 1024² pixels the pipeline shrinks an init image again, so the "
                                   "output would not be that size; give at most 1024² pixels",
                              r->init_name, r->width, r->height);
        flux_image *sized = flux_image_new(r->width, r->height, 3);
        fx_err e = {0};
        if (!sized || fx_resize_lanczos(job->init->data, src_w, src_h, 3, sized->data, r->width, r->height, &e)) {
            flux_image_free(sized);
            err->kind = SRV_E_NO_MEMORY;
            snprintf(err->msg, sizeof err->msg, "%s: resize: %.300s", r->init_name, sized ? e.msg : "out of memory");
            return (int)err->kind;
        }
        flux_image_free(job->init);
        job->init = sized;
    }
    fx_ref_geom g;
    fx_err gerr = {0};
    if (fx_init_geometry(job->init->width, job->init->height, 16, r->init_name, &g, &gerr) != FLUX_OK)
        return refuse_job(err, "%s", gerr.msg);
    if (r->width && r->height && (g.width != r->width || g.height != r->height))
        return refuse_job(err, "%s: %dx%d pixels give a %dx%d output, not the %dx%d asked for", r->init_name,
                          job->init->width, job->init->height, g.width, g.height, r->width, r->height);
    if (g.width > lim->max_size || g.height > lim->max_size)
        return refuse_job(err, "%s: %dx%d gives a %dx%d output, beyond --max-size %d", r->init_name, src_w, src_h,
                          g.width, g.height, lim->max_size);
    r->width = g.width; /* the library's rule, said: the output is the init image's processed size */
    r->height = g.height;
    const int steps = r->steps ? r->steps : q->info.default_steps;
    if (fx_schedule_first_step(steps, r->strength) >= steps)
        return refuse_job(err, "%s: %g with %d steps leaves no denoising step (int(%d - %d*%g) = %d); use a larger "
                               "strength or more steps",
                          !strcmp(r->init_name, "init_images[0]") ? "denoising_strength" : "strength",
                          r->strength, steps, steps, steps, r->strength, fx_schedule_first_step(steps, r->strength));
    if (!r->mask) return 0;
    const srv_image_format fmt = srv_image_format_of(r->mask, r->mask_len);
    if (fmt == SRV_FMT_JPEG || fmt == SRV_FMT_WEBP) return refuse_job(err, "mask: a PNG (or binary PPM) is needed");
    fx_err merr = {0};
    flux_image *decoded = NULL;
    flux_status st = r->mask_source == FLUX_MASK_GRAY
                         ? fx_image_decode(r->mask, r->mask_len, "mask", &job->mask, &merr)
                         : fx_image_decode_alpha(r->mask, r->mask_len, "mask", &decoded, &merr);
    if (!st && decoded) st = fx_mask_from_image(decoded, (flux_mask_source)r->mask_source, "mask", &job->mask, &merr);
    flux_image_free(decoded);
    if (st) return refuse_job(err, "%s", merr.msg);
    if (r->mask_same_size && (job->mask->width != src_w || job->mask->height != src_h))
        return refuse_job(err, "mask: %dx%d, not the size of %s (%dx%d)", job->mask->width, job->mask->height,
                          r->init_name, src_w, src_h);
    free(r->mask);
    r->mask = NULL;
    r->mask_len = 0;
    return 0;
}

static void random_id(char *out, size_t size) {
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, &v, sizeof v) != (ssize_t)sizeof v) v = (uint64_t)(fx_now_s() * 1e9) ^ (uint64_t)getpid();
    if (fd >= 0) close(fd);
    snprintf(out, size, "job-%016llx", (unsigned long long)v);
}

srv_job *srv_job_new(srv_queue *q, srv_gen_request *req, const srv_limits *lim, int async, srv_err *err) {
    srv_job *job = calloc(1, sizeof *job);
    if (!job) {
        err->kind = SRV_E_NO_MEMORY;
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return NULL;
    }
    job->req = *req;
    memset(req, 0, sizeof *req);
    job->async = async;
    job->refs_count = 1;
    random_id(job->id, sizeof job->id);
    /* the seed is fixed now, so status and result can name it */
    job->seed = job->req.seed_given ? job->req.seed : cli_random_seed();
    err->kind = SRV_OK;
    for (int i = 0; i < job->req.n_loras; i++) {
        char path[4096];
        struct stat st;
        if (!q->lora_dir) {
            err->kind = SRV_E_BAD_REQUEST;
            snprintf(err->msg, sizeof err->msg, "loras: this server has no --lora-dir");
            break;
        }
        snprintf(path, sizeof path, "%s/%s.safetensors", q->lora_dir, job->req.lora_name[i]);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            err->kind = SRV_E_BAD_REQUEST;
            snprintf(err->msg, sizeof err->msg, "loras[%d]: no LoRA named '%s' (GET /sdapi/v1/loras lists them)", i,
                     job->req.lora_name[i]);
            break;
        }
    }
    for (int i = 0; !err->kind && i < job->req.n_images; i++) {
        char name[32];
        snprintf(name, sizeof name, "image %d", i);
        flux_image *img = NULL;
        if (decode_image(job->req.image[i], job->req.image_len[i], name, lim, &img, err)) break;
        job->refs[job->n_refs++] = img;
        free(job->req.image[i]); /* decoded: the file's bytes are not needed any more */
        job->req.image[i] = NULL;
        job->req.image_len[i] = 0;
    }
    if (!err->kind && job->req.init_image) prepare_init(q, job, lim, err);
    if (!err->kind && !job->init && job->n_refs && (!job->req.width || !job->req.height)) {
        /* no size given: the output takes the first reference's processed size (the library's rule), which
         * --max-size bounds as it bounds a size given */
        fx_ref_geom g;
        fx_err gerr = {0};
        const flux_image *r0 = job->refs[0];
        if (fx_ref_geometry(r0->width, r0->height, 16, "image 0", &g, &gerr) == FLUX_OK &&
            ((!job->req.width && g.width > lim->max_size) || (!job->req.height && g.height > lim->max_size))) {
            err->kind = SRV_E_BAD_REQUEST;
            snprintf(err->msg, sizeof err->msg,
                     "image 0: %dx%d gives a %dx%d output, beyond --max-size %d; give the size (width and height, "
                     "or size) of at most %d per side",
                     r0->width, r0->height, g.width, g.height, lim->max_size, lim->max_size);
        }
    }
    if (!err->kind && q->info.distilled && job->req.a1111) {
        /* A1111 clients always send cfg_scale (7) and often a negative prompt;
         * a distilled model runs no CFG, so both are dropped (other APIs get
         * the library's error instead) */
        job->guidance_dropped = job->req.guidance > 1.0f;
        free(job->req.negative);
        job->req.negative = NULL;
    }
    if (err->kind) {
        job_free(job);
        return NULL;
    }
    return job;
}

/* ---------------------------------------------------------------- queue */

static double job_eta_locked(const srv_queue *q, const srv_job *job);

static size_t result_bytes(const srv_job *job) {
    size_t n = 0;
    for (int i = 0; i < job->n_png; i++) n += job->png_len[i];
    return n;
}

/* Forget finished jobs past the retention: older than the TTL, then the
 * oldest ones while their images pass the byte cap. */
static void forget_old_locked(srv_queue *q) {
    const double now = fx_now_s();
    size_t bytes = 0;
    for (int i = 0; i < SRV_TABLE_SIZE; i++) {
        srv_job *j = q->table[i];
        if (!j || !job_finished(j)) continue;
        if (now - j->t_end > q->keep.ttl_s) {
            unref_locked(j);
            q->table[i] = NULL;
        } else {
            bytes += result_bytes(j);
        }
    }
    while (bytes > q->keep.max_bytes) {
        int oldest = -1;
        for (int i = 0; i < SRV_TABLE_SIZE; i++) {
            const srv_job *j = q->table[i];
            if (j && job_finished(j) && (oldest < 0 || j->t_end < q->table[oldest]->t_end)) oldest = i;
        }
        if (oldest < 0) break;
        bytes -= result_bytes(q->table[oldest]);
        unref_locked(q->table[oldest]);
        q->table[oldest] = NULL;
    }
}

/* 1 when the job table has a free slot or a finished job to evict. */
static int table_slot_free_locked(const srv_queue *q) {
    for (int i = 0; i < SRV_TABLE_SIZE; i++)
        if (!q->table[i] || job_finished(q->table[i])) return 1;
    return 0;
}

/* Seconds a queued job will compute: its steps × pixels × images at the
 * pace measured so far (10 s per job before any was timed). */
static double job_cost_locked(const srv_queue *q, const srv_job *job) {
    const int steps = job->req.steps ? job->req.steps : q->info.default_steps;
    int w = job->req.width, h = job->req.height;
    if ((!w || !h) && job->n_refs) { /* the first reference's processed size (srv_job_new) */
        fx_ref_geom g;
        fx_err e = {0};
        if (fx_ref_geometry(job->refs[0]->width, job->refs[0]->height, 16, "image 0", &g, &e) == FLUX_OK) {
            if (!w) w = g.width;
            if (!h) h = g.height;
        }
    }
    if (!w) w = 256;
    if (!h) h = 256;
    const double work = (double)steps * w * h * (job->req.batch > 1 ? job->req.batch : 1);
    if (q->m.step_pixels > 0) return work * q->m.step_seconds / q->m.step_pixels;
    return 10.0;
}

/* Seconds until the running job and the queued ones ahead of `stop` (NULL:
 * all) are done. */
static double wait_seconds_locked(const srv_queue *q, const srv_job *stop) {
    double s = 0;
    if (q->running) {
        const double eta = job_eta_locked(q, q->running);
        s += eta > 0 ? eta : 0;
    }
    for (const srv_job *j = q->head; j && j != stop; j = j->next) s += job_cost_locked(q, j);
    return s;
}

srv_error_kind srv_queue_submit(srv_queue *q, srv_job *job, int *retry_after) {
    pthread_mutex_lock(&q->mu);
    forget_old_locked(q);
    srv_error_kind rc = SRV_OK;
    if (q->draining || q->stop) {
        rc = SRV_E_UNAVAILABLE;
    } else if (q->length >= q->max_length || (job->async && !table_slot_free_locked(q))) {
        q->m.rejected_full++;
        /* when the first queued job will have started: the running job's rest (its own pace) */
        const double s = q->running ? wait_seconds_locked(q, q->head) : 0;
        *retry_after = s < 1 ? 1 : s > 3600 ? 3600 : (int)(s + 0.999);
        rc = SRV_E_BUSY;
    } else {
        job->state = SRV_JOB_QUEUED;
        job->t_submit = fx_now_s();
        job->refs_count++; /* the queue's reference */
        job->next = NULL;
        if (q->tail) q->tail->next = job;
        else q->head = job;
        q->tail = job;
        q->length++;
        if (job->async) { /* remember it; evict the oldest finished job when full */
            int slot = -1;
            double oldest = 0;
            for (int i = 0; i < SRV_TABLE_SIZE && slot < 0; i++)
                if (!q->table[i]) slot = i;
            for (int i = 0; i < SRV_TABLE_SIZE && slot < 0; i++)
                if (job_finished(q->table[i]) && (slot < 0 || q->table[i]->t_end < oldest)) {
                    oldest = q->table[i]->t_end;
                    slot = i;
                }
            if (slot >= 0) {
                if (q->table[slot]) unref_locked(q->table[slot]);
                q->table[slot] = job;
                job->refs_count++;
            }
        }
        pthread_cond_signal(&q->work);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

static void finish_locked(srv_queue *q, srv_job *job, srv_job_state state) {
    job->state = state;
    job->t_end = fx_now_s();
    job->version++;
    if (state == SRV_JOB_DONE) q->m.jobs_done++;
    else if (state == SRV_JOB_CANCELLED) q->m.jobs_cancelled++;
    else q->m.jobs_failed++;
    pthread_cond_broadcast(&q->changed);
}

void srv_job_cancel(srv_queue *q, srv_job *job) {
    pthread_mutex_lock(&q->mu);
    if (job->state == SRV_JOB_QUEUED) { /* unlink from the FIFO */
        srv_job **pp = &q->head, *prev = NULL;
        while (*pp && *pp != job) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        if (*pp) {
            *pp = job->next;
            if (q->tail == job) q->tail = prev;
            q->length--;
            job->error_kind = SRV_E_CONFLICT;
            snprintf(job->error, sizeof job->error, "cancelled");
            finish_locked(q, job, SRV_JOB_CANCELLED);
            unref_locked(job); /* the queue's reference (the caller still holds one) */
        }
    } else if (job->state == SRV_JOB_RUNNING) {
        job->cancel = 1; /* the progress callback stops it within one block */
    }
    pthread_mutex_unlock(&q->mu);
}

int srv_queue_interrupt(srv_queue *q) {
    pthread_mutex_lock(&q->mu);
    srv_job *job = q->running;
    if (job) job->cancel = 1;
    pthread_mutex_unlock(&q->mu);
    return job != NULL;
}

srv_job *srv_queue_find(srv_queue *q, const char *id) {
    srv_job *found = NULL;
    pthread_mutex_lock(&q->mu);
    forget_old_locked(q);
    for (int i = 0; i < SRV_TABLE_SIZE && !found; i++)
        if (q->table[i] && !strcmp(q->table[i]->id, id)) found = q->table[i];
    if (found) found->refs_count++;
    pthread_mutex_unlock(&q->mu);
    return found;
}

void srv_job_fetched(srv_queue *q, srv_job *job) {
    pthread_mutex_lock(&q->mu);
    job->fetched = 1;
    pthread_mutex_unlock(&q->mu);
}

int srv_queue_unread_results(srv_queue *q, double grace) {
    int n = 0;
    pthread_mutex_lock(&q->mu);
    const double now = fx_now_s();
    for (int i = 0; i < SRV_TABLE_SIZE; i++) {
        const srv_job *j = q->table[i];
        n += j && j->state == SRV_JOB_DONE && !j->fetched && q->draining && j->t_end >= q->drain_start &&
             now - j->t_end < grace;
    }
    pthread_mutex_unlock(&q->mu);
    return n;
}

static int job_position_locked(const srv_queue *q, const srv_job *job) {
    int pos = 0;
    for (const srv_job *j = q->head; j; j = j->next, pos++)
        if (j == job) return pos;
    return -1;
}


static double job_progress_locked(const srv_job *job) {
    switch (job->state) {
    case SRV_JOB_QUEUED: return 0;
    case SRV_JOB_RUNNING: return job->progress;
    default: return 1;
    }
}

/* The share of the work done at this stage: denoising 5..90 %, decoding the
 * images 90..100 %, the PNGs at the end 100 %. */
static double stage_progress(const srv_job *job) {
    if (job->stage == FLUX_STAGE_DONE) return 1;
    if (job->stage == FLUX_STAGE_VAE_DECODE && job->images) return 0.9 + 0.1 * (double)job->image / (double)job->images;
    if (job->steps) return 0.05 + 0.85 * (double)job->step / (double)job->steps;
    return 0.02;
}

static double job_eta_locked(const srv_queue *q, const srv_job *job) {
    if (job_finished(job)) return 0;
    const int measured = q->m.step_pixels > 0;
    if (job->state == SRV_JOB_RUNNING) {
        if (job->steps && job->step > 0) { /* this job's own pace */
            const double per_step = (fx_now_s() - job->t_denoise) / job->step;
            return per_step * (job->steps - job->step) * 1.1;
        }
        return measured ? job_cost_locked(q, job) * 1.1 : -1;
    }
    if (!measured || job_position_locked(q, job) < 0) return -1;
    return wait_seconds_locked(q, job) + job_cost_locked(q, job);
}

/* ---------------------------------------------------------------- worker */

typedef struct run_ctx {
    srv_queue *q;
    srv_job *job;
} run_ctx;

static int on_progress(void *user, flux_stage stage, int step, int total, int substep, int subtotal) {
    run_ctx *rc = user;
    srv_job *job = rc->job;
    pthread_mutex_lock(&rc->q->mu);
    const int changed = stage != job->stage || (stage == FLUX_STAGE_DENOISE && step != job->step) ||
                        (stage == FLUX_STAGE_VAE_DECODE && step != job->image);
    if (stage == FLUX_STAGE_DENOISE) {
        if (job->stage != FLUX_STAGE_DENOISE) job->t_denoise = fx_now_s();
        job->step = step;
        job->steps = total;
        if (step == total) job->t_denoise_end = fx_now_s();
    } else if (stage == FLUX_STAGE_VAE_DECODE) {
        job->image = step;
        job->images = total;
    }
    job->stage = stage;
    const double progress = stage_progress(job);
    if (progress > job->progress) job->progress = progress; /* never backwards */
    if (changed) {
        job->version++;
        pthread_cond_broadcast(&rc->q->changed);
    }
    const int stop = job->cancel;
    pthread_mutex_unlock(&rc->q->mu);
    return stop;
}

/* The context's adapters: the --lora ones, then the request's (files of
 * --lora-dir); adapters already loaded are kept and rescaled. */
static flux_status apply_loras(srv_queue *q, const srv_job *job) {
    const int base = q->base_loras;
    int i = 0;
    for (; i < job->req.n_loras; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.safetensors", q->lora_dir, job->req.lora_name[i]);
        flux_lora_info info;
        if (base + i < flux_lora_count(q->ctx) && flux_lora_get_info(q->ctx, base + i, &info) == FLUX_OK &&
            !strcmp(info.path, path)) {
            flux_status s = flux_lora_set_scale(q->ctx, base + i, job->req.lora_scale[i]);
            if (s != FLUX_OK) return s;
            continue;
        }
        while (flux_lora_count(q->ctx) > base + i) flux_lora_remove(q->ctx, flux_lora_count(q->ctx) - 1);
        flux_status s = flux_lora_load(q->ctx, path, job->req.lora_scale[i]);
        if (s != FLUX_OK) return s;
    }
    while (flux_lora_count(q->ctx) > base + i) flux_lora_remove(q->ctx, flux_lora_count(q->ctx) - 1);
    return FLUX_OK;
}

/* Clients name adapters, never paths: "DIR/NAME.safetensors: ..." → "NAME.safetensors: ...". */
static void hide_lora_dir(const srv_queue *q, char *msg) {
    const size_t n = q->lora_dir ? strlen(q->lora_dir) : 0;
    if (!n) return;
    for (char *p = strstr(msg, q->lora_dir); p; p = strstr(p, q->lora_dir)) {
        const size_t cut = n + (p[n] == '/');
        memmove(p, p + cut, strlen(p + cut) + 1);
    }
}

/* Run one job; results and the outcome go into the job under the mutex. */
static void run_job(srv_queue *q, srv_job *job) {
    run_ctx rctx = {q, job};
    const int n = job->req.batch > 1 ? job->req.batch : 1;
    flux_image **out = calloc((size_t)n, sizeof *out);
    uint8_t **png = calloc((size_t)n, sizeof *png);
    size_t *png_len = calloc((size_t)n, sizeof *png_len);
    char **infotext = calloc((size_t)n, sizeof *infotext);
    flux_status s = out && png && png_len && infotext ? FLUX_OK : FLUX_ERR_NOMEM;
    if (s == FLUX_OK && job->req.n_loras + flux_lora_count(q->ctx) > q->base_loras) s = apply_loras(q, job);
    if (s == FLUX_OK) {
        flux_params p;
        flux_params_init(&p);
        p.prompt = job->req.prompt;
        p.negative_prompt = job->req.negative;
        p.width = job->req.width;
        p.height = job->req.height;
        p.steps = job->req.steps;
        p.seed = job->seed;
        p.guidance = job->guidance_dropped ? -1.0f : job->req.guidance;
        p.refs = (const flux_image *const *)job->refs;
        p.n_refs = job->n_refs;
        p.batch = n;
        p.init_image = job->init;
        p.mask = job->mask;
        if (job->init) {
            p.width = p.height = 0; /* the init image's size (srv_job_new made it the one asked for) */
            p.strength = job->req.strength;
            p.mask_invert = job->req.mask_invert;
            p.mask_blur_x = job->req.mask_blur_x;
            p.mask_blur_y = job->req.mask_blur_y;
        }
        p.progress = on_progress;
        p.progress_user = &rctx;
        /* as the CLI calls it, so the same request gives the same bytes */
        s = n > 1 ? flux_generate_batch(q->ctx, &p, out) : flux_generate(q->ctx, &p, &out[0]);
    }
    char why[256] = "";
    for (int i = 0; s == FLUX_OK && i < n; i++) {
        /* the texts `flux --init-img NAME --mask mask` adds (its file names; here the request's fields) */
        if (job->init) s = flux_image_set_text(out[i], "init_image", job->req.init_name);
        if (s == FLUX_OK && job->mask) s = flux_image_set_text(out[i], "mask", "mask");
        if (s != FLUX_OK) break;
        if (job->req.output_format == SRV_FMT_JPEG || job->req.output_format == SRV_FMT_WEBP) {
            if (srv_encode_image(out[i], job->req.output_format, job->req.output_quality, &png[i], &png_len[i], why,
                                 sizeof why) != 0)
                s = FLUX_ERR_NOMEM;
        } else {
            s = flux_image_encode_png(q->ctx, out[i], &png[i], &png_len[i]);
        }
        const char *params = flux_image_get_text(out[i], "parameters");
        if (s == FLUX_OK && !(infotext[i] = strdup(params ? params : ""))) s = FLUX_ERR_NOMEM;
    }
    const double t_end = fx_now_s();
    pthread_mutex_lock(&q->mu);
    q->running = NULL; /* before the job is seen finished: its client may ask for the progress next */
    if (s == FLUX_OK) {
        job->png = png;
        job->png_len = png_len;
        job->infotext = infotext;
        job->n_png = n;
        job->out_width = out[0]->width;
        job->out_height = out[0]->height;
        png = NULL;
        png_len = NULL;
        infotext = NULL;
        q->m.images += (unsigned long long)n;
        if (job->steps && job->t_denoise_end > job->t_denoise && job->t_denoise > 0) {
            q->m.steps += (unsigned long long)job->steps;
            q->m.step_seconds += job->t_denoise_end - job->t_denoise;
            q->m.step_pixels += (double)job->steps * job->out_width * job->out_height * n;
        }
        q->m.job_seconds += t_end - job->t_start;
        finish_locked(q, job, SRV_JOB_DONE);
        forget_old_locked(q); /* its images may push older ones past the byte cap */
    } else if (s == FLUX_ERR_CANCELLED) {
        job->error_kind = SRV_E_CONFLICT; /* a client still connected reads it: a standard status */
        snprintf(job->error, sizeof job->error, "cancelled");
        finish_locked(q, job, SRV_JOB_CANCELLED);
    } else {
        const int bad_input = s == FLUX_ERR_INVALID_ARG || s == FLUX_ERR_UNSUPPORTED || s == FLUX_ERR_MODEL ||
                              s == FLUX_ERR_FORMAT;
        job->error_kind = bad_input ? SRV_E_BAD_REQUEST : s == FLUX_ERR_NOMEM ? SRV_E_NO_MEMORY : SRV_E_ENGINE;
        snprintf(job->error, sizeof job->error, "%s",
                 why[0] ? why : s == FLUX_ERR_NOMEM && !out ? "out of memory" : flux_error(q->ctx));
        hide_lora_dir(q, job->error);
        finish_locked(q, job, SRV_JOB_FAILED);
    }
    pthread_mutex_unlock(&q->mu);
    if (q->verbose)
        fprintf(stderr, "flux-server: %s %s in %.2f s%s%s\n", job->id, srv_job_state_name(job->state),
                t_end - job->t_start, job->error[0] ? ": " : "", job->error);
    for (int i = 0; out && i < n; i++) flux_image_free(out[i]);
    for (int i = 0; png && i < n; i++) free_encoded(job, png[i]);
    for (int i = 0; infotext && i < n; i++) free(infotext[i]);
    free(infotext);
    free(out);
    free(png);
    free(png_len);
}

static void *worker_main(void *arg) {
    srv_queue *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->head && !q->stop) pthread_cond_wait(&q->work, &q->mu);
        if (!q->head) break;
        srv_job *job = q->head;
        q->head = job->next;
        if (!q->head) q->tail = NULL;
        q->length--;
        job->state = SRV_JOB_RUNNING;
        job->t_start = fx_now_s();
        job->version++;
        q->running = job;
        pthread_cond_broadcast(&q->changed);
        pthread_mutex_unlock(&q->mu);
        run_job(q, job);
        pthread_mutex_lock(&q->mu);
        unref_locked(job); /* the queue's reference */
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int srv_queue_start(srv_queue *q, flux_ctx *ctx, int max_length, const char *lora_dir, int verbose) {
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_cond_init(&q->changed, NULL);
    q->ctx = ctx;
    q->max_length = max_length;
    q->lora_dir = lora_dir;
    q->base_loras = flux_lora_count(ctx);
    q->verbose = verbose;
    if (flux_get_model_info(ctx, &q->info) != FLUX_OK) return -1;
    int rc = pthread_create(&q->worker, NULL, worker_main, q);
    if (rc) {
        errno = rc;
        return -1;
    }
    return 0;
}

void srv_queue_drain_and_stop(srv_queue *q) {
    pthread_mutex_lock(&q->mu);
    q->draining = 1;
    q->stop = 1;
    pthread_cond_broadcast(&q->work);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->worker, NULL);
}

void srv_queue_destroy(srv_queue *q) {
    for (int i = 0; i < SRV_TABLE_SIZE; i++)
        if (q->table[i]) unref_locked(q->table[i]);
    pthread_cond_destroy(&q->work);
    pthread_cond_destroy(&q->changed);
    pthread_mutex_destroy(&q->mu);
}

/* ---------------------------------------------------------------- views */

static void view_locked(const srv_queue *q, const srv_job *job, srv_job_view *v) {
    v->state = job->state;
    v->stage = job->stage;
    v->step = job->step;
    v->steps = job->steps;
    v->position = job->state == SRV_JOB_QUEUED ? job_position_locked(q, job) : -1;
    v->progress = job_progress_locked(job);
    v->eta = job_eta_locked(q, job);
    v->version = job->version;
    v->cancel = job->cancel;
    memcpy(v->error, job->error, sizeof v->error);
}

void srv_job_view_of(srv_queue *q, const srv_job *job, srv_job_view *v) {
    pthread_mutex_lock(&q->mu);
    view_locked(q, job, v);
    pthread_mutex_unlock(&q->mu);
}

int srv_job_wait_change(srv_queue *q, const srv_job *job, unsigned version, int ms, srv_job_view *v) {
    pthread_mutex_lock(&q->mu);
    const struct timespec ts = srv_deadline_in_ms(ms);
    int timed_out = 0;
    while (job->version == version && !job_finished(job) && !timed_out)
        timed_out = pthread_cond_timedwait(&q->changed, &q->mu, &ts) != 0;
    const int changed = job->version != version || job_finished(job);
    view_locked(q, job, v);
    pthread_mutex_unlock(&q->mu);
    return changed;
}

int srv_queue_running_view(srv_queue *q, srv_job_view *v, int *jobs) {
    pthread_mutex_lock(&q->mu);
    const srv_job *job = q->running;
    if (job) view_locked(q, job, v);
    *jobs = q->length + (job ? 1 : 0);
    pthread_mutex_unlock(&q->mu);
    return job != NULL;
}

void srv_queue_view_of(srv_queue *q, srv_queue_view *v) {
    pthread_mutex_lock(&q->mu);
    v->length = q->length;
    v->max_length = q->max_length;
    v->running = q->running != NULL;
    v->draining = q->draining;
    v->m = q->m;
    pthread_mutex_unlock(&q->mu);
}

void srv_queue_count_disconnect(srv_queue *q) {
    pthread_mutex_lock(&q->mu);
    q->m.disconnects++;
    pthread_mutex_unlock(&q->mu);
}

int srv_queue_begin_drain(srv_queue *q) {
    pthread_mutex_lock(&q->mu);
    q->draining = 1;
    q->drain_start = fx_now_s();
    const int left = q->length + (q->running ? 1 : 0);
    pthread_mutex_unlock(&q->mu);
    return left;
}

void srv_queue_cancel_all(srv_queue *q) {
    for (;;) { /* the queued jobs one by one (each with a reference while it is cancelled) */
        pthread_mutex_lock(&q->mu);
        srv_job *j = q->head;
        if (j) j->refs_count++;
        pthread_mutex_unlock(&q->mu);
        if (!j) break;
        srv_job_cancel(q, j);
        srv_job_unref(q, j);
    }
    srv_queue_interrupt(q);
}
