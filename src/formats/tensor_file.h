/*
 * tensor_file.h — tensor files: one opened file of any format, its tensors
 * and their data.
 *
 * A file is read by the first reader of a small table (tensor_reader.h)
 * whose probe accepts its first bytes: GGUF (gguf.h, by its magic), then
 * safetensors (safetensors.h, any other file). A reader validates the
 * header and lists the tensors (name, dtype, PyTorch-order shape, byte
 * range in the data section); everything else is common: the name lookup,
 * loading the data section (mmap'd MAP_PRIVATE read-only, never copied, or
 * read into RAM), noticing the file was replaced (file_identity.h) or cut
 * short under the mapping (map_guard.h), and conversions to f32.
 * Weight sets (weight_set.h) build model components on top.
 */
#ifndef FX_TENSOR_FILE_H
#define FX_TENSOR_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "src/base/error.h"
#include "simd/kernels.h"

#define FX_ST_MAX_DIMS 8

/* Tensor dtypes are fx_dtype (simd/dtype.h: one list of every type with
 * its size, name and ggml id); fx_dtype_is_weight tells the ones weight
 * getters accept. */

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

typedef struct fx_tensor_file fx_tensor_file;

/* One tensor of an opened file. */
typedef struct fx_tensor {
    const char *name;          /* owned by the file */
    fx_dtype dtype;
    fx_shape shape;
    int64_t offset;            /* into the data section */
    int64_t nbytes;
    const fx_tensor_file *file;
} fx_tensor;

/* ------------------------------------------------------------------------ */
/* Single files                                                             */
/* ------------------------------------------------------------------------ */

/* Open and validate a file of any format of the reader table (GGUF by its
 * magic, else safetensors). `display` names it in messages (NULL = path).
 * use_mmap = 1: map the file; 0: read it into RAM; -1: validate the header
 * only (tensor data unavailable until fx_tensor_file_load_data). Missing/unreadable
 * file → FLUX_ERR_IO; invalid → FLUX_ERR_FORMAT. */
fx_tensor_file *fx_tensor_file_open(const char *path, const char *display, int use_mmap, fx_err *err);

/* Validate an in-memory image of a whole file (not copied: buf must outlive
 * the handle). For tests and fuzzing. */
fx_tensor_file *fx_tensor_file_open_memory(const void *buf, size_t len, const char *display, fx_err *err);

/* Map (use_mmap = 1) or read (0) the data of a header-only file; no-op if
 * the data is already there. fx_tensor_file_drop_data releases it again (file stays
 * open for lookups; tensor data becomes unavailable). */
flux_status fx_tensor_file_load_data(fx_tensor_file *f, int use_mmap, fx_err *err);
void fx_tensor_file_drop_data(fx_tensor_file *f);

void fx_tensor_file_close(fx_tensor_file *f);

/* FLUX_ERR_IO naming the file when the file at its path is no longer the
 * one opened (replaced, resized or rewritten since: device, inode, size,
 * modification time); FLUX_OK for in-memory files. fx_tensor_file_load_data checks
 * the same before mapping or reading the data again. */
flux_status fx_tensor_file_check_unchanged(const fx_tensor_file *f, fx_err *err);

/* FLUX_ERR_IO naming the file when a read of its mapped data faulted
 * because the file was cut short under the mapping (map_guard.h); the
 * mapping then holds zeros there and must not be used any more. */
flux_status fx_tensor_file_check_faults(const fx_tensor_file *f, fx_err *err);

const char *fx_tensor_file_display(const fx_tensor_file *f);
const char *fx_tensor_file_path(const fx_tensor_file *f); /* file system path; NULL for in-memory files */
size_t fx_tensor_file_count(const fx_tensor_file *f);
const fx_tensor *fx_tensor_file_tensor_at(const fx_tensor_file *f, size_t i); /* header order */
const fx_tensor *fx_tensor_file_find(const fx_tensor_file *f, const char *name);
/* A __metadata__ value (GGUF: a string key/value), or NULL. */
const char *fx_tensor_file_metadata(const fx_tensor_file *f, const char *key);
/* 1 if the file's data is mmap'd from disk (not read into RAM, not an
 * in-memory image): only such pages may be dropped and re-read. */
int fx_tensor_file_mapped(const fx_tensor_file *f);
/* The parsed GGUF header of a GGUF file, NULL for safetensors files. */
const struct fx_gguf *fx_tensor_file_gguf(const fx_tensor_file *f);

/* Pointer to a tensor's bytes, NULL if its file's data is not loaded. Not
 * necessarily aligned to the element size (use the getters below). */
const void *fx_tensor_data(const fx_tensor *t);

/* Ask the kernel to start reading these bytes in the background
 * (madvise WILLNEED on mmap'd data; no-op otherwise). */
void fx_tensor_willneed(const fx_tensor *t);

/* Convert n elements of a weight dtype to f32, exactly, from possibly
 * unaligned memory (F16 NaNs come out quiet with their payload, as F16C
 * hardware and fx_f16_bits_to_f32 give them; BF16 is bits << 16; block
 * types as fx_dequantize_row, n a multiple of the block). */
void fx_tensor_convert_f32(const void *src, fx_dtype t, int64_t n, float *dst);

#endif
