/*
 * config.h — typed, validated configs of a FLUX.2-klein model folder.
 *
 * Every dimension the model code uses comes from these structs, parsed from
 *   model_index.json                     → fx_pipeline_config
 *   transformer/config.json              → fx_dit_config
 *   text_encoder/config.json             → fx_qwen3_config
 *   vae/config.json                      → fx_vae_config
 *   scheduler/scheduler_config.json      → fx_sched_config
 * (the configs of the published model folders). Parsers check types and value ranges and report
 * "<file>: <key>: <problem>" (FLUX_ERR_FORMAT for a wrong type, a missing
 * key or an inconsistent value; FLUX_ERR_UNSUPPORTED for a valid config of
 * something flux.c does not implement).
 */
#ifndef FX_CONFIG_H
#define FX_CONFIG_H

#include "src/base/error.h"
#include "src/base/json.h"

/* klein feeds the transformer the Qwen3 hidden states 9, 18 and 27 (HF
 * numbering: output of layers 8, 17, 26), stacked per token (diffusers pipeline_flux2_klein.py; transformers modeling_qwen3.py). */
#define FX_KLEIN_N_TEXT_STATES 3
#define FX_KLEIN_TEXT_STATES {9, 18, 27} /* initializer: int s[3] = FX_KLEIN_TEXT_STATES; */
#define FX_KLEIN_TEXT_LAYERS_USED 27 /* layers 0..26 are run */

#define FX_DIT_ROPE_AXES 4   /* (T, H, W, L) position ids */
#define FX_VAE_MAX_LEVELS 8

/* model_index.json */
typedef struct fx_pipeline_config {
    char class_name[64];   /* "_class_name", e.g. "Flux2KleinPipeline" ("" if absent) */
    int distilled;         /* "is_distilled": true → 1; absent/false → 0 (base model) */
} fx_pipeline_config;

/* transformer/config.json (Flux2Transformer2DModel) */
typedef struct fx_dit_config {
    int in_channels;        /* 128: packed latent channels per token */
    int out_channels;       /* null → in_channels */
    int double_blocks;      /* num_layers */
    int single_blocks;      /* num_single_layers */
    int heads;              /* num_attention_heads */
    int head_dim;           /* attention_head_dim */
    int hidden;             /* heads · head_dim (3072 for 4B) */
    int mlp_hidden;         /* int(hidden · mlp_ratio) (9216 for 4B) */
    double mlp_ratio;
    int text_dim;           /* joint_attention_dim (7680 = 3 × Qwen3 hidden) */
    int timestep_dim;       /* timestep_guidance_channels (256) */
    int axes_dims[FX_DIT_ROPE_AXES]; /* axes_dims_rope, sum = head_dim, each even */
    double rope_theta;      /* 2000 */
    float eps;              /* LayerNorm / QK-RMSNorm eps (1e-6) */
    int patch_size;         /* 1 */
} fx_dit_config;

/* text_encoder/config.json (Qwen3ForCausalLM) */
typedef struct fx_qwen3_config {
    int hidden;             /* hidden_size (2560) */
    int intermediate;       /* intermediate_size (9728) */
    int layers;             /* num_hidden_layers in the checkpoint (36) */
    int layers_used;        /* layers actually run: FX_KLEIN_TEXT_LAYERS_USED */
    int heads;              /* num_attention_heads (32) */
    int kv_heads;           /* num_key_value_heads (8) */
    int head_dim;           /* head_dim, explicit (128; ≠ hidden/heads in general) */
    int vocab;              /* vocab_size (151936) */
    double rope_theta;      /* 1e6 */
    float rms_eps;          /* 1e-6 */
    int tie_word_embeddings;
    int max_position_embeddings;
} fx_qwen3_config;

/* vae/config.json (AutoencoderKLFlux2) */
typedef struct fx_vae_config {
    int in_channels, out_channels;   /* 3, 3 */
    int latent_channels;             /* 32 */
    int levels;                      /* len(block_out_channels) (4) */
    int block_out_channels[FX_VAE_MAX_LEVELS];         /* encoder [128,256,512,512] */
    int decoder_block_out_channels[FX_VAE_MAX_LEVELS]; /* = block_out_channels unless
                                                          "decoder_block_out_channels" */
    int layers_per_block;            /* resnets per encoder level; decoder has +1 */
    int norm_num_groups;             /* 32 */
    int patch[2];                    /* patch_size [2, 2] */
    int use_quant_conv, use_post_quant_conv;
    int mid_block_add_attention;
    float batch_norm_eps;            /* 1e-4 */
    float norm_eps;                  /* GroupNorm eps: 1e-6 (diffusers default) */
} fx_vae_config;

/* scheduler/scheduler_config.json (FlowMatchEulerDiscreteScheduler) */
typedef struct fx_sched_config {
    int num_train_timesteps;     /* 1000 */
    int use_dynamic_shifting;    /* true */
    int exponential_shift;       /* time_shift_type == "exponential" (else "linear") */
    double shift, base_shift, max_shift;
    int base_image_seq_len, max_image_seq_len;
} fx_sched_config;

/* Parse one config from a parsed document; `file` names it in messages. */
flux_status fx_pipeline_config_parse(const fx_json *root, const char *file, fx_pipeline_config *c, fx_err *err);
flux_status fx_dit_config_parse(const fx_json *root, const char *file, fx_dit_config *c, fx_err *err);
flux_status fx_qwen3_config_parse(const fx_json *root, const char *file, fx_qwen3_config *c, fx_err *err);
flux_status fx_vae_config_parse(const fx_json *root, const char *file, fx_vae_config *c, fx_err *err);
flux_status fx_sched_config_parse(const fx_json *root, const char *file, fx_sched_config *c, fx_err *err);

/* Checks across components: DiT in_channels = VAE latent channels × patch
 * area, DiT text_dim = 3 × Qwen3 hidden. */
flux_status fx_configs_check(const fx_dit_config *dit, const fx_qwen3_config *te, const fx_vae_config *vae,
                             fx_err *err);

#endif
