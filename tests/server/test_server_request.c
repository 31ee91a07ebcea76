/*
 * test_server_request.c — flux-server's request parsers (src/server/
 * srv_request.c, srv_base64.c, srv_json_out.c) without a network: every
 * field of each API, the limits, and refusals with their status and the
 * field named. The HTTP side is tested end to end by tests/run_server.sh.
 */
#include "tests/test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/strbuf.h"
#include "src/server/srv_access.h"
#include "src/server/srv_base64.h"
#include "src/server/srv_json_out.h"
#include "src/server/srv_request.h"
#include "src/server/srv_routes.h"

static int parse(srv_api api, const char *body, srv_gen_request *r, srv_err *err) {
    srv_limits lim;
    srv_limits_init(&lim);
    return srv_parse_json(api, body, strlen(body), &lim, r, err);
}

/* Refused with `status` and `fragment` in the message. */
static void expect_refusal(srv_api api, const char *body, int status, const char *fragment, int line) {
    srv_gen_request r;
    srv_err err;
    const int kind = parse(api, body, &r, &err);
    srv_request_free(&r);
    const int st = kind ? (int)srv_error_status((srv_error_kind)kind) : 0;
    if (st != status || kind != (int)err.kind) fx_test_fail(__FILE__, line, "%s: status %d, expected %d (%s)", body, st, status, err.msg);
    else if (!strstr(err.msg, fragment)) fx_test_fail(__FILE__, line, "%s: message '%s' lacks '%s'", body, err.msg, fragment);
}
#define REFUSED(api, body, status, fragment) expect_refusal(api, body, status, fragment, __LINE__)

TEST(server_request_openai_fields) {
    srv_gen_request r;
    srv_err err;
    REQUIRE(parse(SRV_API_OPENAI,
                  "{\"model\":\"x\",\"prompt\":\"a cat\",\"size\":\"512x256\",\"n\":3,\"seed\":7,\"steps\":5,"
                  "\"guidance\":1.5,\"negative_prompt\":\"blur\",\"response_format\":\"b64_json\",\"quality\":\"hd\"}",
                  &r, &err) == 0);
    CHECK(!strcmp(r.prompt, "a cat"));
    CHECK(r.negative && !strcmp(r.negative, "blur"));
    CHECK_EQ_INT(r.width, 512);
    CHECK_EQ_INT(r.height, 256);
    CHECK_EQ_INT(r.batch, 3);
    CHECK(r.seed_given && r.seed == 7);
    CHECK_EQ_INT(r.steps, 5);
    CHECK(r.guidance == 1.5f && !r.a1111);
    srv_request_free(&r);
    /* defaults: model size, one image, random seed, model guidance */
    REQUIRE(parse(SRV_API_OPENAI, "{\"prompt\":\"\",\"size\":\"auto\",\"seed\":-1,\"negative_prompt\":\"\"}", &r,
                  &err) == 0);
    CHECK(r.width == 0 && r.height == 0 && r.batch == 1 && !r.seed_given && r.guidance < 0 && !r.negative);
    srv_request_free(&r);
}

TEST(server_request_a1111_fields) {
    srv_gen_request r;
    srv_err err;
    REQUIRE(parse(SRV_API_A1111,
                  "{\"prompt\":\"p\",\"width\":64,\"height\":128,\"batch_size\":2,\"n_iter\":3,\"cfg_scale\":7,"
                  "\"seed\":-1,\"sampler_name\":\"Euler a\",\"override_settings\":{\"a\":[1]}}",
                  &r, &err) == 0);
    CHECK(r.width == 64 && r.height == 128 && r.batch == 6 && !r.seed_given);
    CHECK(r.guidance == 7.0f && r.a1111); /* dropped on distilled models by the job */
    srv_request_free(&r);
    REFUSED(SRV_API_A1111, "{\"prompt\":\"p\",\"batch_size\":4,\"n_iter\":3}", 400, "batch_size × n_iter");
    REFUSED(SRV_API_A1111_IMG, "{\"prompt\":\"p\"}", 400, "init_images: missing");
}

TEST(server_request_native_and_loras) {
    srv_gen_request r;
    srv_err err;
    REQUIRE(parse(SRV_API_NATIVE,
                  "{\"prompt\":\"p\",\"batch\":2,\"stream\":true,\"loras\":[{\"name\":\"my style.v2\",\"scale\":0.5},"
                  "{\"name\":\"b\"}]}",
                  &r, &err) == 0);
    CHECK(r.batch == 2 && r.stream && r.n_loras == 2);
    CHECK(!strcmp(r.lora_name[0], "my style.v2") && r.lora_scale[0] == 0.5f);
    CHECK(!strcmp(r.lora_name[1], "b") && r.lora_scale[1] == 1.0f);
    srv_request_free(&r);
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"p\",\"loras\":[{\"name\":\"../x\"}]}", 400, "not a LoRA name");
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"p\",\"loras\":[{\"name\":\".hidden\"}]}", 400, "not a LoRA name");
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"p\",\"loras\":[{\"scale\":1}]}", 400, "missing name");
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"p\",\"loras\":{\"name\":\"a\"}}", 400, "expected an array");
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"p\",\"loras\":[{\"name\":\"a\",\"scale\":1000}]}", 400, "scale");
    CHECK(srv_lora_name_ok("a-b_c.d e") && !srv_lora_name_ok("a/b") && !srv_lora_name_ok("") &&
          !srv_lora_name_ok("a\\b"));
}

TEST(server_request_refusals) {
    REFUSED(SRV_API_OPENAI, "{\"prompt\":", 400, "malformed JSON");
    REFUSED(SRV_API_OPENAI, "[]", 400, "must be a JSON object");
    REFUSED(SRV_API_OPENAI, "{}", 400, "prompt: missing");
    REFUSED(SRV_API_OPENAI, "{\"prompt\":3}", 400, "prompt: expected a string");
    REFUSED(SRV_API_OPENAI, "{\"prompt\":\"a\\u0000b\"}", 400, "NUL");
    REFUSED(SRV_API_OPENAI, "{\"prompt\":\"p\",\"size\":\"64\"}", 400, "WIDTHxHEIGHT");
    REFUSED(SRV_API_OPENAI, "{\"prompt\":\"p\",\"size\":\"-64x64\"}", 400, "WIDTHxHEIGHT");
    REFUSED(SRV_API_OPENAI, "{\"prompt\":\"p\",\"size\":\"80x4096\"}", 400, "size (height)");
    REFUSED(SRV_API_OPENAI, "{\"prompt\":\"p\",\"n\":9}", 400, "n: 9 is out of range (1..8)");
    REFUSED(SRV_API_OPENAI, "{\"prompt\":\"p\",\"n\":1.5}", 400, "n: expected an integer");
    REFUSED(SRV_API_OPENAI, "{\"prompt\":\"p\",\"response_format\":\"url\"}", 400, "only b64_json");
    REFUSED(SRV_API_A1111, "{\"prompt\":\"p\",\"width\":72}", 400, "width: 72 is not a multiple of 16");
    REFUSED(SRV_API_A1111, "{\"prompt\":\"p\",\"steps\":0}", 400, "steps");
    REFUSED(SRV_API_A1111, "{\"prompt\":\"p\",\"cfg_scale\":101}", 400, "cfg_scale");
    REFUSED(SRV_API_A1111, "{\"prompt\":\"p\",\"seed\":-2}", 400, "seed");
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"p\",\"stream\":1}", 400, "stream");
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"p\",\"x\":[[[[[[[[[]]]]]]]]]}", 400, "nested deeper than 8");
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"p\",\"images\":[\"@@@\"]}", 400, "images[0]: not base64");
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"p\",\"images\":[\"\",\"\",\"\",\"\",\"\"]}", 400, "at most 4");
    /* a PNG header announcing 5000x5000 pixels: refused before decoding */
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"p\",\"images\":[\"iVBORw0KGgoAAAANSUhEUgAAE4gAABOI\"]}", 413, "5000x5000");
    /* 4026531840² pixels: w·h overflows 64 bits (found by fuzz_server_request) */
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"p\",\"images\":[\"iVBORw0KGgoAAAANSUhEUvAAAADwAAAA\"]}", 413,
            "4026531840x4026531840");
    srv_limits lim;
    srv_limits_init(&lim);
    lim.max_body = 10;
    srv_gen_request r;
    srv_err err;
    CHECK_EQ_INT(srv_error_status((srv_error_kind)srv_parse_json(SRV_API_OPENAI, "{\"prompt\":\"long\"}", 17, &lim, &r, &err)), 413);
    srv_request_free(&r);
}

TEST(server_request_multipart) {
    srv_limits lim;
    srv_limits_init(&lim);
    const char body[] = "--XyZ\r\n"
                        "Content-Disposition: form-data; name=\"prompt\"\r\n\r\n"
                        "make it \"blue\"\r\n"
                        "--XyZ\r\n"
                        "Content-Disposition: form-data; name=\"n\"\r\n\r\n"
                        "2\r\n"
                        "--XyZ\r\n"
                        "Content-Disposition: form-data; name=\"size\"\r\n\r\n"
                        "64x64\r\n"
                        "--XyZ\r\n"
                        "Content-Disposition: form-data; name=\"image[]\"; filename=\"a.png\"\r\n"
                        "Content-Type: image/png\r\n\r\n"
                        "\x89PNG\r\n\x1a\nbinary\r\n--X\r\n"
                        "--XyZ\r\n"
                        "Content-Disposition: form-data; name=\"image\"; filename=\"b.png\"\r\n\r\n"
                        "second\r\n"
                        "--XyZ--\r\n";
    srv_gen_request r;
    srv_err err;
    REQUIRE_MSG(srv_parse_multipart("multipart/form-data; boundary=XyZ", body, sizeof body - 1, &lim, &r, &err) == 0,
                "%s", err.msg);
    CHECK(!strcmp(r.prompt, "make it \"blue\""));
    CHECK(r.batch == 2 && r.width == 64 && r.height == 64);
    REQUIRE(r.n_images == 2);
    CHECK(r.image_len[0] == 8 + 6 + 5 && !memcmp(r.image[0] + 8, "binary\r\n--X", 11));
    CHECK(r.image_len[1] == 6 && !memcmp(r.image[1], "second", 6));
    srv_request_free(&r);
    /* quoted boundary, a numeric field that is not a number: a type error naming it */
    const char bad_n[] = "--b\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\np\r\n"
                         "--b\r\nContent-Disposition: form-data; name=\"n\"\r\n\r\ntwo\r\n--b--";
    CHECK_EQ_INT((int)srv_error_status((srv_error_kind)srv_parse_multipart("multipart/form-data; boundary=\"b\"", bad_n, sizeof bad_n - 1, &lim, &r, &err)), 400);
    CHECK(strstr(err.msg, "n: expected an integer") != NULL);
    srv_request_free(&r);
    const char unclosed[] = "--b\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\np";
    CHECK_EQ_INT((int)srv_error_status((srv_error_kind)srv_parse_multipart("multipart/form-data; boundary=b", unclosed, sizeof unclosed - 1, &lim, &r, &err)),
                 400);
    srv_request_free(&r);
    CHECK_EQ_INT(srv_error_status((srv_error_kind)srv_parse_multipart("application/json", "{}", 2, &lim, &r, &err)), 400);
    srv_request_free(&r);
    /* a mask (OpenAI inpainting): the first image becomes the init image, the others stay references */
    const char mask[] = "--b\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\np\r\n"
                        "--b\r\nContent-Disposition: form-data; name=\"image[]\"; filename=\"a.png\"\r\n\r\nA\r\n"
                        "--b\r\nContent-Disposition: form-data; name=\"image[]\"; filename=\"b.png\"\r\n\r\nBB\r\n"
                        "--b\r\nContent-Disposition: form-data; name=\"mask\"; filename=\"m.png\"\r\n\r\nmmm\r\n--b--";
    REQUIRE_MSG(srv_parse_multipart("multipart/form-data; boundary=b", mask, sizeof mask - 1, &lim, &r, &err) == 0,
                "%s", err.msg);
    CHECK(r.init_image_len == 1 && r.init_image[0] == 'A' && !strcmp(r.init_name, "image[0]"));
    CHECK(r.n_images == 1 && r.image_len[0] == 2 && r.image[0][0] == 'B');
    CHECK(r.mask_len == 3 && r.mask_source == FLUX_MASK_TRANSPARENT && r.mask_same_size && r.strength == 1.0);
    srv_request_free(&r);
    const char mask_only[] = "--b\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\np\r\n"
                             "--b\r\nContent-Disposition: form-data; name=\"mask\"; filename=\"m.png\"\r\n\r\nm\r\n--b--";
    CHECK_EQ_INT((int)srv_error_status((srv_error_kind)srv_parse_multipart("multipart/form-data; boundary=b", mask_only, sizeof mask_only - 1, &lim, &r, &err)),
                 400);
    CHECK(strstr(err.msg, "mask: needs an image to edit") != NULL);
    srv_request_free(&r);
}

/* img2img and inpainting fields (issue 31): A1111's honoured or refused, the native ones, OpenAI's JSON form. */
TEST(server_request_img2img_fields) {
    srv_gen_request r;
    srv_err err;
    /* A1111 defaults: strength 0.75, blur 4 x 4; a missing side is 512; no mask: the inpaint fields are unused */
    REQUIRE_MSG(parse(SRV_API_A1111_IMG,
                      "{\"prompt\":\"p\",\"width\":64,\"init_images\":[\"aGVsbG8=\"],\"inpainting_fill\":0,"
                      "\"inpaint_full_res\":true,\"resize_mode\":0,\"mask\":\"\"}",
                      &r, &err) == 0, "%s", err.msg);
    CHECK(r.init_image_len == 5 && !memcmp(r.init_image, "hello", 5) && r.n_images == 0);
    CHECK(r.strength == 0.75 && !r.mask && r.width == 64 && r.height == 512 && r.mask_blur_x == 0);
    srv_request_free(&r);
    REQUIRE_MSG(parse(SRV_API_A1111_IMG,
                      "{\"prompt\":\"p\",\"init_images\":[\"aGVsbG8=\"],\"mask\":\"bWFzaw==\",\"inpainting_fill\":1,"
                      "\"inpaint_full_res\":false,\"denoising_strength\":0.5,\"mask_blur_x\":3,\"mask_blur_y\":7,"
                      "\"inpainting_mask_invert\":1}",
                      &r, &err) == 0, "%s", err.msg);
    CHECK(r.mask_len == 4 && r.mask_source == FLUX_MASK_A1111 && r.mask_invert == 1 && r.strength == 0.5);
    CHECK(r.mask_blur_x == 3 && r.mask_blur_y == 7 && !r.mask_same_size);
    srv_request_free(&r);
    REQUIRE(parse(SRV_API_A1111_IMG,
                  "{\"prompt\":\"p\",\"init_images\":[\"aGVsbG8=\"],\"mask\":\"bWFzaw==\",\"inpainting_fill\":1,"
                  "\"inpaint_full_res\":0,\"mask_blur\":9,\"mask_blur_x\":3}",
                  &r, &err) == 0);
    CHECK(r.mask_blur_x == 9 && r.mask_blur_y == 9); /* A1111's mask_blur sets both */
    srv_request_free(&r);
#define INPAINT "{\"prompt\":\"p\",\"init_images\":[\"aGVsbG8=\"],\"mask\":\"bWFzaw==\","
    REFUSED(SRV_API_A1111_IMG, INPAINT "\"inpaint_full_res\":false}", 400, "inpainting_fill: 0 (fill");
    REFUSED(SRV_API_A1111_IMG, INPAINT "\"inpainting_fill\":3,\"inpaint_full_res\":false}", 400,
            "inpainting_fill: 3 (latent nothing");
    REFUSED(SRV_API_A1111_IMG, INPAINT "\"inpainting_fill\":1}", 400, "inpaint_full_res: true");
    REFUSED(SRV_API_A1111_IMG, INPAINT "\"inpainting_fill\":1,\"inpaint_full_res\":false,\"mask_round\":false}", 400,
            "mask_round");
    REFUSED(SRV_API_A1111_IMG, INPAINT "\"inpainting_fill\":1,\"inpaint_full_res\":\"no\"}", 400,
            "inpaint_full_res: expected true or false");
    REFUSED(SRV_API_A1111_IMG, INPAINT "\"mask_blur\":-1}", 400, "mask_blur: -1 is out of range");
#undef INPAINT
    REFUSED(SRV_API_A1111_IMG, "{\"prompt\":\"p\",\"init_images\":[\"aGVsbG8=\"],\"resize_mode\":2}", 400,
            "resize_mode: 2 (resize and fill)");
    REFUSED(SRV_API_A1111_IMG, "{\"prompt\":\"p\",\"init_images\":[\"aGVsbG8=\"],\"denoising_strength\":1.01}", 400,
            "denoising_strength: 1.01 is out of range");
    REFUSED(SRV_API_A1111_IMG, "{\"prompt\":\"p\",\"init_images\":[\"aGVsbG8=\"],\"initial_noise_multiplier\":2}",
            400, "initial_noise_multiplier");
    REFUSED(SRV_API_A1111_IMG, "{\"prompt\":\"p\",\"init_images\":[\"aGVsbG8=\"],\"include_init_images\":true}",
            400, "include_init_images");
    REFUSED(SRV_API_A1111_IMG, "{\"prompt\":\"p\",\"init_images\":[\"aGVsbG8=\",\"aGVsbG8=\"]}", 400,
            "init_images: 2 images");
    REFUSED(SRV_API_A1111_IMG, "{\"prompt\":\"p\",\"init_images\":[\"aGVsbG8=\"],\"mask\":\"***\"}", 400,
            "mask: not base64");
    /* native: strength 0.8 by default, the gray convention; fields without their image are refused */
    REQUIRE(parse(SRV_API_NATIVE, "{\"prompt\":\"p\",\"init_image\":\"aGVsbG8=\",\"images\":[\"aGVsbG8=\"]}", &r,
                  &err) == 0);
    CHECK(r.init_image_len == 5 && r.n_images == 1 && r.strength == 0.8 && !r.mask && !strcmp(r.init_name, "init_image"));
    srv_request_free(&r);
    REQUIRE(parse(SRV_API_NATIVE,
                  "{\"prompt\":\"p\",\"init_image\":\"aGVsbG8=\",\"strength\":0.3,\"mask\":{\"image_url\":"
                  "\"data:image/png;base64,bWFzaw==\"},\"mask_invert\":true,\"mask_blur\":2.5}",
                  &r, &err) == 0);
    CHECK(r.strength == 0.3 && r.mask_len == 4 && r.mask_source == FLUX_MASK_GRAY && r.mask_invert);
    CHECK(r.mask_blur_x == 2.5 && r.mask_blur_y == 2.5);
    srv_request_free(&r);
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"p\",\"strength\":0.5}", 400, "strength: only used with init_image");
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"p\",\"mask\":\"bWFzaw==\"}", 400, "mask: only used with init_image");
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"p\",\"init_image\":\"aGVsbG8=\",\"mask_blur\":2}", 400,
            "mask_blur: only used with mask");
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"p\",\"init_image\":\"aGVsbG8=\",\"strength\":-0.1}", 400,
            "strength: -0.1 is out of range");
    /* OpenAI JSON edits: mask {image_url}; strength alone also makes the first image the init image */
    REQUIRE(parse(SRV_API_OPENAI,
                  "{\"prompt\":\"p\",\"images\":[{\"image_url\":\"aGVsbG8=\"}],\"mask\":{\"image_url\":\"bWFzaw==\"}}",
                  &r, &err) == 0);
    CHECK(r.init_image_len == 5 && r.n_images == 0 && r.strength == 1.0 && r.mask_source == FLUX_MASK_TRANSPARENT);
    srv_request_free(&r);
    REQUIRE(parse(SRV_API_OPENAI, "{\"prompt\":\"p\",\"image\":\"aGVsbG8=\",\"strength\":0.4}", &r, &err) == 0);
    CHECK(r.init_image_len == 5 && r.strength == 0.4 && !r.mask);
    srv_request_free(&r);
    REQUIRE(parse(SRV_API_OPENAI, "{\"prompt\":\"p\",\"image\":\"aGVsbG8=\"}", &r, &err) == 0);
    CHECK(!r.init_image && r.n_images == 1); /* no mask, no strength: a reference, as before */
    srv_request_free(&r);
    REFUSED(SRV_API_OPENAI, "{\"prompt\":\"p\",\"strength\":0.4}", 400, "strength: needs an image to edit");
}

TEST(server_base64_round_trip) {
    fx_test_rng rng;
    fx_test_rng_seed(&rng, 25);
    for (size_t n = 0; n < 300; n += 1 + n / 8) {
        uint8_t data[300];
        for (size_t i = 0; i < n; i++) data[i] = (uint8_t)fx_test_rng_u64(&rng);
        fx_strbuf b = {0};
        srv_base64_encode(&b, data, n);
        REQUIRE(!b.failed);
        CHECK_EQ_INT(b.len, (n + 2) / 3 * 4);
        size_t len;
        const char *why;
        uint8_t *back = srv_base64_decode(b.s ? b.s : "", b.len, &len, &why);
        CHECK_MSG(back && len == n && !memcmp(back, data, n), "n %zu: %s", n, why ? why : "differs");
        free(back);
        free(b.s);
    }
    size_t len;
    const char *why;
    uint8_t *d = srv_base64_decode("aGVs\nbG8", 8, &len, &why); /* no padding, wrapped */
    CHECK(d && len == 5 && !memcmp(d, "hello", 5));
    free(d);
    d = srv_base64_decode("data:image/png;base64,_-8=", 26, &len, &why); /* data URL, URL-safe alphabet */
    CHECK(d && len == 2 && d[0] == 0xff && d[1] == 0xef);
    free(d);
    CHECK(srv_base64_decode("a", 1, &len, &why) == NULL);
    CHECK(srv_base64_decode("aGVsbG8=x", 9, &len, &why) == NULL);
    CHECK(srv_base64_decode("aGVsbG===", 9, &len, &why) == NULL);
    CHECK(srv_base64_decode("data:text/plain,abc", 19, &len, &why) == NULL);
}

TEST(server_json_string_out) {
    fx_strbuf b = {0};
    srv_json_str(&b, "a\"b\\c\n\x01 é \xff end");
    srv_json_str(&b, NULL);
    REQUIRE(!b.failed);
    CHECK_MSG(!strcmp(b.s, "\"a\\\"b\\\\c\\n\\u0001 é \xEF\xBF\xBD end\"null"), "%s", b.s);
    free(b.s);
}

/* issue 32 D3: a body's values are counted before a document is built;
 * containers under fields the server never reads are left out unbuilt. */
TEST(server_request_json_bounded) {
    srv_limits lim;
    srv_limits_init(&lim);
    lim.max_json_values = 64;
    srv_gen_request r;
    srv_err err;
    /* 200 values under an unread field: skipped, the request stands */
    fx_strbuf b = {0};
    fx_sb_str(&b, "{\"prompt\":\"a cat\",\"override_settings\":{\"x\":[");
    for (int i = 0; i < 200; i++) fx_sb_str(&b, i ? ",0" : "0");
    fx_sb_str(&b, "]},\"steps\":3}");
    REQUIRE(!b.failed);
    CHECK_EQ_INT(srv_parse_json(SRV_API_NATIVE, b.s, b.len, &lim, &r, &err), 0);
    CHECK(r.prompt && !strcmp(r.prompt, "a cat") && r.steps == 3);
    srv_request_free(&r);
    free(b.s);
    /* ... under a field it reads: refused before parsing */
    b = (fx_strbuf){0};
    fx_sb_str(&b, "{\"prompt\":\"a cat\",\"images\":[");
    for (int i = 0; i < 200; i++) fx_sb_str(&b, i ? ",0" : "0");
    fx_sb_str(&b, "]}");
    CHECK_EQ_INT(srv_error_status((srv_error_kind)srv_parse_json(SRV_API_NATIVE, b.s, b.len, &lim, &r, &err)), 400);
    CHECK(strstr(err.msg, "more than 64 values") != NULL);
    srv_request_free(&r);
    free(b.s);
    /* a top-level array is counted too */
    b = (fx_strbuf){0};
    fx_sb_str(&b, "[");
    for (int i = 0; i < 200; i++) fx_sb_str(&b, i ? ",\"s\"" : "\"s\"");
    fx_sb_str(&b, "]");
    CHECK_EQ_INT(srv_error_status((srv_error_kind)srv_parse_json(SRV_API_NATIVE, b.s, b.len, &lim, &r, &err)), 400);
    srv_request_free(&r);
    free(b.s);
    /* nesting under an unread field still counts (depth 8) */
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"x\",\"extra\":[[[[[[[[[[1]]]]]]]]]]}", 400, "nested deeper");
    /* strings with brackets, escapes and member names that look like keys are not containers */
    CHECK_EQ_INT(parse(SRV_API_NATIVE, "{\"prompt\":\"[{\\\"images\\\":[\",\"a\":{\"b\":\"]}\"},\"seed\":5}", &r, &err), 0);
    CHECK(r.prompt && !strcmp(r.prompt, "[{\"images\":[") && r.seed_given && r.seed == 5);
    srv_request_free(&r);
    /* malformed input keeps the parser's own message */
    REFUSED(SRV_API_NATIVE, "{\"prompt\":\"x\",\"a\":[1,2", 400, "malformed JSON");
    /* OpenAI: stream and output_format are not silently ignored (D7); the JSON edit form's images */
    REFUSED(SRV_API_OPENAI, "{\"prompt\":\"x\",\"stream\":true}", 400, "stream");
    REFUSED(SRV_API_OPENAI, "{\"prompt\":\"x\",\"output_format\":\"gif\"}", 400, "output_format");
    REFUSED(SRV_API_OPENAI, "{\"prompt\":\"x\",\"output_format\":\"jpeg\",\"output_compression\":101}", 400,
            "output_compression");
    CHECK_EQ_INT(parse(SRV_API_OPENAI, "{\"prompt\":\"x\",\"output_format\":\"JPEG\",\"output_compression\":50}", &r, &err),
                 0);
    CHECK(r.output_format == SRV_FMT_JPEG && r.output_quality == 50);
    srv_request_free(&r);
    CHECK_EQ_INT(parse(SRV_API_NATIVE, "{\"prompt\":\"x\",\"output_format\":\"webp\"}", &r, &err), 0);
    CHECK(r.output_format == SRV_FMT_WEBP && r.output_quality == 100);
    srv_request_free(&r);
    CHECK_EQ_INT(parse(SRV_API_OPENAI, "{\"prompt\":\"x\",\"stream\":false,\"output_format\":\"png\"}", &r, &err), 0);
    srv_request_free(&r);
    CHECK_EQ_INT(parse(SRV_API_OPENAI, "{\"prompt\":\"x\",\"images\":[{\"image_url\":\"data:image/png;base64,aGVsbG8=\"}]}",
                       &r, &err), 0);
    CHECK(r.n_images == 1 && r.image_len[0] == 5 && !memcmp(r.image[0], "hello", 5));
    srv_request_free(&r);
}

/* issue 32 D4: Host, Origin, Content-Type and the key (Bearer or Basic). */
TEST(server_access_checks) {
    CHECK(srv_host_ok("localhost:8080", NULL) && srv_host_ok("127.0.0.1", NULL) && srv_host_ok("[::1]:80", NULL));
    CHECK(srv_host_ok("127.1.2.3:9", NULL) && srv_host_ok("LOCALHOST", NULL) && srv_host_ok(NULL, NULL));
    CHECK(!srv_host_ok("attacker.example:8080", NULL) && !srv_host_ok("127.0.0.1.evil.example", NULL));
    CHECK(!srv_host_ok("localhost.evil.example", NULL) && !srv_host_ok("127.0.0.256", NULL));
    CHECK(!srv_host_ok("localhost:80x", NULL) && !srv_host_ok("", NULL));
    CHECK(srv_host_ok("flux.example:443", "a.example, flux.example") && !srv_host_ok("b.example", "a.example"));
    const char *allowed = "x";
    CHECK_EQ_INT(srv_origin_check(NULL, "127.0.0.1:8080", NULL, &allowed), 0);
    CHECK(allowed == NULL);
    CHECK_EQ_INT(srv_origin_check("http://127.0.0.1:8080", "127.0.0.1:8080", NULL, &allowed), 0);
    CHECK_EQ_INT(srv_origin_check("https://flux.example", "flux.example", NULL, &allowed), 0);
    CHECK_EQ_INT(srv_origin_check("http://attacker.example", "127.0.0.1:8080", NULL, &allowed), -1);
    CHECK_EQ_INT(srv_origin_check("null", "127.0.0.1:8080", "*", &allowed), -1);
    CHECK_EQ_INT(srv_origin_check("https://app.example", "127.0.0.1:8080", "https://app.example", &allowed), 1);
    CHECK(allowed && !strcmp(allowed, "https://app.example"));
    CHECK_EQ_INT(srv_origin_check("https://app.example.evil", "h", "https://app.example", &allowed), -1);
    CHECK_EQ_INT(srv_origin_check("https://any.example", "h", "*", &allowed), 1);
    CHECK(srv_media_type_is("application/json", "application/json"));
    CHECK(srv_media_type_is("Application/JSON; charset=utf-8", "application/json"));
    CHECK(!srv_media_type_is("application/jsonp", "application/json") && !srv_media_type_is(NULL, "application/json"));
    CHECK(!srv_media_type_is("text/plain", "application/json"));
    CHECK(srv_key_ok(NULL, NULL) && srv_key_ok("Bearer s3cret", "s3cret") && !srv_key_ok("Bearer s3cre", "s3cret"));
    CHECK(!srv_key_ok(NULL, "s3cret") && !srv_key_ok("Bearer s3cretX", "s3cret"));
    CHECK(srv_key_ok("Basic d2VidWk6czNjcmV0", "s3cret"));  /* webui:s3cret */
    CHECK(srv_key_ok("Basic OnMzY3JldA==", "s3cret"));      /* :s3cret */
    CHECK(!srv_key_ok("Basic d2VidWk6bm9wZQ==", "s3cret")); /* webui:nope */
    CHECK(!srv_key_ok("Basic czNjcmV0", "s3cret"));         /* s3cret (no colon) */
    CHECK(!srv_key_ok("Basic ***", "s3cret"));
}

/* A1111 prompts carry adapters as <lora:NAME:WEIGHT> tags: taken out of the prompt into the adapters. */
TEST(server_request_a1111_lora_tags) {
    srv_gen_request r;
    srv_err err;
    REQUIRE(parse(SRV_API_A1111, "{\"prompt\":\" a red apple <lora:style:0.8>, <lora:b> \",\"loras\":[{\"name\":\"c\"}]}",
                  &r, &err) == 0);
    CHECK(!strcmp(r.prompt, "a red apple ,"));
    CHECK_EQ_INT(r.n_loras, 3);
    CHECK(!strcmp(r.lora_name[0], "c") && !strcmp(r.lora_name[1], "style") && !strcmp(r.lora_name[2], "b"));
    CHECK(r.lora_scale[1] == 0.8f && r.lora_scale[2] == 1.0f);
    srv_request_free(&r);
    REQUIRE(parse(SRV_API_A1111, "{\"prompt\":\"<lora:style:-1.5>a cat <lora unclosed\"}", &r, &err) == 0);
    CHECK(!strcmp(r.prompt, "a cat <lora unclosed") && r.n_loras == 1 && r.lora_scale[0] == -1.5f);
    srv_request_free(&r);
    /* other APIs keep the text as it is */
    REQUIRE(parse(SRV_API_NATIVE, "{\"prompt\":\"a <lora:style:1> cat\"}", &r, &err) == 0);
    CHECK(!strcmp(r.prompt, "a <lora:style:1> cat") && r.n_loras == 0);
    srv_request_free(&r);
    REFUSED(SRV_API_A1111, "{\"prompt\":\"<lora:../etc/passwd:1>\"}", 400, "not a LoRA name");
    REFUSED(SRV_API_A1111, "{\"prompt\":\"<lora:style:lots>\"}", 400, "weight");
    REFUSED(SRV_API_A1111, "{\"prompt\":\"<lora:style:500>\"}", 400, "weight");
    REFUSED(SRV_API_A1111, "{\"prompt\":\"<lora::1>\"}", 400, "name");
    REFUSED(SRV_API_A1111_IMG,
            "{\"prompt\":\"<lora:a> <lora:b> <lora:c> <lora:d> <lora:e> <lora:f> <lora:g> <lora:h> <lora:i>\","
            "\"init_images\":[\"aGVsbG8=\"]}",
            400, "more than 8");
}

/* Pixel sizes from image headers, before any decoding (the 16 Mpx limit): PNG, JPEG, WebP. */
TEST(server_image_dims) {
    long long w = 0, h = 0;
    /* JPEG: SOI, an APP0 segment, SOF0 with height 300, width 500 */
    static const uint8_t jpeg[] = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x11,
                                   0x08, 0x01, 0x2C, 0x01, 0xF4, 0x03, 0x01, 0x22, 0x00};
    CHECK(srv_image_dims(jpeg, sizeof jpeg, &w, &h) && w == 500 && h == 300);
    CHECK(!srv_image_dims(jpeg, 12, &w, &h)); /* cut before the SOF */
    /* WebP lossless: VP8L, signature 0x2f, 14 bits width-1 = 639, 14 bits height-1 = 479 */
    uint8_t webp[32] = {'R', 'I', 'F', 'F', 24, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'L', 10, 0, 0, 0, 0x2f};
    const uint32_t bits = 639u | 479u << 14;
    for (int i = 0; i < 4; i++) webp[21 + i] = (uint8_t)(bits >> (8 * i));
    CHECK(srv_image_dims(webp, sizeof webp, &w, &h) && w == 640 && h == 480);
    /* WebP extended: VP8X canvas 24-bit width-1, height-1 */
    uint8_t webpx[32] = {'R', 'I', 'F', 'F', 24, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'X', 10, 0, 0, 0};
    webpx[24] = 0x9F, webpx[25] = 0x86, webpx[26] = 0x01; /* 99999 */
    webpx[27] = 0x0F, webpx[28] = 0x27;                  /* 9999 */
    CHECK(srv_image_dims(webpx, sizeof webpx, &w, &h) && w == 100000 && h == 10000);
    /* PNG IHDR */
    static const uint8_t png[24] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                                    0, 0, 0x10, 0, 0, 0, 0x08, 0};
    CHECK(srv_image_dims(png, sizeof png, &w, &h) && w == 4096 && h == 2048);
    CHECK(!srv_image_dims((const uint8_t *)"P6\n2 2\n255\n", 11, &w, &h));
}

/* The route table (srv_routes.c) that both the key check and the router read (issue 32 "Layers"). */
TEST(server_routes_table) {
    /* every route is found by its own method and path ('*' as a segment) */
    for (int i = 0; i < srv_n_routes; i++) {
        char path[128];
        size_t n = 0;
        for (const char *p = srv_routes[i].path; *p && n + 6 < sizeof path; p++) {
            if (*p == '*') n += (size_t)snprintf(path + n, sizeof path - n, "job-1");
            else path[n++] = *p;
        }
        path[n] = '\0';
        const char *allow = NULL;
        const srv_route *r = srv_route_find(srv_routes[i].method, path, &allow);
        CHECK_MSG(r && r->endpoint == srv_routes[i].endpoint, "%s %s", srv_routes[i].method, path);
        CHECK_MSG(allow && strstr(allow, srv_routes[i].method), "%s %s: Allow %s", srv_routes[i].method, path,
                  allow ? allow : "(none)");
    }
    /* no key: exactly the probes and the page, whatever the method */
    static const char *const open[] = {"/", "/index.html", "/favicon.ico", "/health", "/ready"};
    int n_open = 0;
    for (int i = 0; i < srv_n_routes; i++) n_open += srv_routes[i].open;
    CHECK_EQ_INT(n_open, 5);
    for (size_t i = 0; i < sizeof open / sizeof *open; i++) CHECK_MSG(srv_path_open(open[i]), "%s", open[i]);
    static const char *const keyed[] = {"/metrics", "/v1/jobs", "/v1/jobs/job-1", "/v1/jobs/job-1/images/0",
                                        "/sdapi/v1/options", "/v1/server", "/nope", "/health/x", "/index.htm", ""};
    for (size_t i = 0; i < sizeof keyed / sizeof *keyed; i++) CHECK_MSG(!srv_path_open(keyed[i]), "%s", keyed[i]);
    /* images and forms only where they are read */
    for (int i = 0; i < srv_n_routes; i++) {
        const char *p = srv_routes[i].path;
        CHECK_MSG(srv_routes[i].images == (!strcmp(p, "/v1/images/edits") || !strcmp(p, "/sdapi/v1/img2img") ||
                                           !strcmp(p, "/v1/jobs")), "%s", p);
        CHECK_MSG(srv_routes[i].form == !strcmp(p, "/v1/images/edits"), "%s", p);
    }
    /* HEAD is GET; another method of a known path: no route but its Allow (405); unknown paths: 404 */
    const char *allow = NULL;
    CHECK(srv_route_find("HEAD", "/health", &allow) && !strcmp(allow, "GET, HEAD"));
    CHECK(!srv_route_find("POST", "/health", &allow) && allow && !strcmp(allow, "GET, HEAD"));
    CHECK(!srv_route_find("GET", "/v1/images/edits", &allow) && allow && !strcmp(allow, "POST"));
    CHECK(!srv_route_find("PUT", "/v1/jobs/job-1", &allow) && allow && !strcmp(allow, "GET, HEAD, DELETE"));
    CHECK(srv_route_find("DELETE", "/v1/jobs/job-1", NULL)->endpoint == SRV_EP_JOB);
    CHECK(!strcmp(srv_route_find("POST", "/sdapi/v1/options", &allow)->method, "POST") &&
          !strcmp(allow, "GET, HEAD, POST"));
    static const char *const none[] = {"/v1/jobs/", "/v1/jobs/a/b", "/v1/jobs/a/images/", "/v1/jobs//result",
                                       "/nope", "/v1/models/", "//health"};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++)
        CHECK_MSG(!srv_route_find("GET", none[i], &allow) && !allow, "%s", none[i]);
    CHECK(srv_route_find("GET", "/sdapi/v1/sd-vae", NULL)->text != NULL);
}

/* Error kinds to HTTP statuses: the one place (srv_error.c), and the OpenAI error types. */
TEST(server_error_statuses) {
    static const struct {
        srv_error_kind kind;
        unsigned status;
        const char *type;
    } want[] = {{SRV_E_BAD_REQUEST, 400, "invalid_request_error"}, {SRV_E_TOO_LARGE, 413, "invalid_request_error"},
                {SRV_E_NOT_FOUND, 404, "not_found_error"},        {SRV_E_CONFLICT, 409, "invalid_request_error"},
                {SRV_E_BUSY, 429, "rate_limit_error"},            {SRV_E_UNAVAILABLE, 503, "unavailable_error"},
                {SRV_E_NO_MEMORY, 500, "server_error"},           {SRV_E_ENGINE, 500, "server_error"},
                {SRV_E_UNAUTHORIZED, 401, "authentication_error"}, {SRV_E_FORBIDDEN, 403, "permission_error"},
                {SRV_E_METHOD, 405, "invalid_request_error"},     {SRV_E_MEDIA_TYPE, 415, "invalid_request_error"},
                {SRV_E_CLIENT_GONE, 499, "invalid_request_error"}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        CHECK_EQ_INT((int)srv_error_status(want[i].kind), (int)want[i].status);
        CHECK_MSG(!strcmp(srv_error_type(want[i].kind), want[i].type), "%u: %s", want[i].status,
                  srv_error_type(want[i].kind));
    }
    CHECK_EQ_INT((int)srv_error_status(SRV_OK), 200);
}
