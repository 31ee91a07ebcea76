/*
 * vk_weights.c — weights on the device: their layout (vk_internal.h), the
 * upload from the host view, and residency within the weight budget
 * (vk.h fx_vk_weight: registered weights are evicted and uploaded again at
 * their next use when the model does not fit the device).
 */
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Weight rows start on 16 bytes: 8 elements (16-bit) or 4 (f32) → use 8;
 * fp8 rows: 16 (bytes). */
#define W_ROW_ALIGN 8
#define W_ROW_ALIGN_FP8 16
/* Host bytes converted per upload step. */
#define UPLOAD_CHUNK ((size_t)8 << 20)

/* One weight's record: where its device rows come from again. */
typedef struct vk_resident {
    fx_vk_weight *w;       /* buf NULL while evicted */
    fx_weight src;         /* the host view (outlives the weight) */
    int conv, cin, taps;   /* conv weights are reordered per row */
    int pinned;            /* fx_vk_weight_upload: never evicted */
    uint64_t bytes;        /* on the device when resident */
    uint64_t last_use;     /* use_tick of its last use; 0 = never used */
    char name[96];
    struct vk_resident *prev, *next;
} vk_resident;

static double gib(uint64_t b) { return (double)b / (double)(1u << 30); }

/* ------------------------------------------------------------------------ */
/* Rows                                                                     */
/* ------------------------------------------------------------------------ */

/* Row r of the device layout (ld elements, zero-padded) from the host. */
static void linear_row(const fx_weight *w, int64_t r, void *dst) {
    if (vk_w_blocks(w->dtype)) { /* the blocks as stored */
        memcpy(dst, (const char *)w->data + fx_dtype_row_bytes(w->dtype, r * w->ld),
               (size_t)fx_dtype_row_bytes(w->dtype, w->k));
        return;
    }
    size_t es = vk_dtype_bytes(w->dtype);
    memcpy(dst, (const char *)w->data + (size_t)(r * w->ld) * es, (size_t)w->k * es);
}

/* [cin, kh·kw] of one output channel → [kh·kw, cin], bit for bit. */
static void conv_row(const fx_weight *w, int cin, int taps, int64_t r, void *dst) {
    size_t es = vk_dtype_bytes(w->dtype);
    const char *src = (const char *)w->data + (size_t)(r * w->ld) * es;
    for (int t = 0; t < taps; t++)
        for (int ci = 0; ci < cin; ci++)
            memcpy((char *)dst + ((size_t)t * cin + ci) * es, src + ((size_t)ci * taps + t) * es, es);
}

/* Allocate r's buffer and fill it from the host view, UPLOAD_CHUNK at a time. */
static flux_status fill(fx_vk *vk, vk_resident *r, fx_err *err) {
    fx_vk_weight *w = r->w;
    const size_t row_bytes = (size_t)vk_w_row_bytes(w);
    fx_vk_buf *buf;
    TRY(fx_vk_buf_new(vk, r->bytes, r->name, &buf, err));
    int64_t rows_per = (int64_t)(UPLOAD_CHUNK / row_bytes);
    if (rows_per < 1) rows_per = 1;
    if (rows_per > w->n) rows_per = w->n;
    char *tmp = calloc((size_t)rows_per, row_bytes);
    if (!tmp) {
        fx_vk_buf_free(vk, buf);
        return fx_fail(err, FLUX_ERR_NOMEM, "Vulkan: out of host memory uploading %s", r->name);
    }
    flux_status st = FLUX_OK;
    for (int64_t r0 = 0; r0 < w->n && st == FLUX_OK; r0 += rows_per) {
        int64_t nr = w->n - r0 < rows_per ? w->n - r0 : rows_per;
        for (int64_t i = 0; i < nr; i++) {
            char *dst = tmp + (size_t)i * row_bytes;
            if (r->conv) conv_row(&r->src, r->cin, r->taps, r0 + i, dst);
            else linear_row(&r->src, r0 + i, dst);
        }
        st = fx_vk_upload(vk, buf, (uint64_t)r0 * row_bytes, tmp, (uint64_t)nr * row_bytes, err);
    }
    free(tmp);
    if (st != FLUX_OK) {
        fx_vk_buf_free(vk, buf);
        return st;
    }
    w->buf = buf;
    vk->weight_bytes += r->bytes;
    if (vk->weight_bytes > vk->wstats.peak_resident) vk->wstats.peak_resident = vk->weight_bytes;
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Residency                                                                */
/* ------------------------------------------------------------------------ */

static void evict(fx_vk *vk, vk_resident *r) {
    fx_vk_buf_free(vk, r->w->buf); /* nothing recorded reads it: the caller synced */
    r->w->buf = NULL;
    vk->weight_bytes -= r->bytes;
    vk->wstats.evictions++;
}

/* The weight to evict for `self` (NULL: for an activation), or NULL. Idle since self's previous use
 * (another stage's weights, a finished loop): the oldest; otherwise self is
 * in a loop larger than the budget: the most recently used, needed last. */
static vk_resident *victim(fx_vk *vk, const vk_resident *self) {
    const uint64_t since = self && self->last_use ? self->last_use : vk->use_tick + 1;
    vk_resident *oldest = NULL, *newest = NULL;
    for (vk_resident *r = vk->weights; r; r = r->next) {
        if (r == self || r->pinned || !r->w->buf) continue;
        if (r->last_use < since) {
            if (!oldest || r->last_use < oldest->last_use) oldest = r;
        } else if (!newest || r->last_use > newest->last_use) {
            newest = r;
        }
    }
    return oldest ? oldest : newest;
}

/* Make r resident: room within the budget (evicting after the recorded
 * work has run), then the upload; a device that still runs out of memory
 * gives up one more weight per retry. */
static flux_status make_resident(fx_vk *vk, vk_resident *r, fx_err *err) {
    if (vk->weight_bytes + r->bytes > vk->weight_budget) {
        TRY(vk_submit_wait(vk, err));
        for (vk_resident *v; vk->weight_bytes + r->bytes > vk->weight_budget && (v = victim(vk, r));) evict(vk, v);
        if (vk->weight_bytes + r->bytes > vk->weight_budget && !r->pinned)
            return fx_fail(err, FLUX_ERR_NOMEM,
                           "Vulkan: weight %s needs %llu bytes (%.2f GiB); the device weight budget is %.2f GiB "
                           "and %.2f GiB of it cannot be freed (%s)", r->name, (unsigned long long)r->bytes,
                           gib(r->bytes), gib(vk->weight_budget), gib(vk->weight_bytes), vk->info.name);
        if (!vk->told_streaming) {
            vk->told_streaming = 1;
            fx_log(vk->opts.log, 1, "Vulkan: the weights exceed the device budget of %.1f MiB: those that do not "
                   "fit are uploaded at each use", (double)vk->weight_budget / (1 << 20));
        }
    }
    for (;;) {
        fx_err e = {0};
        flux_status st = fill(vk, r, &e);
        if (st == FLUX_OK) return FLUX_OK;
        vk_resident *v = st == FLUX_ERR_NOMEM ? victim(vk, r) : NULL;
        if (!v) {
            *err = e;
            return st;
        }
        TRY(vk_submit_wait(vk, err));
        evict(vk, v);
    }
}

flux_status vk_weight_use(fx_vk *vk, const fx_vk_weight *w, fx_err *err) {
    vk_resident *r = w ? w->res : NULL;
    if (!r) return FLUX_OK; /* checked by the caller */
    if (!w->buf) {
        TRY(make_resident(vk, r, err));
        vk->wstats.uploads++;
        vk->wstats.upload_bytes += r->bytes;
    }
    r->last_use = ++vk->use_tick;
    return FLUX_OK;
}

flux_status fx_vk_buf_new_evicting(fx_vk *vk, uint64_t bytes, const char *what, fx_vk_buf **out, fx_err *err) {
    for (;;) {
        fx_err e = {0};
        flux_status st = fx_vk_buf_new(vk, bytes, what, out, &e);
        vk_resident *v = st == FLUX_ERR_NOMEM ? victim(vk, NULL) : NULL;
        if (!v) {
            if (st) *err = e;
            return st;
        }
        TRY(vk_submit_wait(vk, err)); /* nothing recorded may still read it */
        evict(vk, v);
    }
}

static void unlink_record(fx_vk *vk, vk_resident *r) {
    if (r->prev) r->prev->next = r->next;
    else vk->weights = r->next;
    if (r->next) r->next->prev = r->prev;
}

void vk_weights_destroy(fx_vk *vk) {
    const fx_vk_weight_stats *s = &vk->wstats;
    if (s->uploads)
        fx_log(vk->opts.log, 1, "Vulkan: weights streamed: %.1f MiB uploaded again in %llu uploads (%llu evictions), "
               "peak %.1f MiB resident of a %.1f MiB budget", (double)s->upload_bytes / (1 << 20),
               (unsigned long long)s->uploads, (unsigned long long)s->evictions, (double)s->peak_resident / (1 << 20),
               (double)vk->weight_budget / (1 << 20));
    while (vk->weights) { /* weights their owners did not free (their buffers go with the context's) */
        vk_resident *r = vk->weights;
        unlink_record(vk, r);
        free(r);
    }
}

fx_vk_weight_stats fx_vk_weights(const fx_vk *vk) {
    fx_vk_weight_stats s = vk ? vk->wstats : (fx_vk_weight_stats){0};
    if (vk) {
        s.budget = vk->weight_budget;
        s.resident = vk->weight_bytes;
        s.allocated = vk->allocated;
        for (const vk_resident *r = vk->weights; r; r = r->next) s.registered += r->bytes;
    }
    return s;
}

/* ------------------------------------------------------------------------ */
/* Registration                                                             */
/* ------------------------------------------------------------------------ */

static flux_status weight_new(fx_vk *vk, const fx_conv2d_geom *g, const fx_weight *w, const char *name,
                              int pinned, fx_vk_weight *out, fx_err *err) {
    memset(out, 0, sizeof *out);
    TRY(vk_check_alive(vk, err));
    const fx_dtype dt = w->dtype;
    const int64_t n = w->n, k = w->k;
    const int fp8 = fx_dtype_is_fp8(dt);
    if (dt != FX_DTYPE_F32 && dt != FX_DTYPE_BF16 && dt != FX_DTYPE_F16 && !vk_w_blocks(dt) && !fp8)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "Vulkan: weight %s is stored as %s (dtype %d); the device path reads F32, F16, BF16, fp8 and "
                       "the GGUF block types only (run with --backend cpu)", name, fx_dtype_name(dt), (int)dt);
    if (w->scales) /* per-row / block / MXFP8 scales: README "fp8 checkpoints" */
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "Vulkan: fp8 weight %s has side scales (per output row, 128x128 blocks or MXFP8); the device "
                       "reads fp8 with one per-tensor scale only (run with --backend cpu)", name);
    if (g && (vk_w_blocks(dt) || fp8))
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan: conv weight %s is stored as %s; device convolutions read "
                       "F32, F16 and BF16 weights only (run with --backend cpu)", name, fx_dtype_name(dt));
    if (n < 1 || k < 0 || (vk_w_blocks(dt) && (k < 1 || k % fx_dtype_block(dt))))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan: weight %s has shape [%lld, %lld]%s", name, (long long)n,
                       (long long)k, vk_w_blocks(dt) ? " (not whole blocks)" : "");
    /* Block rows: their bytes back to back (rows of 210-byte blocks start
     * anywhere; the shaders read bytes). Dense rows: padded to 16 bytes. */
    const int64_t align = fp8 ? W_ROW_ALIGN_FP8 : W_ROW_ALIGN;
    const int64_t ld = vk_w_blocks(dt) ? fx_dtype_row_bytes(dt, k) : (k + align - 1) / align * align;
    vk_resident *r = calloc(1, sizeof *r);
    if (!r) return fx_fail(err, FLUX_ERR_NOMEM, "Vulkan: out of host memory registering %s", name);
    *out = (fx_vk_weight){NULL, dt, n, k, ld ? ld : align, 0, r, fp8 ? w->scale : 0.0f};
    r->w = out;
    r->src = *w;
    r->conv = g != NULL;
    r->cin = g ? g->cin : 0;
    r->taps = g ? g->kh * g->kw : 0;
    r->pinned = pinned;
    r->bytes = (uint64_t)n * vk_w_row_bytes(out);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->next = vk->weights;
    if (vk->weights) vk->weights->prev = r;
    vk->weights = r;
    /* Pinned weights are uploaded now; registered ones while they fit (one
     * the device has no memory for waits for its first use). */
    flux_status st = FLUX_OK;
    if (pinned) {
        st = make_resident(vk, r, err);
    } else if (vk->weight_bytes + r->bytes <= vk->weight_budget) {
        fx_err e = {0};
        st = fill(vk, r, &e);
        if (st == FLUX_ERR_NOMEM) st = FLUX_OK;
        else if (st) *err = e;
    }
    if (st != FLUX_OK) fx_vk_weight_free(vk, out);
    return st;
}

flux_status fx_vk_weight_upload(fx_vk *vk, const fx_weight *w, const char *name, fx_vk_weight *out,
                                fx_err *err) {
    if (!w || !w->data || w->ld < w->k)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan: weight %s: no data or ld < k", name ? name : "?");
    return weight_new(vk, NULL, w, name ? name : "a weight", 1, out, err);
}

static flux_status check_conv(const fx_conv2d_geom *g, const fx_weight *w, const char *name, fx_err *err) {
    if (!g || !w || !w->data || w->n != g->cout || w->k != (int64_t)g->cin * g->kh * g->kw || w->ld < w->k)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "Vulkan: conv weight %s must be [cout, cin·kh·kw] = [%d, %d]", name, g ? g->cout : 0,
                       g ? g->cin * g->kh * g->kw : 0);
    return FLUX_OK;
}

flux_status fx_vk_conv_weight_upload(fx_vk *vk, const fx_conv2d_geom *g, const fx_weight *w, const char *name,
                                     fx_vk_weight *out, fx_err *err) {
    name = name ? name : "a conv weight";
    TRY(check_conv(g, w, name, err));
    return weight_new(vk, g, w, name, 1, out, err);
}

flux_status fx_vk_weight_register(fx_vk *vk, const fx_conv2d_geom *g, const fx_weight *w, const char *name,
                                  fx_vk_weight *out, fx_err *err) {
    name = name ? name : "a weight";
    if (g) TRY(check_conv(g, w, name, err));
    else if (!w || !w->data || w->ld < w->k)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan: weight %s: no data or ld < k", name);
    return weight_new(vk, g, w, name, 0, out, err);
}

void fx_vk_weight_free(fx_vk *vk, fx_vk_weight *w) {
    if (!w) return;
    if (w->res) {
        if (w->buf) vk->weight_bytes -= w->res->bytes;
        unlink_record(vk, w->res);
        free(w->res);
    }
    fx_vk_buf_free(vk, w->buf);
    memset(w, 0, sizeof *w);
}
