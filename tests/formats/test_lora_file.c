/*
 * test_lora_file.c — LoRA / LyCORIS adapter files (src/adapters/lora.h)
 * against the tiny golden model's transformer (d = 64, m = 192, 2 double
 * and 2 single blocks): key classification, module resolution from each
 * naming convention onto the tensors and rows the transformer reads (BFL
 * fused qkv → q/k/v thirds, the final layer's swapped halves, flattened
 * kohya names, split names on a BFL single file's views), the scale rules
 * of each format, warnings for ignored keys, and hostile files (shapes
 * that contradict the module, A/B ranks that disagree, non-finite alpha,
 * DoRA, truncation, ...) refused with errors naming the file and the key.
 * Files are written with fx_safetensors_write (src/formats/safetensors_write.h).
 */
#include "tests/test.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/adapters/lora.h"
#include "src/formats/safetensors_write.h"
#include "src/formats/single_file.h"
#include "tests/golden_case.h"

enum { D = 64, M = 192 };

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static fx_wset *tiny_model(void) { return fx_gcase_transformer(fx_test_path("golden/model")); }

/* A file being built: tensors of constant values (the values do not matter
 * here; test_lora_pipeline checks the math). */
typedef struct lfile {
    fx_safetensors_out t[64];
    int n;
    const char *meta[4];
    int n_meta;
} lfile;

static float g_values[1 << 16];

static void add(lfile *f, const char *name, fx_dtype dt, fx_shape shape) {
    static char names[64][256];
    const int i = f->n++;
    snprintf(names[i], sizeof names[i], "%s", name);
    f->t[i] = (fx_safetensors_out){names[i], dt, shape, g_values};
}

/* A scalar alpha (F32 []). */
static void add_alpha(lfile *f, const char *module, float alpha) {
    static float alphas[64];
    char name[256];
    snprintf(name, sizeof name, "%s.alpha", module);
    alphas[f->n] = alpha;
    add(f, name, FX_DTYPE_F32, FX_SHAPE0);
    f->t[f->n - 1].data = &alphas[f->n - 1];
}

/* lora_A [r, in] and lora_B [out, r] (or down/up) of a module. */
static void add_lora(lfile *f, const char *module, const char *down, const char *up, int64_t r, int64_t in,
                     int64_t out) {
    char name[256];
    snprintf(name, sizeof name, "%s%s", module, down);
    add(f, name, FX_DTYPE_BF16, FX_SHAPE(r, in));
    snprintf(name, sizeof name, "%s%s", module, up);
    add(f, name, FX_DTYPE_BF16, FX_SHAPE(out, r));
}

static const char *write_file(const lfile *f, const char *name) {
    const char *path = fx_test_tmp_path(name);
    fx_err err = {0};
    if (fx_safetensors_write(path, f->t, (size_t)f->n, f->n_meta ? f->meta : NULL, (size_t)f->n_meta, &err))
        fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
    return path;
}

static fx_kctx g_kc;
static fx_scratch *g_scratch;

static const fx_kctx *kctx(void) {
    if (!g_scratch) {
        g_scratch = fx_scratch_new(2);
        fx_kctx_init(&g_kc, fx_kernels_get(FX_ISA_SCALAR, 1), 2, g_scratch);
    }
    return &g_kc;
}

/* Open f against the model; NULL (and err filled) on failure. */
static fx_lora *open_file(const lfile *f, const char *name, fx_wset *model, fx_lora_report *rep, fx_err *err) {
    const char *path = write_file(f, name);
    return fx_lora_open(path, model, kctx(), 1, rep, err);
}

static const fx_lora_module *module_named(const fx_lora *l, const char *key) {
    for (size_t i = 0; i < fx_lora_count(l); i++)
        if (!strcmp(fx_lora_module_at(l, i)->key, key)) return fx_lora_module_at(l, i);
    return NULL;
}

static int has_piece(const fx_lora_module *m, const char *tensor, int64_t trow, int64_t srow, int64_t rows) {
    for (int p = 0; m && p < m->n_pieces; p++)
        if (!strcmp(m->piece[p].tensor, tensor) && m->piece[p].tensor_row0 == trow && m->piece[p].src_row0 == srow &&
            m->piece[p].rows == rows)
            return 1;
    return 0;
}

/* The file must be refused with `code` and a message containing every
 * one of the NULL-terminated fragments. */
static void expect_refused(int line, const lfile *f, const char *name, flux_status code, ...) {
    fx_wset *model = tiny_model();
    if (!model) return;
    fx_err err = {0};
    fx_lora *l = open_file(f, name, model, NULL, &err);
    if (l) fx_test_fail(__FILE__, line, "%s: accepted", name);
    else if (err.code != code) fx_test_fail(__FILE__, line, "%s: status %s, expected %s: %s", name,
                                            flux_status_name(err.code), flux_status_name(code), err.msg);
    va_list ap;
    va_start(ap, code);
    for (const char *frag; (frag = va_arg(ap, const char *));)
        if (!l && !strstr(err.msg, frag)) fx_test_fail(__FILE__, line, "%s: message lacks '%s': %s", name, frag, err.msg);
    va_end(ap);
    if (!l && !strstr(err.msg, name)) fx_test_fail(__FILE__, line, "message does not name the file: %s", err.msg);
    fx_lora_free(l);
    fx_wset_close(model);
}
#define REFUSED(f, name, code, ...) expect_refused(__LINE__, f, name, code, __VA_ARGS__, (const char *)NULL)

/* ------------------------------------------------------------------------ */
/* Keys                                                                     */
/* ------------------------------------------------------------------------ */

TEST(lora_keys_classified) {
    static const struct {
        const char *key;
        fx_lora_part part;
        const char *stem;
        int te;
    } cases[] = {
        {"transformer.transformer_blocks.0.attn.to_q.lora_A.weight", FX_LORA_A, "transformer.transformer_blocks.0.attn.to_q", 0},
        {"transformer.single_transformer_blocks.1.attn.to_out.lora_B.weight", FX_LORA_B,
         "transformer.single_transformer_blocks.1.attn.to_out", 0},
        {"base_model.model.double_blocks.0.img_attn.qkv.lora_A.default.weight", FX_LORA_A,
         "base_model.model.double_blocks.0.img_attn.qkv", 0},
        {"lora_unet_double_blocks_0_img_attn_qkv.lora_down.weight", FX_LORA_A, "lora_unet_double_blocks_0_img_attn_qkv", 0},
        {"lora_unet_double_blocks_0_img_attn_qkv.lora_up.weight", FX_LORA_B, "lora_unet_double_blocks_0_img_attn_qkv", 0},
        {"lora_unet_double_blocks_0_img_attn_qkv.alpha", FX_LORA_ALPHA, "lora_unet_double_blocks_0_img_attn_qkv", 0},
        {"diffusion_model.single_blocks.0.linear1.lora.up.weight", FX_LORA_B, "diffusion_model.single_blocks.0.linear1", 0},
        {"x.to_q_lora.down.weight", FX_LORA_A, "x.to_q", 0},
        {"x.to_k.lora_linear_layer.up.weight", FX_LORA_B, "x.to_k", 0},
        {"lycoris_single_blocks_0_linear2.lokr_w1", FX_LORA_LOKR_W1, "lycoris_single_blocks_0_linear2", 0},
        {"m.lokr_w2_a", FX_LORA_LOKR_W2_A, "m", 0},
        {"m.lokr_w1_b", FX_LORA_LOKR_W1_B, "m", 0},
        {"m.hada_w2_b", FX_LORA_HADA_W2_B, "m", 0},
        {"m.diff", FX_LORA_DIFF, "m", 0},
        {"m.diff_b", FX_LORA_DIFF_B, "m", 0},
        {"m.dora_scale", FX_LORA_DORA_SCALE, "m", 0},
        {"m.lora_magnitude_vector", FX_LORA_MAGNITUDE, "m", 0},
        {"m.lora_magnitude_vector.default.weight", FX_LORA_MAGNITUDE, "m", 0},
        {"transformer.transformer_blocks.0.attn.to_q.magnitude", FX_LORA_MAGNITUDE,
         "transformer.transformer_blocks.0.attn.to_q", 0},
        {"m.lokr_t2", FX_LORA_REFUSED, "m", 0},
        {"lora_te1_text_model_encoder_layers_0_mlp_fc1.lora_down.weight", FX_LORA_A,
         "lora_te1_text_model_encoder_layers_0_mlp_fc1", 1},
        {"text_encoder.layers.0.q_proj.lora_A.weight", FX_LORA_A, "text_encoder.layers.0.q_proj", 1},
        {"emb_params", FX_LORA_UNKNOWN, "emb_params", 0},
        {".alpha", FX_LORA_UNKNOWN, ".alpha", 0}, /* no module name */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fx_lora_key k;
        fx_lora_parse_key(cases[i].key, &k);
        CHECK_MSG(k.part == cases[i].part && k.stem_len == strlen(cases[i].stem) &&
                      !strncmp(cases[i].key, cases[i].stem, k.stem_len) && k.text_encoder == cases[i].te,
                  "%s: part %d stem %zu te %d", cases[i].key, (int)k.part, k.stem_len, k.text_encoder);
        CHECK(k.part != FX_LORA_REFUSED || (k.scheme && k.scheme[0]));
    }
    static const char *const flat[][2] = {
        {"base_model.model.diffusion_model.double_blocks.0.img_attn.qkv", "double_blocks_0_img_attn_qkv"},
        {"lora_unet_single_blocks_3_linear1", "single_blocks_3_linear1"},
        {"transformer.transformer_blocks.1.attn.to_out.0", "transformer_blocks_1_attn_to_out_0"},
        {"diffusion_model.double_blocks.0.img_attn_qkv", "double_blocks_0_img_attn_qkv"},
        {"lycoris_final_layer_adaLN_modulation_1", "final_layer_adaLN_modulation_1"},
        {"lora_transformer_single_transformer_blocks_0_attn_to_out", "single_transformer_blocks_0_attn_to_out"},
    };
    for (size_t i = 0; i < sizeof flat / sizeof *flat; i++) {
        char out[256];
        size_t need = fx_lora_flat_name(flat[i][0], strlen(flat[i][0]), out, sizeof out);
        CHECK_MSG(!strcmp(out, flat[i][1]) && need == strlen(out) + 1, "%s -> %s", flat[i][0], out);
    }
    char small[8];
    CHECK(fx_lora_flat_name("lora_unet_abcdefghijkl", 22, small, sizeof small) == 13 && !strcmp(small, "abcdefg"));
}

/* ------------------------------------------------------------------------ */
/* Modules and rows                                                         */
/* ------------------------------------------------------------------------ */

TEST(lora_bfl_modules_map_to_diffusers_rows) {
    fx_wset *model = tiny_model();
    REQUIRE(model);
    lfile f = {0};
    add_lora(&f, "diffusion_model.double_blocks.1.img_attn.qkv", ".lora_A.weight", ".lora_B.weight", 4, D, 3 * D);
    add_lora(&f, "diffusion_model.double_blocks.0.txt_attn.qkv", ".lora_A.weight", ".lora_B.weight", 2, D, 3 * D);
    add_lora(&f, "diffusion_model.double_blocks.0.img_mlp.2", ".lora_A.weight", ".lora_B.weight", 4, M, D);
    add_lora(&f, "diffusion_model.single_blocks.1.linear1", ".lora_A.weight", ".lora_B.weight", 4, D, 3 * D + 2 * M);
    add_lora(&f, "diffusion_model.final_layer.adaLN_modulation.1", ".lora_A.weight", ".lora_B.weight", 4, D, 2 * D);
    add_lora(&f, "diffusion_model.img_in", ".lora_A.weight", ".lora_B.weight", 4, 128, D);
    fx_lora_report rep;
    fx_err err = {0};
    fx_lora *l = open_file(&f, "bfl.safetensors", model, &rep, &err);
    REQUIRE_MSG(l, "%s", err.msg);
    CHECK_EQ_INT(fx_lora_count(l), 6);
    CHECK(!strcmp(rep.kinds, "LoRA") && !strcmp(rep.naming, "BFL") && rep.unmatched == 0 && !rep.warning[0]);
    const fx_lora_module *q = module_named(l, "diffusion_model.double_blocks.1.img_attn.qkv");
    CHECK(q && q->n_pieces == 3 && q->delta.rows == 3 * D && q->delta.kind == FX_DELTA_LOWRANK);
    CHECK(has_piece(q, "transformer_blocks.1.attn.to_q.weight", 0, 0, D));
    CHECK(has_piece(q, "transformer_blocks.1.attn.to_k.weight", 0, D, D));
    CHECK(has_piece(q, "transformer_blocks.1.attn.to_v.weight", 0, 2 * D, D));
    const fx_lora_module *t = module_named(l, "diffusion_model.double_blocks.0.txt_attn.qkv");
    CHECK(has_piece(t, "transformer_blocks.0.attn.add_v_proj.weight", 0, 2 * D, D));
    CHECK(has_piece(module_named(l, "diffusion_model.double_blocks.0.img_mlp.2"), "transformer_blocks.0.ff.linear_out.weight",
                    0, 0, D));
    CHECK(has_piece(module_named(l, "diffusion_model.single_blocks.1.linear1"),
                    "single_transformer_blocks.1.attn.to_qkv_mlp_proj.weight", 0, 0, 3 * D + 2 * M));
    /* BFL rows (shift, scale) → norm_out (scale, shift) */
    const fx_lora_module *fin = module_named(l, "diffusion_model.final_layer.adaLN_modulation.1");
    CHECK(fin && fin->n_pieces == 2 && has_piece(fin, "norm_out.linear.weight", 0, D, D) &&
          has_piece(fin, "norm_out.linear.weight", D, 0, D));
    CHECK(has_piece(module_named(l, "diffusion_model.img_in"), "x_embedder.weight", 0, 0, D));
    CHECK(q && q->delta.scale == 1.0f); /* no alpha: scale 1 */
    fx_lora_free(l);
    fx_wset_close(model);
}

TEST(lora_names_every_convention) {
    fx_wset *model = tiny_model();
    REQUIRE(model);
    static const struct {
        const char *module, *down, *up, *tensor, *naming;
    } cases[] = {
        {"transformer.transformer_blocks.0.attn.to_k", ".lora_A.weight", ".lora_B.weight",
         "transformer_blocks.0.attn.to_k.weight", "diffusers"},
        {"transformer_blocks.0.attn.to_k", ".lora_A.weight", ".lora_B.weight", "transformer_blocks.0.attn.to_k.weight",
         "diffusers"},
        {"base_model.model.double_blocks.0.img_attn.proj", ".lora_A.weight", ".lora_B.weight",
         "transformer_blocks.0.attn.to_out.0.weight", "BFL"},
        {"double_blocks.0.txt_attn.proj", ".lora_A.weight", ".lora_B.weight", "transformer_blocks.0.attn.to_add_out.weight",
         "BFL"},
        {"lora_unet_double_blocks_1_txt_mlp_0", ".lora_down.weight", ".lora_up.weight",
         "transformer_blocks.1.ff_context.linear_in.weight", "flattened (kohya/LyCORIS)"},
        {"lora_transformer_single_transformer_blocks_0_attn_to_out", ".lora_down.weight", ".lora_up.weight",
         "single_transformer_blocks.0.attn.to_out.weight", "flattened (kohya/LyCORIS)"},
        {"diffusion_model.single_blocks.0.linear2", ".lora.down.weight", ".lora.up.weight",
         "single_transformer_blocks.0.attn.to_out.weight", "BFL"},
        {"diffusion_model.double_blocks.0.img_attn_proj", ".lora_A.weight", ".lora_B.weight", /* musubi #905 */
         "transformer_blocks.0.attn.to_out.0.weight", "BFL"},
        {"model.diffusion_model.time_in.out_layer", "_lora.down.weight", "_lora.up.weight",
         "time_guidance_embed.timestep_embedder.linear_2.weight", "BFL"},
        {"double_stream_modulation_img.lin", ".lora_linear_layer.down.weight", ".lora_linear_layer.up.weight",
         "double_stream_modulation_img.linear.weight", "BFL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *tensor = cases[i].tensor;
        const fx_tensor *wt = fx_wset_find(model, tensor);
        REQUIRE_MSG(wt, "%s", tensor);
        lfile f = {0};
        add_lora(&f, cases[i].module, cases[i].down, cases[i].up, 3, wt->shape.d[1], wt->shape.d[0]);
        fx_lora_report rep;
        fx_err err = {0};
        fx_lora *l = open_file(&f, "one.safetensors", model, &rep, &err);
        CHECK_MSG(l, "%s: %s", cases[i].module, err.msg);
        if (!l) continue;
        CHECK_MSG(fx_lora_count(l) == 1 && has_piece(fx_lora_module_at(l, 0), tensor, 0, 0, wt->shape.d[0]),
                  "%s: not on %s", cases[i].module, tensor);
        CHECK_MSG(!strcmp(rep.naming, cases[i].naming), "%s: naming '%s'", cases[i].module, rep.naming);
        fx_lora_free(l);
    }
    fx_wset_close(model);
}

/* Split to_q / to_k LoRAs and a fused qkv LoRA on a BFL single file: the
 * model's names are the view's (diffusers), so both land on rows of the
 * one fused tensor the file stores. */
TEST(lora_on_bfl_single_file_views) {
    const char *sf = fx_test_tmp_path("bfl.safetensors");
    char args[3 * PATH_MAX];
    snprintf(args, sizeof args, "--layout comfyui -d '%s' -o '%s'", fx_test_path("golden/model"), sf);
    REQUIRE(FX_TEST_RUN_TOOL("make_single_file", args) == 0);
    fx_err err = {0};
    fx_wset *model = fx_single_file_open(sf, 1, NULL, NULL, &err);
    REQUIRE_MSG(model, "%s", err.msg);
    lfile f = {0};
    add_lora(&f, "transformer.transformer_blocks.1.attn.to_k", ".lora_A.weight", ".lora_B.weight", 2, D, D);
    add_lora(&f, "lora_unet_double_blocks_1_img_attn_qkv", ".lora_down.weight", ".lora_up.weight", 2, D, 3 * D);
    fx_lora *l = open_file(&f, "split.safetensors", model, NULL, &err);
    REQUIRE_MSG(l, "%s", err.msg);
    CHECK(has_piece(module_named(l, "transformer.transformer_blocks.1.attn.to_k"), "transformer_blocks.1.attn.to_k.weight",
                    0, 0, D));
    CHECK(has_piece(module_named(l, "lora_unet_double_blocks_1_img_attn_qkv"), "transformer_blocks.1.attn.to_k.weight", 0,
                    D, D));
    fx_lora_free(l);
    fx_wset_close(model);
}

/* ------------------------------------------------------------------------ */
/* Scales                                                                   */
/* ------------------------------------------------------------------------ */

TEST(lora_scale_rules) {
    fx_wset *model = tiny_model();
    REQUIRE(model);
    lfile f = {0};
    /* kohya: α/r = 2/4 */
    add_lora(&f, "lora_unet_double_blocks_0_img_attn_proj", ".lora_down.weight", ".lora_up.weight", 4, D, D);
    add_alpha(&f, "lora_unet_double_blocks_0_img_attn_proj", 2.0f);
    /* LoKr, w2 factored (rank 2), α 3: 3/2; W1 [4, 4] ⊗ W2 [16, 16] */
    add(&f, "lycoris_double_blocks_0_txt_attn_proj.lokr_w1", FX_DTYPE_BF16, FX_SHAPE(4, 4));
    add(&f, "lycoris_double_blocks_0_txt_attn_proj.lokr_w2_a", FX_DTYPE_BF16, FX_SHAPE(16, 2));
    add(&f, "lycoris_double_blocks_0_txt_attn_proj.lokr_w2_b", FX_DTYPE_F32, FX_SHAPE(2, 16));
    add_alpha(&f, "lycoris_double_blocks_0_txt_attn_proj", 3.0f);
    /* LoKr, both whole: 1 whatever alpha says */
    add(&f, "lycoris_double_blocks_1_txt_attn_proj.lokr_w1", FX_DTYPE_BF16, FX_SHAPE(2, 8));
    add(&f, "lycoris_double_blocks_1_txt_attn_proj.lokr_w2", FX_DTYPE_F16, FX_SHAPE(32, 8));
    add_alpha(&f, "lycoris_double_blocks_1_txt_attn_proj", 5.0f);
    /* LoKr, w1 factored (rank 2) and w2 whole, α 4: 4/2 */
    add(&f, "lycoris_double_blocks_1_img_attn_proj.lokr_w1_a", FX_DTYPE_BF16, FX_SHAPE(4, 2));
    add(&f, "lycoris_double_blocks_1_img_attn_proj.lokr_w1_b", FX_DTYPE_BF16, FX_SHAPE(2, 4));
    add(&f, "lycoris_double_blocks_1_img_attn_proj.lokr_w2", FX_DTYPE_BF16, FX_SHAPE(16, 16));
    add_alpha(&f, "lycoris_double_blocks_1_img_attn_proj", 4.0f);
    /* LoHa ranks 4 and 2, α 1: 1/4; kept as a product of rank 8 (8·(64 + 256) < 64·256) */
    add(&f, "diffusion_model.single_blocks.0.linear2.hada_w1_a", FX_DTYPE_BF16, FX_SHAPE(D, 4));
    add(&f, "diffusion_model.single_blocks.0.linear2.hada_w1_b", FX_DTYPE_BF16, FX_SHAPE(4, D + M));
    add(&f, "diffusion_model.single_blocks.0.linear2.hada_w2_a", FX_DTYPE_BF16, FX_SHAPE(D, 2));
    add(&f, "diffusion_model.single_blocks.0.linear2.hada_w2_b", FX_DTYPE_BF16, FX_SHAPE(2, D + M));
    add_alpha(&f, "diffusion_model.single_blocks.0.linear2", 1.0f);
    /* LoHa ranks 8 and 8 on [64, 192]: 64·256 > 64·192, ΔW itself; no alpha: 1 */
    add(&f, "diffusion_model.double_blocks.1.img_mlp.2.hada_w1_a", FX_DTYPE_BF16, FX_SHAPE(D, 8));
    add(&f, "diffusion_model.double_blocks.1.img_mlp.2.hada_w1_b", FX_DTYPE_BF16, FX_SHAPE(8, M));
    add(&f, "diffusion_model.double_blocks.1.img_mlp.2.hada_w2_a", FX_DTYPE_F16, FX_SHAPE(D, 8));
    add(&f, "diffusion_model.double_blocks.1.img_mlp.2.hada_w2_b", FX_DTYPE_F32, FX_SHAPE(8, M));
    /* diff: 1 */
    add(&f, "diffusion_model.single_blocks.1.linear2.diff", FX_DTYPE_BF16, FX_SHAPE(D, D + M));
    fx_lora_report rep;
    fx_err err = {0};
    fx_lora *l = open_file(&f, "scales.safetensors", model, &rep, &err);
    REQUIRE_MSG(l, "%s", err.msg);
    CHECK_EQ_INT(fx_lora_count(l), 7);
    const fx_lora_module *m;
    CHECK((m = module_named(l, "lora_unet_double_blocks_0_img_attn_proj")) && m->delta.scale == 0.5f);
    CHECK((m = module_named(l, "lycoris_double_blocks_0_txt_attn_proj")) && m->delta.scale == 1.5f &&
          m->delta.kind == FX_DELTA_KRON && m->delta.b.n == 4 && m->delta.c.n == 16 && m->delta.c.k == 2 &&
          m->delta.a.n == 2 && m->delta.a.k == 16 && m->delta.c.dtype == FX_DTYPE_BF16 && m->delta.a.dtype == FX_DTYPE_F32);
    CHECK((m = module_named(l, "lycoris_double_blocks_1_txt_attn_proj")) && m->delta.scale == 1.0f &&
          m->delta.a.dtype == FX_DTYPE_F16);
    CHECK((m = module_named(l, "lycoris_double_blocks_1_img_attn_proj")) && m->delta.scale == 2.0f &&
          m->delta.b.dtype == FX_DTYPE_F32 && !m->delta.c.data); /* W1 multiplied out, W2 whole */
    CHECK((m = module_named(l, "diffusion_model.single_blocks.0.linear2")) && m->delta.scale == 0.25f &&
          m->delta.kind == FX_DELTA_LOWRANK && m->delta.a.n == 8 && m->delta.a.k == D + M && m->delta.b.n == D &&
          m->delta.a.dtype == FX_DTYPE_F32 && m->delta.b.dtype == FX_DTYPE_F32);
    CHECK((m = module_named(l, "diffusion_model.double_blocks.1.img_mlp.2")) && m->delta.scale == 1.0f &&
          m->delta.kind == FX_DELTA_DENSE && m->delta.a.n == D && m->delta.a.k == M && m->delta.a.dtype == FX_DTYPE_F32);
    CHECK((m = module_named(l, "diffusion_model.single_blocks.1.linear2")) && m->delta.scale == 1.0f &&
          m->delta.kind == FX_DELTA_DENSE && m->delta.a.dtype == FX_DTYPE_BF16);
    CHECK(strstr(rep.kinds, "LoRA") && strstr(rep.kinds, "LoKr") && strstr(rep.kinds, "LoHa") && strstr(rep.kinds, "diff"));
    fx_lora_free(l);
    fx_wset_close(model);
}

TEST(lora_peft_metadata_alpha) {
    fx_wset *model = tiny_model();
    REQUIRE(model);
    lfile f = {0};
    add_lora(&f, "transformer.transformer_blocks.0.attn.to_q", ".lora_A.weight", ".lora_B.weight", 4, D, D);
    add_lora(&f, "transformer.transformer_blocks.1.attn.to_q", ".lora_A.weight", ".lora_B.weight", 4, D, D);
    add_lora(&f, "transformer.transformer_blocks.1.attn.to_k", ".lora_A.weight", ".lora_B.weight", 4, D, D);
    add_alpha(&f, "transformer.transformer_blocks.1.attn.to_k", 1.0f); /* a .alpha wins over the metadata */
    f.meta[0] = "lora_adapter_metadata";
    f.meta[1] = "{\"transformer.r\": 4, \"transformer.lora_alpha\": 8, \"transformer.alpha_pattern\": "
                "{\"transformer_blocks.1.attn.to_q\": 2, \"0.attn.to_q\": 99}}";
    f.n_meta = 1;
    fx_err err = {0};
    fx_lora *l = open_file(&f, "peft.safetensors", model, NULL, &err);
    REQUIRE_MSG(l, "%s", err.msg);
    const fx_lora_module *m;
    /* alpha_pattern keys match the module name or a dotted suffix of it */
    CHECK((m = module_named(l, "transformer.transformer_blocks.0.attn.to_q")) && m->delta.scale == 99.0f / 4);
    CHECK((m = module_named(l, "transformer.transformer_blocks.1.attn.to_q")) && m->delta.scale == 0.5f);
    CHECK((m = module_named(l, "transformer.transformer_blocks.1.attn.to_k")) && m->delta.scale == 0.25f);
    fx_lora_free(l);
    /* rsLoRA: α/√r; no metadata prefix (save_lora_adapter on the model) */
    f.meta[1] = "{\"r\": 4, \"lora_alpha\": 8, \"use_rslora\": true}";
    f.n -= 1; /* drop the .alpha */
    l = open_file(&f, "rslora.safetensors", model, NULL, &err);
    REQUIRE_MSG(l, "%s", err.msg);
    CHECK((m = module_named(l, "transformer.transformer_blocks.1.attn.to_k")) && m->delta.scale == 4.0f);
    fx_lora_free(l);
    fx_wset_close(model);
}

/* ------------------------------------------------------------------------ */
/* Ignored keys                                                             */
/* ------------------------------------------------------------------------ */

TEST(lora_warns_about_ignored_keys) {
    fx_wset *model = tiny_model();
    REQUIRE(model);
    lfile f = {0};
    add_lora(&f, "lora_unet_single_blocks_0_linear2", ".lora_down.weight", ".lora_up.weight", 2, D + M, D);
    add_lora(&f, "lora_unet_double_blocks_7_img_attn_qkv", ".lora_down.weight", ".lora_up.weight", 2, D, 3 * D);
    add(&f, "lora_unet_single_blocks_0_linear2.diff_b", FX_DTYPE_F32, FX_SHAPE(D));
    add_lora(&f, "lora_te1_text_model_encoder_layers_0_mlp_fc1", ".lora_down.weight", ".lora_up.weight", 2, 16, 16);
    fx_lora_report rep;
    fx_err err = {0};
    fx_lora *l = open_file(&f, "partial.safetensors", model, &rep, &err);
    REQUIRE_MSG(l, "%s", err.msg);
    CHECK_EQ_INT(fx_lora_count(l), 1);
    CHECK_EQ_INT(rep.unmatched, 3);
    CHECK_EQ_INT(rep.text_encoder, 2);
    CHECK_EQ_INT(rep.keys, 7);
    CHECK_MSG(strstr(rep.warning, "3 keys match no module") && strstr(rep.warning, "diff_b") &&
                  strstr(rep.warning, "lora_unet_double_blocks_7_img_attn_qkv.lora_down.weight") &&
                  strstr(rep.warning, "2 text-encoder keys ignored"),
              "%s", rep.warning);
    fx_lora_free(l);
    /* a suffix no scheme has is refused by name, never ignored (issue 24.1:
     * a DoRA magnitude used to be dropped this way, changing the image) */
    static const char *const unknown[] = {"emb_params", "lora_unet_single_blocks_0_linear2.lora_down.scale",
                                          "transformer.transformer_blocks.0.attn.to_q.magnitudes"};
    for (int i = 0; i < 3; i++) {
        add(&f, unknown[i], FX_DTYPE_F32, FX_SHAPE(D));
        fx_err e2 = {0};
        fx_lora *u = open_file(&f, "unknown.safetensors", model, NULL, &e2);
        CHECK_MSG(!u && e2.code == FLUX_ERR_UNSUPPORTED && strstr(e2.msg, unknown[i]) && strstr(e2.msg, "suffix"), "%s: %s",
                  unknown[i], e2.msg);
        fx_lora_free(u);
        f.n--;
    }
    fx_wset_close(model);
}

/* ------------------------------------------------------------------------ */
/* Refused files                                                            */
/* ------------------------------------------------------------------------ */

TEST(lora_refuses_hostile_files) {
    lfile f;
    const char *qkv = "diffusion_model.double_blocks.0.img_attn.qkv";
    /* A's columns contradict the module (in = 64) */
    memset(&f, 0, sizeof f);
    add_lora(&f, qkv, ".lora_A.weight", ".lora_B.weight", 4, 65, 3 * D);
    REFUSED(&f, "a_cols.safetensors", FLUX_ERR_MODEL, "img_attn.qkv.lora_A.weight", "[4, 65]", "needs [r, 64]");
    /* B's rows: a split-size B on the fused module */
    memset(&f, 0, sizeof f);
    add_lora(&f, qkv, ".lora_A.weight", ".lora_B.weight", 4, D, D);
    REFUSED(&f, "b_rows.safetensors", FLUX_ERR_MODEL, "img_attn.qkv.lora_B.weight", "[64, 4]", "needs [192, 4]");
    /* A rank 4, B rank 3 */
    memset(&f, 0, sizeof f);
    add(&f, "lora_unet_double_blocks_0_img_attn_proj.lora_down.weight", FX_DTYPE_BF16, FX_SHAPE(4, D));
    add(&f, "lora_unet_double_blocks_0_img_attn_proj.lora_up.weight", FX_DTYPE_BF16, FX_SHAPE(D, 3));
    REFUSED(&f, "rank.safetensors", FLUX_ERR_MODEL, "rank mismatch", "lora_down.weight' has rank 4", "rank 3");
    /* NaN, Inf, non-scalar alpha */
    static const float bad_alpha[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        memset(&f, 0, sizeof f);
        add_lora(&f, qkv, ".lora_A.weight", ".lora_B.weight", 4, D, 3 * D);
        add_alpha(&f, qkv, bad_alpha[i]);
        REFUSED(&f, "alpha.safetensors", FLUX_ERR_MODEL, "img_attn.qkv.alpha", "not finite");
    }
    memset(&f, 0, sizeof f);
    add_lora(&f, qkv, ".lora_A.weight", ".lora_B.weight", 4, D, 3 * D);
    add(&f, "diffusion_model.double_blocks.0.img_attn.qkv.alpha", FX_DTYPE_F32, FX_SHAPE(2));
    REFUSED(&f, "alpha2.safetensors", FLUX_ERR_MODEL, "img_attn.qkv.alpha", "single number");
    /* metadata alpha out of range */
    memset(&f, 0, sizeof f);
    add_lora(&f, "transformer.transformer_blocks.0.attn.to_q", ".lora_A.weight", ".lora_B.weight", 4, D, D);
    f.meta[0] = "lora_adapter_metadata", f.meta[1] = "{\"transformer.lora_alpha\": 1e999}", f.n_meta = 1;
    REFUSED(&f, "meta_inf.safetensors", FLUX_ERR_FORMAT, "lora_adapter_metadata", "out of range");
    f.meta[1] = "{\"transformer.lora_alpha\": \"8\"}";
    REFUSED(&f, "meta_str.safetensors", FLUX_ERR_FORMAT, "transformer.lora_alpha is not a finite number");
    f.meta[1] = "{\"transformer.lora_alpha\": 8, \"transformer.alpha_pattern\": {\"to_q\": null}}";
    REFUSED(&f, "meta_pattern.safetensors", FLUX_ERR_FORMAT, "alpha_pattern 'to_q' is not a finite number");
    f.meta[1] = "{\"transformer.lora_alpha\": 4, \"transformer.use_dora\": true}";
    REFUSED(&f, "meta_dora.safetensors", FLUX_ERR_MODEL, "use_dora", "no magnitude");
    f.meta[1] = "not json";
    REFUSED(&f, "meta_bad.safetensors", FLUX_ERR_FORMAT, "lora_adapter_metadata");
    /* DoRA and other schemes */
    memset(&f, 0, sizeof f);
    add_lora(&f, qkv, ".lora_A.weight", ".lora_B.weight", 4, D, 3 * D);
    add(&f, "diffusion_model.double_blocks.0.img_attn.qkv.dora_scale", FX_DTYPE_BF16, FX_SHAPE(1, D));
    REFUSED(&f, "dora.safetensors", FLUX_ERR_UNSUPPORTED, "img_attn.qkv.dora_scale", "[1, 64]", "DoRA with norms per input");
    memset(&f, 0, sizeof f);
    add(&f, "transformer.transformer_blocks.0.attn.to_q.lora_magnitude_vector", FX_DTYPE_BF16, FX_SHAPE(D));
    REFUSED(&f, "dora2.safetensors", FLUX_ERR_MODEL, "to_q.lora_magnitude_vector' without any factor");
    memset(&f, 0, sizeof f);
    add_lora(&f, qkv, ".lora_A.weight", ".lora_B.weight", 4, D, 3 * D);
    add(&f, "diffusion_model.double_blocks.0.img_attn.qkv.magnitude", FX_DTYPE_BF16, FX_SHAPE(D));
    REFUSED(&f, "dora3.safetensors", FLUX_ERR_MODEL, "img_attn.qkv.magnitude", "[64]", "needs a DoRA magnitude [192]");
    memset(&f, 0, sizeof f);
    add_lora(&f, qkv, ".lora_A.weight", ".lora_B.weight", 4, D, 3 * D);
    add(&f, "diffusion_model.double_blocks.0.img_attn.qkv.magnitude", FX_DTYPE_I32, FX_SHAPE(3 * D));
    REFUSED(&f, "dora4.safetensors", FLUX_ERR_MODEL, "img_attn.qkv.magnitude", "dtype I32");
    memset(&f, 0, sizeof f);
    add_lora(&f, qkv, ".lora_A.weight", ".lora_B.weight", 4, D, 3 * D);
    add(&f, "diffusion_model.double_blocks.0.img_attn.qkv.magnitude", FX_DTYPE_F32, FX_SHAPE(3 * D));
    add(&f, "diffusion_model.double_blocks.0.img_attn.qkv.dora_scale", FX_DTYPE_F32, FX_SHAPE(3 * D, 1));
    REFUSED(&f, "dora5.safetensors", FLUX_ERR_MODEL, "two DoRA magnitudes");
    memset(&f, 0, sizeof f);
    add(&f, "diffusion_model.img_in.set_weight", FX_DTYPE_BF16, FX_SHAPE(D, 128));
    REFUSED(&f, "set.safetensors", FLUX_ERR_UNSUPPORTED, "img_in.set_weight", "set_weight");
    memset(&f, 0, sizeof f);
    add(&f, "lycoris_img_in.oft_blocks", FX_DTYPE_BF16, FX_SHAPE(4, 16, 16));
    REFUSED(&f, "oft.safetensors", FLUX_ERR_UNSUPPORTED, "lycoris_img_in.oft_blocks", "OFT");
    /* incomplete modules */
    memset(&f, 0, sizeof f);
    add(&f, "diffusion_model.img_in.lora_A.weight", FX_DTYPE_BF16, FX_SHAPE(4, 128));
    REFUSED(&f, "half.safetensors", FLUX_ERR_MODEL, "img_in.lora_A.weight' has no partner");
    memset(&f, 0, sizeof f);
    add_alpha(&f, "lora_unet_img_in", 4.0f);
    REFUSED(&f, "alpha_only.safetensors", FLUX_ERR_MODEL, "lora_unet_img_in.alpha' without any factor");
    memset(&f, 0, sizeof f);
    add(&f, "lycoris_img_in.lokr_w1", FX_DTYPE_BF16, FX_SHAPE(4, 4));
    REFUSED(&f, "lokr_half.safetensors", FLUX_ERR_MODEL, "lycoris_img_in", "without its W2 factor");
    memset(&f, 0, sizeof f);
    add(&f, "lycoris_img_in.lokr_w1", FX_DTYPE_BF16, FX_SHAPE(4, 4));
    add(&f, "lycoris_img_in.lokr_w2", FX_DTYPE_BF16, FX_SHAPE(16, 16)); /* 4·16 = 64 rows but 4·16 ≠ 128 columns */
    REFUSED(&f, "lokr_shape.safetensors", FLUX_ERR_MODEL, "lycoris_img_in", "make [64, 64], the module is [64, 128]");
    memset(&f, 0, sizeof f);
    add(&f, "m.hada_w1_a", FX_DTYPE_BF16, FX_SHAPE(D, 2));
    add(&f, "diffusion_model.img_in.hada_w1_a", FX_DTYPE_BF16, FX_SHAPE(D, 2));
    add(&f, "diffusion_model.img_in.hada_w1_b", FX_DTYPE_BF16, FX_SHAPE(2, 128));
    add(&f, "diffusion_model.img_in.hada_w2_a", FX_DTYPE_BF16, FX_SHAPE(D, 2));
    REFUSED(&f, "loha_half.safetensors", FLUX_ERR_MODEL, "diffusion_model.img_in", "hada_w2_b");
    /* two schemes, a factor given twice */
    memset(&f, 0, sizeof f);
    add_lora(&f, "diffusion_model.img_in", ".lora_A.weight", ".lora_B.weight", 4, 128, D);
    add(&f, "diffusion_model.img_in.diff", FX_DTYPE_BF16, FX_SHAPE(D, 128));
    REFUSED(&f, "mixed.safetensors", FLUX_ERR_MODEL, "diffusion_model.img_in", "mixes LoRA diff");
    memset(&f, 0, sizeof f);
    add_lora(&f, "diffusion_model.img_in", ".lora_A.weight", ".lora_B.weight", 4, 128, D);
    add(&f, "diffusion_model.img_in.lora_down.weight", FX_DTYPE_BF16, FX_SHAPE(4, 128));
    REFUSED(&f, "twice.safetensors", FLUX_ERR_MODEL, "diffusion_model.img_in", "given twice");
    /* a factor dtype the kernels cannot use */
    memset(&f, 0, sizeof f);
    add(&f, "diffusion_model.img_in.lora_A.weight", FX_DTYPE_I32, FX_SHAPE(4, 128));
    add(&f, "diffusion_model.img_in.lora_B.weight", FX_DTYPE_BF16, FX_SHAPE(D, 4));
    REFUSED(&f, "dtype.safetensors", FLUX_ERR_MODEL, "img_in.lora_A.weight", "I32");
    /* nothing matches: another model's adapter */
    memset(&f, 0, sizeof f);
    add_lora(&f, "lora_unet_down_blocks_0_attentions_0_proj_in", ".lora_down.weight", ".lora_up.weight", 4, 320, 320);
    add_lora(&f, "lora_te_text_model_encoder_layers_0_mlp_fc1", ".lora_down.weight", ".lora_up.weight", 4, 16, 16);
    REFUSED(&f, "sdxl.safetensors", FLUX_ERR_MODEL, "no key matches a module of the FLUX.2 transformer",
            "lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight", "text encoder");
}

/* Truncations and byte flips of a valid file: refused cleanly (or, for a
 * flip inside tensor data, accepted), never a crash. */
TEST(lora_refuses_truncated_files) {
    lfile f = {0};
    add_lora(&f, "lora_unet_double_blocks_0_img_attn_qkv", ".lora_down.weight", ".lora_up.weight", 4, D, 3 * D);
    add_alpha(&f, "lora_unet_double_blocks_0_img_attn_qkv", 4.0f);
    const char *path = write_file(&f, "whole.safetensors");
    size_t len = 0;
    char *bytes = fx_test_read_file(path, &len);
    REQUIRE(bytes && len > 100);
    fx_wset *model = tiny_model();
    REQUIRE(model);
    const char *cut = fx_test_tmp_path("cut.safetensors");
    static const size_t keep[] = {0, 4, 8, 20, 100, 0, 1};
    for (size_t i = 0; i < sizeof keep / sizeof *keep; i++) {
        size_t n = i >= 5 ? len - keep[i] - 1 : keep[i];
        REQUIRE(fx_test_write_file(cut, bytes, n) == 0);
        fx_err err = {0};
        fx_lora *l = fx_lora_open(cut, model, kctx(), (int)(i & 1), NULL, &err);
        CHECK_MSG(!l && err.code == FLUX_ERR_FORMAT && strstr(err.msg, cut), "%zu of %zu bytes: %s", n, len, err.msg);
        fx_lora_free(l);
    }
    fx_wset_close(model);
    free(bytes);
}

/* fx_bfl_name_of inverts fx_bfl_map_name on every tensor of the model: the
 * BFL tensor it names maps back onto it (the loader's one table serves
 * checkpoints and adapters). */
TEST(lora_bfl_reverse_names) {
    fx_wset *model = tiny_model();
    REQUIRE(model);
    int linear = 0;
    for (size_t i = 0; i < fx_wset_count(model); i++) {
        const fx_tensor *t = fx_wset_tensor_at(model, i);
        char bfl[FX_ST_MAX_NAME];
        CHECK_MSG(fx_bfl_name_of(t->name, bfl, sizeof bfl) == 1, "%s has no BFL name", t->name);
        fx_bfl_target tg[3];
        int k = fx_bfl_map_name(bfl, bfl, 3 * 2 * 64, tg), found = 0;
        for (int j = 0; j < k; j++) found |= !strcmp(tg[j].name, t->name);
        CHECK_MSG(k >= 1 && found, "%s -> %s does not map back (%d targets)", t->name, bfl, k);
        linear += t->shape.ndim == 2;
    }
    CHECK_EQ_INT(linear, 37);
    char small[8];
    CHECK(fx_bfl_name_of("transformer_blocks.0.attn.to_q.weight", small, sizeof small) == 0); /* too small */
    CHECK(fx_bfl_name_of("transformer_blocks.0.attn.to_z.weight", small, sizeof small) == 0);
    CHECK(fx_bfl_name_of("vae.decoder.conv_in.weight", small, sizeof small) == 0);
    fx_wset_close(model);
}
