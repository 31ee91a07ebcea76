/*
 * test_vae_file.c — single-file VAEs (--vae, flux_load_options.vae_file):
 * BFL / LDM names mapped onto the diffusers ones, configs from the shapes,
 * a decoder narrower than the encoder (FLUX.2-small-decoder).
 *
 * Files: tests/golden/vae_files, written by tools/gen_vae_files.py (NumPy,
 * independent of flux.c): the golden VAE renamed to BFL names (with the
 * LDM "first_stage_model." prefix), and a small-decoder VAE with a NumPy
 * float64 decode of one latent.
 * Tolerance of the small decoder against NumPy (f32 mode): 1e-4 of the
 * largest value (the project's f32 VAE tolerance, test_vae.c).
 */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>

#include "src/base/npy.h"
#include "src/formats/vae_file.h"
#include "src/model/ctx.h"
#include "src/model/model.h"
#include "src/vae/vae.h"

static flux_ctx *ctx_f32(void) {
    flux_options o;
    flux_options_init(&o);
    o.threads = 1;
    o.precision = FLUX_PRECISION_F32;
    return flux_new(&o);
}

/* The golden folder with its VAE replaced by `vae_rel` (NULL: the folder's). */
static flux_ctx *load_with_vae(const char *vae_rel) {
    flux_ctx *ctx = ctx_f32();
    flux_load_options lo;
    flux_load_options_init(&lo);
    char *vae = vae_rel ? strdup(fx_test_path(vae_rel)) : NULL; /* fx_test_path's buffer is reused */
    lo.vae_file = vae;
    flux_status st = ctx ? flux_load(ctx, fx_test_path("golden/model"), &lo) : FLUX_ERR_NOMEM;
    free(vae);
    if (st != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "load with VAE %s: %s", vae_rel ? vae_rel : "(folder)",
                     ctx ? flux_error(ctx) : "no context");
        flux_free(ctx);
        return NULL;
    }
    return ctx;
}

static float *noise(size_t n, unsigned seed) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; x && i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return x;
}

TEST(vae_file_bfl_name_table) {
    static const struct {
        const char *bfl, *diffusers; /* diffusers NULL: not a FLUX.2 VAE name */
        int kind;
    } cases[] = {
        {"decoder.up.0.block.2.nin_shortcut.weight", "decoder.up_blocks.3.resnets.2.conv_shortcut.weight", 1},
        {"decoder.up.3.upsample.conv.bias", "decoder.up_blocks.0.upsamplers.0.conv.bias", 1},
        {"encoder.down.1.downsample.conv.bias", "encoder.down_blocks.1.downsamplers.0.conv.bias", 1},
        {"encoder.down.2.block.0.conv1.weight", "encoder.down_blocks.2.resnets.0.conv1.weight", 1},
        {"decoder.mid.attn_1.proj_out.weight", "decoder.mid_block.attentions.0.to_out.0.weight", 2},
        {"decoder.mid.attn_1.q.bias", "decoder.mid_block.attentions.0.to_q.bias", 1},
        {"encoder.mid.attn_1.norm.bias", "encoder.mid_block.attentions.0.group_norm.bias", 1},
        {"encoder.mid.block_2.norm1.weight", "encoder.mid_block.resnets.1.norm1.weight", 1},
        {"encoder.quant_conv.weight", "quant_conv.weight", 1},
        {"decoder.post_quant_conv.bias", "post_quant_conv.bias", 1},
        {"decoder.norm_out.weight", "decoder.conv_norm_out.weight", 1},
        {"decoder.conv_in.weight", "decoder.conv_in.weight", 1},
        {"bn.running_var", "bn.running_var", 1},
        {"decoder.up.4.block.0.conv1.weight", NULL, 0}, /* level 4 of 4 */
        {"encoder.mid.attn_1.qkv.weight", NULL, 0},
        {"encoder.down.01.block.0.conv1.weight", NULL, 0},
        {"encoder.down.0.block.0.conv3.weight", NULL, 0},
        {"encoder.norm_out.scale", NULL, 0},
        {"model.diffusion_model.img_in.weight", NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[256] = "";
        int kind = fx_vae_bfl_name(cases[i].bfl, 4, out, sizeof out);
        CHECK_MSG(kind == cases[i].kind, "%s: kind %d, want %d", cases[i].bfl, kind, cases[i].kind);
        if (cases[i].diffusers)
            CHECK_MSG(!strcmp(out, cases[i].diffusers), "%s → '%s', want '%s'", cases[i].bfl, out, cases[i].diffusers);
    }
}

/* The golden VAE under BFL names: the same config, derived from the shapes,
 * and bit-identical decodes and encodes. */
TEST(vae_file_bfl_equals_the_folder) {
    flux_ctx *a = load_with_vae(NULL), *b = load_with_vae("golden/vae_files/flux2-vae-bfl.safetensors");
    REQUIRE(a && b);
    const fx_vae_config *ca = &a->model->vae, *cb = &b->model->vae;
    CHECK(ca->in_channels == cb->in_channels && ca->out_channels == cb->out_channels);
    CHECK(ca->latent_channels == cb->latent_channels && ca->levels == cb->levels);
    CHECK(!memcmp(ca->block_out_channels, cb->block_out_channels, sizeof ca->block_out_channels));
    CHECK(!memcmp(ca->decoder_block_out_channels, cb->decoder_block_out_channels, sizeof ca->block_out_channels));
    CHECK(ca->layers_per_block == cb->layers_per_block && ca->norm_num_groups == cb->norm_num_groups);
    CHECK(ca->patch[0] == cb->patch[0] && ca->patch[1] == cb->patch[1]);
    CHECK(ca->use_quant_conv == cb->use_quant_conv && ca->use_post_quant_conv == cb->use_post_quant_conv);
    CHECK(ca->mid_block_add_attention == cb->mid_block_add_attention);
    CHECK(ca->batch_norm_eps == cb->batch_norm_eps && ca->norm_eps == cb->norm_eps);

    fx_vae *va = NULL, *vb = NULL;
    REQUIRE_MSG(fx_vae_get(a, &va) == FLUX_OK && fx_vae_get(b, &vb) == FLUX_OK, "%s %s", flux_error(a), flux_error(b));
    const int lat = ca->latent_channels, h8 = 4, w8 = 6, H = 8 * h8, W = 8 * w8;
    float *z = noise((size_t)lat * h8 * w8, 7), *img = noise((size_t)3 * H * W, 9);
    float *da = calloc((size_t)3 * H * W, sizeof *da), *db = calloc((size_t)3 * H * W, sizeof *db);
    float *ma = calloc((size_t)lat * h8 * w8, sizeof *ma), *mb = calloc((size_t)lat * h8 * w8, sizeof *mb);
    REQUIRE(z && img && da && db && ma && mb);
    CHECK(fx_vae_decode(a, va, z, h8, w8, da) == FLUX_OK);
    CHECK(fx_vae_decode(b, vb, z, h8, w8, db) == FLUX_OK);
    CHECK_MSG(!memcmp(da, db, (size_t)3 * H * W * sizeof *da), "decodes differ");
    CHECK(fx_vae_encode(a, va, img, H, W, ma) == FLUX_OK);
    CHECK(fx_vae_encode(b, vb, img, H, W, mb) == FLUX_OK);
    CHECK_MSG(!memcmp(ma, mb, (size_t)lat * h8 * w8 * sizeof *ma), "encodes differ");
    free(z), free(img), free(da), free(db), free(ma), free(mb);
    flux_free(a);
    flux_free(b);
}

/* A decoder narrower than the encoder: widths from the shapes, and the
 * decode of the NumPy reference (tools/gen_vae_files.py). */
TEST(vae_file_small_decoder_matches_numpy) {
    flux_ctx *ctx = load_with_vae("golden/vae_files/small-decoder.safetensors");
    REQUIRE(ctx);
    const fx_vae_config *c = &ctx->model->vae;
    static const int enc[4] = {32, 32, 64, 64}, dec[4] = {32, 32, 32, 64};
    REQUIRE(c->levels == 4);
    CHECK(!memcmp(c->block_out_channels, enc, sizeof enc));
    CHECK_MSG(!memcmp(c->decoder_block_out_channels, dec, sizeof dec), "decoder widths %d %d %d %d",
              c->decoder_block_out_channels[0], c->decoder_block_out_channels[1], c->decoder_block_out_channels[2],
              c->decoder_block_out_channels[3]);
    fx_npy z, want;
    fx_err err = {0};
    REQUIRE_MSG(fx_npy_read(fx_test_path("golden/vae_files/small-decoder-z.npy"), &z, &err) == FLUX_OK, "%s", err.msg);
    REQUIRE_MSG(fx_npy_read(fx_test_path("golden/vae_files/small-decoder-image.npy"), &want, &err) == FLUX_OK, "%s",
                err.msg);
    REQUIRE(z.ndim == 3 && want.ndim == 3 && want.shape[1] == 8 * z.shape[1] && want.shape[2] == 8 * z.shape[2]);
    fx_vae *v = NULL;
    REQUIRE_MSG(fx_vae_get(ctx, &v) == FLUX_OK, "%s", flux_error(ctx));
    float *got = calloc(want.count, sizeof *got), *again = calloc(want.count, sizeof *again);
    REQUIRE(got && again);
    CHECK(fx_vae_decode(ctx, v, z.data, (int)z.shape[1], (int)z.shape[2], got) == FLUX_OK);
    double e = fx_test_rel_err(got, want.data, want.count);
    printf("      small decoder vs NumPy: %.2e\n", e);
    CHECK_MSG(e <= 1e-4, "relative error %.3g", e);
    CHECK(fx_vae_decode(ctx, v, z.data, (int)z.shape[1], (int)z.shape[2], again) == FLUX_OK);
    CHECK_MSG(!memcmp(got, again, want.count * sizeof *got), "two decodes differ");
    free(got), free(again);
    fx_npy_free(&z), fx_npy_free(&want);
    flux_free(ctx);
}

TEST(vae_file_refusals_name_the_file) {
    flux_ctx *ctx = ctx_f32();
    flux_load_options lo;
    flux_load_options_init(&lo);
    char *vae = strdup(fx_test_path("golden/model/transformer/diffusion_pytorch_model.safetensors"));
    lo.vae_file = vae;
    CHECK(flux_load(ctx, fx_test_path("golden/model"), &lo) == FLUX_ERR_MODEL);
    free(vae);
    CHECK_MSG(strstr(flux_error(ctx), "not a FLUX.2 VAE") && strstr(flux_error(ctx), "diffusion_pytorch_model"), "%s",
              flux_error(ctx));
    flux_model_info info;
    CHECK(flux_get_model_info(ctx, &info) == FLUX_ERR_STATE);
    flux_free(ctx);
}
