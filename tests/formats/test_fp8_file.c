/*
 * test_fp8_file.c — fp8 weights in safetensors files (README "fp8
 * checkpoints"): the scale conventions read beside the weight, the
 * mismatches refused by name, the weight used in place.
 *
 * Files are small, written with fx_safetensors_write: a linear 'l.weight' [2, 4] in
 * fp8 with its scale under the name a case gives.
 */
#include "tests/test.h"

#include <string.h>

#include "src/formats/safetensors_write.h"
#include "src/model/model.h"

/* E4M3 bytes of 1, 2, -0.5, 448 and 0 (bias 7: 1 = 0x38, 2 = 0x40,
 * 0.5 = 0x30, 448 = 0x7E). */
static const uint8_t w_bytes[8] = {0x38, 0x40, 0xB0, 0x7E, 0x00, 0x38, 0x38, 0x40};
static const float w_values[8] = {1, 2, -0.5f, 448, 0, 1, 1, 2};

typedef struct scale_case {
    const char *scale_name;  /* NULL: no scale tensor */
    fx_dtype scale_dtype;
    fx_shape scale_shape;
    float scale[4];
    const char *weight_name; /* of the fp8 tensor */
    fx_dtype weight_dtype;
    const char *extra;       /* another scale tensor's name, or NULL */
} scale_case;

/* The case's file opened as a set; NULL after recording a failure. */
static fx_wset *open_case(const char *file, const scale_case *c) {
    fx_safetensors_out t[3];
    size_t n = 0;
    static const uint16_t bf16[8] = {0x3f80, 0x4000, 0xbf00, 0x43e0, 0, 0x3f80, 0x3f80, 0x4000};
    t[n++] = (fx_safetensors_out){c->weight_name, c->weight_dtype, FX_SHAPE(2, 4),
                         c->weight_dtype == FX_DTYPE_BF16 ? (const void *)bf16 : (const void *)w_bytes};
    if (c->scale_name) t[n++] = (fx_safetensors_out){c->scale_name, c->scale_dtype, c->scale_shape, c->scale};
    if (c->extra) t[n++] = (fx_safetensors_out){c->extra, FX_DTYPE_F32, FX_SHAPE0, c->scale};
    fx_err err = {0};
    const char *path = fx_test_tmp_path(file);
    if (fx_safetensors_write(path, t, n, NULL, 0, &err)) {
        fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return NULL;
    }
    fx_wset *s = fx_wset_open(path, file, 1, &err);
    if (!s) fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
    return s;
}

/* Both ComfyUI conventions and none: the weight's scale, its values through
 * the f32 reader, the weight used in place (mapped, not copied). */
TEST(fp8_file_scale_conventions) {
    static const struct {
        const char *scale_name;
        float want;
    } cases[] = {{"l.weight_scale", 0.25f}, {"l.scale_weight", 0.25f}, {NULL, 1.0f}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        scale_case c = {cases[i].scale_name, FX_DTYPE_F32, FX_SHAPE0, {0.25f}, "l.weight", FX_DTYPE_F8_E4M3, NULL};
        if (i == 1) c.extra = "l.scale_input"; /* legacy: its input scale rides along, ignored */
        fx_wset *s = open_case("fp8.safetensors", &c);
        REQUIRE(s);
        fx_err err = {0};
        fx_weight w;
        CHECK_MSG(fx_wset_check_quant(s, &err) == FLUX_OK, "%s", err.msg);
        REQUIRE(fx_wset_linear(s, "l.weight", 2, 4, &w, &err) == FLUX_OK);
        CHECK(w.dtype == FX_DTYPE_F8_E4M3);
        CHECK_MSG(w.scale == cases[i].want, "scale %g, want %g", (double)w.scale, (double)cases[i].want);
        CHECK(fx_wset_weight_mapped(s, &w)); /* in place: the file's pages */
        CHECK(w.data == fx_tensor_data(fx_wset_find(s, "l.weight")));
        float v[8];
        REQUIRE(fx_wset_read_f32(s, "l.weight", NULL, v, &err) == FLUX_OK);
        for (int j = 0; j < 8; j++) CHECK(v[j] == w_values[j] * cases[i].want);
        fx_wset_close(s);
    }
}

/* Each mismatch fails at the check made at load (fx_wset_check_quant,
 * before anything prints "loaded"), naming the tensor and what is wrong. */
TEST(fp8_file_refusals) {
    static const struct {
        scale_case c;
        flux_status code;
        const char *msg;
    } cases[] = {
        {{"m.weight_scale", FX_DTYPE_F32, FX_SHAPE0, {1}, "l.weight", FX_DTYPE_F8_E4M3, NULL}, FLUX_ERR_MODEL,
         "scale 'm.weight_scale' has no weight 'm.weight'"},
        {{"l.weight_scale", FX_DTYPE_F32, FX_SHAPE0, {1}, "l.weight", FX_DTYPE_U8, NULL}, FLUX_ERR_UNSUPPORTED,
         "belongs to 'l.weight' of dtype U8; flux.c reads scales of fp8"},
        {{"l.weight_scale", FX_DTYPE_F32, FX_SHAPE(3), {1, 2, 3}, "l.weight", FX_DTYPE_F8_E4M3, NULL},
         FLUX_ERR_UNSUPPORTED, "scale 'l.weight_scale' has shape [3]; fp8 weight 'l.weight' [2, 4] takes one scale"},
        {{"l.weight_scale", FX_DTYPE_F32, FX_SHAPE(2, 2), {1, 2, 3, 4}, "l.weight", FX_DTYPE_F8_E4M3, NULL},
         FLUX_ERR_UNSUPPORTED, "one per output row ([n] or [n, 1]) or square block scales"},
        {{"l.weight_scale_inv", FX_DTYPE_F32, FX_SHAPE(3, 1), {1, 2, 3}, "l.weight", FX_DTYPE_F8_E4M3, NULL},
         FLUX_ERR_UNSUPPORTED, "scale 'l.weight_scale_inv' has shape [3, 1]; fp8 weight 'l.weight' [2, 4] takes one"},
        {{"l.weight_scale", FX_DTYPE_F32, FX_SHAPE0, {0}, "l.weight", FX_DTYPE_F8_E4M3, NULL}, FLUX_ERR_MODEL,
         "scale 'l.weight_scale' is 0; per-tensor scales must be finite and nonzero"},
        {{"l.weight_scale", FX_DTYPE_F32, FX_SHAPE0, {INFINITY}, "l.weight", FX_DTYPE_F8_E4M3, NULL}, FLUX_ERR_MODEL,
         "must be finite and nonzero"},
        {{"l.weight_scale", FX_DTYPE_F32, FX_SHAPE(2, 1), {1, NAN}, "l.weight", FX_DTYPE_F8_E4M3, NULL},
         FLUX_ERR_MODEL, "scale 'l.weight_scale' is nan at one element; per-row scales must be finite"},
        {{"l.weight_scale", FX_DTYPE_I32, FX_SHAPE0, {1}, "l.weight", FX_DTYPE_F8_E4M3, NULL}, FLUX_ERR_MODEL,
         "has dtype I32, expected F32"},
        {{"l.weight_scale", FX_DTYPE_F32, FX_SHAPE0, {1}, "l.weight", FX_DTYPE_F8_E4M3, "l.scale_weight"},
         FLUX_ERR_MODEL, "fp8 tensor 'l.weight' has 2 scales"},
        {{"l.weight_scale", FX_DTYPE_F8_E8M0, FX_SHAPE(1, 1), {0}, "l.weight", FX_DTYPE_F8_E4M3, NULL},
         FLUX_ERR_UNSUPPORTED, "MXFP8 is F8_E4M3 [n, k] with k a multiple of 32"},
        {{NULL, FX_DTYPE_F32, FX_SHAPE0, {1}, "l.weight", FX_DTYPE_F8_E8M0, NULL}, FLUX_ERR_UNSUPPORTED,
         "tensor 'l.weight' is F8_E8M0 (MX block scales) but not the '.weight_scale' of an F8_E4M3 weight"},
        /* formats flux.c does not read, by their tensor names */
        {{"l.weight_scale_2", FX_DTYPE_F32, FX_SHAPE0, {1}, "l.weight", FX_DTYPE_U8, NULL}, FLUX_ERR_UNSUPPORTED,
         "belongs to 'l.weight' of dtype U8; flux.c reads scales of fp8 (F8_E4M3, F8_E5M2), int8 (I8) and NVFP4 (U8 "
         "with F8_E4M3 '.weight_scale' and F32 '.weight_scale_2')"},
        {{"l.weight_scale", FX_DTYPE_F8_E4M3, FX_SHAPE(2, 1), {0}, "l.weight", FX_DTYPE_U8, NULL}, FLUX_ERR_UNSUPPORTED,
         "and NVFP4 (U8 with F8_E4M3 '.weight_scale' and F32 '.weight_scale_2') weights only"},
        {{"l.qzeros", FX_DTYPE_I32, FX_SHAPE0, {0}, "l.qweight", FX_DTYPE_I8, NULL}, FLUX_ERR_UNSUPPORTED,
         "belongs to the GPTQ / AWQ"},
        {{"l.smooth_factor", FX_DTYPE_BF16, FX_SHAPE(2), {0}, "l.weight", FX_DTYPE_BF16, NULL}, FLUX_ERR_UNSUPPORTED,
         "belongs to the SVDQuant / Nunchaku"},
        {{"l.weight.quant_state.bitsandbytes__nf4", FX_DTYPE_U8, FX_SHAPE(2), {0}, "l.weight", FX_DTYPE_U8, NULL},
         FLUX_ERR_UNSUPPORTED, "belongs to the bitsandbytes NF4"},
        {{"l.weight.absmax", FX_DTYPE_F32, FX_SHAPE(2), {1, 1}, "l.weight", FX_DTYPE_U8, NULL}, FLUX_ERR_UNSUPPORTED,
         "belongs to the bitsandbytes NF4/FP4"},
        {{"l.SCB", FX_DTYPE_F32, FX_SHAPE(2), {1, 1}, "l.weight", FX_DTYPE_I8, NULL}, FLUX_ERR_UNSUPPORTED,
         "bitsandbytes LLM.int8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fx_wset *s = open_case("bad.safetensors", &cases[i].c);
        REQUIRE(s);
        fx_err err = {0};
        flux_status st = fx_wset_check_quant(s, &err);
        CHECK_MSG(st == cases[i].code, "case %zu: status %d, want %d (%s)", i, (int)st, (int)cases[i].code, err.msg);
        CHECK_MSG(strstr(err.msg, cases[i].msg) != NULL, "case %zu: '%s' lacks '%s'", i, err.msg, cases[i].msg);
        fx_wset_close(s);
    }
}

/* The layouts read beside an fp8 weight [2, 4]: per output row ([2] and
 * [2, 1], F32 / BF16), 128x128 blocks (one block here, 'weight_scale_inv'),
 * a stray scale beside a BF16 weight (ignored: the weight as stored); each
 * weight's values through the f32 reader and through the expansion rule
 * (fx_weight_values) equal code·scale. */
TEST(fp8_file_side_scales) {
    static const struct {
        scale_case c;
        float row_scale[2];
    } cases[] = {
        {{"l.weight_scale", FX_DTYPE_F32, FX_SHAPE(2), {0.5f, 3.0f}, "l.weight", FX_DTYPE_F8_E4M3, NULL}, {0.5f, 3.0f}},
        {{"l.weight_scale", FX_DTYPE_F32, FX_SHAPE(2, 1), {0.25f, 0.0f}, "l.weight", FX_DTYPE_F8_E4M3, NULL},
         {0.25f, 0.0f}},
        {{"l.weight_scale_inv", FX_DTYPE_F32, FX_SHAPE(1, 1), {0.125f}, "l.weight", FX_DTYPE_F8_E4M3, NULL},
         {0.125f, 0.125f}},
        {{"l.weight_scale", FX_DTYPE_F32, FX_SHAPE0, {7.0f}, "l.weight", FX_DTYPE_BF16, NULL}, {1.0f, 1.0f}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fx_wset *s = open_case("side.safetensors", &cases[i].c);
        REQUIRE(s);
        fx_err err = {0};
        CHECK_MSG(fx_wset_check_quant(s, &err) == FLUX_OK, "case %zu: %s", i, err.msg);
        fx_weight w;
        REQUIRE(fx_wset_linear(s, "l.weight", 2, 4, &w, &err) == FLUX_OK);
        float v[8], e[8];
        REQUIRE(fx_wset_read_f32(s, "l.weight", NULL, v, &err) == FLUX_OK);
        fx_tensor_convert_f32(w.data, w.dtype, 8, e);
        for (int r = 0; r < 2; r++) fx_weight_values(&w, r, 0, 4, e + 4 * r);
        for (int j = 0; j < 8; j++) {
            const float want = w_values[j] * cases[i].row_scale[j / 4];
            CHECK_MSG(v[j] == want && e[j] == want, "case %zu element %d: %g / %g, want %g", i, j, (double)v[j],
                      (double)e[j], (double)want);
        }
        fx_weight half = fx_weight_rows(&w, 1, 1); /* a row slice keeps its place in the scales */
        fx_tensor_convert_f32(half.data, half.dtype, 4, e);
        fx_weight_values(&half, 0, 0, 4, e);
        for (int j = 0; j < 4; j++) CHECK(e[j] == w_values[4 + j] * cases[i].row_scale[1]);
        fx_wset_close(s);
    }
}

/* The companions are recognised by name (and nothing else is). */
TEST(fp8_file_companions) {
    static const char *const yes[] = {"a.weight_scale", "a.scale_weight", "a.input_scale", "a.scale_input",
                                      "a.comfy_quant", "scaled_fp8", "model.diffusion_model.scaled_fp8"};
    static const char *const no[] = {"a.weight", "a.scale", "unscaled_fp8", "weight_scale", "a.scaled_fp8x"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) CHECK_MSG(fx_wset_fp8_companion(yes[i]), "%s", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) CHECK_MSG(!fx_wset_fp8_companion(no[i]), "%s", no[i]);
}

/* fp8 where no linear layer reads it is refused by name: the VAE's
 * tensors. (The text encoder's embedding table is decoded row by row.) */
TEST(fp8_file_refused_outside_linear_layers) {
    static const struct {
        const char *name;
        int vae;
        const char *msg;
    } cases[] = {{"decoder.conv_in.weight", 1, "tensor 'decoder.conv_in.weight' is F8_E4M3; fp8 is read for linear "
                                               "layers only, not for the VAE"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        scale_case c = {NULL, FX_DTYPE_F32, FX_SHAPE0, {1}, cases[i].name, FX_DTYPE_F8_E4M3, NULL};
        fx_wset *s = open_case("part.safetensors", &c);
        REQUIRE(s);
        fx_err err = {0};
        fx_vae_config vc = {0};
        fx_qwen3_config qc = {0};
        flux_status st = cases[i].vae ? fx_check_vae_weights(s, &vc, &err) : fx_check_qwen3_weights(s, &qc, &err);
        CHECK_MSG(st == FLUX_ERR_UNSUPPORTED, "case %zu: status %d (%s)", i, (int)st, err.msg);
        CHECK_MSG(strstr(err.msg, cases[i].msg) != NULL, "case %zu: '%s' lacks '%s'", i, err.msg, cases[i].msg);
        fx_wset_close(s);
    }
}
