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
 * Every step is an op of the backend seam's host strips (ops.h): the load
 * is fx_op_rows_load (GroupNorm + SiLU with the statistics gathered before),
 * the conv fx_op_conv2d_rows over the layer's weight packed once
 * (fx_ops_conv_weight_rows), the shortcut fx_op_linear, the write
 * fx_op_rows_store (residual, statistics, storage dtype). The CPU backend
 * runs the row ops as one parallel region over rows, each row on one
 * thread; statistics are summed per row and the rows added in order, so
 * every result is the same for any thread count (and, but for the last bits
 * of those sums, for any strip height).
 * Before a write, the rows it covers are checked against the input rows
 * later strips still have to read: a storage plan that would overwrite
 * unread data fails loudly instead of computing garbage.
 */
#include "vae_stream.h"

#include "src/base/clock.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
        fx_buf *fb = NULL;
        if (!p) return NULL;
        if (fx_buf_wrap(r->ops, p, (int64_t)(b / sizeof(float)), "VAE strip", &fb, r->err)) {
            free(p);
            return NULL;
        }
        fx_buf_free(r->ops, r->fb[i]);
        free(r->buf[i]);
        vae_account(r, (ptrdiff_t)b - (ptrdiff_t)r->buf_bytes[i]);
        r->buf[i] = p;
        r->fb[i] = fb;
        r->buf_bytes[i] = b;
    }
    return r->buf[i];
}

flux_status vae_wrap_vector(vae_stream *r, const float *host, int64_t n, fx_buf **out) {
    *out = NULL;
    return host ? fx_buf_wrap(r->ops, (void *)host, n, "VAE vector", out, r->err) : FLUX_OK;
}

flux_status vae_stream_init(vae_stream *r) {
    r->stats = calloc(2, sizeof *r->stats);
    if (!r->stats) return fx_fail(r->err, FLUX_ERR_NOMEM, "out of memory (VAE run)");
    return FLUX_OK;
}

flux_status vae_stream_checkpoint(vae_stream *r, int sub, int subtotal) {
    return r->ctx ? fx_ctx_checkpoint(r->ctx, sub, subtotal) : FLUX_OK;
}

void vae_stream_release(vae_stream *r) {
    free(r->stats);
    r->stats = NULL;
    for (int i = 0; i < VAE_NBUF; i++) {
        fx_buf_free(r->ops, r->fb[i]);
        free(r->buf[i]);
        r->fb[i] = NULL, r->buf[i] = NULL, r->buf_bytes[i] = 0;
    }
}

/* ------------------------------------------------------------------------ */
/* Stored tensors                                                           */
/* ------------------------------------------------------------------------ */

static size_t es_of(const vae_tensor *t) { return t->dtype == FX_DTYPE_BF16 ? 2 : 4; }

static char *row_ptr(const vae_tensor *t, int y) { return (char *)t->data + (size_t)y * (size_t)t->pitch * es_of(t); }

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

flux_status vae_stats_add(vae_stream *r, vae_stats *s, int64_t pixels, fx_view x) {
    TRY(fx_op_groupnorm_sums(r->ops, pixels, s->channels, s->groups, x, s->acc, r->err));
    s->pixels += pixels;
    return FLUX_OK;
}

void vae_stats_finish(vae_stream *r, vae_stats *s) {
    fx_ops_groupnorm_finish(s->pixels, s->channels, s->groups, s->acc, r->eps, s->mean, s->rstd);
}

fx_op_gn vae_gn(const vae_stats *s, const vae_norm *norm, int silu) {
    fx_op_gn g = {s->groups, s->mean, s->rstd, norm->gamma, norm->beta, silu};
    return g;
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

/* Write strip rows (residual, statistics, storage) from the strip buffers
 * out / side_out (vae_buf indices). */
static flux_status flush(vae_stream *r, const vae_sconv *op, strip s, int out, int side_out, int next_in0) {
    const vae_tensor *d = &op->dst;
    /* nothing later strips read may be overwritten */
    if (rows_overlap(d, s.r0, s.r1, op->src, next_in0, op->src->h) ||
        (op->side && rows_overlap(&op->side_dst, s.r0, s.r1, op->src, next_in0, op->src->h)))
        return fx_fail(r->err, FLUX_ERR_INTERNAL,
                       "vae: the storage plan would overwrite rows a later strip reads (rows %d..%d)", s.r0,
                       s.r1 - 1);
    vae_stats *st = op->dst_stats;
    TRY(fx_op_rows_store(r->ops, d, s.r0, s.r1, vae_view(r, out, 0, 0), op->residual, st ? st->groups : 0,
                         st ? st->acc : NULL, r->err));
    if (st) st->pixels += (int64_t)(s.r1 - s.r0) * d->w;
    if (op->side) TRY(fx_op_rows_store(r->ops, &op->side_dst, s.r0, s.r1, vae_view(r, side_out, 0, 0), 0, 0, NULL, r->err));
    return FLUX_OK;
}

/* A layer's registered weights and wrapped biases (freed by layer_free). */
typedef struct layer_ops {
    fx_opw conv, side;
    int has_conv, has_side;
    fx_buf *bias, *side_bias;
} layer_ops;

static void layer_free(vae_stream *r, layer_ops *L) {
    if (L->has_conv) fx_ops_weight_free(r->ops, &L->conv);
    if (L->has_side) fx_ops_weight_free(r->ops, &L->side);
    fx_buf_free(r->ops, L->bias);
    fx_buf_free(r->ops, L->side_bias);
}

static flux_status conv_strips(vae_stream *r, const vae_sconv *op, const fx_conv2d_geom *gp, layer_ops *L) {
    fx_err *err = r->err;
    const fx_conv2d_geom g = *gp;
    int ho, wo;
    fx_conv2d_out_size(&g, &ho, &wo);
    double tp = fx_now_s();
    TRY(fx_ops_conv_weight_rows(r->ops, &g, &op->conv->w, "VAE conv", &L->conv, err));
    L->has_conv = 1;
    r->pack_seconds += fx_now_s() - tp;
    TRY(vae_wrap_vector(r, op->conv->bias, g.cout, &L->bias));
    if (op->side) {
        TRY(fx_ops_weight(r->ops, &op->side->w, "VAE shortcut", &L->side, err));
        L->has_side = 1;
        TRY(vae_wrap_vector(r, op->side->bias, op->side->cout, &L->side_bias));
    }

    const int srows = vae_conv_strip_rows(&g, r->strip_pixels);
    const int nstrips = (ho + srows - 1) / srows;
    const int64_t out_floats = (int64_t)srows * wo * g.cout;
    const int64_t side_floats = op->side ? (int64_t)srows * wo * op->side->cout : 0;
    const fx_op_epi epi = {FX_EPI_STORE, L->bias ? fx_vec(L->bias, 0) : fx_none, fx_none};
    const fx_op_epi side_epi = {FX_EPI_STORE, L->side_bias ? fx_vec(L->side_bias, 0) : fx_none, fx_none};
    const fx_op_gn gn = op->gn ? vae_gn(op->gn, op->norm, 1) : (fx_op_gn){0};
    strip prev = {0, 0};
    for (int k = 0; k < nstrips; k++) {
        strip s = {k * srows, (k + 1) * srows < ho ? (k + 1) * srows : ho};
        int in0, in1;
        fx_conv2d_input_rows(&g, s.r0, s.r1, &in0, &in1);
        const int out = 1 + k % 2, side_out = 3 + k % 2;
        float *in = vae_buf(r, 0, sizeof(float) * (size_t)(in1 - in0 > 0 ? in1 - in0 : 1) * g.w * g.cin);
        float *o = vae_buf(r, out, sizeof(float) * (size_t)out_floats);
        float *so = op->side ? vae_buf(r, side_out, sizeof(float) * (size_t)side_floats) : NULL;
        if (!in || !o || (op->side && !so)) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (VAE strip)");
        double tl = fx_now_s();
        if (op->side) { /* 1×1 on the raw rows r0..r1 (stride 1: inside the window), then normalise */
            TRY(fx_op_rows_load(r->ops, op->src, in0, in1, NULL, 1, vae_view(r, 0, 0, 0), err));
            TRY(fx_op_linear(r->ops, (int64_t)(s.r1 - s.r0) * wo, vae_view(r, 0, (int64_t)(s.r0 - in0) * g.w * g.cin, g.cin),
                             &L->side, vae_view(r, side_out, 0, op->side->cout), &side_epi, err));
            if (op->gn) TRY(fx_op_rows_load(r->ops, op->src, in0, in1, &gn, 0, vae_view(r, 0, 0, 0), err));
        } else {
            TRY(fx_op_rows_load(r->ops, op->src, in0, in1, op->gn ? &gn : NULL, 1, vae_view(r, 0, 0, 0), err));
        }
        double t0 = fx_now_s();
        r->load_seconds += t0 - tl;
        TRY(fx_op_conv2d_rows(r->ops, &g, vae_view(r, 0, 0, 0), in0, in1 - in0, &L->conv, &epi, vae_view(r, out, 0, 0),
                              s.r0, s.r1, err));
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
            st = flush(r, op, prev, 1 + (k - 1) % 2, 3 + (k - 1) % 2, next_in0);
        r->store_seconds += fx_now_s() - ts;
        if (st) return st;
        prev = s;
    }
    if (op->delay && nstrips > 0)
        TRY(flush(r, op, prev, 1 + (nstrips - 1) % 2, 3 + (nstrips - 1) % 2, op->src->h));
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
    layer_ops L = {0};
    flux_status st = conv_strips(r, op, &g, &L);
    layer_free(r, &L);
    return st;
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
    return fx_buf_wrap(r->ops, p, (int64_t)(bytes / sizeof(float)), "VAE arena", &r->arena_buf, r->err);
}

void vae_arena_free(vae_stream *r) {
    fx_buf_free(r->ops, r->arena_buf);
    r->arena_buf = NULL;
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

flux_status vae_stream_observe(vae_stream *r, const char *name, const vae_tensor *t, const vae_stats *gn,
                               const vae_norm *norm) {
    if (!r->ex.observer) return FLUX_OK;
    const int64_t hw = (int64_t)t->h * t->w;
    float *chw = malloc(sizeof(float) * (size_t)(hw * t->c));
    float *row = malloc(sizeof(float) * (size_t)t->w * (size_t)t->c);
    fx_buf *rb = NULL;
    flux_status st = chw && row ? fx_buf_wrap(r->ops, row, (int64_t)t->w * t->c, "VAE observed row", &rb, r->err)
                                : fx_fail(r->err, FLUX_ERR_NOMEM, "out of memory (VAE observer)");
    const fx_op_gn g = gn ? vae_gn(gn, norm, 0) : (fx_op_gn){0}; /* the GroupNorm output itself (no SiLU) */
    for (int y = 0; !st && y < t->h; y++) {
        st = fx_op_rows_load(r->ops, t, y, y + 1, NULL, 1, fx_vec(rb, 0), r->err);
        if (!st && gn) st = fx_op_groupnorm_apply(r->ops, t->w, t->c, &g, fx_vec(rb, 0), fx_vec(rb, 0), r->err);
        for (int x = 0; !st && x < t->w; x++)
            for (int c = 0; c < t->c; c++) chw[c * hw + (int64_t)y * t->w + x] = row[(int64_t)x * t->c + c];
    }
    if (!st) r->ex.observer(r->ex.observer_user, name, chw, t->c, t->h, t->w);
    fx_buf_free(r->ops, rb);
    free(chw);
    free(row);
    return st;
}
