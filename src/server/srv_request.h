/*
 * srv_request.h — flux-server's request parsers: the JSON bodies of the
 * OpenAI, AUTOMATIC1111 and native APIs and the multipart form of
 * /v1/images/edits, all into one generation request (srv_gen_request).
 *
 * The parsers only read memory (no model, no network): the fuzz target
 * tests/fuzz/fuzz_server_request.c runs them on arbitrary bytes. Every
 * refusal is an error kind (bad request, too large: srv_error.h) with one
 * line naming the field ("steps: 5000 is out of range (1..100)").
 */
#ifndef FX_SRV_REQUEST_H
#define FX_SRV_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "flux.h"
#include "srv_codecs.h"
#include "srv_error.h"

#define SRV_MAX_LORAS 8
#define SRV_LORA_NAME_MAX 128

/* What a request may ask for (server options; the defaults in parentheses). */
typedef struct srv_limits {
    size_t max_body;         /* request body bytes where images are taken (--max-body-mb, 32 MiB) */
    size_t max_text_body;    /* request body bytes of the other endpoints (1 MiB) */
    size_t max_json_values;  /* values (and member names) a JSON body may hold (4096) */
    int max_json_depth;      /* nesting of a JSON body (8) */
    int max_images;          /* reference images per request (4, at most FLUX_MAX_REFS) */
    long long max_pixels;    /* pixels of one reference image (16 Mpx) */
    int max_steps;           /* (--max-steps, 100) */
    int max_batch;           /* images per request (--max-batch, 8) */
    int min_size, max_size;  /* output sides, multiples of 16 (64..2048) */
    int max_parts;           /* parts of a multipart form (32) */
} srv_limits;

void srv_limits_init(srv_limits *l);

/* The API a body belongs to: field names and defaults differ. */
typedef enum srv_api {
    SRV_API_OPENAI,      /* /v1/images/generations, /v1/images/edits */
    SRV_API_A1111,       /* /sdapi/v1/txt2img */
    SRV_API_A1111_IMG,   /* /sdapi/v1/img2img (init_images) */
    SRV_API_NATIVE       /* /v1/jobs */
} srv_api;

typedef struct srv_gen_request {
    char *prompt;               /* malloc'd UTF-8, never NULL after a parse */
    char *negative;             /* malloc'd, NULL when absent or "" */
    int width, height;          /* 0 = the model's default (256 or the first reference) */
    int steps;                  /* 0 = model default */
    int batch;                  /* ≥ 1 */
    uint64_t seed;              /* valid when seed_given */
    int seed_given;
    float guidance;             /* < 0 = model default */
    int a1111;                  /* an A1111 body: on a distilled model its cfg_scale and
                                   negative_prompt are dropped (srv_job_new), as its clients
                                   always send them */
    int n_loras;
    char lora_name[SRV_MAX_LORAS][SRV_LORA_NAME_MAX]; /* names in --lora-dir, checked by srv_lora_name_ok */
    float lora_scale[SRV_MAX_LORAS];
    int n_images;               /* encoded reference images (PNG / PPM bytes) */
    uint8_t *image[FLUX_MAX_REFS];
    size_t image_len[FLUX_MAX_REFS];
    /* img2img and inpainting (README "img2img and inpainting"; field names per API in srv_request.c) */
    uint8_t *init_image;        /* the encoded source image, NULL = text-to-image (or references only) */
    size_t init_image_len;
    const char *init_name;      /* the field it came from, written as the PNG's init_image text as
                                   `flux --init-img NAME` writes its file name ("init_images[0]", ...) */
    double strength;            /* valid with init_image */
    uint8_t *mask;              /* the encoded mask, NULL = plain img2img */
    size_t mask_len;
    int mask_source;            /* flux_mask_source: how the mask marks the area to repaint */
    int mask_invert;
    double mask_blur_x, mask_blur_y;
    int mask_same_size;         /* OpenAI: the mask must be the init image's size */
    int stream;                 /* "stream": true (native API: progress as SSE) */
    srv_image_format output_format; /* "output_format": png (SRV_FMT_PNG, the default), jpeg, webp */
    int output_quality;         /* "output_compression" 0..100 (default 100; WebP 100 = lossless) */
} srv_gen_request;

/* What was wrong with a refused request (its HTTP status: srv_error_status) and a one-line message. */
typedef struct srv_err {
    srv_error_kind kind;
    char msg[512];
} srv_err;

void srv_request_free(srv_gen_request *r);

/* Parse a JSON body of `api`. Returns 0, or the error kind (also in
 * err->kind) with err->msg. r is filled on success and must be freed
 * with srv_request_free either way. */
int srv_parse_json(srv_api api, const char *body, size_t len, const srv_limits *lim, srv_gen_request *r,
                   srv_err *err);

/* Parse a multipart/form-data body (OpenAI /v1/images/edits: fields
 * prompt, n, size, response_format, model and the extensions of
 * srv_parse_json; files image / image[]). content_type is the request's
 * Content-Type header (it carries the boundary). Same returns. */
int srv_parse_multipart(const char *content_type, const char *body, size_t len, const srv_limits *lim,
                        srv_gen_request *r, srv_err *err);

/* 1 when name can be a LoRA of --lora-dir: 1..127 characters of letters,
 * digits, '-', '_', '.', ' ', not starting with '.' (no paths). */
int srv_lora_name_ok(const char *name);

/* The pixel size of a PNG (IHDR), JPEG (SOF) or WebP (VP8, VP8L, VP8X)
 * image from its header, without decoding; 0 when it cannot tell (the
 * decoder then reports the error). */
int srv_image_dims(const uint8_t *data, size_t n, long long *width, long long *height);

#endif
