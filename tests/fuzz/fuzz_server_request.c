/*
 * fuzz_server_request.c — libFuzzer target for flux-server's request
 * parsers: the JSON bodies of each API, the multipart form of
 * /v1/images/edits, base64, the JSON string writer, and the header checks
 * of srv_access.c (Host, Origin, Content-Type, Authorization).
 *
 * The first byte picks the parser (and the multipart boundary); the rest is
 * the body. Nothing may crash or leak, a refusal must carry a kind of 4xx/5xx status
 * and a message, and an accepted request must satisfy the limits.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/server/srv_access.h"
#include "src/server/srv_base64.h"
#include "src/server/srv_json_out.h"
#include "src/server/srv_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond) {
    if (!cond) abort();
}

static void check_accepted(const srv_gen_request *r, const srv_limits *lim) {
    check(r->prompt != NULL);
    check(r->batch >= 1 && r->batch <= lim->max_batch);
    check(r->steps >= 0 && r->steps <= lim->max_steps);
    check(r->width == 0 || (r->width % 16 == 0 && r->width >= lim->min_size && r->width <= lim->max_size));
    check(r->height == 0 || (r->height % 16 == 0 && r->height >= lim->min_size && r->height <= lim->max_size));
    check(r->n_images >= 0 && r->n_images <= lim->max_images);
    check(r->n_loras >= 0 && r->n_loras <= SRV_MAX_LORAS);
    for (int i = 0; i < r->n_loras; i++) check(srv_lora_name_ok(r->lora_name[i]));
    for (int i = 0; i < r->n_images; i++) check(r->image[i] != NULL);
    check(!r->mask || r->init_image); /* a mask only with its init image */
    check(!r->init_image || (r->strength >= 0 && r->strength <= 1 && r->init_name));
    check(r->mask_blur_x >= 0 && r->mask_blur_x <= 64 && r->mask_blur_y >= 0 && r->mask_blur_y <= 64);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const unsigned sel = data[0];
    const char *body = (const char *)data + 1;
    const size_t n = size - 1;
    srv_limits lim;
    srv_limits_init(&lim);
    lim.max_body = 1 << 20;
    srv_gen_request r;
    srv_err err;
    int st;
    if (sel % 5 < 4) {
        st = srv_parse_json((srv_api)(sel % 5), body, n, &lim, &r, &err);
    } else {
        static const char *const types[] = {"multipart/form-data; boundary=B", "multipart/form-data; boundary=\"--\"",
                                            "multipart/form-data; BOUNDARY=x;charset=utf-8", "multipart/form-data"};
        st = srv_parse_multipart(types[(sel / 5) % 4], body, n, &lim, &r, &err);
    }
    if (st) check(st == (int)err.kind && srv_error_status(err.kind) >= 400 && srv_error_status(err.kind) < 600 && err.msg[0]);
    else check_accepted(&r, &lim);
    srv_request_free(&r);

    size_t len;
    const char *why;
    uint8_t *dec = srv_base64_decode(body, n, &len, &why);
    check(dec != NULL || why != NULL);
    if (dec) { /* encode → decode gives the bytes back */
        fx_strbuf b = {0};
        srv_base64_encode(&b, dec, len);
        size_t len2;
        uint8_t *again = srv_base64_decode(b.s ? b.s : "", b.len, &len2, &why);
        check(again && len2 == len && !memcmp(again, dec, len));
        free(again);
        free(b.s);
        free(dec);
    }
    char *text = malloc(n + 1);
    if (text) {
        memcpy(text, body, n);
        text[n] = '\0';
        fx_strbuf b = {0};
        srv_json_str(&b, text);
        check(b.failed || (b.len >= 2 && b.s[0] == '"' && b.s[b.len - 1] == '"'));
        free(b.s);
        /* the body as header values: answers are 0/1 (-1 for a refused Origin), an allowed Origin is echoed */
        const char *allowed = NULL;
        check(srv_host_ok(text, sel & 1 ? "a.example,*" : NULL) <= 1);
        const int o = srv_origin_check(text, "127.0.0.1:8080", sel & 2 ? "*" : "https://a.example", &allowed);
        check(o >= -1 && o <= 1 && (o == 1) == (allowed == text));
        check(srv_media_type_is(text, "application/json") <= 1);
        check(srv_key_ok(text, "s3cret") <= 1 && srv_key_ok(text, NULL) == 1);
        free(text);
    }
    return 0;
}
