/*
 * gguf_write.h — building GGUF files (version 3, alignment 32): the layout
 * first (key/values and tensor infos, each tensor's offset and size), then
 * the bytes, either streamed to a file or into a memory image.
 *
 *     fx_gguf_writer *w = fx_gguf_writer_new();
 *     fx_gguf_writer_str(w, "general.architecture", "flux");
 *     int i = fx_gguf_writer_tensor(w, "img_in.weight", 2, (int64_t[]){3072, 128}, FX_DTYPE_BF16);
 *     ... fx_gguf_writer_header(w, buf) ... tensor bytes at fx_gguf_writer_offset(w, i) ...
 *
 * Shapes are given in PyTorch order (the writer stores ne reversed).
 * Tensors are laid out in the order added, each at a multiple of 32,
 * zero-padded, which is what ggml's own writer does.
 */
#ifndef FX_GGUF_WRITE_H
#define FX_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "src/base/error.h"
#include "simd/kernels.h"

typedef struct fx_gguf_writer fx_gguf_writer;

fx_gguf_writer *fx_gguf_writer_new(void);
void fx_gguf_writer_free(fx_gguf_writer *w);

/* Key/values (copied). Return 0, or -1 on allocation failure. */
int fx_gguf_writer_str(fx_gguf_writer *w, const char *key, const char *value);
int fx_gguf_writer_u32(fx_gguf_writer *w, const char *key, uint32_t value);
int fx_gguf_writer_f32(fx_gguf_writer *w, const char *key, float value);

/* Add a tensor of ndim (1..4) dims in PyTorch order, dtype F32/F16/BF16 or
 * any other type with a ggml id (last dim a multiple of its block). Returns its index, or
 * -1 (allocation failure, bad shape). */
int fx_gguf_writer_tensor(fx_gguf_writer *w, const char *name, int ndim, const int64_t *shape, fx_dtype dtype);

/* After all key/values and tensors: */
size_t fx_gguf_writer_header_size(const fx_gguf_writer *w);  /* = data start */
uint64_t fx_gguf_writer_file_size(const fx_gguf_writer *w);
uint64_t fx_gguf_writer_offset(const fx_gguf_writer *w, int i); /* absolute, in the file */
uint64_t fx_gguf_writer_nbytes(const fx_gguf_writer *w, int i);
/* The header bytes (header_size of them, zero padding included). */
void fx_gguf_writer_header(const fx_gguf_writer *w, void *buf);

#endif
