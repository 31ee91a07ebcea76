/*
 * vae_stream_exec.c — the host executor of the VAE network (vae_exec.h):
 * the storage plan of a decode or an encode, each layer of the network as
 * one strip-streamed conv (vae_stream.c), the mid attention tiled over the
 * same strips, observation and output.
 *
 * Storage plans. Level i keeps its tensors in a region of row slots
 * [x part | h part], pitch max(cin, 2·cout)·width (vae_plan_level).
 *  - Decoder (level i at h8·2^i × w8·2^i): the last (largest) level's region
 *    sits at the start of the arena, the level before it at the end, and so
 *    on alternately, so each upsample writes the next level from one end
 *    while it reads the previous one from the other. Where the two overlap
 *    (the last transition, when the arena is exactly the size of the largest
 *    level), the writes trail the reads: the arena is made just large enough
 *    for that (vae_stream_gap). The mid attention's Q, K, V (f32) sit on the
 *    other side of level 0. For the real VAE the arena is the largest level:
 *    256 channels at full resolution, i.e. 512 MiB at 1024² in bf16.
 *  - Encoder (level i at H/2^i × W/2^i): all at the start of the arena:
 *    each downsample writes the next (smaller) level over the rows of this
 *    one it has already read (checked by vae_stream_gap; a level that does
 *    not fit that way goes after the previous one). Q, K, V follow the last
 *    level. For the real VAE the arena is the first level: 2 × 128 channels
 *    at full resolution.
 * Slots: VAE_X is the x part of the current level's region, VAE_H its h
 * part; VAE_EDGE an f32 buffer of the run (the latent, channels-last, or
 * the encoder's moments), VAE_OUT the caller's planar output.
 * Everything is computed by the backend seam's ops (ops.h) on these host
 * buffers wrapped as backend buffers (fx_buf_wrap): the arena, the edge
 * buffer, the strip buffers.
 */
#include "vae_stream.h"

#include "vae_net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Storage plans                                                            */
/* ------------------------------------------------------------------------ */

static void plan_decoder(const vae_model *v, int h8, int w8, const fx_dtype *dt, int strip_pixels, vae_plan *p) {
    const vae_half *d = &v->dec;
    const int L = v->c.levels;
    int at_end[FX_VAE_MAX_LEVELS];
    size_t A = 0;
    memset(p, 0, sizeof *p);
    for (int i = 0; i < L; i++) {
        vae_plan_level(p, i, &d->level[i].res[0], dt[i], h8 << i, w8 << i);
        at_end[i] = (L - 1 - i) % 2;
        if (p->bytes[i] > A) A = p->bytes[i];
    }
    const int C0 = d->mid.res[0].cout;
    p->qkv_bytes = d->mid.has_attn ? vae_round64(3 * sizeof(float) * (size_t)h8 * (size_t)w8 * (size_t)C0) : 0;
    if (p->bytes[0] + p->qkv_bytes > A) A = p->bytes[0] + p->qkv_bytes;
    for (int i = 0; i + 1 < L; i++) {
        size_t need;
        if (!at_end[i]) { /* start → end: disjoint */
            need = p->bytes[i] + p->bytes[i + 1];
        } else { /* end → start: the writes may trail the reads */
            const vae_region *a = &p->lv[i], *b = &p->lv[i + 1];
            const vae_conv *up = &d->level[i].sample;
            const int64_t ea = dt[i] == FX_DTYPE_BF16 ? 2 : 4, eb = dt[i + 1] == FX_DTYPE_BF16 ? 2 : 4;
            fx_conv2d_geom g = {a->h, a->w, up->cin, up->cout, 3, 3, 1, 1, 1, 1, 1, 1};
            int64_t gap = vae_stream_gap(&g, strip_pixels, a->pitch * ea, b->pitch * eb, (int64_t)b->w * up->cout * eb);
            need = gap > 0 ? p->bytes[i] + vae_round64((size_t)gap) : p->bytes[i];
        }
        if (need > A) A = need;
    }
    p->arena = A;
    for (int i = 0; i < L; i++) p->off[i] = at_end[i] ? A - p->bytes[i] : 0;
    p->qkv_off = at_end[0] ? 0 : A - p->qkv_bytes;
}

static void plan_encoder(const vae_model *v, int height, int width, const fx_dtype *dt, int strip_pixels,
                         vae_plan *p) {
    const vae_half *e = &v->enc;
    const int L = v->c.levels;
    memset(p, 0, sizeof *p);
    for (int i = 0; i < L; i++) {
        vae_plan_level(p, i, &e->level[i].res[0], dt[i], height >> i, width >> i);
        const vae_region *l = &p->lv[i];
        const int64_t es = dt[i] == FX_DTYPE_BF16 ? 2 : 4;
        if (i > 0) { /* in place over level i − 1 when the writes trail the reads */
            const vae_region *a = &p->lv[i - 1];
            const vae_conv *down = &e->level[i - 1].sample;
            const int64_t ea = dt[i - 1] == FX_DTYPE_BF16 ? 2 : 4;
            fx_conv2d_geom g = {a->h, a->w, down->cin, down->cout, 3, 3, 2, 0, 0, 1, 1, 0};
            int64_t gap = vae_stream_gap(&g, strip_pixels, a->pitch * ea, l->pitch * es, (int64_t)l->w * down->cout * es);
            p->off[i] = gap <= 0 ? p->off[i - 1] : p->off[i - 1] + p->bytes[i - 1];
        }
        if (p->off[i] + p->bytes[i] > p->arena) p->arena = p->off[i] + p->bytes[i];
    }
    const int C = e->mid.res[0].cout;
    const vae_region *last = &p->lv[L - 1];
    p->qkv_bytes = e->mid.has_attn ? vae_round64(3 * sizeof(float) * (size_t)last->h * (size_t)last->w * (size_t)C) : 0;
    p->qkv_off = p->off[L - 1] + p->bytes[L - 1];
    if (p->qkv_off + p->qkv_bytes > p->arena) p->arena = p->qkv_off + p->qkv_bytes;
}

/* ------------------------------------------------------------------------ */
/* Slots                                                                    */
/* ------------------------------------------------------------------------ */

static void edge_free(vae_stream *r) {
    if (!r->edge_buf) return;
    fx_buf_free(r->ops, r->edge_fb);
    r->edge_fb = NULL;
    free(r->edge_buf);
    vae_account(r, -(ptrdiff_t)r->edge_bytes);
    r->edge_buf = NULL, r->edge_bytes = 0;
    memset(&r->edge, 0, sizeof r->edge);
}

/* VAE_EDGE as f32 channels-last [h, w, c], with room for a second such
 * tensor (a 1×1 layer's output). */
static flux_status edge_alloc(vae_stream *r, int h, int w, int c, const char *what) {
    edge_free(r);
    const size_t bytes = 2 * sizeof(float) * (size_t)h * (size_t)w * (size_t)c;
    if (!(r->edge_buf = malloc(bytes))) return fx_fail(r->err, FLUX_ERR_NOMEM, "out of memory (VAE %s)", what);
    r->edge_bytes = bytes;
    vae_account(r, (ptrdiff_t)bytes);
    vae_tensor t = {r->edge_buf, FX_DTYPE_F32, h, w, c, (int64_t)w * c, 0};
    r->edge = t;
    return fx_buf_wrap(r->ops, r->edge_buf, (int64_t)(bytes / sizeof(float)), "VAE edge", &r->edge_fb, r->err);
}

/* The tensor of slot with c channels at the current level. */
static vae_tensor slot(vae_stream *r, int s, int c) {
    const vae_region *lv = &r->plan.lv[r->level];
    if (s == VAE_X) return vae_region_part(lv, 0, c);
    if (s == VAE_H) return vae_region_part(lv, c, c);
    if (s == VAE_EDGE) return r->edge;
    vae_tensor out = {r->ex.out, FX_DTYPE_F32, lv->h, lv->w, c, 0, 1};
    return out;
}

/* The statistics kept for a slot: VAE_X's, VAE_H's (none for the others). */
static vae_stats *stats_of(vae_stream *r, int s) { return s == VAE_X ? &r->stats[0] : s == VAE_H ? &r->stats[1] : NULL; }

/* ------------------------------------------------------------------------ */
/* The executor                                                             */
/* ------------------------------------------------------------------------ */

/* A 1×1 layer VAE_EDGE → VAE_EDGE over the pixels, into the other half of the edge buffer. */
static flux_status edge_linear(vae_stream *r, const vae_conv *c) {
    vae_tensor *t = &r->edge;
    if (c->k != 1 || c->cin != t->c || c->cout != t->c)
        return fx_fail(r->err, FLUX_ERR_INTERNAL, "vae: a %dx%d layer on the latent side must be 1x1, %d channels",
                       c->k, c->k, t->c);
    const int64_t P = (int64_t)t->h * t->w;
    float *x = t->data, *y = x == r->edge_buf ? r->edge_buf + P * t->c : r->edge_buf;
    fx_opw w;
    fx_buf *bias = NULL;
    TRY(fx_ops_weight(r->ops, &c->w, "VAE 1x1", &w, r->err));
    flux_status st = vae_wrap_vector(r, c->bias, c->cout, &bias);
    const fx_op_epi e = {FX_EPI_STORE, bias ? fx_vec(bias, 0) : fx_none, fx_none};
    if (!st)
        st = fx_op_linear(r->ops, P, vae_view_at(r->edge_fb, r->edge_buf, x, t->c), &w,
                          vae_view_at(r->edge_fb, r->edge_buf, y, t->c), &e, r->err);
    fx_buf_free(r->ops, bias);
    fx_ops_weight_free(r->ops, &w);
    TRY(st);
    t->data = y;
    return FLUX_OK;
}

static flux_status s_conv(vae_exec *ex, const vae_layer *l) {
    vae_stream *r = (vae_stream *)ex;
    const vae_conv *c = l->conv;
    if (l->src == VAE_EDGE && l->dst == VAE_EDGE) return edge_linear(r, c);
    const vae_region *lv = &r->plan.lv[r->level];
    if (l->dst == VAE_EDGE) TRY(edge_alloc(r, lv->h, lv->w, c->cout, "moments"));
    vae_tensor src = slot(r, l->src, c->cin);
    vae_sconv op = {0};
    op.src = &src, op.conv = c;
    op.gn = l->norm ? stats_of(r, l->src) : NULL, op.norm = l->norm;
    op.stride = 1, op.pad_top = op.pad_left = op.pad_bottom = op.pad_right = 1;
    if (l->resample > 0) op.upsample = 1;
    if (l->resample < 0) /* Downsample2D: F.pad(x, (0, 1, 0, 1)) */
        op.stride = 2, op.pad_top = op.pad_left = 0;
    if (c->k == 1) op.pad_top = op.pad_left = op.pad_bottom = op.pad_right = 0;
    if (l->resample) {
        op.dst = vae_region_part(&r->plan.lv[r->level + 1], 0, c->cout);
        op.delay = 1; /* the next level may share memory with this one */
    } else {
        op.dst = slot(r, l->dst, c->cout);
    }
    op.dst_stats = stats_of(r, l->resample ? VAE_X : l->dst);
    op.residual = l->residual;
    if (l->shortcut) /* lands in row slots still holding unread input rows: one strip late */
        op.side = l->shortcut, op.side_dst = slot(r, VAE_X, l->shortcut->cout), op.delay = 1;
    if (op.dst_stats) vae_stats_init(op.dst_stats, c->cout, r->groups);
    TRY(vae_stream_conv(r, &op));
    if (op.dst_stats) vae_stats_finish(r, op.dst_stats);
    if (l->resample) r->level++;
    if (l->src == VAE_EDGE && !r->ex.encoder) edge_free(r); /* the latent is read */
    return FLUX_OK;
}

/* The mid attention's weights and wrapped biases (freed by attn_free). */
typedef struct attn_ops {
    fx_opw w[4];                 /* q, k, v, out */
    int n;                       /* registered */
    fx_buf *b[4];
} attn_ops;

static void attn_free(vae_stream *r, attn_ops *A) {
    for (int i = 0; i < A->n; i++) fx_ops_weight_free(r->ops, &A->w[i]);
    for (int i = 0; i < 4; i++) fx_buf_free(r->ops, A->b[i]);
}

static flux_status attention_strips(vae_stream *r, const vae_attn *a, attn_ops *A) {
    fx_ops *ops = r->ops;
    fx_err *err = r->err;
    const int C = a->channels;
    const vae_tensor x = slot(r, VAE_X, C);
    vae_stats *stats = &r->stats[0];
    const int64_t P = (int64_t)x.h * x.w;
    const fx_weight *hw[4] = {&a->q, &a->k, &a->v, &a->out};
    const float *hb[4] = {a->bq, a->bk, a->bv, a->bout};
    fx_op_epi epi[4];
    for (; A->n < 4; A->n++) TRY(fx_ops_weight(ops, hw[A->n], "VAE attention", &A->w[A->n], err));
    for (int i = 0; i < 4; i++) {
        TRY(vae_wrap_vector(r, hb[i], C, &A->b[i]));
        epi[i] = (fx_op_epi){FX_EPI_STORE, A->b[i] ? fx_vec(A->b[i], 0) : fx_none, fx_none};
    }
    /* q, k, v [P, C] in the arena */
    const int64_t q0 = (int64_t)(r->plan.qkv_off / sizeof(float));
    fx_view qkv[3];
    for (int i = 0; i < 3; i++) qkv[i] = (fx_view){r->arena_buf, q0 + i * P * C, C};
    int rows = r->strip_pixels / x.w > 0 ? r->strip_pixels / x.w : 1;
    float *t = vae_buf(r, 0, sizeof(float) * (size_t)rows * x.w * C);
    float *o = vae_buf(r, 1, sizeof(float) * (size_t)rows * x.w * C);
    if (!t || !o) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (VAE attention)");
    const fx_view tv = vae_view(r, 0, 0, C), ov = vae_view(r, 1, 0, C);
    const fx_op_gn gn = vae_gn(stats, &a->norm, 0);

    for (int y0 = 0; y0 < x.h; y0 += rows) {
        int y1 = y0 + rows < x.h ? y0 + rows : x.h;
        int64_t n = (int64_t)(y1 - y0) * x.w, p0 = (int64_t)y0 * x.w;
        TRY(fx_op_rows_load(ops, &x, y0, y1, NULL, 1, tv, err));
        TRY(fx_op_groupnorm_apply(ops, n, C, &gn, tv, tv, err));
        for (int i = 0; i < 3; i++) TRY(fx_op_linear(ops, n, tv, &A->w[i], fx_at(qkv[i], p0, 0), &epi[i], err));
    }
    fx_op_attn args = {0};
    args.sq = args.sk = P;
    args.hq = args.hkv = 1;
    args.d = C;
    args.q = qkv[0], args.k = qkv[1], args.v = qkv[2];
    args.o = qkv[0]; /* in place over q */
    args.scale = (float)(1.0 / sqrt((double)C));
    TRY(fx_op_attention(ops, &args, err));

    vae_stats_init(stats, C, r->groups);
    for (int y0 = 0; y0 < x.h; y0 += rows) {
        int y1 = y0 + rows < x.h ? y0 + rows : x.h;
        int64_t n = (int64_t)(y1 - y0) * x.w, p0 = (int64_t)y0 * x.w;
        TRY(fx_op_linear(ops, n, fx_at(qkv[0], p0, 0), &A->w[3], ov, &epi[3], err));
        TRY(fx_op_rows_load(ops, &x, y0, y1, NULL, 1, tv, err));
        TRY(fx_op_gated_add(ops, n, C, ov, fx_none, tv, err));
        TRY(vae_stats_add(r, stats, n, ov));
        TRY(fx_op_rows_store(ops, &x, y0, y1, ov, 0, 0, NULL, err));
    }
    vae_stats_finish(r, stats);
    return FLUX_OK;
}

/* x (VAE_X, C channels) += attention(GN(x)); the GroupNorm and Q, K, V
 * projections, then the output projection and the residual, strip by strip;
 * q, k, v (f32) in the arena. */
static flux_status s_attention(vae_exec *ex, const vae_attn *a) {
    vae_stream *r = (vae_stream *)ex;
    attn_ops A = {0};
    flux_status st = attention_strips(r, a, &A);
    attn_free(r, &A);
    return st;
}

static flux_status s_observe(vae_exec *ex, const char *name, int s, int channels, const vae_norm *norm) {
    vae_stream *r = (vae_stream *)ex;
    const vae_tensor t = slot(r, s, channels);
    return vae_stream_observe(r, name, &t, norm ? stats_of(r, s) : NULL, norm);
}

static flux_status s_output(vae_exec *ex, int s, int channels) {
    vae_stream *r = (vae_stream *)ex;
    const vae_tensor t = slot(r, s, channels);
    const int64_t P = (int64_t)t.h * t.w, M = t.pitch / t.w;
    const float *m = t.data;
    for (int c = 0; c < channels; c++)
        for (int64_t i = 0; i < P; i++) r->ex.out[c * P + i] = m[i * M + c];
    edge_free(r);
    return FLUX_OK;
}

static flux_status s_checkpoint(vae_exec *ex, int sub, int subtotal) {
    return vae_stream_checkpoint((vae_stream *)ex, sub, subtotal);
}

static const vae_exec_impl stream_impl = {
    .conv = s_conv, .attention = s_attention, .observe = s_observe, .output = s_output, .checkpoint = s_checkpoint,
};

flux_status vae_stream_run(vae_stream *r) {
    vae_exec *ex = &r->ex;
    const vae_model *v = ex->m;
    const int L = v->c.levels;
    fx_dtype dt[FX_VAE_MAX_LEVELS];
    ex->impl = &stream_impl;
    for (int i = 0; i < L; i++) dt[i] = vae_storage_dtype(r, ex->encoder ? 1 << i : 1 << (L - 1 - i));
    if (ex->encoder) plan_encoder(v, ex->in_h, ex->in_w, dt, r->strip_pixels, &r->plan);
    else plan_decoder(v, ex->in_h, ex->in_w, dt, r->strip_pixels, &r->plan);
    TRY(vae_arena_alloc(r, r->plan.arena));
    for (int i = 0; i < L; i++) r->plan.lv[i].base = r->arena + r->plan.off[i];
    r->level = 0;

    const int cin = ex->encoder ? v->enc.conv_in.cin : v->c.latent_channels;
    const vae_tensor in = {(void *)ex->in, FX_DTYPE_F32, ex->in_h, ex->in_w, cin, 0, 1};
    flux_status st = FLUX_OK;
    if (ex->encoder) { /* conv_in reads the planar image */
        r->edge = in;
    } else { /* the latent → channels-last f32 */
        st = edge_alloc(r, ex->in_h, ex->in_w, cin, "latent");
        if (!st) st = fx_op_rows_load(r->ops, &in, 0, ex->in_h, NULL, 1, fx_vec(r->edge_fb, 0), r->err);
    }
    if (!st) st = ex->encoder ? vae_net_encode(ex) : vae_net_decode(ex);
    edge_free(r);
    return st;
}
