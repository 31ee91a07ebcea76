/*
 * ops_internal.h — what the backends behind ops.h share (never included
 * outside src/ops): the storage struct and the table of one backend.
 *
 * ops.c forwards every fx_op_* call through ops->impl: ops_cpu.c (the
 * kernels of simd/kernels.h) or ops_vulkan.c (src/vulkan; VULKAN=1 only,
 * ops_novk.c stands in without it).
 */
#ifndef FX_OPS_INTERNAL_H
#define FX_OPS_INTERNAL_H

#include "ops.h"

struct fx_vk;
struct fx_vk_buf;

struct fx_buf {
    float *host;                /* CPU backend */
    struct fx_vk_buf *dev;      /* Vulkan backend */
    int64_t n;                  /* floats */
    char what[64];
};

typedef struct fx_ops_impl {
    flux_status (*buf_alloc)(fx_ops *, fx_buf *, fx_err *);
    void (*buf_release)(fx_ops *, fx_buf *);
    flux_status (*write)(fx_ops *, fx_buf *, int64_t, const float *, int64_t, fx_err *);
    flux_status (*read)(fx_ops *, const fx_buf *, int64_t, float *, int64_t, fx_err *);
    flux_status (*copy)(fx_ops *, int64_t, int64_t, fx_view, fx_view, fx_err *);
    flux_status (*sync)(fx_ops *, fx_err *);
    flux_status (*weight)(fx_ops *, const fx_conv2d_geom *, fx_opw *, const char *, fx_err *);
    void (*weight_free)(fx_ops *, fx_opw *);
    void (*terms_changed)(fx_ops *, fx_opw *); /* NULL: nothing kept */
    flux_status (*rope)(fx_ops *, fx_oprope *, fx_err *);
    void (*rope_free)(fx_ops *, fx_oprope *);
    flux_status (*linear)(fx_ops *, int64_t, fx_view, const fx_opw *, fx_view, const fx_op_epi *, fx_err *);
    flux_status (*attention)(fx_ops *, const fx_op_attn *, fx_err *);
    flux_status (*qk_norm_rope)(fx_ops *, fx_view, int64_t, int, int, fx_view, float, const fx_oprope *, int64_t,
                                fx_err *);
    flux_status (*rmsnorm)(fx_ops *, int64_t, int64_t, fx_view, fx_view, float, fx_view, fx_err *);
    flux_status (*layernorm_modulate)(fx_ops *, int64_t, int64_t, fx_view, fx_view, fx_view, float, fx_view,
                                      fx_err *);
    flux_status (*silu)(fx_ops *, int64_t, fx_view, fx_err *);
    flux_status (*swiglu)(fx_ops *, int64_t, int64_t, fx_view, fx_view, fx_view, fx_err *);
    flux_status (*gated_add)(fx_ops *, int64_t, int64_t, fx_view, fx_view, fx_view, fx_err *);
    flux_status (*groupnorm)(fx_ops *, int64_t, int, int, fx_view, fx_view, fx_view, float, int, fx_view,
                             fx_err *);
    flux_status (*conv2d)(fx_ops *, const fx_conv2d_geom *, fx_view, const fx_opw *, const fx_op_epi *, fx_view,
                          fx_err *);
    int (*device_errors)(const fx_ops *, const char **);
    void (*inject_lost)(fx_ops *);
    void (*close)(fx_ops *);
} fx_ops_impl;

struct fx_ops {
    const fx_ops_impl *impl;
    fx_backend_kind kind;
    const fx_kctx *kc;
    fx_mem_stats *mem;          /* host allocations counted (fx_ops_opts.mem) */
    struct fx_vk *vk;           /* Vulkan backend */
    struct fx_vk_buf *term_tmp; /* Vulkan: adapter terms' temporaries, shared (grown) */
    struct fx_vk_buf *term_ones;/* Vulkan: [term_ones_n] ones, the gate of ungated layers */
    int64_t term_tmp_floats, term_ones_n;
    char name[640];
};

extern const fx_ops_impl fx_ops_cpu_impl;

/* The Vulkan backend (ops_vulkan.c, or ops_novk.c's "built without
 * Vulkan"): open on o->device (any device type when any_type, else GPUs
 * only) into ops (kind, vk, impl, name set). */
flux_status fx_ops_vulkan_open(const fx_ops_opts *o, int any_type, fx_ops *ops, fx_err *err);
flux_status fx_ops_vulkan_list(fx_device_desc *out, int max, int *count, fx_err *err);

#endif
