/*
 * weight_set.h — weight sets: one model component, its tensors looked up by
 * name and viewed as the kernels' weights.
 *
 * A weight set (fx_wset) is a single tensor file (tensor_file.h), or the
 * shards listed by a *.safetensors.index.json ("weight_map": tensor name →
 * shard file name, next to the index; wset_shards.c), or a view that shows
 * another set's tensors under new names (wset_view.c). Lookups by name go
 * through a hash table; with an expected shape they fail with e.g.
 *   transformer/diffusion_pytorch_model.safetensors: tensor
 *   'x_embedder.weight' has shape [3072, 64], expected [3072, 128]
 * and a tensor whose dtype kernels cannot read (I64, or a GGUF block type
 * without kernels such as IQ2_XXS) fails when it is read as a weight,
 * naming the file, the tensor and the dtype.
 */
#ifndef FX_WEIGHT_SET_H
#define FX_WEIGHT_SET_H

#include "src/base/log.h"
#include "tensor_file.h"

/* ------------------------------------------------------------------------ */
/* Weight sets                                                              */
/* ------------------------------------------------------------------------ */

typedef struct fx_wset fx_wset;

/* Open a component: path is a .safetensors file or a .safetensors.index.json
 * (its shards are opened from the same folder; a shard name must be a plain
 * file name). display is the path used in messages (NULL = path), e.g.
 * "text_encoder/model.safetensors.index.json"; shard messages use the
 * display folder + shard name. use_mmap as in fx_tensor_file_open.
 * Index errors: shard missing → FLUX_ERR_IO naming shard and index; tensor
 * listed but absent from its shard → FLUX_ERR_MODEL. The index is the
 * authority: shard tensors it does not list are not visible. */
fx_wset *fx_wset_open(const char *path, const char *display, int use_mmap, fx_err *err);

/* Open `<dir>/<base>` or, if that file does not exist, the sharded
 * `<dir>/<base>.index.json`; display_dir prefixes the names in messages. */
fx_wset *fx_wset_open_component(const char *dir, const char *display_dir, const char *base,
                                int use_mmap, fx_err *err);

void fx_wset_close(fx_wset *s);

/* A set of one in-memory file image (safetensors or GGUF). With own = 1
 * the set takes buf (allocated with malloc / posix_memalign) and frees it
 * when closed, also on failure; else buf must outlive the set. Its data
 * cannot be dropped (fx_wset_drop_data keeps it). */
fx_wset *fx_wset_open_memory(void *buf, size_t len, const char *display, int own, fx_err *err);

/* Map/read (or drop) the data of every file of the set (see fx_tensor_file_load_data). */
flux_status fx_wset_load_data(fx_wset *s, int use_mmap, fx_err *err);
void fx_wset_drop_data(fx_wset *s);
int fx_wset_data_loaded(const fx_wset *s);
/* fx_tensor_file_check_unchanged / fx_tensor_file_check_faults on every file of the set (of a
 * view: its base's). */
flux_status fx_wset_check_unchanged(const fx_wset *s, fx_err *err);
flux_status fx_wset_check_faults(const fx_wset *s, fx_err *err);
/* madvise WILLNEED over all mapped data of the set. */
void fx_wset_willneed(const fx_wset *s);

const char *fx_wset_display(const fx_wset *s);
size_t fx_wset_count(const fx_wset *s);
const fx_tensor *fx_wset_tensor_at(const fx_wset *s, size_t i);
size_t fx_wset_file_count(const fx_wset *s);
const fx_tensor_file *fx_wset_file_at(const fx_wset *s, size_t i);

/* Lookup: NULL when absent (no error). */
const fx_tensor *fx_wset_find(const fx_wset *s, const char *name);
/* Its position (fx_wset_tensor_at), or -1 when absent. */
long fx_wset_index(const fx_wset *s, const char *name);

/* Quantized layouts, checked at load (README "fp8 checkpoints";
 * wset_quant.c): every fp8 weight's scale tensor ('.weight_scale',
 * '.scale_weight' or '.weight_scale_inv') of a layout flux.c reads (per
 * tensor, per output row, 128x128 blocks, MXFP8), its dtype and every value
 * (finite; a per-tensor one nonzero); a scale without its weight
 * (FLUX_ERR_MODEL) or beside an I8/U8/block weight (FLUX_ERR_UNSUPPORTED);
 * tensors of formats flux.c does not read (NVFP4, SVDQuant / Nunchaku,
 * GPTQ / AWQ, bitsandbytes) refused naming the format. A scale beside an
 * F32/BF16/F16 weight is ignored (fx_wset_quant_note warns). Reads scale
 * values from the file when only the header is loaded. */
flux_status fx_wset_check_quant(const fx_wset *s, fx_err *err);
/* Only the last part: tensors of formats flux.c does not read (by name).
 * Single-file readers call it before mapping names. */
flux_status fx_wset_refuse_foreign(const fx_wset *s, fx_err *err);
/* The weights of s a Vulkan device does not read (int8, NVFP4, fp8 with
 * side scales): FLUX_ERR_UNSUPPORTED naming the first; flux_load calls it
 * for a device backend, so the refusal comes at load. */
flux_status fx_wset_check_device(const fx_wset *s, fx_err *err);
/* The one-line warning for ignored scales (level 0) and the -v line
 * counting the fp8 layouts of s. */
void fx_wset_quant_note(const fx_wset *s, const fx_logger *log);
/* 1 for the tensors that travel with fp8 weights and are not weights
 * themselves: '.weight_scale', '.scale_weight', '.weight_scale_inv',
 * '.input_scale', '.scale_input', '.comfy_quant' and the "scaled_fp8" marker. */
int fx_wset_fp8_companion(const char *name);

/* Lookup with checks: missing → FLUX_ERR_MODEL "<set>: tensor 'n' not
 * found"; expect (may be NULL = any shape) not matching → FLUX_ERR_MODEL
 * "<file>: tensor 'n' has shape [..], expected [..]". */
flux_status fx_wset_get(const fx_wset *s, const char *name, const fx_shape *expect,
                        const fx_tensor **out, fx_err *err);

/* Same check, plus the dtype must be a weight dtype (fx_dtype_is_weight:
 * F32, F16, BF16 or a block type with kernels): a block type without
 * kernels (IQ2_XXS, MXFP4, ...) is FLUX_ERR_UNSUPPORTED, a plain type (I64,
 * ...) FLUX_ERR_MODEL, each "<file>: tensor '<name>' (from ... of '<source
 * tensor>', in views) has dtype <T>...". All weight getters below check this. */
flux_status fx_wset_check_weight(const fx_wset *s, const char *name, const fx_shape *expect,
                                 fx_err *err);

/* A linear weight [rows, cols] (n = rows outputs, k = cols inputs, ld = k),
 * used in place (never copied, except a tensor whose data is not aligned
 * to its element size, which is copied once into memory owned by the set).
 * Views stay valid until fx_wset_drop_data / fx_wset_close. The getters
 * that take a non-const set may add such a copy: call them from one thread
 * (model load time), then share the fx_weight values freely. */
flux_status fx_wset_linear(fx_wset *s, const char *name, int64_t rows, int64_t cols,
                           fx_weight *out, fx_err *err);

/* A conv weight [cout, cin, kh, kw] viewed as the matrix [cout, cin·kh·kw]. */
flux_status fx_wset_conv(fx_wset *s, const char *name, int64_t cout, int64_t cin, int64_t kh,
                         int64_t kw, fx_weight *out, fx_err *err);

/* fx_wset_linear and fx_wset_f32 (shape [n]) on the tensor named by a printf
 * format, e.g. fx_wset_linearf(w, &q, d, d, err, "blocks.%d.attn.to_q.weight", i). */
#define FX_ST_MAX_NAME 256
flux_status fx_wset_linearf(fx_wset *s, fx_weight *out, int64_t rows, int64_t cols, fx_err *err,
                            const char *fmt, ...) FX_PRINTF(6, 7);
flux_status fx_wset_vecf(const fx_wset *s, float **out, int64_t n, fx_err *err, const char *fmt, ...)
    FX_PRINTF(5, 6);

/* Ask the kernel to start reading a weight view's bytes in the background
 * (madvise WILLNEED where they are mmap'd from one of s's files; no-op
 * otherwise). */
void fx_wset_weight_willneed(const fx_wset *s, const fx_weight *w);
/* Release a mapped weight's pages from this process (madvise DONTNEED: they
 * stay in the page cache and come back on the next read; no-op for data in
 * RAM). Used after a one-pass read such as quantization. */
void fx_wset_weight_dontneed(const fx_wset *s, const fx_weight *w);
/* 1 if w's data is mapped from one of s's files (its pages can be released
 * and read again), 0 if it is in memory. */
int fx_wset_weight_mapped(const fx_wset *s, const fx_weight *w);

/* Read a tensor of the expected shape (NULL = any) converted to f32 into
 * dst (room for numel floats); exact for F32/F16/BF16. */
flux_status fx_wset_read_f32(const fx_wset *s, const char *name, const fx_shape *expect,
                             float *dst, fx_err *err);
/* Same into a new malloc'd array (*out; free() it); *numel gets the count
 * if not NULL. For norm weights, biases and BatchNorm statistics. */
flux_status fx_wset_f32(const fx_wset *s, const char *name, const fx_shape *expect, float **out,
                        int64_t *numel, fx_err *err);

/* Rows [row0, row0 + n) of a linear weight [rows, cols]: a view like
 * fx_wset_linear (nothing copied), also of two-range view tensors (below)
 * when the rows lie inside one range. */
flux_status fx_wset_linear_rows(fx_wset *s, const char *name, int64_t rows, int64_t cols, int64_t row0, int64_t n,
                                fx_weight *out, fx_err *err);

/* ------------------------------------------------------------------------ */
/* Views: tensors of another set under new names (single-file checkpoints)  */
/* ------------------------------------------------------------------------ */

/* A view set shows tensors of a base set under other names, each one row
 * range of a base tensor, or two row ranges stacked (rows = the first
 * dimension). Nothing is copied: src/formats/single_file.c maps the BFL / ComfyUI
 * transformer names onto the diffusers ones this way (fused qkv split into
 * thirds, the final layer's halves swapped).
 *   - A one-range tensor is an ordinary fx_tensor (same file, offset moved
 *     to the range): every getter works on it.
 *   - A two-range tensor has no single data pointer: fx_tensor_data gives
 *     NULL, fx_wset_linear / fx_wset_conv refuse it (FLUX_ERR_MODEL),
 *     fx_wset_linear_rows views rows inside one range, fx_wset_read_f32 /
 *     fx_wset_f32 assemble it.
 * Lookups, shape and dtype checks work on every view tensor; shape errors
 * also name the source tensor and rows. Data loading and dropping act on
 * the base's files. Only view tensors are visible in a view. */
typedef struct fx_wset_range {
    const char *src;      /* tensor name in the base set */
    int64_t row0, rows;   /* its rows [row0, row0 + rows) */
} fx_wset_range;

/* An empty view of base with room for `capacity` tensors. The view owns
 * base from here on (closing the view closes it; on failure it is closed
 * too). display names the view in messages (NULL = base's). */
fx_wset *fx_wset_view_new(fx_wset *base, const char *display, size_t capacity, fx_err *err);

/* Add `name` = ranges[0], then ranges[1] (n = 1 or 2), stacked by rows.
 * FLUX_ERR_MODEL when a source is missing, a range is outside its tensor,
 * or two ranges differ in dtype or trailing dimensions; FLUX_ERR_FORMAT for
 * a duplicate name; FLUX_ERR_INVALID_ARG when the capacity is used up. */
flux_status fx_wset_view_add(fx_wset *view, const char *name, const fx_wset_range *ranges, int n, fx_err *err);

/* A view tensor [r, c, 1, …, 1] (a 1×1 convolution) shown as the matrix
 * [r, c] (the same bytes); FLUX_ERR_MODEL naming the tensor for any other
 * shape. */
flux_status fx_wset_view_as_matrix(fx_wset *view, const char *name, fx_err *err);

/* The base of a view (NULL for other sets). */
const fx_wset *fx_wset_view_base(const fx_wset *s);

#endif
