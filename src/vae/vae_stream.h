/*
 * vae_stream.h — the VAE's strip-streaming engine (vae_stream.c).
 *
 * The VAE runs channels-last ([rows, width, channels]) and streams every
 * layer strip by strip (a few output rows at a time) through the ops seam's
 * host strips (ops.h: fx_op_conv2d_rows over a weight packed once per layer,
 * fx_op_rows_load / fx_op_rows_store between stored rows and dense strips),
 * so that only the tensors a GroupNorm needs whole are ever stored whole:
 *
 *   resnet  x → h = conv1(silu(GN1(x)))            pass 1, stats of h on the fly
 *           out = skip(x) + conv2(silu(GN2(h)))    pass 2, stats of out on the fly
 *
 * GroupNorm statistics are accumulated (double sums) while a tensor is
 * produced, so its normalisation is applied, fused with SiLU, when the next
 * conv loads its input rows. Nearest ×2 upsampling and the asymmetric
 * downsample padding are folded into the conv's gather.
 *
 * Storage (the plans of vae_stream_exec.c): all stored tensors of one level (resolution) live in
 * a "level region" of the activation arena, row r of every tensor in row
 * slot r of the region: [x part | h part]. In place where safe:
 *   - pass 2 writes out over x (the skip is pointwise),
 *   - a resnet with a 1×1 shortcut writes s = shortcut(u) and h of row r
 *     into the slot of input row r, one strip late (vae_sconv.delay), once the
 *     next strip has read its halo rows,
 *   - the decoder's upsample writes the next (larger) level at one end of the
 *     arena while the previous level is read from the other end; the encoder's
 *     downsample compacts the next level in place.
 * Level regions at full and half resolution are stored in bf16 in the
 * default precision mode, everything else (and everything with
 * FLUX_PRECISION=f32) in f32 (vae_storage_dtype).
 */
#ifndef FX_VAE_STREAM_H
#define FX_VAE_STREAM_H

#include "src/model/ctx.h"
#include "vae_exec.h"

/* ------------------------------------------------------------------------ */
/* Tensors and the arena                                                    */
/* ------------------------------------------------------------------------ */

/* A stored tensor [h, w, c] (f32 or bf16 rows `pitch` elements apart) or
 * planar [c, h, w] f32: the ops seam's host rows (ops.h fx_rows). */
typedef fx_rows vae_tensor;

/* GroupNorm statistics of a tensor being produced, then its normalisation. */
typedef struct vae_stats {
    double acc[2 * VAE_MAX_GROUPS]; /* [groups][Σx, Σx²] */
    int64_t pixels;
    int channels, groups;
    float mean[VAE_MAX_GROUPS], rstd[VAE_MAX_GROUPS];
} vae_stats;

/* One level region: rows h of `pitch` elements in `dtype` at base. */
typedef struct vae_region {
    char *base;
    fx_dtype dtype;
    int h, w;
    int64_t pitch;
} vae_region;

/* The arena of one encode or decode: a region per level (offsets, bytes)
 * and the mid attention's q, k, v. */
typedef struct vae_plan {
    vae_region lv[FX_VAE_MAX_LEVELS];
    size_t off[FX_VAE_MAX_LEVELS], bytes[FX_VAE_MAX_LEVELS];
    size_t qkv_off, qkv_bytes, arena;
} vae_plan;

/* One decode or encode on the host: the executor of the network
 * (vae_exec.h), the backend (host memory), activation memory, scratch
 * buffers (each wrapped as a backend buffer for the ops). */
typedef struct vae_stream {
    vae_exec ex;             /* first: the network's view of the run */
    vae_plan plan;           /* the arena's level regions */
    int level;               /* the level the network is at */
    vae_tensor edge;         /* VAE_EDGE: the latent (decoder input) or the moments (encoder output) */
    float *edge_buf;         /* its storage (2 tensors: a 1×1 layer writes the other half) */
    size_t edge_bytes;
    flux_ctx *ctx;           /* for checkpoints between stages (NULL: none) */
    fx_err *err;
    fx_ops *ops;             /* the context's backend; its buffers are host memory */
    int force_f32;           /* FLUX_PRECISION=f32: the AUTO storage is f32 */
    fx_vae_storage storage;
    int groups;
    float eps;
    int strip_pixels;        /* output pixels per strip */
    char *arena;             /* level regions (see the plan) */
    size_t arena_bytes;
    fx_buf *arena_buf;       /* the arena as a backend buffer (Q, K, V live there) */
    fx_buf *edge_fb;         /* edge_buf as a backend buffer */
#define VAE_NBUF 5
    float *buf[VAE_NBUF];     /* strip buffers: input, output ×2, side output ×2 */
    size_t buf_bytes[VAE_NBUF];
    fx_buf *fb[VAE_NBUF];     /* each as a backend buffer */
    vae_stats *stats;         /* [2]: the running tensor's statistics and a
                                resnet's inner ones (12 KiB each, kept off
                                the stack for callers on small stacks) */
    size_t peak_bytes, live_bytes; /* malloc'd activation memory, for the stats */
    double conv_seconds, conv_flops, pack_seconds, load_seconds, store_seconds;
} vae_stream;

/* A strip-streamed convolution (vae_stream.c). */
typedef struct vae_sconv {
    const vae_tensor *src;
    const vae_stats *gn;          /* normalise the input (GN + SiLU) with these stats, or NULL */
    const vae_norm *norm;        /*   and this affine */
    const vae_conv *conv;
    int stride, pad_top, pad_left, pad_bottom, pad_right, upsample;
    vae_tensor dst;
    vae_stats *dst_stats;         /* statistics of dst (NULL: none) */
    int residual;                /* dst = conv + dst (pointwise, in place) */
    const vae_conv *side;        /* 1×1 of the raw input rows (shortcut), or NULL */
    vae_tensor side_dst;
    int delay;                   /* write a strip once the next has read its rows */
} vae_sconv;

flux_status vae_stream_conv(vae_stream *r, const vae_sconv *op);
/* Output rows per strip of a conv: a function of the geometry and the
 * target pixels per strip only. */
#define VAE_STRIP_PIXELS 4096
int vae_conv_strip_rows(const fx_conv2d_geom *g, int strip_pixels);
/* For a conv streamed with delay 1 from src (rows pitch_src bytes apart)
 * into dst (rows pitch_dst bytes apart, the first dst_row_bytes of each row
 * written): max over strips k of (end of dst rows of strip k) − (start of
 * the src rows strip k + 2 reads), both relative to their tensor's start.
 * dst may share memory with src when that is <= the offset of dst above src. */
int64_t vae_stream_gap(const fx_conv2d_geom *g, int strip_pixels, int64_t pitch_src, int64_t pitch_dst,
                      int64_t dst_row_bytes);

/* The tensor [h, w, c] whose row y is stored at element c0·w of row slot y
 * (a row slot holds [x part: w·cx | h part: w·ch]). */
vae_tensor vae_region_part(const vae_region *l, int c0, int c);

/* Level i: h × w pixels in dtype, a row slot wide enough for the first
 * resnet's input and its two-part output (max(cin, 2·cout) channels);
 * sets p->lv[i] (not its base) and p->bytes[i] (64-byte multiple). */
void vae_plan_level(vae_plan *p, int i, const vae_resnet *first, fx_dtype dtype, int h, int w);
static inline size_t vae_round64(size_t v) { return (v + 63) & ~(size_t)63; }

/* Map an arena of `bytes` (huge pages advised); accounted. */
flux_status vae_arena_alloc(vae_stream *r, size_t bytes);
void vae_arena_free(vae_stream *r);
/* Storage dtype of a level region at 1/scale of the image resolution. */
fx_dtype vae_storage_dtype(const vae_stream *r, int scale);

void vae_account(vae_stream *r, ptrdiff_t delta);
/* Run state (call once r->ctx, r->ops are set); release frees it and
 * every buffer. */
flux_status vae_stream_init(vae_stream *r);
/* Plan the arena for r->ex (decoder or encoder) and run the network
 * (vae_net.h) through this executor. */
flux_status vae_stream_run(vae_stream *r);
/* A context checkpoint (ctx.h) after stage `sub` of `subtotal` of a
 * network: the mid block, each level's blocks, the output (L + 2). */
flux_status vae_stream_checkpoint(vae_stream *r, int sub, int subtotal);
void vae_stream_release(vae_stream *r);

/* Give the observer (if any) a planar f32 copy of t (GroupNorm applied when gn). */
flux_status vae_stream_observe(vae_stream *r, const char *name, const vae_tensor *t, const vae_stats *gn_only, const vae_norm *norm);

/* Scratch buffers of the run (grown on demand, accounted in peak_bytes);
 * vae_view: buffer i from float off on, rows ld floats apart. */
float *vae_buf(vae_stream *r, int i, size_t bytes);
static inline fx_view vae_view(const vae_stream *r, int i, int64_t off, int64_t ld) {
    fx_view v = {r->fb[i], off, ld};
    return v;
}
/* A view of host memory p inside backend buffer b whose memory starts at base. */
static inline fx_view vae_view_at(fx_buf *b, const void *base, const void *p, int64_t ld) {
    fx_view v = {b, (const float *)p - (const float *)base, ld};
    return v;
}
/* A host vector (bias) of n floats as a backend buffer (NULL host: none). */
flux_status vae_wrap_vector(vae_stream *r, const float *host, int64_t n, fx_buf **out);

void vae_stats_init(vae_stats *s, int channels, int groups);
flux_status vae_stats_add(vae_stream *r, vae_stats *s, int64_t pixels, fx_view x);
void vae_stats_finish(vae_stream *r, vae_stats *s);
/* The ops' GroupNorm of s with affine norm, SiLU after it when silu. */
fx_op_gn vae_gn(const vae_stats *s, const vae_norm *norm, int silu);

#endif
