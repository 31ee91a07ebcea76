/*
 * transformer.h — the FLUX.2 flow transformer (Flux2Transformer2DModel,
 * BFL flux2 model.py; diffusers transformer_flux2.py), config-driven: any hidden size, head count, depth, RoPE axes.
 *
 * Two objects:
 *   fx_dit      the model: views of the mmap'd weights (never copied) and
 *               the small norm weights in f32. One per context
 *               (ctx->transformer), built by fx_dit_load.
 *   fx_dit_run  one generation: the sequence layout, the RoPE table, the
 *               projected text (and reference) tokens and one activation
 *               workspace, all made once by fx_dit_run_new; a forward pass
 *               allocates nothing.
 *
 * Batching. A run stacks B sequences (B = 1 plain; 2 for classifier-free
 * guidance; N for a batch of images) that share σ, the token layout and the
 * image tokens' positions; each has its own text and its own noisy target.
 * Every linear layer runs once over the rows of all B sequences, so the
 * weights are streamed once per step whatever B is; attention is per
 * sequence. Rows are interleaved token-major, sequence-minor:
 *
 *   row r = t·B + b   for token t of sequence b,
 *   tokens t = [text (L = 512) | target image (N) | ref 1 | ref 2 | ...]
 *
 * so each stream (text rows, image rows, target rows) is one contiguous row
 * range over the whole batch, and sequence b is the rows b, b+B, b+2B, ...
 * (one strided view for attention). Reference tokens (issue 6: img2img)
 * follow the target with positions (10·(k+1), y, x, 0); their outputs are
 * never computed past the last block.
 *
 * Workspace per row: h (residual stream, d), h0 (projected text/ref rows,
 * d), and U (4d + 2m) laid out as
 *   [Q | K | V | O | G | P]   (d, d, d, d, m, m)
 * Double blocks: AdaLN output → O slot, projections → Q K V, attention → O,
 * MLP in → [G | P], SwiGLU in place → G. Single blocks: the fused
 * to_qkv_mlp_proj is applied as two row slices of the same weight into
 * [Q K V] and [G P], so [O | silu(G)⊙P] is one contiguous d + m wide input
 * of the fused to_out projection. Gated residual adds are GEMM epilogues.
 */
#ifndef FX_TRANSFORMER_H
#define FX_TRANSFORMER_H

#include <stdint.h>

#include "src/model/ctx.h"
#include "src/model/config.h"

typedef struct fx_dit fx_dit;
typedef struct fx_dit_run fx_dit_run;

/* Build the transformer from ctx->model (weight views + f32 norm weights).
 * Errors name the tensor (FLUX_ERR_MODEL) or FLUX_ERR_STATE (no model). */
flux_status fx_dit_load(flux_ctx *ctx, fx_dit **out);
void fx_dit_free(fx_dit *d);
const fx_dit_config *fx_dit_cfg(const fx_dit *d);

/* The model of the context, built on first use. */
flux_status fx_dit_get(flux_ctx *ctx, fx_dit **out);

/* Adapters (LoRA / LyCORIS files, src/adapters/lora.h) on the transformer:
 * replaces whatever was attached by the modules of loras[0..n) with the
 * strengths given, as runtime terms of the linear views they cover
 * (fx_delta, kernels.h; the weights are never modified). Each piece of a
 * module lands on the rows of the views of its tensor that it overlaps
 * (split q/k/v views of a fused BFL qkv, the two row views of a single
 * block's fused projection, the halves of norm_out). Terms whose scale
 * (strength × the module's own) is 0 are left out, so n = 0 or all
 * strengths 0 give the plain transformer, bit for bit. On error (a
 * non-finite scale, a module that does not fit its view) nothing changes.
 * Runs created before keep their projected text/reference rows. */
struct fx_lora;
flux_status fx_dit_set_adapters(fx_dit *d, const struct fx_lora *const *loras, const float *strengths, int n,
                                fx_err *err);
/* Terms attached (0 = the plain transformer). */
size_t fx_dit_adapter_terms(const fx_dit *d);

/* Token layout of a run. */
#define FX_DIT_MAX_IMAGES (1 + FLUX_MAX_REFS)
typedef struct fx_dit_layout {
    int batch;                      /* B sequences stacked, >= 1 */
    int text_len;                   /* L text tokens per sequence (512) */
    int n_images;                   /* 1 target + references */
    int grid_h[FX_DIT_MAX_IMAGES];  /* token grid of each image: [0] = target */
    int grid_w[FX_DIT_MAX_IMAGES];
} fx_dit_layout;

/* Bytes of workspace a run of this layout needs (for planning batch sizes). */
int64_t fx_dit_run_bytes(const fx_dit *d, const fx_dit_layout *lay);

/* Called with an internal tensor of sequence b: `rows` rows of `cols`
 * floats, row stride ld. Names follow the diffusers modules (as the golden
 * internals_velocity_t1/): "time_guidance_embed" [1, d], "x_embedder"
 * [N, d], "context_embedder" [L, d], "transformer_blocks.K.img" / ".txt",
 * "single_transformer_blocks.K" [L + N_img, d] (text first), "proj_out". */
typedef void (*fx_dit_observer)(void *user, const char *name, int b, const float *data, int64_t rows,
                                 int64_t cols, int64_t ld);

/* Create a run: checks the layout, allocates the workspace, builds the
 * RoPE table. */
flux_status fx_dit_run_new(flux_ctx *ctx, fx_dit *d, const fx_dit_layout *lay, fx_dit_run **out);
void fx_dit_run_free(fx_dit_run *r);

void fx_dit_run_set_observer(fx_dit_run *r, fx_dit_observer fn, void *user);

/* Text embeddings of every sequence: emb[b] = [L, text_dim]. Projected by
 * context_embedder once here (not per step); equal pointers are projected
 * once and copied. */
flux_status fx_dit_run_set_text(fx_dit_run *r, const float *const *emb);

/* Reference image k (1..n_images−1) tokens [grid_h[k]·grid_w[k], in_channels],
 * packed BN-normalised latents; the same for every sequence. Projected by
 * x_embedder once here. */
flux_status fx_dit_run_set_image(fx_dit_run *r, int k, const float *tokens);

/* One transformer call at noise level sigma (t = 1000·σ): x = noisy target
 * tokens [B, N, in_channels] (sequence-major), v = predicted velocity
 * [B, N, out_channels]. The text (and every reference) must have been set.
 * A context checkpoint (ctx.h) follows every block: substep = blocks done
 * of double + single blocks; a cancellation there ends the call. */
flux_status fx_dit_forward(fx_dit_run *r, const float *x, float sigma, float *v);

/* Floating-point operations of one fx_dit_forward of this run (multiply-add
 * = 2): per block 2·R·d·(4d + 3m) in linear layers (R = rows of all
 * sequences) + 4·B·S²·d in attention, plus the embedders and final layer. */
double fx_dit_run_flops(const fx_dit_run *r);

/* Sinusoidal timestep embedding (BFL flux2 model.py; diffusers transformer_flux2.py), cos half first:
 * e[i] = cos(t·f_i), e[half + i] = sin(t·f_i), f_i = exp(−ln(10000)·i/half),
 * half = dim/2; computed in double, rounded once. */
void fx_timestep_embedding(double t, int dim, float *e);

#endif
