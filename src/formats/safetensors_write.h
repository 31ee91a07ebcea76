/*
 * safetensors_write.h — write a safetensors file (the format of
 * safetensors.h) from tensors in memory: the tools' generators (LoRA files,
 * merged weights) and the tests' small and hostile files.
 *
 * The header lists the tensors in the order given, data_offsets packed
 * back to back, and an optional "__metadata__" object of strings; it is
 * padded with spaces to a multiple of 8 bytes, as the reference writer
 * does. The file is written atomically (src/base/atomic_file.h).
 */
#ifndef FX_SAFETENSORS_WRITE_H
#define FX_SAFETENSORS_WRITE_H

#include "src/base/strbuf.h"
#include "tensor_file.h"

typedef struct fx_safetensors_out {
    const char *name;
    fx_dtype dtype;
    fx_shape shape;
    const void *data;     /* numel(shape) × element size bytes */
} fx_safetensors_out;

/* meta: n_meta (key, value) pairs as meta[2i], meta[2i + 1]; NULL/0 = no
 * __metadata__. Errors: FLUX_ERR_IO (naming path), FLUX_ERR_NOMEM,
 * FLUX_ERR_INVALID_ARG (a dtype or shape out of range). */
flux_status fx_safetensors_write(const char *path, const fx_safetensors_out *t, size_t n, const char *const *meta, size_t n_meta,
                        fx_err *err);

/* One header entry of a file whose bytes the caller lays out (streamed
 * writers): data_offsets [begin, end) from the start of the data. */
typedef struct fx_safetensors_entry {
    const char *name;
    fx_dtype dtype;
    fx_shape shape;
    int64_t begin, end;
} fx_safetensors_entry;

/* The header of such a file into h (appended): JSON, then spaces to make
 * h->len a multiple of 8; the file is the 8-byte little-endian h->len,
 * h->s, then the data. Entries must tile the data without holes (the
 * format's rule; not checked here). FLUX_ERR_INVALID_ARG for a dtype or
 * shape out of range (naming `what` and the tensor), FLUX_ERR_NOMEM. */
flux_status fx_safetensors_header(fx_strbuf *h, const fx_safetensors_entry *e, size_t n, const char *const *meta, size_t n_meta,
                         const char *what, fx_err *err);

#endif
