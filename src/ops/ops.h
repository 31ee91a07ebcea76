/*
 * ops.h — the backend seam: the operations the model stages call, on
 * tensors that live where the backend computes (host memory for the CPU,
 * device buffers for Vulkan).
 *
 * Model code (src/text, src/dit, src/vae) calls only these fx_op_* functions
 * and never learns which backend runs them. A backend is a table of
 * functions and a context of its own (ops_internal.h: struct fx_backend),
 * chosen by name from a list in priority order (ops.c): the Vulkan
 * backend (ops_vulkan.c + src/vulkan, VULKAN=1; without it ops_novk.c says
 * "built without Vulkan") records dispatches, the CPU backend (ops_cpu.c)
 * forwards to simd/kernels.h. Buffers, weights and RoPE tables carry the
 * backend's state as an opaque pointer only that backend reads and frees.
 *
 * Execution model
 *  - Tensors are f32 row-major (fx_view = buffer + offset + leading
 *    dimension, as kernels.h). fx_buf_write / fx_buf_read are the only ways
 *    in and out; on Vulkan every op is recorded and runs at the next read,
 *    write or fx_ops_sync (one submit per batch, barriers only on hazards).
 *  - Weights are registered once (fx_ops_weight): the CPU backend computes
 *    from the stored view (or its int8 form), Vulkan uploads it once as
 *    stored (bf16 as packed pairs).
 *  - Every op returns a flux_status with the message in err (the CPU ops
 *    only fail on bad arguments; Vulkan also on device loss / memory).
 */
#ifndef FX_OPS_H
#define FX_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "simd/kernels.h"
#include "src/base/log.h"
#include "src/base/mem_stats.h"

typedef struct fx_ops fx_ops;   /* one backend instance, owned by the context */
typedef struct fx_buf fx_buf;   /* f32 storage on the backend */

typedef struct fx_ops_opts {
    const char *backend;        /* a backend's name ("vulkan", "cpu"); NULL or "auto": the first of
                                   the list that opens unasked (Vulkan: a GPU, never a CPU device) */
    int device;                 /* device index of a backend with devices (Vulkan), -1 = choose */
    int validation;             /* the device's validation layer (Vulkan; tests) */
    uint64_t max_binding_bytes; /* 0 = device limit (tests force windows) */
    uint64_t weight_budget;     /* device bytes for weights; 0 = 85% of the device's memory;
                                   weights beyond it are uploaded at each use */
    const fx_logger *log;       /* -v lines */
    fx_mem_stats *mem;          /* host memory the backend allocates is counted here (NULL: not counted) */
} fx_ops_opts;

/* The backend o asks for, with kernels kc (kept by pointer; the CPU ops run
 * on it, and so does anything the device path leaves on the host). auto
 * falls back to the next backend of the list with one -v line; vulkan
 * without a device is FLUX_ERR_UNSUPPORTED with the reason, an unknown name
 * FLUX_ERR_INVALID_ARG. */
flux_status fx_ops_open(const fx_ops_opts *o, const fx_kctx *kc, fx_ops **out, fx_err *err);
void fx_ops_close(fx_ops *ops);
/* The backend's name in the list ("cpu", "vulkan"). */
const char *fx_ops_backend(const fx_ops *ops);
/* 1 when buffers are host memory (the CPU backend): stages may then stream
 * through the host strips at the end of this header (the VAE's strips). */
int fx_ops_on_host(const fx_ops *ops);
/* "cpu" or "vulkan: <device name>, driver <driver>". */
const char *fx_ops_name(const fx_ops *ops);
/* Validation-layer errors the device reported so far (and the first);
 * 0 on the CPU. */
int fx_ops_device_errors(const fx_ops *ops, const char **first);
/* Test hook: the device's next submit fails as a lost device does (no-op on the CPU). */
void fx_ops_inject_device_lost(fx_ops *ops);
/* The kernels of the CPU side (host-only work next to the device). */
const fx_kctx *fx_ops_kctx(const fx_ops *ops);

/* The devices of the backends that have them (Vulkan; FLUX_ERR_UNSUPPORTED:
 * built without Vulkan, no loader). */
typedef struct fx_device_desc {
    int index, usable;
    char name[256], type[32], driver[256], why_not[160];
    uint64_t memory;
} fx_device_desc;
flux_status fx_ops_list_devices(fx_device_desc *out, int max, int *count, fx_err *err);

/* ------------------------------------------------------------------------ */
/* Storage                                                                  */
/* ------------------------------------------------------------------------ */

flux_status fx_buf_new(fx_ops *ops, int64_t floats, const char *what, fx_buf **out, fx_err *err);
void fx_buf_free(fx_ops *ops, fx_buf *b);
int64_t fx_buf_floats(const fx_buf *b);
/* Host ↔ backend copies of n floats at float offset off. */
flux_status fx_buf_write(fx_ops *ops, fx_buf *b, int64_t off, const float *src, int64_t n, fx_err *err);
flux_status fx_buf_read(fx_ops *ops, const fx_buf *b, int64_t off, float *dst, int64_t n, fx_err *err);
/* Backend-side copy of rows [rows, cols] between views (recorded). */
typedef struct fx_view {
    fx_buf *b;
    int64_t off, ld;            /* element (r, c) at float off + r·ld + c */
} fx_view;
flux_status fx_op_copy(fx_ops *ops, int64_t rows, int64_t cols, fx_view src, fx_view dst, fx_err *err);
/* Run everything recorded and wait. */
flux_status fx_ops_sync(fx_ops *ops, fx_err *err);

/* A view: rows from row r0 on, columns from c0 on, of t. */
static inline fx_view fx_at(fx_view t, int64_t r0, int64_t c0) {
    t.off += r0 * t.ld + c0;
    return t;
}
/* A contiguous vector of b at float off. */
static inline fx_view fx_vec(fx_buf *b, int64_t off) {
    fx_view t = {b, off, 0};
    return t;
}
static const fx_view fx_none = {0, 0, 0};

/* A linear weight [n, k] (or a conv weight) on the backend. */
typedef struct fx_opw {
    fx_weight w;                /* the stored view (adapter terms in w.delta) */
    void *state;                /* the backend's own form of it (a device copy, an int8
                                   form, a packed conv), owned and read by that backend only */
} fx_opw;
/* Register w (name for errors); the host data must outlive it (the CPU
 * computes from it; a device streams from it what exceeds its budget). */
flux_status fx_ops_weight(fx_ops *ops, const fx_weight *w, const char *name, fx_opw *out, fx_err *err);
/* A conv weight stored [cout, cin, kh, kw]. */
flux_status fx_ops_conv_weight(fx_ops *ops, const fx_conv2d_geom *g, const fx_weight *w, const char *name,
                               fx_opw *out, fx_err *err);
void fx_ops_weight_free(fx_ops *ops, fx_opw *w);
/* --precision int8 on the CPU: give registered block-typed w its int8 form
 * (kernels.h fx_int8w, made now on the context's threads) when its type
 * wants one (fx_int8w_wanted); linear then computes from the form and
 * never reads w's blocks again, so the caller may release their mapped
 * pages (a fallback that needs them reads them back from the file).
 * Returns 1 when w has the form; 0 when not (a backend without int8 forms,
 * the mode off, the type, or no memory: w runs from its blocks as before).
 * Freed by fx_ops_weight_free. */
int fx_ops_weight_int8_form(fx_ops *ops, fx_opw *w);
/* Set w's adapter terms (w->w.delta, kernels.h fx_delta; NULL = none). A
 * backend that keeps the terms' factors (Vulkan: resident on the device)
 * keeps those of the terms still attached (same factors, any scale: the
 * scale is never stored there) and drops the others now, while their host
 * data still exists. Terms must change only through here. */
void fx_ops_weight_set_terms(fx_ops *ops, fx_opw *w, const fx_delta *terms);
/* n host floats as a backend vector (norm weights, biases): a new buffer. */
flux_status fx_ops_vector(fx_ops *ops, const float *host, int64_t n, const char *name, fx_buf **out, fx_err *err);

/* n bytes (a key mask: 0 = excluded) as a backend buffer. */
flux_status fx_ops_mask(fx_ops *ops, const uint8_t *mask, int64_t n, fx_buf **out, fx_err *err);

/* A RoPE table on the backend. */
typedef struct fx_oprope {
    fx_rope_table t;            /* the host table (not owned) */
    void *state;                /* the backend's copy (Vulkan), owned by that backend */
} fx_oprope;
flux_status fx_ops_rope(fx_ops *ops, const fx_rope_table *t, fx_oprope *out, fx_err *err);
void fx_ops_rope_free(fx_ops *ops, fx_oprope *r);

/* ------------------------------------------------------------------------ */
/* Operations (semantics as the kernels.h function of that name)            */
/* ------------------------------------------------------------------------ */

typedef struct fx_op_epi {
    fx_epilogue_mode mode;
    fx_view bias, gate;       /* vectors [n]; fx_none = absent */
} fx_op_epi;

/* y[m, n] (op)= x[m, k] · Wᵀ (+ bias); epi NULL = store. */
flux_status fx_op_linear(fx_ops *ops, int64_t m, fx_view x, const fx_opw *w, fx_view y,
                         const fx_op_epi *epi, fx_err *err);

typedef struct fx_op_attn {
    int64_t sq, sk;
    int hq, hkv, d;
    fx_view q, k, v, o;
    float scale;
    int causal;
    int64_t causal_offset;
    fx_buf *key_mask;           /* [sk] bytes from fx_ops_mask (0 = padding key); NULL = all keys */
} fx_op_attn;
flux_status fx_op_attention(fx_ops *ops, const fx_op_attn *a, fx_err *err);

/* Per-head RMSNorm (norm_w fx_none = none) and RoPE with table rows
 * rope_row0 .. rope_row0 + rows (rope NULL = none), in place. */
flux_status fx_op_qk_norm_rope(fx_ops *ops, fx_view x, int64_t rows, int heads, int head_dim, fx_view norm_w,
                               float eps, const fx_oprope *rope, int64_t rope_row0, fx_err *err);
flux_status fx_op_rmsnorm(fx_ops *ops, int64_t rows, int64_t cols, fx_view x, fx_view w, float eps,
                          fx_view y, fx_err *err);
flux_status fx_op_layernorm_modulate(fx_ops *ops, int64_t rows, int64_t cols, fx_view x, fx_view shift,
                                     fx_view scale, float eps, fx_view y, fx_err *err);
flux_status fx_op_silu(fx_ops *ops, int64_t n, fx_view x, fx_err *err);
flux_status fx_op_swiglu(fx_ops *ops, int64_t rows, int64_t cols, fx_view gate, fx_view up, fx_view out,
                         fx_err *err);
flux_status fx_op_gated_add(fx_ops *ops, int64_t rows, int64_t cols, fx_view y, fx_view gate, fx_view x,
                            fx_err *err);
flux_status fx_op_groupnorm(fx_ops *ops, int64_t pixels, int channels, int groups, fx_view x, fx_view gamma,
                            fx_view beta, float eps, int fuse_silu, fx_view y, fx_err *err);
/* x [h, w, cin] → y [ho, wo, cout], w from fx_ops_conv_weight. */
flux_status fx_op_conv2d(fx_ops *ops, const fx_conv2d_geom *g, fx_view x, const fx_opw *w, const fx_op_epi *epi,
                         fx_view y, fx_err *err);

/* ------------------------------------------------------------------------ */
/* Host strips: what a stage streaming strip by strip through host memory   */
/* needs (the VAE's strip executor). Only backends whose buffers are host   */
/* memory (fx_ops_on_host) have them; the others return                     */
/* FLUX_ERR_UNSUPPORTED, and the stage runs on whole tensors instead.       */
/* ------------------------------------------------------------------------ */

/* floats of host memory as a buffer (not owned and not counted: fx_buf_free
 * forgets it; the memory must outlive the buffer). */
flux_status fx_buf_wrap(fx_ops *ops, void *host, int64_t floats, const char *what, fx_buf **out, fx_err *err);

/* A stored host tensor [h, w, c]: element (y, x, ch) at data + es·(y·pitch +
 * x·c + ch), es the size of dtype (F32 or BF16: rows kept in bf16 to halve
 * their memory), or planar [c, h, w] f32 (channel-major inputs, outputs). */
typedef struct fx_rows {
    void *data;
    fx_dtype dtype;
    int h, w, c;
    int64_t pitch;              /* elements from one row to the next */
    int planar;
} fx_rows;

/* GroupNorm with statistics known beforehand (host arrays). */
typedef struct fx_op_gn {
    int groups;
    const float *mean, *rstd;   /* [groups] */
    const float *gamma, *beta;  /* [channels] */
    int silu;                   /* SiLU after the affine */
} fx_op_gn;

/* Rows [y0, y1) of t as dense f32 [y1 − y0, w·c] into dst (load 0: dst
 * holds them already), then gn applied in place (NULL: none). Each row runs
 * on one thread. */
flux_status fx_op_rows_load(fx_ops *ops, const fx_rows *t, int y0, int y1, const fx_op_gn *gn, int load, fx_view dst,
                            fx_err *err);
/* Dense rows src [y1 − y0, w·c] into rows [y0, y1) of t (converted to its
 * dtype). residual: t's rows are added to src first (src keeps the sum).
 * sums (groups > 0): each row's GroupNorm sums [groups][Σx, Σx²] (of the f32
 * rows, after the residual), added to sums in row order (the same for any
 * thread count). */
flux_status fx_op_rows_store(fx_ops *ops, const fx_rows *t, int y0, int y1, fx_view src, int residual, int groups,
                             double *sums, fx_err *err);

/* GroupNorm in pieces (kernels.h fx_groupnorm_sums / _finish / _apply):
 * add the sums of x [pixels, channels] to sums [groups][2]; turn sums over
 * `pixels` pixels into mean/rstd (host arithmetic, any backend); y = gn(x). */
flux_status fx_op_groupnorm_sums(fx_ops *ops, int64_t pixels, int channels, int groups, fx_view x, double *sums,
                                 fx_err *err);
void fx_ops_groupnorm_finish(int64_t pixels, int channels, int groups, const double *sums, float eps, float *mean,
                             float *rstd);
flux_status fx_op_groupnorm_apply(fx_ops *ops, int64_t pixels, int channels, const fx_op_gn *gn, fx_view x, fx_view y,
                                  fx_err *err);

/* A conv weight prepared for fx_op_conv2d_rows (the CPU packs it here, once
 * per registration; fx_ops_weight_free frees the packed copy). */
flux_status fx_ops_conv_weight_rows(fx_ops *ops, const fx_conv2d_geom *g, const fx_weight *w, const char *name,
                                    fx_opw *out, fx_err *err);
/* Output rows [row0, row1) of conv g into y [row1 − row0, wo, cout] from
 * input rows [x_row0, x_row0 + x_rows) in x [x_rows, w, cin] (they must
 * cover kernels.h fx_conv2d_input_rows): bit-identical to fx_op_conv2d. */
flux_status fx_op_conv2d_rows(fx_ops *ops, const fx_conv2d_geom *g, fx_view x, int x_row0, int x_rows,
                              const fx_opw *w, const fx_op_epi *epi, fx_view y, int row0, int row1, fx_err *err);

#endif
