/*
 * test_single_file.c — single-file transformer checkpoints (BFL names,
 * ComfyUI prefix, diffusers names) against the model folder they were
 * written from (tools/make_single_file, an independent diffusers → BFL
 * implementation): the same tensors by name, shape, dtype and bytes, the
 * spec's row facts checked on the raw file, bit-identical transformer
 * velocities, and the weight-set views underneath (weight_set.h).
 */
#include "tests/test.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/dit/latents.h"
#include "src/model/model.h"
#include "src/base/npy.h"
#include "src/formats/single_file.h"
#include "src/dit/transformer.h"
#include "tests/golden_case.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* Write the golden model's transformer as one file; returns its path
 * (static buffer per layout) or NULL after recording a failure. */
static const char *make_file(const char *layout, const char *flags) {
    static char paths[8][PATH_MAX];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, PATH_MAX, "%s/%s%s.safetensors", fx_test_tmpdir(), layout, *flags ? "-x" : "");
    char args[3 * PATH_MAX];
    snprintf(args, sizeof args, "--layout %s -d '%s' -o '%s' %s", layout, fx_test_path("golden/model"), path, flags);
    return FX_TEST_RUN_TOOL("make_single_file", args) ? NULL : path;
}

static fx_wset *open_folder_transformer(void) { return fx_gcase_transformer(fx_test_path("golden/model")); }

/* Every tensor of `want` is in `got` with the same shape, dtype and values
 * (f32 conversions compared bitwise = same bytes for F32/F16/BF16), and
 * nothing else is. */
static void expect_same_tensors(int line, const fx_wset *want, const fx_wset *got) {
    if (fx_wset_count(want) != fx_wset_count(got))
        fx_test_fail(__FILE__, line, "%zu tensors, folder has %zu", fx_wset_count(got), fx_wset_count(want));
    for (size_t i = 0; i < fx_wset_count(want); i++) {
        const fx_tensor *a = fx_wset_tensor_at(want, i);
        const fx_tensor *b = fx_wset_find(got, a->name);
        if (!b) {
            fx_test_fail(__FILE__, line, "'%s' missing", a->name);
            continue;
        }
        char sa[64], sb[64];
        if (!fx_shape_eq(&a->shape, &b->shape) || a->dtype != b->dtype) {
            fx_test_fail(__FILE__, line, "'%s': %s %s vs folder %s %s", a->name, fx_dtype_name(b->dtype),
                         fx_shape_str(&b->shape, sb, sizeof sb), fx_dtype_name(a->dtype),
                         fx_shape_str(&a->shape, sa, sizeof sa));
            continue;
        }
        int64_t n = fx_shape_numel(&a->shape);
        float *x = malloc((size_t)n * 4 + 4), *y = malloc((size_t)n * 4 + 4);
        fx_err err = {0};
        if (fx_wset_read_f32(want, a->name, NULL, x, &err) || fx_wset_read_f32(got, a->name, NULL, y, &err))
            fx_test_fail(__FILE__, line, "'%s': %s", a->name, err.msg);
        else if (memcmp(x, y, (size_t)n * 4))
            fx_test_fail(__FILE__, line, "'%s': values differ", a->name);
        free(x), free(y);
    }
}

/* A raw tensor of a safetensors file by name: data pointer into `file`. */
static const uint8_t *raw_tensor(const uint8_t *file, const char *name, int64_t *nbytes) {
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | file[i];
    char key[256];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *hdr = (const char *)file + 8;
    char *h = strndup(hdr, (size_t)hlen);
    const char *p = strstr(h, key);
    const uint8_t *data = NULL;
    if (p && (p = strstr(p, "\"data_offsets\":["))) {
        long long b = 0, e = 0;
        if (sscanf(p, "\"data_offsets\":[%lld,%lld]", &b, &e) == 2) {
            data = file + 8 + hlen + b;
            *nbytes = e - b;
        }
    }
    free(h);
    return data;
}

/* ------------------------------------------------------------------------ */
/* The name table                                                           */
/* ------------------------------------------------------------------------ */

static void expect_map(int line, const char *bfl, int64_t rows, int n, const char *const *names,
                       const int64_t (*ranges)[2]) {
    fx_bfl_target t[3];
    int k = fx_bfl_map_name(bfl, "SRC", rows, t);
    if (k != n) {
        fx_test_fail(__FILE__, line, "%s: %d targets, want %d", bfl, k, n);
        return;
    }
    for (int i = 0; i < k; i++) {
        if (strcmp(t[i].name, names[i])) fx_test_fail(__FILE__, line, "%s -> %s, want %s", bfl, t[i].name, names[i]);
        if (t[i].ranges[0].row0 != ranges[i][0] || t[i].ranges[0].rows != ranges[i][1] || strcmp(t[i].ranges[0].src, "SRC"))
            fx_test_fail(__FILE__, line, "%s -> %s rows %lld+%lld, want %lld+%lld", bfl, names[i],
                         (long long)t[i].ranges[0].row0, (long long)t[i].ranges[0].rows, (long long)ranges[i][0],
                         (long long)ranges[i][1]);
    }
}

#define MAP1(bfl, rows, name)                                                                                   \
    do {                                                                                                      \
        const char *n_[1] = {name};                                                                           \
        const int64_t r_[1][2] = {{0, rows}};                                                                 \
        expect_map(__LINE__, bfl, rows, 1, n_, r_);                                                           \
    } while (0)

TEST(single_file_bfl_name_table) {
    /* BFL flux2 model.py names, as diffusers convert_flux2_to_diffusers.py maps them, row by row */
    MAP1("img_in.weight", 3072, "x_embedder.weight");
    MAP1("txt_in.weight", 3072, "context_embedder.weight");
    MAP1("time_in.in_layer.weight", 3072, "time_guidance_embed.timestep_embedder.linear_1.weight");
    MAP1("time_in.out_layer.weight", 3072, "time_guidance_embed.timestep_embedder.linear_2.weight");
    MAP1("double_stream_modulation_img.lin.weight", 18432, "double_stream_modulation_img.linear.weight");
    MAP1("double_stream_modulation_txt.lin.weight", 18432, "double_stream_modulation_txt.linear.weight");
    MAP1("single_stream_modulation.lin.weight", 9216, "single_stream_modulation.linear.weight");
    const char *img[3] = {"transformer_blocks.4.attn.to_q.weight", "transformer_blocks.4.attn.to_k.weight",
                          "transformer_blocks.4.attn.to_v.weight"};
    const char *txt[3] = {"transformer_blocks.0.attn.add_q_proj.weight", "transformer_blocks.0.attn.add_k_proj.weight",
                          "transformer_blocks.0.attn.add_v_proj.weight"};
    const int64_t thirds[3][2] = {{0, 3072}, {3072, 3072}, {6144, 3072}};
    expect_map(__LINE__, "double_blocks.4.img_attn.qkv.weight", 9216, 3, img, thirds);
    expect_map(__LINE__, "double_blocks.0.txt_attn.qkv.weight", 9216, 3, txt, thirds);
    MAP1("double_blocks.1.img_attn.norm.query_norm.scale", 128, "transformer_blocks.1.attn.norm_q.weight");
    MAP1("double_blocks.1.img_attn.norm.key_norm.scale", 128, "transformer_blocks.1.attn.norm_k.weight");
    MAP1("double_blocks.1.img_attn.proj.weight", 3072, "transformer_blocks.1.attn.to_out.0.weight");
    MAP1("double_blocks.1.img_mlp.0.weight", 18432, "transformer_blocks.1.ff.linear_in.weight");
    MAP1("double_blocks.1.img_mlp.2.weight", 3072, "transformer_blocks.1.ff.linear_out.weight");
    MAP1("double_blocks.12.txt_attn.norm.query_norm.scale", 128, "transformer_blocks.12.attn.norm_added_q.weight");
    MAP1("double_blocks.12.txt_attn.norm.key_norm.scale", 128, "transformer_blocks.12.attn.norm_added_k.weight");
    MAP1("double_blocks.2.txt_attn.proj.weight", 3072, "transformer_blocks.2.attn.to_add_out.weight");
    MAP1("double_blocks.2.txt_mlp.0.weight", 18432, "transformer_blocks.2.ff_context.linear_in.weight");
    MAP1("double_blocks.2.txt_mlp.2.weight", 3072, "transformer_blocks.2.ff_context.linear_out.weight");
    MAP1("single_blocks.19.linear1.weight", 27648, "single_transformer_blocks.19.attn.to_qkv_mlp_proj.weight");
    MAP1("single_blocks.0.linear2.weight", 3072, "single_transformer_blocks.0.attn.to_out.weight");
    MAP1("single_blocks.3.norm.query_norm.scale", 128, "single_transformer_blocks.3.attn.norm_q.weight");
    MAP1("single_blocks.3.norm.key_norm.scale", 128, "single_transformer_blocks.3.attn.norm_k.weight");
    MAP1("final_layer.linear.weight", 128, "proj_out.weight");

    /* the final layer: diffusers rows (scale, shift) = BFL rows [d, 2d), [0, d) */
    fx_bfl_target t[3];
    REQUIRE(fx_bfl_map_name("final_layer.adaLN_modulation.1.weight", "F", 6144, t) == 1);
    CHECK(!strcmp(t[0].name, "norm_out.linear.weight") && t[0].n_ranges == 2);
    CHECK(t[0].ranges[0].row0 == 3072 && t[0].ranges[0].rows == 3072);
    CHECK(t[0].ranges[1].row0 == 0 && t[0].ranges[1].rows == 3072);

    /* ignored, unknown, unsplittable */
    CHECK_EQ_INT(fx_bfl_map_name("guidance_in.in_layer.weight", "g", 3072, t), -1);
    CHECK_EQ_INT(fx_bfl_map_name("guidance_in.out_layer.weight", "g", 3072, t), -1);
    CHECK_EQ_INT(fx_bfl_map_name("double_blocks.0.img_attn.qkv.bias", "b", 9216, t), 0);
    CHECK_EQ_INT(fx_bfl_map_name("double_blocks.x.img_mlp.0.weight", "b", 9216, t), 0);
    CHECK_EQ_INT(fx_bfl_map_name("double_blocks.01.img_mlp.0.weight", "b", 9216, t), 0);
    CHECK_EQ_INT(fx_bfl_map_name("single_blocks.0.modulation.lin.weight", "b", 9216, t), 0);
    CHECK_EQ_INT(fx_bfl_map_name("x_embedder.weight", "b", 3072, t), 0);
    CHECK_EQ_INT(fx_bfl_map_name("double_blocks.0.txt_attn.qkv.weight", "q", 9217, t), -2);
    CHECK_EQ_INT(fx_bfl_map_name("final_layer.adaLN_modulation.1.weight", "f", 6145, t), -2);
}

/* ------------------------------------------------------------------------ */
/* Views (weight_set.h)                                                     */
/* ------------------------------------------------------------------------ */

/* A small file: "a" F32 [4, 3] = 0..11, "b" BF16 [2, 3], "c" F32 [2, 3] = 100.. */
static const char *write_small_file(void) {
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/small.safetensors", fx_test_tmpdir());
    const char hdr[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[4,3],\"data_offsets\":[0,48]},"
                       "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[48,60]},"
                       "\"c\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[60,84]}}";
    size_t hl = (sizeof hdr - 1 + 7) / 8 * 8;
    uint8_t buf[8 + 256 + 84];
    memset(buf, ' ', sizeof buf);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(hl >> 8 * i);
    memcpy(buf + 8, hdr, sizeof hdr - 1);
    float a[12], c[6];
    uint16_t b[6];
    for (int i = 0; i < 12; i++) a[i] = (float)i;
    for (int i = 0; i < 6; i++) b[i] = (uint16_t)(0x3f80 + i), c[i] = 100.0f + (float)i;
    memcpy(buf + 8 + hl, a, 48);
    memcpy(buf + 8 + hl + 48, b, 12);
    memcpy(buf + 8 + hl + 60, c, 24);
    return fx_test_write_file(path, buf, 8 + hl + 84) == 0 ? path : NULL;
}

TEST(single_file_views) {
    const char *path = write_small_file();
    REQUIRE(path);
    fx_err err = {0};
    fx_wset *base = fx_wset_open(path, "small.safetensors", 1, &err);
    REQUIRE_MSG(base, "%s", err.msg);
    const float *a_data = fx_tensor_data(fx_wset_find(base, "a"));
    fx_wset *v = fx_wset_view_new(base, "view", 8, &err);
    REQUIRE(v && fx_wset_view_base(v) == base);
    /* one range: rows 1..3 of a */
    CHECK(fx_wset_view_add(v, "mid", &(fx_wset_range){"a", 1, 2}, 1, &err) == FLUX_OK);
    /* two ranges: a's rows 2..4 then 0..2 (a swap of halves) */
    fx_wset_range sw[2] = {{"a", 2, 2}, {"a", 0, 2}};
    CHECK(fx_wset_view_add(v, "swapped", sw, 2, &err) == FLUX_OK);
    /* stacking two tensors */
    fx_wset_range ac[2] = {{"a", 0, 1}, {"c", 0, 2}};
    CHECK(fx_wset_view_add(v, "stack", ac, 2, &err) == FLUX_OK);

    CHECK_EQ_INT(fx_wset_count(v), 3);
    CHECK(fx_wset_find(v, "a") == NULL); /* only view tensors are visible */
    const fx_tensor *mid = fx_wset_find(v, "mid"), *swp = fx_wset_find(v, "swapped");
    REQUIRE(mid && swp);
    CHECK(fx_shape_eq(&mid->shape, &FX_SHAPE(2, 3)) && fx_shape_eq(&swp->shape, &FX_SHAPE(4, 3)));
    CHECK(fx_tensor_data(mid) == a_data + 3); /* no copy */
    CHECK(fx_tensor_data(swp) == NULL);       /* no single data pointer */

    fx_weight w;
    CHECK(fx_wset_linear(v, "mid", 2, 3, &w, &err) == FLUX_OK && w.data == a_data + 3 && w.n == 2);
    CHECK(fx_wset_linear(v, "swapped", 4, 3, &w, &err) == FLUX_ERR_MODEL);
    CHECK(strstr(err.msg, "two row ranges") != NULL);
    /* rows inside one range are views of the source */
    CHECK(fx_wset_linear_rows(v, "swapped", 4, 3, 0, 2, &w, &err) == FLUX_OK && w.data == a_data + 6 && w.n == 2);
    CHECK(fx_wset_linear_rows(v, "swapped", 4, 3, 3, 1, &w, &err) == FLUX_OK && w.data == a_data + 3 && w.n == 1);
    CHECK(fx_wset_linear_rows(v, "swapped", 4, 3, 1, 2, &w, &err) == FLUX_ERR_MODEL); /* spans both */
    CHECK(fx_wset_linear_rows(v, "swapped", 4, 3, 3, 2, &w, &err) == FLUX_ERR_INVALID_ARG);
    CHECK(fx_wset_linear_rows(v, "mid", 2, 3, 1, 1, &w, &err) == FLUX_OK && w.data == a_data + 6);
    CHECK(fx_wset_linear_rows(v, "swapped", 4, 4, 0, 1, &w, &err) == FLUX_ERR_MODEL); /* shape checked */

    float got[12];
    const float want_swapped[12] = {6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5};
    CHECK(fx_wset_read_f32(v, "swapped", &FX_SHAPE(4, 3), got, &err) == FLUX_OK);
    CHECK(!memcmp(got, want_swapped, sizeof want_swapped));
    float *all = NULL;
    int64_t numel = 0;
    CHECK(fx_wset_f32(v, "stack", &FX_SHAPE(3, 3), &all, &numel, &err) == FLUX_OK && numel == 9);
    const float want_stack[9] = {0, 1, 2, 100, 101, 102, 103, 104, 105};
    CHECK(all && !memcmp(all, want_stack, sizeof want_stack));
    free(all);

    /* shape errors name the source */
    CHECK(fx_wset_check_weight(v, "swapped", &FX_SHAPE(4, 4), &err) == FLUX_ERR_MODEL);
    CHECK_MSG(strstr(err.msg, "rows 2..4 of 'a'") && strstr(err.msg, "rows 0..2 of 'a'") &&
                  strstr(err.msg, "[4, 3]") && strstr(err.msg, "expected [4, 4]"),
              "message: %s", err.msg);

    /* bad additions */
    CHECK(fx_wset_view_add(v, "x", &(fx_wset_range){"nope", 0, 1}, 1, &err) == FLUX_ERR_MODEL);
    CHECK(strstr(err.msg, "'nope' not found") != NULL);
    CHECK(fx_wset_view_add(v, "x", &(fx_wset_range){"a", 3, 2}, 1, &err) == FLUX_ERR_MODEL);
    fx_wset_range mixed[2] = {{"a", 0, 1}, {"b", 0, 1}}; /* F32 + BF16 */
    CHECK(fx_wset_view_add(v, "x", mixed, 2, &err) == FLUX_ERR_MODEL);
    CHECK(fx_wset_view_add(v, "mid", &(fx_wset_range){"a", 0, 1}, 1, &err) == FLUX_ERR_FORMAT);
    CHECK(fx_wset_view_add(v, "x", &(fx_wset_range){"a", 0, 1}, 3, &err) == FLUX_ERR_INVALID_ARG);
    for (int i = 0; i < 5; i++) {
        char name[8];
        snprintf(name, sizeof name, "f%d", i);
        flux_status s = fx_wset_view_add(v, name, &(fx_wset_range){"c", 0, 1}, 1, &err);
        CHECK(i < 5 && (s == FLUX_OK) == (3 + i < 8));
    }

    /* dropping and reloading data acts on the base's files */
    fx_wset_drop_data(v);
    CHECK(!fx_wset_data_loaded(v) && fx_tensor_data(fx_wset_find(v, "mid")) == NULL);
    CHECK(fx_wset_read_f32(v, "swapped", NULL, got, &err) == FLUX_ERR_STATE);
    CHECK(fx_wset_load_data(v, 0, &err) == FLUX_OK && fx_wset_data_loaded(v));
    CHECK(fx_wset_read_f32(v, "swapped", NULL, got, &err) == FLUX_OK && !memcmp(got, want_swapped, sizeof got));
    fx_wset_close(v); /* closes base too (ASan: no leak, no double free) */
}

/* ------------------------------------------------------------------------ */
/* Whole checkpoints                                                        */
/* ------------------------------------------------------------------------ */

TEST(single_file_layouts_match_the_folder) {
    fx_wset *folder = open_folder_transformer();
    REQUIRE(folder);
    static const struct {
        const char *layout, *flags;
        fx_ckpt_layout want;
        int prefixed;
        size_t ignored;
    } cases[] = {
        {"bfl", "", FX_CKPT_BFL, 0, 0},
        {"bfl", "--guidance-in", FX_CKPT_BFL, 0, 2},
        {"comfyui", "--guidance-in --extra-component", FX_CKPT_BFL, 1, 3},
        {"diffusers", "", FX_CKPT_DIFFUSERS, 0, 0},
        {"diffusers", "--extra-component", FX_CKPT_DIFFUSERS, 0, 0}, /* extra name just visible */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const char *path = make_file(cases[c].layout, cases[c].flags);
        if (!path) continue;
        fx_err err = {0};
        fx_single_file_info info;
        fx_wset *w = fx_single_file_open(path, 1, NULL, &info, &err);
        if (!w) {
            fx_test_fail(__FILE__, __LINE__, "%s %s: %s", cases[c].layout, cases[c].flags, err.msg);
            continue;
        }
        CHECK_EQ_INT(info.layout, cases[c].want);
        CHECK_EQ_INT(info.prefixed, cases[c].prefixed);
        CHECK_EQ_INT(info.ignored, cases[c].ignored);
        if (strstr(cases[c].flags, "extra") && cases[c].want == FX_CKPT_DIFFUSERS) {
            CHECK(fx_wset_find(w, "vae.decoder.conv_in.weight") != NULL);
        } else {
            expect_same_tensors(__LINE__, folder, w);
        }
        fx_wset_close(w);
    }
    fx_wset_close(folder);
}

TEST(single_file_bfl_rows_are_the_spec_rows) {
    /* Independent of both mappings: read the BFL file's bytes directly and
     * compare with the folder's tensors as diffusers convert_flux2_to_diffusers.py maps BFL names. */
    const char *path = make_file("bfl", "");
    REQUIRE(path);
    size_t len = 0;
    uint8_t *file = (uint8_t *)fx_test_read_file(path, &len);
    REQUIRE(file);
    fx_wset *folder = open_folder_transformer();
    REQUIRE(folder);
    const int64_t d = 64; /* tiny model hidden size */
    int64_t nb = 0;
    /* to_k = qkv rows [d, 2d); add_v_proj = txt qkv rows [2d, 3d) */
    const uint8_t *qkv = raw_tensor(file, "double_blocks.1.img_attn.qkv.weight", &nb);
    REQUIRE(qkv && nb == 3 * d * d * 2);
    const fx_tensor *k = fx_wset_find(folder, "transformer_blocks.1.attn.to_k.weight");
    REQUIRE(k && k->dtype == FX_DTYPE_BF16);
    CHECK(!memcmp(qkv + d * d * 2, fx_tensor_data(k), (size_t)(d * d * 2)));
    const uint8_t *tqkv = raw_tensor(file, "double_blocks.0.txt_attn.qkv.weight", &nb);
    const fx_tensor *v = fx_wset_find(folder, "transformer_blocks.0.attn.add_v_proj.weight");
    REQUIRE(tqkv && v);
    CHECK(!memcmp(tqkv + 2 * d * d * 2, fx_tensor_data(v), (size_t)(d * d * 2)));
    /* final layer: BFL (shift, scale), diffusers norm_out (scale, shift) */
    const uint8_t *fin = raw_tensor(file, "final_layer.adaLN_modulation.1.weight", &nb);
    const fx_tensor *no = fx_wset_find(folder, "norm_out.linear.weight");
    REQUIRE(fin && no && nb == no->nbytes);
    const uint8_t *scale = fx_tensor_data(no), *shift = scale + d * d * 2;
    CHECK(!memcmp(fin, shift, (size_t)(d * d * 2)));
    CHECK(!memcmp(fin + d * d * 2, scale, (size_t)(d * d * 2)));
    free(file);
    fx_wset_close(folder);
}

/* One transformer call with the golden inputs at σ = 0.7 (velocity malloc'd). */
static float *velocity(const char *transformer_file, flux_precision prec, int64_t *count) {
    flux_options o;
    flux_options_init(&o);
    o.precision = prec;
    flux_ctx *ctx = flux_new(&o);
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.transformer_file = transformer_file;
    float *v = NULL, *x = NULL;
    fx_npy noise = {0}, emb = {0};
    fx_err err = {0};
    fx_dit *dit = NULL;
    fx_dit_run *run = NULL;
    if (!ctx || flux_load(ctx, fx_test_path("golden/model"), &lo) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "flux_load(%s): %s", transformer_file ? transformer_file : "folder",
                     flux_error(ctx));
        goto out;
    }
    if (fx_npy_read(fx_test_path("golden/t2i-48x64-2step/noise.npy"), &noise, &err) ||
        fx_npy_read(fx_test_path("golden/t2i-48x64-2step/out/emb.npy"), &emb, &err)) {
        fx_test_fail(__FILE__, __LINE__, "%s", err.msg);
        goto out;
    }
    int h = (int)noise.shape[1], w = (int)noise.shape[2], N = h * w;
    fx_dit_layout lay = {.batch = 1, .text_len = 512, .n_images = 1, .grid_h = {h}, .grid_w = {w}};
    if (fx_dit_get(ctx, &dit) || fx_dit_run_new(ctx, dit, &lay, &run)) {
        fx_test_fail(__FILE__, __LINE__, "transformer: %s", flux_error(ctx));
        goto out;
    }
    x = malloc((size_t)N * 128 * sizeof *x);
    v = malloc((size_t)N * 128 * sizeof *v);
    fx_latents_pack(noise.data, 128, h, w, x, 128);
    const float *ep[1] = {emb.data};
    if (fx_dit_run_set_text(run, ep) || fx_dit_forward(run, x, 0.7f, v)) {
        fx_test_fail(__FILE__, __LINE__, "forward: %s", flux_error(ctx));
        free(v);
        v = NULL;
    }
    *count = (int64_t)N * 128;
out:
    free(x);
    fx_dit_run_free(run);
    fx_npy_free(&noise);
    fx_npy_free(&emb);
    flux_free(ctx);
    return v;
}

TEST(single_file_same_velocity_as_the_folder) {
    const char *bfl = make_file("bfl", "--guidance-in");
    const char *comfy = make_file("comfyui", "--extra-component");
    REQUIRE(bfl && comfy);
    flux_precision precs[2] = {FLUX_PRECISION_DEFAULT, FLUX_PRECISION_F32};
    for (int p = 0; p < 2; p++) {
        int64_t n0 = 0, n1 = 0, n2 = 0;
        float *ref = velocity(NULL, precs[p], &n0);
        float *a = velocity(bfl, precs[p], &n1);
        float *b = velocity(comfy, precs[p], &n2);
        REQUIRE(ref && a && b && n0 == n1 && n0 == n2);
        CHECK_MSG(!memcmp(ref, a, (size_t)n0 * 4), "BFL file: velocity differs (precision %d)", p);
        CHECK_MSG(!memcmp(ref, b, (size_t)n0 * 4), "ComfyUI file: velocity differs (precision %d)", p);
        free(ref), free(a), free(b);
    }
}

/* 1 if two PNG files load and hold the same pixels. */
static int same_png(const char *a, const char *b) {
    flux_ctx *ctx = flux_new(NULL);
    flux_image *x = NULL, *y = NULL;
    int same = ctx && flux_image_load(ctx, a, &x) == FLUX_OK && flux_image_load(ctx, b, &y) == FLUX_OK &&
               fx_test_same_pixels(x, y);
    flux_image_free(x), flux_image_free(y);
    flux_free(ctx);
    return same;
}

/* ---- fp8 checkpoints (README "fp8 checkpoints") ---- */

/* make_single_file with fp8 flags into <tag>.safetensors (static buffer per call). */
static const char *make_fp8_file(const char *layout, const char *flags, const char *tag) {
    static char paths[4][PATH_MAX];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, PATH_MAX, "%s/%s.safetensors", fx_test_tmpdir(), tag);
    char args[3 * PATH_MAX];
    snprintf(args, sizeof args, "--layout %s -d '%s' -o '%s' %s", layout, fx_test_path("golden/model"), path, flags);
    return FX_TEST_RUN_TOOL("make_single_file", args) ? NULL : path;
}

/* max |a − b| / max |b| over n values. */
static double rel_diff(const float *a, const float *b, int64_t n) {
    double d = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fabs((double)a[i] - b[i]) > d ? fabs((double)a[i] - b[i]) : d;
        m = fabs((double)b[i]) > m ? fabs((double)b[i]) : m;
    }
    return m > 0 ? d / m : d;
}

/* The golden transformer as ComfyUI fp8 files (E4M3 with the scaled-fp8
 * keys and marker, BFL names; E5M2 with '.weight_scale', diffusers names)
 * against the same weights dequantized to F32 (f32(fp8)·scale): in f32
 * mode the velocities agree to 1e-5 relative (the products are the same
 * sums); in the default precision the fp8 file gives bit for bit the
 * velocity of those weights rounded to BF16 (the bf16 kernels' operands),
 * and its distance to the F32 weights is printed. */
TEST(single_file_fp8_matches_the_dequantized_model) {
    static const struct {
        const char *layout, *flags, *tag;
    } files[2] = {{"comfyui", "--fp8 e4m3 --fp8-legacy", "fp8-e4m3"}, {"diffusers", "--fp8 e5m2", "fp8-e5m2"}};
    for (int f = 0; f < 2; f++) {
        char fp8[PATH_MAX], deq[PATH_MAX], flags[128];
        const char *p = make_fp8_file(files[f].layout, files[f].flags, files[f].tag);
        REQUIRE(p);
        snprintf(fp8, sizeof fp8, "%s", p);
        snprintf(flags, sizeof flags, "%s --dequantized", files[f].flags);
        snprintf(deq, sizeof deq, "%s-deq", files[f].tag);
        p = make_fp8_file(files[f].layout, flags, deq);
        REQUIRE(p);
        snprintf(deq, sizeof deq, "%s", p);
        char bf16[PATH_MAX];
        snprintf(flags, sizeof flags, "%s --dequantized-bf16", files[f].flags);
        snprintf(bf16, sizeof bf16, "%s-bf16", files[f].tag);
        p = make_fp8_file(files[f].layout, flags, bf16);
        REQUIRE(p);
        snprintf(bf16, sizeof bf16, "%s", p);
        flux_precision precs[2] = {FLUX_PRECISION_F32, FLUX_PRECISION_DEFAULT};
        for (int q = 0; q < 2; q++) {
            int64_t n0 = 0, n1 = 0, n2 = 0;
            float *ref = velocity(deq, precs[q], &n0), *got = velocity(fp8, precs[q], &n1);
            float *rb = q ? velocity(bf16, precs[q], &n2) : NULL;
            REQUIRE(ref && got && n0 == n1 && (!q || (rb && n2 == n0)));
            const double d = rel_diff(got, ref, n0);
            printf("    %s %s: velocity max |fp8 - F32 dequantized| / max |v| = %.3g\n", files[f].tag,
                   q ? "default precision" : "f32", d);
            if (!q) CHECK_MSG(d <= 1e-5, "%s f32: relative difference %.3g > 1e-5", files[f].tag, d);
            else CHECK_MSG(!memcmp(got, rb, (size_t)n0 * 4), "%s default precision: differs from the BF16-rounded weights",
                           files[f].tag);
            free(ref), free(got), free(rb);
        }
    }
}

/* The fp8 transformer stays mapped: flux -v reports no converted weights
 * (no whole copy, no int8 form); --quant reads its scaled values. */
TEST(single_file_fp8_stays_mapped) {
    const char *p = make_fp8_file("comfyui", "--fp8 e4m3 --fp8-legacy", "fp8-mapped");
    REQUIRE(p);
    char fp8[PATH_MAX], cmd[6 * PATH_MAX], *out = NULL;
    snprintf(fp8, sizeof fp8, "%s", p);
    snprintf(cmd, sizeof cmd, "'%s' -v -d '%s' -p 'a boat' -W 64 -H 64 -s 2 -S 5 -o '%s' --transformer '%s' 2>&1",
             fx_test_flux_bin(), fx_test_path("golden/model"), fx_test_tmp_path("fp8.png"), fp8);
    int rc = fx_test_run(cmd, &out);
    REQUIRE(out);
    CHECK_MSG(rc == 0, "flux: %s", out);
    CHECK_MSG(strstr(out, "converted weights 0 KB") != NULL, "memory line lacks 'converted weights 0 KB': %s", out);
    CHECK_MSG(strstr(out, "mapped weights resident") != NULL, "no memory line: %s", out);
    free(out);

    /* --quant q8_0 from the fp8 file quantizes its values f32(fp8)·scale:
     * the image of the F32-dequantized file quantized the same way */
    p = make_fp8_file("comfyui", "--fp8 e4m3 --fp8-legacy --dequantized", "fp8-mapped-deq");
    REQUIRE(p);
    char deq[PATH_MAX], p1[PATH_MAX], p2[PATH_MAX];
    snprintf(deq, sizeof deq, "%s", p);
    snprintf(p1, sizeof p1, "%s", fx_test_tmp_path("q-fp8.png"));
    snprintf(p2, sizeof p2, "%s", fx_test_tmp_path("q-deq.png"));
    snprintf(cmd, sizeof cmd, "'%s' -q -d '%s' -p 'a boat' -W 64 -H 64 -s 2 -S 5 --quant q8_0 -o '%s' --transformer '%s' && "
             "'%s' -q -d '%s' -p 'a boat' -W 64 -H 64 -s 2 -S 5 --quant q8_0 -o '%s' --transformer '%s'",
             fx_test_flux_bin(), fx_test_path("golden/model"), p1, fp8, fx_test_flux_bin(), fx_test_path("golden/model"),
             p2, deq);
    rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0, "flux --quant: %s", out ? out : "");
    free(out);
    CHECK_MSG(same_png(p1, p2), "--quant q8_0 of the fp8 file differs from that of its dequantized weights");
}

/* DoRA on an fp8 transformer: the row norms ‖W + s·ΔW‖ read the weight's
 * values f32(fp8)·scale (not the unscaled fp8), so in f32 the run equals,
 * bit for bit, the same adapter on the F32-dequantized file (the unscaled
 * norms moved the latents by ~0.9 of their range). */
TEST(single_file_fp8_dora_matches_the_dequantized_model) {
    char fp8[PATH_MAX], deq[PATH_MAX], dora[PATH_MAX], args[3 * PATH_MAX];
    const char *p = make_fp8_file("comfyui", "--fp8 e4m3", "fp8-dora");
    REQUIRE(p);
    snprintf(fp8, sizeof fp8, "%s", p);
    p = make_fp8_file("comfyui", "--fp8 e4m3 --dequantized", "fp8-dora-deq");
    REQUIRE(p);
    snprintf(deq, sizeof deq, "%s", p);
    snprintf(dora, sizeof dora, "%s", fx_test_tmp_path("fp8-dora-adapter.safetensors"));
    snprintf(args, sizeof args, "-d '%s' -o '%s' --format bfl --rank 4 --seed 3 --dora out", fx_test_path("golden/model"),
             dora);
    REQUIRE(!FX_TEST_RUN_TOOL("gen_lora", args));
    const char *files[2] = {fp8, deq};
    fx_npy lat[2] = {{0}};
    for (int f = 0; f < 2; f++) {
        char dump[PATH_MAX], cmd[6 * PATH_MAX], *out = NULL;
        snprintf(dump, sizeof dump, "%s", fx_test_tmp_path(f ? "dora-deq" : "dora-fp8"));
        mkdir(dump, 0777);
        snprintf(cmd, sizeof cmd, "FLUX_PRECISION=f32 '%s' -q --backend cpu -d '%s' -p 'a boat' -W 64 -H 64 -s 1 -S 3 "
                 "-o '%s/out.png' --dump '%s' --transformer '%s' --lora '%s' 2>&1", fx_test_flux_bin(),
                 fx_test_path("golden/model"), dump, dump, files[f], dora);
        int rc = fx_test_run(cmd, &out);
        CHECK_MSG(rc == 0, "flux: %s", out ? out : "");
        free(out);
        char path[PATH_MAX + 16];
        snprintf(path, sizeof path, "%s/latents.npy", dump);
        fx_err err = {0};
        CHECK_MSG(fx_npy_read(path, &lat[f], &err) == FLUX_OK, "%s", err.msg);
    }
    if (lat[0].data && lat[1].data) {
        REQUIRE(lat[0].count == lat[1].count);
        const double d = rel_diff(lat[0].data, lat[1].data, (int64_t)lat[0].count);
        printf("    DoRA latents: max |fp8 - F32 dequantized| / max = %.3g\n", d);
        CHECK_MSG(d == 0.0, "DoRA on the fp8 file differs from DoRA on its dequantized weights by %.3g", d);
    }
    fx_npy_free(&lat[0]), fx_npy_free(&lat[1]);
}

TEST(single_file_folder_needs_no_transformer_weights) {
    /* --transformer replaces the weights in transformer/: a folder with only
     * transformer/config.json loads. */
    const char *bfl = make_file("bfl", "");
    REQUIRE(bfl);
    char dir[PATH_MAX], cmd[4 * PATH_MAX], *out = NULL;
    const char *src = fx_test_path("golden/model");
    snprintf(dir, sizeof dir, "%s/model", fx_test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/transformer' && for f in '%s'/*; do b=$(basename \"$f\"); "
             "[ \"$b\" = transformer ] || ln -s \"$(readlink -f \"$f\")\" '%s/'\"$b\"; done && "
             "cp '%s/transformer/config.json' '%s/transformer/'",
             dir, src, dir, src, dir);
    REQUIRE(fx_test_run(cmd, &out) == 0);
    free(out);
    flux_ctx *ctx = flux_new(NULL);
    flux_load_options lo;
    flux_load_options_init(&lo);
    CHECK(flux_load(ctx, dir, &lo) == FLUX_ERR_IO); /* no weights in the folder */
    lo.transformer_file = bfl;
    CHECK_MSG(flux_load(ctx, dir, &lo) == FLUX_OK, "%s", flux_error(ctx));
    flux_model_info info;
    CHECK(flux_get_model_info(ctx, &info) == FLUX_OK && info.hidden == 64 && info.double_blocks == 2);
    flux_free(ctx);
}

/* Write a file of named BF16/F32 tensors with the given shapes (zeros). */
static const char *write_named(const char *file, int n, const char *const *names, const fx_shape *shapes) {
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", fx_test_tmpdir(), file);
    char hdr[8192];
    size_t hl = 0;
    int64_t off = 0;
    hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, "{");
    for (int i = 0; i < n; i++) {
        int64_t bytes = fx_shape_numel(&shapes[i]) * 2;
        hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[", i ? "," : "",
                               names[i]);
        for (int d = 0; d < shapes[i].ndim; d++)
            hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, d ? ",%lld" : "%lld", (long long)shapes[i].d[d]);
        hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, "],\"data_offsets\":[%lld,%lld]}", (long long)off,
                               (long long)(off + bytes));
        off += bytes;
    }
    hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, "}");
    while (hl % 8) hdr[hl++] = ' ';
    size_t total = 8 + hl + (size_t)off;
    uint8_t *buf = calloc(1, total);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(hl >> 8 * i);
    memcpy(buf + 8, hdr, hl);
    int rc = fx_test_write_file(path, buf, total);
    free(buf);
    return rc == 0 ? path : NULL;
}

static void expect_open_error(int line, const char *path, flux_status code, const char *frag1, const char *frag2) {
    fx_err err = {0};
    fx_wset *w = fx_single_file_open(path, 1, NULL, NULL, &err);
    if (w) {
        fx_test_fail(__FILE__, line, "%s opened", path);
        fx_wset_close(w);
        return;
    }
    if (err.code != code) fx_test_fail(__FILE__, line, "code %s, want %s: %s", flux_status_name(err.code),
                                       flux_status_name(code), err.msg);
    if (!strstr(err.msg, frag1) || (frag2 && !strstr(err.msg, frag2)))
        fx_test_fail(__FILE__, line, "message lacks '%s'/'%s': %s", frag1, frag2 ? frag2 : "", err.msg);
}

TEST(single_file_errors) {
    const char *n1[2] = {"double_blocks.0.img_attn.qkv.weight", "double_blocks.0.img_attn.qkv.bias"};
    fx_shape s1[2] = {FX_SHAPE(12, 4), FX_SHAPE(12)};
    expect_open_error(__LINE__, write_named("bias.safetensors", 2, n1, s1), FLUX_ERR_MODEL,
                      "'double_blocks.0.img_attn.qkv.bias'", "not part of the FLUX.2-klein transformer");
    fx_shape s2[1] = {FX_SHAPE(13, 4)};
    expect_open_error(__LINE__, write_named("qkv13.safetensors", 1, n1, s2), FLUX_ERR_MODEL, "13 rows",
                      "q, k and v thirds");
    const char *n3[1] = {"final_layer.adaLN_modulation.1.weight"};
    fx_shape s3[1] = {FX_SHAPE(7, 4)};
    expect_open_error(__LINE__, write_named("fin7.safetensors", 1, n3, s3), FLUX_ERR_MODEL, "7 rows",
                      "shift and scale halves");
    const char *n4[2] = {"decoder.conv_in.weight", "encoder.conv_in.weight"};
    fx_shape s4[2] = {FX_SHAPE(2, 2), FX_SHAPE(2, 2)};
    expect_open_error(__LINE__, write_named("vae.safetensors", 2, n4, s4), FLUX_ERR_MODEL,
                      "not a FLUX.2 transformer checkpoint", NULL);
    const char *n5[2] = {"double_blocks.0.img_mlp.0.weight", "transformer_blocks.0.ff.linear_in.weight"};
    expect_open_error(__LINE__, write_named("mixed.safetensors", 2, n5, s4), FLUX_ERR_MODEL, "mixes BFL", NULL);
    /* an all-in-one file's other components are errors without the prefix */
    const char *extra = make_file("bfl", "--extra-component");
    if (extra)
        expect_open_error(__LINE__, extra, FLUX_ERR_MODEL, "'vae.decoder.conv_in.weight'", "not part of");
    char missing[PATH_MAX];
    snprintf(missing, sizeof missing, "%s/none.safetensors", fx_test_tmpdir());
    expect_open_error(__LINE__, missing, FLUX_ERR_IO, "none.safetensors", NULL);

    /* a misshapen mapped tensor: flux_load's shape check names the BFL source */
    const char *bfl = make_file("bfl", "");
    REQUIRE(bfl);
    size_t len = 0;
    char *file = fx_test_read_file(bfl, &len);
    REQUIRE(file);
    /* qkv [192, 64] → claim [96, 128] (same bytes): q/k/v become [32, 128] */
    static const char entry[] = "\"double_blocks.1.img_attn.qkv.weight\":{\"dtype\":\"BF16\",\"shape\":[192,64]";
    char *p = memmem(file + 8, len - 8, entry, sizeof entry - 1); /* past the binary length */
    REQUIRE(p);
    memcpy(p + sizeof entry - 1 - 8, "[96,128]", 8);
    char bad[PATH_MAX];
    snprintf(bad, sizeof bad, "%s/badshape.safetensors", fx_test_tmpdir());
    REQUIRE(fx_test_write_file(bad, file, len) == 0);
    free(file);
    flux_ctx *ctx = flux_new(NULL);
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.transformer_file = bad;
    CHECK(flux_load(ctx, fx_test_path("golden/model"), &lo) == FLUX_ERR_MODEL);
    CHECK_MSG(strstr(flux_error(ctx), "transformer_blocks.1.attn.to_q.weight") &&
                  strstr(flux_error(ctx), "rows 0..32 of 'double_blocks.1.img_attn.qkv.weight'") &&
                  strstr(flux_error(ctx), "expected [64, 64]"),
              "message: %s", flux_error(ctx));
    flux_free(ctx);
}

/* ------------------------------------------------------------------------ */
/* Whole generations                                                        */
/* ------------------------------------------------------------------------ */

static flux_image *generate_with(const char *transformer_file) {
    flux_ctx *ctx = flux_new(NULL);
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.transformer_file = transformer_file;
    flux_image *img = NULL;
    if (!ctx || flux_load(ctx, fx_test_path("golden/model"), &lo) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "flux_load: %s", flux_error(ctx));
    } else {
        flux_params p;
        flux_params_init(&p);
        p.prompt = "a lighthouse at dusk";
        p.width = 64, p.height = 80, p.steps = 2, p.seed = 17;
        if (flux_generate(ctx, &p, &img) != FLUX_OK) fx_test_fail(__FILE__, __LINE__, "%s", flux_error(ctx));
    }
    flux_free(ctx);
    return img;
}

TEST(single_file_same_image_as_the_folder) {
    const char *bfl = make_file("bfl", "--guidance-in");
    REQUIRE(bfl);
    char bfl_path[PATH_MAX];
    snprintf(bfl_path, sizeof bfl_path, "%s", bfl);
    const char *comfy = make_file("comfyui", "--extra-component");
    REQUIRE(comfy);
    flux_image *ref = generate_with(NULL), *a = generate_with(bfl_path), *b = generate_with(comfy);
    CHECK_MSG(fx_test_same_pixels(ref, a), "BFL file: image differs from the folder's");
    CHECK_MSG(fx_test_same_pixels(ref, b), "ComfyUI file: image differs from the folder's");
    flux_image_free(ref), flux_image_free(a), flux_image_free(b);

    /* the same through the CLI's --transformer */
    char cmd[4 * PATH_MAX], *out = NULL, p1[PATH_MAX], p2[PATH_MAX];
    snprintf(p1, sizeof p1, "%s/folder.png", fx_test_tmpdir());
    snprintf(p2, sizeof p2, "%s/single.png", fx_test_tmpdir());
    snprintf(cmd, sizeof cmd, "'%s' -q -d '%s' -p 'a boat' -W 64 -H 64 -s 2 -S 5 -o '%s' && "
             "'%s' -q -d '%s' -p 'a boat' -W 64 -H 64 -s 2 -S 5 -o '%s' --transformer '%s'",
             fx_test_flux_bin(), fx_test_path("golden/model"), p1, fx_test_flux_bin(), fx_test_path("golden/model"), p2,
             bfl_path);
    int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0, "flux: %s", out);
    free(out);
    CHECK_MSG(same_png(p1, p2), "CLI --transformer: image differs");
}
