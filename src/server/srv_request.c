/*
 * srv_request.c — JSON and multipart request bodies into srv_gen_request
 * (srv_request.h). Field names per API:
 *
 *   field        OpenAI               A1111                     native (/v1/jobs)
 *   prompt       prompt               prompt                    prompt
 *   negative     negative_prompt      negative_prompt           negative_prompt
 *   size         size "WxH" | "auto"  width, height             width, height
 *   steps        steps                steps                     steps
 *   seed         seed (-1 = random)   seed (-1 = random)        seed
 *   guidance     guidance             cfg_scale                 guidance
 *   images       n                    batch_size × n_iter       batch
 *   references   image (string/array) init_images (img2img)     images
 *   adapters     loras: [{"name": "NAME", "scale": 0.8}, ...] (all APIs); A1111 also
 *                <lora:NAME:WEIGHT> tags in its prompt
 *   init image   image[0] with a mask     init_images[0]            init_image
 *                or strength
 *   strength     strength (1)             denoising_strength (0.75) strength (0.8)
 *   mask         mask (alpha 0 = edit)    mask (create_binary_mask) mask (white repaints)
 *   mask rules   -                        inpainting_mask_invert,   mask_invert, mask_blur
 *                                         mask_blur(_x, _y) (4)
 *
 * Unknown fields are ignored (A1111 clients send dozens); a known field of
 * the wrong type or out of range is an error naming it, and so is an A1111
 * inpaint field asking for what is not served (a1111_img2img).
 */
#include "srv_request.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "src/base/json.h"
#include "src/base/strbuf.h"
#include "srv_base64.h"

void srv_limits_init(srv_limits *l) {
    l->max_body = (size_t)32 << 20;
    l->max_text_body = (size_t)1 << 20;
    l->max_json_values = 4096;
    l->max_json_depth = 8;
    l->max_images = 4;
    l->max_pixels = 16LL << 20;
    l->max_steps = 100;
    l->max_batch = 8;
    l->min_size = 64;
    l->max_size = 2048;
    l->max_parts = 32;
}

void srv_request_free(srv_gen_request *r) {
    free(r->prompt);
    free(r->negative);
    for (int i = 0; i < r->n_images; i++) free(r->image[i]);
    free(r->init_image);
    free(r->mask);
    memset(r, 0, sizeof *r);
}

static int refuse(srv_err *err, srv_error_kind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(srv_err *err, srv_error_kind kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->kind = kind;
    return (int)kind;
}

/* ---------------------------------------------------------------- fields */

/* Deeper than `limit` levels? (a request has 3: body, loras, one adapter) */
static int too_deep(const fx_json *v, int limit) {
    if (limit < 0) return 1;
    if (!fx_json_is_array(v) && !fx_json_is_object(v)) return 0;
    for (size_t i = 0; i < fx_json_len(v); i++)
        if (too_deep(fx_json_at(v, i), limit - 1)) return 1;
    return 0;
}

/* An integral number in lo..hi: 0 absent (or null), 1 found, else -kind. */
static int get_int(const fx_json *obj, const char *key, long long lo, long long hi, long long *out, srv_err *err) {
    const fx_json *v = fx_json_get(obj, key);
    if (fx_json_is_null(v)) return 0;
    if (!fx_json_is_int(v))
        return -refuse(err, SRV_E_BAD_REQUEST, "%s: expected an integer, found %s", key,
                       fx_json_is_number(v) ? "a fraction or a number too large" : fx_json_type_name(fx_json_typeof(v)));
    const long long n = (long long)fx_json_int(v);
    if (n < lo || n > hi) return -refuse(err, SRV_E_BAD_REQUEST, "%s: %lld is out of range (%lld..%lld)", key, n, lo, hi);
    *out = n;
    return 1;
}

static int get_num(const fx_json *obj, const char *key, double lo, double hi, double *out, srv_err *err) {
    const fx_json *v = fx_json_get(obj, key);
    if (fx_json_is_null(v)) return 0;
    if (!fx_json_is_number(v))
        return -refuse(err, SRV_E_BAD_REQUEST, "%s: expected a number, found %s", key, fx_json_type_name(fx_json_typeof(v)));
    const double x = fx_json_num(v);
    if (!(x >= lo && x <= hi)) return -refuse(err, SRV_E_BAD_REQUEST, "%s: %g is out of range (%g..%g)", key, x, lo, hi);
    *out = x;
    return 1;
}

/* A string without NUL characters: 0 absent, 1 found (*out points into the document). */
static int get_str(const fx_json *obj, const char *key, const char **out, srv_err *err) {
    const fx_json *v = fx_json_get(obj, key);
    if (fx_json_is_null(v)) return 0;
    if (!fx_json_is_string(v))
        return -refuse(err, SRV_E_BAD_REQUEST, "%s: expected a string, found %s", key, fx_json_type_name(fx_json_typeof(v)));
    if (strlen(fx_json_str(v)) != fx_json_str_len(v))
        return -refuse(err, SRV_E_BAD_REQUEST, "%s: the string contains a NUL character (\\u0000)", key);
    *out = fx_json_str(v);
    return 1;
}

static int size_side(const char *key, long long v, const srv_limits *lim, srv_err *err) {
    if (v < lim->min_size || v > lim->max_size || v % 16)
        return refuse(err, SRV_E_BAD_REQUEST, "%s: %lld is not a multiple of 16 in %d..%d", key, v, lim->min_size, lim->max_size);
    return 0;
}

/* "WxH" (OpenAI size) or "auto". */
static int parse_size(const char *s, const srv_limits *lim, srv_gen_request *r, srv_err *err) {
    if (!strcmp(s, "auto")) return 0;
    char *end;
    const long long w = strtoll(s, &end, 10);
    if (end == s || (*end != 'x' && *end != 'X') || end[1] < '0' || end[1] > '9')
        return refuse(err, SRV_E_BAD_REQUEST, "size: '%.64s' is not WIDTHxHEIGHT (e.g. 512x512) or auto", s);
    const char *hs = end + 1;
    const long long h = strtoll(hs, &end, 10);
    if (*end || s[0] < '0' || s[0] > '9')
        return refuse(err, SRV_E_BAD_REQUEST, "size: '%.64s' is not WIDTHxHEIGHT (e.g. 512x512) or auto", s);
    int rc;
    if ((rc = size_side("size (width)", w, lim, err)) || (rc = size_side("size (height)", h, lim, err))) return rc;
    r->width = (int)w;
    r->height = (int)h;
    return 0;
}

int srv_lora_name_ok(const char *name) {
    const size_t n = strlen(name);
    if (n == 0 || n >= SRV_LORA_NAME_MAX || name[0] == '.') return 0;
    for (size_t i = 0; i < n; i++) {
        const char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.' || c == ' '))
            return 0;
    }
    return 1;
}

static int parse_loras(const fx_json *body, srv_gen_request *r, srv_err *err) {
    const fx_json *v = fx_json_get(body, "loras");
    if (fx_json_is_null(v)) return 0;
    if (!fx_json_is_array(v)) return refuse(err, SRV_E_BAD_REQUEST, "loras: expected an array of {\"name\", \"scale\"} objects");
    if (fx_json_len(v) > SRV_MAX_LORAS) return refuse(err, SRV_E_BAD_REQUEST, "loras: more than %d adapters", SRV_MAX_LORAS);
    for (size_t i = 0; i < fx_json_len(v); i++) {
        const fx_json *o = fx_json_at(v, i);
        if (!fx_json_is_object(o)) return refuse(err, SRV_E_BAD_REQUEST, "loras[%zu]: expected an object {\"name\", \"scale\"}", i);
        const char *name = NULL;
        double scale = 1.0;
        int rc;
        if ((rc = get_str(o, "name", &name, err)) < 0 || (rc == 0 && !name))
            return rc < 0 ? -rc : refuse(err, SRV_E_BAD_REQUEST, "loras[%zu]: missing name", i);
        if (!srv_lora_name_ok(name))
            return refuse(err, SRV_E_BAD_REQUEST, "loras[%zu]: '%.64s' is not a LoRA name (a file name of --lora-dir without "
                                    ".safetensors: letters, digits, - _ . and spaces)", i, name);
        if ((rc = get_num(o, "scale", -100, 100, &scale, err)) < 0) return -rc;
        snprintf(r->lora_name[r->n_loras], SRV_LORA_NAME_MAX, "%s", name);
        r->lora_scale[r->n_loras++] = (float)scale;
    }
    return 0;
}

/* A1111's prompt tags <lora:NAME> and <lora:NAME:WEIGHT>: taken out of the
 * prompt (which is then trimmed) and added to the adapters after "loras". */
static int prompt_lora_tags(srv_gen_request *r, srv_err *err) {
    char *p = r->prompt;
    for (char *tag; (tag = strstr(p, "<lora:"));) {
        char *end = strchr(tag, '>');
        if (!end) break;
        char name[SRV_LORA_NAME_MAX];
        const char *body = tag + 6, *colon = memchr(body, ':', (size_t)(end - body));
        const size_t n = (size_t)((colon ? colon : end) - body);
        double scale = 1.0;
        if (colon) {
            char num[32], *stop;
            const size_t m = (size_t)(end - colon - 1);
            if (m == 0 || m >= sizeof num)
                return refuse(err, SRV_E_BAD_REQUEST, "prompt: '<lora:%.*s>': bad weight", (int)(end - body), body);
            memcpy(num, colon + 1, m);
            num[m] = '\0';
            scale = strtod(num, &stop);
            if (*stop || !(scale >= -100 && scale <= 100))
                return refuse(err, SRV_E_BAD_REQUEST, "prompt: '<lora:%.*s>': the weight is not a number in -100..100",
                              (int)(end - body), body);
        }
        if (n == 0 || n >= sizeof name) return refuse(err, SRV_E_BAD_REQUEST, "prompt: '<lora:...>' without a usable name");
        memcpy(name, body, n);
        name[n] = '\0';
        if (!srv_lora_name_ok(name))
            return refuse(err, SRV_E_BAD_REQUEST, "prompt: '<lora:%.64s>': not a LoRA name of --lora-dir", name);
        if (r->n_loras >= SRV_MAX_LORAS) return refuse(err, SRV_E_BAD_REQUEST, "prompt: more than %d adapters", SRV_MAX_LORAS);
        snprintf(r->lora_name[r->n_loras], SRV_LORA_NAME_MAX, "%s", name);
        r->lora_scale[r->n_loras++] = (float)scale;
        memmove(tag, end + 1, strlen(end + 1) + 1);
        p = tag;
    }
    size_t len = strlen(r->prompt), lead = strspn(r->prompt, " \t\n");
    while (len > lead && strchr(" \t\n", r->prompt[len - 1])) len--;
    memmove(r->prompt, r->prompt + lead, len - lead);
    r->prompt[len - lead] = '\0';
    return 0;
}

/* Reference images: a base64 string or an array of them under `key`. */
static int parse_images(const fx_json *body, const char *key, const srv_limits *lim, srv_gen_request *r,
                        srv_err *err) {
    const fx_json *v = fx_json_get(body, key);
    if (fx_json_is_null(v)) return 0;
    const size_t n = fx_json_is_array(v) ? fx_json_len(v) : 1;
    if (!fx_json_is_array(v) && !fx_json_is_string(v))
        return refuse(err, SRV_E_BAD_REQUEST, "%s: expected a base64 image or an array of them", key);
    if ((long long)n + r->n_images > lim->max_images)
        return refuse(err, SRV_E_BAD_REQUEST, "%s: %zu images; at most %d per request", key, n + (size_t)r->n_images, lim->max_images);
    for (size_t i = 0; i < n; i++) {
        const fx_json *s = fx_json_is_array(v) ? fx_json_at(v, i) : v;
        if (fx_json_is_object(s)) s = fx_json_get(s, "image_url"); /* OpenAI's JSON edits: [{"image_url": DATA_URL}] */
        if (!fx_json_is_string(s))
            return refuse(err, SRV_E_BAD_REQUEST, "%s[%zu]: expected a base64 string (or {\"image_url\": a data URL})", key, i);
        const char *why;
        size_t len;
        uint8_t *data = srv_base64_decode(fx_json_str(s), fx_json_str_len(s), &len, &why);
        if (!data) return refuse(err, SRV_E_BAD_REQUEST, "%s[%zu]: not base64: %s", key, i, why);
        r->image[r->n_images] = data;
        r->image_len[r->n_images++] = len;
    }
    return 0;
}

/* Reference images within the pixel limit (headers only; the decoder
 * reports broken files when the job is made). */
static int too_many_pixels(const srv_limits *lim, const uint8_t *data, size_t n, long long *w, long long *h) {
    /* w > max / h ⇔ w·h > max for positive sizes, without the product
     * (a header may announce 2^32 − 1 in each dimension) */
    return data && srv_image_dims(data, n, w, h) && *h > 0 && *w > lim->max_pixels / *h;
}

static int check_images(const srv_limits *lim, const srv_gen_request *r, srv_err *err) {
    long long w, h;
    for (int i = 0; i < r->n_images; i++)
        if (too_many_pixels(lim, r->image[i], r->image_len[i], &w, &h))
            return refuse(err, SRV_E_TOO_LARGE, "image %d: %lldx%lld pixels; at most %lld per image", i, w, h, lim->max_pixels);
    if (too_many_pixels(lim, r->init_image, r->init_image_len, &w, &h))
        return refuse(err, SRV_E_TOO_LARGE, "%s: %lldx%lld pixels; at most %lld per image", r->init_name, w, h, lim->max_pixels);
    if (too_many_pixels(lim, r->mask, r->mask_len, &w, &h))
        return refuse(err, SRV_E_TOO_LARGE, "mask: %lldx%lld pixels; at most %lld per image", w, h, lim->max_pixels);
    return 0;
}

static char *dup_str(const char *s, srv_err *err) {
    char *d = strdup(s);
    if (!d) refuse(err, SRV_E_NO_MEMORY, "out of memory");
    return d;
}

/* -1 = random; else 0 .. 2^63 − 1 (a JSON integer). */
static int parse_seed(const fx_json *body, srv_gen_request *r, srv_err *err) {
    long long seed;
    int rc = get_int(body, "seed", -1, INT64_MAX, &seed, err);
    if (rc < 0) return -rc;
    if (rc == 1 && seed >= 0) {
        r->seed = (uint64_t)seed;
        r->seed_given = 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- img2img and inpainting */

/* A flag sent as true/false or (A1111's int fields) 0/1: 0 absent, 1 found, else -kind. */
static int get_flag(const fx_json *obj, const char *key, int *out, srv_err *err) {
    const fx_json *v = fx_json_get(obj, key);
    if (fx_json_is_null(v)) return 0;
    if (fx_json_is_bool(v)) *out = fx_json_bool(v);
    else if (fx_json_is_int(v) && (fx_json_int(v) == 0 || fx_json_int(v) == 1)) *out = (int)fx_json_int(v);
    else return -refuse(err, SRV_E_BAD_REQUEST, "%s: expected true or false (or 0 / 1)", key);
    return 1;
}

/* One image as a base64 string (or data URL), or {"image_url": ...}: 0
 * absent (null or ""), 1 found (*out malloc'd), else -kind. */
static int get_image(const fx_json *obj, const char *key, uint8_t **out, size_t *len, srv_err *err) {
    const fx_json *v = fx_json_get(obj, key);
    if (fx_json_is_object(v)) v = fx_json_get(v, "image_url");
    if (fx_json_is_null(v) || (fx_json_is_string(v) && fx_json_str_len(v) == 0)) return 0;
    if (!fx_json_is_string(v))
        return -refuse(err, SRV_E_BAD_REQUEST, "%s: expected a base64 image (or {\"image_url\": a data URL})", key);
    const char *why;
    free(*out);
    if (!(*out = srv_base64_decode(fx_json_str(v), fx_json_str_len(v), len, &why)))
        return -refuse(err, SRV_E_BAD_REQUEST, "%s: not base64: %s", key, why);
    return 1;
}

/* AUTOMATIC1111 /sdapi/v1/img2img (modules/processing.py
 * StableDiffusionProcessingImg2Img and its API model's defaults): the first
 * of init_images is the init image; every inpaint field is honoured or
 * refused, none ignored. */
static int a1111_img2img(const fx_json *body, srv_gen_request *r, srv_err *err) {
    if (r->n_images == 0) return refuse(err, SRV_E_BAD_REQUEST, "init_images: missing (img2img needs one base64 image)");
    if (r->n_images > 1)
        return refuse(err, SRV_E_BAD_REQUEST, "init_images: %d images; one is served (A1111 pairs several with the batch)",
                      r->n_images);
    r->init_image = r->image[0];
    r->init_image_len = r->image_len[0];
    r->image[0] = NULL;
    r->n_images = 0;
    r->init_name = "init_images[0]";
    /* A1111 clients always send the size (512 default): a missing side is its default */
    if (r->width && !r->height) r->height = 512;
    if (r->height && !r->width) r->width = 512;
    double x = 0.75;
    long long n;
    int rc, flag;
    if ((rc = get_num(body, "denoising_strength", 0, 1, &x, err)) < 0) return -rc;
    r->strength = x;
    if ((rc = get_int(body, "resize_mode", 0, 3, &n, err)) < 0) return -rc;
    if (rc && n != 0)
        return refuse(err, SRV_E_BAD_REQUEST, "resize_mode: %lld (%s) is not served; 0 (just resize: Lanczos to width x height) is",
                      n, n == 1 ? "crop and resize" : n == 2 ? "resize and fill" : "latent upscale");
    if ((rc = get_num(body, "initial_noise_multiplier", 0, 1e6, &x, err)) < 0) return -rc;
    if (rc && x != 1) return refuse(err, SRV_E_BAD_REQUEST, "initial_noise_multiplier: %g is not served; only 1 (the noise as drawn)", x);
    if ((rc = get_flag(body, "include_init_images", &flag, err)) < 0) return -rc;
    if (rc && flag) return refuse(err, SRV_E_BAD_REQUEST, "include_init_images: true is not served (the answer holds the results only)");
    const char *s = NULL;
    if ((rc = get_str(body, "latent_mask", &s, err)) < 0) return -rc;
    if (rc && *s) return refuse(err, SRV_E_BAD_REQUEST, "latent_mask: a second mask for the latents is not served (mask is)");
    /* the inpaint fields: type-checked always, acted on with a mask (as A1111 does) */
    if ((rc = get_image(body, "mask", &r->mask, &r->mask_len, err)) < 0) return -rc;
    int invert = 0, fill = 0, full_res = 1, round = 1;
    double blur_x = 4, blur_y = 4, blur;
    if ((rc = get_flag(body, "inpainting_mask_invert", &invert, err)) < 0) return -rc;
    if ((rc = get_num(body, "mask_blur_x", 0, 64, &blur_x, err)) < 0) return -rc;
    if ((rc = get_num(body, "mask_blur_y", 0, 64, &blur_y, err)) < 0) return -rc;
    if ((rc = get_num(body, "mask_blur", 0, 64, &blur, err)) < 0) return -rc;
    if (rc) blur_x = blur_y = blur; /* A1111's mask_blur setter sets both */
    if ((rc = get_int(body, "inpainting_fill", 0, 3, &n, err)) < 0) return -rc;
    if (rc) fill = (int)n;
    if ((rc = get_flag(body, "inpaint_full_res", &full_res, err)) < 0) return -rc;
    if ((rc = get_flag(body, "mask_round", &round, err)) < 0) return -rc;
    if (!r->mask) return 0;
    if (fill != 1)
        return refuse(err, SRV_E_BAD_REQUEST, "inpainting_fill: %d (%s; A1111's default is 0) is not served with a mask; send 1 "
                                "(original: the init image under the mask, as diffusers' inpainting does)",
                      fill, fill == 0 ? "fill" : fill == 2 ? "latent noise" : "latent nothing");
    if (full_res)
        return refuse(err, SRV_E_BAD_REQUEST, "inpaint_full_res: true (only masked; A1111's default) is not served with a mask; "
                                "send false (whole picture)");
    if (!round) return refuse(err, SRV_E_BAD_REQUEST, "mask_round: false is not served (the mask is rounded at 128, A1111's default)");
    r->mask_source = FLUX_MASK_A1111;
    r->mask_invert = invert;
    r->mask_blur_x = blur_x;
    r->mask_blur_y = blur_y;
    return 0;
}

/* Native /v1/jobs: init_image, strength (0.8, the CLI's default), mask
 * (white repaints, as flux --mask), mask_invert, mask_blur. */
static int native_img2img(const fx_json *body, srv_gen_request *r, srv_err *err) {
    int rc;
    if ((rc = get_image(body, "init_image", &r->init_image, &r->init_image_len, err)) < 0) return -rc;
    double strength = 0.8, blur = 0;
    int has_strength, invert = 0, has_invert, has_blur;
    if ((has_strength = get_num(body, "strength", 0, 1, &strength, err)) < 0) return -has_strength;
    if ((rc = get_image(body, "mask", &r->mask, &r->mask_len, err)) < 0) return -rc;
    if ((has_invert = get_flag(body, "mask_invert", &invert, err)) < 0) return -has_invert;
    if ((has_blur = get_num(body, "mask_blur", 0, 64, &blur, err)) < 0) return -has_blur;
    const char *orphan = !r->init_image && has_strength ? "strength" : !r->init_image && r->mask ? "mask"
                         : !r->mask && has_invert ? "mask_invert" : !r->mask && has_blur ? "mask_blur" : NULL;
    if (orphan) return refuse(err, SRV_E_BAD_REQUEST, "%s: only used with %s", orphan, r->init_image ? "mask" : "init_image");
    r->init_name = "init_image";
    r->strength = strength;
    r->mask_source = FLUX_MASK_GRAY;
    r->mask_invert = invert;
    r->mask_blur_x = r->mask_blur_y = blur;
    return 0;
}

/* OpenAI: "strength" (an extension) read with the other fields; the mask
 * is taken by openai_edit once the images are known. */
static int openai_fields(const fx_json *body, srv_gen_request *r, srv_err *err) {
    double strength = 1.0;
    int rc;
    if ((rc = get_num(body, "strength", 0, 1, &strength, err)) < 0) return -rc;
    r->strength = rc ? strength : -1; /* -1: not given */
    if ((rc = get_image(body, "mask", &r->mask, &r->mask_len, err)) < 0) return -rc;
    return 0;
}

/* OpenAI images/edits with a mask (its alpha: transparent = edit) or a
 * strength: the first image is the init image, the others references. */
static int openai_edit(srv_gen_request *r, srv_err *err) {
    if (!r->mask && r->strength < 0) return 0;
    if (r->n_images == 0) return refuse(err, SRV_E_BAD_REQUEST, "%s: needs an image to edit", r->mask ? "mask" : "strength");
    r->init_image = r->image[0];
    r->init_image_len = r->image_len[0];
    memmove(r->image, r->image + 1, (size_t)(r->n_images - 1) * sizeof *r->image);
    memmove(r->image_len, r->image_len + 1, (size_t)(r->n_images - 1) * sizeof *r->image_len);
    r->image[--r->n_images] = NULL;
    r->init_name = "image[0]";
    if (r->strength < 0) r->strength = 1.0;
    r->mask_source = FLUX_MASK_TRANSPARENT;
    r->mask_same_size = 1;
    return 0;
}

static int parse_fields(srv_api api, const fx_json *body, const srv_limits *lim, srv_gen_request *r, srv_err *err) {
    const char *s = NULL;
    long long n;
    double x;
    int rc;
    if ((rc = get_str(body, "prompt", &s, err)) < 0) return -rc;
    if (!rc) return refuse(err, SRV_E_BAD_REQUEST, "prompt: missing (a string is required)");
    if (!(r->prompt = dup_str(s, err))) return (int)err->kind;
    s = NULL;
    if ((rc = get_str(body, "negative_prompt", &s, err)) < 0) return -rc;
    if (s && *s && !(r->negative = dup_str(s, err))) return (int)err->kind;

    if (api == SRV_API_OPENAI) {
        s = NULL;
        if ((rc = get_str(body, "size", &s, err)) < 0) return -rc;
        if (s && (rc = parse_size(s, lim, r, err))) return rc;
        if ((rc = get_str(body, "response_format", &s, err)) < 0) return -rc;
        if (rc && strcmp(s, "b64_json"))
            return refuse(err, SRV_E_BAD_REQUEST, "response_format: '%.32s' is not served (only b64_json: no image URLs are kept)", s);
        if ((rc = get_int(body, "n", 1, lim->max_batch, &n, err)) < 0) return -rc;
        r->batch = rc ? (int)n : 1;
        const fx_json *st = fx_json_get(body, "stream");
        if (!fx_json_is_null(st) && !(fx_json_is_bool(st) && !fx_json_bool(st)))
            return refuse(err, SRV_E_BAD_REQUEST, "stream: partial images are not streamed here (POST /v1/jobs with \"stream\": "
                                    "true gives progress events and the result)");
    } else {
        if ((rc = get_int(body, "width", 0, INT32_MAX, &n, err)) < 0) return -rc;
        if (rc) {
            if ((rc = size_side("width", n, lim, err))) return rc;
            r->width = (int)n;
        }
        if ((rc = get_int(body, "height", 0, INT32_MAX, &n, err)) < 0) return -rc;
        if (rc) {
            if ((rc = size_side("height", n, lim, err))) return rc;
            r->height = (int)n;
        }
        if (api == SRV_API_NATIVE) {
            if ((rc = get_int(body, "batch", 1, lim->max_batch, &n, err)) < 0) return -rc;
            r->batch = rc ? (int)n : 1;
            const fx_json *st = fx_json_get(body, "stream");
            if (!fx_json_is_null(st) && !fx_json_is_bool(st)) return refuse(err, SRV_E_BAD_REQUEST, "stream: expected true or false");
            r->stream = fx_json_bool(st);
        } else {
            long long bs = 1, it = 1;
            if ((rc = get_int(body, "batch_size", 1, lim->max_batch, &bs, err)) < 0) return -rc;
            if ((rc = get_int(body, "n_iter", 1, lim->max_batch, &it, err)) < 0) return -rc;
            if (bs * it > lim->max_batch)
                return refuse(err, SRV_E_BAD_REQUEST, "batch_size × n_iter: %lld images; at most %d per request", bs * it,
                              lim->max_batch);
            r->batch = (int)(bs * it);
        }
    }
    r->output_format = SRV_FMT_PNG;
    r->output_quality = 100;
    if ((rc = get_str(body, "output_format", &s, err)) < 0) return -rc;
    if (rc && !strcasecmp(s, "jpeg")) r->output_format = SRV_FMT_JPEG;
    else if (rc && !strcasecmp(s, "webp")) r->output_format = SRV_FMT_WEBP;
    else if (rc && strcasecmp(s, "png")) return refuse(err, SRV_E_BAD_REQUEST, "output_format: '%.32s': png, jpeg or webp", s);
    if ((rc = get_int(body, "output_compression", 0, 100, &n, err)) < 0) return -rc;
    if (rc) r->output_quality = n < 1 ? 1 : (int)n;
    if ((rc = get_int(body, "steps", 1, lim->max_steps, &n, err)) < 0) return -rc;
    if (rc) r->steps = (int)n;
    if ((rc = parse_seed(body, r, err))) return rc;
    if (r->seed_given && r->seed > UINT64_MAX - 1 - (uint64_t)(r->batch - 1))
        return refuse(err, SRV_E_BAD_REQUEST, "seed: %" PRIu64 " with %d images passes the largest seed", r->seed, r->batch);
    r->guidance = -1.0f;
    const char *gkey = api == SRV_API_A1111 || api == SRV_API_A1111_IMG ? "cfg_scale" : "guidance";
    if ((rc = get_num(body, gkey, 0, FLUX_GUIDANCE_MAX, &x, err)) < 0) return -rc;
    if (rc) r->guidance = (float)x;
    r->a1111 = api == SRV_API_A1111 || api == SRV_API_A1111_IMG;
    if ((rc = parse_loras(body, r, err))) return rc;
    if (r->a1111 && (rc = prompt_lora_tags(r, err))) return rc;
    const char *ikey = api == SRV_API_A1111_IMG ? "init_images" : api == SRV_API_NATIVE ? "images" : "image";
    if ((rc = parse_images(body, ikey, lim, r, err))) return rc;
    if (api == SRV_API_OPENAI && (rc = parse_images(body, "images", lim, r, err))) return rc;
    if (api == SRV_API_A1111_IMG && (rc = a1111_img2img(body, r, err))) return rc;
    if (api == SRV_API_NATIVE && (rc = native_img2img(body, r, err))) return rc;
    if (api == SRV_API_OPENAI && (rc = openai_fields(body, r, err))) return rc;
    return check_images(lim, r, err);
}

/* ---------------------------------------------------------------- bounding a body before it is parsed */

/* A DOM of a body costs far more than its bytes (a 32 MB body of "0," is
 * 16 M values): before the parser builds one, a scan that allocates nothing
 * counts the values (member names included) and the nesting, and members
 * the server never reads that hold arrays or objects (A1111 clients send
 * "override_settings", "alwayson_scripts", ...) are left out unbuilt (the
 * syntax inside them is then not checked beyond its brackets and quotes). */

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

typedef struct json_scan {
    size_t values;   /* tokens seen: containers, strings (names too), scalars */
    int depth_over;  /* a value nested deeper than the limit */
} json_scan;

/* Past the string starting at t[i] == '"': the index after its closing quote, or n. */
static size_t skip_string(const char *t, size_t n, size_t i) {
    for (i++; i < n; i++) {
        if (t[i] == '\\') i++;
        else if (t[i] == '"') return i + 1;
    }
    return n;
}

/* Past one value starting at t[i] (whitespace skipped first): counts its
 * tokens and nesting (depth = containers open around it). Returns the index
 * after it; a malformed value ends the scan early (the parser then says
 * what is wrong). */
static size_t scan_value(const char *t, size_t n, size_t i, int depth, int max_depth, json_scan *sc) {
    int open = 0;
    while (i < n && is_space(t[i])) i++;
    do {
        while (i < n && (is_space(t[i]) || t[i] == ',' || t[i] == ':')) i++;
        if (i >= n) return n;
        const char c = t[i];
        if (c == ']' || c == '}') {
            open--;
            i++;
            continue;
        }
        sc->values++;
        if (depth + open > max_depth) sc->depth_over = 1;
        if (c == '[' || c == '{') {
            open++;
            i++;
        } else if (c == '"') {
            i = skip_string(t, n, i);
        } else {
            const size_t start = i;
            while (i < n && !is_space(t[i]) && t[i] != ',' && t[i] != ']' && t[i] != '}' && t[i] != ':') i++;
            if (i == start) return n; /* a stray character */
        }
    } while (open > 0);
    return i;
}

/* Members holding an array or object that the server reads; other such
 * members are left out. */
static int container_read(const char *name, size_t n) {
    static const char *const kept[] = {"loras", "images", "init_images", "image", "mask"};
    for (size_t k = 0; k < sizeof kept / sizeof *kept; k++)
        if (strlen(kept[k]) == n && !memcmp(kept[k], name, n)) return 1;
    return 0;
}

/* The body to parse: body itself, or *pruned (malloc'd) without the unread
 * container members. 0, or the refusal's kind. */
static int bound_body(const char *body, size_t len, const srv_limits *lim, char **pruned, size_t *pruned_len,
                      srv_err *err) {
    *pruned = NULL;
    json_scan sc = {0};
    size_t i = 0;
    while (i < len && is_space(body[i])) i++;
    if (i < len && body[i] == '{') {
        fx_strbuf out = {0};
        int dropped = 0;
        sc.values = 1;
        fx_sb_str(&out, "{");
        size_t kept = 0;
        for (i++;;) {
            while (i < len && (is_space(body[i]) || body[i] == ',')) i++;
            if (i >= len || body[i] != '"') break; /* the end, or malformed: the parser tells */
            const size_t name = i, name_end = skip_string(body, len, i);
            size_t v = name_end;
            while (v < len && is_space(body[v])) v++;
            if (v >= len || body[v] != ':') break;
            v++;
            while (v < len && is_space(body[v])) v++;
            json_scan member = {0};
            const size_t end = scan_value(body, len, v, 1, lim->max_json_depth, &member);
            sc.depth_over |= member.depth_over;
            const int container = v < len && (body[v] == '[' || body[v] == '{');
            if (container && name_end >= name + 2 && !container_read(body + name + 1, name_end - name - 2)) {
                dropped = 1;
            } else {
                sc.values += 1 + member.values;
                if (kept++) fx_sb_str(&out, ",");
                fx_sb_add(&out, body + name, end - name);
            }
            i = end;
        }
        fx_sb_str(&out, "}");
        size_t tail = i < len && body[i] == '}' ? i + 1 : len + 1;
        while (tail < len && is_space(body[tail])) tail++;
        if (tail != len) dropped = 0; /* not one well-formed object: the parser reports where */
        if (dropped && sc.values <= lim->max_json_values && !sc.depth_over) {
            if (out.failed) return refuse(err, SRV_E_NO_MEMORY, "out of memory");
            *pruned = out.s;
            *pruned_len = out.len;
        } else {
            free(out.s);
        }
        if (!dropped) { /* nothing left out: count the whole body the same way */
            free(*pruned);
            *pruned = NULL;
            sc = (json_scan){0};
            scan_value(body, len, 0, 0, lim->max_json_depth, &sc);
        }
    } else {
        scan_value(body, len, 0, 0, lim->max_json_depth, &sc);
    }
    if (sc.depth_over) {
        free(*pruned);
        *pruned = NULL;
        return refuse(err, SRV_E_BAD_REQUEST, "JSON nested deeper than %d levels", lim->max_json_depth);
    }
    if (sc.values > lim->max_json_values) {
        free(*pruned);
        *pruned = NULL;
        return refuse(err, SRV_E_BAD_REQUEST, "JSON body: more than %zu values in the fields this server reads",
                      lim->max_json_values);
    }
    return 0;
}

static int parse_json(srv_api api, const char *body, size_t len, const srv_limits *lim, srv_gen_request *r,
                      srv_err *err) {
    memset(r, 0, sizeof *r);
    err->kind = SRV_OK;
    err->msg[0] = '\0';
    if (len > lim->max_body) return refuse(err, SRV_E_TOO_LARGE, "request body of %zu bytes; at most %zu", len, lim->max_body);
    char *pruned = NULL;
    size_t pruned_len = 0;
    int bounded = bound_body(body, len, lim, &pruned, &pruned_len, err);
    if (bounded) return bounded;
    fx_err jerr = {0};
    fx_json_doc *doc = fx_json_parse(pruned ? pruned : body, pruned ? pruned_len : len, &jerr);
    free(pruned);
    if (!doc) return refuse(err, jerr.code == FLUX_ERR_NOMEM ? SRV_E_NO_MEMORY : SRV_E_BAD_REQUEST, "malformed JSON: %s", jerr.msg);
    const fx_json *root = fx_json_root(doc);
    int rc;
    if (!fx_json_is_object(root))
        rc = refuse(err, SRV_E_BAD_REQUEST, "the body must be a JSON object, not %s", fx_json_type_name(fx_json_typeof(root)));
    else if (too_deep(root, lim->max_json_depth))
        rc = refuse(err, SRV_E_BAD_REQUEST, "JSON nested deeper than %d levels", lim->max_json_depth);
    else
        rc = parse_fields(api, root, lim, r, err);
    fx_json_free(doc);
    return rc;
}

int srv_parse_json(srv_api api, const char *body, size_t len, const srv_limits *lim, srv_gen_request *r,
                   srv_err *err) {
    const int rc = parse_json(api, body, len, lim, r, err);
    return rc || api != SRV_API_OPENAI ? rc : openai_edit(r, err);
}

/* ---------------------------------------------------------------- multipart */

static const char *memmem_str(const char *hay, size_t n, const char *needle, size_t m) {
    return m <= n ? memmem(hay, n, needle, m) : NULL;
}

/* The value of parameter `param` in a header line (boundary=..., name="..."),
 * quoted or not, into out. 1 found, 0 not. */
static int header_param(const char *line, size_t n, const char *param, char *out, size_t size) {
    const size_t plen = strlen(param);
    for (size_t i = 0; i + plen + 1 <= n; i++) {
        if ((i == 0 || line[i - 1] == ';' || line[i - 1] == ' ' || line[i - 1] == '\t') &&
            !strncasecmp(line + i, param, plen) && line[i + plen] == '=') {
            size_t j = i + plen + 1, k = 0;
            const int quoted = j < n && line[j] == '"';
            if (quoted) j++;
            while (j < n && (quoted ? line[j] != '"' : line[j] != ';' && line[j] != ' ' && line[j] != '\r')) {
                if (k + 1 >= size) return 0;
                out[k++] = line[j++];
            }
            out[k] = '\0';
            return 1;
        }
    }
    return 0;
}

/* A form field as a JSON member: numbers as they are, other text as a string. */
static void add_field(fx_strbuf *json, const char *name, const char *val, size_t n, int *first) {
    static const char *const numeric[] = {"n", "seed", "steps", "guidance", "strength"};
    int is_num = 0;
    for (size_t i = 0; i < sizeof numeric / sizeof *numeric; i++) is_num |= !strcmp(name, numeric[i]);
    if (is_num && n > 0 && n < 32) {
        fx_err e = {0};
        fx_json_doc *d = fx_json_parse(val, n, &e);
        is_num = d && fx_json_is_number(fx_json_root(d));
        fx_json_free(d);
    } else {
        is_num = 0;
    }
    fx_sb_printf(json, "%s\"%s\":", *first ? "" : ",", name);
    *first = 0;
    if (is_num) {
        fx_sb_add(json, val, n);
        return;
    }
    fx_sb_str(json, "\"");
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)val[i];
        if (c == '"' || c == '\\') fx_sb_printf(json, "\\%c", c);
        else if (c < 0x20) fx_sb_printf(json, "\\u%04x", c);
        else fx_sb_add(json, (const char *)&c, 1);
    }
    fx_sb_str(json, "\"");
}

int srv_parse_multipart(const char *content_type, const char *body, size_t len, const srv_limits *lim,
                        srv_gen_request *r, srv_err *err) {
    memset(r, 0, sizeof *r);
    err->kind = SRV_OK;
    if (len > lim->max_body) return refuse(err, SRV_E_TOO_LARGE, "request body of %zu bytes; at most %zu", len, lim->max_body);
    char boundary[80] = "--";
    if (!content_type || strncasecmp(content_type, "multipart/form-data", 19) ||
        !header_param(content_type, strlen(content_type), "boundary", boundary + 2, sizeof boundary - 2) ||
        !boundary[2])
        return refuse(err, SRV_E_BAD_REQUEST, "Content-Type: expected multipart/form-data with a boundary");
    const size_t blen = strlen(boundary);
    /* images collected here first: srv_parse_json resets r */
    uint8_t *images[FLUX_MAX_REFS];
    size_t image_len[FLUX_MAX_REFS];
    int n_images = 0, parts = 0, first = 1, rc = 0;
    uint8_t *mask = NULL; /* the "mask" file */
    size_t mask_len = 0;
    fx_strbuf json = {0};
    fx_sb_str(&json, "{");
    const char *p = memmem_str(body, len, boundary, blen);
    if (!p) rc = refuse(err, SRV_E_BAD_REQUEST, "multipart body: no boundary line");
    while (!rc) {
        const char *after = p + blen;
        const size_t left = len - (size_t)(after - body);
        if (left >= 2 && after[0] == '-' && after[1] == '-') break; /* closing boundary */
        if (left < 2 || after[0] != '\r' || after[1] != '\n') {
            rc = refuse(err, SRV_E_BAD_REQUEST, "multipart body: a boundary line is not followed by CRLF");
            break;
        }
        if (++parts > lim->max_parts) {
            rc = refuse(err, SRV_E_BAD_REQUEST, "multipart body: more than %d parts", lim->max_parts);
            break;
        }
        const char *head = after + 2;
        const char *head_end = memmem_str(head, len - (size_t)(head - body), "\r\n\r\n", 4);
        if (!head_end) {
            rc = refuse(err, SRV_E_BAD_REQUEST, "multipart body: part %d has no end of headers", parts);
            break;
        }
        const char *data = head_end + 4;
        char delim[84];
        snprintf(delim, sizeof delim, "\r\n%s", boundary);
        const char *next = memmem_str(data, len - (size_t)(data - body), delim, blen + 2);
        if (!next) {
            rc = refuse(err, SRV_E_BAD_REQUEST, "multipart body: part %d is not closed by the boundary", parts);
            break;
        }
        /* Content-Disposition: form-data; name="..."; filename="..." */
        char name[64] = "";
        int is_file = 0;
        for (const char *line = head; line < head_end;) {
            const char *eol = memmem_str(line, (size_t)(head_end - line) + 2, "\r\n", 2);
            const size_t ln = (size_t)(eol - line);
            if (ln > 20 && !strncasecmp(line, "content-disposition:", 20)) {
                header_param(line, ln, "name", name, sizeof name);
                char fn[256];
                is_file = header_param(line, ln, "filename", fn, sizeof fn) || is_file;
            }
            line = eol + 2;
        }
        const size_t dn = (size_t)(next - data);
        if (!strcmp(name, "image") || !strcmp(name, "image[]")) {
            if (n_images >= lim->max_images) {
                rc = refuse(err, SRV_E_BAD_REQUEST, "image: more than %d images per request", lim->max_images);
                break;
            }
            uint8_t *copy = malloc(dn ? dn : 1);
            if (!copy) {
                rc = refuse(err, SRV_E_NO_MEMORY, "out of memory");
                break;
            }
            memcpy(copy, data, dn);
            images[n_images] = copy;
            image_len[n_images++] = dn;
        } else if (!strcmp(name, "mask")) {
            free(mask);
            if (!(mask = malloc(dn ? dn : 1))) {
                rc = refuse(err, SRV_E_NO_MEMORY, "out of memory");
                break;
            }
            memcpy(mask, data, dn);
            mask_len = dn;
        } else if (name[0] && !is_file && strlen(name) < 40 && !strchr(name, '"') && !strchr(name, '\\')) {
            add_field(&json, name, data, dn, &first);
        }
        p = next + 2;
    }
    fx_sb_str(&json, "}");
    if (!rc && json.failed) rc = refuse(err, SRV_E_NO_MEMORY, "out of memory");
    if (!rc) {
        rc = parse_json(SRV_API_OPENAI, json.s, json.len, lim, r, err);
        if (!rc && mask) { /* the file part */
            free(r->mask);
            r->mask = mask;
            r->mask_len = mask_len;
            mask = NULL;
        }
        if (!rc && r->n_images + n_images > lim->max_images)
            rc = refuse(err, SRV_E_BAD_REQUEST, "image: more than %d images per request", lim->max_images);
        for (int i = 0; !rc && i < n_images; i++) { /* hand the images over */
            r->image[r->n_images] = images[i];
            r->image_len[r->n_images++] = image_len[i];
            images[i] = NULL;
        }
        if (!rc) rc = openai_edit(r, err);
        if (!rc) rc = check_images(lim, r, err);
    }
    free(mask);
    for (int i = 0; i < n_images; i++) free(images[i]);
    free(json.s);
    return rc;
}

/* ---------------------------------------------------------------- image headers */

static long long be32(const uint8_t *p) {
    return (long long)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static long long le(const uint8_t *p, int bytes) {
    long long v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* The frame size of a JPEG: its first SOFn marker segment. */
static int jpeg_dims(const uint8_t *d, size_t n, long long *w, long long *h) {
    size_t i = 2;
    while (i + 4 <= n) {
        if (d[i] != 0xFF) return 0;
        const uint8_t m = d[i + 1];
        if (m == 0xFF) { /* fill byte */
            i++;
            continue;
        }
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD8)) { /* markers without a segment */
            i += 2;
            continue;
        }
        const size_t len = (size_t)d[i + 2] << 8 | d[i + 3];
        if (len < 2) return 0;
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            if (i + 9 > n) return 0;
            *h = (long long)d[i + 5] << 8 | d[i + 6];
            *w = (long long)d[i + 7] << 8 | d[i + 8];
            return 1;
        }
        i += 2 + len;
    }
    return 0;
}

/* The canvas of a WebP: VP8 (lossy), VP8L (lossless) or VP8X (extended) first chunk. */
static int webp_dims(const uint8_t *d, size_t n, long long *w, long long *h) {
    if (n < 30) return 0;
    if (!memcmp(d + 12, "VP8 ", 4) && d[23] == 0x9d && d[24] == 0x01 && d[25] == 0x2a) {
        *w = le(d + 26, 2) & 0x3fff;
        *h = le(d + 28, 2) & 0x3fff;
        return 1;
    }
    if (!memcmp(d + 12, "VP8L", 4) && d[20] == 0x2f) {
        const long long bits = le(d + 21, 4);
        *w = (bits & 0x3fff) + 1;
        *h = (bits >> 14 & 0x3fff) + 1;
        return 1;
    }
    if (!memcmp(d + 12, "VP8X", 4)) {
        *w = le(d + 24, 3) + 1;
        *h = le(d + 27, 3) + 1;
        return 1;
    }
    return 0;
}

int srv_image_dims(const uint8_t *data, size_t n, long long *width, long long *height) {
    if (n >= 24 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8) && !memcmp(data + 12, "IHDR", 4)) {
        *width = be32(data + 16);
        *height = be32(data + 20);
        return 1;
    }
    if (n >= 4 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return jpeg_dims(data, n, width, height);
    if (n >= 16 && !memcmp(data, "RIFF", 4) && !memcmp(data + 8, "WEBP", 4)) return webp_dims(data, n, width, height);
    return 0; /* PPM: no compression, the body limit bounds its pixels */
}
