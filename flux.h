/*
 * flux.h — the public API of flux.c, a CPU-first C engine for the FLUX.2-klein
 * text-to-image models (Qwen3 text encoder → rectified-flow transformer → VAE).
 *
 * Everything lives in a flux_ctx: loaded weights (mmap'd, bf16 as shipped),
 * kernel dispatch, thread count, scratch memory, caches and the last error.
 * The library never calls exit(); every call that can fail returns a
 * flux_status and leaves a message retrievable with flux_error(ctx). One
 * context must not be used by two threads at the same time; independent
 * contexts may run concurrently. The few things that are per process
 * (signal handlers, facts about the CPU) are listed under "Process-wide
 * state" at the end of this header, with how to turn the handlers off.
 *
 * NULL arguments never crash: a function returning flux_status returns
 * FLUX_ERR_INVALID_ARG for a NULL context, parameter struct, path, text or
 * output pointer it needs (with the message in flux_error(ctx) when ctx is
 * not NULL); the *_init, *_free and flux_release_text_encoder functions do
 * nothing on NULL; flux_error(NULL) is "no context", flux_threads(NULL) 0,
 * flux_image_get_text(NULL, k) NULL, flux_image_load/save work without a
 * context (the message is then not kept), and flux_cpu_info(NULL, ...)
 * describes what a default context would use.
 *
 * Minimal use:
 *
 *     flux_ctx *ctx = flux_new(NULL);
 *     if (flux_load(ctx, "FLUX.2-klein-4B") != FLUX_OK) die(flux_error(ctx));
 *     flux_params p; flux_params_init(&p);
 *     p.prompt = "a cat"; p.seed = 42;
 *     flux_image *img = NULL;
 *     if (flux_generate(ctx, &p, &img) != FLUX_OK) die(flux_error(ctx));
 *     flux_image_save(ctx, img, "cat.png");
 *     flux_image_free(img);
 *     flux_free(ctx);
 *
 * Tensor conventions used in the comments: shapes in brackets, row-major,
 * e.g. [512, 7680] = 512 rows of 7680 floats.
 */
#ifndef FLUX_H
#define FLUX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every function of this header is marked FLUX_API: the library is built
 * with -fvisibility=hidden, so these are the only symbols libflux.so
 * exports (tests check it); everything else is internal and may change. */
#ifndef FLUX_API
#if defined(__GNUC__) || defined(__clang__)
#define FLUX_API __attribute__((visibility("default")))
#else
#define FLUX_API
#endif
#endif

#define FLUX_VERSION_MAJOR 0
#define FLUX_VERSION_MINOR 1
#define FLUX_VERSION_PATCH 0
#define FLUX_VERSION_STRING "0.1.0"

/* Text length the klein pipeline always feeds to the transformer. */
#define FLUX_TEXT_TOKENS 512
/* Maximum number of reference images for img2img / multi-reference. */
#define FLUX_MAX_REFS 16
/* Sentinel for flux_params.seed: pick a seed from the clock (reported back).
 * Seeds are 0 .. UINT64_MAX − 1; a batch's seeds seed .. seed + batch − 1 must
 * stay in that range. */
#define FLUX_SEED_RANDOM UINT64_MAX
/* Most worker threads a context runs (flux_options.threads and
 * OMP_NUM_THREADS are clamped to it). */
#define FLUX_MAX_THREADS 1024
/* Largest guidance (CFG scale) flux_params.guidance accepts: the one range
 * 0 .. FLUX_GUIDANCE_MAX of the library, the CLI's -g and !guidance. */
#define FLUX_GUIDANCE_MAX 100

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */
/* ------------------------------------------------------------------------ */

typedef enum flux_status {
    FLUX_OK = 0,
    FLUX_ERR_INVALID_ARG,     /* a parameter is out of range or inconsistent  */
    FLUX_ERR_IO,              /* a file could not be opened, read or written  */
    FLUX_ERR_FORMAT,          /* a file is malformed (JSON, safetensors, PNG) */
    FLUX_ERR_MODEL,           /* a tensor is missing or has the wrong shape   */
    FLUX_ERR_NOMEM,           /* an allocation failed                         */
    FLUX_ERR_UNSUPPORTED,     /* valid request this build/CPU cannot do       */
    FLUX_ERR_NOT_IMPLEMENTED, /* feature not yet available in this version    */
    FLUX_ERR_CANCELLED,       /* the progress callback asked to stop          */
    FLUX_ERR_STATE,           /* call out of order (e.g. generate before load)*/
    FLUX_ERR_INTERNAL
} flux_status;

/* A short constant name for a status ("FLUX_ERR_IO", ...). */
FLUX_API const char *flux_status_name(flux_status s);

/* ------------------------------------------------------------------------ */
/* Context                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct flux_ctx flux_ctx;

typedef enum flux_precision {
    FLUX_PRECISION_DEFAULT = 0, /* bf16 weights × bf16-rounded activations with
                                   f32 accumulation where the CPU has bf16 dot
                                   products (AVX512_BF16, AMX), and there
                                   quantized weights as INT8 below; f32 math
                                   elsewhere (quantized weights expanded)    */
    FLUX_PRECISION_F32 = 1,     /* weights widened to f32, all math in f32:
                                   the mode used for exact comparisons       */
    FLUX_PRECISION_INT8 = 2,    /* W8A8 for every transformer and text-
                                   encoder weight (bf16, f16, f32, fp8 and
                                   GGUF): activations quantized per row to
                                   int8, weights to int8 with one f32 scale
                                   per output channel (made at load where
                                   not larger than the stored weight), exact
                                   int32 dot products; the VAE, attention
                                   and norms as in the default mode         */
    FLUX_PRECISION_BF16 = 3     /* the default mode with quantized weights
                                   expanded (weight-only, as bf16 weights),
                                   never int8: more exact, slower            */
} flux_precision;

/* Where the stages run. AUTO: a real GPU through Vulkan when this build has
 * Vulkan and one is present (never a CPU driver such as lavapipe), else the
 * CPU (-v says which and why). VULKAN: the Vulkan device `device` (any type,
 * lavapipe included); no loader, no device or a build without Vulkan makes
 * flux_new's context fail every load with that error (flux_error says it). */
typedef enum flux_backend {
    FLUX_BACKEND_AUTO = 0,
    FLUX_BACKEND_CPU = 1,
    FLUX_BACKEND_VULKAN = 2
} flux_backend;

typedef struct flux_options {
    flux_backend backend;     /* default FLUX_BACKEND_AUTO */
    int device;               /* Vulkan device index as flux_list_devices
                                 numbers them; -1 (default) = choose */
    unsigned long long device_memory_mb; /* device memory the weights may take;
                                 0 (default) = 85% of the device's. Weights
                                 beyond it stay in host memory and are
                                 uploaded at each use (same results, slower) */
    int threads;              /* worker threads (at most FLUX_MAX_THREADS); 0 =
                                 OMP_NUM_THREADS if set, else adaptive: every
                                 CPU this process may use (affinity, cgroup
                                 quota), fewer while other processes keep
                                 some busy, re-measured as the work goes
                                 (results are identical for any count) */
    int use_mmap;             /* 1 (default): weights stay mmap'd; 0: read into RAM */
    flux_precision precision; /* overridden by env FLUX_PRECISION=f32|int8|bf16|default */
    const char *isa;          /* NULL = the kernels that are fastest on this CPU;
                                 else a level it supports: "scalar", "avx2",
                                 "avx512", "avx512bf16", "amx", "neon" (env
                                 FLUX_ISA does the same) */
    const char *cache_dir;    /* embedding cache directory; NULL = default
                                 ($XDG_CACHE_HOME/flux/embeddings) */
    int no_disk_cache;        /* 1 = do not read or write the on-disk cache */
    int verbose;              /* 0 quiet, 1 info, 2 debug (to stderr) */
} flux_options;

/* Fill *opt with the defaults (threads 0, mmap on, default precision, ...). */
FLUX_API void flux_options_init(flux_options *opt);

/* Create a context. opt may be NULL for defaults. Returns NULL only when
 * memory is exhausted. The context owns everything loaded into it.
 * A field of *opt outside its range (backend or precision not one of their
 * enum values, device < -1, threads < 0, use_mmap or no_disk_cache other
 * than 0/1, verbose < 0) still gives a context, on the CPU, whose
 * flux_error names the field ("flux_options.precision is 7, ...") and on
 * which every flux_load and flux_quantize fails with FLUX_ERR_INVALID_ARG
 * and that message.
 * Environment values it does not understand (FLUX_ISA, FLUX_PRECISION) are
 * ignored, and flux_error(ctx) describes them until the next call; as does
 * an opt->isa this CPU cannot run. */
FLUX_API flux_ctx *flux_new(const flux_options *opt);

/* Release the context and everything it owns (NULL is allowed). */
FLUX_API void flux_free(flux_ctx *ctx);

/* The message of the last failed call on this context ("" if none). The
 * pointer stays valid until the next call on the context. ctx may be NULL. */
FLUX_API const char *flux_error(const flux_ctx *ctx);

/* The most threads the context uses (see flux_options.threads); 0 for a
 * NULL ctx. */
FLUX_API int flux_threads(const flux_ctx *ctx);

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */
/* ------------------------------------------------------------------------ */

/* Fields outside their range (distilled not -1/0/1, lazy_text_encoder not
 * 0/1) make flux_load fail with FLUX_ERR_INVALID_ARG naming the field. */
typedef struct flux_load_options {
    const char *transformer_file; /* single-file transformer checkpoint replacing
                                     transformer/: safetensors or GGUF (BFL,
                                     ComfyUI or diffusers names; GGUF block
                                     types Q8_0 ... Q6_K used as stored);
                                     NULL = use the folder */
    int distilled;                /* -1 auto (model_index.json is_distilled),
                                     0 force base (CFG), 1 force distilled */
    int lazy_text_encoder;        /* 1 (default): load the text encoder only
                                     when a prompt must be encoded */
    const char *text_encoder_file; /* single-file Qwen3 text encoder replacing
                                     text_encoder/: GGUF with llama.cpp names
                                     (blk.N.attn_q.weight, ...) or a file with
                                     Hugging Face names; NULL = the folder */
    const char *quant;            /* quantize the F32/F16/BF16 weights of both
                                     components on load into this GGUF block
                                     type ("q8_0", "q4_0", "q4_1", "q5_0",
                                     "q5_1", "q2_k", "q3_k", "q4_k", "q5_k",
                                     "q6_k"), in memory, as `flux quantize`
                                     would write them; components already
                                     quantized stay as they are; NULL = off */
    const char *vae_file;         /* single-file VAE replacing vae/: diffusers or
                                     BFL/LDM names (ComfyUI's flux2-vae.safetensors,
                                     BFL's full_encoder_small_decoder); its
                                     config comes from its tensor shapes;
                                     NULL = the folder */
    const char *tokenizer_file;   /* tokenizer.json replacing tokenizer/; NULL =
                                     the folder's, or without a folder the text
                                     encoder GGUF's tokenizer.ggml.* arrays, else
                                     the installed copy (make install:
                                     $PREFIX/share/flux/tokenizer.json) */
} flux_load_options;

FLUX_API void flux_load_options_init(flux_load_options *lo);

/* Load a model folder in the official Hugging Face layout:
 *   model_index.json, transformer/{config.json,*.safetensors[.index.json]},
 *   text_encoder/{config.json,*.safetensors[.index.json]}, vae/...,
 *   tokenizer/tokenizer.json, scheduler/scheduler_config.json.
 * Every dimension comes from the config files. lo may be NULL.
 * No folder (model_dir NULL or ""): lo must name transformer_file,
 * text_encoder_file and vae_file; every dimension then comes from the
 * tensor shapes, the FLUX.2-klein constants (RoPE axes and theta, eps
 * values, the Qwen3 layers read, the scheduler's shift) are those of the
 * published configs, the tokenizer as for lo->tokenizer_file, and the
 * variant (distilled or base) from lo->distilled, else the transformer
 * file's metadata, else its file name (with a warning). With a folder and
 * a transformer_file, the file's own hints win over model_index.json.
 * Errors: FLUX_ERR_IO (missing file), FLUX_ERR_FORMAT (bad JSON,
 * safetensors or GGUF), FLUX_ERR_MODEL (tensor missing or misshapen, a
 * tensor the configs do not use, or a GGUF architecture key that
 * contradicts the config; the message names file, tensor or key, expected
 * and found).
 * Files that change afterwards: when a weight file is replaced, rewritten
 * or cut short on disk (say by `cp` over the folder), the next
 * flux_generate / flux_encode_text loads the model (folder or files) again with the same
 * options and LoRA adapters (same files and strengths, in order; an adapter
 * that no longer loads fails that call naming it, and is tried again at the
 * next) before it starts; a file cut short while a call reads it fails
 * that call with FLUX_ERR_IO naming the file (the read would otherwise be
 * a SIGBUS: a handler is installed for SIGBUS during those calls and the
 * previous one restored after; faults outside the mapped weights go to the
 * previous handler; FLUX_SIGNALS_MAPPED_FAULTS, at the end, turns it off). */
FLUX_API flux_status flux_load(flux_ctx *ctx, const char *model_dir,
                               const flux_load_options *lo);

typedef struct flux_model_info {
    const char *name;          /* folder name, e.g. "FLUX.2-klein-4B" */
    int distilled;             /* 1 distilled (4 steps, no CFG), 0 base */
    int hidden;                /* transformer width d (3072 for 4B) */
    int heads, head_dim;
    int double_blocks, single_blocks;
    int text_dim;              /* joint_attention_dim (7680 for 4B) */
    int text_hidden;           /* Qwen3 hidden size (2560 for 4B) */
    int text_layers_used;      /* Qwen3 layers run (27 for klein) */
    int latent_channels;       /* 128 packed channels */
    int default_steps;         /* 4 distilled, 50 base */
    float default_guidance;    /* 1.0 distilled, 4.0 base */
    const char *variant_reason; /* why distilled or base: "model_index.json
                                   is_distilled", "forced (--base)", a file's
                                   metadata key or name (flux_load's rules) */
} flux_model_info;

/* Describe the loaded model. FLUX_ERR_STATE if nothing is loaded. */
FLUX_API flux_status flux_get_model_info(const flux_ctx *ctx, flux_model_info *info);

/* ------------------------------------------------------------------------ */
/* LoRA adapters                                                            */
/* ------------------------------------------------------------------------ */

/* LoRA / LyCORIS files for the loaded transformer, as users download them:
 * diffusers/PEFT (transformer.transformer_blocks.N.attn.to_q.lora_A.weight,
 * alpha from the lora_adapter_metadata header or .alpha), BFL names with
 * PEFT suffixes (diffusion_model.double_blocks.N.img_attn.qkv.lora_A.weight,
 * with or without the prefix), kohya/musubi (lora_unet_double_blocks_N_...
 * lora_down/lora_up + .alpha), ComfyUI variants, LyCORIS LoKr and LoHa, and
 * full deltas (.diff). Module names are matched against the model's own
 * tensors, whichever naming the model and the file use (a BFL fused-qkv
 * LoRA on diffusers weights, split q/k/v LoRAs on a BFL single file).
 * DoRA (ai-toolkit/PEFT .magnitude, LyCORIS .dora_scale) is applied exactly
 * (README, LoRA adapters); OFT and other schemes, and key suffixes of no
 * known scheme, are refused with an error naming the key.
 *
 * Adapters are applied at run time, y = W·x + Σ scale·(α/r)·B·(A·x), as
 * extra terms of the linear layers: the weights (mmap'd, any precision)
 * are never modified, so adding, rescaling or removing an adapter is
 * immediate and needs no reload, and with no adapter (or every scale 0)
 * results are bit-identical to a context that never had one. Cost per
 * step: about 2·r·(in + out) per token and layer, a few % of the step at
 * rank 16 (README). Adapters stack in the order loaded. Loading a new model
 * (flux_load) removes them. The A1111 "parameters" text of generated images
 * lists every adapter with a nonzero scale as <lora:NAME:SCALE> after the
 * prompt, and the "loras" text entry as "NAME:SCALE, ...". */
#define FLUX_MAX_LORAS 64

typedef struct flux_lora_info {
    const char *path;     /* as given to flux_lora_load */
    const char *name;     /* file name without folder and .safetensors (the
                             A1111 tag name; ':' '<' '>' replaced by '_') */
    float scale;          /* the strength */
    int modules;          /* transformer modules it changes */
    const char *kinds;    /* "LoRA", "LoKr", "LoHa", "diff", "DoRA", or several joined by '+' */
    const char *naming;   /* key naming found: "diffusers", "BFL", "flattened (kohya/LyCORIS)" */
    int ignored_keys;     /* keys matching no module, and text-encoder keys */
    const char *warning;  /* "" or one line about the ignored keys (count, first few) */
} flux_lora_info;

/* Load an adapter file for the loaded model and apply it with `scale`
 * (any finite number; 1 = as trained, 0 = loaded but inactive). It becomes
 * adapter flux_lora_count() − 1. Errors: FLUX_ERR_STATE (no model),
 * FLUX_ERR_IO / FLUX_ERR_FORMAT (file), FLUX_ERR_MODEL (keys that match no
 * module at all, shapes that contradict the module, ranks that disagree,
 * a non-finite alpha: the message names file and key),
 * FLUX_ERR_UNSUPPORTED (DoRA, ...), FLUX_ERR_INVALID_ARG (scale, more than
 * FLUX_MAX_LORAS). Keys that match nothing, while others do, only give a
 * warning (flux_lora_get_info). */
FLUX_API flux_status flux_lora_load(flux_ctx *ctx, const char *path, float scale);
/* Change the strength of adapter `index` (no file access). Here and in
 * flux_lora_remove / flux_lora_get_info an index outside
 * 0 .. flux_lora_count() − 1 is FLUX_ERR_INVALID_ARG (nothing changes), as
 * is a scale that is not finite. */
FLUX_API flux_status flux_lora_set_scale(flux_ctx *ctx, int index, float scale);
/* Remove adapter `index`; later ones move down by one. */
FLUX_API flux_status flux_lora_remove(flux_ctx *ctx, int index);
/* Remove every adapter. */
FLUX_API void flux_lora_clear(flux_ctx *ctx);
/* Adapters loaded (0 when ctx is NULL). */
FLUX_API int flux_lora_count(const flux_ctx *ctx);
/* Describe adapter `index`; the strings stay valid until it is removed. */
FLUX_API flux_status flux_lora_get_info(const flux_ctx *ctx, int index, flux_lora_info *info);

/* ------------------------------------------------------------------------ */
/* Quantized weights (GGUF, fp8 safetensors)                                */
/* ------------------------------------------------------------------------ */

typedef struct flux_quantize_options {
    const char *type;              /* "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k",
                                      "q3_k", "q4_k", "q5_k", "q6_k" (GGUF);
                                      "fp8" (= "fp8_e4m3"), "fp8_e5m2"
                                      (safetensors) */
    const char *component;         /* "transformer" or "text-encoder" */
    const char *transformer_file;  /* sources replacing the folder's weights, */
    const char *text_encoder_file; /* as in flux_load_options (NULL = folder) */
    /* Called before each tensor and at the end; nonzero cancels
     * (FLUX_ERR_CANCELLED, nothing written). May be NULL. */
    int (*progress)(void *user, int done, int total, uint64_t bytes_done, uint64_t bytes_total);
    void *progress_user;
} flux_quantize_options;

FLUX_API void flux_quantize_options_init(flux_quantize_options *o);

/* Write one component of the model folder as a GGUF file that peers read
 * (ComfyUI-GGUF, stable-diffusion.cpp, llama.cpp naming): the transformer
 * with BFL names and general.architecture "flux", the text encoder with
 * llama.cpp Qwen3 names (all its layers) and "qwen3"; 1-D tensors F32, the
 * transformer's img_in/txt_in/time_in/final_layer BF16, every other weight
 * the requested type, quantized with ggml's reference algorithms
 * (byte-identical blocks). The fp8 types write a safetensors file in
 * ComfyUI's convention instead (README "fp8 checkpoints"): the same names
 * as the GGUF transformer (BFL) and the Hugging Face names for the text
 * encoder, the same F32/BF16 tensors (and the text encoder's embedding table
 * BF16), every other weight F8_E4M3 / F8_E5M2 with one F32
 * '<layer>.weight_scale' = max|W| / fp8 max (448 / 57344; 1 for an all-zero
 * W) and codes fp8(W / scale) (nearest even, saturating), plus ComfyUI's
 * "_quantization_metadata". The file is written atomically: on any error or
 * cancellation nothing is left at out_path. Uses the context's threads;
 * does not change the model loaded in ctx. */
FLUX_API flux_status flux_quantize(flux_ctx *ctx, const char *model_dir, const flux_quantize_options *o,
                                   const char *out_path);

/* ------------------------------------------------------------------------ */
/* Images                                                                   */
/* ------------------------------------------------------------------------ */

/* An 8-bit image, channels interleaved (RGB = 3), rows top to bottom, plus
 * text metadata (key/value pairs written as PNG tEXt chunks). */
typedef struct flux_image {
    int width, height, channels;
    uint8_t *data;           /* [height, width, channels] */
    int n_text;
    char **text_keys;        /* [n_text] owned strings */
    char **text_values;      /* [n_text] owned strings */
} flux_image;

/* Allocate a zeroed image (channels 1..4). NULL on bad size or no memory. */
FLUX_API flux_image *flux_image_new(int width, int height, int channels);
FLUX_API void flux_image_free(flux_image *img);
/* Set (or replace) a metadata entry; value NULL removes it. Keys and values
 * are UTF-8 (PNG: written as tEXt when Latin-1, else iTXt; keys must be
 * 1-79 Latin-1 characters). Returns FLUX_OK, FLUX_ERR_NOMEM, or
 * FLUX_ERR_INVALID_ARG for a NULL image or an empty key. */
FLUX_API flux_status flux_image_set_text(flux_image *img, const char *key, const char *value);
/* The value of a metadata entry, or NULL. */
FLUX_API const char *flux_image_get_text(const flux_image *img, const char *key);

/* Read a PNG (gray, gray+alpha, RGB, RGBA, palette, 8 or 16 bit) or a binary
 * PPM (P6) into an 8-bit RGB image (alpha dropped, 16-bit scaled to 8-bit).
 * PNG tEXt chunks are read into the metadata. */
FLUX_API flux_status flux_image_load(flux_ctx *ctx, const char *path, flux_image **out);

/* Write a PNG (by extension .png) or PPM (.ppm). The write is atomic: data
 * goes to a temporary file in the same directory that is renamed over the
 * destination only when complete, so a failure never leaves a partial file. */
FLUX_API flux_status flux_image_save(flux_ctx *ctx, const flux_image *img, const char *path);

/* Decode a PNG or binary PPM file held in memory (data[0, n)), as
 * flux_image_load reads files: an 8-bit RGB image with the PNG's text
 * metadata. `name` names the data in error messages (NULL: "image"). For
 * servers and other callers whose images never touch the disk. */
FLUX_API flux_status flux_image_decode(flux_ctx *ctx, const uint8_t *data, size_t n, const char *name, flux_image **out);

/* Encode img as the PNG bytes flux_image_save writes for a .png path (same
 * metadata, byte for byte) into a new buffer: *out (release it with
 * flux_buffer_free) and its length *len. An image flux_image_new would not
 * make (size, channels, no pixels) or with inconsistent metadata arrays is
 * FLUX_ERR_INVALID_ARG for both (nothing written, *out NULL, *len 0). */
FLUX_API flux_status flux_image_encode_png(flux_ctx *ctx, const flux_image *img, uint8_t **out, size_t *len);

/* How a client's mask image marks the area to repaint (flux_mask_decode). */
typedef enum flux_mask_source {
    FLUX_MASK_GRAY = 0,        /* white repaints, black keeps: the pixels as flux_image_decode
                                  reads them (diffusers' mask_image; flux --mask) */
    FLUX_MASK_TRANSPARENT = 1, /* OpenAI images/edits: fully transparent pixels (alpha 0) are
                                  edited, all others kept; a mask without transparency
                                  (no alpha channel, no tRNS chunk) or without a fully
                                  transparent pixel is an error */
    FLUX_MASK_A1111 = 2        /* AUTOMATIC1111's create_binary_mask (modules/processing.py,
                                  mask_round on): the alpha channel when the image has one that
                                  is not entirely 255, else the gray value (PIL "L"); > 128
                                  repaints */
} flux_mask_source;

/* Decode a mask (PNG or binary PPM in data[0, n)) for flux_params.mask:
 * FLUX_MASK_GRAY gives the decoded RGB image itself; the others a
 * 1-channel image of 255 (repaint) and 0 (keep) built by the rule above
 * (the PNG's transparency read as PIL's convert("RGBA") sees it). `name`
 * names the data in errors. Free *out with flux_image_free. */
FLUX_API flux_status flux_mask_decode(flux_ctx *ctx, const uint8_t *data, size_t n, const char *name,
                                      flux_mask_source how, flux_image **out);

/* Release a buffer the library allocated for the caller (NULL allowed). */
FLUX_API void flux_buffer_free(void *buf);

/* ------------------------------------------------------------------------ */
/* Generation                                                               */
/* ------------------------------------------------------------------------ */

typedef enum flux_schedule {
    FLUX_SCHEDULE_SHIFTED = 0, /* the official empirical-μ shifted schedule */
    FLUX_SCHEDULE_LINEAR,      /* σ_i = 1 − i/S */
    FLUX_SCHEDULE_POWER        /* σ_i = 1 − (i/S)^α */
} flux_schedule;

typedef enum flux_stage {
    FLUX_STAGE_LOAD = 0,
    FLUX_STAGE_TEXT_ENCODE, /* step = prompt (2 with CFG: the negative one),
                               substep = Qwen3 layers done */
    FLUX_STAGE_VAE_ENCODE,  /* step = reference image, substep = encoder
                               stages done (levels, mid block, output) */
    FLUX_STAGE_DENOISE,     /* step = Euler step, substep = blocks done */
    FLUX_STAGE_VAE_DECODE,  /* step = image, substep = decoder stages done
                               (mid block, levels, output) */
    FLUX_STAGE_DONE
} flux_stage;

/* Progress callback: called from the calling thread. Return 0 to continue,
 * non-zero to cancel (the call then fails with FLUX_ERR_CANCELLED within
 * one substep: a layer, a block or a decoder stage). step/total count the
 * stage's main units (steps, images), substep/subtotal the units inside one
 * (blocks, layers, stages), reported after each; unknown values are 0. */
typedef int (*flux_progress_fn)(void *user, flux_stage stage, int step, int total,
                                int substep, int subtotal);

typedef struct flux_params {
    const char *prompt;          /* UTF-8; required unless embeddings given */
    const char *negative_prompt; /* base model CFG negative; NULL = "" */
    int width, height;           /* multiples of 16; 0 = 256, or the first
                                    reference's processed size */
    int steps;                   /* 0 = model default (4 / 50) */
    uint64_t seed;               /* FLUX_SEED_RANDOM = from clock; the seed used
                                    is written back to *seed_used if set */
    uint64_t *seed_used;
    float guidance;              /* < 0 = model default (1.0 / 4.0); CFG runs
                                    only on base models with guidance > 1
                                    (> 1 on a distilled model is an error, as
                                    is a negative prompt without CFG) */
    flux_schedule schedule;
    float power_alpha;           /* for FLUX_SCHEDULE_POWER; default 2 */
    const flux_image *const *refs; /* reference images (img2img / multi-ref),
                                    pre-processed as the official pipeline:
                                    RGB, sides >= 16 px, aspect <= 8:1, area
                                    > 1024² resized (Lanczos) to 1024², centre
                                    crop to multiples of 16; not modified */
    int n_refs;                  /* 0..FLUX_MAX_REFS */
    int batch;                   /* images from one prompt (seeds seed, seed+1,
                                    ...); 0 or 1 = one image; negative is
                                    FLUX_ERR_INVALID_ARG */
    /* img2img and inpainting, as diffusers' Flux2KleinInpaintPipeline (README
     * "img2img and inpainting"; every rule there):
     *   init_image: NULL = text-to-image. The source image: area above
     *     1024² resized (Lanczos) to that area, then stretched (Lanczos) to
     *     its size floored to multiples of 16, which is the output size
     *     (width/height must be 0 or equal to it). It is VAE-encoded (the
     *     distribution's mode) into x0 and is also the first reference
     *     image (T offset 10); refs follow it (at most FLUX_MAX_REFS
     *     images in all).
     *   strength: in [0, 1] (diffusers' default 0.8; flux_params_init sets
     *     it): of `steps` steps, those from t_start = int(max(steps −
     *     min(steps·strength, steps), 0)) run, from σ_{t_start}·noise +
     *     (1 − σ_{t_start})·x0. A strength that leaves no step (0) is an
     *     error (FLUX_ERR_INVALID_ARG naming "strength").
     *   mask: optional, any size, 1..4 channels: white (≥ 128 after gray
     *     conversion and Lanczos resize to the output size) = repaint,
     *     black = keep; bilinear to the token grid; after every step the
     *     latents are (1 − m)·x0 noised to the next σ (x0 after the last)
     *     + m·latents. NULL = plain img2img (all repainted).
     *   mask_invert: 1 = use 255 − gray(mask) (A1111 inpainting_mask_invert).
     *   mask_blur_x, mask_blur_y: A1111's mask_blur_x / mask_blur_y (its
     *     mask_blur sets both; A1111's default is 4): σ in pixels, 0..64, 0 =
     *     none; after the invert, before the rules above, the gray mask is
     *     blurred exactly as A1111's cv2.GaussianBlur(mask, (2·int(2.5σ +
     *     0.5) + 1, 1), σ) along x, then the same along y (README).
     * init_image, mask: not modified, any number of calls may share them. */
    const flux_image *init_image;
    double strength;
    const flux_image *mask;
    int mask_invert;
    double mask_blur_x, mask_blur_y;
    const float *embeddings;     /* optional [512, text_dim] prompt embeddings
                                    replacing the text encoder (then prompt
                                    must be NULL) */
    const float *negative_embeddings; /* optional, same shape, for CFG (then
                                    negative_prompt must be NULL) */
    const float *noise;          /* optional [128, H/16, W/16] initial noise */
    const char *dump_dir;        /* if set, write .npy files of every stage */
    flux_progress_fn progress;
    void *progress_user;
} flux_params;

/* Fill *p with defaults: no prompt, size 0×0 (= 256×256), steps 0 (auto),
 * seed FLUX_SEED_RANDOM, guidance −1 (auto), shifted schedule, alpha 2,
 * no init image, strength 0.8, no mask. */
FLUX_API void flux_params_init(flux_params *p);

/* Generate one image (txt2img, or img2img / multi-reference when refs are
 * given; classifier-free guidance on base models). *out receives a new RGB
 * image with metadata (prompt, seed, steps, size, guidance, schedule, model,
 * software, A1111-style "parameters"); free it with flux_image_free.
 * With p->batch > 1 this generates only the first image; use
 * flux_generate_batch for all of them. */
FLUX_API flux_status flux_generate(flux_ctx *ctx, const flux_params *p, flux_image **out);

/* Generate p->batch images (seeds seed, seed+1, ...) sharing one text
 * encoding. out must have room for p->batch pointers. */
FLUX_API flux_status flux_generate_batch(flux_ctx *ctx, const flux_params *p, flux_image **out);

/* ------------------------------------------------------------------------ */
/* Text                                                                     */
/* ------------------------------------------------------------------------ */

/* Tokenize a prompt. With raw = 0 the klein chat template is applied; no
 * padding either way. Writes up to max_ids ids and sets *n_ids to the full
 * count (which may exceed max_ids). Needs tokenizer/tokenizer.json.
 * max_ids < 0 is FLUX_ERR_INVALID_ARG; max_ids 0 only counts (ids may be NULL). */
FLUX_API flux_status flux_tokenize(flux_ctx *ctx, const char *text, int raw,
                                   int32_t *ids, int max_ids, int *n_ids);

/* Encode a prompt into klein text embeddings: out = [512, text_dim] floats
 * (Qwen3 hidden states 9, 18, 27 stacked per token; 512 rows including
 * padding). out must hold 512·text_dim floats. Loads the text encoder if it
 * was released. Uses the embedding cache unless disabled. */
FLUX_API flux_status flux_encode_text(flux_ctx *ctx, const char *prompt, float *out);

/* Free the text encoder's weights and buffers (it reloads on demand). */
FLUX_API void flux_release_text_encoder(flux_ctx *ctx);

/* ------------------------------------------------------------------------ */
/* Build and CPU information                                                */
/* ------------------------------------------------------------------------ */

/* "0.1.0" */
FLUX_API const char *flux_version(void);
/* Compiler, flags, OpenMP, build variant: one line. */
FLUX_API const char *flux_build_info(void);
/* Detected CPU features and the kernels this context uses (ctx NULL: a
 * default context), several lines written into buf (always NUL-terminated
 * when size > 0; buf NULL: nothing written). Returns the length needed. */
FLUX_API size_t flux_cpu_info(const flux_ctx *ctx, char *buf, size_t size);

/* One Vulkan device as the loader enumerates it (flux --list-devices). */
typedef struct flux_device_info {
    int index;                /* the number --device / flux_options.device take */
    char name[256];           /* "llvmpipe (LLVM 15.0.6, 256 bits)" */
    char type[32];            /* "discrete GPU", "integrated GPU", "CPU", ... */
    char driver[256];         /* driver name and version */
    unsigned long long memory;/* largest device-local heap, bytes */
    int usable;               /* 0: why_not says what is missing */
    char why_not[160];
} flux_device_info;

/* Up to max devices into out, their number in *count (max <= 0: none
 * written, out may be NULL). A build without
 * Vulkan, or no Vulkan loader/driver: FLUX_ERR_UNSUPPORTED with the reason
 * in flux_error(ctx); no devices is FLUX_OK with *count 0. */
FLUX_API flux_status flux_list_devices(flux_ctx *ctx, flux_device_info *out, int max, int *count);

/* What runs the stages of this context: "cpu" or "vulkan: <device>". */
FLUX_API const char *flux_backend_name(const flux_ctx *ctx);

/* ------------------------------------------------------------------------ */
/* Process-wide state                                                       */
/* ------------------------------------------------------------------------ */

/* Signal dispositions belong to the process, so the handlers flux may
 * install are chosen per process, by these bits:
 *
 * FLUX_SIGNALS_TEMP_FILES   SIGINT, SIGTERM, SIGHUP, only while a file
 *     flux writes atomically is open (images, .npy dumps, the embedding
 *     cache, quantized GGUF and safetensors files) and only for signals
 *     still at their default action: the handler removes the temporary
 *     files and re-raises the signal, so the process dies as it would
 *     have, without leftovers. Off by default: an application's SIGINT
 *     stays its own. The flux CLI turns it on.
 * FLUX_SIGNALS_FILE_SIZE    SIGXFSZ set to "ignore" while such a file is
 *     open, if it is at its default: a file-size limit (ulimit -f) fails
 *     the write with FLUX_ERR_IO ("File too large") instead of killing the
 *     process. On by default.
 * FLUX_SIGNALS_MAPPED_FAULTS  SIGBUS, during flux_generate,
 *     flux_generate_batch and flux_encode_text (set on entry, the previous
 *     disposition restored when the last such call returns): a weight file
 *     cut short under the mapping fails the call with FLUX_ERR_IO naming
 *     the file (flux_load); faults elsewhere go to the previous handler.
 *     Off: such a file kills the process with SIGBUS. On by default.
 * FLUX_SIGNALS_CPU_PROBE    SIGILL and SIGSEGV, during the one-off
 *     self-test of the AMX tile kernels (the first flux_new or
 *     flux_cpu_info of the process, on a CPU that reports AMX; one small
 *     GEMM, the previous handlers restored right after): a CPU or
 *     hypervisor that reports AMX but faults on it gets AMX turned off.
 *     Off: the self-test runs unguarded (its results are still checked,
 *     but a machine whose tiles fault then dies of the fault). On by
 *     default.
 *
 * flux_set_signals(which) sets the bits for calls that start afterwards
 * (call it before the first flux_new to govern the CPU probe) and returns
 * the previous set. A handler flux installed is removed only if it is
 * still the disposition; one the application installs meanwhile is left
 * alone.
 *
 * Other process-wide state, none of it settable: the CPU's features and
 * the AMX self-test result (computed once, read-only after); on Linux
 * with AMX, the tile-state permission requested from the kernel once
 * (arch_prctl, irreversible for the process); the OpenMP runtime's thread
 * pool (flux never changes its settings; each context passes its thread
 * count per parallel region); the tables of open temporary files and
 * guarded mappings the handlers above read; and the environment variables
 * read at flux_new (FLUX_ISA, FLUX_PRECISION, OMP_NUM_THREADS) and for the
 * embedding cache (XDG_CACHE_HOME, HOME, FLUX_CACHE_MAX_MB). */
#define FLUX_SIGNALS_TEMP_FILES 1u
#define FLUX_SIGNALS_MAPPED_FAULTS 2u
#define FLUX_SIGNALS_CPU_PROBE 4u
#define FLUX_SIGNALS_FILE_SIZE 8u
#define FLUX_SIGNALS_DEFAULT (FLUX_SIGNALS_FILE_SIZE | FLUX_SIGNALS_MAPPED_FAULTS | FLUX_SIGNALS_CPU_PROBE)
#define FLUX_SIGNALS_ALL (FLUX_SIGNALS_TEMP_FILES | FLUX_SIGNALS_DEFAULT)

/* Choose the handlers above (bits outside FLUX_SIGNALS_ALL are ignored);
 * returns the previous set. Safe to call from any thread at any time. */
FLUX_API unsigned flux_set_signals(unsigned which);

#ifdef __cplusplus
}
#endif

#endif /* FLUX_H */
