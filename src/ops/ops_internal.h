/*
 * ops_internal.h — the interface a backend implements (never included
 * outside src/ops): struct fx_backend, a const table of functions, and the
 * storage struct the seam checks bounds on.
 *
 * A backend owns everything of its own behind opaque pointers: its context
 * (open returns it; every entry gets it back), a buffer's storage
 * (fx_buf.state), a weight's form (fx_opw.state: a device copy, an int8
 * form), a RoPE table's copy (fx_oprope.state). ops.c checks the arguments
 * once for every backend, then forwards; the free entries are always called
 * (with a NULL state too), so a backend never depends on the seam knowing
 * what it keeps.
 *
 * A new backend is one file defining `const fx_backend fx_backend_NAME`
 * plus one entry in the list of ops.c (priority order for --backend auto).
 */
#ifndef FX_OPS_INTERNAL_H
#define FX_OPS_INTERNAL_H

#include "ops.h"

struct fx_buf {
    void *state;                /* the backend's storage of n floats (buf_alloc) */
    int64_t n;                  /* floats */
    char what[64];
    int wrapped;                /* fx_buf_wrap: state is the caller's memory (never freed) */
};

typedef struct fx_backend {
    const char *name;           /* --backend NAME, fx_ops_backend */
    const char *title;          /* in -v lines: "running on the CPU" */
    int host_memory;            /* 1: fx_buf.state is the buffer's float array (fx_ops_on_host) */

    /* A context on the device o asks for. unasked: --backend auto tries this
     * backend, which may decline (Vulkan skips CPU devices); else it was
     * named. kc: the host kernels (kept by pointer). */
    flux_status (*open)(const fx_ops_opts *o, const fx_kctx *kc, int unasked, void **ctx, fx_err *err);
    void (*close)(void *ctx);
    /* "cpu", "vulkan: <device> (<type>), driver <driver>" (owned by ctx). */
    const char *(*describe)(const void *ctx);
    /* NULL: the backend has no devices to list. */
    flux_status (*list_devices)(fx_device_desc *out, int max, int *count, fx_err *err);

    /* Storage: buf_alloc sets b->state for b->n floats (zeroed); buf_free
     * releases it. */
    flux_status (*buf_alloc)(void *ctx, fx_buf *b, fx_err *err);
    void (*buf_free)(void *ctx, fx_buf *b);
    flux_status (*write)(void *ctx, fx_buf *b, int64_t off, const float *src, int64_t n, fx_err *err);
    flux_status (*read)(void *ctx, const fx_buf *b, int64_t off, float *dst, int64_t n, fx_err *err);
    flux_status (*copy)(void *ctx, int64_t rows, int64_t cols, fx_view src, fx_view dst, fx_err *err);
    flux_status (*sync)(void *ctx, fx_err *err);

    /* Weights: prepare may set w->state (g: a conv weight, else NULL);
     * release frees it (state NULL: nothing kept). weight_terms: w->w.delta
     * changed (NULL: the backend keeps nothing of the terms).
     * weight_int8_form: fx_ops_weight_int8_form (NULL: never). */
    flux_status (*weight_prepare)(void *ctx, const fx_conv2d_geom *g, fx_opw *w, const char *name, fx_err *err);
    void (*weight_release)(void *ctx, fx_opw *w);
    void (*weight_terms)(void *ctx, fx_opw *w);
    int (*weight_int8_form)(void *ctx, fx_opw *w);
    flux_status (*rope_prepare)(void *ctx, fx_oprope *r, fx_err *err);
    void (*rope_release)(void *ctx, fx_oprope *r);

    /* Operations, arguments checked (ops.h) */
    flux_status (*linear)(void *ctx, int64_t m, fx_view x, const fx_opw *w, fx_view y, const fx_op_epi *epi,
                          fx_err *err);
    flux_status (*attention)(void *ctx, const fx_op_attn *a, fx_err *err);
    flux_status (*qk_norm_rope)(void *ctx, fx_view x, int64_t rows, int heads, int head_dim, fx_view norm_w,
                                float eps, const fx_oprope *rope, int64_t rope_row0, fx_err *err);
    flux_status (*rmsnorm)(void *ctx, int64_t rows, int64_t cols, fx_view x, fx_view w, float eps, fx_view y,
                           fx_err *err);
    flux_status (*layernorm_modulate)(void *ctx, int64_t rows, int64_t cols, fx_view x, fx_view shift,
                                      fx_view scale, float eps, fx_view y, fx_err *err);
    flux_status (*silu)(void *ctx, int64_t n, fx_view x, fx_err *err);
    flux_status (*swiglu)(void *ctx, int64_t rows, int64_t cols, fx_view gate, fx_view up, fx_view out,
                          fx_err *err);
    flux_status (*gated_add)(void *ctx, int64_t rows, int64_t cols, fx_view y, fx_view gate, fx_view x,
                             fx_err *err);
    flux_status (*groupnorm)(void *ctx, int64_t pixels, int channels, int groups, fx_view x, fx_view gamma,
                             fx_view beta, float eps, int fuse_silu, fx_view y, fx_err *err);
    flux_status (*conv2d)(void *ctx, const fx_conv2d_geom *g, fx_view x, const fx_opw *w, const fx_op_epi *epi,
                          fx_view y, fx_err *err);

    /* Host strips (ops.h; NULL on a backend whose buffers are not host
     * memory: FLUX_ERR_UNSUPPORTED). wrap sets b->state to host memory.
     * weight_rows_prepare: weight_prepare for fx_op_conv2d_rows. */
    flux_status (*wrap)(void *ctx, fx_buf *b, void *host, fx_err *err);
    flux_status (*rows_load)(void *ctx, const fx_rows *t, int y0, int y1, const fx_op_gn *gn, int load, fx_view dst,
                             fx_err *err);
    flux_status (*rows_store)(void *ctx, const fx_rows *t, int y0, int y1, fx_view src, int residual, int groups,
                              double *sums, fx_err *err);
    flux_status (*groupnorm_sums)(void *ctx, int64_t pixels, int channels, int groups, fx_view x, double *sums,
                                  fx_err *err);
    flux_status (*groupnorm_apply)(void *ctx, int64_t pixels, int channels, const fx_op_gn *gn, fx_view x, fx_view y,
                                   fx_err *err);
    flux_status (*weight_rows_prepare)(void *ctx, const fx_conv2d_geom *g, fx_opw *w, const char *name, fx_err *err);
    flux_status (*conv2d_rows)(void *ctx, const fx_conv2d_geom *g, fx_view x, int x_row0, int x_rows, const fx_opw *w,
                               const fx_op_epi *epi, fx_view y, int row0, int row1, fx_err *err);

    /* Device diagnostics (NULL: none; 0 errors, no-op). */
    int (*device_errors)(const void *ctx, const char **first);
    void (*inject_device_lost)(void *ctx);
} fx_backend;

/* The backends (each in its file; ops.c lists them). */
extern const fx_backend fx_backend_cpu;    /* ops_cpu.c */
extern const fx_backend fx_backend_vulkan; /* ops_vulkan.c (VULKAN=1), else ops_novk.c: "not built" */

#endif
