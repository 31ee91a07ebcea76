/*
 * ops_cpu.c — the CPU backend of ops.h: storage is host memory, every
 * operation is the simd/kernels.h function of that name on ops->kc.
 */
#include "ops_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Large buffers (activations of a run) as anonymous mappings: page-aligned,
 * zeroed lazily, eligible for huge pages. */
#define MAP_MIN_BYTES ((size_t)1 << 21)

static float *at(fx_view t) { return t.b ? t.b->host + t.off : NULL; }

static size_t buf_bytes(const fx_buf *b) { return (size_t)(b->n ? b->n : 1) * sizeof(float); }

static flux_status buf_alloc(fx_ops *ops, fx_buf *b, fx_err *err) {
    if (buf_bytes(b) >= MAP_MIN_BYTES) {
        void *p = mmap(NULL, buf_bytes(b), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        b->host = p == MAP_FAILED ? NULL : p;
#ifdef MADV_HUGEPAGE
        if (b->host) madvise(b->host, buf_bytes(b), MADV_HUGEPAGE);
#endif
    } else {
        b->host = calloc(1, buf_bytes(b));
    }
    if (!b->host)
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory: %s needs %.1f MB", b->what, (double)b->n * 4e-6);
    fx_mem_add(ops->mem, FX_MEM_ACTIVATIONS, (int64_t)buf_bytes(b));
    return FLUX_OK;
}

static void buf_release(fx_ops *ops, fx_buf *b) {
    if (!b->host) return;
    fx_mem_add(ops->mem, FX_MEM_ACTIVATIONS, -(int64_t)buf_bytes(b));
    if (buf_bytes(b) >= MAP_MIN_BYTES) munmap(b->host, buf_bytes(b));
    else free(b->host);
}

static flux_status write(fx_ops *ops, fx_buf *b, int64_t off, const float *src, int64_t n, fx_err *err) {
    (void)ops, (void)err;
    if (n) memcpy(b->host + off, src, (size_t)n * sizeof(float));
    return FLUX_OK;
}

static flux_status read(fx_ops *ops, const fx_buf *b, int64_t off, float *dst, int64_t n, fx_err *err) {
    (void)ops, (void)err;
    if (n) memcpy(dst, b->host + off, (size_t)n * sizeof(float));
    return FLUX_OK;
}

static flux_status copy(fx_ops *ops, int64_t rows, int64_t cols, fx_view src, fx_view dst, fx_err *err) {
    (void)ops, (void)err;
    for (int64_t r = 0; r < rows; r++)
        memmove(at(dst) + r * dst.ld, at(src) + r * src.ld, (size_t)cols * sizeof(float));
    return FLUX_OK;
}

static flux_status sync(fx_ops *ops, fx_err *err) {
    (void)ops, (void)err;
    return FLUX_OK;
}

static flux_status weight(fx_ops *ops, const fx_conv2d_geom *g, fx_opw *w, const char *name, fx_err *err) {
    (void)ops, (void)g, (void)w, (void)name, (void)err;
    return FLUX_OK; /* computed from the stored view */
}

static flux_status rope(fx_ops *ops, fx_oprope *r, fx_err *err) {
    (void)ops, (void)r, (void)err;
    return FLUX_OK;
}

static fx_epilogue host_epi(const fx_op_epi *e) {
    fx_epilogue h = {.mode = e->mode, .bias = at(e->bias), .gate = at(e->gate)};
    return h;
}

static flux_status linear(fx_ops *ops, int64_t m, fx_view x, const fx_opw *w, fx_view y, const fx_op_epi *epi,
                          fx_err *err) {
    (void)err;
    fx_epilogue e = epi ? host_epi(epi) : (fx_epilogue){0};
    if (w->i8) fx_linear_int8w(ops->kc, m, at(x), x.ld, &w->w, w->i8, at(y), y.ld, epi ? &e : NULL);
    else fx_linear(ops->kc, m, at(x), x.ld, &w->w, at(y), y.ld, epi ? &e : NULL);
    return FLUX_OK;
}

static flux_status attention(fx_ops *ops, const fx_op_attn *a, fx_err *err) {
    fx_attn_args h = {
        .sq = a->sq, .sk = a->sk, .hq = a->hq, .hkv = a->hkv, .d = a->d,
        .q = at(a->q), .ldq = a->q.ld, .k = at(a->k), .ldk = a->k.ld,
        .v = at(a->v), .ldv = a->v.ld, .o = at(a->o), .ldo = a->o.ld,
        .scale = a->scale, .causal = a->causal, .causal_offset = a->causal_offset,
        .key_mask = a->key_mask ? (const uint8_t *)a->key_mask->host : NULL,
    };
    return fx_attention(ops->kc, &h, err);
}

static flux_status qk_norm_rope(fx_ops *ops, fx_view x, int64_t rows, int heads, int head_dim, fx_view norm_w,
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
    fx_qk_norm_rope(ops->kc, at(x), x.ld, rows, heads, head_dim, at(norm_w), eps, rope ? &t : NULL);
    return FLUX_OK;
}

static flux_status rmsnorm(fx_ops *ops, int64_t rows, int64_t cols, fx_view x, fx_view w, float eps, fx_view y,
                           fx_err *err) {
    (void)err;
    fx_rmsnorm(ops->kc, rows, cols, at(x), x.ld, at(w), eps, at(y), y.ld);
    return FLUX_OK;
}

static flux_status layernorm_modulate(fx_ops *ops, int64_t rows, int64_t cols, fx_view x, fx_view shift,
                                      fx_view scale, float eps, fx_view y, fx_err *err) {
    (void)err;
    fx_layernorm_modulate(ops->kc, rows, cols, at(x), x.ld, at(shift), at(scale), eps, at(y), y.ld);
    return FLUX_OK;
}

static flux_status silu(fx_ops *ops, int64_t n, fx_view x, fx_err *err) {
    (void)err;
    fx_silu(ops->kc, n, at(x));
    return FLUX_OK;
}

static flux_status swiglu(fx_ops *ops, int64_t rows, int64_t cols, fx_view gate, fx_view up, fx_view out,
                          fx_err *err) {
    (void)err;
    fx_swiglu(ops->kc, rows, cols, at(gate), gate.ld, at(up), up.ld, at(out), out.ld);
    return FLUX_OK;
}

static flux_status gated_add(fx_ops *ops, int64_t rows, int64_t cols, fx_view y, fx_view gate, fx_view x,
                             fx_err *err) {
    (void)err;
    fx_gated_add(ops->kc, rows, cols, at(y), y.ld, at(gate), at(x), x.ld);
    return FLUX_OK;
}

static flux_status groupnorm(fx_ops *ops, int64_t pixels, int channels, int groups, fx_view x, fx_view gamma,
                             fx_view beta, float eps, int fuse_silu, fx_view y, fx_err *err) {
    (void)err;
    fx_groupnorm(ops->kc, pixels, channels, groups, at(x), at(gamma), at(beta), eps, fuse_silu, at(y));
    return FLUX_OK;
}

static flux_status conv2d(fx_ops *ops, const fx_conv2d_geom *g, fx_view x, const fx_opw *w, const fx_op_epi *epi,
                          fx_view y, fx_err *err) {
    (void)err;
    fx_epilogue e = epi ? host_epi(epi) : (fx_epilogue){0};
    fx_conv2d(ops->kc, g, at(x), &w->w, epi ? &e : NULL, at(y), 0, 0);
    return FLUX_OK;
}

const fx_ops_impl fx_ops_cpu_impl = {
    .buf_alloc = buf_alloc, .buf_release = buf_release, .write = write, .read = read, .copy = copy, .sync = sync,
    .weight = weight, .rope = rope, .linear = linear, .attention = attention, .qk_norm_rope = qk_norm_rope,
    .rmsnorm = rmsnorm, .layernorm_modulate = layernorm_modulate, .silu = silu, .swiglu = swiglu,
    .gated_add = gated_add, .groupnorm = groupnorm, .conv2d = conv2d,
};
