/*
 * model.h — a loaded model folder (official Hugging Face layout) and the
 * lifetime of its components inside a context.
 *
 * Owned by the context (src/pipeline/load.c frees it after the components
 * that point into its weights). Other modules read ctx->model: the
 * configs give every dimension, the weight sets give the tensors (see
 * weight_set.h: fx_wset_linear / fx_wset_conv / fx_wset_f32 ...).
 *
 * fx_model_open() (called by flux_load) fills it in this order, failing
 * early with a message that names the file: model_index.json, the four configs, cross-component
 * checks, tokenizer path, then the three weight sets, each validated
 * against tensor tables computed from the configs (the published checkpoints' names)
 * (fx_check_*_weights below). Nothing of a failed load stays in the context.
 *
 * Weight data: the transformer and VAE sets are mapped (or read, with
 * use_mmap = 0) at load; mapping touches no page, so loading the 4B takes
 * milliseconds. The text encoder's headers are validated at load, its data
 * is mapped/read by fx_model_text_encoder_weights() on first use (at load
 * when flux_load_options.lazy_text_encoder = 0) and dropped again by
 * fx_model_release_text_encoder_weights().
 */
#ifndef FX_MODEL_H
#define FX_MODEL_H

#include "config.h"
#include "ctx.h"
#include "src/formats/weight_set.h"

struct fx_model {
    char *dir;   /* the folder given to flux_load; NULL when loaded from files
                    alone (configs derived from the shapes: config_derive.h) */
    char *name;  /* its last path component, e.g. "FLUX.2-klein-4B" (without a
                    folder: the transformer file's name without extension) */

    int distilled;            /* effective variant: model_index.json "is_distilled"
                                 unless forced by flux_load_options.distilled */
    int use_mmap;             /* flux_options.use_mmap at load time */
    flux_load_options lo;     /* as given to flux_load (transformer_file owned),
                                 to load the folder again */

    fx_pipeline_config pipeline; /* model_index.json */
    fx_dit_config dit;           /* transformer/config.json */
    fx_qwen3_config qwen3;       /* text_encoder/config.json */
    fx_vae_config vae;           /* vae/config.json */
    fx_sched_config sched;       /* scheduler/scheduler_config.json */

    char variant_why[200];       /* why distilled / base (variant.h), for -v and PNG metadata */

    char *tokenizer_path;        /* tokenizer.json to load (exists), or NULL with: */
    char *tokenizer_gguf;        /* a GGUF text encoder whose tokenizer.ggml.*
                                    arrays give the tokenizer (no folder) */
    char tokenizer_source[512];  /* where the tokenizer comes from, for -v */

    fx_wset *transformer_w;      /* transformer/diffusion_pytorch_model.safetensors[.index.json] */
    fx_wset *vae_w;              /* vae/diffusion_pytorch_model.safetensors */
    fx_wset *text_encoder_w;     /* text_encoder/model.safetensors[.index.json]
                                    (or the --text-encoder file); data via
                                    fx_model_text_encoder_weights() */
    int quant;                   /* flux_load_options.quant as an fx_dtype, or -1 */
    fx_wset *text_encoder_q;     /* with quant: the quantized text encoder (an
                                    in-memory GGUF), built on first use from
                                    text_encoder_w and freed on release */
    fx_kctx kc;                  /* the context's kernels (quantization on load) */

    /* Later stages add their own per-model state here (documented). */
};

/* Open and check the model folder `dir` (model.c's header comment; NULL or
 * "": the files of lo alone, all three required) with the
 * load options (variant, single-file transformer, lazy text encoder);
 * use_mmap as flux_options.use_mmap. *out is the new model, or NULL with
 * the first problem in err, naming the file. */
flux_status fx_model_open(const char *dir, const flux_load_options *lo, int use_mmap, const fx_logger *log,
                          const fx_kctx *kc, struct fx_model **out, fx_err *err);

/* The text encoder's weight set with its data mapped/read (loaded on first
 * call, again after a release; with quant, quantized then). NULL with an
 * error on failure. */
fx_wset *fx_model_text_encoder_weights(struct fx_model *m, fx_err *err);
/* Unmap/free the text encoder's weight data (headers stay for lookups). */
void fx_model_release_text_encoder_weights(struct fx_model *m);

/* The weight files on disk are still those the model was loaded from
 * (fx_wset_check_unchanged on every set): FLUX_ERR_IO naming the first that
 * was replaced, resized or rewritten. */
flux_status fx_model_check_unchanged(const struct fx_model *m, fx_err *err);
/* No read of mapped weight data faulted (fx_wset_check_faults): FLUX_ERR_IO
 * naming a file that was cut short while in use. Cheap: for checkpoints. */
flux_status fx_model_check_faults(const struct fx_model *m, fx_err *err);

/* Free a model (NULL allowed). */
void fx_model_free(struct fx_model *m);

/* A copy of load options that owns its strings (the model keeps the ones it
 * was opened with, to open the folder again); -1 when out of memory. */
int fx_load_options_copy(flux_load_options *dst, const flux_load_options *src);
void fx_load_options_free(flux_load_options *lo);

/* The f32 vector [n] of w named by a printf format (a norm weight, a bias)
 * as a new buffer of the backend ops (the stages' small weights). */
flux_status fx_model_vecf(fx_ops *ops, const fx_wset *w, int64_t n, fx_buf **out, fx_err *err, const char *fmt, ...)
    FX_PRINTF(6, 7);

/* Check that a weight set holds every tensor a stage needs, with the shapes
 * the config implies (diffusers transformer_flux2.py, autoencoder_kl_flux2.py,
 * transformers modeling_qwen3.py names; Qwen3 layers 0..layers_used−1) and a weight dtype (F32/F16/BF16). The first problem
 * is reported: FLUX_ERR_MODEL naming file, tensor, found and expected shape. */
flux_status fx_check_dit_weights(const fx_wset *w, const fx_dit_config *c, fx_err *err);
flux_status fx_check_vae_weights(const fx_wset *w, const fx_vae_config *c, fx_err *err);
flux_status fx_check_qwen3_weights(const fx_wset *w, const fx_qwen3_config *c, fx_err *err);
/* A GGUF text encoder's architecture key/values against the config
 * (general.architecture qwen3 if present; qwen3.embedding_length,
 * block_count >= layers_used, feed_forward_length, attention.head_count,
 * head_count_kv, key_length, rope.freq_base, layer_norm_rms_epsilon where
 * present). FLUX_ERR_MODEL naming the file and key. No-op for other files. */
flux_status fx_check_qwen3_gguf(const fx_wset *w, const fx_qwen3_config *c, fx_err *err);

#endif
