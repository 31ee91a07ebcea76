/*
 * quantize.h — quantizing a model component into a GGUF image the way
 * peers write them (flux quantize, and --quant on load).
 *
 * A plan lists the output tensors under the names peers use and where each
 * one's rows come from in the source weight set (the folder's diffusers /
 * Hugging Face names):
 *   - transformer: BFL names as ComfyUI-GGUF writes them (double_blocks.N.
 *     img_attn.qkv = the to_q | to_k | to_v rows, final_layer.
 *     adaLN_modulation.1 = norm_out's (shift, scale) halves, ...: the
 *     inverse of single_file.h's mapping); general.architecture "flux";
 *   - text encoder: llama.cpp Qwen3 names (qwen3_file.h) with the qwen3.*
 *     architecture key/values llama.cpp writes; general.architecture "qwen3".
 * Types: 1-D tensors (norm scales) F32; the small input/output projections
 * of the transformer (img_in, txt_in, time_in.*, final_layer.*) BF16, as
 * ComfyUI-GGUF and stable-diffusion.cpp keep them; every other 2-D weight
 * the requested type (BF16 when its row length is not a multiple of the
 * type's block). Rows are quantized with fx_quantize (ggml's reference
 * algorithms), so a tensor's blocks do not depend on the thread count.
 *
 * fp8 types (F8_E4M3, F8_E5M2) write a safetensors file in ComfyUI's
 * mixed-quant convention instead (README "fp8 checkpoints"): the same plan
 * (transformer BFL names; the text encoder under its Hugging Face names,
 * its embedding table BF16 since it is read by rows), every other 2-D
 * '.weight' fp8 with an F32 '<layer>.weight_scale' = max|W| / fp8 max and
 * codes fx_fp8_quantize_row(W, scale); "_quantization_metadata" in the
 * header's __metadata__.
 */
#ifndef FX_QUANTIZE_H
#define FX_QUANTIZE_H

#include "model.h"

typedef enum fx_component { FX_COMPONENT_TRANSFORMER = 0, FX_COMPONENT_TEXT_ENCODER } fx_component;

/* One output tensor: rows assembled from up to 3 source row ranges. */
typedef struct fx_qtensor {
    char name[FX_ST_MAX_NAME];
    int ndim;
    int64_t shape[2];          /* PyTorch order; 1-D: shape[0] */
    fx_dtype dtype;
    int n_seg;
    struct {
        char src[FX_ST_MAX_NAME];
        int64_t row0, rows;    /* rows of the source tensor */
    } seg[3];
} fx_qtensor;

typedef struct fx_qplan {
    fx_component component;
    fx_dtype type;             /* the requested type */
    fx_qtensor *t;
    size_t n;
    uint64_t bytes;            /* sum of the output tensors' sizes */
} fx_qplan;

/* Progress: tensors and output bytes done; return nonzero to cancel
 * (FLUX_ERR_CANCELLED). */
typedef int (*fx_qprogress)(void *user, size_t done, size_t total, uint64_t bytes_done, uint64_t bytes_total);

/* Plan the component of model m from its source set src (checked against
 * the config already). type: a type fx_quantize_row produces, or fp8. all_layers =
 * 0 keeps only what klein runs (text encoder: layers 0..layers_used−1 and
 * the embedding; nothing else is read). */
flux_status fx_qplan_build(const struct fx_model *m, const fx_wset *src, fx_component c, fx_dtype type, int all_layers,
                           fx_qplan *plan, fx_err *err);
void fx_qplan_free(fx_qplan *p);

/* Write the GGUF (fp8: safetensors) file atomically (nothing is left
 * behind on failure or cancellation). */
flux_status fx_quantize_to_file(const struct fx_model *m, fx_wset *src, const fx_qplan *p, const fx_kctx *kc,
                                const char *path, fx_qprogress progress, void *user, fx_err *err);

/* Build the file's image in memory (*image from posix_memalign; free()). */
flux_status fx_quantize_to_memory(const struct fx_model *m, fx_wset *src, const fx_qplan *p, const fx_kctx *kc,
                                  void **image, size_t *size, fx_err *err);

#endif
