/*
 * pipeline.c — text-to-image (BFL flux2 sampling.py; diffusers pipeline_flux2_klein.py): flux_generate, flux_generate_batch.
 *
 *   text embeddings [512, D]  (flux_encode_text, or flux_params.embeddings)
 *   noise [128, h, w]         (rng.h from the seed, or flux_params.noise)
 *   references (optional)     ref_image.h pre-processing → VAE encode → patchify
 *                             → BN normalise → tokens [h_r·w_r, 128], once per
 *                             generation (diffusers pipeline_flux2_klein.py, image_processor.py)
 *   σ_0..σ_S                  (schedule.h; μ from the target token count)
 *   for each step: v = F(x, σ_i) (CFG: v_u + g·(v_c − v_u));  x += (σ_{i+1} − σ_i)·v
 *   unpack → BN de-normalise → unpatchify → VAE decode [3, H, W]
 *   → RGB8 with round(clamp(x/2 + 0.5, 0, 1)·255) → metadata (image_meta.h)
 *
 * The images of a batch (seeds S, S+1, ...) and the two passes of
 * classifier-free guidance are sequences stacked in one transformer run
 * (transformer.h), so the weights stream once per step for all of them; a
 * batch too large for the memory budget is split into chunks of whole
 * images. All memory of a generation is allocated before the first step.
 *
 * References (img2img, multi-reference) are clean latents appended after the
 * target tokens with positions (10·(r+1), y, x, 0): never noised, never
 * updated, the same for every sequence of a run (both CFG passes, every
 * image of a batch); the transformer computes no output rows for them. The
 * default output size is the first reference's processed size.
 *
 * img2img and inpainting (flux_params.init_image; diffusers
 * pipeline_flux2_klein_inpaint.py, README "img2img and inpainting"): the
 * init image is reference 0 and its latents are x0; sampling starts at
 * step t_start (schedule.h fx_schedule_first_step) from σ·noise + (1 − σ)·x0
 * (latents.h), and with a mask (mask.h) every step ends with the blend
 * x = (1 − m)·(x0 noised to the next σ) + m·x on the packed tokens.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "src/base/clock.h"
#include "src/base/finite.h"
#include "src/model/ctx.h"
#include "dump.h"
#include "embcache.h"
#include "src/image/image_meta.h"
#include "adapters.h"
#include "src/dit/latents.h"
#include "src/model/model.h"
#include "prefetch.h"
#include "mask.h"
#include "ref_image.h"
#include "src/dit/rng.h"
#include "src/dit/schedule.h"
#include "src/text/tokenizer.h"
#include "src/dit/transformer.h"
#include "src/formats/map_guard.h"
#include "src/vae/vae.h"
#include "load.h"
#include "text_encode.h"

#define GEN_MIN_SIDE 16
#define GEN_MAX_SIDE 4096
#define GEN_MAX_STEPS 1000
#define GEN_MAX_BATCH 4096
#define GEN_DEFAULT_SIDE 256
/* Workspace budget for stacking images into one transformer run (at least
 * one image, with its CFG pair, always runs). */
#define GEN_STACK_BYTES ((int64_t)1536 << 20)
#define GEN_MAX_STACK 8

typedef struct gen {
    flux_ctx *ctx;
    const flux_params *p;
    fx_err *err;
    fx_dit *dit;
    fx_vae *vae;
    int width, height;        /* pixels */
    int gh, gw;               /* target token grid: H/16, W/16 */
    int ph, pw;               /* VAE patch (2, 2) */
    int vae_scale;            /* VAE down-sampling: 2^(levels − 1) = 8 */
    int64_t N;                /* target tokens gh·gw */
    int cin;                  /* packed latent channels (128) */
    int steps, n_images, cfg;
    float guidance;
    uint64_t seed;
    float *sigmas;            /* [steps + 1] */
    const float *emb, *neg;   /* [512, text_dim] */
    float *emb_own, *neg_own;
    float *bn_mean, *bn_var;  /* [cin] */
    int n_refs;               /* conditioning images: the init image (if any), then flux_params.refs */
    int has_init;             /* 1: reference 0 is flux_params.init_image, its tokens are x0 */
    int first_step;           /* steps first_step .. steps − 1 run (0 without an init image) */
    float *mask;              /* [N] inpainting mask on the token grid; NULL: no blend */
    fx_ref_geom ref_geom[FLUX_MAX_REFS];
    float *ref_tokens[FLUX_MAX_REFS]; /* [h_r·w_r, cin] BN-normalised packed latents */
    int64_t ref_N;            /* reference tokens in total */
    int chunks, chunk;        /* progress over the chunks of a batch */
    double t_denoise;
    char sched[32];
} gen;

/* Enter a stage's step and pass a checkpoint (ctx.h): the progress
 * callback hears it, the stages below report their substeps the same way. */
static flux_status progress(gen *g, flux_stage stage, int step, int total, int sub, int subtotal) {
    fx_ctx_set_stage(g->ctx, stage, step, total);
    return fx_ctx_checkpoint(g->ctx, sub, subtotal);
}

/* A stage's input or output with a NaN or an infinity is an error naming
 * the stage and where (what [rows, cols] means is in `row` / `col`):
 * FLUX_ERR_INVALID_ARG for the caller's inputs, FLUX_ERR_MODEL for what the
 * weights computed. One pass over each stage's output: free next to it. */
static flux_status check_finite(gen *g, flux_status code, const float *x, int64_t rows, int64_t cols, const char *what,
                                const char *row, const char *col) {
    int64_t i = fx_find_nonfinite(x, rows * cols);
    if (i < 0) return FLUX_OK;
    return fx_fail(g->err, code, "%s (%s at %s %lld, %s %lld)%s", what, fx_nonfinite_name(x[i]), row,
                   (long long)(i / cols), col, (long long)(i % cols),
                   code == FLUX_ERR_MODEL ? "; the weights may be damaged" : "");
}

/* A seed from the clock (below 2^32, short enough to retype). */
static uint64_t clock_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return fx_rng_mix64((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) >> 32;
}

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */
/* ------------------------------------------------------------------------ */

/* Conditioning image r: the init image first when there is one, then the refs. */
static const flux_image *ref_source(const gen *g, int r) {
    return g->has_init ? (r == 0 ? g->p->init_image : g->p->refs[r - 1]) : g->p->refs[r];
}

static void ref_name(const gen *g, int r, char *buf, size_t size) {
    if (g->has_init && r == 0) snprintf(buf, size, "init image");
    else snprintf(buf, size, "reference image %d", r - g->has_init);
}

static flux_status resolve(gen *g, int n_images) {
    const flux_params *p = g->p;
    const struct fx_model *m = g->ctx->model;
    fx_err *err = g->err;
    if (p->n_refs < 0 || p->n_refs > FLUX_MAX_REFS)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "n_refs must be in 0..%d, got %d", FLUX_MAX_REFS, p->n_refs);
    if (p->n_refs > 0 && !p->refs)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "n_refs is %d but refs is NULL", p->n_refs);
    g->has_init = p->init_image != NULL;
    if (p->n_refs + g->has_init > FLUX_MAX_REFS)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "the init image and %d reference images: at most %d images in all",
                       p->n_refs, FLUX_MAX_REFS);
    if (!g->has_init && (p->mask || p->mask_invert))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s is only used with an init image (init_image is NULL)",
                       p->mask ? "mask" : "mask_invert");
    if ((p->mask_invert || p->mask_blur_x || p->mask_blur_y) && !p->mask)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s is set but no mask is given",
                       p->mask_invert ? "mask_invert" : "mask_blur");
    if (!(p->mask_blur_x >= 0 && p->mask_blur_x <= FX_MASK_MAX_BLUR && p->mask_blur_y >= 0 &&
          p->mask_blur_y <= FX_MASK_MAX_BLUR))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "mask_blur_x and mask_blur_y must be in 0..%d, got %g and %g",
                       FX_MASK_MAX_BLUR, p->mask_blur_x, p->mask_blur_y);
    g->vae_scale = 1 << (m->vae.levels - 1);
    g->ph = m->vae.patch[0];
    g->pw = m->vae.patch[1];
    int unit_h = g->vae_scale * g->ph, unit_w = g->vae_scale * g->pw;
    /* References: checked and sized now (pre-processed and encoded later). */
    g->n_refs = p->n_refs + g->has_init;
    if (g->n_refs && unit_h != unit_w)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "reference images need a square VAE patch (found %dx%d)", g->ph, g->pw);
    for (int r = 0; r < g->n_refs; r++) {
        const flux_image *img = ref_source(g, r);
        char what[64];
        ref_name(g, r, what, sizeof what);
        if (!img || !img->data || img->channels < 1 || img->channels > 4)
            return fx_fail(err, FLUX_ERR_INVALID_ARG, "%s: not a valid image (%s)", what,
                           !img ? "NULL" : !img->data ? "no pixel data" : "channels must be 1..4");
        if (g->has_init && r == 0) TRY(fx_init_geometry(img->width, img->height, unit_h, what, &g->ref_geom[r], err));
        else TRY(fx_ref_geometry(img->width, img->height, unit_h, what, &g->ref_geom[r], err));
        g->ref_N += (int64_t)(g->ref_geom[r].height / unit_h) * (g->ref_geom[r].width / unit_w);
    }
    /* Default size: the first reference's processed size (diffusers), else 256. */
    g->width = p->width ? p->width : g->n_refs ? g->ref_geom[0].width : GEN_DEFAULT_SIDE;
    g->height = p->height ? p->height : g->n_refs ? g->ref_geom[0].height : GEN_DEFAULT_SIDE;
    if (g->has_init && (g->width != g->ref_geom[0].width || g->height != g->ref_geom[0].height))
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "the init image sets the output size (%dx%d from %dx%d); width and height must be 0 or that "
                       "size, got %dx%d",
                       g->ref_geom[0].width, g->ref_geom[0].height, g->ref_geom[0].src_w, g->ref_geom[0].src_h,
                       g->width, g->height);
    if (g->width < GEN_MIN_SIDE || g->width > GEN_MAX_SIDE || g->height < GEN_MIN_SIDE || g->height > GEN_MAX_SIDE)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "image size %dx%d is outside %d..%d per side", g->width, g->height,
                       GEN_MIN_SIDE, GEN_MAX_SIDE);
    if (g->width % unit_w || g->height % unit_h)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "image size %dx%d: width must be a multiple of %d and height of %d",
                       g->width, g->height, unit_w, unit_h);
    g->gh = g->height / unit_h;
    g->gw = g->width / unit_w;
    g->N = (int64_t)g->gh * g->gw;
    g->cin = m->dit.in_channels;
    if (m->dit.out_channels != g->cin || g->cin != m->vae.latent_channels * g->ph * g->pw)
        return fx_fail(err, FLUX_ERR_MODEL, "transformer channels %d → %d do not match the VAE's %d x %dx%d",
                       m->dit.in_channels, m->dit.out_channels, m->vae.latent_channels, g->ph, g->pw);
    g->steps = p->steps ? p->steps : (m->distilled ? 4 : 50);
    if (g->steps < 1 || g->steps > GEN_MAX_STEPS)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "steps must be in 1..%d, got %d", GEN_MAX_STEPS, g->steps);
    if (g->has_init) {
        if (!(p->strength >= 0.0 && p->strength <= 1.0))
            return fx_fail(err, FLUX_ERR_INVALID_ARG, "strength must be in 0..1, got %g", p->strength);
        g->first_step = fx_schedule_first_step(g->steps, p->strength);
        if (g->first_step >= g->steps)
            return fx_fail(err, FLUX_ERR_INVALID_ARG,
                           "strength %g with %d steps leaves no denoising step (int(%d - %d*strength) = %d); use a "
                           "larger strength",
                           p->strength, g->steps, g->steps, g->steps, g->first_step);
    }
    g->guidance = p->guidance < 0 ? (m->distilled ? 1.0f : 4.0f) : p->guidance;
    if (!(g->guidance <= FLUX_GUIDANCE_MAX))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "guidance must be in 0..%d, got %g", FLUX_GUIDANCE_MAX,
                       (double)g->guidance);
    g->cfg = !m->distilled && g->guidance > 1.0f;
    /* Options that only mean something with classifier-free guidance are
     * refused rather than silently ignored. */
    const int has_negative = p->negative_prompt || p->negative_embeddings;
    if (m->distilled && g->guidance > 1.0f)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "guidance %g asks for classifier-free guidance, which only the base model has: %s is "
                       "distilled (%s); leave the guidance at 1, or force the base "
                       "path (--base, flux_load_options.distilled = 0)",
                       (double)g->guidance, m->name, m->variant_why);
    if (m->distilled && has_negative)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "a negative prompt needs classifier-free guidance, which only the base model has: %s is "
                       "distilled (%s)",
                       m->name, m->variant_why);
    if (!g->cfg && has_negative)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "a negative prompt is only used with classifier-free guidance (guidance > 1); guidance is %g",
                       (double)g->guidance);
    if (p->schedule != FLUX_SCHEDULE_SHIFTED && p->schedule != FLUX_SCHEDULE_LINEAR &&
        p->schedule != FLUX_SCHEDULE_POWER)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "flux_params.schedule is %d, not a flux_schedule (0 shifted, 1 linear, 2 power)", (int)p->schedule);
    if (p->batch < 0)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_params.batch is %d, not an image count (0 or 1 = one image)",
                       p->batch);
    fx_schedule_describe(p->schedule, p->power_alpha, g->sched, sizeof g->sched);
    if (n_images < 1 || n_images > GEN_MAX_BATCH)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "batch must be in 1..%d, got %d", GEN_MAX_BATCH, n_images);
    g->n_images = n_images;
    if (p->noise && n_images > 1)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "noise is given for one image; a batch of %d draws its own from the seeds",
                       n_images);
    if (!p->embeddings && !p->prompt)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "no prompt and no text embeddings given");
    /* the prompt would be ignored and yet recorded in the image's metadata */
    if (p->embeddings && p->prompt)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "prompt and embeddings exclude each other (the embeddings replace "
                                                  "the prompt's text encoding)");
    if (p->negative_embeddings && p->negative_prompt)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "negative_prompt and negative_embeddings exclude each other");
    g->seed = p->seed == FLUX_SEED_RANDOM ? clock_seed() : p->seed;
    if (g->seed > FLUX_SEED_RANDOM - (uint64_t)n_images)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "seed %llu with a batch of %d: the last seed would pass %llu (the largest seed)",
                       (unsigned long long)g->seed, n_images, (unsigned long long)(FLUX_SEED_RANDOM - 1));
    if (p->seed_used) *p->seed_used = g->seed;
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Inputs                                                                   */
/* ------------------------------------------------------------------------ */

/* Write tokens.npy / attention_mask.npy of the prompt (dump only). */
static flux_status dump_tokens(gen *g, const char *prompt) {
    flux_ctx *ctx = g->ctx;
    fx_tokenizer *tok;
    TRY(fx_ctx_tokenizer(ctx, &tok));
    int32_t ids[FLUX_TEXT_TOKENS];
    uint8_t mask[FLUX_TEXT_TOKENS];
    int n_real = 0;
    TRY(fx_tokenizer_encode_prompt(tok, prompt, FLUX_TEXT_TOKENS, ids, mask, &n_real, g->err));
    return fx_dump_tokens(g->p->dump_dir, ids, mask, FLUX_TEXT_TOKENS, g->err);
}

static flux_status encode(gen *g, const char *prompt, float **out) {
    const int64_t n = (int64_t)FLUX_TEXT_TOKENS * g->ctx->model->dit.text_dim;
    if (!(*out = malloc((size_t)n * sizeof(float))))
        return fx_fail(g->err, FLUX_ERR_NOMEM, "out of memory (text embeddings)");
    return fx_text_encode(g->ctx, prompt, *out);
}

/* The prompt's (and for CFG the negative prompt's) embeddings. The text
 * encoder's weights are released afterwards: the transformer needs the
 * memory more. */
static flux_status text_embeddings(gen *g) {
    const flux_params *p = g->p;
    const int text_dim = g->ctx->model->dit.text_dim;
    const int total = g->cfg ? 2 : 1; /* the prompt, and for CFG the negative one */
    int encoded = 0;
    double t0 = fx_now_s();
    TRY(progress(g, FLUX_STAGE_TEXT_ENCODE, 0, total, 0, 0));
    if (p->embeddings) {
        g->emb = p->embeddings;
        TRY(check_finite(g, FLUX_ERR_INVALID_ARG, g->emb, FLUX_TEXT_TOKENS, text_dim,
                         "the text embeddings contain a non-finite value", "token", "column"));
    } else {
        if (p->dump_dir) TRY(dump_tokens(g, p->prompt));
        TRY(encode(g, p->prompt, &g->emb_own));
        g->emb = g->emb_own;
        encoded = 1;
        TRY(check_finite(g, FLUX_ERR_MODEL, g->emb, FLUX_TEXT_TOKENS, text_dim,
                         "the text encoder produced non-finite embeddings", "token",
                         "column"));
    }
    if (g->cfg) {
        TRY(progress(g, FLUX_STAGE_TEXT_ENCODE, 1, total, 0, 0));
        if (p->negative_embeddings) {
            g->neg = p->negative_embeddings;
            TRY(check_finite(g, FLUX_ERR_INVALID_ARG, g->neg, FLUX_TEXT_TOKENS, text_dim,
                             "the negative text embeddings contain a non-finite value", "token", "column"));
        } else {
            TRY(encode(g, p->negative_prompt ? p->negative_prompt : "", &g->neg_own));
            g->neg = g->neg_own;
            encoded = 1;
            TRY(check_finite(g, FLUX_ERR_MODEL, g->neg, FLUX_TEXT_TOKENS, text_dim,
                             "the text encoder produced non-finite negative embeddings",
                             "token", "column"));
        }
    }
    if (encoded) {
        flux_release_text_encoder(g->ctx);
        fx_log(&g->ctx->log, 1, "flux: text encoding %.2f s", fx_now_s() - t0);
    }
    int64_t shape[2] = {FLUX_TEXT_TOKENS, text_dim};
    TRY(fx_dump_f32(p->dump_dir, "text_embeddings.npy", g->emb, 2, shape, g->err));
    return progress(g, FLUX_STAGE_TEXT_ENCODE, total, total, 0, 0);
}

static flux_status load_components(gen *g) {
    flux_ctx *ctx = g->ctx;
    TRY(fx_dit_get(ctx, &g->dit));
    TRY(fx_vae_get(ctx, &g->vae));
    fx_shape shape = FX_SHAPE(g->cin);
    TRY(fx_wset_f32(ctx->model->vae_w, "bn.running_mean", &shape, &g->bn_mean, NULL, g->err));
    TRY(fx_wset_f32(ctx->model->vae_w, "bn.running_var", &shape, &g->bn_var, NULL, g->err));
    if (!(g->sigmas = malloc((size_t)(g->steps + 1) * sizeof(float))))
        return fx_fail(g->err, FLUX_ERR_NOMEM, "out of memory (schedule)");
    TRY(fx_schedule_sigmas(g->p->schedule, g->steps, g->N, g->p->power_alpha, g->sigmas, g->err));
    int64_t shape1[1] = {g->steps + 1};
    return fx_dump_f32(g->p->dump_dir, "sigmas.npy", g->sigmas, 1, shape1, g->err);
}

/* Each reference once per generation (diffusers pipeline_flux2_klein.py, image_processor.py): pre-process → VAE encode
 * (mean) → patchify → BN normalise → pack to tokens [h_r·w_r, cin]. Dumps
 * refK_image.npy [3, H_r, W_r] (pre-processed pixels in [−1, 1]) and
 * refK_latents.npy [cin, h_r, w_r] (as the golden out/refK_latents.npy). */
static flux_status encode_refs(gen *g) {
    flux_ctx *ctx = g->ctx;
    const int lat_c = g->cin / (g->ph * g->pw), unit = g->vae_scale * g->ph;
    flux_status st = FLUX_OK;
    for (int r = 0; r < g->n_refs && !st; r++) {
        TRY(progress(g, FLUX_STAGE_VAE_ENCODE, r, g->n_refs, 0, 0));
        double t0 = fx_now_s();
        char what[64], name[64];
        ref_name(g, r, what, sizeof what);
        fx_ref_geom *rg = &g->ref_geom[r];
        float *pix = NULL, *mean = NULL, *chw = NULL;
        if (g->has_init && r == 0) TRY(fx_init_prepare(ref_source(g, r), unit, what, rg, &pix, g->err));
        else TRY(fx_ref_prepare(ref_source(g, r), unit, what, rg, &pix, g->err));
        const int h8 = rg->height / g->vae_scale, w8 = rg->width / g->vae_scale;
        const int gh = rg->height / unit, gw = rg->width / unit;
        const int64_t n = (int64_t)gh * gw;
        mean = malloc((size_t)lat_c * (size_t)h8 * (size_t)w8 * sizeof(float));
        chw = malloc((size_t)(g->cin * n) * sizeof(float));
        g->ref_tokens[r] = malloc((size_t)(g->cin * n) * sizeof(float));
        if (!mean || !chw || !g->ref_tokens[r])
            st = fx_fail(g->err, FLUX_ERR_NOMEM, "out of memory (%s latents)", what);
        snprintf(name, sizeof name, "ref%d_image.npy", r);
        if (!st) st = fx_dump_chw(g->p->dump_dir, name, pix, 3, rg->height, rg->width, g->err);
        if (!st) st = fx_vae_encode(ctx, g->vae, pix, rg->height, rg->width, mean);
        if (!st) {
            char bad[128];
            snprintf(bad, sizeof bad, "the VAE encoder produced a non-finite latent for %s", what);
            st = check_finite(g, FLUX_ERR_MODEL, mean, lat_c, (int64_t)h8 * w8, bad, "channel", "pixel");
        }
        if (!st) {
            fx_patchify(mean, lat_c, gh, gw, g->ph, g->pw, chw);
            fx_bn_normalize(chw, g->cin, n, g->bn_mean, g->bn_var, ctx->model->vae.batch_norm_eps);
            fx_latents_pack(chw, g->cin, gh, gw, g->ref_tokens[r], g->cin);
            snprintf(name, sizeof name, "ref%d_latents.npy", r);
            st = fx_dump_chw(g->p->dump_dir, name, chw, g->cin, gh, gw, g->err);
        }
        if (!st)
            fx_log(&ctx->log, 1, "flux: %s%.*d: %dx%d%s -> %dx%d (%lld tokens), VAE encode %.2f s",
                   g->has_init && r == 0 ? "init image" : "reference ", g->has_init && r == 0 ? 0 : 1,
                   g->has_init && r == 0 ? 0 : r - g->has_init, rg->src_w,
                   rg->src_h, rg->scaled_w != rg->src_w || rg->scaled_h != rg->src_h ? " (Lanczos to area 1024^2)" : "",
                   rg->width, rg->height, (long long)n, fx_now_s() - t0);
        free(pix), free(mean), free(chw);
    }
    if (!st && g->n_refs) st = progress(g, FLUX_STAGE_VAE_ENCODE, g->n_refs, g->n_refs, 0, 0);
    if (!st && g->p->mask) {
        const fx_mask_rules rules = {g->p->mask_invert, g->p->mask_blur_x, g->p->mask_blur_y};
        st = fx_mask_tokens(g->p->mask, &rules, g->width, g->height, unit, &g->mask, g->err);
        if (!st) st = fx_dump_chw(g->p->dump_dir, "mask.npy", g->mask, 1, g->gh, g->gw, g->err);
    }
    return st;
}

/* The token layout of a run of `batch` sequences: target, then references. */
static fx_dit_layout run_layout(const gen *g, int batch) {
    fx_dit_layout lay = {.batch = batch, .text_len = FLUX_TEXT_TOKENS, .n_images = 1 + g->n_refs,
                         .grid_h = {g->gh}, .grid_w = {g->gw}};
    const int unit = g->vae_scale * g->ph;
    for (int r = 0; r < g->n_refs; r++) {
        lay.grid_h[r + 1] = g->ref_geom[r].height / unit;
        lay.grid_w[r + 1] = g->ref_geom[r].width / unit;
    }
    return lay;
}

/* ------------------------------------------------------------------------ */
/* Denoising                                                                */
/* ------------------------------------------------------------------------ */

/* Inpainting: after step i, each image's tokens x = (1 − m)·keep + m·x with
 * keep = x0 noised to σ_{i+1} with the image's own noise, or x0 itself after
 * the last step (diffusers: init_latents_proper, scale_noise with the
 * scheduler's step index, which is then i + 1). scratch [N, cin]. */
static void blend_mask(gen *g, int i, int count, float *lat, const float *noise, float *scratch) {
    const int64_t tok = g->N * g->cin;
    const float *x0 = g->ref_tokens[0];
    for (int j = 0; j < count; j++) {
        const float *keep = x0;
        if (i + 1 < g->steps) {
            fx_latents_noised(x0, noise + j * tok, g->sigmas[i + 1], tok, scratch);
            keep = scratch;
        }
        fx_latents_blend(lat + j * tok, keep, g->mask, g->N, g->cin);
    }
}

/* Euler sampling of `count` images stacked in one run, steps first_step ..
 * steps − 1. lat [count, N, cin] (packed tokens) holds the start latents on
 * entry and the final latents on exit; noise [count, N, cin] their noise
 * (used by the inpainting blend). Scratch: xin [B, N, cin] and v [B, N,
 * cin] with B = count (×2 with CFG). */
static flux_status denoise(gen *g, int first, int count, float *lat, const float *noise, float *xin, float *v) {
    flux_ctx *ctx = g->ctx;
    const int per = g->cfg ? 2 : 1, B = count * per, nb = fx_dit_cfg(g->dit)->double_blocks + fx_dit_cfg(g->dit)->single_blocks;
    const int64_t tok = g->N * g->cin;
    fx_dit_layout lay = run_layout(g, B);
    fx_dit_run *run = NULL;
    TRY(fx_dit_run_new(ctx, g->dit, &lay, &run));
    const float *texts[2 * GEN_MAX_STACK];
    for (int j = 0; j < count; j++) {
        if (g->cfg) texts[2 * j] = g->neg; /* unconditional first, as the reference batches [uncond, cond] */
        texts[j * per + per - 1] = g->emb;
    }
    flux_status st = fx_dit_run_set_text(run, texts);
    /* reference tokens: projected once per run, shared by all B sequences */
    for (int r = 0; r < g->n_refs && !st; r++) st = fx_dit_run_set_image(run, r + 1, g->ref_tokens[r]);
    const int run_steps = g->steps - g->first_step;
    for (int i = g->first_step; i < g->steps && !st; i++) {
        double t0 = fx_now_s();
        int total = run_steps * g->chunks, step = g->chunk * run_steps + i - g->first_step;
        if ((st = progress(g, FLUX_STAGE_DENOISE, step, total, 0, nb))) break;
        const float *x = lat;
        if (g->cfg) {
            for (int j = 0; j < count; j++)
                for (int k = 0; k < per; k++) memcpy(xin + (int64_t)(j * per + k) * tok, lat + (int64_t)j * tok, (size_t)tok * sizeof(float));
            x = xin;
        }
        if ((st = fx_dit_forward(run, x, g->sigmas[i], v))) break; /* checkpoints per block */
        if (g->cfg) /* v_j = v_u + g·(v_c − v_u), compacted to [count, N, cin] */
            for (int j = 0; j < count; j++) {
                const float *vu = v + (int64_t)(2 * j) * tok, *vc = vu + tok;
                float *vj = v + (int64_t)j * tok;
                for (int64_t e = 0; e < tok; e++) vj[e] = vu[e] + g->guidance * (vc[e] - vu[e]);
            }
        if (first == 0 && (st = fx_dump_velocity(g->p->dump_dir, i, v, g->N, g->cin, g->err))) break;
        const float dt = g->sigmas[i + 1] - g->sigmas[i];
        for (int64_t e = 0; e < (int64_t)count * tok; e++) lat[e] += dt * v[e];
        if (g->mask) blend_mask(g, i, count, lat, noise, xin);
        char what[128];
        snprintf(what, sizeof what, "denoising step %d of %d produced a non-finite latent", i + 1, g->steps);
        if ((st = check_finite(g, FLUX_ERR_MODEL, lat, (int64_t)count * g->N, g->cin, what, "token", "channel"))) break;
        double dt_s = fx_now_s() - t0;
        g->t_denoise += dt_s;
        fx_log(&ctx->log, 1, "flux: step %d/%d (sigma %.4f, %d sequence(s) x %lld tokens): %.2f s", i + 1, g->steps,
               (double)g->sigmas[i], B, (long long)(FLUX_TEXT_TOKENS + g->N + g->ref_N), dt_s);
        st = progress(g, FLUX_STAGE_DENOISE, step + 1, total, 0, 0);
    }
    fx_dit_run_free(run);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Decoding                                                                 */
/* ------------------------------------------------------------------------ */

/* img2img metadata: "strength", "mask" ("yes"), "mask_invert" ("yes"), and
 * A1111's "Denoising strength: S" (+ "Mask mode: Inpaint not masked") at
 * the end of the settings line of "parameters". */
static flux_status set_init_text(const gen *g, flux_image *img) {
    char strength[32];
    snprintf(strength, sizeof strength, "%.17g", g->p->strength);
    /* shortest text that reads back as the same double ("0.75", not 0.75000000000000000) */
    for (int prec = 1; prec <= 17; prec++) {
        char t[32];
        snprintf(t, sizeof t, "%.*g", prec, g->p->strength);
        if (strtod(t, NULL) == g->p->strength) {
            memcpy(strength, t, sizeof t);
            break;
        }
    }
    flux_status st = flux_image_set_text(img, "strength", strength);
    if (!st && g->p->mask) st = flux_image_set_text(img, "mask", "yes");
    if (!st && g->p->mask_invert) st = flux_image_set_text(img, "mask_invert", "yes");
    char blur[64] = "";
    if (g->p->mask_blur_x || g->p->mask_blur_y) { /* A1111 writes "Mask blur: 4" (its mask_blur) */
        if (g->p->mask_blur_x == g->p->mask_blur_y) snprintf(blur, sizeof blur, "%g", g->p->mask_blur_x);
        else snprintf(blur, sizeof blur, "%g x %g", g->p->mask_blur_x, g->p->mask_blur_y);
        if (!st) st = flux_image_set_text(img, "mask_blur", blur);
    }
    const char *params = flux_image_get_text(img, "parameters");
    if (st || !params) return st;
    size_t n = strlen(params) + 128;
    char *text = malloc(n);
    if (!text) return FLUX_ERR_NOMEM;
    snprintf(text, n, "%s, Denoising strength: %s%s%s%s", params, strength,
             g->p->mask_invert ? ", Mask mode: Inpaint not masked" : "", blur[0] ? ", Mask blur: " : "", blur);
    st = flux_image_set_text(img, "parameters", text);
    free(text);
    return st;
}

/* Packed tokens [N, cin] → RGB image with metadata. chw [cin, N] and z
 * [cin, N] and pix [3, H, W] are scratch. */
static flux_status decode(gen *g, int index, const float *tokens, float *chw, float *z, float *pix, flux_image **out) {
    flux_ctx *ctx = g->ctx;
    const char *dump = index == 0 ? g->p->dump_dir : NULL;
    fx_latents_unpack(tokens, g->cin, g->cin, g->gh, g->gw, chw);
    TRY(fx_dump_chw(dump, "latents.npy", chw, g->cin, g->gh, g->gw, g->err));
    fx_bn_denormalize(chw, g->cin, g->N, g->bn_mean, g->bn_var, ctx->model->vae.batch_norm_eps);
    fx_unpatchify(chw, g->cin / (g->ph * g->pw), g->gh, g->gw, g->ph, g->pw, z);
    TRY(fx_vae_decode(ctx, g->vae, z, g->gh * g->ph, g->gw * g->pw, pix)); /* checkpoints per decoder stage */
    TRY(check_finite(g, FLUX_ERR_MODEL, pix, 3, (int64_t)g->height * g->width,
                     "the VAE decoder produced a non-finite pixel value", "channel",
                     "pixel"));
    TRY(fx_dump_chw(dump, "decoded.npy", pix, 3, g->height, g->width, g->err));
    flux_image *img = flux_image_new(g->width, g->height, 3);
    if (!img) return fx_fail(g->err, FLUX_ERR_NOMEM, "out of memory (%dx%d image)", g->width, g->height);
    fx_image_to_rgb8(pix, g->height, g->width, img->data);
    const char *neg = g->cfg ? (g->p->negative_prompt ? g->p->negative_prompt : "") : NULL;
    /* adapters: <lora:NAME:SCALE> tags after the prompt of "parameters" (as
     * A1111 prompts carry them), the "prompt" entry as given */
    char *tagged = NULL, *loras = NULL;
    flux_status st = fx_adapters_tags(ctx, g->p->prompt, &tagged, &loras);
    if (!st)
        st = fx_image_set_generation_text(img, loras ? tagged : g->p->prompt, neg, g->steps, g->seed + (uint64_t)index,
                                          g->width, g->height, g->cfg ? g->guidance : 1.0f, g->sched, ctx->model->name,
                                          NULL);
    if (!st) { /* distilled or base, and why (src/model/variant.h) */
        char variant[sizeof ctx->model->variant_why + 16];
        snprintf(variant, sizeof variant, "%s (%s)", ctx->model->distilled ? "distilled" : "base",
                 ctx->model->variant_why);
        st = flux_image_set_text(img, "variant", variant);
    }
    if (!st && loras) st = flux_image_set_text(img, "prompt", g->p->prompt ? g->p->prompt : "");
    if (!st && loras) st = flux_image_set_text(img, "loras", loras);
    free(tagged);
    free(loras);
    if (!st && g->p->n_refs) {
        char n[16];
        snprintf(n, sizeof n, "%d", g->p->n_refs);
        st = flux_image_set_text(img, "references", n);
    }
    if (!st && g->has_init) st = set_init_text(g, img);
    if (st) {
        flux_image_free(img);
        return fx_fail(g->err, st, "out of memory (image metadata)");
    }
    *out = img;
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Driver                                                                   */
/* ------------------------------------------------------------------------ */

/* A run that cannot fit in physical memory (huge images or many large
 * references) fails here with the numbers instead of thrashing later. */
static flux_status check_memory(gen *g) {
    fx_dit_layout lay = run_layout(g, g->cfg ? 2 : 1);
    const double need = (double)fx_dit_run_bytes(g->dit, &lay);
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const double have = pages > 0 && page > 0 ? (double)pages * (double)page : 0.0;
    if (have > 0 && need > 0.75 * have)
        return fx_fail(g->err, FLUX_ERR_NOMEM,
                       "this generation needs a %.1f GB transformer workspace (%d sequence(s) x %lld tokens: %lld "
                       "target + %lld from %d reference(s)), more than 3/4 of this machine's %.1f GB; use a smaller "
                       "size or fewer/smaller references",
                       need * 1e-9, lay.batch, (long long)(FLUX_TEXT_TOKENS + g->N + g->ref_N), (long long)g->N,
                       (long long)g->ref_N, g->n_refs, have * 1e-9);
    return FLUX_OK;
}

/* Images per transformer run: as many as the workspace budget allows. */
static int images_per_run(gen *g) {
    fx_dit_layout lay = run_layout(g, g->cfg ? 2 : 1);
    int64_t per_image = fx_dit_run_bytes(g->dit, &lay);
    int64_t k = per_image > 0 ? GEN_STACK_BYTES / per_image : 1;
    if (k < 1) k = 1;
    if (k > GEN_MAX_STACK) k = GEN_MAX_STACK;
    if (k > g->n_images) k = g->n_images;
    return (int)k;
}

static flux_status denoise_and_decode(gen *g, flux_image **out);

static flux_status run_all(gen *g, flux_image **out) {
    /* From the start, a background thread reads the transformer's weights
     * into the page cache (prefetch.h: not into our RSS) while the text
     * encoder computes, and goes on through the first steps if the disk is
     * slower than that: a cold start does not wait for page faults one
     * readahead window at a time. On a warm page cache it finds every
     * chunk cached and ends at once. */
    const struct fx_model *m = g->ctx->model;
    fx_prefetch *pf = m->use_mmap ? fx_prefetch_start(m->transformer_w) : NULL;
    double t0 = fx_now_s();
    flux_status st = text_embeddings(g);
    if (!st) st = denoise_and_decode(g, out);
    int64_t pf_bytes = fx_prefetch_stop(pf);
    if (pf)
        fx_log(&g->ctx->log, 2, "flux: prefetch covered %.2f GB of transformer weights (stopped after %.2f s)",
               (double)pf_bytes * 1e-9, fx_now_s() - t0);
    return st;
}

static flux_status denoise_and_decode(gen *g, flux_image **out) {
    const flux_params *p = g->p;
    fx_err *err = g->err;
    TRY(load_components(g));
    TRY(check_memory(g));
    TRY(encode_refs(g));
    flux_status st = FLUX_OK;
    const int per_run = images_per_run(g), per = g->cfg ? 2 : 1;
    const int64_t tok = g->N * g->cin, hw = (int64_t)g->height * g->width;
    g->chunks = (g->n_images + per_run - 1) / per_run;

    /* Every buffer of the generation, before the first step. */
    float *lat = malloc((size_t)(per_run * tok) * sizeof(float));
    float *noises = g->has_init ? malloc((size_t)(per_run * tok) * sizeof(float)) : NULL;
    float *xin = malloc((size_t)(per_run * per * tok) * sizeof(float));
    float *v = malloc((size_t)(per_run * per * tok) * sizeof(float));
    float *chw = malloc((size_t)tok * sizeof(float)), *z = malloc((size_t)tok * sizeof(float));
    float *pix = malloc((size_t)(3 * hw) * sizeof(float));
    if (!lat || !xin || !v || !chw || !z || !pix || (g->has_init && !noises))
        st = fx_fail(err, FLUX_ERR_NOMEM, "out of memory (latents of %d image(s))", per_run);
    for (g->chunk = 0; !st && g->chunk < g->chunks; g->chunk++) {
        int first = g->chunk * per_run, count = g->n_images - first < per_run ? g->n_images - first : per_run;
        for (int j = 0; j < count; j++) {
            float *noise = chw;
            if (p->noise) {
                memcpy(noise, p->noise, (size_t)tok * sizeof(float));
                if ((st = check_finite(g, FLUX_ERR_INVALID_ARG, noise, g->cin, g->N,
                                       "the initial noise contains a non-finite value", "channel", "token")))
                    break;
            } else {
                fx_rng_noise(&g->ctx->kc, g->seed + (uint64_t)(first + j), g->cin, g->gh, g->gw, noise);
            }
            if (first + j == 0 && (st = fx_dump_chw(p->dump_dir, "noise.npy", noise, g->cin, g->gh, g->gw, err))) break;
            float *xj = lat + j * tok;
            fx_latents_pack(noise, g->cin, g->gh, g->gw, xj, g->cin);
            if (g->has_init) { /* scale_noise(x0, t_start, noise) */
                memcpy(noises + j * tok, xj, (size_t)tok * sizeof(float));
                fx_latents_noised(g->ref_tokens[0], noises + j * tok, g->sigmas[g->first_step], tok, xj);
                if (first + j == 0) {
                    fx_latents_unpack(xj, g->cin, g->cin, g->gh, g->gw, noise);
                    if ((st = fx_dump_chw(p->dump_dir, "start_latents.npy", noise, g->cin, g->gh, g->gw, err))) break;
                }
            }
        }
        if (!st) st = denoise(g, first, count, lat, noises, xin, v);
        for (int j = 0; j < count && !st; j++) {
            double t0 = fx_now_s();
            if (!(st = progress(g, FLUX_STAGE_VAE_DECODE, first + j, g->n_images, 0, 0)))
                st = decode(g, first + j, lat + j * tok, chw, z, pix, &out[first + j]);
            fx_log(&g->ctx->log, 1, "flux: VAE decode %.2f s", fx_now_s() - t0);
        }
    }
    if (!st) st = progress(g, FLUX_STAGE_VAE_DECODE, g->n_images, g->n_images, 0, 0);
    if (!st) st = progress(g, FLUX_STAGE_DONE, 0, 0, 0, 0);
    free(lat), free(noises), free(xin), free(v), free(chw), free(z), free(pix);
    return st;
}

/* -v: where the memory went (ctx->mem, sampled at every checkpoint). */
static void log_memory(flux_ctx *ctx) {
    if (ctx->opt.verbose < 1) return;
    if (ctx->embcache) fx_mem_set(&ctx->mem, FX_MEM_CACHES, (int64_t)fx_embcache_get_stats(ctx->embcache).mem_bytes);
    fx_ctx_sample_memory(ctx);
    char line[512];
    fx_mem_describe(&ctx->mem, line, sizeof line);
    fx_log(&ctx->log, 1, "flux: memory: %s", line);
}

static flux_status generate(flux_ctx *ctx, const flux_params *p, int n_images, flux_image **out) {
    if (!ctx) return FLUX_ERR_INVALID_ARG;
    fx_err_clear(&ctx->err);
    if (!p || !out) return fx_fail(&ctx->err, FLUX_ERR_INVALID_ARG, "%s is NULL", p ? "out" : "params");
    TRY(fx_ctx_fresh_model(ctx)); /* files replaced or cut short since flux_load: load them again */
    if (!ctx->model) return fx_fail(&ctx->err, FLUX_ERR_STATE, "no model is loaded (call flux_load first)");
    gen g;
    memset(&g, 0, sizeof g);
    g.ctx = ctx;
    g.p = p;
    g.err = &ctx->err;
    ctx->progress = (fx_ctx_progress){p->progress, p->progress_user, FLUX_STAGE_LOAD, 0, 0};
    flux_status st = resolve(&g, n_images);
    if (!st) {
        for (int i = 0; i < n_images; i++) out[i] = NULL;
        double t0 = fx_now_s();
        fx_map_guard_enter(); /* weights cut short under the mapping: an error, not SIGBUS (map_guard.h) */
        st = run_all(&g, out);
        fx_map_guard_leave();
        if (!st)
            fx_log(&ctx->log, 1, "flux: %d image(s) %dx%d, %d steps: denoising %.2f s, total %.2f s", n_images, g.width,
                   g.height, g.steps, g.t_denoise, fx_now_s() - t0);
        log_memory(ctx);
        if (st)
            for (int i = 0; i < n_images; i++) {
                flux_image_free(out[i]);
                out[i] = NULL;
            }
    }
    memset(&ctx->progress, 0, sizeof ctx->progress); /* flux_encode_text alone reports nothing */
    free(g.emb_own);
    free(g.neg_own);
    for (int r = 0; r < g.n_refs; r++) free(g.ref_tokens[r]);
    free(g.mask);
    free(g.bn_mean);
    free(g.bn_var);
    free(g.sigmas);
    return st;
}

flux_status flux_generate(flux_ctx *ctx, const flux_params *p, flux_image **out) {
    return generate(ctx, p, 1, out);
}

flux_status flux_generate_batch(flux_ctx *ctx, const flux_params *p, flux_image **out) {
    return generate(ctx, p, p && p->batch > 1 ? p->batch : 1, out);
}
