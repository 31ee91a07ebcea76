/*
 * config_derive.c — configs from tensor shapes and the FLUX.2-klein
 * constants (config_derive.h).
 */
#include "config_derive.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "src/formats/gguf.h"

/* The tensor named by fmt with at least min_ndim dimensions, or an error
 * naming it and what it was needed for. */
static flux_status need(const fx_wset *w, const char *why, int min_ndim, const fx_tensor **out, fx_err *err,
                        const char *fmt, ...) FX_PRINTF(6, 7);

static flux_status need(const fx_wset *w, const char *why, int min_ndim, const fx_tensor **out, fx_err *err,
                        const char *fmt, ...) {
    char name[FX_ST_MAX_NAME];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const fx_tensor *t = fx_wset_find(w, name);
    if (!t)
        return fx_fail(err, FLUX_ERR_MODEL, "%s: no tensor '%s' (needed for the %s; without a model folder every "
                       "dimension comes from the shapes)", fx_wset_display(w), name, why);
    if (t->shape.ndim < min_ndim) {
        char shape[160];
        fx_shape_str(&t->shape, shape, sizeof shape);
        return fx_fail(err, FLUX_ERR_MODEL, "%s: tensor '%s' has shape %s, expected %d dimensions (the %s)",
                       fx_wset_display(w), name, shape, min_ndim, why);
    }
    *out = t;
    return FLUX_OK;
}

/* How many n in 0, 1, ... have a tensor named fmt(n) (the blocks / layers). */
static int count_indexed(const fx_wset *w, const char *fmt) {
    char name[FX_ST_MAX_NAME];
    int n = 0;
    for (;; n++) {
        snprintf(name, sizeof name, fmt, n);
        if (!fx_wset_find(w, name) || n > 100000) return n;
    }
}

static flux_status too_large(const fx_wset *w, const char *what, int64_t v, fx_err *err) {
    return fx_fail(err, FLUX_ERR_MODEL, "%s: %s %lld from the shapes is out of range", fx_wset_display(w), what,
                   (long long)v);
}

#define DIM_OK(v) ((v) >= 1 && (v) <= (1 << 20))

flux_status fx_dit_config_derive(const fx_wset *w, fx_dit_config *c, fx_err *err) {
    memset(c, 0, sizeof *c);
    const fx_tensor *x, *ctx, *t1, *nq, *ff, *out;
    TRY(need(w, "transformer width", 2, &x, err, "x_embedder.weight"));
    TRY(need(w, "text width", 2, &ctx, err, "context_embedder.weight"));
    TRY(need(w, "timestep embedding width", 2, &t1, err, "time_guidance_embed.timestep_embedder.linear_1.weight"));
    TRY(need(w, "output width", 2, &out, err, "proj_out.weight"));
    c->double_blocks = count_indexed(w, "transformer_blocks.%d.attn.to_q.weight");
    c->single_blocks = count_indexed(w, "single_transformer_blocks.%d.attn.to_qkv_mlp_proj.weight");
    if (c->double_blocks)
        TRY(need(w, "head width", 1, &nq, err, "transformer_blocks.0.attn.norm_q.weight"));
    else
        TRY(need(w, "head width", 1, &nq, err, "single_transformer_blocks.0.attn.norm_q.weight"));
    if (c->double_blocks) {
        TRY(need(w, "MLP width", 2, &ff, err, "transformer_blocks.0.ff.linear_in.weight"));
        c->mlp_hidden = (int)(ff->shape.d[0] / 2); /* gate | up */
    } else {
        /* single block: to_qkv_mlp_proj rows = 3·hidden + 2·mlp */
        TRY(need(w, "MLP width", 2, &ff, err, "single_transformer_blocks.0.attn.to_qkv_mlp_proj.weight"));
        c->mlp_hidden = (int)((ff->shape.d[0] - 3 * x->shape.d[0]) / 2);
    }
    const int64_t hidden = x->shape.d[0], head_dim = nq->shape.d[0];
    if (!DIM_OK(hidden)) return too_large(w, "hidden size", hidden, err);
    if (!DIM_OK(head_dim) || hidden % head_dim || head_dim % 8)
        return fx_fail(err, FLUX_ERR_MODEL, "%s: head width %lld (norm_q) does not divide the hidden size %lld into "
                       "heads of four even RoPE axes", fx_wset_display(w), (long long)head_dim, (long long)hidden);
    c->patch_size = 1;
    c->in_channels = (int)x->shape.d[1];
    c->out_channels = (int)out->shape.d[0];
    c->hidden = (int)hidden;
    c->head_dim = (int)head_dim;
    c->heads = (int)(hidden / head_dim);
    c->text_dim = (int)ctx->shape.d[1];
    c->timestep_dim = (int)t1->shape.d[1];
    if (!DIM_OK(c->mlp_hidden)) return too_large(w, "MLP width", c->mlp_hidden, err);
    if (!DIM_OK(c->in_channels) || !DIM_OK(c->text_dim) || !DIM_OK(c->timestep_dim) || c->timestep_dim % 2)
        return fx_fail(err, FLUX_ERR_MODEL, "%s: input widths %d (latent), %d (text), %d (timestep) from the shapes "
                       "are out of range", fx_wset_display(w), c->in_channels, c->text_dim, c->timestep_dim);
    c->mlp_ratio = (double)c->mlp_hidden / (double)c->hidden;
    for (int i = 0; i < FX_DIT_ROPE_AXES; i++) c->axes_dims[i] = c->head_dim / FX_DIT_ROPE_AXES;
    c->rope_theta = FX_FLUX2_ROPE_THETA;
    c->eps = (float)FX_FLUX2_EPS;
    return FLUX_OK;
}

flux_status fx_qwen3_config_derive(const fx_wset *w, fx_qwen3_config *c, fx_err *err) {
    memset(c, 0, sizeof *c);
    const fx_tensor *emb, *q, *k, *qn, *gate;
    TRY(need(w, "vocabulary and hidden size", 2, &emb, err, "model.embed_tokens.weight"));
    TRY(need(w, "attention width", 2, &q, err, "model.layers.0.self_attn.q_proj.weight"));
    TRY(need(w, "key/value width", 2, &k, err, "model.layers.0.self_attn.k_proj.weight"));
    TRY(need(w, "head width", 1, &qn, err, "model.layers.0.self_attn.q_norm.weight"));
    TRY(need(w, "MLP width", 2, &gate, err, "model.layers.0.mlp.gate_proj.weight"));
    const int64_t hd = qn->shape.d[0];
    if (!DIM_OK(hd) || hd % 2 || q->shape.d[0] % hd || k->shape.d[0] % hd || !DIM_OK(emb->shape.d[1]) ||
        emb->shape.d[0] < 1 || emb->shape.d[0] > (1 << 24) || !DIM_OK(gate->shape.d[0]))
        return fx_fail(err, FLUX_ERR_MODEL, "%s: the text encoder's shapes (head width %lld, q rows %lld, k rows "
                       "%lld) do not describe a Qwen3 model", fx_wset_display(w), (long long)hd,
                       (long long)q->shape.d[0], (long long)k->shape.d[0]);
    c->vocab = (int)emb->shape.d[0];
    c->hidden = (int)emb->shape.d[1];
    c->head_dim = (int)hd;
    c->heads = (int)(q->shape.d[0] / hd);
    c->kv_heads = (int)(k->shape.d[0] / hd);
    c->intermediate = (int)gate->shape.d[0];
    c->layers = count_indexed(w, "model.layers.%d.input_layernorm.weight");
    if (c->heads < 1 || c->kv_heads < 1 || c->heads % c->kv_heads)
        return fx_fail(err, FLUX_ERR_MODEL, "%s: %d query heads are not a multiple of %d key/value heads",
                       fx_wset_display(w), c->heads, c->kv_heads);
    if (c->layers < FX_KLEIN_TEXT_LAYERS_USED)
        return fx_fail(err, FLUX_ERR_MODEL, "%s: %d text encoder layers, but klein reads hidden state %d (needs >= %d)",
                       fx_wset_display(w), c->layers, FX_KLEIN_TEXT_LAYERS_USED, FX_KLEIN_TEXT_LAYERS_USED);
    c->layers_used = FX_KLEIN_TEXT_LAYERS_USED;
    c->rope_theta = FX_QWEN3_ROPE_THETA;
    c->rms_eps = (float)FX_QWEN3_RMS_EPS;
    c->max_position_embeddings = FX_QWEN3_MAX_POSITIONS;
    c->tie_word_embeddings = !fx_wset_find(w, "lm_head.weight");
    /* a GGUF file states these itself (llama.cpp gguf-py constants) */
    const fx_tensor_file *f = fx_wset_file_count(w) ? fx_wset_file_at(w, 0) : NULL;
    const fx_gguf *g = f ? fx_tensor_file_gguf(f) : NULL;
    double v;
    if (g && !fx_gguf_get_float(g, "qwen3.rope.freq_base", &v) && v > 0) c->rope_theta = v;
    if (g && !fx_gguf_get_float(g, "qwen3.attention.layer_norm_rms_epsilon", &v) && v > 0) c->rms_eps = (float)v;
    return FLUX_OK;
}

flux_status fx_vae_config_derive(const fx_wset *w, fx_vae_config *c, fx_err *err) {
    memset(c, 0, sizeof *c);
    const fx_tensor *cin, *din, *dout, *bn, *r;
    TRY(need(w, "VAE input channels", 4, &cin, err, "encoder.conv_in.weight"));
    TRY(need(w, "VAE latent channels", 4, &din, err, "decoder.conv_in.weight"));
    TRY(need(w, "VAE output channels", 4, &dout, err, "decoder.conv_out.weight"));
    TRY(need(w, "latent normalization", 1, &bn, err, "bn.running_mean"));
    c->levels = count_indexed(w, "encoder.down_blocks.%d.resnets.0.conv1.weight");
    const int dec_levels = count_indexed(w, "decoder.up_blocks.%d.resnets.0.conv1.weight");
    if (c->levels < 1 || c->levels > FX_VAE_MAX_LEVELS || dec_levels != c->levels)
        return fx_fail(err, FLUX_ERR_MODEL, "%s: the VAE has %d encoder and %d decoder levels (expected 1 to %d, the "
                       "same on both sides)", fx_wset_display(w), c->levels, dec_levels, FX_VAE_MAX_LEVELS);
    c->layers_per_block = count_indexed(w, "encoder.down_blocks.0.resnets.%d.conv1.weight");
    const int dec_res = count_indexed(w, "decoder.up_blocks.0.resnets.%d.conv1.weight");
    if (dec_res != c->layers_per_block + 1)
        return fx_fail(err, FLUX_ERR_MODEL, "%s: the VAE decoder has %d resnets per level, the encoder %d (the "
                       "decoder has one more)", fx_wset_display(w), dec_res, c->layers_per_block);
    for (int i = 0; i < c->levels; i++) {
        TRY(need(w, "encoder widths", 1, &r, err, "encoder.down_blocks.%d.resnets.0.conv1.weight", i));
        c->block_out_channels[i] = (int)r->shape.d[0];
        /* diffusers up_blocks run from the latent end: up_blocks.i has width level L−1−i */
        TRY(need(w, "decoder widths", 1, &r, err, "decoder.up_blocks.%d.resnets.0.conv1.weight", i));
        c->decoder_block_out_channels[c->levels - 1 - i] = (int)r->shape.d[0];
    }
    c->in_channels = (int)cin->shape.d[1];
    c->latent_channels = (int)din->shape.d[1];
    c->out_channels = (int)dout->shape.d[0];
    c->norm_num_groups = FX_FLUX2_VAE_GROUPS;
    c->patch[0] = c->patch[1] = FX_FLUX2_VAE_PATCH;
    c->use_quant_conv = fx_wset_find(w, "quant_conv.weight") != NULL;
    c->use_post_quant_conv = fx_wset_find(w, "post_quant_conv.weight") != NULL;
    c->mid_block_add_attention = fx_wset_find(w, "encoder.mid_block.attentions.0.to_q.weight") != NULL;
    c->batch_norm_eps = (float)FX_FLUX2_VAE_BN_EPS;
    c->norm_eps = 1e-6f; /* GroupNorm eps, as vae/config.json parsing */
    if (c->in_channels != 3 || c->out_channels != 3)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s: only RGB VAEs are supported (in/out channels %d/%d)",
                       fx_wset_display(w), c->in_channels, c->out_channels);
    if (!DIM_OK(c->latent_channels) || bn->shape.d[0] != (int64_t)c->latent_channels * 4)
        return fx_fail(err, FLUX_ERR_MODEL, "%s: 'bn.running_mean' has %lld channels, expected %d latent channels × "
                       "2×2 patches", fx_wset_display(w), (long long)bn->shape.d[0], c->latent_channels);
    for (int i = 0; i < c->levels; i++)
        if (!DIM_OK(c->block_out_channels[i]) || !DIM_OK(c->decoder_block_out_channels[i]) ||
            c->block_out_channels[i] % c->norm_num_groups || c->decoder_block_out_channels[i] % c->norm_num_groups)
            return fx_fail(err, FLUX_ERR_MODEL, "%s: VAE level %d widths %d (encoder) / %d (decoder) are not "
                           "multiples of the %d GroupNorm groups", fx_wset_display(w), i, c->block_out_channels[i],
                           c->decoder_block_out_channels[i], c->norm_num_groups);
    return FLUX_OK;
}

void fx_sched_config_klein(fx_sched_config *c) {
    memset(c, 0, sizeof *c);
    c->num_train_timesteps = 1000;
    c->use_dynamic_shifting = 1;
    c->exponential_shift = 1;
    c->shift = 3.0;
    c->base_shift = 0.5;
    c->max_shift = 1.15;
    c->base_image_seq_len = 256;
    c->max_image_seq_len = 4096;
}
