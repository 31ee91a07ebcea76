/*
 * qwen3.c — the Qwen3 text encoder of klein (diffusers pipeline_flux2_klein.py; transformers modeling_qwen3.py): weight views
 * into the mmap'd text_encoder/ set, one workspace, and the forward pass
 *
 *   x_0[l] = embed_tokens[id_l]
 *   per layer n:  a = RMSNorm(x);  q, k, v = a·Wqᵀ, a·Wkᵀ, a·Wvᵀ
 *                 q, k ← RoPE(RMSNorm_head(q, k))     (norm before rotation)
 *                 x += Attn_causal,padding(q, k, v)·Woᵀ
 *                 b = RMSNorm(x);  x += (silu(b·Wgᵀ) ⊙ b·Wuᵀ)·Wdᵀ
 *   out[l] = [x_9[l] | x_18[l] | x_27[l]]   (HF hidden states = outputs of
 *                                             layers 8, 17, 26; no final norm)
 *
 * Only layers 0 .. (last extracted state − 1) run. Padding rows are computed
 * like any other row (the transformer reads them); they never serve as keys.
 */
#include "qwen3.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/model/model.h"
#include "src/ops/ops.h"

/* Weights live on the context's backend (src/ops): the CPU reads the mapped
 * views, a device holds a copy uploaded once at load. */
typedef struct qwen3_layer {
    fx_opw q, k, v, o;           /* [hq·hd, h], [hkv·hd, h] ×2, [h, hq·hd] */
    fx_opw gate, up, down;       /* [ff, h] ×2, [h, ff] */
    fx_buf *norm_in, *norm_post; /* [h] input_layernorm, post_attention_layernorm */
    fx_buf *norm_q, *norm_k;     /* [hd] per-head QK-RMSNorm */
} qwen3_layer;

struct fx_qwen3 {
    fx_qwen3_config c;
    fx_ops *ops;                 /* the backend the weights live on */
    fx_weight embed;             /* [vocab, h] in place, read row by row (fp8: with its scales) */
    qwen3_layer *layers;         /* [layers_run] */
    int layers_run;              /* 1 + index of the last layer whose output is extracted */
    int state_layer[FX_KLEIN_N_TEXT_STATES]; /* output of layer state_layer[s] → out block s */

    /* Workspace for up to cap rows (grown outside the layer loop only):
     *   x [cap, h]  residual stream      a [cap, h]  normed input of a sub-block
     *   u: attention phase  qkv [cap, (hq + 2·hkv)·hd] then o [cap, hq·hd]
     *      MLP phase        g [cap, ff] then p [cap, ff]   (same memory) */
    int64_t cap;
    size_t mem_bytes;
    fx_buf *x, *a, *u;
    fx_buf *out;                 /* [cap, 3·h] the extracted hidden states */
    fx_buf *mask;                /* [cap] key-mask bytes of the prompt */
    float *host;                 /* [cap, h] host staging (embedding rows, observers) */
    fx_rope_table rope_table;    /* positions 0 .. cap−1, half-split, θ from the config */
    fx_oprope rope;

    fx_qwen3_observer observe;
    void *observe_user;
};

/* ------------------------------------------------------------------------ */
/* Weights                                                                  */
/* ------------------------------------------------------------------------ */

static flux_status load_layer(fx_ops *ops, fx_wset *w, const fx_qwen3_config *c, int n, qwen3_layer *l,
                              fx_err *err) {
    const int64_t h = c->hidden, hd = c->head_dim, ff = c->intermediate;
    const int64_t qd = (int64_t)c->heads * hd, kvd = (int64_t)c->kv_heads * hd;
    TRY(fx_wset_linearf(w, &l->q.w, qd, h, err, "model.layers.%d.self_attn.q_proj.weight", n));
    TRY(fx_wset_linearf(w, &l->k.w, kvd, h, err, "model.layers.%d.self_attn.k_proj.weight", n));
    TRY(fx_wset_linearf(w, &l->v.w, kvd, h, err, "model.layers.%d.self_attn.v_proj.weight", n));
    TRY(fx_wset_linearf(w, &l->o.w, h, qd, err, "model.layers.%d.self_attn.o_proj.weight", n));
    TRY(fx_wset_linearf(w, &l->gate.w, ff, h, err, "model.layers.%d.mlp.gate_proj.weight", n));
    TRY(fx_wset_linearf(w, &l->up.w, ff, h, err, "model.layers.%d.mlp.up_proj.weight", n));
    TRY(fx_wset_linearf(w, &l->down.w, h, ff, err, "model.layers.%d.mlp.down_proj.weight", n));
    TRY(fx_model_vecf(ops, w, h, &l->norm_in, err, "model.layers.%d.input_layernorm.weight", n));
    TRY(fx_model_vecf(ops, w, h, &l->norm_post, err, "model.layers.%d.post_attention_layernorm.weight", n));
    TRY(fx_model_vecf(ops, w, hd, &l->norm_q, err, "model.layers.%d.self_attn.q_norm.weight", n));
    TRY(fx_model_vecf(ops, w, hd, &l->norm_k, err, "model.layers.%d.self_attn.k_norm.weight", n));
    fx_opw *proj[] = {&l->q, &l->k, &l->v, &l->o, &l->gate, &l->up, &l->down};
    static const char *pname[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
    for (size_t i = 0; i < sizeof proj / sizeof *proj; i++) {
        /* start reading the projections in the background (cold page cache) */
        fx_wset_weight_willneed(w, &proj[i]->w);
        char name[64];
        snprintf(name, sizeof name, "text encoder layer %d %s", n, pname[i]);
        TRY(fx_ops_weight(ops, &proj[i]->w, name, proj[i], err));
        /* --precision int8: the int8 form replaces the mapped rows (as the
         * transformer's, src/dit/transformer.c register_weights) */
        if (fx_wset_weight_mapped(w, &proj[i]->w) && fx_ops_weight_int8_form(ops, proj[i]))
            fx_wset_weight_dontneed(w, &proj[i]->w);
    }
    return FLUX_OK;
}

static void free_workspace(fx_qwen3 *q) {
    fx_ops_rope_free(q->ops, &q->rope);
    fx_rope_table_free(&q->rope_table);
    fx_buf_free(q->ops, q->x), fx_buf_free(q->ops, q->a), fx_buf_free(q->ops, q->u);
    fx_buf_free(q->ops, q->out), fx_buf_free(q->ops, q->mask);
    free(q->host);
    q->mem_bytes = 0, q->cap = 0;
    q->x = q->a = q->u = q->out = q->mask = NULL;
    q->host = NULL;
}

void fx_qwen3_free(fx_qwen3 *q) {
    if (!q) return;
    if (q->layers)
        for (int n = 0; n < q->layers_run; n++) {
            qwen3_layer *l = &q->layers[n];
            fx_opw *proj[] = {&l->q, &l->k, &l->v, &l->o, &l->gate, &l->up, &l->down};
            for (size_t i = 0; i < sizeof proj / sizeof *proj; i++) fx_ops_weight_free(q->ops, proj[i]);
            fx_buf_free(q->ops, l->norm_in), fx_buf_free(q->ops, l->norm_post);
            fx_buf_free(q->ops, l->norm_q), fx_buf_free(q->ops, l->norm_k);
        }
    free(q->layers);
    free_workspace(q);
    free(q);
}

static flux_status load_all(fx_qwen3 *q, fx_wset *w, fx_err *err) {
    const fx_qwen3_config *c = &q->c;
    TRY(fx_wset_linear(w, "model.embed_tokens.weight", c->vocab, c->hidden, &q->embed, err));
    for (int n = 0; n < q->layers_run; n++) TRY(load_layer(q->ops, w, c, n, &q->layers[n], err));
    return FLUX_OK;
}

flux_status fx_qwen3_load(flux_ctx *ctx, fx_qwen3 **out) {
    *out = NULL;
    if (!ctx->model) return fx_fail(&ctx->err, FLUX_ERR_STATE, "text encoder: no model is loaded");
    fx_wset *w = fx_model_text_encoder_weights(ctx->model, &ctx->err);
    if (!w) return ctx->err.code ? ctx->err.code : FLUX_ERR_MODEL;
    fx_qwen3 *q = calloc(1, sizeof *q);
    if (!q) return fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory (text encoder)");
    q->c = ctx->model->qwen3;
    q->ops = ctx->ops;
    const int states[FX_KLEIN_N_TEXT_STATES] = FX_KLEIN_TEXT_STATES;
    for (int s = 0; s < FX_KLEIN_N_TEXT_STATES; s++) {
        q->state_layer[s] = states[s] - 1; /* HF hidden state k = output of layer k − 1 */
        if (states[s] > q->layers_run) q->layers_run = states[s];
    }
    flux_status st = FLUX_OK;
    if (q->layers_run > q->c.layers_used || q->layers_run > q->c.layers)
        st = fx_fail(&ctx->err, FLUX_ERR_MODEL, "text encoder: hidden state %d needs %d layers, the model has %d",
                     q->layers_run, q->layers_run, q->c.layers);
    else if (!(q->layers = calloc((size_t)q->layers_run, sizeof *q->layers)))
        st = fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory (text encoder layers)");
    else
        st = load_all(q, w, &ctx->err);
    if (st) {
        fx_qwen3_free(q);
        return st;
    }
    fx_log(&ctx->log, 2, "flux: text encoder: %d of %d layers, hidden %d, %d/%d heads x %d, ff %d", q->layers_run,
           q->c.layers, q->c.hidden, q->c.heads, q->c.kv_heads, q->c.head_dim, q->c.intermediate);
    *out = q;
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Workspace                                                                */
/* ------------------------------------------------------------------------ */

#define ALIGN_FLOATS 16 /* 64 bytes */

static int64_t align_up(int64_t n) { return (n + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS; }

/* Columns of the attention phase of u: [q | k | v] then o. */
static int64_t qkv_cols(const fx_qwen3_config *c) { return (int64_t)(c->heads + 2 * c->kv_heads) * c->head_dim; }

static flux_status reserve(flux_ctx *ctx, fx_qwen3 *q, int64_t seq) {
    if (seq <= q->cap) return FLUX_OK;
    free_workspace(q);
    const fx_qwen3_config *c = &q->c;
    const int64_t h = c->hidden, qd = (int64_t)c->heads * c->head_dim;
    int64_t attn = align_up(seq * qkv_cols(c)) + align_up(seq * qd), mlp = 2 * align_up(seq * c->intermediate);
    int64_t nu = attn > mlp ? attn : mlp, nout = seq * FX_KLEIN_N_TEXT_STATES * h;
    q->mem_bytes = (size_t)(2 * seq * h + nu + nout) * sizeof(float);
    fx_err *err = &ctx->err;
    flux_status st = fx_buf_new(q->ops, seq * h, "text encoder residual stream", &q->x, err);
    if (!st) st = fx_buf_new(q->ops, seq * h, "text encoder normed input", &q->a, err);
    if (!st) st = fx_buf_new(q->ops, nu, "text encoder workspace", &q->u, err);
    if (!st) st = fx_buf_new(q->ops, nout, "text encoder hidden states", &q->out, err);
    if (!st && !(q->host = malloc((size_t)(seq * h) * sizeof(float))))
        st = fx_fail(err, FLUX_ERR_NOMEM, "out of memory: text encoder staging (%lld tokens)", (long long)seq);
    int32_t *pos = st ? NULL : malloc((size_t)seq * sizeof *pos);
    if (!st && !pos) st = fx_fail(err, FLUX_ERR_NOMEM, "out of memory (text encoder positions)");
    if (!st) {
        for (int64_t l = 0; l < seq; l++) pos[l] = (int32_t)l;
        int dims = c->head_dim;
        st = fx_rope_table_init(&q->rope_table, pos, seq, 1, &dims, c->rope_theta, FX_ROPE_HALF_SPLIT, err);
    }
    free(pos);
    if (!st) st = fx_rope_table_check(&q->rope_table, seq, c->head_dim, err);
    if (!st) st = fx_ops_rope(q->ops, &q->rope_table, &q->rope, err);
    if (st) {
        free_workspace(q);
        return st;
    }
    q->cap = seq;
    fx_log(&ctx->log, 2, "flux: text encoder workspace: %lld tokens, %.1f MB on %s", (long long)seq,
           (double)q->mem_bytes / 1e6, fx_ops_name(q->ops));
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                  */
/* ------------------------------------------------------------------------ */

/* x[l] = embed_tokens[ids[l]]: only the rows the sequence uses are read
 * (on the host: the table is the largest tensor and is read a row a token). */
static flux_status embed(flux_ctx *ctx, const fx_qwen3 *q, const int32_t *ids, int64_t seq) {
    const int64_t h = q->c.hidden;
    const size_t row_bytes = (size_t)fx_dtype_row_bytes(q->embed.dtype, h);
    const char *table = q->embed.data;
    for (int64_t l = 0; l < seq; l++) {
        if (ids[l] < 0 || ids[l] >= q->c.vocab)
            return fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG, "text encoder: token %lld has id %d, expected 0..%d",
                           (long long)l, ids[l], q->c.vocab - 1);
        fx_tensor_convert_f32(table + (size_t)ids[l] * row_bytes, q->embed.dtype, h, q->host + l * h);
        fx_weight_values(&q->embed, ids[l], 0, h, q->host + l * h); /* fp8: times its scales */
    }
    return fx_buf_write(q->ops, q->x, 0, q->host, seq * h, &ctx->err);
}

/* x += Attn(RoPE(norm(a·Wqᵀ)), RoPE(norm(a·Wkᵀ)), a·Wvᵀ)·Woᵀ, a = RMSNorm(x). */
static flux_status attention_block(flux_ctx *ctx, fx_qwen3 *q, const qwen3_layer *w, int64_t seq, int masked) {
    const fx_qwen3_config *c = &q->c;
    fx_ops *ops = q->ops;
    fx_err *err = &ctx->err;
    const int64_t h = c->hidden, hd = c->head_dim, qd = (int64_t)c->heads * hd, kvd = (int64_t)c->kv_heads * hd;
    const int64_t ldu = qkv_cols(c);
    fx_view x = {q->x, 0, h}, a = {q->a, 0, h};
    fx_view qs = {q->u, 0, ldu}, ks = fx_at(qs, 0, qd), vs = fx_at(qs, 0, qd + kvd); /* [seq, ldu] */
    fx_view o = {q->u, align_up(seq * ldu), qd};                                     /* [seq, qd] */

    TRY(fx_op_rmsnorm(ops, seq, h, x, fx_vec(w->norm_in, 0), c->rms_eps, a, err));
    TRY(fx_op_linear(ops, seq, a, &w->q, qs, NULL, err));
    TRY(fx_op_linear(ops, seq, a, &w->k, ks, NULL, err));
    TRY(fx_op_linear(ops, seq, a, &w->v, vs, NULL, err));
    TRY(fx_op_qk_norm_rope(ops, qs, seq, c->heads, c->head_dim, fx_vec(w->norm_q, 0), c->rms_eps, &q->rope, 0, err));
    TRY(fx_op_qk_norm_rope(ops, ks, seq, c->kv_heads, c->head_dim, fx_vec(w->norm_k, 0), c->rms_eps, &q->rope, 0, err));
    fx_op_attn args = {
        .sq = seq, .sk = seq, .hq = c->heads, .hkv = c->kv_heads, .d = c->head_dim,
        .q = qs, .k = ks, .v = vs, .o = o,
        .scale = (float)(1.0 / sqrt((double)c->head_dim)),
        .causal = 1, .causal_offset = 0,
        .key_mask = masked ? q->mask : NULL,
    };
    TRY(fx_op_attention(ops, &args, err));
    const fx_op_epi residual = {.mode = FX_EPI_ACCUMULATE};
    return fx_op_linear(ops, seq, o, &w->o, x, &residual, err);
}

/* x += (silu(b·Wgᵀ) ⊙ b·Wuᵀ)·Wdᵀ, b = RMSNorm(x). */
static flux_status mlp_block(flux_ctx *ctx, fx_qwen3 *q, const qwen3_layer *w, int64_t seq) {
    const fx_qwen3_config *c = &q->c;
    fx_ops *ops = q->ops;
    fx_err *err = &ctx->err;
    const int64_t h = c->hidden, ff = c->intermediate;
    fx_view x = {q->x, 0, h}, b = {q->a, 0, h};
    fx_view g = {q->u, 0, ff}, p = {q->u, align_up(seq * ff), ff}; /* [seq, ff] each */
    const fx_op_epi residual = {.mode = FX_EPI_ACCUMULATE};

    TRY(fx_op_rmsnorm(ops, seq, h, x, fx_vec(w->norm_post, 0), c->rms_eps, b, err));
    /* Two GEMMs: one [2·ff, h] view over gate_proj and up_proj (adjacent in
     * name-sorted files) measured the same on the 4B (6.61 vs 6.53–6.62 s). */
    TRY(fx_op_linear(ops, seq, b, &w->gate, g, NULL, err));
    TRY(fx_op_linear(ops, seq, b, &w->up, p, NULL, err));
    TRY(fx_op_swiglu(ops, seq, ff, g, p, g, err));
    return fx_op_linear(ops, seq, g, &w->down, x, &residual, err);
}

/* The residual stream to the observer (read back to the host). */
static flux_status observe(flux_ctx *ctx, fx_qwen3 *q, int layer, int64_t seq) {
    if (!q->observe) return FLUX_OK;
    TRY(fx_buf_read(q->ops, q->x, 0, q->host, seq * q->c.hidden, &ctx->err));
    q->observe(q->observe_user, layer, q->host, seq, q->c.hidden);
    return FLUX_OK;
}

flux_status fx_qwen3_encode(flux_ctx *ctx, fx_qwen3 *q, const int32_t *ids, const uint8_t *mask, int seq,
                            float *out) {
    if (!q || !ids || !out) return fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG, "text encoder: NULL argument");
    if (seq < 1 || seq > q->c.max_position_embeddings)
        return fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG, "text encoder: %d tokens, expected 1..%d", seq,
                       q->c.max_position_embeddings);
    if (mask && !mask[0])
        return fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG,
                       "text encoder: token 0 is padding (mask[0] = 0); padding must be on the right");
    TRY(reserve(ctx, q, seq));
    fx_buf_free(q->ops, q->mask);
    q->mask = NULL;
    if (mask) TRY(fx_ops_mask(q->ops, mask, seq, &q->mask, &ctx->err));
    TRY(embed(ctx, q, ids, seq));
    TRY(observe(ctx, q, -1, seq));

    const int64_t h = q->c.hidden, ldo = (int64_t)FX_KLEIN_N_TEXT_STATES * h;
    for (int n = 0; n < q->layers_run; n++) {
        const qwen3_layer *w = &q->layers[n];
        TRY(attention_block(ctx, q, w, seq, mask != NULL));
        TRY(mlp_block(ctx, q, w, seq));
        TRY(observe(ctx, q, n, seq));
        for (int s = 0; s < FX_KLEIN_N_TEXT_STATES; s++)
            if (q->state_layer[s] == n) {
                fx_view x = {q->x, 0, h}, o = {q->out, s * h, ldo};
                TRY(fx_op_copy(q->ops, seq, h, x, o, &ctx->err));
            }
        TRY(fx_ops_sync(q->ops, &ctx->err)); /* progress reports finished work */
        TRY(fx_ctx_checkpoint(ctx, n + 1, q->layers_run)); /* progress substep = layers done; cancel */
    }
    return fx_buf_read(q->ops, q->out, 0, out, seq * ldo, &ctx->err);
}

void fx_qwen3_set_observer(fx_qwen3 *q, fx_qwen3_observer fn, void *user) {
    q->observe = fn;
    q->observe_user = user;
}

double fx_qwen3_flops(const fx_qwen3 *q, int seq) {
    const fx_qwen3_config *c = &q->c;
    const double h = c->hidden, hd = c->head_dim, ff = c->intermediate, S = seq;
    const double params = h * hd * (2.0 * c->heads + 2.0 * c->kv_heads) + 3.0 * h * ff;
    /* causal attention: QKᵀ and P·V over the S(S+1)/2 visible pairs, per query head */
    const double attn = 4.0 * (S * (S + 1) / 2) * hd * c->heads;
    return q->layers_run * (2.0 * params * S + attn);
}
