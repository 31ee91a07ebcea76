/*
 * test_config_derive.c — configs from tensor shapes (config_derive.h) for
 * the published FLUX.2-klein 4B and 9B geometries: sparse safetensors files
 * (headers with the real shapes, data a hole: nothing is read) in the
 * layouts users download — the transformer with BFL names, the text
 * encoder with Hugging Face names — derived, checked against the full tensor
 * tables, and compared with the published config values (diffusers
 * scripts/convert_flux2_to_diffusers.py klein-4b / klein-9b configs;
 * Qwen/Qwen3-4B and Qwen3-8B config.json). And the variant hint of a
 * safetensors __metadata__ key. The tiny golden model's derivation is
 * compared with its config files in tests/pipeline/test_three_files.c.
 */
#include "tests/test.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/formats/qwen3_file.h"
#include "src/formats/safetensors_write.h"
#include "src/formats/single_file.h"
#include "src/model/config_derive.h"
#include "src/model/model.h"
#include "src/model/variant.h"

typedef struct entries {
    fx_safetensors_entry e[1024];
    char names[1024][96];
    size_t n;
    int64_t end;
} entries;

static void add(entries *t, fx_shape shape, const char *fmt, int i) {
    if (t->n == 1024) { fx_test_fail(__FILE__, __LINE__, "too many tensors"); return; }
    snprintf(t->names[t->n], sizeof t->names[t->n], fmt, i);
    int64_t numel = 1;
    for (int d = 0; d < shape.ndim; d++) numel *= shape.d[d];
    t->e[t->n] = (fx_safetensors_entry){t->names[t->n], FX_DTYPE_BF16, shape, t->end, t->end + 2 * numel};
    t->end += 2 * numel;
    t->n++;
}

/* The header, then a hole as long as the data (a sparse file). */
static const char *write_sparse(const char *name, const entries *t, const char *const *meta, size_t n_meta) {
    static char path[4][PATH_MAX];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, PATH_MAX, "%s/%s", fx_test_tmpdir(), name);
    fx_strbuf h = {0};
    fx_err err = {0};
    if (fx_safetensors_header(&h, t->e, t->n, meta, n_meta, name, &err) != FLUX_OK || h.failed) {
        fx_test_fail(__FILE__, __LINE__, "header: %s", err.msg);
        free(h.s);
        return NULL;
    }
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
    int ok = fd >= 0 && write(fd, len, 8) == 8 && write(fd, h.s, h.len) == (ssize_t)h.len &&
             ftruncate(fd, (off_t)(8 + h.len + (size_t)t->end)) == 0;
    if (fd >= 0) close(fd);
    free(h.s);
    if (!ok) fx_test_fail(__FILE__, __LINE__, "cannot write %s", p);
    return ok ? p : NULL;
}

/* The klein transformer with BFL names (flux-2-klein-4b.safetensors). */
static void bfl_transformer(entries *t, int64_t d, int64_t hd, int64_t m, int nd, int ns, int64_t text) {
    memset(t, 0, sizeof *t);
    add(t, FX_SHAPE(d, 128), "img_in.weight", 0);
    add(t, FX_SHAPE(d, text), "txt_in.weight", 0);
    add(t, FX_SHAPE(d, 256), "time_in.in_layer.weight", 0);
    add(t, FX_SHAPE(d, d), "time_in.out_layer.weight", 0);
    add(t, FX_SHAPE(6 * d, d), "double_stream_modulation_img.lin.weight", 0);
    add(t, FX_SHAPE(6 * d, d), "double_stream_modulation_txt.lin.weight", 0);
    add(t, FX_SHAPE(3 * d, d), "single_stream_modulation.lin.weight", 0);
    for (int i = 0; i < nd; i++)
        for (int s = 0; s < 2; s++) {
            char f[96];
            const char *x = s ? "txt" : "img";
#define BLOCK(shape, suffix) snprintf(f, sizeof f, "double_blocks.%%d.%s_%s", x, suffix), add(t, shape, f, i)
            BLOCK(FX_SHAPE(3 * d, d), "attn.qkv.weight");
            BLOCK(FX_SHAPE(hd), "attn.norm.query_norm.scale");
            BLOCK(FX_SHAPE(hd), "attn.norm.key_norm.scale");
            BLOCK(FX_SHAPE(d, d), "attn.proj.weight");
            BLOCK(FX_SHAPE(2 * m, d), "mlp.0.weight");
            BLOCK(FX_SHAPE(d, m), "mlp.2.weight");
#undef BLOCK
        }
    for (int j = 0; j < ns; j++) {
        add(t, FX_SHAPE(3 * d + 2 * m, d), "single_blocks.%d.linear1.weight", j);
        add(t, FX_SHAPE(d, d + m), "single_blocks.%d.linear2.weight", j);
        add(t, FX_SHAPE(hd), "single_blocks.%d.norm.query_norm.scale", j);
        add(t, FX_SHAPE(hd), "single_blocks.%d.norm.key_norm.scale", j);
    }
    add(t, FX_SHAPE(2 * d, d), "final_layer.adaLN_modulation.1.weight", 0);
    add(t, FX_SHAPE(128, d), "final_layer.linear.weight", 0);
}

/* Qwen3 with Hugging Face names, all 36 layers. */
static void qwen3(entries *t, int64_t h, int64_t ff, int heads, int kv, int64_t hd, int tied) {
    memset(t, 0, sizeof *t);
    add(t, FX_SHAPE(151936, h), "model.embed_tokens.weight", 0);
    for (int n = 0; n < 36; n++) {
        add(t, FX_SHAPE(h), "model.layers.%d.input_layernorm.weight", n);
        add(t, FX_SHAPE(heads * hd, h), "model.layers.%d.self_attn.q_proj.weight", n);
        add(t, FX_SHAPE(kv * hd, h), "model.layers.%d.self_attn.k_proj.weight", n);
        add(t, FX_SHAPE(kv * hd, h), "model.layers.%d.self_attn.v_proj.weight", n);
        add(t, FX_SHAPE(h, heads * hd), "model.layers.%d.self_attn.o_proj.weight", n);
        add(t, FX_SHAPE(hd), "model.layers.%d.self_attn.q_norm.weight", n);
        add(t, FX_SHAPE(hd), "model.layers.%d.self_attn.k_norm.weight", n);
        add(t, FX_SHAPE(h), "model.layers.%d.post_attention_layernorm.weight", n);
        add(t, FX_SHAPE(ff, h), "model.layers.%d.mlp.gate_proj.weight", n);
        add(t, FX_SHAPE(ff, h), "model.layers.%d.mlp.up_proj.weight", n);
        add(t, FX_SHAPE(h, ff), "model.layers.%d.mlp.down_proj.weight", n);
    }
    add(t, FX_SHAPE(h), "model.norm.weight", 0);
    if (!tied) add(t, FX_SHAPE(151936, h), "lm_head.weight", 0);
}

typedef struct published {
    const char *name;
    int64_t d, hd, m;
    int nd, ns;
    int64_t te_h, te_ff;
    int te_tied;
} published;

static void check_geometry(const published *p) {
    static entries t; /* large: not on the stack */
    fx_err err = {0};
    char file[64];
    snprintf(file, sizeof file, "%s-transformer.safetensors", p->name);
    bfl_transformer(&t, p->d, p->hd, p->m, p->nd, p->ns, 3 * p->te_h);
    const char *tp = write_sparse(file, &t, NULL, 0);
    REQUIRE(tp);
    fx_wset *w = fx_single_file_open(tp, 1, NULL, NULL, &err);
    REQUIRE_MSG(w, "%s", err.msg);
    fx_dit_config c;
    REQUIRE_MSG(fx_dit_config_derive(w, &c, &err) == FLUX_OK, "%s", err.msg);
    CHECK_MSG(fx_check_dit_weights(w, &c, &err) == FLUX_OK, "%s: %s", p->name, err.msg);
    CHECK(c.in_channels == 128 && c.out_channels == 128 && c.patch_size == 1);
    CHECK(c.double_blocks == p->nd && c.single_blocks == p->ns);
    CHECK(c.hidden == p->d && c.head_dim == 128 && c.heads == p->d / 128);
    CHECK(c.mlp_hidden == p->m && c.mlp_ratio == 3.0);
    CHECK(c.text_dim == 3 * p->te_h && c.timestep_dim == 256);
    for (int i = 0; i < 4; i++) CHECK_MSG(c.axes_dims[i] == 32, "axes_dims_rope[%d] = %d", i, c.axes_dims[i]);
    CHECK(c.rope_theta == 2000.0 && c.eps == 1e-6f);
    fx_wset_close(w);

    snprintf(file, sizeof file, "%s-text-encoder.safetensors", p->name);
    qwen3(&t, p->te_h, p->te_ff, 32, 8, 128, p->te_tied);
    const char *qp = write_sparse(file, &t, NULL, 0);
    REQUIRE(qp);
    REQUIRE_MSG((w = fx_qwen3_file_open(qp, -1, NULL, &err)), "%s", err.msg);
    fx_qwen3_config q;
    REQUIRE_MSG(fx_qwen3_config_derive(w, &q, &err) == FLUX_OK, "%s", err.msg);
    CHECK_MSG(fx_check_qwen3_weights(w, &q, &err) == FLUX_OK, "%s: %s", p->name, err.msg);
    CHECK(q.hidden == p->te_h && q.intermediate == p->te_ff && q.layers == 36 && q.layers_used == 27);
    CHECK(q.heads == 32 && q.kv_heads == 8 && q.head_dim == 128 && q.vocab == 151936);
    CHECK(q.rope_theta == 1e6 && q.rms_eps == 1e-6f && q.max_position_embeddings == 40960);
    CHECK(q.tie_word_embeddings == p->te_tied);
    fx_wset_close(w);
}

TEST(config_derive_klein_4b_and_9b_shapes) {
    /* 4B: 5 + 20 blocks, d 3072, MLP 9216; Qwen3-4B 2560 / 9728, tied.
     * 9B: 8 + 24 blocks, d 4096, MLP 12288; Qwen3-8B 4096 / 12288, untied. */
    static const published models[] = {
        {"klein-4b", 3072, 128, 9216, 5, 20, 2560, 9728, 1},
        {"klein-9b", 4096, 128, 12288, 8, 24, 4096, 12288, 0},
    };
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) check_geometry(&models[i]);
}

/* A file's __metadata__ says base; the folder says distilled: the file wins,
 * and the reason names the key. */
TEST(config_derive_variant_from_safetensors_metadata) {
    static entries t;
    bfl_transformer(&t, 64, 32, 192, 1, 1, 48);
    static const char *const meta[] = {"modelspec.title", "FLUX.2 [klein] Base 4B"};
    static const char *const meta2[] = {"is_distilled", "true"};
    const char *p = write_sparse("flux-2-klein-4b.safetensors", &t, meta, 1);
    REQUIRE(p);
    fx_err err = {0};
    fx_wset *w = fx_single_file_open(p, 1, NULL, NULL, &err);
    REQUIRE_MSG(w, "%s", err.msg);
    int distilled = -1;
    char why[200];
    fx_variant_decide(-1, 1, w, p, NULL, &distilled, why, sizeof why);
    CHECK(distilled == 0);
    CHECK_MSG(strstr(why, "modelspec.title"), "%s", why);
    fx_variant_decide(1, 1, w, p, NULL, &distilled, why, sizeof why); /* --distilled wins */
    CHECK(distilled == 1);
    fx_wset_close(w);

    const char *p2 = write_sparse("flux-2-klein-base-4b.safetensors", &t, meta2, 1);
    REQUIRE(p2);
    REQUIRE_MSG((w = fx_single_file_open(p2, 1, NULL, NULL, &err)), "%s", err.msg);
    fx_variant_decide(-1, -1, w, p2, NULL, &distilled, why, sizeof why); /* metadata over the file name */
    CHECK(distilled == 1);
    CHECK_MSG(strstr(why, "is_distilled = true"), "%s", why);
    fx_wset_close(w);
}
