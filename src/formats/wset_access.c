/*
 * wset_access.c — a weight set's table read as it is (weight_set.h): its
 * display name, its tensors by index or by name, its files. The layer under
 * weight_set.c (opening, checked lookups, views) and wset_quant.c (the
 * scale layouts), which both read the table.
 */
#include "wset_internal.h"

const char *fx_wset_display(const fx_wset *s) { return s->display; }
size_t fx_wset_count(const fx_wset *s) { return s->n; }
const fx_tensor *fx_wset_tensor_at(const fx_wset *s, size_t i) { return i < s->n ? s->tensors[i] : NULL; }
size_t fx_wset_file_count(const fx_wset *s) { return s->n_files; }
const fx_tensor_file *fx_wset_file_at(const fx_wset *s, size_t i) { return i < s->n_files ? s->files[i] : NULL; }

const fx_tensor *fx_wset_find(const fx_wset *s, const char *name) {
    long i = fx_name_table_find(&s->names, s->tensors, name);
    return i < 0 ? NULL : s->tensors[i];
}
