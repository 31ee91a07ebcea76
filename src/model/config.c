/*
 * config.c — parsing and validation of the model folder's config files
 * (config.h). Defaults for absent keys are those of the Python classes
 * that wrote the files (diffusers / transformers), noted per key.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A config being read: the object, its file name for messages, the error. */
typedef struct cfg {
    const fx_json *root;
    const char *file;
    fx_err *err;
} cfg;

static flux_status type_error(cfg *c, const char *key, const fx_json *v, const char *want) {
    return fx_fail(c->err, FLUX_ERR_FORMAT, "%s: \"%s\" is a %s, expected %s", c->file, key,
                   fx_json_type_name(fx_json_typeof(v)), want);
}

/* Integer member in [lo, hi]. required = 0: absent or null → def. */
static flux_status get_int(cfg *c, const char *key, int required, int def, int lo, int hi, int *out) {
    const fx_json *v = fx_json_get(c->root, key);
    if (fx_json_is_null(v)) {
        if (required) return fx_fail(c->err, FLUX_ERR_FORMAT, "%s: missing \"%s\"", c->file, key);
        if (def < lo || def > hi) /* a derived default (e.g. hidden / heads) can be invalid too */
            return fx_fail(c->err, FLUX_ERR_FORMAT, "%s: \"%s\" is absent and its default %d is out of range [%d, %d]",
                           c->file, key, def, lo, hi);
        *out = def;
        return FLUX_OK;
    }
    if (!fx_json_is_int(v)) return type_error(c, key, v, "an integer");
    int64_t x = fx_json_int(v);
    if (x < lo || x > hi)
        return fx_fail(c->err, FLUX_ERR_FORMAT, "%s: \"%s\" = %lld is out of range [%d, %d]", c->file, key,
                       (long long)x, lo, hi);
    *out = (int)x;
    return FLUX_OK;
}

/* Number member > lo (exclusive) and finite. */
static flux_status get_num(cfg *c, const char *key, int required, double def, double lo, double *out) {
    const fx_json *v = fx_json_get(c->root, key);
    if (fx_json_is_null(v)) {
        if (required) return fx_fail(c->err, FLUX_ERR_FORMAT, "%s: missing \"%s\"", c->file, key);
        *out = def;
        return FLUX_OK;
    }
    if (!fx_json_is_number(v)) return type_error(c, key, v, "a number");
    double x = fx_json_num(v);
    if (!(x > lo) || !isfinite(x))
        return fx_fail(c->err, FLUX_ERR_FORMAT, "%s: \"%s\" = %g must be greater than %g", c->file, key, x, lo);
    *out = x;
    return FLUX_OK;
}

static flux_status get_bool(cfg *c, const char *key, int def, int *out) {
    const fx_json *v = fx_json_get(c->root, key);
    if (fx_json_is_null(v)) { *out = def; return FLUX_OK; }
    if (!fx_json_is_bool(v)) return type_error(c, key, v, "true or false");
    *out = fx_json_bool(v);
    return FLUX_OK;
}

/* Optional string member that, when present, must equal one of `allowed`
 * (NULL-terminated); *out = its index, or def_index when absent. */
static flux_status get_enum(cfg *c, const char *key, const char *const *allowed, int def_index,
                            flux_status mismatch, int *out) {
    const fx_json *v = fx_json_get(c->root, key);
    if (fx_json_is_null(v)) { *out = def_index; return FLUX_OK; }
    if (!fx_json_is_string(v)) return type_error(c, key, v, "a string");
    for (int i = 0; allowed[i]; i++)
        if (!strcmp(fx_json_str(v), allowed[i])) { *out = i; return FLUX_OK; }
    return fx_fail(c->err, mismatch, "%s: \"%s\" = \"%.60s\" is not supported (expected \"%s\")", c->file, key,
                   fx_json_str(v), allowed[0]);
}

/* Array of n_max or fewer positive ints; *n gets the length (exact_n > 0
 * requires that length). */
static flux_status get_int_array(cfg *c, const char *key, int exact_n, int n_max, int min_value, int *vals,
                                 int *n) {
    const fx_json *v = fx_json_get(c->root, key);
    if (!v) return fx_fail(c->err, FLUX_ERR_FORMAT, "%s: missing \"%s\"", c->file, key);
    if (!fx_json_is_array(v)) return type_error(c, key, v, "an array of integers");
    size_t len = fx_json_len(v);
    if ((exact_n > 0 && len != (size_t)exact_n) || len == 0 || len > (size_t)n_max) {
        if (exact_n > 0)
            return fx_fail(c->err, FLUX_ERR_FORMAT, "%s: \"%s\" has %zu entries, expected %d", c->file, key, len,
                           exact_n);
        return fx_fail(c->err, FLUX_ERR_FORMAT, "%s: \"%s\" has %zu entries, expected 1 to %d", c->file, key,
                       len, n_max);
    }
    for (size_t i = 0; i < len; i++) {
        const fx_json *e = fx_json_at(v, i);
        if (!fx_json_is_int(e) || fx_json_int(e) < min_value || fx_json_int(e) > (1 << 20))
            return fx_fail(c->err, FLUX_ERR_FORMAT, "%s: \"%s\"[%zu] is not an integer in [%d, %d]", c->file,
                           key, i, min_value, 1 << 20);
        vals[i] = (int)fx_json_int(e);
    }
    *n = (int)len;
    return FLUX_OK;
}

static flux_status need_object(const fx_json *root, const char *file, fx_err *err) {
    if (!fx_json_is_object(root))
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: the file is a JSON %s, expected an object", file,
                       fx_json_type_name(fx_json_typeof(root)));
    return FLUX_OK;
}

#define DIM_MAX (1 << 20)

/* ------------------------------------------------------------------------ */

flux_status fx_pipeline_config_parse(const fx_json *root, const char *file, fx_pipeline_config *p, fx_err *err) {
    memset(p, 0, sizeof *p);
    TRY(need_object(root, file, err));
    cfg c = {root, file, err};
    const fx_json *cls = fx_json_get(root, "_class_name");
    if (cls && !fx_json_is_string(cls)) return type_error(&c, "_class_name", cls, "a string");
    if (cls) snprintf(p->class_name, sizeof p->class_name, "%s", fx_json_str(cls));
    /* diffusers: Flux2KleinPipeline(is_distilled=False) unless the key says so */
    const fx_json *d = fx_json_get(root, "is_distilled");
    if (d && !fx_json_is_bool(d) && !fx_json_is_null(d)) return type_error(&c, "is_distilled", d, "true or false");
    p->distilled = fx_json_bool(d);
    return FLUX_OK;
}

flux_status fx_dit_config_parse(const fx_json *root, const char *file, fx_dit_config *d, fx_err *err) {
    memset(d, 0, sizeof *d);
    TRY(need_object(root, file, err));
    cfg c = {root, file, err};
    TRY(get_int(&c, "patch_size", 0, 1, 1, 64, &d->patch_size));
    if (d->patch_size != 1)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s: \"patch_size\" = %d is not supported (klein uses 1)", file,
                       d->patch_size);
    TRY(get_int(&c, "in_channels", 1, 0, 1, DIM_MAX, &d->in_channels));
    TRY(get_int(&c, "out_channels", 0, d->in_channels, 1, DIM_MAX, &d->out_channels));
    if (d->out_channels != d->in_channels)
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: \"out_channels\" = %d must equal \"in_channels\" = %d", file,
                       d->out_channels, d->in_channels);
    TRY(get_int(&c, "num_layers", 1, 0, 0, 4096, &d->double_blocks));
    TRY(get_int(&c, "num_single_layers", 1, 0, 0, 4096, &d->single_blocks));
    TRY(get_int(&c, "num_attention_heads", 1, 0, 1, 4096, &d->heads));
    TRY(get_int(&c, "attention_head_dim", 1, 0, 2, 4096, &d->head_dim));
    if (d->head_dim % 2)
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: \"attention_head_dim\" = %d must be even (RoPE pairs)", file,
                       d->head_dim);
    if ((int64_t)d->heads * d->head_dim > DIM_MAX)
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: hidden size %d × %d is too large", file, d->heads, d->head_dim);
    d->hidden = d->heads * d->head_dim;
    TRY(get_num(&c, "mlp_ratio", 1, 0, 0.0, &d->mlp_ratio));
    double m = (double)d->hidden * d->mlp_ratio;
    if (m < 1 || m > DIM_MAX)
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: MLP width hidden %d × mlp_ratio %g is out of range", file,
                       d->hidden, d->mlp_ratio);
    d->mlp_hidden = (int)m; /* Python int(): truncation, as diffusers does */
    TRY(get_int(&c, "joint_attention_dim", 1, 0, 1, DIM_MAX, &d->text_dim));
    TRY(get_int(&c, "timestep_guidance_channels", 0, 256, 2, DIM_MAX, &d->timestep_dim));
    if (d->timestep_dim % 2)
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: \"timestep_guidance_channels\" = %d must be even", file,
                       d->timestep_dim);
    int n_axes;
    TRY(get_int_array(&c, "axes_dims_rope", FX_DIT_ROPE_AXES, FX_DIT_ROPE_AXES, 0, d->axes_dims, &n_axes));
    int sum = 0;
    for (int i = 0; i < n_axes; i++) {
        if (d->axes_dims[i] % 2)
            return fx_fail(err, FLUX_ERR_FORMAT, "%s: \"axes_dims_rope\"[%d] = %d must be even", file, i,
                           d->axes_dims[i]);
        sum += d->axes_dims[i];
    }
    if (sum != d->head_dim)
        return fx_fail(err, FLUX_ERR_FORMAT,
                       "%s: \"axes_dims_rope\" [%d, %d, %d, %d] sums to %d, but \"attention_head_dim\" is %d", file,
                       d->axes_dims[0], d->axes_dims[1], d->axes_dims[2], d->axes_dims[3], sum, d->head_dim);
    TRY(get_num(&c, "rope_theta", 0, 2000.0, 0.0, &d->rope_theta)); /* diffusers Flux2 default 2000 */
    double eps;
    TRY(get_num(&c, "eps", 0, 1e-6, 0.0, &eps));
    d->eps = (float)eps;
    int guidance_embeds;
    TRY(get_bool(&c, "guidance_embeds", 1, &guidance_embeds)); /* diffusers default True; klein false */
    if (guidance_embeds)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "%s: \"guidance_embeds\" = true (a guidance-embedding transformer) is not supported: "
                       "FLUX.2-klein has none", file);
    return FLUX_OK;
}

flux_status fx_qwen3_config_parse(const fx_json *root, const char *file, fx_qwen3_config *q, fx_err *err) {
    memset(q, 0, sizeof *q);
    TRY(need_object(root, file, err));
    cfg c = {root, file, err};
    static const char *const qwen3[] = {"qwen3", NULL}, *const silu[] = {"silu", NULL};
    int idx;
    TRY(get_enum(&c, "model_type", qwen3, 0, FLUX_ERR_UNSUPPORTED, &idx));
    TRY(get_enum(&c, "hidden_act", silu, 0, FLUX_ERR_UNSUPPORTED, &idx));
    TRY(get_int(&c, "hidden_size", 1, 0, 1, DIM_MAX, &q->hidden));
    TRY(get_int(&c, "intermediate_size", 1, 0, 1, DIM_MAX, &q->intermediate));
    TRY(get_int(&c, "num_hidden_layers", 1, 0, 1, 4096, &q->layers));
    TRY(get_int(&c, "num_attention_heads", 1, 0, 1, 4096, &q->heads));
    TRY(get_int(&c, "num_key_value_heads", 0, q->heads, 1, 4096, &q->kv_heads)); /* HF: defaults to heads */
    /* HF Qwen3: head_dim defaults to hidden // heads; the real 4B gives it explicitly */
    TRY(get_int(&c, "head_dim", 0, q->hidden / q->heads, 2, 4096, &q->head_dim));
    TRY(get_int(&c, "vocab_size", 1, 0, 1, 1 << 24, &q->vocab));
    TRY(get_int(&c, "max_position_embeddings", 0, 40960, 1, 1 << 30, &q->max_position_embeddings));
    TRY(get_num(&c, "rope_theta", 0, 10000.0, 0.0, &q->rope_theta)); /* HF default 10000; klein 1e6 */
    double eps;
    TRY(get_num(&c, "rms_norm_eps", 0, 1e-6, 0.0, &eps));
    q->rms_eps = (float)eps;
    TRY(get_bool(&c, "tie_word_embeddings", 0, &q->tie_word_embeddings));
    if (q->heads % q->kv_heads)
        return fx_fail(err, FLUX_ERR_FORMAT,
                       "%s: \"num_attention_heads\" = %d is not a multiple of \"num_key_value_heads\" = %d", file,
                       q->heads, q->kv_heads);
    if (q->head_dim % 2)
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: \"head_dim\" = %d must be even (RoPE)", file, q->head_dim);
    if ((int64_t)q->heads * q->head_dim > DIM_MAX)
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: attention width %d × %d is too large", file, q->heads,
                       q->head_dim);
    int bias;
    TRY(get_bool(&c, "attention_bias", 0, &bias));
    if (bias)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s: \"attention_bias\" = true is not supported (Qwen3 has none)",
                       file);
    const fx_json *rs = fx_json_get(root, "rope_scaling");
    if (!fx_json_is_null(rs))
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s: \"rope_scaling\" is set; only plain RoPE is supported", file);
    if (q->layers < FX_KLEIN_TEXT_LAYERS_USED)
        return fx_fail(err, FLUX_ERR_FORMAT,
                       "%s: \"num_hidden_layers\" = %d, but klein reads hidden state %d (needs >= %d layers)", file,
                       q->layers, FX_KLEIN_TEXT_LAYERS_USED, FX_KLEIN_TEXT_LAYERS_USED);
    if (q->max_position_embeddings < 512)
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: \"max_position_embeddings\" = %d is below the 512 text tokens",
                       file, q->max_position_embeddings);
    q->layers_used = FX_KLEIN_TEXT_LAYERS_USED;
    return FLUX_OK;
}

/* "down_block_types"/"up_block_types": optional; if present one `want`
 * string per level. */
static flux_status check_block_types(cfg *c, const char *key, const char *want, int levels) {
    const fx_json *v = fx_json_get(c->root, key);
    if (!v) return FLUX_OK;
    if (!fx_json_is_array(v)) return type_error(c, key, v, "an array of strings");
    if (fx_json_len(v) != (size_t)levels)
        return fx_fail(c->err, FLUX_ERR_FORMAT, "%s: \"%s\" has %zu entries, but \"block_out_channels\" has %d",
                       c->file, key, fx_json_len(v), levels);
    for (int i = 0; i < levels; i++) {
        const char *s = fx_json_str(fx_json_at(v, (size_t)i));
        if (!s || strcmp(s, want))
            return fx_fail(c->err, FLUX_ERR_UNSUPPORTED, "%s: \"%s\"[%d] is not \"%s\"", c->file, key, i, want);
    }
    return FLUX_OK;
}

flux_status fx_vae_config_parse(const fx_json *root, const char *file, fx_vae_config *v, fx_err *err) {
    memset(v, 0, sizeof *v);
    TRY(need_object(root, file, err));
    cfg c = {root, file, err};
    static const char *const silu[] = {"silu", NULL};
    int idx;
    TRY(get_enum(&c, "act_fn", silu, 0, FLUX_ERR_UNSUPPORTED, &idx));
    TRY(get_int(&c, "in_channels", 0, 3, 1, 64, &v->in_channels));
    TRY(get_int(&c, "out_channels", 0, 3, 1, 64, &v->out_channels));
    if (v->in_channels != 3 || v->out_channels != 3)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "%s: only RGB VAEs are supported (in/out channels %d/%d)", file,
                       v->in_channels, v->out_channels);
    TRY(get_int(&c, "latent_channels", 1, 0, 1, DIM_MAX, &v->latent_channels));
    TRY(get_int(&c, "norm_num_groups", 0, 32, 1, DIM_MAX, &v->norm_num_groups));
    TRY(get_int(&c, "layers_per_block", 1, 0, 1, 64, &v->layers_per_block));
    TRY(get_int_array(&c, "block_out_channels", 0, FX_VAE_MAX_LEVELS, 1, v->block_out_channels, &v->levels));
    const fx_json *dec = fx_json_get(root, "decoder_block_out_channels");
    if (fx_json_is_null(dec)) {
        memcpy(v->decoder_block_out_channels, v->block_out_channels, sizeof v->block_out_channels);
    } else {
        int n;
        TRY(get_int_array(&c, "decoder_block_out_channels", v->levels, FX_VAE_MAX_LEVELS, 1,
                          v->decoder_block_out_channels, &n));
    }
    for (int i = 0; i < v->levels; i++) {
        int ch[2] = {v->block_out_channels[i], v->decoder_block_out_channels[i]};
        for (int k = 0; k < 2; k++)
            if (ch[k] % v->norm_num_groups)
                return fx_fail(err, FLUX_ERR_FORMAT,
                               "%s: \"%s\"[%d] = %d is not a multiple of \"norm_num_groups\" = %d", file,
                               k ? "decoder_block_out_channels" : "block_out_channels", i, ch[k],
                               v->norm_num_groups);
    }
    TRY(check_block_types(&c, "down_block_types", "DownEncoderBlock2D", v->levels));
    TRY(check_block_types(&c, "up_block_types", "UpDecoderBlock2D", v->levels));
    /* patch_size: [2, 2] in FLUX.2 (an int p means [p, p]) */
    const fx_json *ps = fx_json_get(root, "patch_size");
    if (!ps) return fx_fail(err, FLUX_ERR_FORMAT, "%s: missing \"patch_size\"", file);
    if (fx_json_is_int(ps)) {
        if (fx_json_int(ps) < 1 || fx_json_int(ps) > 16)
            return fx_fail(err, FLUX_ERR_FORMAT, "%s: \"patch_size\" is out of range [1, 16]", file);
        v->patch[0] = v->patch[1] = (int)fx_json_int(ps);
    } else {
        int n;
        TRY(get_int_array(&c, "patch_size", 2, 2, 1, v->patch, &n));
        if (v->patch[0] > 16 || v->patch[1] > 16)
            return fx_fail(err, FLUX_ERR_FORMAT, "%s: \"patch_size\" is out of range [1, 16]", file);
    }
    TRY(get_bool(&c, "use_quant_conv", 1, &v->use_quant_conv));
    TRY(get_bool(&c, "use_post_quant_conv", 1, &v->use_post_quant_conv));
    TRY(get_bool(&c, "mid_block_add_attention", 1, &v->mid_block_add_attention));
    double bn_eps;
    TRY(get_num(&c, "batch_norm_eps", 0, 1e-4, 0.0, &bn_eps));
    v->batch_norm_eps = (float)bn_eps;
    v->norm_eps = 1e-6f; /* diffusers Encoder/Decoder GroupNorm eps (not in the config) */
    return FLUX_OK;
}

flux_status fx_sched_config_parse(const fx_json *root, const char *file, fx_sched_config *s, fx_err *err) {
    memset(s, 0, sizeof *s);
    TRY(need_object(root, file, err));
    cfg c = {root, file, err};
    /* defaults: diffusers FlowMatchEulerDiscreteScheduler.__init__ */
    TRY(get_int(&c, "num_train_timesteps", 0, 1000, 1, 1 << 24, &s->num_train_timesteps));
    TRY(get_bool(&c, "use_dynamic_shifting", 0, &s->use_dynamic_shifting));
    static const char *const kinds[] = {"exponential", "linear", NULL};
    int kind;
    TRY(get_enum(&c, "time_shift_type", kinds, 0, FLUX_ERR_FORMAT, &kind));
    s->exponential_shift = kind == 0;
    TRY(get_num(&c, "shift", 0, 1.0, 0.0, &s->shift));
    TRY(get_num(&c, "base_shift", 0, 0.5, -1e9, &s->base_shift));
    TRY(get_num(&c, "max_shift", 0, 1.15, -1e9, &s->max_shift));
    TRY(get_int(&c, "base_image_seq_len", 0, 256, 1, 1 << 30, &s->base_image_seq_len));
    TRY(get_int(&c, "max_image_seq_len", 0, 4096, 1, 1 << 30, &s->max_image_seq_len));
    if (s->max_image_seq_len == s->base_image_seq_len)
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: \"max_image_seq_len\" must differ from \"base_image_seq_len\"",
                       file);
    return FLUX_OK;
}

flux_status fx_configs_check(const fx_dit_config *dit, const fx_qwen3_config *te, const fx_vae_config *vae,
                             fx_err *err) {
    int packed = vae->latent_channels * vae->patch[0] * vae->patch[1];
    if (dit->in_channels != packed)
        return fx_fail(err, FLUX_ERR_FORMAT,
                       "transformer/config.json: \"in_channels\" = %d, but the VAE packs %d latent channels × "
                       "%d×%d patches = %d", dit->in_channels, vae->latent_channels, vae->patch[0], vae->patch[1],
                       packed);
    if ((int64_t)dit->text_dim != (int64_t)FX_KLEIN_N_TEXT_STATES * te->hidden)
        return fx_fail(err, FLUX_ERR_FORMAT,
                       "transformer/config.json: \"joint_attention_dim\" = %d, but the text encoder gives %d "
                       "stacked hidden states × %d = %d", dit->text_dim, FX_KLEIN_N_TEXT_STATES, te->hidden,
                       FX_KLEIN_N_TEXT_STATES * te->hidden);
    return FLUX_OK;
}
