/* golden_case.h — the golden cases of tests/golden (README.md,
 * ours-README.md) for the transformer, pipeline and reference tests: their
 * settings, their model folder (the official tiny model, or an ours-* model
 * rebuilt with $FLUX_TOOLS/gen_model into the test's temp folder from
 * case.txt), .npy helpers, and a case run end to end against its goldens.
 *
 * Errors are max|ours − golden| / max|golden| per array. Tolerances of an end
 * to end run (fx_gcase_check):
 *   f32 mode (FLUX_PRECISION=f32): 1e-4 for every array, pixels within
 *   1 LSB of the golden PNG (rounding of values within 1e-4 of a .5 step).
 *   default mode with bf16 dot products (AVX512_BF16): FX_GCASE_TOL_BF16_*,
 *   about 2x the worst measured over all cases on a Zen 4: velocities /
 *   latents 1.25e-2 (CFG g = 4 amplifies the ~5e-3 of one transformer
 *   call), reference latents 1.8e-2 (the VAE encoder in bf16), decoded
 *   image 2.1e-2, pixels 4/255 max (0.5 mean).
 *   default mode without them (AVX2, NEON, AVX-512 F): the transformer runs
 *   the f32 math; only the VAE keeps its activations in bf16:
 *   FX_GCASE_TOL_DEF_*, about 2x the worst measured over all cases on a
 *   Zen 3 (AVX2): velocities 4.5e-4, latents 3.7e-4, reference latents
 *   1.27e-2, decoded image 7.4e-3, pixels 1/255 max. */
#ifndef FX_GOLDEN_CASE_H
#define FX_GOLDEN_CASE_H

#include "flux.h"
#include "src/base/npy.h"

#define FX_GCASE_TOL_F32 1e-4
#define FX_GCASE_TOL_BF16_REF 4e-2    /* reference latents */
#define FX_GCASE_TOL_BF16_STEP 3e-2   /* velocities and latents */
#define FX_GCASE_TOL_BF16_IMAGE 5e-2  /* decoded image */
#define FX_GCASE_TOL_BF16_PIXELS 8    /* max |Δ| of a pixel value (of 255) */
#define FX_GCASE_TOL_DEF_REF 2.5e-2
#define FX_GCASE_TOL_DEF_STEP 1e-3
#define FX_GCASE_TOL_DEF_IMAGE 1.5e-2
#define FX_GCASE_TOL_DEF_PIXELS 2

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

/* Read path, or <dir>/<rel> (a test failure and 0 if unreadable). */
int fx_gcase_npy_file(const char *path, fx_npy *a);
int fx_gcase_npy(const char *dir, const char *rel, fx_npy *a);

/* The transformer weight set of a model folder (mapped); NULL after a test
 * failure naming the problem. */
struct fx_wset;
struct fx_wset *fx_gcase_transformer(const char *model);

/* The backend of the contexts below: FLUX_BACKEND_CPU (default; the CPU
 * goldens stay on the CPU on any machine) or FLUX_BACKEND_VULKAN (the
 * tests/vulkan end-to-end cases). */
void fx_gcase_set_backend(flux_backend b);

/* Single files replacing the model folder's transformer / text encoder in
 * the contexts below (flux_load_options; NULL = the folder's), e.g. the
 * GGUF fixtures of other tools run against the official goldens. */
void fx_gcase_set_files(const char *transformer_file, const char *text_encoder_file);

/* A context on the case's model (threads, precision); NULL after a failure. */
flux_ctx *fx_gcase_ctx(const char *model, int threads, flux_precision prec);

/* Load case name (into c, unless NULL), a context on its model and its
 * golden embeddings out/emb.npy (into emb); NULL after a failure. */
flux_ctx *fx_gcase_ctx_emb(const char *name, int threads, flux_precision prec, fx_gcase *c, fx_npy *emb);

/* The case's reference images <dir>/refK.png (K < n_refs) into refs; 0 after
 * a failure (the ones that loaded are in refs, to free). */
int fx_gcase_refs(const fx_gcase *c, flux_image **refs);

/* Relative error of <dump>/<ours> against <gdir>/<golden>; 1e9 (never within
 * a tolerance) with a test failure if either is unreadable or they differ in
 * size or rank. */
double fx_gcase_compare(const char *dump, const char *ours, const char *gdir, const char *golden);

/* Max and mean |Δ| of img's pixels against the PNG file png; 999 with a test
 * failure if it is unreadable or of another size. */
void fx_gcase_pixel_diff(const flux_image *img, const char *png, int *max_d, double *mean_d);

/* Errors of a case generated from its golden embeddings, noise and reference
 * PNGs (fx_gcase_run); 1e9 where an array could not be compared. */
typedef struct fx_gcase_result {
    int n_refs;
    double refs;      /* worst reference latents (0 without references) */
    double steps;     /* worst velocity over the steps */
    double latents, image;
    int max_px;
    double mean_px;
} fx_gcase_result;

/* Generate the case with flux_generate and a dump folder (2 threads, prec)
 * and compare every array with its golden: sigmas, noise and embeddings as
 * given, reference latents, each step's velocity, final latents, decoded
 * image, PNG pixels; prints one line of errors. */
void fx_gcase_run(const char *name, flux_precision prec, fx_gcase_result *r);

/* fx_gcase_run, then every error within the tolerances of prec (above). */
void fx_gcase_check(const char *name, flux_precision prec);

#endif
