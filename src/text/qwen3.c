/*
 * qwen3.c — the Qwen3 text encoder of klein (spec §6.1, §6.2): weight views
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
#include <sys/mman.h>

#include "src/model/model.h"

typedef struct qwen3_layer {
    fx_weight q, k, v, o;        /* [hq·hd, h], [hkv·hd, h] ×2, [h, hq·hd] */
    fx_weight gate, up, down;    /* [ff, h] ×2, [h, ff] */
    float *norm_in, *norm_post;  /* [h] input_layernorm, post_attention_layernorm */
    float *norm_q, *norm_k;      /* [hd] per-head QK-RMSNorm */
} qwen3_layer;

struct fx_qwen3 {
    fx_qwen3_config c;
    const fx_tensor *embed;      /* [vocab, h], read row by row */
    qwen3_layer *layers;         /* [layers_run] */
    int layers_run;              /* 1 + index of the last layer whose output is extracted */
    int state_layer[FX_KLEIN_N_TEXT_STATES]; /* output of layer state_layer[s] → out block s */

    /* Workspace for up to cap rows (grown outside the layer loop only):
     *   x [cap, h]  residual stream      a [cap, h]  normed input of a sub-block
     *   u: attention phase  qkv [cap, (hq + 2·hkv)·hd] then o [cap, hq·hd]
     *      MLP phase        g [cap, ff] then p [cap, ff]   (same memory) */
    int64_t cap;
    void *mem;
    size_t mem_bytes;
    float *x, *a, *u;
    fx_rope_table rope;          /* positions 0 .. cap−1, half-split, θ from the config */

    fx_qwen3_observer observe;
    void *observe_user;
};

/* ------------------------------------------------------------------------ */
/* Weights                                                                  */
/* ------------------------------------------------------------------------ */

static flux_status load_layer(fx_wset *w, const fx_qwen3_config *c, int n, qwen3_layer *l, fx_err *err) {
    const int64_t h = c->hidden, hd = c->head_dim, ff = c->intermediate;
    const int64_t qd = (int64_t)c->heads * hd, kvd = (int64_t)c->kv_heads * hd;
    TRY(fx_wset_linearf(w, &l->q, qd, h, err, "model.layers.%d.self_attn.q_proj.weight", n));
    TRY(fx_wset_linearf(w, &l->k, kvd, h, err, "model.layers.%d.self_attn.k_proj.weight", n));
    TRY(fx_wset_linearf(w, &l->v, kvd, h, err, "model.layers.%d.self_attn.v_proj.weight", n));
    TRY(fx_wset_linearf(w, &l->o, h, qd, err, "model.layers.%d.self_attn.o_proj.weight", n));
    TRY(fx_wset_linearf(w, &l->gate, ff, h, err, "model.layers.%d.mlp.gate_proj.weight", n));
    TRY(fx_wset_linearf(w, &l->up, ff, h, err, "model.layers.%d.mlp.up_proj.weight", n));
    TRY(fx_wset_linearf(w, &l->down, h, ff, err, "model.layers.%d.mlp.down_proj.weight", n));
    TRY(fx_wset_vecf(w, &l->norm_in, h, err, "model.layers.%d.input_layernorm.weight", n));
    TRY(fx_wset_vecf(w, &l->norm_post, h, err, "model.layers.%d.post_attention_layernorm.weight", n));
    TRY(fx_wset_vecf(w, &l->norm_q, hd, err, "model.layers.%d.self_attn.q_norm.weight", n));
    TRY(fx_wset_vecf(w, &l->norm_k, hd, err, "model.layers.%d.self_attn.k_norm.weight", n));
    /* start reading the projections in the background (cold page cache) */
    const fx_weight *proj[] = {&l->q, &l->k, &l->v, &l->o, &l->gate, &l->up, &l->down};
    for (size_t i = 0; i < sizeof proj / sizeof *proj; i++) fx_wset_weight_willneed(w, proj[i]);
    return FLUX_OK;
}

static void free_workspace(fx_qwen3 *q) {
    fx_rope_table_free(&q->rope);
    if (q->mem) munmap(q->mem, q->mem_bytes);
    q->mem = NULL, q->mem_bytes = 0, q->cap = 0;
    q->x = q->a = q->u = NULL;
}

void fx_qwen3_free(fx_qwen3 *q) {
    if (!q) return;
    if (q->layers)
        for (int n = 0; n < q->layers_run; n++) {
            qwen3_layer *l = &q->layers[n];
            free(l->norm_in), free(l->norm_post), free(l->norm_q), free(l->norm_k);
        }
    free(q->layers);
    free_workspace(q);
    free(q);
}

static flux_status load_all(fx_qwen3 *q, fx_wset *w, fx_err *err) {
    const fx_qwen3_config *c = &q->c;
    fx_shape es = FX_SHAPE(c->vocab, c->hidden);
    TRY(fx_wset_get(w, "model.embed_tokens.weight", &es, &q->embed, err));
    if (fx_st_weight_dtype(q->embed->dtype) < 0 || !fx_tensor_data(q->embed))
        return fx_fail(err, FLUX_ERR_MODEL, "%s: model.embed_tokens.weight: dtype %s is not F32, F16 or BF16",
                       fx_wset_display(w), fx_st_dtype_name(q->embed->dtype));
    for (int n = 0; n < q->layers_run; n++) TRY(load_layer(w, c, n, &q->layers[n], err));
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
    int64_t floats = 2 * align_up(seq * h) + (attn > mlp ? attn : mlp);
    q->mem_bytes = (size_t)floats * sizeof(float);
    /* Anonymous mapping: page-aligned, eligible for huge pages. */
    void *mem = mmap(NULL, q->mem_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        q->mem_bytes = 0;
        return fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory: text encoder workspace of %.1f MB (%lld tokens)",
                       (double)floats * 4e-6, (long long)seq);
    }
#ifdef MADV_HUGEPAGE
    madvise(mem, q->mem_bytes, MADV_HUGEPAGE);
#endif
    q->mem = mem;
    q->x = mem;
    q->a = q->x + align_up(seq * h);
    q->u = q->a + align_up(seq * h);

    int32_t *pos = malloc((size_t)seq * sizeof *pos);
    if (!pos) {
        free_workspace(q);
        return fx_fail(&ctx->err, FLUX_ERR_NOMEM, "out of memory (text encoder positions)");
    }
    for (int64_t l = 0; l < seq; l++) pos[l] = (int32_t)l;
    int dims = c->head_dim;
    flux_status st = fx_rope_table_init(&q->rope, pos, seq, 1, &dims, c->rope_theta, FX_ROPE_HALF_SPLIT, &ctx->err);
    free(pos);
    if (!st) st = fx_rope_table_check(&q->rope, seq, c->head_dim, &ctx->err);
    if (st) {
        free_workspace(q);
        return st;
    }
    q->cap = seq;
    fx_log(&ctx->log, 2, "flux: text encoder workspace: %lld tokens, %.1f MB", (long long)seq, (double)q->mem_bytes / 1e6);
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                  */
/* ------------------------------------------------------------------------ */

/* x[l] = embed_tokens[ids[l]]: only the rows the sequence uses are read. */
static flux_status embed(flux_ctx *ctx, const fx_qwen3 *q, const int32_t *ids, int64_t seq) {
    const int64_t h = q->c.hidden;
    const size_t row_bytes = (size_t)h * fx_st_dtype_size(q->embed->dtype);
    const char *table = fx_tensor_data(q->embed);
    for (int64_t l = 0; l < seq; l++) {
        if (ids[l] < 0 || ids[l] >= q->c.vocab)
            return fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG, "text encoder: token %lld has id %d, expected 0..%d",
                           (long long)l, ids[l], q->c.vocab - 1);
        fx_st_convert_f32(table + (size_t)ids[l] * row_bytes, q->embed->dtype, h, q->x + l * h);
    }
    return FLUX_OK;
}

/* x += Attn(RoPE(norm(a·Wqᵀ)), RoPE(norm(a·Wkᵀ)), a·Wvᵀ)·Woᵀ, a = RMSNorm(x). */
static flux_status attention_block(flux_ctx *ctx, fx_qwen3 *q, const qwen3_layer *w, int64_t seq,
                                   const uint8_t *mask) {
    const fx_qwen3_config *c = &q->c;
    fx_kctx once = ctx->kc; /* each weight is read once per prompt: no repacked copies */
    once.packs = NULL;
    const fx_kctx *kc = &once;
    const int64_t h = c->hidden, hd = c->head_dim, qd = (int64_t)c->heads * hd, kvd = (int64_t)c->kv_heads * hd;
    const int64_t ldu = qkv_cols(c);
    float *qs = q->u, *ks = qs + qd, *vs = ks + kvd;   /* [seq, ldu] */
    float *o = q->u + align_up(seq * ldu);             /* [seq, qd] */

    fx_rmsnorm(kc, seq, h, q->x, h, w->norm_in, c->rms_eps, q->a, h);
    fx_linear(kc, seq, q->a, h, &w->q, qs, ldu, NULL);
    fx_linear(kc, seq, q->a, h, &w->k, ks, ldu, NULL);
    fx_linear(kc, seq, q->a, h, &w->v, vs, ldu, NULL);
    fx_qk_norm_rope(kc, qs, ldu, seq, c->heads, c->head_dim, w->norm_q, c->rms_eps, &q->rope);
    fx_qk_norm_rope(kc, ks, ldu, seq, c->kv_heads, c->head_dim, w->norm_k, c->rms_eps, &q->rope);
    fx_attn_args args = {
        .sq = seq, .sk = seq, .hq = c->heads, .hkv = c->kv_heads, .d = c->head_dim,
        .q = qs, .ldq = ldu,
        .k = ks, .ldk = ldu,
        .v = vs, .ldv = ldu,
        .o = o, .ldo = qd,
        .scale = (float)(1.0 / sqrt((double)c->head_dim)),
        .causal = 1, .causal_offset = 0,
        .key_mask = mask,
    };
    TRY(fx_attention(kc, &args, &ctx->err));
    const fx_epilogue residual = {.mode = FX_EPI_ACCUMULATE};
    fx_linear(kc, seq, o, qd, &w->o, q->x, h, &residual);
    return FLUX_OK;
}

/* x += (silu(b·Wgᵀ) ⊙ b·Wuᵀ)·Wdᵀ, b = RMSNorm(x). */
static void mlp_block(flux_ctx *ctx, fx_qwen3 *q, const qwen3_layer *w, int64_t seq) {
    const fx_qwen3_config *c = &q->c;
    fx_kctx once = ctx->kc; /* each weight is read once per prompt: no repacked copies */
    once.packs = NULL;
    const fx_kctx *kc = &once;
    const int64_t h = c->hidden, ff = c->intermediate;
    float *g = q->u, *p = g + align_up(seq * ff); /* [seq, ff] each */
    const fx_epilogue residual = {.mode = FX_EPI_ACCUMULATE};

    fx_rmsnorm(kc, seq, h, q->x, h, w->norm_post, c->rms_eps, q->a, h);
    /* Two GEMMs: one [2·ff, h] view over gate_proj and up_proj (adjacent in
     * name-sorted files) measured the same on the 4B (6.61 vs 6.53–6.62 s). */
    fx_linear(kc, seq, q->a, h, &w->gate, g, ff, NULL);
    fx_linear(kc, seq, q->a, h, &w->up, p, ff, NULL);
    fx_swiglu(kc, seq, ff, g, ff, p, ff, g, ff);
    fx_linear(kc, seq, g, ff, &w->down, q->x, h, &residual);
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
    TRY(embed(ctx, q, ids, seq));
    if (q->observe) q->observe(q->observe_user, -1, q->x, seq, q->c.hidden);

    const int64_t h = q->c.hidden, ldo = (int64_t)FX_KLEIN_N_TEXT_STATES * h;
    for (int n = 0; n < q->layers_run; n++) {
        const qwen3_layer *w = &q->layers[n];
        TRY(attention_block(ctx, q, w, seq, mask));
        mlp_block(ctx, q, w, seq);
        if (q->observe) q->observe(q->observe_user, n, q->x, seq, q->c.hidden);
        for (int s = 0; s < FX_KLEIN_N_TEXT_STATES; s++)
            if (q->state_layer[s] == n)
                for (int64_t l = 0; l < seq; l++)
                    memcpy(out + l * ldo + s * h, q->x + l * h, (size_t)h * sizeof(float));
        TRY(fx_ctx_checkpoint(ctx, n + 1, q->layers_run)); /* progress substep = layers done; cancel */
    }
    return FLUX_OK;
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
