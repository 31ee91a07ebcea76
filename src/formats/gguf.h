/*
 * gguf.h — GGUF container files (ggml / llama.cpp; versions 2 and 3).
 *
 * Layout (all integers little-endian):
 *   "GGUF" · u32 version · u64 tensor_count · u64 kv_count
 *   kv[kv_count]:         string key · u32 value_type · value
 *   tensor[tensor_count]: string name · u32 n_dims · u64 ne[n_dims] ·
 *                         u32 ggml_type · u64 offset
 *   zero padding to the alignment, then the data section; tensor i's bytes
 *   start at data_start + offset_i.
 * string = u64 length + bytes (no terminator); array = u32 element type ·
 * u64 count · elements. ne[0] is the contiguous dimension: a PyTorch
 * [out, in] weight has ne = {in, out}. general.alignment (u32, a power of
 * two) overrides the default alignment of 32.
 *
 * fx_gguf_parse validates everything before anything is used, each problem
 * a FLUX_ERR_FORMAT naming the file and the key or tensor:
 *   - magic, version 2 or 3 (a byte-swapped version: big-endian file);
 *   - every count and length bounded by the bytes left (computed without
 *     overflow) before anything is allocated; strings and arrays at most
 *     2³⁰; keys and names non-empty, without NUL bytes, at most 65535 bytes;
 *   - keys unique, value types 0..12, bools 0 or 1, no array of arrays;
 *   - general.alignment a non-zero power of two of type u32;
 *   - tensor names unique; 1..4 dimensions, each >= 0, their product and
 *     the byte size free of overflow; a type id ggml defines (simd/dtype.h
 *     has them all with their block sizes; retired and unknown ids are
 *     refused); ne[0] a multiple of the type's block.
 *     A type without kernels (IQ2_XXS, MXFP4, ...; also I8..I64, F64) is
 *     listed like any other: only reading such a tensor as a weight fails
 *     (fx_wset_check_weight), so a file whose unread tensors (Qwen3 layers
 *     klein does not run, output.weight) use one still loads;
 *   - offsets multiples of the alignment, data inside the file, no two
 *     tensors overlapping.
 * Names and string values are copied: the parsed header does not point
 * into the file image.
 */
#ifndef FX_GGUF_H
#define FX_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "src/base/error.h"
#include "simd/kernels.h"

#define FX_GGUF_MAGIC "GGUF"
#define FX_GGUF_DEFAULT_ALIGNMENT 32
#define FX_GGUF_MAX_DIMS 4

typedef enum fx_gguf_vtype {
    FX_GGUF_U8 = 0, FX_GGUF_I8, FX_GGUF_U16, FX_GGUF_I16, FX_GGUF_U32, FX_GGUF_I32, FX_GGUF_F32,
    FX_GGUF_BOOL, FX_GGUF_STRING, FX_GGUF_ARRAY, FX_GGUF_U64, FX_GGUF_I64, FX_GGUF_F64,
    FX_GGUF_VTYPE_COUNT
} fx_gguf_vtype;

typedef struct fx_gguf_kv {
    char *key;
    fx_gguf_vtype type;
    /* scalars: the value as the widest type of its kind */
    uint64_t u;         /* U8 U16 U32 U64 BOOL */
    int64_t i;          /* I8 I16 I32 I64 */
    double f;           /* F32 F64 */
    char *str;          /* STRING (NUL-terminated copy; may hold NULs, see len) */
    uint64_t len;       /* STRING: bytes */
    fx_gguf_vtype elem; /* ARRAY: element type; count in len */
} fx_gguf_kv;

typedef struct fx_gguf_tensor {
    char *name;
    int n_dims;
    int64_t ne[FX_GGUF_MAX_DIMS]; /* ggml order: ne[0] contiguous; unused = 1 */
    uint32_t ggml_type;
    fx_dtype dtype;     /* the dtype of ggml_type (simd/dtype.h) */
    uint64_t offset;    /* from data_start */
    uint64_t nbytes;
} fx_gguf_tensor;

typedef struct fx_gguf {
    uint32_t version;
    uint64_t file_size;
    uint32_t alignment;
    uint64_t data_start;
    fx_gguf_kv *kv;
    size_t n_kv;
    fx_gguf_tensor *tensors; /* file order */
    size_t n_tensors;
} fx_gguf;

/* 1 if the bytes start with the GGUF magic (len >= 4). */
int fx_gguf_is_gguf(const void *head, size_t len);

/* Parse and validate the header of a whole file image [buf, buf + size).
 * display names the file in messages. NULL on error (message in err). */
fx_gguf *fx_gguf_parse(const void *buf, uint64_t size, const char *display, fx_err *err);
void fx_gguf_free(fx_gguf *g);

/* A key's entry, or NULL. */
const fx_gguf_kv *fx_gguf_find(const fx_gguf *g, const char *key);
/* Typed reads: 0 and the value when the key holds that kind of value
 * (any unsigned / signed integer width, F32/F64), else -1. */
int fx_gguf_get_str(const fx_gguf *g, const char *key, const char **out);
int fx_gguf_get_uint(const fx_gguf *g, const char *key, uint64_t *out);
int fx_gguf_get_float(const fx_gguf *g, const char *key, double *out);

#endif
