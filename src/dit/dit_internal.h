/*
 * dit_internal.h — the insides of fx_dit / fx_dit_run shared by
 * transformer.c (loading, runs, the forward pass) and dit_blocks.c (the
 * double- and single-stream blocks). See transformer.h for the layout.
 */
#ifndef FX_DIT_INTERNAL_H
#define FX_DIT_INTERNAL_H

#include "transformer.h"
#include "src/formats/safetensors.h"

/* Streams of a double block: text uses the add_* / to_add_out / ff_context
 * weights, image the to_* / to_out.0 / ff weights. */
enum { FX_DIT_TXT = 0, FX_DIT_IMG = 1 };

typedef struct fx_dit_double_w {
    fx_weight q[2], k[2], v[2];      /* [d, d] */
    fx_weight out[2];                /* [d, d] */
    fx_weight ff_in[2];              /* [2m, d]: rows gate then up */
    fx_weight ff_out[2];             /* [d, m] */
    float *norm_q[2], *norm_k[2];    /* [head_dim] */
} fx_dit_double_w;

typedef struct fx_dit_single_w {
    fx_weight qkv;                   /* rows [0, 3d) of to_qkv_mlp_proj: [3d, d] */
    fx_weight mlp_in;                /* rows [3d, 3d + 2m): [2m, d], gate then up */
    fx_weight out;                   /* to_out [d, d + m] */
    float *norm_q, *norm_k;          /* [head_dim] */
} fx_dit_single_w;

/* A linear weight view of the model and where it comes from: rows
 * [row0, row0 + w->n) of the tensor `tensor` (adapters attach by name). */
typedef struct fx_dit_linear {
    fx_weight *w;
    char tensor[FX_ST_MAX_NAME];
    int64_t row0;
} fx_dit_linear;

/* Linear views of a config: 10 outside the blocks, 12 per double block,
 * 3 per single block (the fused projection is two views). */
#define FX_DIT_LINEARS(c) (10 + 12 * (int64_t)(c)->double_blocks + 3 * (int64_t)(c)->single_blocks)

struct fx_dit {
    fx_dit_config c;
    fx_weight x_embedder;            /* [d, in_channels] */
    fx_weight context_embedder;      /* [d, text_dim] */
    fx_weight t_linear_1;            /* [d, timestep_dim] */
    fx_weight t_linear_2;            /* [d, d] */
    fx_weight mod_img, mod_txt;      /* [6d, d] */
    fx_weight mod_single;            /* [3d, d] */
    fx_weight norm_out_scale;        /* rows [0, d) of norm_out.linear [2d, d] */
    fx_weight norm_out_shift;        /* rows [d, 2d): two row views, as a BFL single
                                        file stores the halves swapped */
    fx_weight proj_out;              /* [out_channels, d] */
    fx_dit_double_w *dbl;            /* [double_blocks] */
    fx_dit_single_w *sgl;            /* [single_blocks] */
    fx_dit_linear *linears;          /* [FX_DIT_LINEARS] every view above */
    int n_linears;
    fx_delta *deltas;                /* adapter terms the views point to (dit_adapters.c) */
    size_t n_deltas;
};

/* Modulation vectors of one step, shared by every block (spec §3.3). */
typedef struct fx_dit_mod {
    const float *img;                /* [6d]: shift1 scale1 gate1 shift2 scale2 gate2 */
    const float *txt;                /* [6d] */
    const float *single;             /* [3d]: shift scale gate */
    const float *final_scale, *final_shift; /* [d] each */
} fx_dit_mod;

struct fx_dit_run {
    flux_ctx *ctx;
    const fx_dit *d;
    fx_dit_layout lay;
    int64_t B;                       /* sequences */
    int64_t L;                       /* text tokens per sequence */
    int64_t N;                       /* target tokens per sequence */
    int64_t n_img;                   /* image tokens per sequence (target + refs) */
    int64_t S;                       /* tokens per sequence: L + n_img */
    int64_t R;                       /* rows: S·B */
    int64_t img_token0[FX_DIT_MAX_IMAGES]; /* first token of each image in a sequence */
    int64_t ldu;                     /* U row stride: 4d + 2m */

    float *h;                        /* [R, d] residual stream */
    float *h0;                       /* [R, d] text / reference rows projected once */
    float *u;                        /* [R, ldu] Q K V O G P */
    float *mod_buf;                  /* timestep + modulation vectors */
    void *mem;                       /* one allocation behind h, h0, u, mod_buf */
    size_t mem_bytes;

    fx_rope_table rope;              /* [R] rows, same row order as h */
    int text_set;
    uint32_t images_set;             /* bit k: reference k projected */

    fx_dit_observer observe;
    void *observe_user;
};

/* Row views into the interleaved layout. */
static inline int64_t fx_dit_row(const fx_dit_run *r, int64_t token, int64_t b) { return token * r->B + b; }

/* The RoPE table restricted to rows [row0, row0 + rows). */
static inline fx_rope_table fx_dit_rope_rows(const fx_dit_run *r, int64_t row0, int64_t rows) {
    fx_rope_table t = r->rope;
    int64_t ppr = t.rot_dim / 2;
    t.cos += row0 * ppr;
    t.sin += row0 * ppr;
    t.seq = rows;
    return t;
}

/* Blocks (dit_blocks.c). Both work on every row of the run. */
flux_status fx_dit_double_block(fx_dit_run *r, const fx_dit_double_w *w, const fx_dit_mod *m);
flux_status fx_dit_single_block(fx_dit_run *r, const fx_dit_single_w *w, const fx_dit_mod *m);

/* Attention of every sequence over U's Q, K, V columns into its O columns. */
flux_status fx_dit_attention(fx_dit_run *r);

#endif
