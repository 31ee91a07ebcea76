/*
 * name_table.c — tensor name → index hash table (name_table.h).
 */
#include "name_table.h"

#include <stdlib.h>
#include <string.h>

uint64_t fx_fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int fx_name_table_init(fx_name_table *t, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    t->slots = calloc(cap, sizeof *t->slots);
    t->mask = cap - 1;
    return t->slots ? 0 : -1;
}

void fx_name_table_free(fx_name_table *t) {
    free(t->slots);
    t->slots = NULL;
}

long fx_name_table_insert(fx_name_table *t, const fx_tensor *const *items, size_t i) {
    const char *name = items[i]->name;
    for (size_t h = fx_fnv1a(name) & t->mask;; h = (h + 1) & t->mask) {
        uint32_t v = t->slots[h];
        if (!v) { t->slots[h] = (uint32_t)(i + 1); return -1; }
        if (!strcmp(items[v - 1]->name, name)) return (long)(v - 1);
    }
}

long fx_name_table_find(const fx_name_table *t, const fx_tensor *const *items, const char *name) {
    if (!t->slots) return -1;
    for (size_t h = fx_fnv1a(name) & t->mask;; h = (h + 1) & t->mask) {
        uint32_t v = t->slots[h];
        if (!v) return -1;
        if (!strcmp(items[v - 1]->name, name)) return (long)(v - 1);
    }
}

const char *fx_name_after_index(const char *name, const char *prefix, int *index) {
    size_t len = strlen(prefix);
    if (strncmp(name, prefix, len)) return NULL;
    const char *p = name + len;
    if (*p < '0' || *p > '9' || (*p == '0' && p[1] >= '0' && p[1] <= '9')) return NULL;
    long v = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        if ((v = v * 10 + (*p - '0')) > 100000) return NULL;
    if (*p != '.') return NULL;
    *index = (int)v;
    return p + 1;
}
