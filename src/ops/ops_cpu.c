/*
 * ops_cpu.c — the CPU backend of ops.h: storage is host memory, every
 * operation is the simd/kernels.h function of that name on the context's
 * kernels. A weight's state is its int8 form (kernels.h fx_int8w) when
 * fx_ops_weight_int8_form made one, else NULL (computed from the stored
 * view); a buffer's state is its float array.
 */
#include "ops_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct cpu_ctx {
    const fx_kctx *kc;
    fx_mem_stats *mem;          /* host allocations counted (fx_ops_opts.mem) */
} cpu_ctx;

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
    fx_int8w *i8 = w->state;
    if (!i8) return;
    fx_mem_add(c->mem, FX_MEM_WEIGHT_FORMS, -(int64_t)i8->bytes);
    fx_int8w_free(i8);
    w->state = NULL;
}

static int weight_int8_form(void *ctx, fx_opw *w) {
    cpu_ctx *c = ctx;
    if (w->state) return 1;
    if (!c->kc->int8 || !fx_int8w_wanted(w->w.dtype)) return 0;
    fx_int8w *i8 = fx_int8w_new(c->kc, &w->w);
    if (!i8) return 0;
    fx_mem_add(c->mem, FX_MEM_WEIGHT_FORMS, (int64_t)i8->bytes);
    w->state = i8;
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
    if (w->state) fx_linear_int8w(c->kc, m, at(x), x.ld, &w->w, w->state, at(y), y.ld, epi ? &e : NULL);
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

static flux_status open_cpu(const fx_ops_opts *o, const fx_kctx *kc, int unasked, void **ctx, fx_err *err) {
    (void)unasked;
    cpu_ctx *c = calloc(1, sizeof *c);
    if (!c) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (CPU backend)");
    c->kc = kc, c->mem = o->mem;
    *ctx = c;
    return FLUX_OK;
}

static void close_cpu(void *ctx) { free(ctx); }

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
};
