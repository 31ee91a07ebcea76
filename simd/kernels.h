/*
 * kernels.h — the compute kernels every model stage goes through.
 *
 * This is the contract between the model code (src/) and the per-ISA
 * kernels (simd/). Model code calls only the fx_* functions declared here;
 * each one dispatches through the table in kc->k, which is chosen once per
 * context from the CPU's facts (simd/dispatch.c: the table that is fastest
 * on this microarchitecture) and may be forced with
 * FLUX_ISA=scalar|avx2|avx512|avx512bf16|amx|neon.
 *
 * Conventions
 *  - Activations are f32, row-major, with an explicit leading dimension
 *    (ld = elements between consecutive rows) so that column slices of a
 *    wider buffer can be read and written in place.
 *  - Weights are used as stored in safetensors: a linear weight is [n, k]
 *    row-major ("out, in"), bf16 (the main case), f16 or f32, never copied.
 *  - Threads: every kernel parallelises internally with OpenMP using
 *    kc->threads. Results are bit-identical for any thread count on a given
 *    ISA path: work is split only along dimensions that are not reduced,
 *    and any reduction across a parallel dimension uses fixed-size chunks
 *    combined in a fixed order.
 *  - No allocation inside kernels except growing the context scratch
 *    (fx_scratch_reserve) on first use, outside parallel regions.
 *  - The scalar table is the reference every other ISA is tested against.
 */
#ifndef FX_KERNELS_H
#define FX_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "src/base/error.h"
#include "src/base/float16.h"
#include "simd/dtype.h"

/* ------------------------------------------------------------------------ */
/* Types                                                                    */
/* ------------------------------------------------------------------------ */

/* Element types (simd/dtype.h lists them all with their facts). Weights
 * (fx_dtype_is_weight) are F32, F16, BF16, the ggml block types with
 * kernels (simd/quant/quant.h gives every byte layout) and the two fp8
 * types of safetensors files (one byte per element, with a per-tensor
 * scale carried on the weight: fx_weight.scale). A block type stores
 * a row as consecutive blocks of fx_dtype_block(t) elements (32, or 256
 * for the K-quants and IQ4_XS), each fx_dtype_block_bytes(t) bytes. */

/* Bytes per element of plain types (F32, I64, ...); 0 for block types. */
size_t fx_dtype_size(fx_dtype t);
/* "F32", "F16", "BF16", "Q8_0", "Q4_K", "I64", "IQ2_XXS", ...; "unknown"
 * out of range. */
const char *fx_dtype_name(fx_dtype t);
/* The dtype named (case-insensitive, "q4_k" or "Q4_K"); -1 if unknown. */
int fx_dtype_parse(const char *name);
/* 1 for the block types (also those without kernels). */
int fx_dtype_is_block(fx_dtype t);
/* 1 for the fp8 types (F8_E4M3, F8_E5M2). */
int fx_dtype_is_fp8(fx_dtype t);
/* 1 for the types whose codes take a scale carried on the weight
 * (fx_weight.scale / scales): fp8, I8 and F4_E2M1 (NVFP4's elements). */
int fx_dtype_is_scaled(fx_dtype t);
/* 1 for the types the GEMM expands inside its packing step (block types,
 * fp8 and I8): everything but F32/F16/BF16. */
int fx_dtype_is_expanded(fx_dtype t);
/* 1 for the types kernels read (F32, F16, BF16, block types with kernels). */
int fx_dtype_is_weight(fx_dtype t);
/* The names of the weight types into buf, ", "-separated ("F32, F16,
 * BF16, Q8_0, ..."); returns buf. */
char *fx_dtype_weight_names(char *buf, size_t size);
/* 1 if a safetensors header may name the type. */
int fx_dtype_in_safetensors(fx_dtype t);
/* The ggml type id (GGUF files), -1 if ggml has none; the dtype of a ggml
 * id, -1 if the id is not one ggml defines (retired or unknown). */
int fx_dtype_ggml_id(fx_dtype t);
int fx_dtype_of_ggml(uint32_t ggml_id);
/* Elements per block (1 for plain types) and bytes per block. */
int64_t fx_dtype_block(fx_dtype t);
size_t fx_dtype_block_bytes(fx_dtype t);
/* Bytes of n consecutive elements (n a multiple of the block); -1 if n is
 * not, or on overflow. */
int64_t fx_dtype_row_bytes(fx_dtype t, int64_t n);

typedef enum fx_isa {
    FX_ISA_SCALAR = 0,
    FX_ISA_AVX2,       /* AVX2 + FMA + F16C */
    FX_ISA_AVX512,     /* AVX-512 F/BW/VL/DQ */
    FX_ISA_AVX512BF16, /* + AVX512_BF16 (vdpbf16ps) */
    FX_ISA_AMX,        /* + AMX-TILE/AMX-BF16 granted by the OS (tile GEMMs) */
    FX_ISA_NEON,       /* aarch64 Advanced SIMD */
    FX_ISA_COUNT
} fx_isa;

/* "scalar", "avx2", ... ; parse returns -1 for an unknown name. */
const char *fx_isa_name(fx_isa isa);
int fx_isa_parse(const char *name);

struct fx_delta;

/* A weight matrix as stored: element (row r, col c) at data[r*ld + c],
 * rows = n (outputs), cols = k (inputs), ld >= k. Row or column slices of a
 * stored tensor are expressed by offsetting data and keeping ld.
 * Block dtypes: row r starts fx_dtype_row_bytes(dtype, r*ld) bytes after
 * data; ld and k are multiples of the block and a view starts at a block
 * boundary (row slices only, fx_weight_rows).
 * delta: additive terms applied by fx_linear after the main product (LoRA
 * adapters at run time, below); NULL = none, the plain layer.
 * scale: fp8 weights' per-tensor scale s: element = f32(stored)·s, rounded
 * to f32 once (the dequantized weight of ComfyUI's scaled-fp8 files); 0
 * means unscaled (s = 1), so a zero-initialized weight is the plain one.
 * Other dtypes ignore it.
 * scales: side scales of an fp8 weight (per output row, per 128×128 block,
 * per 32 along k: src/formats/quant_layout.h reads them), replacing scale;
 * NULL = none. row0: the first row of this view in the scales' grid (a row
 * slice of a stored tensor keeps its place; fx_weight_rows adds to it). */
typedef struct fx_weight_scales fx_weight_scales;
typedef struct fx_weight {
    const void *data;
    fx_dtype dtype;
    int64_t n, k, ld;
    const struct fx_delta *delta;
    float scale;
    const fx_weight_scales *scales;
    int64_t row0;
} fx_weight;

/* A grid of f32 scales over a stored weight: element (r, c) (r counted
 * from the stored tensor's first row) is f32(code) · s[(r / rows)·ld +
 * c / cols], one f32 rounding. Per output row: rows 1, cols >= k, ld 1;
 * 128×128 blocks: 128, 128, ceil(k/128); MX blocks: 1, 32, k/32. */
struct fx_weight_scales {
    const float *s;
    int64_t rows, cols, ld;
};

/* x[0..n) = the values of row r (of this view), columns [c0, c0 + n), from
 * their exact widening f32(code) in x: times the side scales or the
 * per-tensor scale of fp8 weights; other weights are left as they are. */
void fx_weight_values(const fx_weight *w, int64_t r, int64_t c0, int64_t n, float *x);
/* Whether the expansion of w multiplies anything (side scales, or an fp8
 * scale other than 0 and 1). */
int fx_weight_has_scales(const fx_weight *w);

/* Whether an fp8 scale changes values (0 and 1 do not), and x[0..n) ·=
 * scale when it does: the expansion of fp8 elements after their exact
 * widening (one f32 rounding per element). Callers pass the scale of fp8
 * weights only (block types have theirs inside the blocks). */
static inline int fx_weight_scaled(float scale) { return scale != 0.0f && scale != 1.0f; }
static inline void fx_weight_scale_row(float scale, int64_t n, float *x) {
    if (fx_weight_scaled(scale))
        for (int64_t i = 0; i < n; i++) x[i] *= scale;
}

/* Rows [r0, r0 + n) of a weight (a view, nothing copied), any dtype. */
fx_weight fx_weight_rows(const fx_weight *w, int64_t r0, int64_t n);

/* The dispatch table (defined in simd/common/table.h; opaque to model code). */
typedef struct fx_kernels fx_kernels;

/* Per-context scratch memory: one buffer per thread plus one shared. */
typedef struct fx_scratch fx_scratch;

/* The int8 (W8A8) mode of a context (fx_kctx.int8):
 *   FX_INT8_OFF     every product in the table's precision
 *   FX_INT8_BLOCKS  block-typed (GGUF) weights as W8A8 (the default on CPUs
 *                   whose kernels choose it, fx_kernels_int8_by_default)
 *   FX_INT8_ALL     --precision int8: besides, every weight whose owner
 *                   asks for its int8 form (fx_int8w_wanted) — bf16, f16,
 *                   f32 and fp8 weights of the transformer and the text
 *                   encoder — runs from that form. */
enum { FX_INT8_OFF = 0, FX_INT8_BLOCKS = 1, FX_INT8_ALL = 2 };

/* What a kernel needs to run: the chosen table, thread count, scratch,
 * and the int8 mode (FX_INT8_*, FX_INT8_OFF after fx_kctx_init). */
typedef struct fx_kctx {
    const fx_kernels *k;
    int threads;
    fx_scratch *scratch;
    int int8;
} fx_kctx;

/* ------------------------------------------------------------------------ */
/* Dispatch and scratch                                                     */
/* ------------------------------------------------------------------------ */

/* Highest ISA level this CPU (and OS) supports. */
fx_isa fx_isa_detect(void);

/* 1 if the ISA level runs here; else 0 and msg says what the CPU runs and
 * why this level is missing ("this CPU runs scalar, avx2; amx: ..."). */
int fx_isa_check(fx_isa isa, char *msg, size_t size);

/* The table for an ISA level (forced: --isa / FLUX_ISA). With force_f32 the
 * bf16 dot-product instructions are never used (bf16 weights are widened to
 * f32; the FLUX_PRECISION=f32 mode). Returns NULL if the ISA is not compiled
 * in or not supported by the CPU. */
const fx_kernels *fx_kernels_get(fx_isa isa, int force_f32);

/* The table that wins on this microarchitecture (simd/dispatch.c explains
 * each choice with its measurements), e.g. f32 FMA rather than vdpbf16ps
 * on Intel without AMX. Deterministic: never chosen by timing. */
const fx_kernels *fx_kernels_best(int force_f32);

/* The ISA a table implements, its name, and whether it uses bf16 dot
 * products (rounds activations to bf16 for bf16 weights). */
fx_isa fx_kernels_isa(const fx_kernels *k);
const char *fx_kernels_name(const fx_kernels *k);
int fx_kernels_uses_bf16_dot(const fx_kernels *k);
/* Whether the default precision runs quantized (block-typed) weights as
 * int8 (kc->int8) on table k: on the bf16 dot-product tables (the reason
 * and measurements beside the definition, simd/dispatch.c). */
int fx_kernels_int8_by_default(const fx_kernels *k);

/* Human-readable description: detected CPU features, chosen kernels
 * (GEMM tile sizes, attention variant). Returns bytes needed. */
size_t fx_kernels_describe(const fx_kernels *k, char *buf, size_t size);

fx_scratch *fx_scratch_new(int threads);
void fx_scratch_free(fx_scratch *s);
/* Ensure every per-thread buffer has >= per_thread bytes and the shared one
 * >= shared bytes (64-byte aligned). Call outside parallel regions.
 * Returns 0, or -1 on allocation failure. */
int fx_scratch_reserve(fx_scratch *s, size_t per_thread, size_t shared);
void *fx_scratch_thread(fx_scratch *s, int tid);
/* Bytes the scratch holds now (all buffers); 0 for NULL. */
size_t fx_scratch_bytes(const fx_scratch *s);
void *fx_scratch_shared(fx_scratch *s);

/* Initialise a kernel context (threads <= 0 = OpenMP default). */
void fx_kctx_init(fx_kctx *kc, const fx_kernels *k, int threads, fx_scratch *s);

/* ------------------------------------------------------------------------ */
/* Linear layers                                                            */
/* ------------------------------------------------------------------------ */

typedef enum fx_epilogue_mode {
    FX_EPI_STORE = 0,        /* Y  = X·Wᵀ + bias                 */
    FX_EPI_ACCUMULATE,       /* Y += X·Wᵀ + bias                 */
    FX_EPI_GATED_ACCUMULATE  /* Y += gate ⊙ (X·Wᵀ + bias)        */
} fx_epilogue_mode;

typedef struct fx_epilogue {
    fx_epilogue_mode mode;
    const float *bias; /* [n] or NULL */
    const float *gate; /* [n], required for FX_EPI_GATED_ACCUMULATE */
} fx_epilogue;

/* Y[m, n] (op)= X[m, k] · W[n, k]ᵀ with the epilogue (NULL = store).
 * X rows at x + i*ldx, Y rows at y + i*ldy. X and Y must not overlap.
 * bf16 weights use vdpbf16ps (X rounded to bf16, f32 accumulate) on
 * AVX512_BF16 tables, and are widened to f32 for FMA elsewhere.
 * Block-typed weights (weight-only quantization) are expanded block by
 * block inside the packing step into the panel format of the path bf16
 * weights take: the result equals, bit for bit, fx_linear on the
 * dequantized weights (fx_dequantize) stored as F32 — or, on tables whose
 * bf16 path uses dot products, rounded to BF16.
 * With kc->int8, block-typed weights run W8A8 instead (the int8 GEMM):
 * each row i of X becomes int8 codes with one f32 scale (sx_i = max|x|/127,
 * code = x·(127/max|x|) rounded to nearest even), each weight row j int8
 * codes with one f32 scale sw_j (fx_int8w: the same rule on the
 * dequantized row), and
 *   Y[i, j] = ((float)(Σ_k codeX·codeW) · sw_j) · sx_i   (+ bias, epilogue)
 * with the integer sum exact in int32 over the whole K: the same integers
 * and the same f32 operations on every ISA, so the int8 results are
 * bit-identical across ISAs and thread counts (not across modes). The
 * weight codes are made per call, panel by panel, or come from the
 * weight's form made once at load (fx_linear_int8w): the same codes, the
 * same bits. F32/F16/BF16 weights are not affected.
 * Then each term of w->delta adds its product with the same epilogue
 * (below); without terms nothing else runs. */
void fx_linear(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx,
               const fx_weight *w, float *y, int64_t ldy, const fx_epilogue *epi);
struct fx_int8w;
/* fx_linear of block-typed w whose int8 form f (fx_int8w_new(w), below)
 * was made at load: with kc->int8 the product comes from f (w->data is
 * never read: its mapped pages may have been released), then w's terms;
 * without kc->int8, fx_linear. */
void fx_linear_int8w(const fx_kctx *kc, int64_t m, const float *x, int64_t ldx, const fx_weight *w,
                     const struct fx_int8w *f, float *y, int64_t ldy, const fx_epilogue *epi);

/* ------------------------------------------------------------------------ */
/* Additive terms of a linear layer (LoRA and LyCORIS adapters)             */
/* ------------------------------------------------------------------------ */

/* One term s·ΔW of a layer W' = W + Σ s·ΔW, on the layer's output columns
 * [row0, row0 + rows) (ΔW rows; a fused weight's q/k/v thirds, one half of
 * a split view...). fx_linear applies it after the main product with the
 * layer's epilogue on those columns, never forming W':
 *   store / accumulate:  Y[:, row0 + j] += s · (X·ΔWᵀ)[:, j]
 *   gated accumulate:    Y[:, row0 + j] += s·gate[row0 + j] · (X·ΔWᵀ)[:, j]
 * (the bias is the layer's, added once). Forms of ΔW [rows, k]:
 *   LOWRANK  B·A:  a = A [r, k], b = B [rows, r] → T = X·Aᵀ [m, r], then T·Bᵀ;
 *            cost 2·m·r·(k + rows)
 *   DENSE    a = ΔW [rows, k] as stored (b unused); cost 2·m·rows·k
 *   KRON     rows [skip, skip + rows) of W1 ⊗ W2 with W1 = b [l, m1] (the
 *            W1 rows that cover the range), W2 = a [k2, n2], or W2 = c·a
 *            with c [k2, r2], a [r2, n2] when c.data is set; k = m1·n2:
 *            per token X viewed as [m1, n2] row-major, Y = W1·X·W2ᵀ [l, k2]
 *            flattened (row i1·k2 + i2); cost 2·m·(m1·n2·k2 + l·m1·k2), with
 *            a factored W2 2·m·(m1·r2·(n2 + k2) + l·m1·k2)
 * Factors are weights of any dtype (f32/f16/bf16, with a NULL delta); the
 * terms of a chain are applied in order. Results are bit-identical for any
 * thread count; s = 0 terms must not be attached (a layer without terms is
 * the plain layer, bit for bit).
 *
 * A term may also rescale its rows (DoRA, W'_j = m_j·(W_j + ΔW_j)/‖W_j + ΔW_j‖
 * per output row j, made by the caller from fx_delta_row_norms):
 *   w_gate [rows]     the layer's own product on column row0 + j is
 *                     multiplied by w_gate[j] (before the layer's bias, gate
 *                     and accumulation: W_j becomes w_gate[j]·W_j)
 *   row_scale [rows]  the term adds s·row_scale[j]·(X·ΔWᵀ)[:, j]
 * so the layer computes W'_j = w_gate[j]·W_j + s·row_scale[j]·ΔW_j. Either
 * may be NULL (1). Columns with a w_gate carry no other term of the chain
 * (fx_delta_chain_check): two rescalings of one row do not compose. Cost:
 * nothing beyond the term on accumulate layers (the gate joins the
 * epilogue's), one pass over those columns of Y on store layers. */
typedef enum fx_delta_kind { FX_DELTA_LOWRANK = 0, FX_DELTA_DENSE, FX_DELTA_KRON } fx_delta_kind;

typedef struct fx_delta {
    fx_delta_kind kind;
    float scale;                 /* s (finite, nonzero) */
    int64_t row0, rows;          /* output columns of the layer */
    fx_weight a, b;              /* factors (see above) */
    fx_weight c;                 /* KRON with a factored W2: its left factor; else data NULL */
    int64_t kron_skip;           /* KRON: rows of W1 ⊗ W2 (from b's first row) before this term's */
    const float *w_gate;         /* [rows] DoRA: factor of the layer's own rows, or NULL */
    const float *row_scale;      /* [rows] DoRA: factor of the term's rows, or NULL */
    const struct fx_delta *next; /* the next term, or NULL */
} fx_delta;

/* The part of a term that adds ΔW rows [src0, src0 + rows) (of the term's
 * own rows) to output column dst0: a view (nothing copied). */
fx_delta fx_delta_rows(const fx_delta *d, int64_t src0, int64_t rows, int64_t dst0);

/* 0 when the term fits a layer of k inputs and n outputs (factor shapes,
 * rank agreement, row range, finite nonzero scale), else -1 with the reason
 * in why. */
int fx_delta_check(const fx_delta *d, int64_t n, int64_t k, char *why, size_t why_size);

/* 0 when no column with a w_gate is covered by another term of the chain
 * starting at d, else -1 and *a, *b = the two terms (0-based positions). */
int fx_delta_chain_check(const fx_delta *d, int *a, int *b);

/* The 2-norms over the k inputs of the rows of W + s·ΔW that a term covers:
 * norms[j] = ‖W[row0 + j, :] + s·ΔW[j, :]‖ for j < d->rows, with W = w
 * (any dtype: rows dequantized one at a time, fx_dequantize_row, never the
 * whole weight) and ΔW = d's rows (LOWRANK products through the GEMM in
 * f32; DENSE and KRON entries directly); sums of squares in double. For
 * DoRA's magnitude normalisation at attach time (cost 2·rows·k·r flops for
 * a LOWRANK term, one read of W's rows). Bit-identical for any thread
 * count. Returns 0, or -1 when out of memory. */
int fx_delta_row_norms(const fx_kctx *kc, const fx_weight *w, const fx_delta *d, double s, double *norms);

/* ------------------------------------------------------------------------ */
/* Attention                                                                */
/* ------------------------------------------------------------------------ */

/* Fused (flash-style) multi-head attention, never materialising [sq, sk]:
 *   O[i, h] = Σ_j softmax_j(scale · Q[i, h]·K[j, g]) V[j, g],  g = h / (hq/hkv)
 * Q [sq, hq·d] (row i, head h at q + i*ldq + h*d), K, V [sk, hkv·d],
 * O [sq, hq·d]. hq must be a multiple of hkv (GQA); d even.
 * causal: key j is visible to query i only if j <= i + causal_offset.
 * key_mask: [sk] bytes, 0 = key excluded (padding); NULL = all keys.
 * A query row that sees no key gets an all-zero output row.
 * O may overwrite Q exactly (o == q, ldo == ldq); it must not overlap K or V. */
typedef struct fx_attn_args {
    int64_t sq, sk;
    int hq, hkv, d;
    const float *q; int64_t ldq;
    const float *k; int64_t ldk;
    const float *v; int64_t ldv;
    float *o; int64_t ldo;
    float scale;
    int causal;
    int64_t causal_offset;
    const uint8_t *key_mask;
} fx_attn_args;

/* Returns FLUX_OK or FLUX_ERR_INVALID_ARG (message in err) for bad shapes. */
flux_status fx_attention(const fx_kctx *kc, const fx_attn_args *a, fx_err *err);

/* ------------------------------------------------------------------------ */
/* Rotary position embedding                                                */
/* ------------------------------------------------------------------------ */

typedef enum fx_rope_layout {
    FX_ROPE_INTERLEAVED = 0, /* FLUX: pairs (2p, 2p+1) */
    FX_ROPE_HALF_SPLIT       /* Qwen3 / NeoX: pairs (p, p + rot_dim/2) */
} fx_rope_layout;

/* cos/sin for every (row, pair): built once per (positions, dims, theta)
 * and reused by every block and step. Pair p belongs to the axis whose
 * section contains it; its frequency is theta^(−2j/axis_dim) with j the
 * pair's index inside the section; its angle is pos[axis][row]·freq.
 * Row r of x uses row r of the table. For a slice of the sequence (e.g. the
 * image stream, rows 512.. of the joint table) use a view: a copy of the
 * struct with cos/sin advanced by r0·rot_dim/2 and seq reduced by r0 (a
 * view is never passed to fx_rope_table_free). */
typedef struct fx_rope_table {
    int64_t seq;
    int rot_dim;            /* rotated dims per head = 2·(pairs) */
    fx_rope_layout layout;
    float *cos, *sin;       /* [seq, rot_dim/2] */
} fx_rope_table;

/* pos: [n_axes][seq] int32 (axis-major). axes_dims: per-axis dims (even,
 * summing to rot_dim). Errors (odd dims, sizes, allocation) → message. */
flux_status fx_rope_table_init(fx_rope_table *t, const int32_t *pos, int64_t seq,
                               int n_axes, const int *axes_dims, double theta,
                               fx_rope_layout layout, fx_err *err);
void fx_rope_table_free(fx_rope_table *t);
/* Validate a table for an application to `rows` rows of heads of head_dim:
 * rows <= t->seq, head_dim even, t->rot_dim <= head_dim. Call once where the
 * table is built; fx_qk_norm_rope itself clamps (never overruns) instead. */
flux_status fx_rope_table_check(const fx_rope_table *t, int64_t rows, int head_dim, fx_err *err);

/* In place on x [t->seq, heads·head_dim] (row stride ldx): for every head,
 * optional RMSNorm over head_dim with weight norm_w[head_dim] (NULL = no
 * norm), then rotation of the first t->rot_dim dims (rope NULL = no rope).
 * This is the QK-norm + RoPE step of both the DiT and Qwen3. */
void fx_qk_norm_rope(const fx_kctx *kc, float *x, int64_t ldx, int64_t rows, int heads,
                     int head_dim, const float *norm_w, float eps,
                     const fx_rope_table *rope);

/* ------------------------------------------------------------------------ */
/* Row and elementwise operations (all parallel over rows)                  */
/* ------------------------------------------------------------------------ */

/* y = x / sqrt(mean(x²) + eps) ⊙ w, per row; w may be NULL (= 1). y may be x. */
void fx_rmsnorm(const fx_kctx *kc, int64_t rows, int64_t cols, const float *x,
                int64_t ldx, const float *w, float eps, float *y, int64_t ldy);

/* y = LN(x)·(1 + scale) + shift, LN without affine (biased variance);
 * shift/scale [cols] shared by all rows. y may be x. */
void fx_layernorm_modulate(const fx_kctx *kc, int64_t rows, int64_t cols, const float *x,
                           int64_t ldx, const float *shift, const float *scale, float eps,
                           float *y, int64_t ldy);

/* x = x·sigmoid(x) over n contiguous floats. */
void fx_silu(const fx_kctx *kc, int64_t n, float *x);

/* out[r, c] = silu(gate[r, c]) · up[r, c]. out may alias gate. */
void fx_swiglu(const fx_kctx *kc, int64_t rows, int64_t cols, const float *gate,
               int64_t ldg, const float *up, int64_t ldu, float *out, int64_t ldo);

/* y[r, c] += gate[c] · x[r, c]  (gate NULL = plain add). */
void fx_gated_add(const fx_kctx *kc, int64_t rows, int64_t cols, float *y, int64_t ldy,
                  const float *gate, const float *x, int64_t ldx);

/* Softmax of every row in place (max-subtracted, f32). */
void fx_softmax_rows(const fx_kctx *kc, int64_t rows, int64_t cols, float *x, int64_t ldx);

/* GroupNorm over channels-last data x [pixels, channels] (NHWC, batch 1):
 * statistics per group of channels/groups consecutive channels over all
 * pixels, computed in double with fixed-size pixel chunks (thread-count
 * independent). mean/rstd out: [groups]. */
void fx_groupnorm_stats(const fx_kctx *kc, int64_t pixels, int channels, int groups,
                        const float *x, float eps, float *mean, float *rstd);
/* y = (x − mean_g)·rstd_g·gamma[c] + beta[c], then SiLU if fuse_silu.
 * y may be x. */
void fx_groupnorm_apply(const fx_kctx *kc, int64_t pixels, int channels, int groups,
                        const float *x, const float *mean, const float *rstd,
                        const float *gamma, const float *beta, int fuse_silu, float *y);
/* Streamed statistics (a tensor produced strip by strip): add the per-group
 * Σx and Σx² (double) of x [pixels, channels] to acc [groups][2]; the sums
 * use fixed pixel chunks, so for a fixed strip schedule the result does not
 * depend on the thread count. fx_groupnorm_finish turns the sums over
 * `pixels` pixels in total into mean/rstd [groups]. */
void fx_groupnorm_sums(const fx_kctx *kc, int64_t pixels, int channels, int groups,
                       const float *x, double *acc);
void fx_groupnorm_finish(int64_t pixels, int channels, int groups, const double *acc, float eps,
                         float *mean, float *rstd);
/* Both steps. */
void fx_groupnorm(const fx_kctx *kc, int64_t pixels, int channels, int groups,
                  const float *x, const float *gamma, const float *beta, float eps,
                  int fuse_silu, float *y);

/* Conversions (parallel over n, exact; f32→bf16/f16 round to nearest even). */
void fx_bf16_to_f32(const fx_kctx *kc, int64_t n, const uint16_t *src, float *dst);
void fx_f32_to_bf16(const fx_kctx *kc, int64_t n, const float *src, uint16_t *dst);
void fx_f16_to_f32(const fx_kctx *kc, int64_t n, const uint16_t *src, float *dst);
void fx_f32_to_f16(const fx_kctx *kc, int64_t n, const float *src, uint16_t *dst);
/* Any stored dtype → f32 (small tensors: norm weights, biases, embeddings;
 * block types: n a multiple of the block, as fx_dequantize_row). */
void fx_to_f32(const fx_kctx *kc, int64_t n, const void *src, fx_dtype t, float *dst);

/* ------------------------------------------------------------------------ */
/* Block (de)quantization (ggml block types, simd/quant/)                   */
/* ------------------------------------------------------------------------ */

/* Reference dequantization of n elements (n a multiple of the block) of
 * any dtype into f32, single-threaded: the value of every element as
 * ggml's reference dequantizers compute it (block scales widened from
 * f16 exactly, products and sums rounded one operation at a time, never
 * fused). Unaligned src is fine. */
void fx_dequantize_row(fx_dtype t, const void *src, int64_t n, float *dst);
/* rows × cols (rows src_row_bytes apart) into dst [rows, cols] with the
 * table's kernels, parallel over rows; bit-identical to fx_dequantize_row. */
void fx_dequantize(const fx_kctx *kc, fx_dtype t, int64_t rows, int64_t cols, const void *src,
                   int64_t src_row_bytes, float *dst);
/* One row with the table's kernels (vector widening of bf16 / f16, the
 * table's block dequantizers); bit-identical to fx_dequantize_row. */
void fx_dequantize_row_kc(const fx_kctx *kc, fx_dtype t, const void *src, int64_t n, float *dst);

/* 1 if fx_quantize_row can produce dtype t (F32, F16, BF16, Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K). */
int fx_dtype_can_quantize(fx_dtype t);
/* Quantize n finite f32 values (n a multiple of the block) into blocks of
 * type t, single-threaded, with the algorithms of ggml's reference
 * quantizers (quantize_row_*_ref; what llama-quantize uses without an
 * importance matrix): bit-identical blocks. F32/F16/BF16 round to nearest
 * even. */
void fx_quantize_row(fx_dtype t, const float *src, int64_t n, void *dst);
/* rows × cols, parallel over rows (each row by fx_quantize_row, so the
 * result does not depend on the thread count). */
void fx_quantize(const fx_kctx *kc, fx_dtype t, int64_t rows, int64_t cols, const float *src, void *dst);

/* f32 → fp8 code of type t (F8_E4M3 or F8_E5M2; fp8_encode.c): the nearest
 * code, ties to the even code, the sign kept (−0 → 0x80); finite values
 * beyond the largest finite code saturate to it (±448, ±57344), never NaN
 * or infinity; NaN gives a NaN code. */
uint8_t fx_f32_to_fp8(fx_dtype t, float x);
/* The largest finite value of fp8 type t (448 or 57344). */
float fx_fp8_max(fx_dtype t);
/* dst[i] = fx_f32_to_fp8(t, x[i] / scale): ComfyUI's per-tensor scaled fp8
 * (scale = max|W| / fx_fp8_max(t); the value is f32(code)·scale). */
void fx_fp8_quantize_row(fx_dtype t, const float *x, int64_t n, float scale, uint8_t *dst);

/* The int8 form of a weight for --precision int8 (the int8 GEMM of
 * fx_linear): per output row j, codes q[j·ldq .. j·ldq + k) with value ≈
 * code·scale[j], scale[j] = max|row|/127 and code = x·(127/max|row|)
 * rounded to nearest even (|code| <= 127) of the dequantized row x, and
 * sum[j] = Σ codes (the kernels that take X as unsigned bytes subtract
 * 128·sum). Rows are padded with zero codes to ldq = round_up(k, 64) bytes
 * and the rows to round_up(n, 32) (zero codes, scale 0), so tile kernels
 * read whole 64-byte, 16- or 32-row blocks in place. */
typedef struct fx_int8w {
    int64_t n, k, ldq, rows; /* rows = round_up(n, 32) */
    int8_t *q;               /* [rows][ldq] */
    float *scale;            /* [rows] */
    int32_t *sum;            /* [rows] */
    size_t bytes;            /* of the one allocation behind q, scale, sum */
} fx_int8w;

/* Whether a weight of dtype t gets its int8 form at load in kc's mode:
 * with kc->int8 only where the form is not larger than what it replaces —
 * Q8_0 (1 byte per element against 34/32), I8 checkpoints (their codes and
 * per-channel scales as stored), and in FX_INT8_ALL the F32, F16, BF16 and
 * fp8 weights (1 byte against 4, 2 or 1 + a row scale); smaller types (the
 * other GGUF blocks, NVFP4) keep what they store (fx_linear converts the
 * blocks per call), so that --precision int8 never raises the memory a
 * model needs. */
int fx_int8w_wanted(const fx_kctx *kc, fx_dtype t);
/* The form of w: I8 with one scale per output row or tensor (its codes as
 * they are), or any other weight dtype (each row the rule's codes of its
 * values, fx_weight_row_to_int8; rows converted in parallel on kc's
 * threads); NULL if out of memory or an I8 w with block scales. */
fx_int8w *fx_int8w_new(const fx_kctx *kc, const fx_weight *w);
void fx_int8w_free(fx_int8w *f);
/* Row r of w (of this view): the rule's codes, scale and code sum of its
 * values (fx_weight_values: fp8 and side scales applied); tmp: room for
 * w->k floats. */
void fx_weight_row_to_int8(const fx_kctx *kc, const fx_weight *w, int64_t r, float *tmp, int8_t *q, float *scale,
                           int32_t *sum);

/* Single-element conversions (fx_bf16_bits_to_f32, fx_f32_to_bf16_bits,
 * fx_f16_bits_to_f32, fx_f32_to_f16_bits): exact, inline, usable anywhere;
 * defined in float16.h. */

/* ------------------------------------------------------------------------ */
/* Convolution (VAE)                                                        */
/* ------------------------------------------------------------------------ */

/* 2-D convolution, channels-last, batch 1, through the GEMM microkernels:
 *   x [h, w, cin] → y [ho, wo, cout],  weight as stored [cout, cin, kh, kw]
 *   (passed as an fx_weight with n = cout, k = cin·kh·kw).
 * Padding may be asymmetric (the VAE downsample pads right/bottom only).
 * upsample2x: the input is first nearest-upsampled ×2 (never materialised).
 * ho = (h' + pad_top + pad_bottom − kh)/stride + 1 with h' = h or 2h.
 * Only output rows [row0, row1) are computed (row1 <= 0 means all rows);
 * x and y always point at the whole tensors, rows outside the range are
 * not touched. Memory stays bounded by tiling im2col over output rows.
 * epi: bias and store/accumulate (a residual add fused into the conv). */
typedef struct fx_conv2d_geom {
    int h, w, cin, cout, kh, kw, stride;
    int pad_top, pad_left, pad_bottom, pad_right;
    int upsample2x;
} fx_conv2d_geom;

void fx_conv2d_out_size(const fx_conv2d_geom *g, int *ho, int *wo);
void fx_conv2d(const fx_kctx *kc, const fx_conv2d_geom *g, const float *x,
               const fx_weight *w, const fx_epilogue *epi, float *y, int row0, int row1);

/* A layer applied strip by strip: the weight is packed once for this
 * kernel table (caller-owned memory of fx_conv2d_packed_bytes bytes, 64-byte
 * aligned; 0 = no GEMM path for the dtype), then each strip runs on a window
 * of input rows. fx_conv2d_pack returns 0, or -1 (bad shapes, no memory). */
size_t fx_conv2d_packed_bytes(const fx_kctx *kc, const fx_conv2d_geom *g, fx_dtype wdtype);
int fx_conv2d_pack(const fx_kctx *kc, const fx_conv2d_geom *g, const fx_weight *w, void *packed);
/* Input rows [*in0, *in1) (input frame, before upsampling) that output rows
 * [row0, row1) read (padding excluded). */
void fx_conv2d_input_rows(const fx_conv2d_geom *g, int row0, int row1, int *in0, int *in1);
/* Output rows [row0, row1) (row1 <= 0: all) into y (y points at row0, rows
 * wo·cout apart). x holds input rows [x_row0, x_row0 + x_rows) of the input
 * tensor (x points at row x_row0), which must cover fx_conv2d_input_rows.
 * Bit-identical to fx_conv2d for any thread count. Returns 0, or -1 (window
 * too small, wrong packing, no scratch: y is set to NaN). */
int fx_conv2d_packed(const fx_kctx *kc, const fx_conv2d_geom *g, const float *x, int x_row0,
                     int x_rows, const void *packed, const fx_epilogue *epi, float *y, int row0,
                     int row1);

#endif
