/*
 * wset_shards.c — weight sets of sharded checkpoints: the shards a
 * *.safetensors.index.json lists ("weight_map": tensor name → shard file
 * name in the same folder), opened as tensor files, with only the tensors
 * the index lists visible (weight_set.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wset_internal.h"

/* "dir/" part of a path (including the slash), or "" */
static char *dir_part(const char *path) {
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path + 1) : 0;
    char *d = malloc(n + 1);
    if (d) memcpy(d, path, n), d[n] = '\0';
    return d;
}

static char *join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (s) memcpy(s, a, la), memcpy(s + la, b, lb + 1);
    return s;
}

/* A shard name from an index must be a plain file name next to it. */
static int plain_file_name(const char *n) {
    return *n && strcmp(n, ".") && strcmp(n, "..") && !strchr(n, '/') && !strchr(n, '\\');
}

flux_status fx_wset_open_sharded(fx_wset *s, const char *path, int use_mmap, fx_err *err) {
    s->index_doc = fx_json_parse_file(path, s->display, err);
    if (!s->index_doc) return err ? err->code : FLUX_ERR_FORMAT;
    const fx_json *root = fx_json_root(s->index_doc);
    const fx_json *map = fx_json_get(root, "weight_map");
    if (!fx_json_is_object(map))
        return fx_fail(err, FLUX_ERR_FORMAT, "%s: no \"weight_map\" object in the shard index", s->display);
    size_t n = fx_json_len(map);

    /* distinct shard names, in first-use order */
    const char **shards = calloc(n ? n : 1, sizeof *shards);
    size_t *shard_of = calloc(n ? n : 1, sizeof *shard_of);
    char *real_dir = dir_part(path), *disp_dir = dir_part(s->display);
    flux_status st = FLUX_OK;
    size_t n_shards = 0;
    if (!shards || !shard_of || !real_dir || !disp_dir) {
        st = fx_fail(err, FLUX_ERR_NOMEM, "out of memory reading %s", s->display);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const fx_json *v = fx_json_at(map, i);
        const char *tname = fx_json_key_at(map, i);
        if (strlen(tname) != fx_json_key_len_at(map, i)) {
            st = fx_fail(err, FLUX_ERR_FORMAT, "%s: weight_map: tensor name contains a NUL character", s->display);
            goto done;
        }
        if (!fx_json_is_string(v) || !plain_file_name(fx_json_str(v)) ||
            strlen(fx_json_str(v)) != fx_json_str_len(v)) {
            st = fx_fail(err, FLUX_ERR_FORMAT,
                         "%s: weight_map: tensor '%.200s' maps to %s, expected a shard file name in the same folder",
                         s->display, tname, fx_json_is_string(v) ? "an invalid file name" : "a non-string");
            goto done;
        }
        const char *sn = fx_json_str(v);
        size_t k = 0;
        while (k < n_shards && strcmp(shards[k], sn)) k++;
        if (k == n_shards) shards[n_shards++] = sn;
        shard_of[i] = k;
    }

    s->files = calloc(n_shards ? n_shards : 1, sizeof *s->files);
    s->tensors = calloc(n ? n : 1, sizeof *s->tensors);
    if (!s->files || !s->tensors || fx_name_table_init(&s->names, n)) {
        st = fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", s->display);
        goto done;
    }
    for (size_t k = 0; k < n_shards; k++) {
        char *rp = join(real_dir, shards[k]), *dp = join(disp_dir, shards[k]);
        if (!rp || !dp) {
            free(rp), free(dp);
            st = fx_fail(err, FLUX_ERR_NOMEM, "out of memory opening %s", s->display);
            goto done;
        }
        s->files[k] = fx_tensor_file_open(rp, dp, use_mmap, err);
        free(rp), free(dp);
        if (!s->files[k]) {
            size_t first = 0;
            while (shard_of[first] != k) first++;
            st = fx_prefix(err, "%s: shard '%s' (listed for tensor '%.200s')", s->display, shards[k],
                           fx_json_key_at(map, first));
            goto done;
        }
        s->n_files++;
    }
    for (size_t i = 0; i < n; i++) {
        const char *tname = fx_json_key_at(map, i);
        const fx_tensor *t = fx_tensor_file_find(s->files[shard_of[i]], tname);
        if (!t) {
            st = fx_fail(err, FLUX_ERR_MODEL,
                         "%s: tensor '%.200s' is listed in shard '%s', but that shard does not contain it",
                         s->display, tname, shards[shard_of[i]]);
            goto done;
        }
        s->tensors[s->n] = t;
        if (fx_name_table_insert(&s->names, s->tensors, s->n) >= 0) {
            st = fx_fail(err, FLUX_ERR_FORMAT, "%s: weight_map lists tensor '%.200s' twice", s->display, tname);
            goto done;
        }
        s->n++;
    }
done:
    free(shards);
    free(shard_of);
    free(real_dir);
    free(disp_dir);
    return st;
}

