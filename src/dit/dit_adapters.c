/*
 * dit_adapters.c — adapter terms on the transformer's linear views
 * (fx_dit_set_adapters, transformer.h).
 *
 * Every linear view the transformer reads is listed with its tensor and
 * first row (fx_dit_linear). A module piece of an adapter adds to rows
 * [tensor_row0, tensor_row0 + rows) of its tensor; on a view of rows
 * [row0, row0 + n) of the same tensor, the overlap becomes one term
 * (fx_delta_rows: the matching ΔW rows at the view's output column). The
 * terms of a view are chained in adapter order, then module order, so the
 * sum is evaluated the same way on every run.
 */
#include "dit_internal.h"
#include "src/formats/lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The terms of view v, written to out (NULL: only counted); returns their
 * number, or -1 with an error. */
static long view_terms(const fx_dit *t, int v, const fx_lora *const *loras, const float *strengths, int n,
                       fx_delta *out, fx_err *err) {
    const fx_dit_linear *lin = &t->linears[v];
    const int64_t v0 = lin->row0, v1 = v0 + lin->w->n;
    long count = 0;
    for (int a = 0; a < n; a++)
        for (size_t i = 0; i < fx_lora_count(loras[a]); i++) {
            const fx_lora_module *m = fx_lora_module_at(loras[a], i);
            const double s = (double)strengths[a] * (double)m->delta.scale;
            if (s == 0.0) continue;
            for (int p = 0; p < m->n_pieces; p++) {
                const fx_lora_piece *pc = &m->piece[p];
                const int64_t lo = pc->tensor_row0 > v0 ? pc->tensor_row0 : v0;
                const int64_t hi = pc->tensor_row0 + pc->rows < v1 ? pc->tensor_row0 + pc->rows : v1;
                if (lo >= hi || strcmp(pc->tensor, lin->tensor)) continue;
                if (out) {
                    fx_delta *d = &out[count];
                    *d = fx_delta_rows(&m->delta, pc->src_row0 + (lo - pc->tensor_row0), hi - lo, lo - v0);
                    d->scale = (float)s;
                    char why[200];
                    if (!isfinite(d->scale)) snprintf(why, sizeof why, "scale %g is not finite", s);
                    if (!isfinite(d->scale) || fx_delta_check(d, lin->w->n, lin->w->k, why, sizeof why))
                        return fx_fail(err, FLUX_ERR_INVALID_ARG, "adapter %d, module '%.200s' on '%.200s': %s", a + 1,
                                       m->key, lin->tensor, why),
                               -1;
                    if (count) out[count - 1].next = d;
                }
                count++;
            }
        }
    return count;
}

flux_status fx_dit_set_adapters(fx_dit *t, const fx_lora *const *loras, const float *strengths, int n, fx_err *err) {
    size_t *first = calloc((size_t)t->n_linears + 1, sizeof *first);
    if (!first) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (adapter terms)");
    for (int v = 0; v < t->n_linears; v++) first[v + 1] = first[v] + (size_t)view_terms(t, v, loras, strengths, n, NULL, err);
    const size_t count = first[t->n_linears];
    fx_delta *terms = count ? calloc(count, sizeof *terms) : NULL;
    if (count && !terms) {
        free(first);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory (%zu adapter terms)", count);
    }
    for (int v = 0; v < t->n_linears; v++)
        if (first[v + 1] > first[v] && view_terms(t, v, loras, strengths, n, terms + first[v], err) < 0) {
            free(first);
            free(terms);
            return err->code;
        }
    for (int v = 0; v < t->n_linears; v++) /* the backend lets go of the old terms here */
        fx_ops_weight_set_terms(t->ops, t->linears[v].op, first[v + 1] > first[v] ? &terms[first[v]] : NULL);
    free(first);
    free(t->deltas);
    t->deltas = terms;
    t->n_deltas = count;
    return FLUX_OK;
}

size_t fx_dit_adapter_terms(const fx_dit *t) { return t->n_deltas; }
