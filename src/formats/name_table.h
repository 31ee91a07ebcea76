/*
 * name_table.h — tensor name → index hash table (open addressing, FNV-1a)
 * over an array of tensor pointers, shared by files and weight sets.
 */
#ifndef FX_NAME_TABLE_H
#define FX_NAME_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "tensor_file.h"

typedef struct fx_name_table {
    uint32_t *slots; /* index + 1; 0 = empty */
    size_t mask;
} fx_name_table;

uint64_t fx_fnv1a(const char *s);

/* Room for n names; 0, or -1 out of memory. */
int fx_name_table_init(fx_name_table *t, size_t n);
void fx_name_table_free(fx_name_table *t);

/* Insert items[i] by its name: -1 when inserted, else the index of the
 * entry already holding that name (a duplicate; nothing inserted). */
long fx_name_table_insert(fx_name_table *t, const fx_tensor *const *items, size_t i);

/* The index of the item named `name`, or -1. */
long fx_name_table_find(const fx_name_table *t, const fx_tensor *const *items, const char *name);

/* A tensor name "<prefix><n>.<rest>" with a plain decimal n (no leading
 * zero, at most 100000): rest, with n in *index; else NULL. */
const char *fx_name_after_index(const char *name, const char *prefix, int *index);

#endif
