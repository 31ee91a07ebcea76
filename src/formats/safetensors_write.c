/*
 * safetensors_write.c — a safetensors file from tensors in memory
 * (safetensors_write.h).
 */
#include "safetensors_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/atomic_file.h"

flux_status fx_safetensors_header(fx_strbuf *h, const fx_safetensors_entry *e, size_t n, const char *const *meta, size_t n_meta,
                         const char *what, fx_err *err) {
    char num[96];
    fx_sb_str(h, "{");
    if (n_meta) {
        fx_sb_str(h, "\"__metadata__\":{");
        for (size_t i = 0; i < n_meta; i++) {
            if (i) fx_sb_str(h, ",");
            fx_sb_json_str(h, meta[2 * i], strlen(meta[2 * i]));
            fx_sb_str(h, ":");
            fx_sb_json_str(h, meta[2 * i + 1], strlen(meta[2 * i + 1]));
        }
        fx_sb_str(h, "}");
    }
    for (size_t i = 0; i < n; i++) {
        if (!fx_dtype_size(e[i].dtype) || e[i].shape.ndim < 0 || e[i].shape.ndim > FX_ST_MAX_DIMS)
            return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: tensor '%.200s': bad dtype or shape", what, e[i].name);
        if (i || n_meta) fx_sb_str(h, ",");
        fx_sb_json_str(h, e[i].name, strlen(e[i].name));
        fx_sb_str(h, ":{\"dtype\":");
        fx_sb_json_str(h, fx_dtype_name(e[i].dtype), strlen(fx_dtype_name(e[i].dtype)));
        fx_sb_str(h, ",\"shape\":[");
        for (int d = 0; d < e[i].shape.ndim; d++) {
            snprintf(num, sizeof num, d ? ",%lld" : "%lld", (long long)e[i].shape.d[d]);
            fx_sb_str(h, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%lld,%lld]}", (long long)e[i].begin, (long long)e[i].end);
        fx_sb_str(h, num);
    }
    fx_sb_str(h, "}");
    while (!h->failed && h->len % 8) fx_sb_str(h, " ");
    return h->failed ? fx_fail(err, FLUX_ERR_NOMEM, "out of memory writing %s", what) : FLUX_OK;
}

flux_status fx_safetensors_write(const char *path, const fx_safetensors_out *t, size_t n, const char *const *meta, size_t n_meta,
                        fx_err *err) {
    fx_safetensors_entry *e = calloc(n ? n : 1, sizeof *e);
    if (!e) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory writing %s", path);
    int64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        e[i] = (fx_safetensors_entry){t[i].name, t[i].dtype, t[i].shape, off, off};
        if (fx_dtype_size(t[i].dtype) && t[i].shape.ndim >= 0 && t[i].shape.ndim <= FX_ST_MAX_DIMS)
            e[i].end = off += fx_shape_numel(&t[i].shape) * (int64_t)fx_dtype_size(t[i].dtype);
    }
    fx_strbuf h = {0};
    flux_status st = fx_safetensors_header(&h, e, n, meta, n_meta, path, err);
    free(e);
    if (st) {
        free(h.s);
        return st;
    }
    fx_atomic_file af;
    st = fx_atomic_open(&af, path, err);
    if (st) {
        free(h.s);
        return st;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
    int ok = fwrite(len8, 1, 8, af.f) == 8 && fwrite(h.s, 1, h.len, af.f) == h.len;
    for (size_t i = 0; i < n && ok; i++) {
        const size_t bytes = (size_t)fx_shape_numel(&t[i].shape) * fx_dtype_size(t[i].dtype);
        ok = !bytes || fwrite(t[i].data, 1, bytes, af.f) == bytes;
    }
    free(h.s);
    if (!ok) {
        fx_atomic_abort(&af);
        return fx_fail(err, FLUX_ERR_IO, "cannot write %s: write failed", path);
    }
    return fx_atomic_commit(&af, err);
}
