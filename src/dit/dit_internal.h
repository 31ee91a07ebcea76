/*
 * dit_internal.h — the insides of fx_dit / fx_dit_run shared by
 * transformer.c (loading, runs, the forward pass) and dit_blocks.c (the
 * double- and single-stream blocks). See transformer.h for the layout.
 */
#ifndef FX_DIT_INTERNAL_H
#define FX_DIT_INTERNAL_H

#include "transformer.h"
#include "src/formats/weight_set.h"
#include "src/ops/ops.h"

/* Streams of a double block: text uses the add_* / to_add_out / ff_context
 * weights, image the to_* / to_out.0 / ff weights. */
enum { FX_DIT_TXT = 0, FX_DIT_IMG = 1 };

/* Weights are registered on the context's backend (src/ops) once, at load:
 * the CPU computes from the stored views, a device keeps its own copy. */
typedef struct fx_dit_double_w {
    fx_opw q[2], k[2], v[2];         /* [d, d] */
    fx_opw out[2];                   /* [d, d] */
    fx_opw ff_in[2];                 /* [2m, d]: rows gate then up */
    fx_opw ff_out[2];                /* [d, m] */
    fx_buf *norm_q[2], *norm_k[2];   /* [head_dim] */
} fx_dit_double_w;

typedef struct fx_dit_single_w {
    fx_opw qkv;                      /* rows [0, 3d) of to_qkv_mlp_proj: [3d, d] */
    fx_opw mlp_in;                   /* rows [3d, 3d + 2m): [2m, d], gate then up */
    fx_opw out;                      /* to_out [d, d + m] */
    fx_buf *norm_q, *norm_k;         /* [head_dim] */
} fx_dit_single_w;

/* A linear weight view of the model and where it comes from: rows
 * [row0, row0 + w->n) of the tensor `tensor` (adapters attach by name). */
typedef struct fx_dit_linear {
    fx_weight *w;                    /* = &op->w */
    fx_opw *op;                      /* the weight on the backend */
    char tensor[FX_ST_MAX_NAME];
    int64_t row0;
} fx_dit_linear;

/* Linear views of a config: 10 outside the blocks, 12 per double block,
 * 3 per single block (the fused projection is two views). */
#define FX_DIT_LINEARS(c) (10 + 12 * (int64_t)(c)->double_blocks + 3 * (int64_t)(c)->single_blocks)

struct fx_dit {
    fx_dit_config c;
    fx_ops *ops;                     /* the backend the weights live on */
    fx_opw x_embedder;               /* [d, in_channels] */
    fx_opw context_embedder;         /* [d, text_dim] */
    fx_opw t_linear_1;               /* [d, timestep_dim] */
    fx_opw t_linear_2;               /* [d, d] */
    fx_opw mod_img, mod_txt;         /* [6d, d] */
    fx_opw mod_single;               /* [3d, d] */
    fx_opw norm_out_scale;           /* rows [0, d) of norm_out.linear [2d, d] */
    fx_opw norm_out_shift;           /* rows [d, 2d): two row views, as a BFL single
                                        file stores the halves swapped */
    fx_opw proj_out;                 /* [out_channels, d] */
    fx_dit_double_w *dbl;            /* [double_blocks] */
    fx_dit_single_w *sgl;            /* [single_blocks] */
    fx_dit_linear *linears;          /* [FX_DIT_LINEARS] every view above */
    int n_linears;
    fx_delta *deltas;                /* adapter terms the views point to (dit_adapters.c) */
    size_t n_deltas;
};

/* Modulation vectors of one step, shared by every block (BFL flux2 model.py; diffusers transformer_flux2.py):
 * views into the run's modulation buffer. */
typedef struct fx_dit_mod {
    fx_view img;                     /* [6d]: shift1 scale1 gate1 shift2 scale2 gate2 */
    fx_view txt;                     /* [6d] */
    fx_view single;                  /* [3d]: shift scale gate */
    fx_view final_scale, final_shift; /* [d] each */
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

    fx_ops *ops;                     /* = d->ops */
    fx_buf *h;                       /* [R, d] residual stream */
    fx_buf *h0;                      /* [R, d] text / reference rows projected once */
    fx_buf *u;                       /* [R, ldu] Q K V O G P */
    fx_buf *mod;                     /* timestep + modulation vectors */
    fx_buf *io;                      /* host data in and out: [max(B·N·in, B·N·out, L·text_dim)] */
    float *host;                     /* [io floats] host staging (observers, the embedding) */
    int64_t io_floats;
    size_t mem_bytes;

    fx_rope_table rope_table;        /* [R] rows, same row order as h */
    fx_oprope rope;                  /* the table on the backend */
    int text_set;
    uint32_t images_set;             /* bit k: reference k projected */

    fx_dit_observer observe;
    void *observe_user;
};

/* Row views into the interleaved layout. */
static inline int64_t fx_dit_row(const fx_dit_run *r, int64_t token, int64_t b) { return token * r->B + b; }

/* Views of the run's buffers: rows from row0 on, columns from col0 on. */
static inline fx_view fx_dit_h(const fx_dit_run *r, int64_t row0) {
    fx_view v = {r->h, row0 * r->d->c.hidden, r->d->c.hidden};
    return v;
}
static inline fx_view fx_dit_u(const fx_dit_run *r, int64_t row0, int64_t col0) {
    fx_view v = {r->u, row0 * r->ldu + col0, r->ldu};
    return v;
}

/* Blocks (dit_blocks.c). Both work on every row of the run. */
flux_status fx_dit_double_block(fx_dit_run *r, const fx_dit_double_w *w, const fx_dit_mod *m);
flux_status fx_dit_single_block(fx_dit_run *r, const fx_dit_single_w *w, const fx_dit_mod *m);

/* Attention of every sequence over U's Q, K, V columns into its O columns. */
flux_status fx_dit_attention(fx_dit_run *r);

#endif
