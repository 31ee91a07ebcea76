/*
 * vae_stream.c — strip streaming for the VAE: stored tensors (f32 / bf16,
 * row slots), GroupNorm statistics accumulated while a tensor is produced,
 * and vae_stream_conv, one conv layer run strip by strip:
 *
 *   for each strip of output rows [r0, r1):
 *     load the input rows it reads (f32), side output (1×1 shortcut) from
 *     the raw rows, GroupNorm + SiLU in place, conv → output strip;
 *     then write the strip — or, with `delay`, the previous strip — adding
 *     the residual, accumulating the output's statistics, converting to the
 *     storage dtype.
 *
 * The load and write phases are one parallel region each: rows are split
 * over the threads, each running the row kernels on one thread with its own
 * kernel context (vae_stream.kc1). Statistics are summed per row and the rows
 * added in order, so every result is the same for any thread count (and,
 * but for the last bits of those sums, for any strip height).
 * Before a write, the rows it covers are checked against the input rows
 * later strips still have to read: a storage plan that would overwrite
 * unread data fails loudly instead of computing garbage.
 */
#include "vae_stream.h"

#include "src/base/clock.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <time.h>

/* Strips of VAE_STRIP_PIXELS output pixels give both threads enough GEMM
 * blocks; the input window stays within this many bytes. */
#define STRIP_INPUT_BYTES ((size_t)12 << 20)
#define MIN_STRIP_ROWS 8

/* ------------------------------------------------------------------------ */
/* Scratch accounting                                                       */
/* ------------------------------------------------------------------------ */

void vae_account(vae_stream *r, ptrdiff_t delta) {
    r->live_bytes = (size_t)((ptrdiff_t)r->live_bytes + delta);
    if (r->live_bytes > r->peak_bytes) r->peak_bytes = r->live_bytes;
    if (r->ctx) fx_mem_add(&r->ctx->mem, FX_MEM_VAE_ARENA, (int64_t)delta);
}

float *vae_buf(vae_stream *r, int i, size_t bytes) {
    if (bytes > r->buf_bytes[i]) {
        size_t b = (bytes + 63) & ~(size_t)63;
        float *p = aligned_alloc(64, b);
        if (!p) return NULL;
        free(r->buf[i]);
        vae_account(r, (ptrdiff_t)b - (ptrdiff_t)r->buf_bytes[i]);
        r->buf[i] = p;
        r->buf_bytes[i] = b;
    }
    return r->buf[i];
}

static void *packed_buf(vae_stream *r, size_t bytes) {
    if (bytes > r->packed_bytes) {
        size_t b = (bytes + 63) & ~(size_t)63;
        void *p = aligned_alloc(64, b);
        if (!p) return NULL;
        free(r->packed);
        vae_account(r, (ptrdiff_t)b - (ptrdiff_t)r->packed_bytes);
        r->packed = p;
        r->packed_bytes = b;
    }
    return r->packed;
}

flux_status vae_stream_init(vae_stream *r) {
    r->threads = r->kc->threads > 0 ? r->kc->threads : 1;
    r->kc1 = calloc((size_t)r->threads, sizeof *r->kc1);
    r->stats = calloc(2, sizeof *r->stats);
    if (!r->kc1 || !r->stats) return fx_fail(r->err, FLUX_ERR_NOMEM, "out of memory (VAE run)");
    for (int t = 0; t < r->threads; t++) {
        fx_scratch *sc = fx_scratch_new(1);
        if (!sc) return fx_fail(r->err, FLUX_ERR_NOMEM, "out of memory (VAE run)");
        fx_kctx_init(&r->kc1[t], r->kc->k, 1, sc);
    }
    return FLUX_OK;
}

flux_status vae_stream_checkpoint(vae_stream *r, int sub, int subtotal) {
    return r->ctx ? fx_ctx_checkpoint(r->ctx, sub, subtotal) : FLUX_OK;
}

void vae_stream_release(vae_stream *r) {
    if (r->kc1)
        for (int t = 0; t < r->threads; t++) fx_scratch_free(r->kc1[t].scratch);
    free(r->kc1);
    r->kc1 = NULL;
    free(r->stats);
    r->stats = NULL;
    for (int i = 0; i < VAE_NBUF; i++) free(r->buf[i]), r->buf[i] = NULL, r->buf_bytes[i] = 0;
    free(r->packed), r->packed = NULL, r->packed_bytes = 0;
}

/* ------------------------------------------------------------------------ */
/* Stored tensors                                                           */
/* ------------------------------------------------------------------------ */

static size_t es_of(const vae_tensor *t) { return t->dtype == FX_DTYPE_BF16 ? 2 : 4; }

static char *row_ptr(const vae_tensor *t, int y) { return (char *)t->data + (size_t)y * (size_t)t->pitch * es_of(t); }

/* One row of t as dense f32 [w, c] / the reverse, single-threaded (kc1). */
static void load_row(const fx_kctx *kc1, const vae_tensor *t, int y, float *dst) {
    const int64_t n = (int64_t)t->w * t->c;
    if (t->planar) { /* [c, h, w] f32 */
        const float *s = (const float *)t->data + (int64_t)y * t->w;
        const int64_t hw = (int64_t)t->h * t->w;
        for (int x = 0; x < t->w; x++)
            for (int c = 0; c < t->c; c++) dst[(int64_t)x * t->c + c] = s[c * hw + x];
    } else if (t->dtype == FX_DTYPE_BF16) {
        fx_bf16_to_f32(kc1, n, (const uint16_t *)row_ptr(t, y), dst);
    } else {
        memcpy(dst, row_ptr(t, y), sizeof(float) * (size_t)n);
    }
}

static void store_row(const fx_kctx *kc1, const vae_tensor *t, int y, const float *src) {
    const int64_t n = (int64_t)t->w * t->c;
    if (t->planar) {
        float *d = (float *)t->data + (int64_t)y * t->w;
        const int64_t hw = (int64_t)t->h * t->w;
        for (int x = 0; x < t->w; x++)
            for (int c = 0; c < t->c; c++) d[c * hw + x] = src[(int64_t)x * t->c + c];
    } else if (t->dtype == FX_DTYPE_BF16) {
        fx_f32_to_bf16(kc1, n, src, (uint16_t *)row_ptr(t, y));
    } else {
        memcpy(row_ptr(t, y), src, sizeof(float) * (size_t)n);
    }
}

/* Thread id inside a parallel region. */
static int tid(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Threads for work over `rows` rows of `n` elements each. */
static int row_threads(const vae_stream *r, int rows, int64_t n) {
    return rows > 1 && (int64_t)rows * n >= 16384 ? (r->threads < rows ? r->threads : rows) : 1;
}

void vae_load_rows(vae_stream *r, const vae_tensor *t, int y0, int y1, float *dst) {
    const int64_t n = (int64_t)t->w * t->c;
    const int nt = row_threads(r, y1 - y0, n);
    (void)nt; /* unused without OpenMP */
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int y = y0; y < y1; y++) load_row(&r->kc1[tid()], t, y, dst + (int64_t)(y - y0) * n);
}

void vae_store_rows(vae_stream *r, const vae_tensor *t, int y0, int y1, const float *src) {
    const int64_t n = (int64_t)t->w * t->c;
    const int nt = row_threads(r, y1 - y0, n);
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int y = y0; y < y1; y++) store_row(&r->kc1[tid()], t, y, src + (int64_t)(y - y0) * n);
}

/* Input rows [y0, y1) of src into dst, normalised (GroupNorm + SiLU) when
 * gn is set: one pass per row. */
static void load_rows_gn(vae_stream *r, const vae_tensor *t, int y0, int y1, const vae_stats *gn, const vae_norm *norm,
                         int load, float *dst) {
    const int64_t n = (int64_t)t->w * t->c;
    const int nt = row_threads(r, y1 - y0, n);
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int y = y0; y < y1; y++) {
        const fx_kctx *kc1 = &r->kc1[tid()];
        float *row = dst + (int64_t)(y - y0) * n;
        if (load) load_row(kc1, t, y, row);
        if (gn) fx_groupnorm_apply(kc1, t->w, t->c, gn->groups, row, gn->mean, gn->rstd, norm->gamma, norm->beta, 1, row);
    }
}

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* Whether any byte of rows [a0, a1) of a meets rows [b0, b1) of b (row
 * slots: each row is w·c elements at the start of its pitch). */
static int rows_overlap(const vae_tensor *a, int a0, int a1, const vae_tensor *b, int b0, int b1) {
    if (a->planar || b->planar || a0 >= a1 || b0 >= b1) return 0;
    const int64_t bp = b->pitch * (int64_t)es_of(b), blen = (int64_t)b->w * b->c * (int64_t)es_of(b);
    const int64_t alen = (int64_t)a->w * a->c * (int64_t)es_of(a);
    for (int y = a0; y < a1; y++) {
        /* b's row t meets [lo, hi) iff t·bp < hi and t·bp + blen > lo (offsets from b's start) */
        int64_t lo = row_ptr(a, y) - (const char *)b->data, hi = lo + alen;
        int64_t t0 = floor_div(lo - blen, bp) + 1, t1 = floor_div(hi - 1, bp);
        if (t0 < b0) t0 = b0;
        if (t1 > b1 - 1) t1 = b1 - 1;
        if (t0 <= t1) return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* GroupNorm statistics                                                     */
/* ------------------------------------------------------------------------ */

void vae_stats_init(vae_stats *s, int channels, int groups) {
    memset(s->acc, 0, sizeof(double) * 2 * (size_t)groups);
    s->pixels = 0;
    s->channels = channels;
    s->groups = groups;
}

void vae_stats_add(vae_stream *r, vae_stats *s, int64_t pixels, const float *x) {
    fx_groupnorm_sums(r->kc, pixels, s->channels, s->groups, x, s->acc);
    s->pixels += pixels;
}

void vae_stats_finish(vae_stream *r, vae_stats *s) {
    fx_groupnorm_finish(s->pixels, s->channels, s->groups, s->acc, r->eps, s->mean, s->rstd);
}

/* ------------------------------------------------------------------------ */
/* Strip-streamed convolution                                               */
/* ------------------------------------------------------------------------ */

static fx_conv2d_geom geom_of(const vae_sconv *op) {
    fx_conv2d_geom g = {op->src->h, op->src->w, op->conv->cin, op->conv->cout, op->conv->k, op->conv->k,
                        op->stride > 0 ? op->stride : 1, op->pad_top, op->pad_left, op->pad_bottom,
                        op->pad_right, op->upsample};
    return g;
}

int vae_conv_strip_rows(const fx_conv2d_geom *g, int strip_pixels) {
    int ho, wo;
    fx_conv2d_out_size(g, &ho, &wo);
    if (ho <= 0 || wo <= 0) return 1;
    /* at least MIN_STRIP_ROWS rows, so the halo rows a strip loads twice stay
     * a small fraction (unless a tiny strip was asked for) */
    int s = strip_pixels / wo;
    if (s < MIN_STRIP_ROWS && strip_pixels >= VAE_STRIP_PIXELS) s = MIN_STRIP_ROWS;
    if (s < 1) s = 1;
    for (; s > 1; s--) { /* input window within the budget */
        int in0, in1;
        fx_conv2d_input_rows(g, 0, s, &in0, &in1);
        if ((size_t)(in1 - in0 + 2) * (size_t)g->w * (size_t)g->cin * sizeof(float) <= STRIP_INPUT_BYTES) break;
    }
    return s < ho ? s : ho;
}

typedef struct strip {
    int r0, r1;
} strip;

/* Write strip rows (residual, statistics, storage) from out / side_out:
 * one pass per row; the statistics are summed per row, then added in row
 * order (independent of the thread count). */
static flux_status flush(vae_stream *r, const vae_sconv *op, strip s, float *out, float *side_out, int next_in0) {
    const int rows = s.r1 - s.r0;
    const vae_tensor *d = &op->dst;
    const int64_t n = (int64_t)d->w * d->c;
    /* nothing later strips read may be overwritten */
    if (rows_overlap(d, s.r0, s.r1, op->src, next_in0, op->src->h) ||
        (op->side && rows_overlap(&op->side_dst, s.r0, s.r1, op->src, next_in0, op->src->h)))
        return fx_fail(r->err, FLUX_ERR_INTERNAL,
                       "vae: the storage plan would overwrite rows a later strip reads (rows %d..%d)", s.r0,
                       s.r1 - 1);
    vae_stats *st = op->dst_stats;
    const int G = st ? st->groups : 0;
    double *acc = st ? (double *)(void *)vae_buf(r, 5, sizeof(double) * 2 * (size_t)G * (size_t)rows) : NULL;
    float *tmp = op->residual ? vae_buf(r, 6, sizeof(float) * (size_t)n * (size_t)r->threads) : NULL;
    if ((st && !acc) || (op->residual && !tmp)) return fx_fail(r->err, FLUX_ERR_NOMEM, "out of memory (VAE strip)");
    const int nt = row_threads(r, rows, n);
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int i = 0; i < rows; i++) {
        const int t = tid();
        const fx_kctx *kc1 = &r->kc1[t];
        float *row = out + (int64_t)i * n;
        if (op->residual) {
            float *res = tmp + (int64_t)t * n;
            load_row(kc1, d, s.r0 + i, res);
            fx_gated_add(kc1, 1, n, row, n, NULL, res, n);
        }
        if (st) {
            double *a = acc + 2 * (size_t)G * (size_t)i;
            memset(a, 0, sizeof(double) * 2 * (size_t)G);
            fx_groupnorm_sums(kc1, d->w, d->c, G, row, a);
        }
        store_row(kc1, d, s.r0 + i, row);
        if (op->side) store_row(kc1, &op->side_dst, s.r0 + i, side_out + (int64_t)i * op->side_dst.w * op->side_dst.c);
    }
    if (st) {
        for (int i = 0; i < rows; i++)
            for (int g = 0; g < 2 * G; g++) st->acc[g] += acc[2 * (size_t)G * (size_t)i + g];
        st->pixels += (int64_t)rows * d->w;
    }
    return FLUX_OK;
}

flux_status vae_stream_conv(vae_stream *r, const vae_sconv *op) {
    fx_err *err = r->err;
    const fx_conv2d_geom g = geom_of(op);
    int ho, wo;
    fx_conv2d_out_size(&g, &ho, &wo);
    if (ho != op->dst.h || wo != op->dst.w || op->dst.c != g.cout || op->src->c != g.cin)
        return fx_fail(err, FLUX_ERR_INTERNAL, "vae: conv %dx%dx%d -> %dx%dx%d does not fit its output %dx%dx%d",
                       g.h, g.w, g.cin, ho, wo, g.cout, op->dst.h, op->dst.w, op->dst.c);
    if (op->side && (g.stride != 1 || g.upsample2x || op->side->cin != g.cin || op->side_dst.c != op->side->cout))
        return fx_fail(err, FLUX_ERR_INTERNAL, "vae: bad shortcut geometry");

    size_t pb = fx_conv2d_packed_bytes(r->kc, &g, op->conv->w.dtype);
    void *packed = pb ? packed_buf(r, pb) : NULL;
    if (!packed) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (VAE conv weights, %zu bytes)", pb);
    double tp = fx_now_s();
    if (fx_conv2d_pack(r->kc, &g, &op->conv->w, packed))
        return fx_fail(err, FLUX_ERR_INTERNAL, "vae: cannot pack a %dx%d conv weight", g.cout, g.cin);
    r->pack_seconds += fx_now_s() - tp;

    const int srows = vae_conv_strip_rows(&g, r->strip_pixels);
    const int nstrips = (ho + srows - 1) / srows;
    const int64_t out_floats = (int64_t)srows * wo * g.cout;
    const int64_t side_floats = op->side ? (int64_t)srows * wo * op->side->cout : 0;
    const fx_epilogue epi = {FX_EPI_STORE, op->conv->bias, NULL};
    const fx_epilogue side_epi = {FX_EPI_STORE, op->side ? op->side->bias : NULL, NULL};
    strip prev = {0, 0};
    for (int k = 0; k < nstrips; k++) {
        strip s = {k * srows, (k + 1) * srows < ho ? (k + 1) * srows : ho};
        int in0, in1;
        fx_conv2d_input_rows(&g, s.r0, s.r1, &in0, &in1);
        float *in = vae_buf(r, 0, sizeof(float) * (size_t)(in1 - in0 > 0 ? in1 - in0 : 1) * g.w * g.cin);
        float *out = vae_buf(r, 1 + k % 2, sizeof(float) * (size_t)out_floats);
        float *side_out = op->side ? vae_buf(r, 3 + k % 2, sizeof(float) * (size_t)side_floats) : NULL;
        if (!in || !out || (op->side && !side_out)) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (VAE strip)");
        double tl = fx_now_s();
        if (op->side) { /* 1×1 on the raw rows r0..r1 (stride 1: inside the window), then normalise */
            load_rows_gn(r, op->src, in0, in1, NULL, NULL, 1, in);
            fx_linear(r->kc, (int64_t)(s.r1 - s.r0) * wo, in + (int64_t)(s.r0 - in0) * g.w * g.cin, g.cin,
                      &op->side->w, side_out, op->side->cout, &side_epi);
            if (op->gn) load_rows_gn(r, op->src, in0, in1, op->gn, op->norm, 0, in);
        } else {
            load_rows_gn(r, op->src, in0, in1, op->gn, op->norm, 1, in);
        }
        double t0 = fx_now_s();
        r->load_seconds += t0 - tl;
        if (fx_conv2d_packed(r->kc, &g, in, in0, in1 - in0, packed, &epi, out, s.r0, s.r1))
            return fx_fail(err, FLUX_ERR_INTERNAL, "vae: conv strip %d..%d failed", s.r0, s.r1 - 1);
        r->conv_seconds += fx_now_s() - t0;
        r->conv_flops += 2.0 * (s.r1 - s.r0) * wo * (double)g.cout * g.cin * g.kh * g.kw;
        /* rows later strips still read start at the next strip's window */
        int next_in0 = op->src->h, unused;
        if (k + 1 < nstrips)
            fx_conv2d_input_rows(&g, s.r1, s.r1 + srows < ho ? s.r1 + srows : ho, &next_in0, &unused);
        double ts = fx_now_s();
        flux_status st = FLUX_OK;
        if (!op->delay) st = flush(r, op, s, out, side_out, next_in0);
        else if (k > 0) /* the previous strip, now that this one has read its halo */
            st = flush(r, op, prev, r->buf[1 + (k - 1) % 2], op->side ? r->buf[3 + (k - 1) % 2] : NULL, next_in0);
        r->store_seconds += fx_now_s() - ts;
        if (st) return st;
        prev = s;
    }
    if (op->delay && nstrips > 0) {
        flux_status st = flush(r, op, prev, r->buf[1 + (nstrips - 1) % 2],
                               op->side ? r->buf[3 + (nstrips - 1) % 2] : NULL, op->src->h);
        if (st) return st;
    }
    return FLUX_OK;
}

int64_t vae_stream_gap(const fx_conv2d_geom *g, int strip_pixels, int64_t pitch_src, int64_t pitch_dst,
                      int64_t dst_row_bytes) {
    int ho, wo;
    fx_conv2d_out_size(g, &ho, &wo);
    const int s = vae_conv_strip_rows(g, strip_pixels);
    int64_t gap = INT64_MIN;
    for (int r0 = 0; r0 < ho; r0 += s) {
        int r1 = r0 + s < ho ? r0 + s : ho;
        int k2 = r1 + s; /* first row of strip k + 2 */
        if (k2 >= ho) break;
        int in0, in1;
        fx_conv2d_input_rows(g, k2, k2 + s < ho ? k2 + s : ho, &in0, &in1);
        int64_t wend = (int64_t)(r1 - 1) * pitch_dst + dst_row_bytes, rstart = (int64_t)in0 * pitch_src;
        if (wend - rstart > gap) gap = wend - rstart;
    }
    return gap;
}

void vae_plan_level(vae_plan *p, int i, const vae_resnet *first, fx_dtype dtype, int h, int w) {
    vae_region *l = &p->lv[i];
    const int ch = first->cin > 2 * first->cout ? first->cin : 2 * first->cout;
    l->dtype = dtype;
    l->h = h, l->w = w;
    l->pitch = (int64_t)ch * w;
    p->bytes[i] = vae_round64((size_t)h * (size_t)l->pitch * (dtype == FX_DTYPE_BF16 ? 2 : 4));
}

vae_tensor vae_region_part(const vae_region *l, int c0, int c) {
    vae_tensor t = {0};
    size_t es = l->dtype == FX_DTYPE_BF16 ? 2 : 4;
    t.data = l->base + (size_t)c0 * (size_t)l->w * es;
    t.dtype = l->dtype;
    t.h = l->h, t.w = l->w, t.c = c;
    t.pitch = l->pitch;
    return t;
}

/* ------------------------------------------------------------------------ */
/* Arena, storage, observer                                                 */
/* ------------------------------------------------------------------------ */

flux_status vae_arena_alloc(vae_stream *r, size_t bytes) {
    bytes = (bytes + 4095) & ~(size_t)4095;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return fx_fail(r->err, FLUX_ERR_NOMEM, "out of memory (VAE activations, %zu MB)", bytes >> 20);
    madvise(p, bytes, MADV_HUGEPAGE);
    r->arena = p;
    r->arena_bytes = bytes;
    vae_account(r, (ptrdiff_t)bytes);
    return FLUX_OK;
}

void vae_arena_free(vae_stream *r) {
    if (r->arena) munmap(r->arena, r->arena_bytes), vae_account(r, -(ptrdiff_t)r->arena_bytes);
    r->arena = NULL;
}

fx_dtype vae_storage_dtype(const vae_stream *r, int scale) {
    switch (r->storage) {
    case FX_VAE_STORAGE_F32: return FX_DTYPE_F32;
    case FX_VAE_STORAGE_BF16: return FX_DTYPE_BF16;
    default: return r->force_f32 || scale > 2 ? FX_DTYPE_F32 : FX_DTYPE_BF16;
    }
}

void vae_stream_observe(vae_stream *r, const char *name, const vae_tensor *t, const vae_stats *gn, const vae_norm *norm) {
    if (!r->ex.observer) return;
    const int64_t hw = (int64_t)t->h * t->w;
    float *chw = malloc(sizeof(float) * (size_t)(hw * t->c));
    float *row = malloc(sizeof(float) * (size_t)t->w * (size_t)t->c);
    if (chw && row) {
        for (int y = 0; y < t->h; y++) {
            vae_load_rows(r, t, y, y + 1, row);
            if (gn) /* the GroupNorm output itself (no SiLU) */
                fx_groupnorm_apply(r->kc, t->w, t->c, gn->groups, row, gn->mean, gn->rstd, norm->gamma, norm->beta,
                                   0, row);
            for (int x = 0; x < t->w; x++)
                for (int c = 0; c < t->c; c++) chw[c * hw + (int64_t)y * t->w + x] = row[(int64_t)x * t->c + c];
        }
        r->ex.observer(r->ex.observer_user, name, chw, t->c, t->h, t->w);
    }
    free(chw);
    free(row);
}
