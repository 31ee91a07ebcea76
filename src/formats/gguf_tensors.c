/*
 * gguf_tensors.c — GGUF files as tensor files: the reader-table entry that
 * validates a GGUF header (gguf.h) and lists its tensors with PyTorch-order
 * shapes (ne reversed), their data in the data section after the aligned
 * header; string key/values answer fx_tensor_file_metadata.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "gguf.h"
#include "tensor_reader.h"

static int probe(const unsigned char *head, size_t len) { return fx_gguf_is_gguf(head, len); }

/* The header from the whole image [img, img + f->file_size). */
static flux_status parse_image(fx_tensor_file *f, const unsigned char *img, fx_err *err) {
    fx_gguf *g = fx_gguf_parse(img, f->file_size, f->display, err);
    if (!g) return err ? err->code : FLUX_ERR_FORMAT;
    f->state = g;
    f->data_off = g->data_start;
    TRY(fx_tensor_file_alloc_tensors(f, g->n_tensors, err));
    for (size_t i = 0; i < g->n_tensors; i++) {
        const fx_gguf_tensor *gt = &g->tensors[i];
        fx_tensor *t = &f->tensors[i];
        t->name = gt->name;
        t->file = f;
        t->dtype = gt->dtype;
        t->shape.ndim = gt->n_dims;
        for (int d = 0; d < gt->n_dims; d++) t->shape.d[d] = gt->ne[gt->n_dims - 1 - d];
        t->offset = (int64_t)gt->offset;
        t->nbytes = (int64_t)gt->nbytes;
        TRY(fx_tensor_file_index_tensor(f, err)); /* names are unique (checked by the parser) */
    }
    return FLUX_OK;
}

/* From a file the header is parsed through a mapping of the whole file. */
static flux_status parse(fx_tensor_file *f, int fd, const unsigned char *img, fx_err *err) {
    if (img) return parse_image(f, img, err);
    if (f->file_size > SIZE_MAX) return fx_fail(err, FLUX_ERR_NOMEM, "%s: too large for the address space", f->display);
    void *m = mmap(NULL, (size_t)f->file_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) return fx_fail(err, FLUX_ERR_IO, "cannot mmap %s: %s", f->path, strerror(errno));
    flux_status st = parse_image(f, m, err);
    munmap(m, (size_t)f->file_size);
    return st;
}

static const char *metadata(const fx_tensor_file *f, const char *key) {
    const char *v = NULL;
    return fx_gguf_get_str(f->state, key, &v) ? NULL : v;
}

static void free_state(void *state) { fx_gguf_free(state); }

const fx_tensor_reader fx_gguf_reader = {"GGUF", probe, parse, metadata, free_state};

const struct fx_gguf *fx_tensor_file_gguf(const fx_tensor_file *f) { return f->reader == &fx_gguf_reader ? f->state : NULL; }
