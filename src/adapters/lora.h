/*
 * lora.h — LoRA / LyCORIS adapter files for the FLUX.2 transformer, as
 * users download them (README "LoRA adapters": the trainers' conventions), resolved against
 * the model's own weight set.
 *
 * A file is a safetensors file of factor tensors named "<module><suffix>".
 * Suffixes (lora_keys.c, fx_lora_parse_key):
 *   LoRA     .lora_A.weight / .lora_B.weight (PEFT, also .lora_A.default.weight),
 *            .lora_down.weight / .lora_up.weight (kohya), .lora.down/.up.weight,
 *            _lora.down/.up.weight, .lora_linear_layer.down/.up.weight; .alpha
 *   LoKr     .lokr_w1 | .lokr_w1_a + .lokr_w1_b, .lokr_w2 | .lokr_w2_a + .lokr_w2_b; .alpha
 *   LoHa     .hada_w1_a .hada_w1_b .hada_w2_a .hada_w2_b; .alpha
 *   diff     .diff (a full ΔW); .diff_b targets a bias, which FLUX.2 has not
 *   DoRA     with any of the above: .magnitude (ai-toolkit) or
 *            .lora_magnitude_vector[.weight|.default.weight] (PEFT), m [out];
 *            .dora_scale (LyCORIS) [out, 1]; the per-input form [1, in]
 *            (LyCORIS wd_on_out=False) is refused
 *   refused  .set_weight, Tucker
 *            cores (.lokr_t1/.lokr_t2/.hada_t1/.hada_t2), LoCon .lora_mid,
 *            OFT/BOFT, GLoRA, LyCORIS norms, LoRA biases, IA3: an error naming
 *            the key and the scheme; any other suffix: an error naming the
 *            key (never silently ignored).
 * Module names: after stripping any of the prefixes "base_model.model.",
 * "model.diffusion_model.", "diffusion_model.", "transformer.", "unet.",
 * "lora_unet_", "lycoris_", "lora_transformer_", the name is looked up with
 * every '.' read as '_' among the model's own modules: each linear weight
 * of the weight set under its diffusers name ("transformer_blocks.0.attn.to_q")
 * and under its BFL name (single_file.h: "double_blocks.0.img_attn.qkv",
 * whose ΔW rows are the q, k, v thirds of three diffusers tensors;
 * "final_layer.adaLN_modulation.1", whose halves are swapped). So
 * diffusers/PEFT, BFL with or without prefixes, kohya/musubi
 * ("lora_unet_double_blocks_0_img_attn_qkv"), LyCORIS ("lycoris_..."),
 * ComfyUI and half-converted names ("double_blocks.0.img_attn_qkv") all
 * resolve, to rows of the tensors the transformer reads. Keys of a text
 * encoder ("lora_te*", "text_encoder*", "lycoris_te*") are ignored; keys
 * with a known suffix whose module matches nothing are ignored with a
 * warning naming the first few; a file where nothing matches is an error.
 *
 * Scale of a module (the file's own factor; the user's strength multiplies
 * it): LoRA α/r with r = rows of A and α from the module's .alpha, else
 * from the header metadata "lora_adapter_metadata" (PEFT/diffusers JSON:
 * "[transformer.]lora_alpha", "…alpha_pattern" entries matched by module
 * name or dotted suffix, "…use_rslora" → α/√r, "…use_dora" → every LoRA
 * module must carry its magnitude), else
 * α = r (scale 1). LoKr α/r with r = rows of lokr_w2_b, else of lokr_w1_b,
 * and 1 when both factors are full (as ComfyUI and stable-diffusion.cpp);
 * LoHa α/(rows of hada_w1_b); diff 1. Without .alpha: 1.
 *
 * What a module becomes (an fx_delta over its ΔW rows, kernels.h): LoRA →
 * LOWRANK with A and B used in place from the mapped file; LoKr → KRON with
 * whole factors and the two factors of a factored W2 in place (applied as
 * a product), a factored W1 (small) multiplied out in f32; LoHa →
 * ΔW = (w1_a·w1_b) ⊙ (w2_a·w2_b), exactly a product of rank r1·r2 (its
 * Khatri–Rao form, lora.c): LOWRANK in f32 when that is smaller than ΔW
 * (the usual ranks), else DENSE with ΔW built in f32 (4 bytes per weight
 * of the module); diff → DENSE in place.
 *
 * DoRA (a module with a magnitude m): the layer becomes, per output row j,
 *   W'_j = W_j + λ·(g_j·(W_j + s·ΔW_j) − W_j),  g_j = m_j / ‖W_j + s·ΔW_j‖
 * (s the file's scale, λ the user's strength, the norm over the inputs;
 * λ = 1: m·(W + sΔW)/‖W + sΔW‖ as PEFT, ai-toolkit and LyCORIS define it).
 * The norms need the model's weights: they are made when the adapter is
 * attached (fx_dit_set_adapters); here m is only read and checked.
 *
 * Hostile files fail with FLUX_ERR_FORMAT / FLUX_ERR_MODEL naming the file
 * and the key: factor shapes that contradict the module, A/B ranks that
 * disagree, non-finite or non-scalar .alpha, incomplete modules, two
 * schemes on one module, dtypes other than F32/F16/BF16 (alpha: any float
 * or integer dtype), truncated or malformed safetensors.
 */
#ifndef FX_LORA_H
#define FX_LORA_H

#include <stddef.h>

#include "src/formats/weight_set.h"

/* ------------------------------------------------------------------------ */
/* Keys                                                                     */
/* ------------------------------------------------------------------------ */

typedef enum fx_lora_part {
    FX_LORA_UNKNOWN = 0, /* no suffix we know: the key matches nothing */
    FX_LORA_A, FX_LORA_B, FX_LORA_ALPHA,
    FX_LORA_LOKR_W1, FX_LORA_LOKR_W1_A, FX_LORA_LOKR_W1_B,
    FX_LORA_LOKR_W2, FX_LORA_LOKR_W2_A, FX_LORA_LOKR_W2_B,
    FX_LORA_HADA_W1_A, FX_LORA_HADA_W1_B, FX_LORA_HADA_W2_A, FX_LORA_HADA_W2_B,
    FX_LORA_DIFF, FX_LORA_DIFF_B,
    FX_LORA_MAGNITUDE,   /* DoRA m [out]: ai-toolkit .magnitude, PEFT .lora_magnitude_vector */
    FX_LORA_DORA_SCALE,  /* DoRA m, LyCORIS: [out, 1] (wd_on_out) or [1, in] */
    FX_LORA_REFUSED,     /* a scheme flux.c does not apply (scheme names it) */
    FX_LORA_PART_COUNT
} fx_lora_part;

typedef struct fx_lora_key {
    fx_lora_part part;
    size_t stem_len;     /* the module name is key[0, stem_len) */
    const char *scheme;  /* "DoRA", ... for FX_LORA_REFUSED; else NULL */
    int text_encoder;    /* the module belongs to a text encoder */
} fx_lora_key;

/* Classify one tensor name. Never fails (FX_LORA_UNKNOWN). */
void fx_lora_parse_key(const char *key, fx_lora_key *out);

/* A module name without its known prefixes (*len updated). */
const char *fx_lora_strip_prefixes(const char *stem, size_t *len);

/* The lookup form of a module name: known prefixes stripped, '.' → '_'.
 * Writes at most size bytes (NUL included); returns the length it needs. */
size_t fx_lora_flat_name(const char *stem, size_t stem_len, char *out, size_t size);

/* ------------------------------------------------------------------------ */
/* Adapters                                                                 */
/* ------------------------------------------------------------------------ */

/* One target of a module: ΔW rows [src_row0, src_row0 + rows) add to rows
 * [tensor_row0, tensor_row0 + rows) of the model tensor `tensor`. */
typedef struct fx_lora_piece {
    char tensor[FX_ST_MAX_NAME]; /* "transformer_blocks.0.attn.to_q.weight" */
    int64_t tensor_row0, src_row0, rows;
} fx_lora_piece;

typedef struct fx_lora_module {
    const char *key;     /* the module name as in the file (owned) */
    fx_delta delta;      /* ΔW [delta.rows, in] as a term: row0 0, scale = the file's */
    const float *magnitude; /* DoRA: m [delta.rows] (f32, owned), or NULL (plain) */
    int64_t in;
    int n_pieces;
    fx_lora_piece piece[3];
} fx_lora_module;

typedef struct fx_lora fx_lora;

/* What opening found, for messages. */
typedef struct fx_lora_report {
    size_t keys;         /* tensors in the file */
    size_t modules;      /* modules applied */
    size_t text_encoder; /* text-encoder keys ignored */
    size_t unmatched;    /* keys ignored because they match no module */
    char kinds[64];      /* "LoRA", "LoRA+LoKr", ... */
    char naming[96];     /* "diffusers", "BFL", "flattened BFL (kohya/LyCORIS)", ... */
    char warning[768];   /* "" or one line on the ignored keys (count, first few) */
} fx_lora_report;

/* Open an adapter file for the transformer whose weight set is `model`
 * (names and shapes are all it reads). kc runs the f32 products of LoKr /
 * LoHa factors. use_mmap as fx_tensor_file_open. rep may be NULL. */
fx_lora *fx_lora_open(const char *path, const fx_wset *model, const fx_kctx *kc, int use_mmap,
                      fx_lora_report *rep, fx_err *err);
void fx_lora_free(fx_lora *l);

size_t fx_lora_count(const fx_lora *l);
const fx_lora_module *fx_lora_module_at(const fx_lora *l, size_t i);

#endif
