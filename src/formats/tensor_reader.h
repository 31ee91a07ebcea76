/*
 * tensor_reader.h — inside the tensor-file layer: an opened file's fields
 * and the reader table's entry type (one per format: safetensors.h,
 * gguf_tensors.c). Not for users of tensor files: they see tensor_file.h.
 *
 * A reader's parse fills the tensor list (fx_tensor_file_alloc_tensors, then
 * fx_tensor_file_index_tensor for each), the start of the data section and its own
 * state (the parsed header, which the tensor names point into); the
 * common code does the rest (tensor_file.c).
 */
#ifndef FX_TENSOR_READER_H
#define FX_TENSOR_READER_H

#include "file_identity.h"
#include "name_table.h"
#include "tensor_file.h"

typedef struct fx_tensor_reader {
    const char *name; /* "GGUF", "safetensors" */
    /* 1 if a file whose first len bytes (len <= 8: the whole file when it
     * is shorter) are head is in this format. */
    int (*probe)(const unsigned char *head, size_t len);
    /* Parse and validate the header of f (f->file_size bytes) from the
     * whole image img, or, when img is NULL, from the open file fd. */
    flux_status (*parse)(fx_tensor_file *f, int fd, const unsigned char *img, fx_err *err);
    /* A string key/value of the header, or NULL. */
    const char *(*metadata)(const fx_tensor_file *f, const char *key);
    void (*free_state)(void *state);
} fx_tensor_reader;

struct fx_tensor_file {
    char *display;
    char *path;               /* NULL for in-memory files */
    uint64_t file_size;
    fx_file_identity id;      /* what the header was read from */
    uint64_t data_off;        /* start of the data section in the file */
    const fx_tensor_reader *reader;
    void *state;              /* the reader's parsed header (names point into it) */
    fx_tensor *tensors;       /* header order */
    const fx_tensor **index;  /* &tensors[i], for the name table */
    size_t n;
    fx_name_table names;
    /* data section */
    const unsigned char *data;
    void *map_base;
    size_t map_len;
    int guard;                /* its map_guard slot (-1: none) */
    void *ram;
    void *owned;              /* in-memory image owned by the file (freed on close) */
};

/* Room for n tensors (f->n = 0); FLUX_ERR_NOMEM naming the file. */
flux_status fx_tensor_file_alloc_tensors(fx_tensor_file *f, size_t n, fx_err *err);
/* Make f->tensors[f->n] visible by name and count it; FLUX_ERR_FORMAT
 * "<file>: tensor '<name>': duplicate tensor name" if the name is taken. */
flux_status fx_tensor_file_index_tensor(fx_tensor_file *f, fx_err *err);

/* A FLUX_ERR_FORMAT naming the file and (if given) the tensor. */
flux_status fx_tensor_file_bad(fx_err *err, const fx_tensor_file *f, const char *tensor, const char *fmt, ...) FX_PRINTF(4, 5);

/* Read len bytes at off of fd (whole, EINTR retried); 0, or -1 with errno. */
int fx_tensor_file_read_full(int fd, void *buf, size_t len, uint64_t off);

/* A file with no tensors and no data (weight-set views use one for their
 * two-range tensors). */
fx_tensor_file *fx_tensor_file_new_empty(const char *display, fx_err *err);

/* madvise the mapped pages of f under [p, p + len): WILLNEED, or DONTNEED
 * (whole pages inside the range only); no-op for data in RAM. */
void fx_tensor_file_advise(const fx_tensor_file *f, const void *p, size_t len, int dontneed);

/* The table's entries (tensor_file.c tries them in this order). */
extern const fx_tensor_reader fx_gguf_reader;        /* gguf_tensors.c */
extern const fx_tensor_reader fx_safetensors_reader; /* safetensors.c: accepts any file */

#endif
