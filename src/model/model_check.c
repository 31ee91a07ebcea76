/*
 * model_check.c — tensor tables computed from the configs (the published checkpoints' names),
 * checked against opened weight sets at load time (so a wrong or truncated
 * checkpoint fails at flux_load with a precise message, not mid-generation):
 * every tensor a stage needs must be there with its shape, and every tensor
 * the file has must be one of those (or a known unused one), since weights
 * the config does not use mean the two disagree: a config.json cut to fewer
 * blocks would silently run part of the model.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "src/formats/gguf.h"

/* A check in progress: the set, which of its tensors were claimed. */
typedef struct checker {
    const fx_wset *w;
    unsigned char *seen; /* [fx_wset_count(w)] */
    fx_err *err;
} checker;

static flux_status checker_init(checker *ck, const fx_wset *w, fx_err *err) {
    TRY(fx_wset_check_quant(w, err)); /* first: a format flux.c does not read is named, not a shape */
    ck->w = w;
    ck->err = err;
    ck->seen = calloc(fx_wset_count(w) + 1, 1);
    return ck->seen ? FLUX_OK : fx_fail(err, FLUX_ERR_NOMEM, "out of memory checking %s", fx_wset_display(w));
}

/* Check one weight whose name is printf-formatted, and claim it. */
static flux_status want(checker *ck, fx_shape shape, const char *fmt, ...) FX_PRINTF(3, 4);

static flux_status want(checker *ck, fx_shape shape, const char *fmt, ...) {
    char name[FX_ST_MAX_NAME];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    TRY(fx_wset_check_weight(ck->w, name, &shape, ck->err));
    long i = fx_wset_index(ck->w, name);
    if (i >= 0) ck->seen[i] = 1;
    return FLUX_OK;
}

#define WANT(shape, ...) TRY(want(ck, shape, __VA_ARGS__))

/* Tensors a checkpoint may carry that no stage reads. */
typedef int (*known_unused_fn)(const char *name, const void *config);

/* The family of a tensor name: up to its first numeric component
 * ("transformer_blocks.1.attn.to_q.weight" → "transformer_blocks.1"),
 * else the whole name. */
static void family_of(const char *name, char *buf, size_t size) {
    const char *p = name;
    while ((p = strchr(p, '.'))) {
        p++;
        size_t digits = strspn(p, "0123456789");
        if (digits && (p[digits] == '.' || !p[digits])) {
            snprintf(buf, size, "%.*s.*", (int)(p + digits - name), name);
            return;
        }
    }
    snprintf(buf, size, "%s", name);
}

/* After the table (its status st): every tensor claimed, or known to be
 * unused. Releases the claims. */
static flux_status checker_finish(checker *ck, flux_status st, known_unused_fn known, const void *config) {
    if (st) {
        free(ck->seen);
        return st;
    }
    const size_t n = fx_wset_count(ck->w);
    size_t unused = 0;
    const fx_tensor *first = NULL;
    for (size_t i = 0; i < n; i++) {
        const fx_tensor *t = fx_wset_tensor_at(ck->w, i);
        if (ck->seen[i] || fx_wset_fp8_companion(t->name) || (known && known(t->name, config))) continue;
        if (!unused++) first = t;
    }
    free(ck->seen);
    ck->seen = NULL;
    if (!unused) return FLUX_OK;
    char family[FX_ST_MAX_NAME + 4];
    family_of(first->name, family, sizeof family);
    return fx_fail(ck->err, FLUX_ERR_MODEL,
                   "%s: %zu tensor%s not used by the model the config describes, first the family '%s' (tensor "
                   "'%.200s'): the config may be truncated or belong to other weights",
                   first->file ? fx_tensor_file_display(first->file) : fx_wset_display(ck->w), unused,
                   unused == 1 ? " is" : "s are", family, first->name);
}

/* ------------------------------------------------------------------------ */
/* Transformer (diffusers transformer_flux2.py names): d = hidden, m = MLP width, no biases            */
/* ------------------------------------------------------------------------ */

static flux_status dit_table(checker *ck, const fx_dit_config *c) {
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
/* VAE (diffusers autoencoder_kl_flux2.py), following block_out_channels / layers_per_block         */
/* ------------------------------------------------------------------------ */

/* Resnet block R(prefix, cin, cout). */
static flux_status resnet(checker *ck, const char *prefix, int64_t cin, int64_t cout) {
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
static flux_status attention(checker *ck, const char *prefix, int64_t c) {
    static const char *const proj[] = {"to_q", "to_k", "to_v", "to_out.0"};
    WANT(FX_SHAPE(c), "%s.group_norm.weight", prefix);
    WANT(FX_SHAPE(c), "%s.group_norm.bias", prefix);
    for (int k = 0; k < 4; k++) {
        WANT(FX_SHAPE(c, c), "%s.%s.weight", prefix, proj[k]);
        WANT(FX_SHAPE(c), "%s.%s.bias", prefix, proj[k]);
    }
    return FLUX_OK;
}

static flux_status conv(checker *ck, const char *prefix, int64_t cout, int64_t cin, int64_t k) {
    WANT(FX_SHAPE(cout, cin, k, k), "%s.weight", prefix);
    WANT(FX_SHAPE(cout), "%s.bias", prefix);
    return FLUX_OK;
}

static flux_status mid_block(checker *ck, const char *side, int64_t c, int attn) {
    char p[96];
    snprintf(p, sizeof p, "%s.mid_block.resnets.0", side);
    TRY(resnet(ck, p, c, c));
    if (attn) {
        snprintf(p, sizeof p, "%s.mid_block.attentions.0", side);
        TRY(attention(ck, p, c));
    }
    snprintf(p, sizeof p, "%s.mid_block.resnets.1", side);
    return resnet(ck, p, c, c);
}

static flux_status vae_table(checker *ck, const fx_vae_config *c) {
    const int L = c->levels;
    const int64_t lat = c->latent_channels;
    const int *enc = c->block_out_channels;
    char p[96];

    /* encoder: conv_in, L levels of layers_per_block resnets (+ downsample
     * except the last), mid block, norm, conv_out to mean‖logvar */
    TRY(conv(ck, "encoder.conv_in", enc[0], c->in_channels, 3));
    for (int i = 0; i < L; i++) {
        int64_t cin = i ? enc[i - 1] : enc[0], cout = enc[i];
        for (int j = 0; j < c->layers_per_block; j++) {
            snprintf(p, sizeof p, "encoder.down_blocks.%d.resnets.%d", i, j);
            TRY(resnet(ck, p, j ? cout : cin, cout));
        }
        if (i < L - 1) {
            snprintf(p, sizeof p, "encoder.down_blocks.%d.downsamplers.0.conv", i);
            TRY(conv(ck, p, cout, cout, 3));
        }
    }
    TRY(mid_block(ck, "encoder", enc[L - 1], c->mid_block_add_attention));
    WANT(FX_SHAPE(enc[L - 1]), "encoder.conv_norm_out.weight");
    WANT(FX_SHAPE(enc[L - 1]), "encoder.conv_norm_out.bias");
    TRY(conv(ck, "encoder.conv_out", 2 * lat, enc[L - 1], 3));
    if (c->use_quant_conv) TRY(conv(ck, "quant_conv", 2 * lat, 2 * lat, 1));
    if (c->use_post_quant_conv) TRY(conv(ck, "post_quant_conv", lat, lat, 1));

    /* decoder: channels in reverse, layers_per_block + 1 resnets per level,
     * upsample except the last level */
    int dec[FX_VAE_MAX_LEVELS];
    for (int i = 0; i < L; i++) dec[i] = c->decoder_block_out_channels[L - 1 - i];
    TRY(conv(ck, "decoder.conv_in", dec[0], lat, 3));
    TRY(mid_block(ck, "decoder", dec[0], c->mid_block_add_attention));
    for (int i = 0; i < L; i++) {
        int64_t cin = i ? dec[i - 1] : dec[0], cout = dec[i];
        for (int j = 0; j < c->layers_per_block + 1; j++) {
            snprintf(p, sizeof p, "decoder.up_blocks.%d.resnets.%d", i, j);
            TRY(resnet(ck, p, j ? cout : cin, cout));
        }
        if (i < L - 1) {
            snprintf(p, sizeof p, "decoder.up_blocks.%d.upsamplers.0.conv", i);
            TRY(conv(ck, p, cout, cout, 3));
        }
    }
    WANT(FX_SHAPE(dec[L - 1]), "decoder.conv_norm_out.weight");
    WANT(FX_SHAPE(dec[L - 1]), "decoder.conv_norm_out.bias");
    TRY(conv(ck, "decoder.conv_out", c->out_channels, dec[L - 1], 3));

    /* latent BatchNorm statistics over the packed channels */
    const int64_t packed = lat * c->patch[0] * c->patch[1];
    WANT(FX_SHAPE(packed), "bn.running_mean");
    WANT(FX_SHAPE(packed), "bn.running_var");
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Qwen3 (transformers modeling_qwen3.py names): embedding + the layers klein runs                     */
/* ------------------------------------------------------------------------ */

static flux_status qwen3_table(checker *ck, const fx_qwen3_config *c) {
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
/* The checks: the table, then nothing left over                            */
/* ------------------------------------------------------------------------ */

/* A diffusers-named checkpoint of a FLUX.2 model with a guidance embedder
 * (klein has none; such keys are unused). */
static int dit_known_unused(const char *name, const void *config) {
    (void)config;
    return !strncmp(name, "time_guidance_embed.guidance_embedder.", 38);
}

/* The BatchNorm's update counter (an I64 scalar, diffusers autoencoder_kl_flux2.py). */
static int vae_known_unused(const char *name, const void *config) {
    (void)config;
    return !strcmp(name, "bn.num_batches_tracked");
}

/* Qwen3 layers past the ones klein reads, up to the config's count (the
 * 4B ships 36, klein runs 27), the final norm and the LM head (transformers modeling_qwen3.py names). */
static int qwen3_known_unused(const char *name, const void *config) {
    const fx_qwen3_config *c = config;
    if (!strcmp(name, "model.norm.weight") || !strcmp(name, "lm_head.weight")) return 1;
    int layer;
    char dot;
    return sscanf(name, "model.layers.%d%c", &layer, &dot) == 2 && dot == '.' && layer >= c->layers_used &&
           layer < c->layers;
}

/* fp8 is read by the linear layers of the transformer and the text
 * encoder (their scales applied in the GEMM's expansion) and by the text
 * encoder's embedding lookups (row by row, scales applied); the VAE's
 * convolutions refuse it. */
static flux_status refuse_fp8(const fx_wset *w, const char *only, const char *what, fx_err *err) {
    for (size_t i = 0; i < fx_wset_count(w); i++) {
        const fx_tensor *t = fx_wset_tensor_at(w, i);
        if ((t->dtype == FX_DTYPE_F8_E4M3 || t->dtype == FX_DTYPE_F8_E5M2) && (!only || !strcmp(t->name, only)))
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "%s: tensor '%.200s' is %s; fp8 is read for linear layers only, not for %s",
                           t->file ? fx_tensor_file_display(t->file) : fx_wset_display(w), t->name, fx_dtype_name(t->dtype),
                           what);
    }
    return FLUX_OK;
}

flux_status fx_check_dit_weights(const fx_wset *w, const fx_dit_config *c, fx_err *err) {
    checker ck;
    TRY(checker_init(&ck, w, err));
    return checker_finish(&ck, dit_table(&ck, c), dit_known_unused, c);
}

flux_status fx_check_vae_weights(const fx_wset *w, const fx_vae_config *c, fx_err *err) {
    TRY(refuse_fp8(w, NULL, "the VAE", err));
    checker ck;
    TRY(checker_init(&ck, w, err));
    return checker_finish(&ck, vae_table(&ck, c), vae_known_unused, c);
}

flux_status fx_check_qwen3_weights(const fx_wset *w, const fx_qwen3_config *c, fx_err *err) {
    checker ck;
    TRY(checker_init(&ck, w, err));
    return checker_finish(&ck, qwen3_table(&ck, c), qwen3_known_unused, c);
}

/* ------------------------------------------------------------------------ */
/* Qwen3 GGUF key/values against text_encoder/config.json                   */
/* ------------------------------------------------------------------------ */

flux_status fx_check_qwen3_gguf(const fx_wset *w, const fx_qwen3_config *c, fx_err *err) {
    const fx_tensor_file *f = fx_wset_file_count(w) ? fx_wset_file_at(w, 0) : NULL;
    const fx_gguf *g = f ? fx_tensor_file_gguf(f) : NULL;
    if (!g) return FLUX_OK;
    const char *file = fx_tensor_file_display(f), *arch = NULL;
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
