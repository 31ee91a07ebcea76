/* golden_case.h — the golden cases of tests/golden (README.md,
 * ours-README.md) for the transformer and pipeline tests: their settings,
 * their model folder (the official tiny model, or an ours-* model rebuilt
 * with $FLUX_TOOLS/gen_model into the test's temp folder from case.txt),
 * and .npy helpers. */
#ifndef FX_GOLDEN_CASE_H
#define FX_GOLDEN_CASE_H

#include "../flux.h"
#include "../src/npy.h"

typedef struct fx_gcase {
    char name[64];
    char dir[1024];     /* tests/golden/<name> */
    char model[1024];   /* model folder */
    int steps;
    float guidance;
    flux_schedule schedule;
    int cfg;            /* base model with guidance > 1 */
    int n_refs;
} fx_gcase;

/* Fill c for a case; builds the model of an ours-* case. Returns 1, or 0
 * after recording a test failure. */
int fx_gcase_load(const char *name, fx_gcase *c);

/* Read <dir>/<rel> (a test failure and 0 if unreadable). */
int fx_gcase_npy(const char *dir, const char *rel, fx_npy *a);

/* A context on the case's model (threads, precision); NULL after a failure. */
flux_ctx *fx_gcase_ctx(const char *model, int threads, flux_precision prec);

#endif
