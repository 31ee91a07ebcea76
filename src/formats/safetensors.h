/*
 * safetensors.h — safetensors files and weight sets (one model component).
 *
 * File format: 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [b, e]},
 *    ..., "__metadata__": {"key": "value", ...}}
 * then the data section; [b, e) are byte offsets into the data section.
 *
 * Opening validates the header strictly (every error names the file and,
 * where there is one, the tensor): length bounds (1 byte .. 100 MB, inside
 * the file), well-formed JSON object, every entry an object with a known
 * dtype (the full safetensors list), a shape of at most FX_ST_MAX_DIMS
 * non-negative integers, shape × element size without overflow and equal to
 * e − b, 0 <= b <= e <= data size, no two tensors overlapping, no duplicate
 * names, __metadata__ an object of strings. Gaps between tensors are
 * allowed. Opening touches only the header: data is mmap'd (MAP_PRIVATE,
 * read-only, never copied) or, with use_mmap = 0, read into RAM.
 *
 * Only F32, F16, BF16 and fp8 (F8_E4M3, F8_E5M2, with their per-tensor
 * scale: fx_wset_check_fp8) tensors (and, from GGUF files, the ggml block
 * types) can be used as weights (fx_weight, f32 reads); other dtypes (e.g.
 * the VAE's I64 bn.num_batches_tracked) are listed and validated but
 * refused by the weight getters.
 *
 * GGUF files (recognised by their magic wherever a .safetensors file is
 * accepted) are opened by the same functions: their header is validated by
 * gguf.h, their tensors are listed with PyTorch-order shapes (ne reversed),
 * their data is mapped or read like a safetensors data section, and their
 * string key/values answer fx_st_metadata.
 *
 * A weight set (fx_wset) is one model component: a single .safetensors
 * file, or the shards listed by a *.safetensors.index.json ("weight_map":
 * tensor name → shard file name, next to the index). Lookups by name go
 * through a hash table; with an expected shape they fail with e.g.
 *   transformer/diffusion_pytorch_model.safetensors: tensor
 *   'x_embedder.weight' has shape [3072, 64], expected [3072, 128]
 */
#ifndef FX_SAFETENSORS_H
#define FX_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "src/base/error.h"
#include "simd/kernels.h"

#define FX_ST_MAX_DIMS 8
#define FX_ST_MAX_HEADER (100u * 1000u * 1000u) /* 100 MB, as the reference library */

/* Every dtype of the safetensors format, then the ggml block types a GGUF
 * file (gguf.h) may hold; GGUF's plain types map onto the first group. */
typedef enum fx_st_dtype {
    FX_ST_BOOL = 0, FX_ST_U8, FX_ST_I8, FX_ST_I16, FX_ST_U16, FX_ST_F16, FX_ST_BF16,
    FX_ST_I32, FX_ST_U32, FX_ST_F32, FX_ST_F64, FX_ST_I64, FX_ST_U64,
    FX_ST_F8_E4M3, FX_ST_F8_E5M2, FX_ST_F8_E8M0, FX_ST_C64,
    FX_ST_SAFETENSORS_COUNT, /* dtypes a safetensors header may name */
    FX_ST_Q8_0 = FX_ST_SAFETENSORS_COUNT, FX_ST_Q4_0, FX_ST_Q4_1, FX_ST_Q5_0, FX_ST_Q5_1,
    FX_ST_Q2_K, FX_ST_Q3_K, FX_ST_Q4_K, FX_ST_Q5_K, FX_ST_Q6_K, FX_ST_IQ4_NL, FX_ST_IQ4_XS,
    FX_ST_DTYPE_COUNT
} fx_st_dtype;

const char *fx_st_dtype_name(fx_st_dtype t);  /* "BF16", "Q4_K", ... */
size_t fx_st_dtype_size(fx_st_dtype t);       /* bytes per element; 0 for block types */
/* Bytes of n consecutive elements (n a multiple of the block); -1 if not. */
int64_t fx_st_row_bytes(fx_st_dtype t, int64_t n);
/* The weight dtype (F32/F16/BF16 or a block type) of a tensor dtype; -1 if
 * unusable. */
int fx_st_weight_dtype(fx_st_dtype t);
/* The tensor dtype of a weight dtype. */
fx_st_dtype fx_st_dtype_of_weight(fx_dtype t);

/* An expected or actual shape. FX_SHAPE(3072, 128) builds one inline;
 * FX_SHAPE0 is the scalar shape []. */
typedef struct fx_shape {
    int ndim;
    int64_t d[FX_ST_MAX_DIMS];
} fx_shape;

#define FX_SHAPE_NARGS_(a, b, c, d, e, f, g, h, n, ...) n
#define FX_SHAPE_NARGS(...) FX_SHAPE_NARGS_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define FX_SHAPE(...) ((fx_shape){FX_SHAPE_NARGS(__VA_ARGS__), {__VA_ARGS__}})
#define FX_SHAPE0 ((fx_shape){0, {0}})

/* "[3072, 128]" into buf; returns buf. */
char *fx_shape_str(const fx_shape *s, char *buf, size_t size);
int fx_shape_eq(const fx_shape *a, const fx_shape *b);
int64_t fx_shape_numel(const fx_shape *s);

typedef struct fx_st_file fx_st_file;

/* One tensor of an opened file. */
typedef struct fx_tensor {
    const char *name;          /* owned by the file */
    fx_st_dtype dtype;
    fx_shape shape;
    int64_t offset;            /* into the data section */
    int64_t nbytes;
    const fx_st_file *file;
} fx_tensor;

/* ------------------------------------------------------------------------ */
/* Single files                                                             */
/* ------------------------------------------------------------------------ */

/* Open and validate a file. `display` names it in messages (NULL = path).
 * use_mmap = 1: map the file; 0: read it into RAM; -1: validate the header
 * only (tensor data unavailable until fx_st_load_data). Missing/unreadable
 * file → FLUX_ERR_IO; invalid → FLUX_ERR_FORMAT. */
fx_st_file *fx_st_open(const char *path, const char *display, int use_mmap, fx_err *err);

/* Validate an in-memory image of a whole file (not copied: buf must outlive
 * the handle). For tests and fuzzing. */
fx_st_file *fx_st_open_memory(const void *buf, size_t len, const char *display, fx_err *err);

/* Map (use_mmap = 1) or read (0) the data of a header-only file; no-op if
 * the data is already there. fx_st_drop_data releases it again (file stays
 * open for lookups; tensor data becomes unavailable). */
flux_status fx_st_load_data(fx_st_file *f, int use_mmap, fx_err *err);
void fx_st_drop_data(fx_st_file *f);

void fx_st_close(fx_st_file *f);

/* FLUX_ERR_IO naming the file when the file at its path is no longer the
 * one opened (replaced, resized or rewritten since: device, inode, size,
 * modification time); FLUX_OK for in-memory files. fx_st_load_data checks
 * the same before mapping or reading the data again. */
flux_status fx_st_check_unchanged(const fx_st_file *f, fx_err *err);

/* FLUX_ERR_IO naming the file when a read of its mapped data faulted
 * because the file was cut short under the mapping (map_guard.h); the
 * mapping then holds zeros there and must not be used any more. */
flux_status fx_st_check_faults(const fx_st_file *f, fx_err *err);

const char *fx_st_display(const fx_st_file *f);
const char *fx_st_path(const fx_st_file *f); /* file system path; NULL for in-memory files */
size_t fx_st_count(const fx_st_file *f);
const fx_tensor *fx_st_tensor_at(const fx_st_file *f, size_t i); /* header order */
const fx_tensor *fx_st_find(const fx_st_file *f, const char *name);
/* A __metadata__ value (GGUF: a string key/value), or NULL. */
const char *fx_st_metadata(const fx_st_file *f, const char *key);
/* 1 if the file's data is mmap'd from disk (not read into RAM, not an
 * in-memory image): only such pages may be dropped and re-read. */
int fx_st_mapped(const fx_st_file *f);
/* The parsed GGUF header of a GGUF file, NULL for safetensors files. */
const struct fx_gguf *fx_st_gguf(const fx_st_file *f);

/* Pointer to a tensor's bytes, NULL if its file's data is not loaded. Not
 * necessarily aligned to the element size (use the getters below). */
const void *fx_tensor_data(const fx_tensor *t);

/* Ask the kernel to start reading these bytes in the background
 * (madvise WILLNEED on mmap'd data; no-op otherwise). */
void fx_tensor_willneed(const fx_tensor *t);

/* ------------------------------------------------------------------------ */
/* Weight sets                                                              */
/* ------------------------------------------------------------------------ */

typedef struct fx_wset fx_wset;

/* Open a component: path is a .safetensors file or a .safetensors.index.json
 * (its shards are opened from the same folder; a shard name must be a plain
 * file name). display is the path used in messages (NULL = path), e.g.
 * "text_encoder/model.safetensors.index.json"; shard messages use the
 * display folder + shard name. use_mmap as in fx_st_open.
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

/* Map/read (or drop) the data of every file of the set (see fx_st_load_data). */
flux_status fx_wset_load_data(fx_wset *s, int use_mmap, fx_err *err);
void fx_wset_drop_data(fx_wset *s);
int fx_wset_data_loaded(const fx_wset *s);
/* fx_st_check_unchanged / fx_st_check_faults on every file of the set (of a
 * view: its base's). */
flux_status fx_wset_check_unchanged(const fx_wset *s, fx_err *err);
flux_status fx_wset_check_faults(const fx_wset *s, fx_err *err);
/* madvise WILLNEED over all mapped data of the set. */
void fx_wset_willneed(const fx_wset *s);

const char *fx_wset_display(const fx_wset *s);
size_t fx_wset_count(const fx_wset *s);
const fx_tensor *fx_wset_tensor_at(const fx_wset *s, size_t i);
size_t fx_wset_file_count(const fx_wset *s);
const fx_st_file *fx_wset_file_at(const fx_wset *s, size_t i);

/* Lookup: NULL when absent (no error). */
const fx_tensor *fx_wset_find(const fx_wset *s, const char *name);
/* Its position (fx_wset_tensor_at), or -1 when absent. */
long fx_wset_index(const fx_wset *s, const char *name);

/* fp8 scales (README "fp8 checkpoints"): every '<layer>.weight_scale' /
 * '<layer>.scale_weight' of s must belong to an fp8 '<layer>.weight' of s;
 * else FLUX_ERR_MODEL (no such weight) or FLUX_ERR_UNSUPPORTED (a scale on
 * a weight of another dtype), naming both. The fp8 getters below refuse a
 * weight whose scale is not one finite nonzero value. */
flux_status fx_wset_check_fp8(const fx_wset *s, fx_err *err);
/* 1 for the tensors that travel with fp8 weights and are not weights
 * themselves: '.weight_scale', '.scale_weight', '.input_scale',
 * '.scale_input', '.comfy_quant' and the "scaled_fp8" marker. */
int fx_st_fp8_companion(const char *name);

/* Lookup with checks: missing → FLUX_ERR_MODEL "<set>: tensor 'n' not
 * found"; expect (may be NULL = any shape) not matching → FLUX_ERR_MODEL
 * "<file>: tensor 'n' has shape [..], expected [..]". */
flux_status fx_wset_get(const fx_wset *s, const char *name, const fx_shape *expect,
                        const fx_tensor **out, fx_err *err);

/* Same check, plus the dtype must be a weight dtype (F32, F16, BF16, or a
 * block type). */
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
 * dst (room for numel floats); exact for F32/F16/BF16; fp8 times its scale
 * (one f32 rounding, as the GEMM expands it). */
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

/* The base of a view (NULL for other sets). */
const fx_wset *fx_wset_view_base(const fx_wset *s);

/* Convert n elements of a weight dtype to f32, exactly, from possibly
 * unaligned memory (F16 NaNs come out quiet with their payload, as F16C
 * hardware and fx_f16_bits_to_f32 give them; BF16 is bits << 16; block
 * types as fx_dequantize_row, n a multiple of the block). */
void fx_st_convert_f32(const void *src, fx_st_dtype t, int64_t n, float *dst);

#endif
