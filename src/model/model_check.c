/*
 * model_check.c — the tensor tables of spec §2, computed from the configs,
 * checked against opened weight sets at load time (so a wrong or truncated
 * checkpoint fails at flux_load with a precise message, not mid-generation).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "src/formats/gguf.h"

/* Check one weight whose name is printf-formatted. */
static flux_status want(const fx_wset *w, fx_err *err, fx_shape shape, const char *fmt, ...) FX_PRINTF(4, 5);

static flux_status want(const fx_wset *w, fx_err *err, fx_shape shape, const char *fmt, ...) {
    char name[FX_ST_MAX_NAME];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return fx_wset_check_weight(w, name, &shape, err);
}

#define WANT(shape, ...) TRY(want(w, err, shape, __VA_ARGS__))

/* ------------------------------------------------------------------------ */
/* Transformer (spec §2.1): d = hidden, m = MLP width, no biases            */
/* ------------------------------------------------------------------------ */

flux_status fx_check_dit_weights(const fx_wset *w, const fx_dit_config *c, fx_err *err) {
    const int64_t d = c->hidden, m = c->mlp_hidden, hd = c->head_dim;
    WANT(FX_SHAPE(d, c->in_channels), "x_embedder.weight");
    WANT(FX_SHAPE(d, c->text_dim), "context_embedder.weight");
    WANT(FX_SHAPE(d, c->timestep_dim), "time_guidance_embed.timestep_embedder.linear_1.weight");
    WANT(FX_SHAPE(d, d), "time_guidance_embed.timestep_embedder.linear_2.weight");
    WANT(FX_SHAPE(6 * d, d), "double_stream_modulation_img.linear.weight");
    WANT(FX_SHAPE(6 * d, d), "double_stream_modulation_txt.linear.weight");
    WANT(FX_SHAPE(3 * d, d), "single_stream_modulation.linear.weight");
    for (int i = 0; i < c->double_blocks; i++) {
        static const char *const square[] = {"to_q", "to_k", "to_v", "to_out.0",
                                             "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out"};
        static const char *const norms[] = {"norm_q", "norm_k", "norm_added_q", "norm_added_k"};
        for (int k = 0; k < 8; k++) WANT(FX_SHAPE(d, d), "transformer_blocks.%d.attn.%s.weight", i, square[k]);
        for (int k = 0; k < 4; k++) WANT(FX_SHAPE(hd), "transformer_blocks.%d.attn.%s.weight", i, norms[k]);
        WANT(FX_SHAPE(2 * m, d), "transformer_blocks.%d.ff.linear_in.weight", i);       /* gate | up */
        WANT(FX_SHAPE(d, m), "transformer_blocks.%d.ff.linear_out.weight", i);
        WANT(FX_SHAPE(2 * m, d), "transformer_blocks.%d.ff_context.linear_in.weight", i);
        WANT(FX_SHAPE(d, m), "transformer_blocks.%d.ff_context.linear_out.weight", i);
    }
    for (int j = 0; j < c->single_blocks; j++) {
        WANT(FX_SHAPE(3 * d + 2 * m, d), "single_transformer_blocks.%d.attn.to_qkv_mlp_proj.weight", j);
        WANT(FX_SHAPE(hd), "single_transformer_blocks.%d.attn.norm_q.weight", j);
        WANT(FX_SHAPE(hd), "single_transformer_blocks.%d.attn.norm_k.weight", j);
        WANT(FX_SHAPE(d, d + m), "single_transformer_blocks.%d.attn.to_out.weight", j);
    }
    WANT(FX_SHAPE(2 * d, d), "norm_out.linear.weight"); /* scale | shift */
    WANT(FX_SHAPE(c->out_channels, d), "proj_out.weight");
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* VAE (spec §2.3), following block_out_channels / layers_per_block         */
/* ------------------------------------------------------------------------ */

/* Resnet block R(prefix, cin, cout). */
static flux_status resnet(const fx_wset *w, fx_err *err, const char *prefix, int64_t cin, int64_t cout) {
    WANT(FX_SHAPE(cin), "%s.norm1.weight", prefix);
    WANT(FX_SHAPE(cin), "%s.norm1.bias", prefix);
    WANT(FX_SHAPE(cout, cin, 3, 3), "%s.conv1.weight", prefix);
    WANT(FX_SHAPE(cout), "%s.conv1.bias", prefix);
    WANT(FX_SHAPE(cout), "%s.norm2.weight", prefix);
    WANT(FX_SHAPE(cout), "%s.norm2.bias", prefix);
    WANT(FX_SHAPE(cout, cout, 3, 3), "%s.conv2.weight", prefix);
    WANT(FX_SHAPE(cout), "%s.conv2.bias", prefix);
    if (cin != cout) {
        WANT(FX_SHAPE(cout, cin, 1, 1), "%s.conv_shortcut.weight", prefix);
        WANT(FX_SHAPE(cout), "%s.conv_shortcut.bias", prefix);
    }
    return FLUX_OK;
}

/* Attention block A(prefix, c): GroupNorm + 2-D linear q/k/v/out with biases. */
static flux_status attention(const fx_wset *w, fx_err *err, const char *prefix, int64_t c) {
    static const char *const proj[] = {"to_q", "to_k", "to_v", "to_out.0"};
    WANT(FX_SHAPE(c), "%s.group_norm.weight", prefix);
    WANT(FX_SHAPE(c), "%s.group_norm.bias", prefix);
    for (int k = 0; k < 4; k++) {
        WANT(FX_SHAPE(c, c), "%s.%s.weight", prefix, proj[k]);
        WANT(FX_SHAPE(c), "%s.%s.bias", prefix, proj[k]);
    }
    return FLUX_OK;
}

static flux_status conv(const fx_wset *w, fx_err *err, const char *prefix, int64_t cout, int64_t cin, int64_t k) {
    WANT(FX_SHAPE(cout, cin, k, k), "%s.weight", prefix);
    WANT(FX_SHAPE(cout), "%s.bias", prefix);
    return FLUX_OK;
}

static flux_status mid_block(const fx_wset *w, fx_err *err, const char *side, int64_t c, int attn) {
    char p[96];
    snprintf(p, sizeof p, "%s.mid_block.resnets.0", side);
    TRY(resnet(w, err, p, c, c));
    if (attn) {
        snprintf(p, sizeof p, "%s.mid_block.attentions.0", side);
        TRY(attention(w, err, p, c));
    }
    snprintf(p, sizeof p, "%s.mid_block.resnets.1", side);
    return resnet(w, err, p, c, c);
}

flux_status fx_check_vae_weights(const fx_wset *w, const fx_vae_config *c, fx_err *err) {
    const int L = c->levels;
    const int64_t lat = c->latent_channels;
    const int *enc = c->block_out_channels;
    char p[96];

    /* encoder: conv_in, L levels of layers_per_block resnets (+ downsample
     * except the last), mid block, norm, conv_out to mean‖logvar */
    TRY(conv(w, err, "encoder.conv_in", enc[0], c->in_channels, 3));
    for (int i = 0; i < L; i++) {
        int64_t cin = i ? enc[i - 1] : enc[0], cout = enc[i];
        for (int j = 0; j < c->layers_per_block; j++) {
            snprintf(p, sizeof p, "encoder.down_blocks.%d.resnets.%d", i, j);
            TRY(resnet(w, err, p, j ? cout : cin, cout));
        }
        if (i < L - 1) {
            snprintf(p, sizeof p, "encoder.down_blocks.%d.downsamplers.0.conv", i);
            TRY(conv(w, err, p, cout, cout, 3));
        }
    }
    TRY(mid_block(w, err, "encoder", enc[L - 1], c->mid_block_add_attention));
    WANT(FX_SHAPE(enc[L - 1]), "encoder.conv_norm_out.weight");
    WANT(FX_SHAPE(enc[L - 1]), "encoder.conv_norm_out.bias");
    TRY(conv(w, err, "encoder.conv_out", 2 * lat, enc[L - 1], 3));
    if (c->use_quant_conv) TRY(conv(w, err, "quant_conv", 2 * lat, 2 * lat, 1));
    if (c->use_post_quant_conv) TRY(conv(w, err, "post_quant_conv", lat, lat, 1));

    /* decoder: channels in reverse, layers_per_block + 1 resnets per level,
     * upsample except the last level */
    int dec[FX_VAE_MAX_LEVELS];
    for (int i = 0; i < L; i++) dec[i] = c->decoder_block_out_channels[L - 1 - i];
    TRY(conv(w, err, "decoder.conv_in", dec[0], lat, 3));
    TRY(mid_block(w, err, "decoder", dec[0], c->mid_block_add_attention));
    for (int i = 0; i < L; i++) {
        int64_t cin = i ? dec[i - 1] : dec[0], cout = dec[i];
        for (int j = 0; j < c->layers_per_block + 1; j++) {
            snprintf(p, sizeof p, "decoder.up_blocks.%d.resnets.%d", i, j);
            TRY(resnet(w, err, p, j ? cout : cin, cout));
        }
        if (i < L - 1) {
            snprintf(p, sizeof p, "decoder.up_blocks.%d.upsamplers.0.conv", i);
            TRY(conv(w, err, p, cout, cout, 3));
        }
    }
    WANT(FX_SHAPE(dec[L - 1]), "decoder.conv_norm_out.weight");
    WANT(FX_SHAPE(dec[L - 1]), "decoder.conv_norm_out.bias");
    TRY(conv(w, err, "decoder.conv_out", c->out_channels, dec[L - 1], 3));

    /* latent BatchNorm statistics over the packed channels */
    const int64_t packed = lat * c->patch[0] * c->patch[1];
    WANT(FX_SHAPE(packed), "bn.running_mean");
    WANT(FX_SHAPE(packed), "bn.running_var");
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Qwen3 (spec §2.4): embedding + the layers klein runs                     */
/* ------------------------------------------------------------------------ */

flux_status fx_check_qwen3_weights(const fx_wset *w, const fx_qwen3_config *c, fx_err *err) {
    const int64_t h = c->hidden, hd = c->head_dim, q = (int64_t)c->heads * hd, kv = (int64_t)c->kv_heads * hd,
                  ff = c->intermediate;
    WANT(FX_SHAPE(c->vocab, h), "model.embed_tokens.weight");
    for (int n = 0; n < c->layers_used; n++) {
        WANT(FX_SHAPE(h), "model.layers.%d.input_layernorm.weight", n);
        WANT(FX_SHAPE(q, h), "model.layers.%d.self_attn.q_proj.weight", n);
        WANT(FX_SHAPE(kv, h), "model.layers.%d.self_attn.k_proj.weight", n);
        WANT(FX_SHAPE(kv, h), "model.layers.%d.self_attn.v_proj.weight", n);
        WANT(FX_SHAPE(h, q), "model.layers.%d.self_attn.o_proj.weight", n);
        WANT(FX_SHAPE(hd), "model.layers.%d.self_attn.q_norm.weight", n);
        WANT(FX_SHAPE(hd), "model.layers.%d.self_attn.k_norm.weight", n);
        WANT(FX_SHAPE(h), "model.layers.%d.post_attention_layernorm.weight", n);
        WANT(FX_SHAPE(ff, h), "model.layers.%d.mlp.gate_proj.weight", n);
        WANT(FX_SHAPE(ff, h), "model.layers.%d.mlp.up_proj.weight", n);
        WANT(FX_SHAPE(h, ff), "model.layers.%d.mlp.down_proj.weight", n);
    }
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Qwen3 GGUF key/values against text_encoder/config.json                   */
/* ------------------------------------------------------------------------ */

flux_status fx_check_qwen3_gguf(const fx_wset *w, const fx_qwen3_config *c, fx_err *err) {
    const fx_st_file *f = fx_wset_file_count(w) ? fx_wset_file_at(w, 0) : NULL;
    const fx_gguf *g = f ? fx_st_gguf(f) : NULL;
    if (!g) return FLUX_OK;
    const char *file = fx_st_display(f), *arch = NULL;
    if (!fx_gguf_get_str(g, "general.architecture", &arch) && strcmp(arch, "qwen3"))
        return fx_fail(err, FLUX_ERR_MODEL, "%s: general.architecture is '%.60s', expected 'qwen3' (a Qwen3 text encoder)",
                       file, arch);
    const struct {
        const char *key;
        long long want;
        const char *config;
    } ints[] = {
        {"qwen3.embedding_length", c->hidden, "hidden_size"},
        {"qwen3.feed_forward_length", c->intermediate, "intermediate_size"},
        {"qwen3.attention.head_count", c->heads, "num_attention_heads"},
        {"qwen3.attention.head_count_kv", c->kv_heads, "num_key_value_heads"},
        {"qwen3.attention.key_length", c->head_dim, "head_dim"},
    };
    uint64_t v;
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        if (!fx_gguf_get_uint(g, ints[i].key, &v) && (long long)v != ints[i].want)
            return fx_fail(err, FLUX_ERR_MODEL, "%s: %s is %llu, but text_encoder/config.json has %s %lld (a different model)",
                           file, ints[i].key, (unsigned long long)v, ints[i].config, ints[i].want);
    if (!fx_gguf_get_uint(g, "qwen3.block_count", &v) && v < (uint64_t)c->layers_used)
        return fx_fail(err, FLUX_ERR_MODEL, "%s: qwen3.block_count is %llu, klein runs %d layers", file,
                       (unsigned long long)v, c->layers_used);
    double d;
    if (!fx_gguf_get_float(g, "qwen3.rope.freq_base", &d) && fabs(d - c->rope_theta) > 1e-6 * c->rope_theta)
        return fx_fail(err, FLUX_ERR_MODEL,
                       "%s: qwen3.rope.freq_base is %g, but text_encoder/config.json has rope_theta %g (a different "
                       "Qwen3 release?)",
                       file, d, c->rope_theta);
    if (!fx_gguf_get_float(g, "qwen3.attention.layer_norm_rms_epsilon", &d) && fabs(d - c->rms_eps) > 1e-3 * c->rms_eps)
        return fx_fail(err, FLUX_ERR_MODEL, "%s: qwen3.attention.layer_norm_rms_epsilon is %g, config rms_norm_eps %g",
                       file, d, (double)c->rms_eps);
    return FLUX_OK;
}
