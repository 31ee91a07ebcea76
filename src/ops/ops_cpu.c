/*
 * ops_cpu.c — the CPU backend of ops.h: storage is host memory, every
 * operation is the simd/kernels.h function of that name on the context's
 * kernels. A weight's state (cpu_weight) holds its int8 form (kernels.h
 * fx_int8w) when fx_ops_weight_int8_form made one and its packed conv form
 * when registered for fx_op_conv2d_rows; NULL: computed from the stored
 * view. A buffer's state is its float array.
 *
 * Host strips (ops.h): the row ops split rows over the threads, each row
 * running the kernels on one thread with that thread's own kernel context
 * (cpu_ctx.kc1), so they can run inside one parallel region; per-row
 * GroupNorm sums are added in row order (thread-count independent).
 */
#include "ops_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct cpu_ctx {
    const fx_kctx *kc;
    fx_mem_stats *mem;          /* host allocations counted (fx_ops_opts.mem) */
    fx_kctx *kc1;               /* [nkc1]: the kernels on one thread each (row ops), made on first use */
    int nkc1;
} cpu_ctx;

/* A weight's forms (fx_opw.state). */
typedef struct cpu_weight {
    fx_int8w *int8;             /* fx_ops_weight_int8_form, or NULL */
    void *packed;               /* fx_ops_conv_weight_rows: the packed conv weight, or NULL
                                   (counted as activations: held for one layer's strips) */
    size_t packed_bytes;
    fx_conv2d_geom g;           /* the geometry it was packed for */
} cpu_weight;

/* Large buffers (activations of a run) as anonymous mappings: page-aligned,
 * zeroed lazily, eligible for huge pages. */
#define MAP_MIN_BYTES ((size_t)1 << 21)

static float *at(fx_view t) { return t.b ? (float *)t.b->state + t.off : NULL; }

static const fx_kctx *kernels(const void *ctx) { return ((const cpu_ctx *)ctx)->kc; }

static size_t buf_bytes(const fx_buf *b) { return (size_t)(b->n ? b->n : 1) * sizeof(float); }

static flux_status buf_alloc(void *ctx, fx_buf *b, fx_err *err) {
    cpu_ctx *c = ctx;
    float *p = NULL;
    if (buf_bytes(b) >= MAP_MIN_BYTES) {
        void *m = mmap(NULL, buf_bytes(b), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        p = m == MAP_FAILED ? NULL : m;
#ifdef MADV_HUGEPAGE
        if (p) madvise(p, buf_bytes(b), MADV_HUGEPAGE);
#endif
    } else {
        p = calloc(1, buf_bytes(b));
    }
    if (!p) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory: %s needs %.1f MB", b->what, (double)b->n * 4e-6);
    b->state = p;
    fx_mem_add(c->mem, FX_MEM_ACTIVATIONS, (int64_t)buf_bytes(b));
    return FLUX_OK;
}

static void buf_free(void *ctx, fx_buf *b) {
    cpu_ctx *c = ctx;
    if (!b->state) return;
    fx_mem_add(c->mem, FX_MEM_ACTIVATIONS, -(int64_t)buf_bytes(b));
    if (buf_bytes(b) >= MAP_MIN_BYTES) munmap(b->state, buf_bytes(b));
    else free(b->state);
    b->state = NULL;
}

static flux_status write(void *ctx, fx_buf *b, int64_t off, const float *src, int64_t n, fx_err *err) {
    (void)ctx, (void)err;
    if (n) memcpy((float *)b->state + off, src, (size_t)n * sizeof(float));
    return FLUX_OK;
}

static flux_status read(void *ctx, const fx_buf *b, int64_t off, float *dst, int64_t n, fx_err *err) {
    (void)ctx, (void)err;
    if (n) memcpy(dst, (const float *)b->state + off, (size_t)n * sizeof(float));
    return FLUX_OK;
}

static flux_status copy(void *ctx, int64_t rows, int64_t cols, fx_view src, fx_view dst, fx_err *err) {
    (void)ctx, (void)err;
    for (int64_t r = 0; r < rows; r++)
        memmove(at(dst) + r * dst.ld, at(src) + r * src.ld, (size_t)cols * sizeof(float));
    return FLUX_OK;
}

static flux_status sync(void *ctx, fx_err *err) {
    (void)ctx, (void)err;
    return FLUX_OK;
}

static flux_status weight_prepare(void *ctx, const fx_conv2d_geom *g, fx_opw *w, const char *name, fx_err *err) {
    (void)ctx, (void)g, (void)w, (void)name, (void)err;
    return FLUX_OK; /* computed from the stored view */
}

static void weight_release(void *ctx, fx_opw *w) {
    cpu_ctx *c = ctx;
    cpu_weight *cw = w->state;
    if (!cw) return;
    if (cw->int8) {
        fx_mem_add(c->mem, FX_MEM_WEIGHT_FORMS, -(int64_t)cw->int8->bytes);
        fx_int8w_free(cw->int8);
    }
    if (cw->packed) {
        fx_mem_add(c->mem, FX_MEM_ACTIVATIONS, -(int64_t)cw->packed_bytes);
        free(cw->packed);
    }
    free(cw);
    w->state = NULL;
}

static int weight_int8_form(void *ctx, fx_opw *w) {
    cpu_ctx *c = ctx;
    cpu_weight *cw = w->state;
    if (cw && cw->int8) return 1;
    if (!fx_int8w_wanted(c->kc, w->w.dtype)) return 0;
    if (!cw && !(cw = calloc(1, sizeof *cw))) return 0;
    w->state = cw;
    fx_int8w *i8 = fx_int8w_new(c->kc, &w->w);
    if (!i8) {
        if (!cw->packed) free(cw), w->state = NULL;
        return 0;
    }
    fx_mem_add(c->mem, FX_MEM_WEIGHT_FORMS, (int64_t)i8->bytes);
    cw->int8 = i8;
    return 1;
}

static flux_status rope_prepare(void *ctx, fx_oprope *r, fx_err *err) {
    (void)ctx, (void)r, (void)err;
    return FLUX_OK; /* rotated from the host table */
}

static void rope_release(void *ctx, fx_oprope *r) { (void)ctx, (void)r; }

static fx_epilogue host_epi(const fx_op_epi *e) {
    fx_epilogue h = {.mode = e->mode, .bias = at(e->bias), .gate = at(e->gate)};
    return h;
}

static flux_status linear(void *ctx, int64_t m, fx_view x, const fx_opw *w, fx_view y, const fx_op_epi *epi,
                          fx_err *err) {
    (void)err;
    const cpu_ctx *c = ctx;
    fx_epilogue e = epi ? host_epi(epi) : (fx_epilogue){0};
    const cpu_weight *cw = w->state;
    if (cw && cw->int8) fx_linear_int8w(c->kc, m, at(x), x.ld, &w->w, cw->int8, at(y), y.ld, epi ? &e : NULL);
    else fx_linear(c->kc, m, at(x), x.ld, &w->w, at(y), y.ld, epi ? &e : NULL);
    return FLUX_OK;
}

static flux_status attention(void *ctx, const fx_op_attn *a, fx_err *err) {
    fx_attn_args h = {
        .sq = a->sq, .sk = a->sk, .hq = a->hq, .hkv = a->hkv, .d = a->d,
        .q = at(a->q), .ldq = a->q.ld, .k = at(a->k), .ldk = a->k.ld,
        .v = at(a->v), .ldv = a->v.ld, .o = at(a->o), .ldo = a->o.ld,
        .scale = a->scale, .causal = a->causal, .causal_offset = a->causal_offset,
        .key_mask = a->key_mask ? (const uint8_t *)a->key_mask->state : NULL,
    };
    return fx_attention(kernels(ctx), &h, err);
}

static flux_status qk_norm_rope(void *ctx, fx_view x, int64_t rows, int heads, int head_dim, fx_view norm_w,
                                float eps, const fx_oprope *rope, int64_t row0, fx_err *err) {
    (void)err;
    fx_rope_table t;
    if (rope) { /* rows [row0, row0 + rows) of the table */
        t = rope->t;
        int64_t ppr = t.rot_dim / 2;
        t.cos += row0 * ppr;
        t.sin += row0 * ppr;
        t.seq = rows;
    }
    fx_qk_norm_rope(kernels(ctx), at(x), x.ld, rows, heads, head_dim, at(norm_w), eps, rope ? &t : NULL);
    return FLUX_OK;
}

static flux_status rmsnorm(void *ctx, int64_t rows, int64_t cols, fx_view x, fx_view w, float eps, fx_view y,
                           fx_err *err) {
    (void)err;
    fx_rmsnorm(kernels(ctx), rows, cols, at(x), x.ld, at(w), eps, at(y), y.ld);
    return FLUX_OK;
}

static flux_status layernorm_modulate(void *ctx, int64_t rows, int64_t cols, fx_view x, fx_view shift,
                                      fx_view scale, float eps, fx_view y, fx_err *err) {
    (void)err;
    fx_layernorm_modulate(kernels(ctx), rows, cols, at(x), x.ld, at(shift), at(scale), eps, at(y), y.ld);
    return FLUX_OK;
}

static flux_status silu(void *ctx, int64_t n, fx_view x, fx_err *err) {
    (void)err;
    fx_silu(kernels(ctx), n, at(x));
    return FLUX_OK;
}

static flux_status swiglu(void *ctx, int64_t rows, int64_t cols, fx_view gate, fx_view up, fx_view out,
                          fx_err *err) {
    (void)err;
    fx_swiglu(kernels(ctx), rows, cols, at(gate), gate.ld, at(up), up.ld, at(out), out.ld);
    return FLUX_OK;
}

static flux_status gated_add(void *ctx, int64_t rows, int64_t cols, fx_view y, fx_view gate, fx_view x,
                             fx_err *err) {
    (void)err;
    fx_gated_add(kernels(ctx), rows, cols, at(y), y.ld, at(gate), at(x), x.ld);
    return FLUX_OK;
}

static flux_status groupnorm(void *ctx, int64_t pixels, int channels, int groups, fx_view x, fx_view gamma,
                             fx_view beta, float eps, int fuse_silu, fx_view y, fx_err *err) {
    (void)err;
    fx_groupnorm(kernels(ctx), pixels, channels, groups, at(x), at(gamma), at(beta), eps, fuse_silu, at(y));
    return FLUX_OK;
}

static flux_status conv2d(void *ctx, const fx_conv2d_geom *g, fx_view x, const fx_opw *w, const fx_op_epi *epi,
                          fx_view y, fx_err *err) {
    (void)err;
    fx_epilogue e = epi ? host_epi(epi) : (fx_epilogue){0};
    fx_conv2d(kernels(ctx), g, at(x), &w->w, epi ? &e : NULL, at(y), 0, 0);
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Host strips                                                              */
/* ------------------------------------------------------------------------ */

static flux_status wrap(void *ctx, fx_buf *b, void *host, fx_err *err) {
    (void)ctx, (void)err;
    b->state = host;
    return FLUX_OK;
}

/* The per-thread kernel contexts for kc's thread count. */
static flux_status row_kernels(cpu_ctx *c, fx_err *err) {
    const int n = c->kc->threads > 0 ? c->kc->threads : 1;
    if (c->nkc1 == n) return FLUX_OK;
    for (int t = 0; t < c->nkc1; t++) fx_scratch_free(c->kc1[t].scratch);
    free(c->kc1);
    c->nkc1 = 0;
    if (!(c->kc1 = calloc((size_t)n, sizeof *c->kc1))) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (row kernels)");
    for (; c->nkc1 < n; c->nkc1++) {
        fx_scratch *sc = fx_scratch_new(1);
        if (!sc) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (row kernels)");
        fx_kctx_init(&c->kc1[c->nkc1], c->kc->k, 1, sc);
    }
    return FLUX_OK;
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
static int row_threads(const cpu_ctx *c, int rows, int64_t n) {
    return rows > 1 && (int64_t)rows * n >= 16384 ? (c->nkc1 < rows ? c->nkc1 : rows) : 1;
}

static size_t es_of(const fx_rows *t) { return t->dtype == FX_DTYPE_BF16 ? 2 : 4; }

static char *row_ptr(const fx_rows *t, int y) { return (char *)t->data + (size_t)y * (size_t)t->pitch * es_of(t); }

/* One row of t as dense f32 [w, c] / the reverse, on one thread (kc1). */
static void load_row(const fx_kctx *kc1, const fx_rows *t, int y, float *dst) {
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

static void store_row(const fx_kctx *kc1, const fx_rows *t, int y, const float *src) {
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

static flux_status rows_load(void *ctx, const fx_rows *t, int y0, int y1, const fx_op_gn *gn, int load, fx_view dst,
                             fx_err *err) {
    cpu_ctx *c = ctx;
    TRY(row_kernels(c, err));
    const int64_t n = (int64_t)t->w * t->c;
    float *d = at(dst);
    const int nt = row_threads(c, y1 - y0, n);
    (void)nt; /* unused without OpenMP */
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int y = y0; y < y1; y++) {
        const fx_kctx *kc1 = &c->kc1[tid()];
        float *row = d + (int64_t)(y - y0) * n;
        if (load) load_row(kc1, t, y, row);
        if (gn) fx_groupnorm_apply(kc1, t->w, t->c, gn->groups, row, gn->mean, gn->rstd, gn->gamma, gn->beta, gn->silu, row);
    }
    return FLUX_OK;
}

static flux_status rows_store(void *ctx, const fx_rows *t, int y0, int y1, fx_view src, int residual, int groups,
                              double *sums, fx_err *err) {
    cpu_ctx *c = ctx;
    TRY(row_kernels(c, err));
    const int rows = y1 - y0;
    const int64_t n = (int64_t)t->w * t->c;
    const size_t acc_bytes = groups ? sizeof(double) * 2 * (size_t)groups * (size_t)rows : 0;
    const size_t tmp_bytes = residual ? sizeof(float) * (size_t)n * (size_t)c->nkc1 : 0;
    double *acc = acc_bytes ? malloc(acc_bytes) : NULL; /* [rows][groups][2] */
    float *tmp = tmp_bytes ? malloc(tmp_bytes) : NULL;  /* [threads][n]: the residual row */
    if ((acc_bytes && !acc) || (tmp_bytes && !tmp)) {
        free(acc), free(tmp);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (rows_store)");
    }
    fx_mem_add(c->mem, FX_MEM_ACTIVATIONS, (int64_t)(acc_bytes + tmp_bytes));
    float *s = at(src);
    const int nt = row_threads(c, rows, n);
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int i = 0; i < rows; i++) {
        const int th = tid();
        const fx_kctx *kc1 = &c->kc1[th];
        float *row = s + (int64_t)i * n;
        if (residual) {
            float *res = tmp + (int64_t)th * n;
            load_row(kc1, t, y0 + i, res);
            fx_gated_add(kc1, 1, n, row, n, NULL, res, n);
        }
        if (groups) {
            double *a = acc + 2 * (size_t)groups * (size_t)i;
            memset(a, 0, sizeof(double) * 2 * (size_t)groups);
            fx_groupnorm_sums(kc1, t->w, t->c, groups, row, a);
        }
        store_row(kc1, t, y0 + i, row);
    }
    if (groups)
        for (int i = 0; i < rows; i++)
            for (int g = 0; g < 2 * groups; g++) sums[g] += acc[2 * (size_t)groups * (size_t)i + g];
    fx_mem_add(c->mem, FX_MEM_ACTIVATIONS, -(int64_t)(acc_bytes + tmp_bytes));
    free(acc), free(tmp);
    return FLUX_OK;
}

static flux_status groupnorm_sums(void *ctx, int64_t pixels, int channels, int groups, fx_view x, double *sums,
                                  fx_err *err) {
    (void)err;
    fx_groupnorm_sums(kernels(ctx), pixels, channels, groups, at(x), sums);
    return FLUX_OK;
}

static flux_status groupnorm_apply(void *ctx, int64_t pixels, int channels, const fx_op_gn *gn, fx_view x, fx_view y,
                                   fx_err *err) {
    (void)err;
    fx_groupnorm_apply(kernels(ctx), pixels, channels, gn->groups, at(x), gn->mean, gn->rstd, gn->gamma, gn->beta,
                       gn->silu, at(y));
    return FLUX_OK;
}

static flux_status weight_rows_prepare(void *ctx, const fx_conv2d_geom *g, fx_opw *w, const char *name, fx_err *err) {
    cpu_ctx *c = ctx;
    const size_t pb = fx_conv2d_packed_bytes(c->kc, g, w->w.dtype);
    if (!pb) return fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s: no packed conv for its dtype", name ? name : "conv weight");
    cpu_weight *cw = calloc(1, sizeof *cw);
    const size_t bytes = (pb + 63) & ~(size_t)63;
    void *packed = cw ? aligned_alloc(64, bytes) : NULL;
    if (!packed) {
        free(cw);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (%s packed, %zu bytes)", name ? name : "conv weight", pb);
    }
    if (fx_conv2d_pack(c->kc, g, &w->w, packed)) {
        free(packed), free(cw);
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: cannot pack a %dx%d conv weight", name ? name : "conv weight",
                       g->cout, g->cin);
    }
    cw->packed = packed, cw->packed_bytes = bytes, cw->g = *g;
    fx_mem_add(c->mem, FX_MEM_ACTIVATIONS, (int64_t)bytes); /* one layer's working copy, not a resident form */
    w->state = cw;
    return FLUX_OK;
}

static flux_status conv2d_rows(void *ctx, const fx_conv2d_geom *g, fx_view x, int x_row0, int x_rows,
                               const fx_opw *w, const fx_op_epi *epi, fx_view y, int row0, int row1, fx_err *err) {
    const cpu_weight *cw = w->state;
    if (!cw || !cw->packed || cw->g.cin != g->cin || cw->g.cout != g->cout || cw->g.kh != g->kh || cw->g.kw != g->kw)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "conv2d_rows: the weight was not registered for %dx%d rows",
                       g->kh, g->kw);
    fx_epilogue e = epi ? host_epi(epi) : (fx_epilogue){0};
    if (fx_conv2d_packed(kernels(ctx), g, at(x), x_row0, x_rows, cw->packed, epi ? &e : NULL, at(y), row0, row1))
        return fx_fail(err, FLUX_ERR_INTERNAL, "conv2d_rows: rows %d..%d failed", row0, row1 - 1);
    return FLUX_OK;
}

static flux_status open_cpu(const fx_ops_opts *o, const fx_kctx *kc, int unasked, void **ctx, fx_err *err) {
    (void)unasked;
    cpu_ctx *c = calloc(1, sizeof *c);
    if (!c) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (CPU backend)");
    c->kc = kc, c->mem = o->mem;
    *ctx = c;
    return FLUX_OK;
}

static void close_cpu(void *ctx) {
    cpu_ctx *c = ctx;
    for (int t = 0; t < c->nkc1; t++) fx_scratch_free(c->kc1[t].scratch);
    free(c->kc1);
    free(c);
}

static const char *describe(const void *ctx) {
    (void)ctx;
    return "cpu";
}

const fx_backend fx_backend_cpu = {
    .name = "cpu", .title = "the CPU", .host_memory = 1,
    .open = open_cpu, .close = close_cpu, .describe = describe,
    .buf_alloc = buf_alloc, .buf_free = buf_free, .write = write, .read = read, .copy = copy, .sync = sync,
    .weight_prepare = weight_prepare, .weight_release = weight_release, .weight_int8_form = weight_int8_form,
    .rope_prepare = rope_prepare, .rope_release = rope_release,
    .linear = linear, .attention = attention, .qk_norm_rope = qk_norm_rope, .rmsnorm = rmsnorm,
    .layernorm_modulate = layernorm_modulate, .silu = silu, .swiglu = swiglu, .gated_add = gated_add,
    .groupnorm = groupnorm, .conv2d = conv2d,
    .wrap = wrap, .rows_load = rows_load, .rows_store = rows_store, .groupnorm_sums = groupnorm_sums,
    .groupnorm_apply = groupnorm_apply, .weight_rows_prepare = weight_rows_prepare, .conv2d_rows = conv2d_rows,
};
